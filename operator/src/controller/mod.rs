//! The ResearchRun controller: maps ResearchRuns onto research tasks and their progress back onto
//! status (DESIGN §1). Reconcile is a short pipeline — look up, validate, build desired status,
//! apply — and never runs research itself: it hands runs to the [`registry::Registry`].

pub mod artifacts;
pub mod directory;
pub mod engine;
pub mod leader;
pub mod registry;
pub mod search_engine;
pub mod status;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::api::{
    ReportKind, ReportRef, ResearchProfile, ResearchProfileSpec, ResearchRun, ResearchRunSpec,
    ResearchRunStatus, SearchEngine, SearchTarget, SecretKeyRef, reasons,
};
use crate::research::state::{Mode, OutputKind, RunInput, RunState};
use crate::server::{Readiness, ServerState};
use crate::store::configmap::{FIELD_MANAGER, report_configmap_name};
use crate::store::routed::{ReportLocation, ReportSlot};
use crate::telemetry::{ErrorLabels, Metrics, ModelLabels, PhaseLabel, RunLabels};
use registry::{Presence, Registry, ResearchTask, Signal};
use status::{RunView, desired_status_at, transition_events};

/// Name the operator reports Events under.
pub const CONTROLLER_NAME: &str = "quarry-operator";
/// How often a stalled run is retried (GitOps may apply the run before its profile).
pub const STALL_REQUEUE: Duration = Duration::from_secs(15);
/// How often a run with active research is looked at again even without a watch event (a
/// safety net: the final status is written from the registry if its writer could not).
pub const ACTIVE_RECHECK: Duration = Duration::from_secs(60);
/// How long a run waits for its managed SearchEngine to become ready (from creation) before it
/// starts anyway; its searches then fall over to the profile's API providers.
pub const SEARCH_ENGINE_WAIT: Duration = Duration::from_secs(180);
/// How often a run waiting for its SearchEngine looks again.
pub const SEARCH_ENGINE_RECHECK: Duration = Duration::from_secs(5);
/// Minimum time between two status patches of one run.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// Errors of reconcile and of the operator.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed while {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The object lacks metadata the API server always sets.
    #[error("ResearchRun is missing metadata.{0}")]
    MissingMetadata(&'static str),
    /// Serializing a patch failed.
    #[error("serializing {what}: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The HTTP server failed.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    /// No Kubernetes client could be configured.
    #[error("cannot configure a Kubernetes client (set KUBECONFIG or run in a cluster): {0}")]
    Config(String),
    /// This replica does not hold the leader lease (any more).
    #[error("not the leader: another replica owns the runs")]
    NotLeader,
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
    /// A deleted run's object-store artifacts could not be deleted yet.
    #[error("{0}")]
    ArtifactCleanup(String),
    /// The API server refuses every write to the run (422): its stored spec fails validation
    /// added after it was stored (no validation ratcheting before Kubernetes 1.28).
    #[error("ResearchRun {namespace}/{name} cannot be written: {message}")]
    StoredSpecInvalid {
        namespace: String,
        name: String,
        message: String,
    },
}

impl Error {
    /// Every value [`Error::metric_reason`] returns: the `reason` series of
    /// `quarry_reconcile_errors_total` are created at zero from this list at start, so dashboards
    /// and alerts find the family before the first error.
    pub const METRIC_REASONS: [&'static str; 9] = [
        "KubeApi",
        "MissingMetadata",
        "Serialization",
        "Server",
        "Config",
        "NotLeader",
        "LeaderElection",
        "ArtifactCleanup",
        "StoredSpecInvalid",
    ];

    /// The bounded `reason` label of `quarry_reconcile_errors_total` for this error.
    pub fn metric_reason(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "KubeApi",
            Error::MissingMetadata(_) => "MissingMetadata",
            Error::Serialize { .. } => "Serialization",
            Error::Server(_) => "Server",
            Error::Config(_) => "Config",
            Error::NotLeader => "NotLeader",
            Error::Leader(_) => "LeaderElection",
            Error::ArtifactCleanup(_) => "ArtifactCleanup",
            Error::StoredSpecInvalid { .. } => "StoredSpecInvalid",
        }
    }

    fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(status), .. } if status.code == 404)
    }
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

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

/// Everything a launcher needs to start one run's research.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    /// The run as reconciled.
    pub run: Arc<ResearchRun>,
    /// Name of the ResearchProfile.
    pub profile_name: String,
    /// Its spec.
    pub profile: ResearchProfileSpec,
    /// API keys by Secret reference, for the tiers that name one.
    pub api_keys: Vec<(SecretKeyRef, ApiKey)>,
    /// The engine input built from the run spec and profile defaults.
    pub input: RunInput,
    /// The managed SearchEngine the profile names, resolved to its Service.
    pub managed_search: Option<crate::wiring::ManagedSearch>,
    /// Where the run's artifacts go (object store, report location).
    pub artifacts: artifacts::ArtifactTarget,
}

/// Why a launch is impossible with the given profile; shown as `Stalled` with reason ProfileInvalid.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LaunchError(pub String);

/// Starts a prepared run: receives the control channel and the progress sender, returns the task.
pub type Starter = Box<
    dyn FnOnce(watch::Receiver<Signal>, Arc<watch::Sender<Option<RunState>>>) -> ResearchTask
        + Send,
>;

/// Builds research tasks. Production: [`engine::EngineLauncher`]; tests: a recording double.
pub trait Launcher: Send + Sync {
    /// Checks the request and prepares its task (no I/O); errors are profile problems.
    fn prepare(&self, request: LaunchRequest) -> Result<Starter, LaunchError>;

    /// Checks, with I/O, what the run will need before anything is paid for (the object store
    /// answers with its credentials); a stall says what to fix. Doubles need not check.
    fn check<'a>(
        &'a self,
        _request: &'a LaunchRequest,
    ) -> futures::future::BoxFuture<'a, Result<(), Stall>> {
        Box::pin(async { Ok(()) })
    }
}

/// Status writers by run UID: writer id and the sender of the latest run object.
type LatestRuns = std::collections::HashMap<String, (u64, watch::Sender<Arc<ResearchRun>>)>;

/// Shared state of the reconciler.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Research tasks by run UID.
    pub registry: Registry,
    /// Builds research tasks.
    pub launcher: Arc<dyn Launcher>,
    /// Operator metrics.
    pub metrics: Metrics,
    /// Minimum time between status patches of one run.
    pub status_interval: Duration,
    /// The latest run object of each active status writer, so status written during research
    /// carries the current `observedGeneration` (spec.suspend and the TTL may change mid-run).
    latest: std::sync::Mutex<LatestRuns>,
    /// Open while this replica holds the leader lease: no status is written otherwise.
    pub fence: leader::Fence,
    /// The operator-wide object store, for profiles that configure none.
    pub default_object_store: Option<crate::store::object::ObjectStoreConfig>,
    /// Where each started run's store put its report, by run UID.
    report_slots: std::sync::Mutex<std::collections::HashMap<String, ReportSlot>>,
}

impl Context {
    /// A context with the default status interval.
    pub fn new(client: Client, launcher: Arc<dyn Launcher>, metrics: Metrics) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            registry: Registry::new(),
            launcher,
            metrics,
            status_interval: STATUS_INTERVAL,
            latest: Default::default(),
            fence: leader::Fence::leading(),
            default_object_store: None,
            report_slots: Default::default(),
        }
    }

    /// The same context writing only while `fence` is open.
    pub fn with_fence(mut self, fence: leader::Fence) -> Self {
        self.fence = fence;
        self
    }
}

impl Context {
    fn slots(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, ReportSlot>> {
        self.report_slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops what is kept about a run's report location (the run is gone).
    pub fn forget_report(&self, uid: &str) {
        self.slots().remove(uid);
    }

    /// Where the run's report is, or will be: what its store recorded, else what status says,
    /// else its report ConfigMap.
    pub fn report_location(&self, run: &ResearchRun) -> ReportLocation {
        let recorded = run
            .uid()
            .and_then(|uid| self.slots().get(&uid).and_then(ReportSlot::get));
        if let Some(location) = recorded {
            return location;
        }
        match run.status.as_ref().and_then(|s| s.report.as_ref()) {
            Some(ReportRef {
                object_url: Some(url),
                ..
            }) => ReportLocation::Object(url.clone()),
            _ => ReportLocation::ConfigMap(report_configmap_name(&run.name_any())),
        }
    }

    fn latest_map(&self) -> std::sync::MutexGuard<'_, LatestRuns> {
        // The map stays consistent even if a holder panicked.
        self.latest.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers the status writer `id` of run `uid`; returns the receiver of newer run objects.
    fn subscribe_latest(
        &self,
        uid: &str,
        id: u64,
        run: &Arc<ResearchRun>,
    ) -> watch::Receiver<Arc<ResearchRun>> {
        let (tx, rx) = watch::channel(run.clone());
        self.latest_map().insert(uid.to_string(), (id, tx));
        rx
    }

    /// Whether a status writer is registered for the run with `uid`.
    pub fn has_status_writer(&self, uid: &str) -> bool {
        self.latest_map().contains_key(uid)
    }

    /// Unregisters status writer `id` (not a newer writer of the same run).
    fn unsubscribe_latest(&self, uid: &str, id: u64) {
        let mut map = self.latest_map();
        if map.get(uid).is_some_and(|(current, _)| *current == id) {
            map.remove(uid);
        }
    }

    /// Hands a newer generation of an active run to its status writer.
    fn publish_latest(&self, uid: &str, run: &Arc<ResearchRun>) {
        if let Some((_, tx)) = self.latest_map().get(uid) {
            tx.send_if_modified(|current| {
                let newer = current.metadata.generation != run.metadata.generation;
                if newer {
                    *current = run.clone();
                }
                newer
            });
        }
    }
}

/// A reason the run cannot progress, with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// Condition reason.
    pub reason: &'static str,
    /// Actionable message naming objects and keys (never values).
    pub message: String,
}

/// Pure: the API key named by `key_ref` in `secret`, or why it is unusable. `field` is where the
/// profile references it, e.g. `models.primary.apiKeySecretRef`.
pub fn extract_key(
    secret: &Secret,
    key_ref: &SecretKeyRef,
    profile: &str,
    field: &str,
) -> Result<ApiKey, Stall> {
    let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    let missing = || Stall {
        reason: reasons::SECRET_KEY_MISSING,
        message: format!(
            "Secret \"{}\" in namespace \"{namespace}\" has no key \"{}\" (ResearchProfile \"{profile}\" {field}.key); add the key to the Secret or fix the reference",
            key_ref.name, key_ref.key
        ),
    };
    let raw = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&key_ref.key))
        .map(|b| b.0.clone());
    let raw = raw.or_else(|| {
        secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(&key_ref.key))
            .map(|s| s.clone().into_bytes())
    });
    let Some(raw) = raw else {
        return Err(missing());
    };
    let value = String::from_utf8(raw).map_err(|_| Stall {
        reason: reasons::SECRET_KEY_MISSING,
        message: format!(
            "Secret \"{}\" key \"{}\" is not UTF-8 text; store the API key as text",
            key_ref.name, key_ref.key
        ),
    })?;
    let value = value.trim();
    if value.is_empty() {
        return Err(Stall {
            reason: reasons::SECRET_KEY_MISSING,
            message: format!(
                "Secret \"{}\" key \"{}\" in namespace \"{namespace}\" is empty; put the API key in it",
                key_ref.name, key_ref.key
            ),
        });
    }
    Ok(ApiKey::new(value))
}

/// Pure: every Secret reference of a profile with the field that holds it: model tiers, search
/// providers and specialised sources.
pub fn secret_refs(profile: &ResearchProfileSpec) -> Vec<(String, SecretKeyRef)> {
    let mut refs: Vec<(String, SecretKeyRef)> = profile
        .models
        .iter()
        .filter_map(|(tier, model)| {
            model
                .api_key_secret_ref
                .clone()
                .map(|r| (format!("models.{}.apiKeySecretRef", tier.as_str()), r))
        })
        .collect();
    for (i, p) in profile.search_providers().iter().enumerate() {
        refs.push((
            format!("search.providers[{i}].apiKeySecretRef"),
            p.api_key_secret_ref.clone(),
        ));
    }
    if let Some(sources) = profile.sources() {
        if let Some(security) = &sources.security {
            if let Some(r) = &security.nvd_api_key_secret_ref {
                refs.push((
                    "search.sources.security.nvdApiKeySecretRef".into(),
                    r.clone(),
                ));
            }
            if let Some(r) = &security.github_token_secret_ref {
                refs.push((
                    "search.sources.security.githubTokenSecretRef".into(),
                    r.clone(),
                ));
            }
        }
        if let Some(r) = sources
            .stack_exchange
            .as_ref()
            .and_then(|s| s.key_secret_ref.as_ref())
        {
            refs.push((
                "search.sources.stackExchange.keySecretRef".into(),
                r.clone(),
            ));
        }
    }
    refs
}

/// Pure: the engine input for `spec` under `profile`'s default limits.
pub fn run_input(spec: &ResearchRunSpec, profile: &ResearchProfileSpec) -> Result<RunInput, Stall> {
    use crate::api::{Mode as ApiMode, Output};
    let limits = spec
        .effective_limits(profile.limits.as_ref())
        .map_err(|e| Stall {
            reason: reasons::PROFILE_INVALID,
            message: format!("invalid limits: {e}"),
        })?;
    Ok(RunInput {
        query: spec.query.clone(),
        context: spec.context.clone(),
        mode: match spec.mode {
            ApiMode::Quick => Mode::Quick,
            ApiMode::Deep => Mode::Deep,
        },
        outputs: spec
            .outputs
            .iter()
            .map(|o| match o {
                Output::Study => OutputKind::Study,
                Output::Ideas => OutputKind::Ideas,
                Output::Implementations => OutputKind::Implementations,
            })
            .collect(),
        top_k: spec.top_k,
        limits: crate::wiring::limits(&limits),
    })
}

/// Pure: what to do with a finished run given its TTL: `None` keep it, `Some(ZERO)` delete now,
/// else wait that long.
pub fn ttl_wait(run: &ResearchRun, now: &Time) -> Option<Duration> {
    let ttl = u64::try_from(run.spec.ttl_seconds_after_finished?).unwrap_or(0);
    let finished = run.status.as_ref()?.completion_time.as_ref()?;
    let deadline = finished
        .0
        .as_second()
        .saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let left = deadline.saturating_sub(now.0.as_second());
    Some(Duration::from_secs(u64::try_from(left).unwrap_or(0)))
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Writes the status for `view` if it differs from the current one, and publishes the Events the
/// transition calls for. Returns the status the run now has.
async fn apply_status(
    ctx: &Context,
    run: &ResearchRun,
    view: RunView<'_>,
) -> Result<ResearchRunStatus, Error> {
    let name = run.name_any();
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let desired = desired_status_at(run, view, &ctx.report_location(run), &now());
    if run.status.as_ref() == Some(&desired) {
        return Ok(desired);
    }
    if !ctx.fence.is_open() {
        // Leadership was lost: the new leader owns this run's status.
        return Err(Error::NotLeader);
    }
    let body = serde_json::json!({
        "apiVersion": ResearchRun::api_version(&()),
        "kind": ResearchRun::kind(&()),
        "status": serde_json::to_value(&desired).map_err(|source| Error::Serialize { what: "status", source })?,
    });
    let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|source| match source {
        kube::Error::Api(status) if status.code == 422 => Error::StoredSpecInvalid {
            namespace: namespace.clone(),
            name: name.clone(),
            message: status.message.clone(),
        },
        source => Error::Kube {
            action: format!("patching status of ResearchRun {namespace}/{name}"),
            source,
        },
    })?;
    if let (Some(uid), Some(phase)) = (run.uid(), desired.phase) {
        ctx.metrics.set_run_phase(
            &uid,
            &namespace,
            PhaseLabel::from_phase_name(phase.as_str()),
        );
    }
    let reference = run.object_ref(&());
    for event in transition_events(run.status.as_ref(), &desired) {
        let event = Event {
            type_: event.type_,
            reason: event.reason,
            note: Some(event.note),
            action: event.action,
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            // Events are best effort: the status already says what happened.
            warn!(run = %name, namespace = %namespace, error = %e, "publishing event failed");
        }
    }
    Ok(desired)
}

/// Reconciles one ResearchRun. Returns quickly: research runs in the registry's tasks.
#[tracing::instrument(skip_all, fields(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default()))]
pub async fn reconcile(run: Arc<ResearchRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = reconcile_inner(run, &ctx).await;
    ctx.metrics
        .record_reconcile(result.is_ok(), started.elapsed().as_secs_f64());
    result
}

async fn reconcile_inner(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    // Runs with object-store artifacts go through the finalizer helper: cleanup on deletion.
    if artifacts::has_finalizer(&run) {
        let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
        let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
        return kube::runtime::finalizer::finalizer(
            &api,
            artifacts::ARTIFACTS_FINALIZER,
            run,
            |event| async move {
                match event {
                    kube::runtime::finalizer::Event::Apply(run) => reconcile_run(run, ctx).await,
                    kube::runtime::finalizer::Event::Cleanup(run) => {
                        artifacts::cleanup(run, ctx).await
                    }
                }
            },
        )
        .await
        .map_err(artifacts::finalizer_error);
    }
    reconcile_run(run, ctx).await
}

async fn reconcile_run(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    match reconcile_steps(run.clone(), ctx).await {
        Err(Error::StoredSpecInvalid { message, .. }) => {
            stored_spec_invalid(ctx, &run, &message).await;
            Ok(Action::await_change())
        }
        other => other,
    }
}

/// A run whose stored spec fails validation added after it was stored (a CRD upgrade that
/// tightened a rule, on a server without validation ratcheting) can have no status written.
/// Retrying would loop forever: the run is left alone until it changes, with a Warning Event
/// that says what to do. Nothing was started for it (status is written before research starts).
async fn stored_spec_invalid(ctx: &Context, run: &ResearchRun, message: &str) {
    let name = run.name_any();
    warn!(run = %name, error = %message, "stored spec fails the current validation; not retrying");
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            reason: "StoredSpecInvalid".into(),
        })
        .inc();
    let event = Event {
        type_: EventType::Warning,
        reason: reasons::STORED_SPEC_INVALID.into(),
        note: Some(stored_spec_invalid_note(&name, message)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &run.object_ref(&())).await {
        warn!(run = %name, error = %e, "publishing event failed");
    }
}

/// Pure: the Event note for [`stored_spec_invalid`] (Events are bounded at 1 KiB by the API).
pub fn stored_spec_invalid_note(name: &str, server_message: &str) -> String {
    let message: String = server_message.chars().take(600).collect();
    format!(
        "The stored spec fails this Quarry version's validation, so the API server refuses every \
         status write and the run cannot start: {message}. Recreate it with a valid spec \
         (kubectl delete researchrun {name}; fix the spec; kubectl apply)."
    )
}

async fn reconcile_steps(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let uid = run.uid().ok_or(Error::MissingMetadata("uid"))?;
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let name = run.name_any();
    if run.metadata.deletion_timestamp.is_some() {
        ctx.registry.remove(&uid);
        ctx.forget_report(&uid);
        return Ok(Action::await_change());
    }
    // Look up: where the run stands.
    if run.is_finished() {
        ctx.metrics.set_run_phase(
            &uid,
            &namespace,
            PhaseLabel::from_phase_name(run.phase().as_str()),
        );
        return finished(&run, ctx, &name, &namespace).await;
    }
    match ctx.registry.presence(&uid) {
        Presence::Active => {
            ctx.publish_latest(&uid, &run);
            // A cancelled run's executor stops and ends Cancelled; its status writer writes that.
            ctx.registry.signal(&uid, control_signal(&run.spec));
            return Ok(Action::requeue(ACTIVE_RECHECK));
        }
        // The writer lands the final status (within one status interval); only when it is gone
        // without having done so is it written from here: two writers would write it twice.
        Presence::Finished => {
            if !ctx.has_status_writer(&uid)
                && let Some(last) = ctx.registry.final_state(&uid)
            {
                apply_status(ctx, &run, RunView::Progress(&last)).await?;
            }
            return Ok(Action::requeue(Duration::from_secs(5)));
        }
        Presence::Absent | Presence::Stopped => {}
    }
    // Nothing runs for it here (not started, stalled, suspended, or after a restart): it ends
    // Cancelled as it stands, keeping the usage already recorded.
    if run.spec.cancel {
        info!(run = %name, namespace = %namespace, "run cancelled before research ran in this process");
        apply_status(ctx, &run, RunView::Cancelled).await?;
        return Ok(Action::await_change());
    }
    if run.spec.suspend {
        apply_status(ctx, &run, RunView::Suspended).await?;
        return Ok(Action::await_change());
    }
    // Look up and validate the profile and its Secrets.
    let request = match resolve(ctx, &run, &namespace).await? {
        Ok(request) => request,
        Err(wait) if wait.reason == reasons::WAITING_FOR_SEARCH_ENGINE => {
            apply_status(
                ctx,
                &run,
                RunView::Waiting {
                    reason: wait.reason,
                    message: &wait.message,
                },
            )
            .await?;
            return Ok(Action::requeue(SEARCH_ENGINE_RECHECK));
        }
        Err(stall) => return stalled(ctx, &run, &stall).await,
    };
    if let Err(stall) = ctx.launcher.check(&request).await {
        return stalled(ctx, &run, &stall).await;
    }
    // Build the task, then apply: status first, so a failed patch leaves nothing running.
    let starter = match ctx.launcher.prepare(request.clone()) {
        Ok(starter) => starter,
        Err(e) => {
            let stall = Stall {
                reason: reasons::PROFILE_INVALID,
                message: format!(
                    "ResearchProfile \"{}\" cannot be used: {e}",
                    request.profile_name
                ),
            };
            return stalled(ctx, &run, &stall).await;
        }
    };
    let written = apply_status(ctx, &run, RunView::Starting).await?;
    let mut base = (*run).clone();
    base.status = Some(written);
    let (progress_tx, progress_rx) = watch::channel(None);
    let progress_tx = Arc::new(progress_tx);
    let task_tx = progress_tx.clone();
    let labels = model_labels(&request, &namespace);
    let started = ctx.registry.start(
        &uid,
        move |control| starter(control, task_tx),
        move |state| {
            // The last state reaches the status writer even when the task did not publish it.
            progress_tx.send_replace(Some(state));
        },
    );
    if started {
        ctx.slots()
            .insert(uid.clone(), request.artifacts.report.clone());
        info!(run = %name, namespace = %namespace, profile = %request.profile_name, "research started");
        static WRITER_IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let writer_id = WRITER_IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let latest_rx = ctx.subscribe_latest(&uid, writer_id, &run);
        tokio::spawn(status_writer(
            ctx.clone(),
            base,
            progress_rx,
            (writer_id, latest_rx),
            labels,
            request.profile_name.clone(),
        ));
    }
    Ok(Action::requeue(ACTIVE_RECHECK))
}

/// Pure: what the executor of a run with this spec should do (cancel wins over suspend).
pub fn control_signal(spec: &ResearchRunSpec) -> Signal {
    if spec.cancel {
        Signal::Cancel
    } else if spec.suspend {
        Signal::Suspend
    } else {
        Signal::Run
    }
}

fn model_labels(request: &LaunchRequest, namespace: &str) -> ModelLabels {
    let tier = &request.profile.models.primary;
    let provider = url::Url::parse(&tier.base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    ModelLabels {
        namespace: namespace.to_string(),
        profile: request.profile_name.clone(),
        provider,
        model: tier.model.clone(),
    }
}

async fn stalled(ctx: &Context, run: &ResearchRun, stall: &Stall) -> Result<Action, Error> {
    debug!(run = %run.name_any(), reason = stall.reason, "run stalled");
    apply_status(
        ctx,
        run,
        RunView::Stalled {
            reason: stall.reason,
            message: &stall.message,
        },
    )
    .await?;
    Ok(Action::requeue(STALL_REQUEUE))
}

/// Looks up the profile and its Secrets and validates them into a launch request.
async fn resolve(
    ctx: &Context,
    run: &Arc<ResearchRun>,
    namespace: &str,
) -> Result<Result<LaunchRequest, Stall>, Error> {
    let profile_name = run.spec.profile_ref.clone();
    let profiles: Api<ResearchProfile> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(profile) = profiles
        .get_opt(&profile_name)
        .await
        .map_err(kube_err(format!(
            "reading ResearchProfile {namespace}/{profile_name}"
        )))?
    else {
        return Ok(Err(Stall {
            reason: reasons::PROFILE_NOT_FOUND,
            message: format!(
                "ResearchProfile \"{profile_name}\" not found in namespace \"{namespace}\" (spec.profileRef); create it and the run will start"
            ),
        }));
    };
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut fetched: BTreeMap<String, Secret> = BTreeMap::new();
    let mut api_keys = Vec::new();
    for (field, key_ref) in secret_refs(&profile.spec) {
        if !fetched.contains_key(&key_ref.name) {
            let secret = secrets
                .get_opt(&key_ref.name)
                .await
                .map_err(kube_err(format!(
                    "reading Secret {namespace}/{}",
                    key_ref.name
                )))?;
            let Some(secret) = secret else {
                return Ok(Err(Stall {
                    reason: reasons::SECRET_NOT_FOUND,
                    message: format!(
                        "Secret \"{}\" not found in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" {field}); create it with key \"{}\"",
                        key_ref.name, key_ref.key
                    ),
                }));
            };
            fetched.insert(key_ref.name.clone(), secret);
        }
        let secret = &fetched[&key_ref.name];
        match extract_key(secret, &key_ref, &profile_name, &field) {
            Ok(key) => api_keys.push((key_ref.clone(), key)),
            Err(stall) => return Ok(Err(stall)),
        }
    }
    let object_store = match artifacts::resolve_object_store(ctx, &profile, namespace).await? {
        Ok(object_store) => object_store,
        Err(stall) => return Ok(Err(stall)),
    };
    if run.spec.report.kind == ReportKind::ObjectStore && object_store.is_none() {
        return Ok(Err(Stall {
            reason: reasons::OBJECT_STORE_NOT_CONFIGURED,
            message: format!(
                "spec.report.kind is objectStore, but ResearchProfile \"{profile_name}\" has no objectStore and the operator has no default (--object-store-url); add spec.objectStore to the profile"
            ),
        }));
    }
    let input = match run_input(&run.spec, &profile.spec) {
        Ok(input) => input,
        Err(stall) => return Ok(Err(stall)),
    };
    let managed_search = match profile.spec.search_target() {
        SearchTarget::Url(_) => None,
        SearchTarget::Engine(engine_name) => {
            let engines: Api<SearchEngine> = Api::namespaced(ctx.client.clone(), namespace);
            let engine = engines
                .get_opt(engine_name)
                .await
                .map_err(kube_err(format!(
                    "reading SearchEngine {namespace}/{engine_name}"
                )))?;
            let Some(engine) = engine else {
                return Ok(Err(Stall {
                    reason: reasons::SEARCH_ENGINE_NOT_FOUND,
                    message: format!(
                        "SearchEngine \"{engine_name}\" not found in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" search.searchEngineRef); create it, or set search.url to an external SearXNG"
                    ),
                }));
            };
            if let Some(wait) = search_engine_wait(&engine, run, &now()) {
                return Ok(Err(wait));
            }
            Some(crate::wiring::ManagedSearch {
                backend: search_engine::backend_key(namespace, engine_name),
                url: SearchEngine::service_url(engine_name, namespace),
            })
        }
    };
    Ok(Ok(LaunchRequest {
        run: run.clone(),
        profile_name,
        profile: profile.spec,
        api_keys,
        input,
        managed_search,
        artifacts: artifacts::ArtifactTarget {
            object_store,
            report: ReportSlot::default(),
        },
    }))
}

/// Pure: whether a run should wait for its SearchEngine (no ready replica yet, and the run is
/// younger than [`SEARCH_ENGINE_WAIT`]); the wait's reason and message.
pub fn search_engine_wait(engine: &SearchEngine, run: &ResearchRun, now: &Time) -> Option<Stall> {
    let ready = engine.status.as_ref().map_or(0, |s| s.ready_replicas);
    if ready > 0 {
        return None;
    }
    let age = run
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| now.0.as_second() - t.0.as_second());
    if age >= SEARCH_ENGINE_WAIT.as_secs() as i64 {
        warn!(run = %run.name_any(), search_engine = %engine.name_any(), "SearchEngine still not ready; starting anyway");
        return None;
    }
    Some(Stall {
        reason: reasons::WAITING_FOR_SEARCH_ENGINE,
        message: format!(
            "waiting for SearchEngine \"{}\" to scale up from zero (no ready replica yet); the run starts when it is ready, or after {}s with its API search providers",
            engine.name_any(),
            SEARCH_ENGINE_WAIT.as_secs()
        ),
    })
}

/// A finished run: delete it once its TTL has passed.
async fn finished(
    run: &ResearchRun,
    ctx: &Context,
    name: &str,
    namespace: &str,
) -> Result<Action, Error> {
    match ttl_wait(run, &now()) {
        None => Ok(Action::await_change()),
        Some(wait) if wait.is_zero() => {
            info!(run = %name, namespace = %namespace, "deleting finished run after ttlSecondsAfterFinished");
            let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(kube_err(format!("deleting ResearchRun {namespace}/{name}"))(e)),
            }
        }
        Some(wait) => Ok(Action::requeue(wait)),
    }
}

/// Drains one run's progress into status patches (at most one per `status_interval`), metrics and
/// Events, until the research task ends.
async fn status_writer(
    ctx: Arc<Context>,
    mut base: ResearchRun,
    mut rx: watch::Receiver<Option<RunState>>,
    (writer_id, mut latest): (u64, watch::Receiver<Arc<ResearchRun>>),
    labels: ModelLabels,
    profile: String,
) {
    let uid = base.uid().unwrap_or_default();
    let namespace = labels.namespace.clone();
    let run_labels = RunLabels {
        namespace: namespace.clone(),
        profile: profile.clone(),
    };
    let mut last: Option<RunState> = None;
    let mut latest_open = true;
    // The reconcile wrote the Starting status just now: pacing starts from that write, so a
    // run never gets two status writes within one interval.
    tokio::time::sleep(ctx.status_interval).await;
    // A final status whose write failed is retried by this writer (a few times, one interval
    // apart); once it is written the writer is done, so nothing writes it twice.
    let mut final_retries = 0u32;
    loop {
        let mut closed = false;
        let retrying = final_retries > 0;
        if !retrying {
            tokio::select! {
                changed = rx.changed() => closed = changed.is_err(),
                changed = latest.changed(), if latest_open => latest_open = changed.is_ok(),
            }
        }
        {
            let run = latest.borrow_and_update();
            base.metadata = run.metadata.clone();
            base.spec = run.spec.clone();
        }
        let state = rx.borrow_and_update().clone().or_else(|| last.clone());
        if let Some(state) = state {
            let written = match apply_status(&ctx, &base, RunView::Progress(&state)).await {
                Ok(status) => {
                    base.status = Some(status);
                    true
                }
                Err(e) if e.is_not_found() => {
                    info!(run = %base.name_any(), "run deleted; cancelling its research");
                    ctx.registry.remove(&uid);
                    ctx.forget_report(&uid);
                    ctx.metrics.set_run_phase(&uid, &namespace, None);
                    ctx.unsubscribe_latest(&uid, writer_id);
                    return;
                }
                Err(e) => {
                    warn!(run = %base.name_any(), error = %e, "status update failed; will retry");
                    false
                }
            };
            if state.phase.is_terminal()
                && !last.as_ref().is_some_and(|l| l.phase.is_terminal())
                && let Some(outcome) =
                    PhaseLabel::from_phase_name(status::api_phase(state.phase).as_str())
            {
                {
                    let started = base
                        .status
                        .as_ref()
                        .and_then(|s| s.start_time.clone())
                        .or_else(|| base.metadata.creation_timestamp.clone());
                    let mode = match state.input.mode {
                        crate::research::state::Mode::Quick => "quick",
                        crate::research::state::Mode::Deep => "deep",
                    };
                    let seconds = started
                        .map(|started| (now().0.as_second() - started.0.as_second()).max(0) as f64);
                    ctx.metrics.record_finished_run(
                        &run_labels,
                        mode,
                        outcome,
                        seconds,
                        state.usage.cost_pico_usd as f64 / 1e12,
                        state.trace_id.clone(),
                    );
                }
            }
            let terminal = state.phase.is_terminal();
            last = Some(state);
            if terminal && written {
                ctx.unsubscribe_latest(&uid, writer_id);
                return;
            }
            final_retries = if terminal && !written {
                final_retries + 1
            } else {
                0
            };
            if final_retries > MAX_FINAL_STATUS_RETRIES {
                // The reconcile writes it from the registry once this writer is gone.
                ctx.unsubscribe_latest(&uid, writer_id);
                return;
            }
        }
        if closed && final_retries == 0 {
            ctx.unsubscribe_latest(&uid, writer_id);
            return;
        }
        tokio::time::sleep(ctx.status_interval).await;
    }
}

/// Attempts of a status writer at a final status whose write failed, before it leaves that to
/// the reconcile.
const MAX_FINAL_STATUS_RETRIES: u32 = 5;

/// Requeue policy after a reconcile error.
pub fn error_policy(run: Arc<ResearchRun>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(run = %run.name_any(), error = %error, "reconcile failed");
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            reason: error.metric_reason().into(),
        })
        .inc();
    Action::requeue(Duration::from_secs(10))
}

/// Pure: the unfinished runs in `profile`'s namespace that reference it.
pub fn runs_using_profile(
    runs: &[Arc<ResearchRun>],
    profile: &ResearchProfile,
) -> Vec<kube::runtime::reflector::ObjectRef<ResearchRun>> {
    let namespace = profile.namespace();
    let name = profile.name_any();
    runs.iter()
        .filter(|r| r.namespace() == namespace && r.spec.profile_ref == name && !r.is_finished())
        .map(|r| kube::runtime::reflector::ObjectRef::from_obj(r.as_ref()))
        .collect()
}

/// Configuration of `quarry operator` (the binary fills it from its layered settings).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Leader election: only the Lease holder runs research (`None`: a single replica).
    pub leader: Option<LeaderSettings>,
    /// Scale-out mode: researchers run on `quarry worker` processes through `redis_url`.
    pub workers: bool,
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
            lease_name: leader::DEFAULT_LEASE_NAME.into(),
            namespace: None,
            lease_seconds: leader::DEFAULT_LEASE_SECONDS,
            grace_seconds: leader::DEFAULT_GRACE_SECONDS,
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
            workers: false,
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
) -> Result<crate::wiring::Services, Error> {
    let cache: Arc<dyn crate::cache::Cache> = match redis_url {
        Some(url) => Arc::new(
            crate::cache::redis::RedisCache::new(url)
                .map_err(|e| Error::Config(format!("redisUrl: {e}")))?,
        ),
        None => Arc::new(crate::cache::MemoryCache::default()),
    };
    Ok(crate::wiring::Services::new(cache, metrics))
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
) -> Result<Arc<dyn crate::events::RunEvents>, Error> {
    Ok(match redis_url {
        Some(url) => Arc::new(
            crate::events::redis::RedisEvents::start(
                url,
                crate::events::redis::RedisSettings::default(),
                Some(metrics.clone()),
            )
            .map_err(|e| Error::Config(format!("redisUrl: {e}")))?,
        ),
        None => Arc::new(crate::events::memory::MemoryEvents::new(
            crate::events::memory::MemoryLimits::default(),
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
    metrics.zero_reconcile_errors(&Error::METRIC_REASONS);
    let readiness = Readiness::new();
    let listener = crate::server::bind(&config.listen).await?;
    info!(addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "serving /metrics, /livez, /readyz and run events");
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut server_stop = stop_rx.clone();
    let events = run_events(config.redis_url.as_deref(), &metrics)?;
    let directory = Arc::new(directory::KubeDirectory::new(client.clone()));
    let server = tokio::spawn(crate::server::serve(
        listener,
        ServerState {
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            events: Some(crate::server::events::EventsApi::new(
                events.clone(),
                directory.clone(),
                metrics.clone(),
            )),
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
                .unwrap_or_else(|| leader::operator_namespace(&client));
            let mut lc = leader::LeaderConfig::new(namespace.clone());
            lc.lease_name = settings.lease_name.clone();
            lc.lease_seconds = settings.lease_seconds;
            lc.grace_seconds = settings.grace_seconds;
            let owner = leader::deployment_owner(&client, &namespace).await;
            info!(lease = %format!("{namespace}/{}", lc.lease_name), identity = %lc.identity, owner = %leader::owner_name(&owner), "leader election");
            leader::ensure_lease(&client, &lc, owner).await?;
            readiness.set(true);
            let mut leadership = leader::Leadership::start(client.clone(), &lc).await?;
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
        .map_or_else(leader::Fence::leading, leader::Leadership::fence);
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
    fence: leader::Fence,
    registry: Registry,
    (events, directory): (
        Arc<dyn crate::events::RunEvents>,
        Arc<directory::KubeDirectory>,
    ),
) -> Result<(), Error> {
    let workers = match (config.workers, &config.redis_url) {
        (false, _) => None,
        (true, Some(url)) => Some(url.clone()),
        (true, None) => {
            return Err(Error::Config(
                "scale-out mode (--workers) needs Redis: pass --redis-url or set QUARRY_REDIS_URL"
                    .into(),
            ));
        }
    };
    let services = services(config.redis_url.as_deref(), Some(metrics.clone()))?;
    let engines_ctx = Arc::new(search_engine::EngineContext::new(
        client.clone(),
        metrics.clone(),
        services.health.clone(),
    ));
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
    let launcher = Arc::new(
        engine::EngineLauncher::new(client.clone())
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
                        ctx.registry.remove(&uid);
                        ctx.forget_report(&uid);
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::watch_scopes;
    use super::{Error, leader};

    #[test]
    fn every_metric_reason_is_zeroed_at_start() {
        let serde = serde_json::from_str::<u8>("x").unwrap_err();
        let errors = [
            Error::MissingMetadata("uid"),
            Error::Serialize {
                what: "status",
                source: serde,
            },
            Error::Config("none".into()),
            Error::NotLeader,
            Error::Leader(leader::LeaderError::Lost("l".into())),
            Error::ArtifactCleanup("x".into()),
        ];
        for error in &errors {
            assert!(
                Error::METRIC_REASONS.contains(&error.metric_reason()),
                "{} missing from METRIC_REASONS",
                error.metric_reason()
            );
        }
        assert!(Error::METRIC_REASONS.contains(&"KubeApi"));
        assert!(Error::METRIC_REASONS.contains(&"Server"));
    }

    #[test]
    fn watch_scopes_split_a_namespace_list() {
        assert_eq!(watch_scopes(None), vec![None]);
        assert_eq!(watch_scopes(Some("")), vec![None]);
        assert_eq!(
            watch_scopes(Some("research")),
            vec![Some("research".to_owned())]
        );
        assert_eq!(
            watch_scopes(Some("research, team-b,research,")),
            vec![Some("research".to_owned()), Some("team-b".to_owned())]
        );
    }
}
