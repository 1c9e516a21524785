//! Builds an engine from a ResearchProfile: the one place where profile settings become
//! model clients, gatherers, fetchers and engine settings, for the operator and the CLI alike.

use std::sync::Arc;
use std::time::Duration;

use crate::api::{
    ModelTier, Provider, ResearchProfileSpec, SearchTarget, TierName, ToolMode as ApiToolMode,
};
use crate::llm::anthropic::AnthropicClient;
use crate::llm::breaker::BreakerSettings;
use crate::llm::limiter::{RateLimits, endpoint_with};
use crate::llm::openai::OpenAiClient;
use crate::llm::pricing::Price;
use crate::llm::router::{Role, Router, SpendGuard, Tier};
use crate::llm::{ChatModel, ModelConfig, ToolMode};
use crate::research::executor::{Engine, EngineSettings};
use crate::research::state::{Limits, MAX_EXTRA_ROUNDS, TARGET_ROUNDS};
use crate::scrape::{FetchError, FetchPolicy, Fetcher, HttpFetcher, Page};
use crate::sources::searxng::SearxngGatherer;
use crate::sources::{Gatherer, SearchHit, SourceError};
use crate::store::ArtifactStore;
use crate::telemetry::RunMetrics;

/// Timeout of one search call.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A profile that cannot be turned into an engine; the message names the offending field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{field}: {message}")]
pub struct WiringError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> WiringError {
    WiringError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// The model configuration of one tier with its key and its price from the profile's table.
pub fn model_config(
    profile: &ResearchProfileSpec,
    tier: &ModelTier,
    api_key: Option<String>,
) -> Result<ModelConfig, WiringError> {
    let price = match profile.price_for(&tier.model) {
        Some(p) => {
            let price = Price::parse(&p.input_usd_per_million, &p.output_usd_per_million);
            match &p.cached_input_usd_per_million {
                Some(cached) => price.and_then(|price| price.with_cached_input(cached)),
                None => price,
            }
            .map_err(|e| err("spec.prices", format!("price of model {}: {e}", tier.model)))?
        }
        // Not in the profile: the shipped list prices, else free (local models).
        None => crate::llm::pricing::default_prices()
            .get(&tier.model)
            .unwrap_or(Price::FREE),
    };
    Ok(ModelConfig {
        base_url: tier.base_url.trim_end_matches('/').to_string(),
        model: tier.model.clone(),
        api_key,
        tool_mode: match tier.tool_mode {
            ApiToolMode::Native => ToolMode::Native,
            ApiToolMode::JsonAction => ToolMode::JsonAction,
        },
        json_mode: tier.json_mode,
        timeout: Duration::from_secs(u64::from(tier.timeout_seconds)),
        context_window: u64::from(tier.context_window),
        price,
        temperature: tier.temperature.map(|t| t as f32),
        stream: tier.stream,
        max_retries: tier
            .max_retries
            .unwrap_or(ModelConfig::default().max_retries),
        azure_api_version: match tier.provider {
            Provider::AzureOpenai => Some(tier.api_version.clone().ok_or_else(|| {
                err(
                    "spec.models",
                    format!(
                        "model {}: provider azureOpenai needs apiVersion",
                        tier.model
                    ),
                )
            })?),
            _ => None,
        },
        ..ModelConfig::default()
    })
}

/// The fetch policy of a profile.
pub fn fetch_policy(profile: &ResearchProfileSpec) -> FetchPolicy {
    let defaults = FetchPolicy::default();
    FetchPolicy {
        allowed_hosts: profile.fetch.allowed_hosts.clone(),
        denied_domains: profile.fetch.denied_domains.clone(),
        max_bytes: profile.fetch.max_page_bytes,
        max_decompressed_bytes: defaults
            .max_decompressed_bytes
            .max(profile.fetch.max_page_bytes * 2),
        ..defaults
    }
}

/// The searx/SearXNG gatherer of a profile.
pub fn gatherer(profile: &ResearchProfileSpec) -> Result<Arc<dyn Gatherer>, WiringError> {
    match profile.search_target() {
        SearchTarget::Url(url) => Ok(Arc::new(
            SearxngGatherer::new(url, SEARCH_TIMEOUT)
                .map_err(|e| err("spec.search.url", e.to_string()))?,
        )),
        SearchTarget::Engine(name) => Err(err(
            "spec.search.searchEngineRef",
            format!(
                "SearchEngine \"{name}\" is not managed by this version yet; set spec.search.url to a SearXNG URL"
            ),
        )),
    }
}

/// Engine settings derived from the profile (page size for the model, output caps).
pub fn engine_settings(profile: &ResearchProfileSpec) -> EngineSettings {
    let mut settings = EngineSettings::default();
    settings.researcher.page_chars = profile.fetch.page_chars_for_model as usize;
    if let Some(evidence) = &profile.evidence {
        settings.model_judge = evidence.model_judge;
        settings.summarize_sources = evidence.summarize_sources;
    }
    if let Some(cap) = profile.models.primary.max_output_tokens {
        settings.researcher.max_output_tokens = cap;
        settings.lead_max_tokens = cap;
        settings.synthesis_max_tokens = cap.max(settings.synthesis_max_tokens.min(cap * 4));
    }
    settings
}

/// Engine limits from validated run limits (micro-USD become pico-USD).
pub fn limits(effective: &crate::api::EffectiveLimits) -> Limits {
    Limits {
        max_concurrent_researchers: effective.max_concurrent_researchers.max(1),
        max_rounds: effective
            .max_rounds
            .unwrap_or(TARGET_ROUNDS + MAX_EXTRA_ROUNDS),
        max_cost_pico_usd: effective
            .max_cost_micro_usd
            .map(|m| m.saturating_mul(1_000_000)),
        max_tokens: effective.max_tokens,
        timeout_secs: effective.timeout.map(|d| d.as_secs().max(1)),
    }
}

/// Counts searches by outcome (`quarry_searches_total`).
struct MeteredGatherer {
    inner: Arc<dyn Gatherer>,
    metrics: RunMetrics,
}

#[async_trait::async_trait]
impl Gatherer for MeteredGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        let result = self.inner.search(query, limit).await;
        self.metrics.search(match &result {
            Ok(hits) if hits.is_empty() => "empty",
            Ok(_) => "ok",
            Err(_) => "error",
        });
        result
    }
}

/// Counts page fetches by outcome (`quarry_fetches_total`).
struct MeteredFetcher {
    inner: Arc<dyn Fetcher>,
    metrics: RunMetrics,
}

#[async_trait::async_trait]
impl Fetcher for MeteredFetcher {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        let result = self.inner.fetch(url).await;
        self.metrics
            .fetch(if result.is_ok() { "ok" } else { "error" });
        result
    }
}

/// The client for a provider kind.
fn client(
    provider: Provider,
    config: ModelConfig,
) -> Result<Arc<dyn ChatModel>, crate::llm::LlmError> {
    Ok(match provider {
        Provider::Anthropic => Arc::new(AnthropicClient::new(config)?),
        Provider::Openai | Provider::AzureOpenai => Arc::new(OpenAiClient::new(config)?),
    })
}

/// One router tier from a profile tier: its client, price and the endpoint's shared state.
fn tier(
    profile: &ResearchProfileSpec,
    name: TierName,
    spec: &ModelTier,
    api_key: Option<String>,
) -> Result<Tier, WiringError> {
    let field = format!("spec.models.{}", name.as_str());
    let config = model_config(profile, spec, api_key)?;
    let price = config.price;
    let model = client(spec.provider, config).map_err(|e| err(&field, e.to_string()))?;
    Ok(Tier {
        name: name.as_str().to_string(),
        model,
        endpoint: endpoint_with(
            &spec.base_url,
            &spec.model,
            RateLimits {
                requests_per_minute: spec.requests_per_minute.map(u64::from),
                tokens_per_minute: spec.tokens_per_minute,
            },
            spec.circuit_breaker
                .map_or_else(BreakerSettings::default, |b| BreakerSettings {
                    failures_to_open: b.failure_threshold,
                    open_for: Duration::from_secs(u64::from(b.open_seconds)),
                    successes_to_close: b.success_threshold,
                }),
        ),
        price,
        provider: url::Url::parse(&spec.base_url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_else(|| "unknown".into()),
        model_name: spec.model.clone(),
    })
}

/// Builds the engine of a run: a router over every model tier of the profile (keys from
/// `api_key`), the gatherer, the guarded fetcher and the given store.
pub fn build_engine(
    profile: &ResearchProfileSpec,
    api_key: &dyn Fn(&ModelTier) -> Option<String>,
    store: Arc<dyn ArtifactStore>,
    metrics: Option<RunMetrics>,
) -> Result<Engine, WiringError> {
    let spend = Arc::new(SpendGuard::default());
    let mut primary = None;
    let mut fallback = None;
    let mut budget = None;
    let mut roles = Vec::new();
    for (name, spec) in profile.models.iter() {
        let t = tier(profile, name, spec, api_key(spec))?;
        match name {
            TierName::Primary => primary = Some(t),
            TierName::Fallback => fallback = Some(t),
            TierName::Budget => budget = Some(t),
            TierName::Planner => roles.push((Role::Planner, t)),
            TierName::Researcher => roles.push((Role::Researcher, t)),
            TierName::Evaluator => roles.push((Role::Evaluator, t)),
            TierName::Summarizer => roles.push((Role::Summarizer, t)),
            TierName::Writer => roles.push((Role::Writer, t)),
        }
    }
    let primary =
        primary.ok_or_else(|| err("spec.models.primary", "a primary model is required"))?;
    // The planner's last resort after an unusable agenda (seed 001): the budget tier on its own.
    let budget_model: Option<Arc<dyn ChatModel>> = match &profile.models.budget {
        Some(spec) => Some(
            client(spec.provider, model_config(profile, spec, api_key(spec))?)
                .map_err(|e| err("spec.models.budget", e.to_string()))?,
        ),
        None => None,
    };
    let mut router = Router::new(primary, fallback, budget, roles, spend.clone());
    let mut fetcher: Arc<dyn Fetcher> = Arc::new(
        HttpFetcher::new(fetch_policy(profile)).map_err(|e| err("spec.fetch", e.to_string()))?,
    );
    let mut gatherer = gatherer(profile)?;
    if let Some(m) = metrics {
        router = router.with_metrics(m.clone());
        gatherer = Arc::new(MeteredGatherer {
            inner: gatherer,
            metrics: m.clone(),
        });
        fetcher = Arc::new(MeteredFetcher {
            inner: fetcher,
            metrics: m,
        });
    }
    let model: Arc<dyn ChatModel> = Arc::new(router);
    Ok(Engine {
        model,
        budget_model,
        spend,
        gatherer,
        // Specialised sources are wired with the search failover (SpecialisedSources::from_spec).
        specialised: None,
        fetcher,
        store,
        settings: engine_settings(profile),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ResearchProfile;

    const PROFILE: &str = r#"
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata: {name: local}
spec:
  models:
    primary: {baseURL: "http://127.0.0.1:8080/v1/", model: qwen, toolMode: jsonAction, timeoutSeconds: 600, contextWindow: 8192, maxOutputTokens: 512}
  prices:
    - {model: qwen, inputUSDPerMillion: "0.10", outputUSDPerMillion: "0.40"}
  search: {url: "http://127.0.0.1:8888"}
  fetch: {allowedHosts: ["127.0.0.1"], pageCharsForModel: 3000, maxPageBytes: 1048576}
"#;

    #[test]
    fn profile_settings_reach_the_engine_parts() {
        let p = ResearchProfile::from_yaml(PROFILE).unwrap();
        let m = model_config(&p.spec, &p.spec.models.primary, Some("k".into())).unwrap();
        assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(m.tool_mode, ToolMode::JsonAction);
        assert_eq!(m.timeout, Duration::from_secs(600));
        assert_eq!(m.price, Price::parse("0.10", "0.40").unwrap());
        let f = fetch_policy(&p.spec);
        assert_eq!(f.allowed_hosts, vec!["127.0.0.1".to_string()]);
        assert_eq!(f.max_bytes, 1_048_576);
        let s = engine_settings(&p.spec);
        assert_eq!(s.researcher.page_chars, 3000);
        assert_eq!(s.researcher.max_output_tokens, 512);
        assert!(gatherer(&p.spec).is_ok());
    }

    #[test]
    fn cost_limits_convert_exactly() {
        let eff = crate::api::RunLimits {
            max_cost_usd: Some("0.25".into()),
            timeout: Some("2m".into()),
            ..Default::default()
        }
        .effective()
        .unwrap();
        let l = limits(&eff);
        assert_eq!(l.max_cost_pico_usd, Some(250_000_000_000));
        assert_eq!(l.timeout_secs, Some(120));
        assert_eq!(l.max_rounds, 3);
    }
}
