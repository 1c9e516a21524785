//! Fetching with an SSRF guard and limits, and main-content extraction to Markdown.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub mod charset;
pub mod extract;
pub mod fetch;
pub mod guard;
pub mod metric;
pub mod nesting;
pub mod pdf;
pub mod pdf_sandbox;
pub mod pdf_streams;
pub mod politeness;
pub mod robots;
pub mod truncate;

pub use extract::{Extracted, extract_markdown};
pub use fetch::{Document, FetchPolicy, FetchShared, HttpFetcher};
pub use politeness::{HostLimiter, HostLimits};
pub use robots::RobotsCache;
pub use truncate::{Truncated, truncate_head, truncate_page};

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
    /// The site's robots.txt does not allow Quarry to fetch the URL (or could not be read).
    #[error("robots.txt at {robots_url} does not allow fetching {url}: {reason}")]
    RobotsDisallowed {
        /// The URL that was asked for.
        url: String,
        /// The robots.txt consulted (of the redirect target when a redirect was refused).
        robots_url: String,
        /// The rule or condition that refused it.
        reason: String,
    },
    #[error("fetching {url} failed: {message}")]
    Network { url: String, message: String },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("{url} exceeded the limit: {what}")]
    TooLarge { url: String, what: String },
    #[error("{url} is not a readable document ({content_type})")]
    Unsupported { url: String, content_type: String },
    /// More redirects than the policy allows (a loop, usually).
    #[error("{url} redirected more than {limit} times")]
    Redirects { url: String, limit: u8 },
    /// The whole fetch, redirects included, took longer than the policy allows.
    #[error("fetching {url} timed out after {after:?}")]
    Timeout {
        url: String,
        after: std::time::Duration,
    },
    /// The HTTP client could not be built from the policy.
    #[error("cannot build the HTTP client: {message}")]
    Config { message: String },
    /// Main-content extraction crashed on the page.
    #[error("extracting {url} failed: {message}")]
    Extraction { url: String, message: String },
}

/// The port through which researchers read pages.
#[async_trait]
pub trait Fetcher: Send + Sync {
    /// Fetches one URL and extracts its main content.
    async fn fetch(&self, url: &str) -> Result<Page, FetchError>;
}
