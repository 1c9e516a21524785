//! Gatherers: SearXNG and (later) specialised sources, behind the `Gatherer` port.

pub mod failover;
pub mod health;
pub mod searxng;

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
}

/// The port through which researchers search.
#[async_trait]
pub trait Gatherer: Send + Sync {
    /// Runs one query and returns at most `limit` hits, best first.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError>;
}
