//! Starting the operator: its configuration, the clients and services it builds, and the controllers it runs under leader election.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::controller::Controller;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::error::Error;
use crate::leader_election::{self, Fence, Leadership};
use crate::research_run::launcher::EngineLauncher;
use crate::research_run::registry::Registry;
use crate::research_run::{Context, error_policy, reconcile, runs_using_profile};
use crate::server::run_finder::KubeDirectory;
use crate::server::{Readiness, ServerState};
use crate::{schedule, search_engine};
use quarry_api::{ResearchProfile, ResearchRun};
use quarry_engine::telemetry::Metrics;

/// Configuration of `quarry operator` (the binary fills it from its layered settings).
#[derive(Clone)]
pub struct OperatorConfig {
    /// Address of the metrics and health server (`/metrics`, `/livez`, `/readyz`).
    pub listen: String,
    /// Watch only these namespaces, comma-separated (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Redis for the search and page cache shared by replicas (`None`: in-memory).
    pub redis_url: Option<String>,
    /// Operator-wide object store for profiles without `objectStore`; credentials and options
    /// from the operator's environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, filled from a Secret).
    pub object_store_url: Option<String>,
    /// Image repositories a SearchEngine may run (empty: SearXNG's own,
    /// [`search_engine::DEFAULT_ALLOWED_IMAGES`]).
    pub allowed_search_images: Vec<String>,
    /// Leader election: only the Lease holder runs research (`None`: a single replica).
    pub leader: Option<LeaderSettings>,
    /// Scale-out mode: researchers run on `quarry worker` processes through `redis_url`.
    pub workers: bool,
    /// File of the key a run's API keys are sealed with for the workers (required with `workers`).
    pub sealing_key_file: Option<std::path::PathBuf>,
    /// More routes on the same port (the web console), built from the operator's client.
    pub extra_routes: Option<ExtraRoutes>,
}

/// Builds routes served beside `/metrics` from the operator's client and its run event stream
/// (the console lives in the `quarry` crate, which depends on this one).
pub type ExtraRoutes =
    Arc<dyn Fn(Client, Option<crate::server::run_events::EventsApi>) -> axum::Router + Send + Sync>;

impl std::fmt::Debug for OperatorConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorConfig")
            .field("listen", &self.listen)
            .field("namespace", &self.namespace)
            .field("workers", &self.workers)
            .field("extra_routes", &self.extra_routes.is_some())
            .finish_non_exhaustive()
    }
}

/// Leader election settings of `quarry operator`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderSettings {
    /// Lease name.
    pub lease_name: String,
    /// Namespace of the Lease (`None`: the operator's own namespace).
    pub namespace: Option<String>,
    /// Lease duration in seconds: a dead leader is replaced within it.
    pub lease_seconds: u64,
    /// Seconds before expiry the holder renews.
    pub grace_seconds: u64,
}

impl Default for LeaderSettings {
    fn default() -> Self {
        Self {
            lease_name: leader_election::DEFAULT_LEASE_NAME.into(),
            namespace: None,
            lease_seconds: leader_election::DEFAULT_LEASE_SECONDS,
            grace_seconds: leader_election::DEFAULT_GRACE_SECONDS,
        }
    }
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            listen: "0.0.0.0:8080".into(),
            namespace: None,
            redis_url: None,
            leader: Some(LeaderSettings::default()),
            object_store_url: None,
            allowed_search_images: Vec::new(),
            workers: false,
            sealing_key_file: None,
            extra_routes: None,
        }
    }
}

/// The operator-wide object store of `url`; credentials, endpoint and region come from the
/// environment (see [`crate::store::object::ObjectStoreConfig::from_env`]).
pub fn default_object_store(url: &str) -> Result<crate::store::object::ObjectStoreConfig, Error> {
    crate::store::object::parse_url(url)
        .map_err(|e| Error::Config(format!("--object-store-url {url:?}: {e}")))?;
    Ok(crate::store::object::ObjectStoreConfig::from_env(
        url,
        "the operator's --object-store-url",
    ))
}

/// The shared services of an operator or standalone process: Redis cache when a URL is given.
pub fn services(
    redis_url: Option<&str>,
    metrics: Option<Metrics>,
) -> Result<crate::engine_builder::Services, Error> {
    let cache: Arc<dyn quarry_engine::cache::Cache> = match redis_url {
        Some(url) => Arc::new(
            crate::redis::RedisCache::new(url)
                .map_err(|e| Error::Config(format!("redisUrl: {e}")))?,
        ),
        None => Arc::new(quarry_engine::cache::MemoryCache::default()),
    };
    Ok(crate::engine_builder::Services::new(cache, metrics))
}

/// The key scale-out mode seals runs' API keys with for the workers, which hold no API token
/// to read Secrets themselves.
pub fn sealing_key(
    path: Option<&std::path::Path>,
) -> Result<Arc<crate::queue::seal::SealingKey>, Error> {
    use crate::queue::seal::{SEALING_KEY_ENV, SealingKey};
    let path = path.ok_or_else(|| {
        Error::Config(format!(
            "scale-out mode (--workers) needs a sealing key to hand API keys to the workers: pass --sealing-key-file or set {SEALING_KEY_ENV} to a file of at least 32 random bytes, mounted in the workers too (the chart makes one with workers.enabled)"
        ))
    })?;
    let key = SealingKey::load(path)
        .map_err(|e| Error::Config(format!("--sealing-key-file ({SEALING_KEY_ENV}): {e}")))?;
    info!(sealing_key = %key.id(), "scale-out mode: API keys go to workers sealed with this key");
    Ok(Arc::new(key))
}

/// Pure: the watch scopes of a `--namespace` value: one per listed namespace (comma-separated,
/// trimmed, first occurrence kept), or a single all-namespaces scope when none is given.
pub fn watch_scopes(namespace: Option<&str>) -> Vec<Option<String>> {
    let mut scopes: Vec<Option<String>> = Vec::new();
    for ns in namespace.unwrap_or_default().split(',').map(str::trim) {
        let scope = Some(ns.to_owned());
        if !ns.is_empty() && !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    if scopes.is_empty() {
        scopes.push(None);
    }
    scopes
}

/// The live event stream of the process's runs: Redis Streams when Redis is configured (every
/// replica serves every run), else in memory (this process's runs only).
pub fn run_events(
    redis_url: Option<&str>,
    metrics: &Metrics,
) -> Result<Arc<dyn quarry_engine::events::RunEvents>, Error> {
    Ok(match redis_url {
        Some(url) => Arc::new(
            crate::redis::event_stream::RedisEvents::start(
                url,
                crate::redis::event_stream::RedisSettings::default(),
                Some(metrics.clone()),
            )
            .map_err(|e| Error::Config(format!("redisUrl: {e}")))?,
        ),
        None => Arc::new(quarry_engine::events::memory::MemoryEvents::new(
            quarry_engine::events::memory::MemoryLimits::default(),
            Some(metrics.clone()),
        )),
    })
}

/// Runs the operator: the HTTP server and the ResearchRun controller, until SIGINT/SIGTERM.
pub async fn run_operator(config: OperatorConfig) -> Result<(), Error> {
    let client = Client::try_default()
        .await
        .map_err(|e| Error::Config(e.to_string()))?;
    let metrics = Metrics::new();
    metrics.zero_reconcile_errors(&Error::metric_reasons());
    let readiness = Readiness::new();
    let listener = crate::server::bind(&config.listen).await?;
    info!(addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving /metrics, /livez, /readyz and run events");
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let events = run_events(config.redis_url.as_deref(), &metrics)?;
    let directory = Arc::new(KubeDirectory::new(client.clone()));
    let events_api = crate::server::run_events::EventsApi::new(
        events.clone(),
        directory.clone(),
        metrics.clone(),
    )
    .with_auth(Arc::new(crate::server::stream_auth::StreamAuth::new(
        client.clone(),
        crate::server::stream_auth::DEFAULT_MAX_PER_CALLER,
    )));
    let extra = config
        .extra_routes
        .as_ref()
        .map(|build| build(client.clone(), Some(events_api.clone())));
    let server = tokio::spawn(crate::server::serve_with(
        listener,
        extra,
        ServerState {
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            events: Some(events_api),
        },
        async move {
            let _ = server_stop.wait_for(|stop| *stop).await;
        },
    ));
    // Standbys report ready (a rollout must not wait for the lease) but run nothing.
    let mut leadership = match &config.leader {
        Some(settings) => {
            let namespace = settings
                .namespace
                .clone()
                .unwrap_or_else(|| leader_election::operator_namespace(&client));
            let mut lc = leader_election::LeaderConfig::new(namespace.clone());
            lc.lease_name = settings.lease_name.clone();
            lc.lease_seconds = settings.lease_seconds;
            lc.grace_seconds = settings.grace_seconds;
            let owner = leader_election::deployment_owner(&client, &namespace).await;
            info!(lease = %format!("{namespace}/{}", lc.lease_name), identity = %lc.identity, owner = %leader_election::owner_name(&owner), "leader election");
            leader_election::ensure_lease(&client, &lc, owner).await?;
            readiness.set(true);
            let mut leadership = Leadership::start(client.clone(), &lc).await?;
            metrics.set_leader(false);
            tokio::select! {
                acquired = leadership.acquired() => acquired?,
                _ = tokio::signal::ctrl_c() => {
                    let _ = stop_tx.send(true);
                    leadership.release().await;
                    return Ok(());
                }
            }
            metrics.set_leader(true);
            Some(leadership)
        }
        None => None,
    };
    let fence = leadership
        .as_ref()
        .map_or_else(Fence::leading, Leadership::fence);
    let registry = Registry::new();
    let work = run_controllers(
        client,
        config,
        metrics,
        readiness,
        fence,
        registry.clone(),
        (events, directory),
    );
    let result = match leadership.as_mut() {
        Some(l) => {
            let outcome = l
                .lead(work, move || {
                    // Every executor stops at once; the new leader resumes from checkpoints.
                    let aborted = registry.abort_all();
                    warn!(aborted, "leadership lost: research stopped");
                })
                .await;
            match outcome {
                Ok(r) => r,
                Err(e) => {
                    let _ = stop_tx.send(true);
                    return Err(e.into());
                }
            }
        }
        None => work.await,
    };
    let _ = stop_tx.send(true);
    if let Some(l) = leadership {
        l.release().await;
    }
    if let Err(e) = server
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()))
    {
        warn!(error = %e, "server ended abnormally");
    }
    result
}

/// The ResearchRun and SearchEngine controllers of the leader, until SIGINT/SIGTERM. Research
/// tasks go to `registry`, which the caller aborts when the lease is lost.
async fn run_controllers(
    client: Client,
    config: OperatorConfig,
    metrics: Metrics,
    readiness: Readiness,
    fence: Fence,
    registry: Registry,
    (events, directory): (
        Arc<dyn quarry_engine::events::RunEvents>,
        Arc<KubeDirectory>,
    ),
) -> Result<(), Error> {
    let workers = match (config.workers, &config.redis_url) {
        (false, _) => None,
        (true, Some(url)) => Some((
            url.clone(),
            sealing_key(config.sealing_key_file.as_deref())?,
        )),
        (true, None) => {
            return Err(Error::Config(
                "scale-out mode (--workers) needs Redis: pass --redis-url or set QUARRY_REDIS_URL"
                    .into(),
            ));
        }
    };
    let services = services(config.redis_url.as_deref(), Some(metrics.clone()))?;
    let engines_ctx = Arc::new(
        search_engine::EngineContext::new(client.clone(), metrics.clone(), services.health.clone())
            .with_allowed_images(config.allowed_search_images.clone()),
    );
    let scopes = watch_scopes(config.namespace.as_deref());
    let engines: Vec<_> = scopes
        .iter()
        .map(|scope| {
            tokio::spawn(search_engine::run_controller(
                client.clone(),
                scope.clone(),
                engines_ctx.clone(),
            ))
        })
        .collect();
    // Watched namespaces are known: their schedule series exist at zero from the start, so the
    // first decision or change after a (re)start is an increase an alert can see.
    for namespace in scopes.iter().flatten() {
        metrics.zero_schedule_series(namespace);
    }
    let schedules_ctx = Arc::new(schedule::ScheduleContext::new(
        client.clone(),
        metrics.clone(),
    ));
    let schedules: Vec<_> = scopes
        .iter()
        .map(|scope| {
            tokio::spawn(schedule::run_controller(
                client.clone(),
                scope.clone(),
                schedules_ctx.clone(),
            ))
        })
        .collect();
    let launcher = Arc::new(
        EngineLauncher::new(client.clone())
            .with_metrics(metrics.clone())
            .with_services(services)
            .with_workers(workers)
            .with_events(events),
    );
    let mut ctx = Context::new(client.clone(), launcher, metrics).with_fence(fence);
    ctx.registry = registry;
    ctx.default_object_store = config
        .object_store_url
        .as_deref()
        .map(default_object_store)
        .transpose()?;
    let ctx = Arc::new(ctx);
    // One controller per watched namespace (or one for all): each has its own run cache.
    let mut stores = Vec::new();
    let mut controllers = Vec::new();
    for scope in &scopes {
        let (runs, configmaps, profiles): (Api<ResearchRun>, Api<ConfigMap>, Api<ResearchProfile>) =
            match scope {
                Some(ns) => (
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                    Api::namespaced(client.clone(), ns),
                ),
                None => (
                    Api::all(client.clone()),
                    Api::all(client.clone()),
                    Api::all(client.clone()),
                ),
            };
        let controller = Controller::new(runs, watcher::Config::default());
        let store = controller.store();
        let run_index = store.clone();
        stores.push(store);
        controllers.push(
            controller
                .owns(
                    configmaps,
                    watcher::Config::default().labels(crate::store::configmap::RUN_LABEL),
                )
                // A profile applied after its runs (GitOps order) starts them at once, not at the
                // next stall retry.
                .watches(
                    profiles,
                    watcher::Config::default(),
                    move |profile: ResearchProfile| {
                        runs_using_profile(&run_index.state(), &profile)
                    },
                )
                .shutdown_on_signal(),
        );
    }
    // The event endpoint answers from these caches (one per watched namespace).
    directory.use_caches(stores.clone());
    // Ready once the run cache has synced; a janitor cancels research of runs that were deleted.
    tokio::spawn({
        let stores = stores.clone();
        let ctx = ctx.clone();
        async move {
            for store in &stores {
                if store.wait_until_ready().await.is_err() {
                    return;
                }
            }
            readiness.set(true);
            info!("ResearchRun cache synced; ready");
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                let live: std::collections::HashSet<String> = stores
                    .iter()
                    .flat_map(|store| store.state())
                    .filter_map(|r| r.uid())
                    .collect();
                for uid in ctx.registry.uids() {
                    if !live.contains(&uid) {
                        info!(uid = %uid, "run deleted; cancelling its research");
                        ctx.registry.forget(&uid);
                    }
                }
                ctx.metrics.retain_runs(|uid| live.contains(uid));
            }
        }
    });
    futures::future::join_all(controllers.into_iter().map(|controller| {
        controller
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|result| async move {
                if let Err(e) = result {
                    debug!(error = %e, "controller event");
                }
            })
    }))
    .await;
    // All controllers stop on the same signal.
    for handle in engines {
        if let Err(e) = handle.await {
            warn!(error = %e, "SearchEngine controller ended abnormally");
        }
    }
    for handle in schedules {
        if let Err(e) = handle.await {
            warn!(error = %e, "ResearchSchedule controller ended abnormally");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
