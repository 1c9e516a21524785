//! Fetching with an SSRF guard and limits, and main-content extraction to Markdown.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A fetched page reduced to what a model reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// The URL that was asked for.
    pub url: String,
    /// The URL after redirects.
    pub final_url: String,
    pub title: String,
    /// Main content as Markdown, not yet truncated for a model.
    pub markdown: String,
    /// Bytes received on the wire.
    pub bytes: u64,
}

/// Errors of a fetch.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("refused to fetch {url}: {reason}")]
    Refused { url: String, reason: String },
    #[error("fetching {url} failed: {message}")]
    Network { url: String, message: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} exceeded the limit: {what}")]
    TooLarge { url: String, what: String },
    #[error("{url} is not a readable document ({content_type})")]
    Unsupported { url: String, content_type: String },
}

/// The port through which researchers read pages.
#[async_trait]
pub trait Fetcher: Send + Sync {
    /// Fetches one URL and extracts its main content.
    async fn fetch(&self, url: &str) -> Result<Page, FetchError>;
}
