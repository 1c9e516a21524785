//! Production launcher: builds the engine of a run (model client, gatherer, fetcher, ConfigMap
//! store) and drives it, resuming from the run's checkpoint when one exists (DESIGN §4).

use std::sync::Arc;
use std::time::Duration;

use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{ApiKey, LaunchError, LaunchRequest, Launcher, Starter};
use crate::api::{
    ModelTier, ResearchProfileSpec, SearchTarget, SecretKeyRef, ToolMode as ApiToolMode,
};
use crate::llm::openai::OpenAiClient;
use crate::llm::pricing::Price;
use crate::llm::{ChatModel, ModelConfig, ToolMode};
use crate::research::executor::{self, Engine, EngineSettings, RunObserver};
use crate::research::reducer::Event;
use crate::research::state::{Failure, Phase, RunState};
use crate::scrape::{FetchPolicy, Fetcher, HttpFetcher};
use crate::sources::Gatherer;
use crate::sources::searxng::SearxngGatherer;
use crate::store::ArtifactStore;
use crate::store::configmap::ConfigMapStore;

/// Timeout of one search call.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Launcher that runs the research engine in-process.
pub struct EngineLauncher {
    client: Client,
}

impl EngineLauncher {
    /// A launcher whose stores write through `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The model configuration of one tier, with its key and price from the profile.
pub fn model_config(
    profile: &ResearchProfileSpec,
    tier: &ModelTier,
    api_key: Option<&ApiKey>,
) -> Result<ModelConfig, LaunchError> {
    let price = match profile.price_for(&tier.model) {
        Some(p) => Price::parse(&p.input_usd_per_million, &p.output_usd_per_million)
            .map_err(|e| LaunchError(format!("price of model {}: {e}", tier.model)))?,
        None => Price::FREE,
    };
    Ok(ModelConfig {
        base_url: tier.base_url.clone(),
        model: tier.model.clone(),
        api_key: api_key.map(|k| k.expose().to_string()),
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
        ..ModelConfig::default()
    })
}

fn key_for<'a>(keys: &'a [(SecretKeyRef, ApiKey)], tier: &ModelTier) -> Option<&'a ApiKey> {
    let wanted = tier.api_key_secret_ref.as_ref()?;
    keys.iter().find(|(r, _)| r == wanted).map(|(_, k)| k)
}

/// The search gatherer of a profile. Only an explicit `search.url` is supported for now.
pub fn build_gatherer(profile: &ResearchProfileSpec) -> Result<Arc<dyn Gatherer>, LaunchError> {
    match profile.search_target() {
        SearchTarget::Url(url) => Ok(Arc::new(
            SearxngGatherer::new(url, SEARCH_TIMEOUT)
                .map_err(|e| LaunchError(format!("spec.search.url: {e}")))?,
        )),
        SearchTarget::Engine(name) => Err(LaunchError(format!(
            "spec.search names SearchEngine \"{name}\", which this operator version does not manage yet; set spec.search.url to a SearXNG URL"
        ))),
    }
}

/// The page fetcher of a profile, honouring its fetch policy (allow-list, denied domains, size).
pub fn build_fetcher(profile: &ResearchProfileSpec) -> Result<Arc<dyn Fetcher>, LaunchError> {
    let fetch = &profile.fetch;
    let defaults = FetchPolicy::default();
    let policy = FetchPolicy {
        allowed_hosts: fetch.allowed_hosts.clone(),
        denied_domains: fetch.denied_domains.clone(),
        max_bytes: fetch.max_page_bytes,
        // Decompressed pages may be larger than on the wire, but stay bounded.
        max_decompressed_bytes: fetch
            .max_page_bytes
            .saturating_mul(4)
            .max(defaults.max_decompressed_bytes),
        ..defaults
    };
    let fetcher = HttpFetcher::new(policy).map_err(|e| LaunchError(format!("spec.fetch: {e}")))?;
    Ok(Arc::new(fetcher))
}

/// Builds the engine of one run: the primary model (fallback tiers are the router's job, later),
/// the gatherer, the fetcher and the given store.
pub fn build_engine(
    profile: &ResearchProfileSpec,
    api_keys: &[(SecretKeyRef, ApiKey)],
    store: Arc<dyn ArtifactStore>,
) -> Result<Engine, LaunchError> {
    let primary = &profile.models.primary;
    let config = model_config(profile, primary, key_for(api_keys, primary))?;
    let model: Arc<dyn ChatModel> = Arc::new(
        OpenAiClient::new(config).map_err(|e| LaunchError(format!("models.primary: {e}")))?,
    );
    let mut settings = EngineSettings::default();
    settings.researcher.page_chars = profile.fetch.page_chars_for_model as usize;
    if let Some(cap) = primary.max_output_tokens {
        settings.researcher.max_output_tokens = cap;
    }
    Ok(Engine {
        model,
        gatherer: build_gatherer(profile)?,
        fetcher: build_fetcher(profile)?,
        store,
        settings,
    })
}

/// Forwards every engine state to the run's status writer (which coalesces them).
struct ProgressObserver(Arc<watch::Sender<Option<RunState>>>);

impl RunObserver for ProgressObserver {
    fn on_change(&self, state: &RunState, _event: &Event) {
        self.0.send_replace(Some(state.clone()));
    }
}

impl Launcher for EngineLauncher {
    fn prepare(&self, request: LaunchRequest) -> Result<Starter, LaunchError> {
        let run = &request.run;
        let namespace = run
            .namespace()
            .ok_or_else(|| LaunchError("the run has no namespace".into()))?;
        let owner = run
            .controller_owner_ref(&())
            .ok_or_else(|| LaunchError("the run has no UID yet".into()))?;
        let store: Arc<dyn ArtifactStore> = Arc::new(ConfigMapStore::new(
            self.client.clone(),
            &namespace,
            &run.name_any(),
            owner,
        ));
        let engine = Arc::new(build_engine(
            &request.profile,
            &request.api_keys,
            store.clone(),
        )?);
        let input = request.input.clone();
        let name = run.name_any();
        Ok(Box::new(move |control, progress| {
            Box::pin(async move {
                // Resume from the last checkpoint: finished work is never redone.
                let state = match executor::load_checkpoint(store.as_ref()).await {
                    Ok(Some(state)) => {
                        info!(run = %name, phase = %state.phase, "resuming from checkpoint");
                        state
                    }
                    Ok(None) => RunState::new(input),
                    Err(e) => {
                        warn!(run = %name, error = %e, "checkpoint unreadable");
                        let mut state = RunState::new(input);
                        state.phase = Phase::Failed;
                        state.failure = Some(Failure::new(
                            "CheckpointUnreadable",
                            format!("the run's checkpoint could not be read: {e}"),
                        ));
                        return state;
                    }
                };
                if state.phase.is_terminal() {
                    return state;
                }
                // Launching means spec.suspend is false: a checkpoint taken while suspended is
                // resumed. Nothing is in flight in a restored state, so clearing the flag before
                // the engine's Recover equals its Resume.
                let mut state = state;
                state.suspended = false;
                executor::run(engine, state, Arc::new(ProgressObserver(progress)), control).await
            })
        }))
    }
}
