//! The SearchEngine controller: a SearXNG Deployment, Service and settings ConfigMap per
//! SearchEngine, scaled from zero while runs use it.
//!
//! Reconcile is a pipeline: look up (runs, profiles) → validate and build the desired
//! objects (pure: [`render_settings`], [`desired_children`], [`scale`]) → apply them with
//! Server-Side Apply → write status only when it changed. None of the children is owned by a
//! ResearchRun: the instance is shared and outlives every run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tracing::{debug, info, warn};

use crate::store::configmap::FIELD_MANAGER;
use crate::{CONTROLLER_NAME, Error, error::kube_err};
use quarry_api::search_engine::SEARXNG_PORT;
use quarry_api::values::parse_duration;
use quarry_api::{
    ConditionStatus, EngineHealthStatus, ResearchProfile, ResearchRun, SearchEngine,
    SearchEngineStatus, SearchTarget, condition_types, find_condition, set_condition,
};
use quarry_engine::sources::health::HealthBook;
use quarry_engine::telemetry::Metrics;

/// The settings file every SearchEngine starts from.
pub const BASE_SETTINGS: &str = include_str!("../../../../config/searxng/settings.yml");
/// Key of the settings file in the engine's ConfigMap.
pub const SETTINGS_KEY: &str = "settings.yml";
/// Pod-template annotation carrying the settings' sha256, so a settings change rolls the pods.
pub const SETTINGS_HASH_ANNOTATION: &str = "quarry.dev/settings-sha256";
/// How often an engine in use is looked at again (health into status, end of activity).
pub const ACTIVE_RECHECK: Duration = Duration::from_secs(30);
/// Least time between two `lastActivityTime` updates while runs keep the engine busy.
pub const ACTIVITY_RESOLUTION: Duration = Duration::from_secs(60);
/// Condition reasons of a SearchEngine.
pub mod reasons {
    /// Replicas are ready to serve.
    pub const READY: &str = "Ready";
    /// Scaled to zero; starts when a run needs it.
    pub const IDLE: &str = "Idle";
    /// Scaling up; replicas are not ready yet.
    pub const STARTING: &str = "Starting";
    /// The settings cannot be rendered.
    pub const SETTINGS_INVALID: &str = "SettingsInvalid";
    /// Nothing blocks progress.
    pub const RECONCILED: &str = "Reconciled";
    /// `spec.image` is not from a repository the operator allows.
    pub const IMAGE_NOT_ALLOWED: &str = "ImageNotAllowed";
}

/// A spec the controller cannot turn into objects; the message names the field.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SpecError {
    /// Condition reason: [`reasons::SETTINGS_INVALID`] or [`reasons::IMAGE_NOT_ALLOWED`].
    pub reason: &'static str,
    /// What is wrong, naming the field.
    pub message: String,
    /// The parser's or serializer's error behind it, if one failed.
    #[source]
    pub source: Option<SpecSource>,
}

/// The serde error behind a [`SpecError`].
#[derive(Debug, thiserror::Error)]
pub enum SpecSource {
    /// YAML (settings.yml).
    #[error(transparent)]
    Yaml(#[from] serde_yaml::Error),
    /// JSON (the spec's resources).
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl SpecError {
    /// Settings that cannot be rendered.
    pub fn settings(message: impl Into<String>) -> Self {
        Self {
            reason: reasons::SETTINGS_INVALID,
            message: message.into(),
            source: None,
        }
    }

    /// Settings that cannot be rendered because `source` failed.
    pub fn settings_from(message: impl Into<String>, source: impl Into<SpecSource>) -> Self {
        Self {
            source: Some(source.into()),
            ..Self::settings(message)
        }
    }

    /// The message with its source's, as a status condition and the log say it.
    pub fn detail(&self) -> String {
        match &self.source {
            Some(source) => format!("{}: {source}", self.message),
            None => self.message.clone(),
        }
    }
}

mod images;
mod settings;
pub use images::{
    DEFAULT_ALLOWED_IMAGES, SEARXNG_UID, image_allowed, image_refusal, normalize_image,
};
pub use settings::render_settings;
/// Non-terminal, unsuspended runs whose profile searches through the engine `name`.
pub fn active_runs(name: &str, runs: &[ResearchRun], profiles: &[ResearchProfile]) -> i32 {
    let uses_engine: BTreeMap<String, bool> = profiles
        .iter()
        .map(|p| {
            (
                p.name_any(),
                p.spec.search_target() == SearchTarget::Engine(name),
            )
        })
        .collect();
    runs.iter()
        .filter(|r| !r.is_finished() && !r.spec.suspend)
        .filter(|r| uses_engine.get(&r.spec.profile_ref).copied() == Some(true))
        .count() as i32
}

/// The scaling decision of one reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    /// Replicas the Deployment gets.
    pub replicas: i32,
    /// `lastActivityTime` to record.
    pub last_activity: Option<Time>,
    /// When to look again without a watch event.
    pub requeue: Option<Duration>,
}

/// Pure: replicas from activity. In use → `spec.replicas`; idle for less than `idle` since the
/// last activity → still `spec.replicas`, looked at again when the idle time is up; else 0.
pub fn scale(
    spec_replicas: i32,
    active: i32,
    last_activity: Option<&Time>,
    idle: Duration,
    now: &Time,
) -> Scale {
    if active > 0 {
        let fresh = last_activity.is_some_and(|t| {
            elapsed(t, now) < ACTIVITY_RESOLUTION.as_secs_f64() && elapsed(t, now) >= 0.0
        });
        return Scale {
            replicas: spec_replicas,
            last_activity: if fresh {
                last_activity.cloned()
            } else {
                Some(now.clone())
            },
            requeue: Some(ACTIVE_RECHECK),
        };
    }
    match last_activity {
        Some(t) if elapsed(t, now) < idle.as_secs_f64() => {
            let left = idle.as_secs_f64() - elapsed(t, now).max(0.0);
            Scale {
                replicas: spec_replicas,
                last_activity: Some(t.clone()),
                requeue: Some(Duration::from_secs_f64(left.max(1.0))),
            }
        }
        other => Scale {
            replicas: 0,
            last_activity: other.cloned(),
            requeue: None,
        },
    }
}

fn elapsed(from: &Time, to: &Time) -> f64 {
    (to.0.as_millisecond() - from.0.as_millisecond()) as f64 / 1000.0
}

/// Labels of every child object (and the pod selector).
pub fn labels(name: &str) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name", "searxng"),
        ("app.kubernetes.io/instance", name),
        ("app.kubernetes.io/component", "search"),
        ("app.kubernetes.io/managed-by", CONTROLLER_NAME),
        ("quarry.dev/search-engine", name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn selector(name: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "searxng",
        "app.kubernetes.io/instance": name,
    })
}

fn metadata(engine: &SearchEngine, owner: &OwnerReference) -> Result<Value, SpecError> {
    let name = engine.name_any();
    let namespace = engine
        .namespace()
        .ok_or_else(|| SpecError::settings("the SearchEngine has no namespace"))?;
    Ok(json!({
        "name": SearchEngine::child_name(&name),
        "namespace": namespace,
        "labels": labels(&name),
        "ownerReferences": [owner],
    }))
}

/// The ConfigMap, Service and Deployment of an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    /// Settings ConfigMap.
    pub config_map: Value,
    /// ClusterIP Service on port 8080.
    pub service: Value,
    /// The SearXNG Deployment.
    pub deployment: Value,
}

/// Pure: the desired children of `engine` at `replicas`, with `settings` rendered.
pub fn desired_children(
    engine: &SearchEngine,
    owner: &OwnerReference,
    settings: &str,
    replicas: i32,
) -> Result<Children, SpecError> {
    let name = engine.name_any();
    let child = SearchEngine::child_name(&name);
    let meta = metadata(engine, owner)?;
    let settings_hash = hex::encode(Sha256::digest(settings.as_bytes()));
    let resources = match &engine.spec.resources {
        Some(r) => serde_json::to_value(r)
            .map_err(|e| SpecError::settings_from("spec.resources cannot be serialized", e))?,
        None => json!({
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"memory": "1Gi"},
        }),
    };
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {SETTINGS_KEY: settings},
    });
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "ClusterIP",
            "selector": selector(&name),
            "ports": [{"name": "http", "port": SEARXNG_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    });
    let probe = |path: &str, period: i32| json!({"httpGet": {"path": path, "port": "http"}, "periodSeconds": period, "timeoutSeconds": 3});
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector(&name)},
            "template": {
                "metadata": {
                    "labels": labels(&name),
                    "annotations": {SETTINGS_HASH_ANNOTATION: settings_hash},
                },
                "spec": {
                    "automountServiceAccountToken": false,
                    // The operator's own hardening: SearXNG's image runs as its `searxng` user
                    // (977) and writes only to the emptyDirs below.
                    "securityContext": {
                        "runAsNonRoot": true,
                        "runAsUser": SEARXNG_UID,
                        "runAsGroup": SEARXNG_UID,
                        "fsGroup": SEARXNG_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [{
                        "name": "searxng",
                        "image": engine.spec.image,
                        "ports": [{"name": "http", "containerPort": SEARXNG_PORT, "protocol": "TCP"}],
                        "env": [
                            {"name": "SEARXNG_SETTINGS_PATH", "value": "/etc/quarry-searxng/settings.yml"},
                            // SearXNG's secret_key signs only its image-proxy and limiter links,
                            // which Quarry's JSON searches never use; it must merely not be the
                            // default. Each pod's UID (random, set by the API server) serves, so
                            // the operator writes no Secrets and needs only `get` on them.
                            {"name": "SEARXNG_SECRET", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                        ],
                        "readinessProbe": probe("/healthz", 5),
                        "livenessProbe": probe("/healthz", 20),
                        "resources": resources,
                        "securityContext": {
                            "runAsNonRoot": true,
                            "readOnlyRootFilesystem": true,
                            "allowPrivilegeEscalation": false,
                            "privileged": false,
                            "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "volumeMounts": [
                            {"name": "settings", "mountPath": "/etc/quarry-searxng", "readOnly": true},
                            // The image's entrypoint writes its defaults under /etc/searxng;
                            // Python and uWSGI write temporary files and caches under /tmp and
                            // /var/cache/searxng: with a read-only root these are emptyDirs.
                            {"name": "workdir", "mountPath": "/etc/searxng"},
                            {"name": "tmp", "mountPath": "/tmp"},
                            {"name": "cache", "mountPath": "/var/cache/searxng"},
                        ],
                    }],
                    "volumes": [
                        {"name": "settings", "configMap": {"name": child}},
                        {"name": "workdir", "emptyDir": {}},
                        {"name": "tmp", "emptyDir": {}},
                        {"name": "cache", "emptyDir": {}},
                    ],
                },
            },
        },
    });
    Ok(Children {
        config_map,
        service,
        deployment,
    })
}

/// Pure: the status an engine should have.
pub fn desired_status(
    engine: &SearchEngine,
    scale: &Scale,
    active: i32,
    ready_replicas: i32,
    health: Vec<EngineHealthStatus>,
    spec_error: Option<&SpecError>,
    now: &Time,
) -> SearchEngineStatus {
    let previous = engine.status.clone().unwrap_or_default();
    let generation = engine.metadata.generation;
    let mut conditions = previous.conditions.clone();
    let (ready, reason, message) = match spec_error {
        Some(e) if e.reason == reasons::IMAGE_NOT_ALLOWED => (
            ConditionStatus::False,
            reasons::IMAGE_NOT_ALLOWED,
            e.detail(),
        ),
        Some(e) => (
            ConditionStatus::False,
            reasons::SETTINGS_INVALID,
            format!("{}; fix the SearchEngine spec", e.detail()),
        ),
        None if scale.replicas == 0 => (
            ConditionStatus::True,
            reasons::IDLE,
            "scaled to zero: no active run uses this engine; it starts when one does".to_string(),
        ),
        None if ready_replicas >= 1 => (
            ConditionStatus::True,
            reasons::READY,
            format!(
                "{ready_replicas} of {} replicas ready for {active} active run(s)",
                scale.replicas
            ),
        ),
        None => (
            ConditionStatus::False,
            reasons::STARTING,
            format!(
                "scaling to {} replicas for {active} active run(s); waiting for readiness",
                scale.replicas
            ),
        ),
    };
    set_condition(
        &mut conditions,
        condition_types::READY,
        ready,
        reason,
        &message,
        generation,
        now,
    );
    let reconciling = reason == reasons::STARTING;
    set_condition(
        &mut conditions,
        condition_types::RECONCILING,
        if reconciling {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        if reconciling {
            reasons::STARTING
        } else {
            reasons::RECONCILED
        },
        if reconciling {
            "replicas are starting"
        } else {
            "the engine matches its spec"
        },
        generation,
        now,
    );
    let stalled = spec_error.is_some();
    set_condition(
        &mut conditions,
        condition_types::STALLED,
        if stalled {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        },
        if stalled { reason } else { reasons::RECONCILED },
        if stalled {
            &message
        } else {
            "nothing blocks the engine"
        },
        generation,
        now,
    );
    SearchEngineStatus {
        observed_generation: generation,
        conditions,
        replicas: scale.replicas,
        ready_replicas,
        url: engine
            .namespace()
            .map(|ns| SearchEngine::service_url(&engine.name_any(), &ns)),
        active_runs: active,
        last_activity_time: scale.last_activity.clone(),
        engines: health,
    }
}

/// The health book's records of an engine as status entries.
pub fn health_status(book: &HealthBook, backend: &str) -> Vec<EngineHealthStatus> {
    book.snapshot(backend)
        .into_iter()
        .map(|(name, h)| EngineHealthStatus {
            name,
            state: h.state.as_str().to_string(),
            consecutive_failures: h.consecutive_failures,
            last_error: h.last_error,
            since: Some(Time(system_time_to_timestamp(h.since))),
        })
        .collect()
}

fn system_time_to_timestamp(t: std::time::SystemTime) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::try_from(t).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// The health book key of the managed engine `name` in `namespace`.
pub fn backend_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// Shared state of the SearchEngine controller.
pub struct EngineContext {
    /// Kubernetes client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Operator metrics.
    pub metrics: Metrics,
    /// Engine health as the operator's searches see it.
    pub health: Arc<HealthBook>,
    /// Image repositories a SearchEngine may run ([`image_allowed`]).
    pub allowed_images: Vec<String>,
}

impl EngineContext {
    /// A context for `client`.
    pub fn new(client: Client, metrics: Metrics, health: Arc<HealthBook>) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            health,
            allowed_images: DEFAULT_ALLOWED_IMAGES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }

    /// The same context allowing images from `allowed` only (empty: the defaults).
    pub fn with_allowed_images(mut self, allowed: Vec<String>) -> Self {
        if !allowed.is_empty() {
            self.allowed_images = allowed;
        }
        self
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Reconciles one SearchEngine.
#[tracing::instrument(skip_all, fields(search_engine = %engine.name_any(), namespace = %engine.namespace().unwrap_or_default()))]
pub async fn reconcile(
    engine: Arc<SearchEngine>,
    ctx: Arc<EngineContext>,
) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = reconcile_inner(&engine, &ctx, &now()).await;
    ctx.metrics.record_reconcile_of(
        "searchengine",
        result.is_ok(),
        started.elapsed().as_secs_f64(),
    );
    result
}

/// One reconcile at time `now` (separate for tests).
pub async fn reconcile_inner(
    engine: &SearchEngine,
    ctx: &EngineContext,
    now: &Time,
) -> Result<Action, Error> {
    let name = engine.name_any();
    let namespace = engine
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    if engine.metadata.deletion_timestamp.is_some() {
        // Children go with it through their owner references.
        return Ok(Action::await_change());
    }
    let owner = engine
        .controller_owner_ref(&())
        .ok_or(Error::MissingMetadata("uid"))?;
    // Look up: who uses the engine.
    let runs: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
    let profiles: Api<ResearchProfile> = Api::namespaced(ctx.client.clone(), &namespace);
    let runs = runs
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing ResearchRuns in {namespace}")))?
        .items;
    let profiles = profiles
        .list(&ListParams::default())
        .await
        .map_err(kube_err(format!("listing ResearchProfiles in {namespace}")))?
        .items;
    let active = active_runs(&name, &runs, &profiles);
    let backend = backend_key(&namespace, &name);
    ctx.health.expect_engines(
        &backend,
        engine
            .spec
            .engines
            .iter()
            .filter(|e| !e.disabled)
            .map(|e| e.name.clone())
            .collect(),
    );
    // Validate and build.
    let idle = parse_duration(&engine.spec.idle_timeout)
        .unwrap_or(Duration::from_secs(600))
        .max(Duration::from_secs(1));
    let previous = engine.status.clone().unwrap_or_default();
    let decision = scale(
        engine.spec.replicas,
        active,
        previous.last_activity_time.as_ref(),
        idle,
        now,
    );
    // An image from a repository the operator does not allow is never deployed.
    let checked = match image_refusal(&engine.spec.image, &ctx.allowed_images) {
        Some(refusal) => Err(refusal),
        None => render_settings(engine),
    };
    let (ready_replicas, spec_error) = match checked
        .and_then(|settings| desired_children(engine, &owner, &settings, decision.replicas))
    {
        Ok(children) => (
            apply_children(ctx, engine, &namespace, children).await?,
            None,
        ),
        Err(e) => {
            warn!(search_engine = %name, error = %e.detail(), "settings cannot be rendered");
            (previous.ready_replicas, Some(e))
        }
    };
    let status = desired_status(
        engine,
        &decision,
        active,
        ready_replicas,
        health_status(&ctx.health, &backend),
        spec_error.as_ref(),
        now,
    );
    let newly_refused = find_condition(&status.conditions, condition_types::STALLED)
        .is_some_and(|c| c.reason == reasons::IMAGE_NOT_ALLOWED)
        && previous_stall_reason(engine) != Some(reasons::IMAGE_NOT_ALLOWED);
    if engine.status.as_ref() != Some(&status) {
        let api: Api<SearchEngine> = Api::namespaced(ctx.client.clone(), &namespace);
        let body = json!({
            "apiVersion": SearchEngine::api_version(&()),
            "kind": SearchEngine::kind(&()),
            "status": serde_json::to_value(&status).map_err(|source| Error::Serialize { what: "status", source })?,
        });
        api.patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await
        .map_err(kube_err(format!(
            "patching status of SearchEngine {namespace}/{name}"
        )))?;
    }
    if newly_refused && let Some(e) = &spec_error {
        publish_refusal_event(ctx, engine, &e.detail()).await;
    }
    // A refused image was not deployed: there is no scaling to tell of.
    let deployed = spec_error
        .as_ref()
        .is_none_or(|e| e.reason != reasons::IMAGE_NOT_ALLOWED);
    if deployed && (previous.replicas != decision.replicas || engine.status.is_none()) {
        publish_scale_event(ctx, engine, previous.replicas, decision.replicas, active).await;
    }
    Ok(match (decision.requeue, &spec_error) {
        (_, Some(_)) => Action::requeue(Duration::from_secs(60)),
        (Some(after), None) => Action::requeue(after),
        (None, None) => Action::requeue(Duration::from_secs(300)),
    })
}

/// Applies the ConfigMap, Service and Deployment; returns the Deployment's ready replicas.
async fn apply_children(
    ctx: &EngineContext,
    engine: &SearchEngine,
    namespace: &str,
    children: Children,
) -> Result<i32, Error> {
    let child = SearchEngine::child_name(&engine.name_any());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    config_maps
        .patch(&child, &params, &Patch::Apply(children.config_map))
        .await
        .map_err(kube_err(format!("applying ConfigMap {namespace}/{child}")))?;
    let services: Api<Service> = Api::namespaced(ctx.client.clone(), namespace);
    services
        .patch(&child, &params, &Patch::Apply(children.service))
        .await
        .map_err(kube_err(format!("applying Service {namespace}/{child}")))?;
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), namespace);
    let applied = deployments
        .patch(&child, &params, &Patch::Apply(children.deployment))
        .await
        .map_err(kube_err(format!("applying Deployment {namespace}/{child}")))?;
    Ok(applied
        .status
        .and_then(|s| s.ready_replicas)
        .unwrap_or_default())
}

/// The reason of the engine's current `Stalled=True` condition, if any.
fn previous_stall_reason(engine: &SearchEngine) -> Option<&str> {
    engine
        .status
        .as_ref()
        .and_then(|s| find_condition(&s.conditions, condition_types::STALLED))
        .filter(|c| c.status == "True")
        .map(|c| c.reason.as_str())
}

/// A Warning Event saying why the engine's image is refused (once per refusal).
async fn publish_refusal_event(ctx: &EngineContext, engine: &SearchEngine, note: &str) {
    warn!(search_engine = %engine.name_any(), "{note}");
    let event = Event {
        type_: EventType::Warning,
        reason: reasons::IMAGE_NOT_ALLOWED.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &engine.object_ref(&())).await {
        warn!(error = %e, "publishing event failed");
    }
}

async fn publish_scale_event(
    ctx: &EngineContext,
    engine: &SearchEngine,
    before: i32,
    after: i32,
    active: i32,
) {
    let (reason, note) = if after > before {
        (
            "ScaledUp",
            format!("scaled SearXNG from {before} to {after} replicas for {active} active run(s)"),
        )
    } else if after < before {
        (
            "ScaledDown",
            format!("scaled SearXNG from {before} to {after} replicas: idle"),
        )
    } else {
        (
            "Configured",
            format!("SearXNG configured with {after} replicas"),
        )
    };
    info!(search_engine = %engine.name_any(), reason, "{note}");
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: "Scale".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &engine.object_ref(&())).await {
        warn!(error = %e, "publishing event failed");
    }
}

/// Requeue policy after a reconcile error.
pub fn error_policy(engine: Arc<SearchEngine>, error: &Error, _ctx: Arc<EngineContext>) -> Action {
    warn!(search_engine = %engine.name_any(), error = %error, "reconcile failed");
    Action::requeue(Duration::from_secs(10))
}

/// Every SearchEngine in `namespace` known to `store` (runs and profiles map to these: a
/// namespace has few engines, and a run may change which one is busy).
fn engines_in(
    store: &kube::runtime::reflector::Store<SearchEngine>,
    namespace: Option<String>,
) -> Vec<ObjectRef<SearchEngine>> {
    store
        .state()
        .iter()
        .filter(|e| e.namespace() == namespace)
        .map(|e| ObjectRef::from_obj(e.as_ref()))
        .collect()
}

/// Runs the SearchEngine controller until shutdown.
pub async fn run_controller(client: Client, namespace: Option<String>, ctx: Arc<EngineContext>) {
    let (engines, deployments, runs, profiles): (
        Api<SearchEngine>,
        Api<Deployment>,
        Api<ResearchRun>,
        Api<ResearchProfile>,
    ) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
            Api::all(client.clone()),
        ),
    };
    let controller = Controller::new(engines, watcher::Config::default());
    let by_run = controller.store();
    let by_profile = controller.store();
    controller
        .owns(
            deployments,
            watcher::Config::default().labels("app.kubernetes.io/name=searxng"),
        )
        .watches(runs, watcher::Config::default(), move |run: ResearchRun| {
            engines_in(&by_run, run.namespace())
        })
        .watches(
            profiles,
            watcher::Config::default(),
            move |profile: ResearchProfile| engines_in(&by_profile, profile.namespace()),
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "search engine controller event");
            }
        })
        .await;
}

#[cfg(test)]
mod tests;
