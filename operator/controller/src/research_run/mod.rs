//! The ResearchRun controller: maps ResearchRuns onto research tasks and their progress back onto
//! status. It never runs research itself: it hands runs to the [`registry::Registry`].
//!
//! One run's path, a file a step: [`reconcile`](reconcile::reconcile) (the finalizer, then the
//! steps in order) → `decide` (pure: the next step) → `resolve` (look up and validate the
//! profile, its Secrets and SearchEngine) → `apply` (start the task through the [`Launcher`]) →
//! `status_writer` (the one writer of status; the status itself is computed by the pure
//! [`status`]).

mod apply;
pub mod artifacts;
mod decide;
pub mod earlier_run;
pub mod launcher;
mod reconcile;
pub mod registry;
mod resolve;
pub mod status;
mod status_writer;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::{Recorder, Reporter};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::CONTROLLER_NAME;
use crate::engine_builder::{ApiKey, WiringError};
use crate::error::Error;
use crate::leader_election::Fence;
use crate::store::configmap::report_configmap_name;
use crate::store::object::ObjectStoreError;
use crate::store::routed::ReportLocation;
use quarry_api::{ReportRef, ResearchProfile, ResearchProfileSpec, ResearchRun, SecretKeyRef};
use quarry_engine::research::machine::state::{RunInput, RunState};
use quarry_engine::telemetry::Metrics;
use registry::{Registry, ResearchTask, Signal};

pub use decide::{Next, control_signal, next};
pub use reconcile::{error_policy, reconcile};
pub use resolve::{
    SecretUse, Stall, extract_key, limits_stall, opted_in, run_input, search_engine_wait,
    secret_refs, secret_uses, ttl_wait, url_host,
};
pub use status_writer::stored_spec_invalid_note;

/// How often a stalled run is retried (GitOps may apply the run before its profile).
pub const STALL_REQUEUE: Duration = Duration::from_secs(15);
/// How often a run with active research is looked at again even without a watch event (a
/// safety net: a spec change whose watch event was missed still reaches the task).
pub const ACTIVE_RECHECK: Duration = Duration::from_secs(60);
/// How long a run waits for its managed SearchEngine to become ready (from creation) before it
/// starts anyway; its searches then fall over to the profile's API providers.
pub const SEARCH_ENGINE_WAIT: Duration = Duration::from_secs(180);
/// How often a run waiting for its SearchEngine looks again.
pub const SEARCH_ENGINE_RECHECK: Duration = Duration::from_secs(5);
/// Minimum time between two status patches of one run.
pub const STATUS_INTERVAL: Duration = Duration::from_secs(1);

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
pub enum LaunchError {
    /// The profile cannot be turned into an engine.
    #[error(transparent)]
    Engine(#[from] WiringError),
    /// The run's object store cannot be opened.
    #[error(transparent)]
    ObjectStore(#[from] ObjectStoreError),
    /// The run lacks metadata its artifacts are named by.
    #[error(transparent)]
    Metadata(#[from] Error),
    /// `spec.report.kind` is `objectStore` but neither the profile nor the operator names one.
    #[error("spec.report.kind is objectStore but no object store is configured")]
    NoObjectStore,
}

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

/// Shared state of the reconciler.
pub struct Context {
    /// Kubernetes client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// The per-run state (task, report location, status writer) by run UID.
    pub registry: Registry,
    /// Builds research tasks.
    pub launcher: Arc<dyn Launcher>,
    /// Operator metrics.
    pub metrics: Metrics,
    /// Minimum time between status patches of one run.
    pub status_interval: Duration,
    /// Open while this replica holds the leader lease: no status is written otherwise.
    pub fence: Fence,
    /// The operator-wide object store, for profiles that configure none.
    pub default_object_store: Option<crate::store::object::ObjectStoreConfig>,
    /// The object store each run was launched with (the artifacts cleanup's fallback).
    pub launched_stores: artifacts::LaunchedStores,
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
            fence: Fence::leading(),
            default_object_store: None,
            launched_stores: artifacts::LaunchedStores::default(),
        }
    }

    /// The same context writing only while `fence` is open.
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }
}

impl Context {
    /// Where the run's report is, or will be: what its store recorded, else what status says,
    /// else its report ConfigMap.
    pub fn report_location(&self, run: &ResearchRun) -> ReportLocation {
        let recorded = run
            .uid()
            .and_then(|uid| self.registry.report_location(&uid));
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
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
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
