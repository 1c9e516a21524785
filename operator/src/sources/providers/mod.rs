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
use crate::api::{SearchProvider, SearchProviderKind, SecretKeyRef};

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

/// Builds the provider clients of a profile, in its order, named by kind. `key` resolves a
/// Secret reference to its value (the caller reads Secrets); a missing key is an error naming
/// the Secret, so the profile can be marked not ready.
pub fn build_providers(
    spec: &[SearchProvider],
    key: &dyn Fn(&SecretKeyRef) -> Option<String>,
) -> Result<NamedGatherers, SourceError> {
    spec.iter()
        .map(|p| {
            let name = p.kind.as_str();
            let r = &p.api_key_secret_ref;
            let value = key(r).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                SourceError::Config(format!(
                    "search provider {name}: key {:?} of Secret {:?} is missing or empty",
                    r.key, r.name
                ))
            })?;
            let mut config = ProviderConfig::new(Secret::new(value));
            config.base_url = p.base_url.clone();
            config.requests_per_minute = p.requests_per_minute;
            let gatherer: Arc<dyn Gatherer> = match p.kind {
                SearchProviderKind::Brave => Arc::new(BraveGatherer::new(config)?),
                SearchProviderKind::Tavily => Arc::new(TavilyGatherer::new(config)?),
                SearchProviderKind::Serper => Arc::new(SerperGatherer::new(config)?),
            };
            Ok((name.to_string(), gatherer))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn providers_are_built_in_order_and_missing_keys_name_the_secret() {
        let spec: Vec<SearchProvider> = serde_yaml::from_str(
            "- {kind: tavily, apiKeySecretRef: {name: search-keys, key: tavily}, requestsPerMinute: 30}\n\
             - {kind: brave, apiKeySecretRef: {name: search-keys, key: brave}, baseURL: 'http://127.0.0.1:9/'}\n\
             - {kind: serper, apiKeySecretRef: {name: search-keys, key: serper}}\n",
        )
        .unwrap();
        let all = |r: &SecretKeyRef| Some(format!("key-{}", r.key));
        let built = build_providers(&spec, &all).unwrap();
        assert_eq!(
            built.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
            vec!["tavily", "brave", "serper"]
        );
        let none = |r: &SecretKeyRef| (r.key != "brave").then(|| "k".to_string());
        let err = build_providers(&spec, &none).err().unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("brave") && msg.contains("search-keys"),
            "{msg}"
        );
        assert!(build_providers(&[], &none).unwrap().is_empty());
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let config = ProviderConfig::new(Secret::new("sk-very-secret"));
        let brave = BraveGatherer::new(config.clone()).unwrap();
        let tavily = TavilyGatherer::new(config.clone()).unwrap();
        let serper = SerperGatherer::new(config.clone()).unwrap();
        let shown = format!("{config:?} {brave:?} {tavily:?} {serper:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(matches!(
            BraveGatherer::new(ProviderConfig::new(Secret::new(" "))),
            Err(SourceError::Config(_))
        ));
    }
}
