//! Builds an engine from a ResearchProfile: the one place where profile settings become
//! model clients, gatherers, fetchers and engine settings, for the operator and the CLI alike.

pub mod sources;

use std::sync::Arc;
use std::time::Duration;

use quarry_api::{
    ModelTier, Provider, ResearchProfileSpec, SearchTarget, SecretKeyRef, TierName,
    ToolMode as ApiToolMode,
};
use quarry_engine::cache::{
    Cache, CacheObserver, CachedFetcher, CachedGatherer, DEFAULT_PAGE_TTL, DEFAULT_SEARCH_TTL,
    Lookup, MemoryCache,
};
use quarry_engine::egress::EgressPolicy;
use quarry_engine::llm::anthropic::AnthropicClient;
use quarry_engine::llm::breaker::BreakerSettings;
use quarry_engine::llm::limiter::{RateLimits, endpoint_with};
use quarry_engine::llm::openai::OpenAiClient;
use quarry_engine::llm::pricing::Price;
use quarry_engine::llm::router::SourceRecord;
use quarry_engine::llm::router::{Role, Router, SpendGuard, Tier};
use quarry_engine::llm::{ChatModel, ModelConfig, ToolMode};
use quarry_engine::research::agents::settings::EngineSettings;
use quarry_engine::research::machine::state::{Limits, MAX_EXTRA_ROUNDS, TARGET_ROUNDS};
use quarry_engine::research::shell::executor::Engine;
use quarry_engine::scrape::{FetchError, FetchPolicy, FetchShared, Fetcher, HttpFetcher, Page};
use quarry_engine::sources::failover::{Backend, FailoverGatherer};
use quarry_engine::sources::health::HealthBook;
use quarry_engine::sources::searxng::SearxngGatherer;
use quarry_engine::sources::{Gatherer, SearchHit, SourceError};
use quarry_engine::store::ArtifactStore;
use quarry_engine::telemetry::Metrics;
use quarry_engine::telemetry::RunMetrics;

/// An API key read from a Secret. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The key value, for the model client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

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
        None => quarry_engine::llm::pricing::default_prices()
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

/// The fetch policy of a profile under the process's egress policy.
pub fn fetch_policy(profile: &ResearchProfileSpec) -> FetchPolicy {
    fetch_policy_under(profile, quarry_engine::egress::installed())
}

/// The fetch policy of a profile: its `allowedHosts` lift the address guard only for hosts the
/// operator's egress policy exempts (a profile narrows the exemptions, never widens them);
/// without a policy (library use) they are taken as given.
pub fn fetch_policy_under(
    profile: &ResearchProfileSpec,
    egress: Option<&EgressPolicy>,
) -> FetchPolicy {
    let defaults = FetchPolicy::default();
    let allowed_hosts = match egress {
        Some(policy) => policy.narrow(&profile.fetch.allowed_hosts),
        None => profile.fetch.allowed_hosts.clone(),
    };
    FetchPolicy {
        allowed_hosts,
        allowed_domains: profile.fetch.allowed_domains.clone(),
        denied_domains: profile.fetch.denied_domains.clone(),
        respect_robots: profile.fetch.respect_robots,
        per_host_concurrency: profile.fetch.per_host_concurrency as usize,
        politeness_delay: Duration::from_millis(profile.fetch.politeness_delay_millis.into()),
        max_bytes: profile.fetch.max_page_bytes,
        max_decompressed_bytes: defaults
            .max_decompressed_bytes
            .max(profile.fetch.max_page_bytes * 2),
        ..defaults
    }
}

/// Services shared by every run of the process: the search/page cache (Redis or memory), the
/// SearXNG engine health book, and operator metrics for both.
#[derive(Clone)]
pub struct Services {
    /// Cache of search answers and page extracts.
    pub cache: Arc<dyn Cache>,
    /// Engine health of every SearXNG backend.
    pub health: Arc<HealthBook>,
    /// How long a search answer is reused.
    pub search_ttl: Duration,
    /// How long a page extract is reused.
    pub page_ttl: Duration,
    /// Operator-wide metrics (failover, breakers, cache, engine health).
    pub metrics: Option<Metrics>,
}

impl Services {
    /// Services over `cache`; with `metrics`, engine health changes are exported as gauges.
    pub fn new(cache: Arc<dyn Cache>, metrics: Option<Metrics>) -> Self {
        let health = Arc::new(HealthBook::new());
        if let Some(m) = metrics.clone() {
            health.set_listener(Arc::new(move |backend, engine, record| {
                m.set_engine_state(backend, engine, record.state.as_str());
            }));
        }
        Self {
            cache,
            health,
            search_ttl: DEFAULT_SEARCH_TTL,
            page_ttl: DEFAULT_PAGE_TTL,
            metrics,
        }
    }

    /// Private in-memory services (a standalone run, a test).
    pub fn in_memory() -> Self {
        Self::new(Arc::new(MemoryCache::default()), None)
    }
}

/// Where a profile's managed SearchEngine answers, resolved by the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedSearch {
    /// Health-book key (`namespace/name`).
    pub backend: String,
    /// Base URL of its Service.
    pub url: String,
}

/// What a run's engine is built from besides the profile: keys, shared services, the resolved
/// managed search engine.
pub struct Inputs<'a> {
    /// The API key of a model tier.
    pub api_key: &'a dyn Fn(&ModelTier) -> Option<String>,
    /// The value a Secret reference points to (search provider keys).
    pub secret: &'a dyn Fn(&SecretKeyRef) -> Option<String>,
    /// Process-wide services.
    pub services: &'a Services,
    /// The managed SearchEngine, when the profile names one.
    pub managed_search: Option<ManagedSearch>,
    /// Which specialised tools the run asks for (security, Stack Exchange); `None`: all the
    /// profile configures.
    pub specialised_filter: Option<(bool, bool)>,
}

/// The SearXNG backend of a profile: its health-book key and gatherer.
fn searxng_backend(
    profile: &ResearchProfileSpec,
    inputs: &Inputs<'_>,
) -> Result<(String, SearxngGatherer), WiringError> {
    let (backend, url, field, managed) = match profile.search_target() {
        SearchTarget::Url(url) => (url.to_string(), url.to_string(), "spec.search.url", false),
        SearchTarget::Engine(name) => match &inputs.managed_search {
            Some(m) => (
                m.backend.clone(),
                m.url.clone(),
                "spec.search.searchEngineRef",
                true,
            ),
            None => {
                return Err(err(
                    "spec.search.searchEngineRef",
                    format!(
                        "SearchEngine \"{name}\" is managed by the operator; outside a cluster set spec.search.url to a SearXNG URL"
                    ),
                ));
            }
        },
    };
    let gatherer = if managed {
        SearxngGatherer::operator_managed(&url, SEARCH_TIMEOUT)
    } else {
        SearxngGatherer::new(&url, SEARCH_TIMEOUT)
    };
    let gatherer = gatherer
        .map_err(|e| err(field, e.to_string()))?
        .with_health(inputs.services.health.clone(), backend.clone());
    Ok((backend, gatherer))
}

/// The gatherer of a profile: SearXNG, then the configured API providers, behind one cache.
pub fn search_chain(
    profile: &ResearchProfileSpec,
    inputs: &Inputs<'_>,
) -> Result<(String, Arc<dyn Gatherer>), WiringError> {
    let (_, searxng) = searxng_backend(profile, inputs)?;
    let mut backends = vec![Backend {
        name: "searxng".into(),
        breaker_key: format!("searxng {}", searxng.search_url()),
        gatherer: Arc::new(searxng),
    }];
    backends.extend(provider_backends(profile, inputs)?);
    let chain_id = backends
        .iter()
        .map(|b| b.breaker_key.as_str())
        .collect::<Vec<_>>()
        .join(" | ");
    let mut failover = FailoverGatherer::new(backends);
    if let Some(m) = &inputs.services.metrics {
        failover = failover.with_observer(Arc::new(m.clone()));
    }
    Ok((chain_id, Arc::new(failover)))
}

/// The API search providers a profile configures, in order (Brave, Tavily, Serper clients).
fn provider_backends(
    profile: &ResearchProfileSpec,
    inputs: &Inputs<'_>,
) -> Result<Vec<Backend>, WiringError> {
    let specs = profile.search_providers();
    let built = sources::provider_configs(specs, inputs.secret)
        .and_then(quarry_engine::sources::providers::build_providers)
        .map_err(|e| err("spec.search.providers", e.to_string()))?;
    Ok(built
        .into_iter()
        .zip(specs)
        .map(|((name, gatherer), spec)| Backend {
            // One breaker per provider endpoint, shared by every run using it.
            breaker_key: format!("{name} {}", spec.base_url.as_deref().unwrap_or("default")),
            name,
            gatherer,
        })
        .collect())
}

/// The specialised tools (security advisories, Stack Exchange) a profile opts into with
/// `search.sources`, narrowed to what the run asks for.
fn specialised(
    profile: &ResearchProfileSpec,
    inputs: &Inputs<'_>,
) -> Result<Option<Arc<quarry_engine::sources::SpecialisedSources>>, WiringError> {
    // Opt-in per profile: these tools send queries to public third-party APIs, which an
    // operator should choose knowingly (and egress policies must allow).
    let Some(spec) = profile.sources() else {
        return Ok(None);
    };
    let mut built = sources::specialised_sources(Some(spec), inputs.secret)
        .map_err(|e| err("spec.search.sources", e.to_string()))?;
    if let Some((security, stackexchange)) = inputs.specialised_filter {
        built = built.only(security, stackexchange);
    }
    Ok((!built.is_empty()).then(|| Arc::new(built)))
}

/// The searx/SearXNG gatherer of a profile with an external URL (no providers, no cache).
pub fn gatherer(profile: &ResearchProfileSpec) -> Result<Arc<dyn Gatherer>, WiringError> {
    let services = Services::in_memory();
    let inputs = Inputs {
        api_key: &|_| None,
        secret: &|_| None,
        services: &services,
        managed_search: None,
        specialised_filter: None,
    };
    Ok(Arc::new(searxng_backend(profile, &inputs)?.1))
}

/// Identity of a fetch policy for page cache keys: a page read under one policy is never served
/// to a profile whose policy differs.
pub fn fetch_policy_id(profile: &ResearchProfileSpec) -> String {
    let text = serde_json::to_string(&profile.fetch).unwrap_or_default();
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(text.as_bytes()))
}

/// Records every cache lookup of a run in its provenance log and the cache metrics.
struct LookupRecorder {
    spend: Arc<SpendGuard>,
    backend: &'static str,
    metrics: Option<Metrics>,
}

impl CacheObserver for LookupRecorder {
    fn on_lookup(&self, lookup: &Lookup) {
        self.spend.log_source(SourceRecord {
            time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            kind: if lookup.kind == "page" {
                "fetch"
            } else {
                "search"
            },
            subject: lookup.subject.chars().take(2048).collect(),
            cache: lookup.cache,
            outcome: lookup.outcome,
            duration_ms: lookup.duration.as_millis() as u64,
            task: quarry_engine::llm::router::current_task(),
        });
        if let Some(m) = &self.metrics {
            m.cache_lookup(lookup.kind, self.backend, lookup.cache);
        }
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
pub fn limits(effective: &quarry_api::EffectiveLimits) -> Limits {
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
) -> Result<Arc<dyn ChatModel>, quarry_engine::llm::LlmError> {
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

/// The API key of a tier among keys resolved from Secrets.
fn key_for<'a>(keys: &'a [(SecretKeyRef, ApiKey)], tier: &ModelTier) -> Option<&'a ApiKey> {
    let wanted = tier.api_key_secret_ref.as_ref()?;
    keys.iter().find(|(r, _)| r == wanted).map(|(_, k)| k)
}

/// [`build_engine_with`] from keys resolved from the profile's Secrets (the operator's
/// launcher and `quarry worker` alike): the managed SearchEngine when the profile names one, and
/// the specialised tools the run asks for.
pub fn build_engine_from_keys(
    profile: &ResearchProfileSpec,
    api_keys: &[(SecretKeyRef, ApiKey)],
    services: &Services,
    managed_search: Option<ManagedSearch>,
    specialised_filter: Option<(bool, bool)>,
    store: Arc<dyn ArtifactStore>,
    metrics: Option<RunMetrics>,
) -> Result<Engine, WiringError> {
    let key = |tier: &ModelTier| key_for(api_keys, tier).map(|k| k.expose().to_string());
    let secret = |wanted: &SecretKeyRef| {
        api_keys
            .iter()
            .find(|(r, _)| r == wanted)
            .map(|(_, k)| k.expose().to_string())
    };
    let inputs = Inputs {
        api_key: &key,
        secret: &secret,
        services,
        managed_search,
        specialised_filter,
    };
    build_engine_with(profile, &inputs, store, metrics)
}

/// Builds the engine of a run with private in-memory services and an external search URL: a
/// router over every model tier of the profile (keys from `api_key`), the gatherer, the guarded
/// fetcher and the given store.
pub fn build_engine(
    profile: &ResearchProfileSpec,
    api_key: &dyn Fn(&ModelTier) -> Option<String>,
    store: Arc<dyn ArtifactStore>,
    metrics: Option<RunMetrics>,
) -> Result<Engine, WiringError> {
    let services = Services::new(
        Arc::new(MemoryCache::default()),
        metrics.as_ref().map(|m| m.metrics().clone()),
    );
    let inputs = Inputs {
        api_key,
        secret: &|_| None,
        services: &services,
        managed_search: None,
        specialised_filter: None,
    };
    build_engine_with(profile, &inputs, store, metrics)
}

/// Builds the engine of a run from `inputs` (keys, shared services, managed search engine).
pub fn build_engine_with(
    profile: &ResearchProfileSpec,
    inputs: &Inputs<'_>,
    store: Arc<dyn ArtifactStore>,
    metrics: Option<RunMetrics>,
) -> Result<Engine, WiringError> {
    let api_key = inputs.api_key;
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
    // The planner's last resort after an unusable agenda: the budget tier on its own.
    let budget_model: Option<Arc<dyn ChatModel>> = match &profile.models.budget {
        Some(spec) => Some(
            client(spec.provider, model_config(profile, spec, api_key(spec))?)
                .map_err(|e| err("spec.models.budget", e.to_string()))?,
        ),
        None => None,
    };
    let mut router = Router::new(primary, fallback, budget, roles, spend.clone());
    let recorder = Arc::new(LookupRecorder {
        spend: spend.clone(),
        backend: inputs.services.cache.backend(),
        metrics: inputs.services.metrics.clone(),
    });
    // Process-wide per-host limiter and robots.txt cache: concurrent runs are polite together.
    let http: Arc<dyn Fetcher> = Arc::new(
        HttpFetcher::with_shared(fetch_policy(profile), FetchShared::process())
            .map_err(|e| err("spec.fetch", e.to_string()))?,
    );
    let mut fetcher: Arc<dyn Fetcher> = Arc::new(
        CachedFetcher::new(
            http,
            inputs.services.cache.clone(),
            fetch_policy_id(profile),
            inputs.services.page_ttl,
        )
        .with_observer(recorder.clone()),
    );
    let (chain_id, chain) = search_chain(profile, inputs)?;
    let mut gatherer: Arc<dyn Gatherer> = Arc::new(
        CachedGatherer::new(
            chain,
            inputs.services.cache.clone(),
            chain_id,
            inputs.services.search_ttl,
        )
        .with_observer(recorder),
    );
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
        // Specialised sources are wired with the search failover (`sources::specialised_sources`).
        specialised: specialised(profile, inputs)?,
        fetcher,
        store,
        settings: engine_settings(profile),
        dispatch: None,
    })
}

#[cfg(test)]
mod tests;
