//! The ResearchRun controller: maps ResearchRuns onto research tasks and their progress back onto
//! status. Reconcile is a short pipeline — look up, validate, build desired status,
//! apply — and never runs research itself: it hands runs to the [`registry::Registry`].

pub mod artifacts;
pub mod earlier_run;
pub mod launcher;
pub mod registry;
mod resolve;
pub mod status;
mod status_writer;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use crate::CONTROLLER_NAME;
use crate::error::{Error, kube_err};
use crate::leader_election::Fence;
use crate::store::configmap::report_configmap_name;
use crate::store::routed::{ReportLocation, ReportSlot};
use quarry_api::{
    ReportRef, ResearchProfile, ResearchProfileSpec, ResearchRun, ResearchRunSpec, SecretKeyRef,
    reasons,
};
use quarry_engine::research::state::{RunInput, RunState};
use quarry_engine::telemetry::{ErrorLabels, Metrics, ModelLabels, PhaseLabel};
use registry::{Presence, Registry, ResearchTask, Signal};
use status::RunView;
use status_writer::{apply_status, status_writer};

use resolve::resolve;
pub use resolve::{
    SecretUse, Stall, extract_key, limits_stall, opted_in, run_input, search_engine_wait,
    secret_refs, secret_uses, ttl_wait, url_host,
};

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
    pub managed_search: Option<crate::engine_builder::ManagedSearch>,
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

/// Builds research tasks. Production: [`launcher::EngineLauncher`]; tests: a recording double.
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
    pub fence: Fence,
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
            fence: Fence::leading(),
            default_object_store: None,
            report_slots: Default::default(),
        }
    }

    /// The same context writing only while `fence` is open.
    pub fn with_fence(mut self, fence: Fence) -> Self {
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

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
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
    let started = ctx.registry.start_with(
        &uid,
        control_signal(&run.spec),
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
    } else if let Some(approval) = spec.approval.as_ref().filter(|a| a.required && a.approved) {
        Signal::Approve {
            agenda: approval.agenda.clone(),
        }
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
