//! Gatherers: SearXNG, API search providers and specialised sources, behind the `Gatherer` port.

pub mod failover;
pub mod health;
pub mod http;
pub mod normalize;
pub mod providers;
pub mod ratelimit;
pub mod searxng;
pub mod security;
pub mod specialised;
pub mod stackexchange;

pub use normalize::{canonical_url, normalize_and_dedup};
pub use specialised::{SpecialisedSources, ToolAnswer};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// One search result as the engine sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    pub url: String,
    pub title: String,
    pub snippet: String,
    pub engine: String,
}

/// Errors of a gatherer call.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("search endpoint {endpoint} unreachable: {message}")]
    Unreachable { endpoint: String, message: String },
    #[error("search endpoint answered HTTP {status}")]
    Status { status: u16 },
    #[error("search answer could not be parsed: {0}")]
    Malformed(String),
    /// Every backend of a failover chain failed or was skipped.
    #[error("no search backend answered ({detail})")]
    Exhausted { detail: String },
    /// The provider refused the key (HTTP 401/403): the Secret holds a wrong or expired key.
    #[error(
        "{provider} rejected the API key (HTTP {status}): check the key in the Secret the profile references"
    )]
    Auth { provider: String, status: u16 },
    /// The provider (or this client's own limit) asks to wait before the next call.
    #[error("{provider} is rate limiting requests{}", retry_hint(.retry_after))]
    RateLimited {
        provider: String,
        retry_after: Option<std::time::Duration>,
    },
    /// The provider answered a non-success status other than auth or rate limiting.
    #[error("{provider} answered HTTP {status}")]
    ProviderStatus { provider: String, status: u16 },
    /// The answer was larger than the client reads.
    #[error("{provider} answer exceeds the limit of {limit} bytes")]
    TooLarge { provider: String, limit: usize },
    /// The request was refused as invalid, by the provider or before sending it.
    #[error("{provider} refused the request: {message}")]
    Invalid { provider: String, message: String },
    /// A source could not be built from the profile (bad URL, missing Secret key).
    #[error("search source configuration: {0}")]
    Config(String),
}

impl SourceError {
    /// How long the provider asked to wait, when it said so.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// " (retry after 30s)" when the wait is known; rounded up to whole seconds for people.
fn retry_hint(retry_after: &Option<std::time::Duration>) -> String {
    match retry_after {
        Some(d) => {
            let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
            format!("; retry after {secs}s")
        }
        None => String::new(),
    }
}

/// The port through which researchers search.
#[async_trait]
pub trait Gatherer: Send + Sync {
    /// Runs one query and returns at most `limit` hits, best first.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError>;
}
