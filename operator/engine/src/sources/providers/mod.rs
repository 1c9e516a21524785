//! Clients of commercial search APIs (Brave, Tavily, Serper), each a [`Gatherer`] whose hits are
//! normalised into [`SearchHit`]s like SearXNG's, tried after SearXNG by the caller.

pub mod brave;
pub mod serper;
pub mod tavily;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use url::Url;

use super::http::{self, Answer, HttpSource, Secret};
use super::ratelimit::{RateLimiter, Throttle};
use super::{Gatherer, SourceError};

pub use brave::BraveGatherer;
pub use serper::SerperGatherer;
pub use tavily::TavilyGatherer;

/// Everything a provider client needs; the key is a [`Secret`] so it never shows in `Debug`.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// Base URL; `None` means the provider's public API.
    pub base_url: Option<String>,
    /// The API key.
    pub api_key: Secret,
    /// Bound on one call (connect, send, read).
    pub timeout: Duration,
    /// Client-side limit; `None` means none.
    pub requests_per_minute: Option<u32>,
    /// Cap on one answer body.
    pub max_body_bytes: usize,
}

impl ProviderConfig {
    /// Defaults for everything but the key.
    pub fn new(api_key: Secret) -> Self {
        Self {
            base_url: None,
            api_key,
            timeout: http::DEFAULT_TIMEOUT,
            requests_per_minute: None,
            max_body_bytes: http::DEFAULT_MAX_BODY_BYTES,
        }
    }

    /// Sets the base URL.
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = Some(base_url.into());
        self
    }

    /// Sets the timeout of one call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the client-side rate limit.
    pub fn with_requests_per_minute(mut self, rpm: u32) -> Self {
        self.requests_per_minute = Some(rpm);
        self
    }

    /// Sets the cap on one answer body.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.max_body_bytes = max_body_bytes;
        self
    }
}

/// The HTTP client, endpoint and throttle a provider client is made of.
#[derive(Debug)]
pub(crate) struct ProviderCore {
    pub(crate) http: HttpSource,
    pub(crate) endpoint: Url,
    pub(crate) key: Secret,
    throttle: Throttle,
}

impl ProviderCore {
    /// Builds the core for `provider` posting/getting at `path` under the configured base.
    pub(crate) fn new(
        provider: &'static str,
        default_base: &str,
        path: &str,
        config: ProviderConfig,
    ) -> Result<Self, SourceError> {
        if config.api_key.expose().is_empty() {
            return Err(SourceError::Config(format!(
                "{provider}: the API key is empty"
            )));
        }
        let base = http::base_url(provider, config.base_url.as_deref().unwrap_or(default_base))?;
        let endpoint = http::endpoint(provider, &base, path)?;
        Ok(Self {
            http: HttpSource::new(
                provider,
                config.timeout,
                config.max_body_bytes,
                vec![config.api_key.clone()],
            )?,
            endpoint,
            key: config.api_key,
            throttle: Throttle::new(
                provider,
                config.requests_per_minute.map(RateLimiter::per_minute),
            ),
        })
    }

    /// Sends one request within the rate limit and returns its JSON answer, mapping statuses;
    /// a 429's `Retry-After` blocks further calls until it passes.
    pub(crate) async fn call(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, SourceError> {
        self.throttle.acquire().await?;
        let answer: Answer = self.http.send(request, &self.endpoint).await?;
        if let Err(e) = self.http.check_status(&answer) {
            self.throttle.note(&e);
            return Err(e);
        }
        self.http.json(&answer.body)
    }
}

/// Provider clients by name, in the order they are tried.
pub type NamedGatherers = Vec<(String, Arc<dyn Gatherer>)>;

/// The commercial search APIs Quarry has clients for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// Brave Search API.
    Brave,
    /// Tavily search API.
    Tavily,
    /// Serper (Google results) API.
    Serper,
}

impl ProviderKind {
    /// The provider's name in profiles, metrics and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Brave => "brave",
            Self::Tavily => "tavily",
            Self::Serper => "serper",
        }
    }
}

/// Builds provider clients in the given order, named by kind (the caller has resolved keys).
pub fn build_providers(
    providers: Vec<(ProviderKind, ProviderConfig)>,
) -> Result<NamedGatherers, SourceError> {
    providers
        .into_iter()
        .map(|(kind, config)| {
            let gatherer: Arc<dyn Gatherer> = match kind {
                ProviderKind::Brave => Arc::new(BraveGatherer::new(config)?),
                ProviderKind::Tavily => Arc::new(TavilyGatherer::new(config)?),
                ProviderKind::Serper => Arc::new(SerperGatherer::new(config)?),
            };
            Ok((kind.as_str().to_string(), gatherer))
        })
        .collect()
}

#[cfg(test)]
mod tests;
