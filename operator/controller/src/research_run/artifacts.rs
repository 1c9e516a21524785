//! Where a run's artifacts go, and their cleanup: the object store a run may use
//! (its profile's `objectStore` with the credentials Secret read, or the operator-wide default),
//! the `quarry.dev/artifacts` finalizer that runs with object-store artifacts carry, and the
//! cleanup that deletes those objects when the run is deleted.
//!
//! The finalizer is added just before a run's first object write ([`FinalizerGuard`], the hook
//! the launcher builds the run's store with), so runs that never write an object are never held
//! up by it. Cleanup and
//! the finalizer's removal go through kube-runtime's `finalizer` helper.
//!
//! The cleanup needs the profile's `objectStore` and its credentials Secret, which a namespace
//! deletion removes together with the runs and in no set order. Holding a finalizer on the
//! user's Secret until its runs are gone (as Kubernetes protects a PVC in use) would need `patch`
//! on Secrets and would strand every Secret if the operator were uninstalled, so instead:
//! - the guard records where the run's objects go ([`LOCATION_ANNOTATION`]) with the finalizer;
//! - the store a run was launched with is remembered in memory ([`LaunchedStores`]), so the
//!   cleanup still reaches the objects when the profile or Secret went first;
//! - when neither can be had (the operator restarted in between) and the namespace is being
//!   deleted, nothing can bring them back: the finalizer is removed with a Warning Event naming
//!   the objects left (on the run and on its Namespace, whose Events outlive it) instead of
//!   holding the namespace in Terminating forever. Outside a namespace deletion a missing
//!   profile or Secret stays a stall, since the user can restore it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{self, finalizer};
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{info, warn};

use super::status::RunView;
use super::status_writer::apply_status;
use super::{Context, Stall};
use crate::error::{Error, kube_err};
use crate::store::object::{
    Bucket, ObjectStoreConfig, ObjectStoreError, RunLayout, SecretValue, check_options, parse_url,
};
use crate::store::routed::{BeforeFirstObject, ReportSlot};
use quarry_api::{ObjectStoreSpec, ResearchProfile, ResearchRun, reasons};
use quarry_engine::store::StoreError;

/// Finalizer on runs whose artifacts are (partly) in an object store.
pub const ARTIFACTS_FINALIZER: &str = "quarry.dev/artifacts";

/// Annotation naming where a run's objects are (`s3://bucket/prefix/namespace/run/`), set with
/// the finalizer so that objects a cleanup cannot reach can still be named.
pub const LOCATION_ANNOTATION: &str = "quarry.dev/artifacts-location";

/// The object store each run was launched with, by run UID: the cleanup's way to the objects
/// when the profile or its Secret was deleted before the run (a namespace deletion). Entries go
/// when the run's cleanup ends; they hold credentials the operator read anyway, in memory only.
#[derive(Clone, Debug, Default)]
pub struct LaunchedStores(Arc<Mutex<HashMap<String, ObjectStoreConfig>>>);

impl LaunchedStores {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, ObjectStoreConfig>> {
        // A poisoned lock means a panic mid-insert of a plain map, which is still consistent.
        self.0.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// Remembers the store run `uid` is launched with.
    pub fn remember(&self, uid: &str, config: &ObjectStoreConfig) {
        self.lock().insert(uid.to_owned(), config.clone());
    }

    /// The store run `uid` was launched with by this process, if any.
    pub fn get(&self, uid: &str) -> Option<ObjectStoreConfig> {
        self.lock().get(uid).cloned()
    }

    /// Forgets run `uid` (its cleanup ended).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }
}

/// Where a run's artifacts go, resolved by the controller and handed to the launcher.
#[derive(Clone, Debug, Default)]
pub struct ArtifactTarget {
    /// The object store the run may use, credentials read; `None` without one.
    pub object_store: Option<ObjectStoreConfig>,
    /// Where the run's store put the report, read by the status writer.
    pub report: ReportSlot,
}

/// Pure: whether the run carries the artifacts finalizer.
pub fn has_finalizer(run: &ResearchRun) -> bool {
    run.finalizers().iter().any(|f| f == ARTIFACTS_FINALIZER)
}

/// Pure: the object-store layout of a run (`<prefix>/<namespace>/<run>/`).
pub fn layout(run: &ResearchRun) -> Result<RunLayout, Error> {
    Ok(RunLayout {
        prefix: run.spec.report.prefix.clone(),
        namespace: run.namespace().ok_or(Error::MissingMetadata("namespace"))?,
        run: run.name_any(),
        uid: run.uid().ok_or(Error::MissingMetadata("uid"))?,
        query: run.spec.query.clone(),
    })
}

/// Pure: a profile's `objectStore` with its credentials Secret's data (`None` when it names no
/// Secret) as a store configuration, or why it cannot be used. Secret keys are checked against
/// the store's options so a misspelt key is named; values are never shown.
pub fn object_store_config(
    spec: &ObjectStoreSpec,
    secret: Option<&BTreeMap<String, ByteString>>,
    profile: &str,
) -> Result<ObjectStoreConfig, Stall> {
    let origin = format!("ResearchProfile \"{profile}\" objectStore");
    let invalid = |message: String| Stall {
        reason: reasons::OBJECT_STORE_INVALID,
        message,
    };
    let (kind, _, _) = parse_url(&spec.url).map_err(|e| {
        invalid(format!(
            "{origin}.url {:?} is not usable: {e}; use s3://bucket/prefix, gs://bucket/prefix or az://container/prefix",
            spec.url
        ))
    })?;
    let secret_name = spec
        .credentials_secret_ref
        .as_ref()
        .map(|r| r.name.as_str())
        .unwrap_or_default();
    let data = secret.cloned().unwrap_or_default();
    check_options(kind, data.keys()).map_err(|key| {
        invalid(format!(
            "Secret \"{secret_name}\" key \"{key}\" ({origin}.credentialsSecretRef) is not an option of the {} object store; rename it to one of its options, for example {}",
            kind.name(),
            kind.examples()
        ))
    })?;
    let mut options = Vec::new();
    for (key, value) in data {
        let value = String::from_utf8(value.0).map_err(|_| {
            invalid(format!(
                "Secret \"{secret_name}\" key \"{key}\" ({origin}.credentialsSecretRef) is not UTF-8 text"
            ))
        })?;
        options.push((key.to_ascii_lowercase(), SecretValue::new(value.trim())));
    }
    Ok(ObjectStoreConfig {
        url: spec.url.clone(),
        endpoint: spec.endpoint.clone(),
        region: spec.region.clone(),
        allow_http: spec.allow_http,
        options,
        from_env: false,
        origin,
    })
}

/// Pure: the host an object store's credentials go to: its `endpoint`'s, else the public
/// service's domain (covered by an opt-in entry for it or a parent domain).
pub fn object_store_host(spec: &ObjectStoreSpec) -> String {
    use crate::store::object::StoreKind;
    if let Some(endpoint) = &spec.endpoint {
        return super::url_host(endpoint);
    }
    match parse_url(&spec.url).map(|(kind, _, _)| kind) {
        Ok(StoreKind::S3) => "s3.amazonaws.com".into(),
        Ok(StoreKind::Gcs) => "storage.googleapis.com".into(),
        Ok(StoreKind::Azure) => "blob.core.windows.net".into(),
        Err(_) => super::url_host(&spec.url),
    }
}

/// Why a credentials Secret could not be read.
#[derive(Debug)]
pub enum SecretLookup {
    /// The API call failed.
    Kube(kube::Error),
    /// The Secret does not exist, or has not opted in: the stall to show.
    Missing(Stall),
}

/// The data of `spec`'s credentials Secret (`None` when it names none), `stringData` included.
pub async fn credentials(
    client: &Client,
    spec: &ObjectStoreSpec,
    namespace: &str,
    profile_name: &str,
) -> Result<Option<BTreeMap<String, ByteString>>, SecretLookup> {
    let Some(secret_ref) = &spec.credentials_secret_ref else {
        return Ok(None);
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = secrets
        .get_opt(&secret_ref.name)
        .await
        .map_err(SecretLookup::Kube)?
        .ok_or_else(|| {
            SecretLookup::Missing(Stall {
                reason: reasons::SECRET_NOT_FOUND,
                message: format!(
                    "Secret \"{}\" not found in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" objectStore.credentialsSecretRef); create it with the object store's credentials as keys (for example aws_access_key_id and aws_secret_access_key)",
                    secret_ref.name
                ),
            })
        })?;
    super::opted_in(
        &secret,
        &object_store_host(spec),
        profile_name,
        "objectStore.credentialsSecretRef",
    )
    .map_err(SecretLookup::Missing)?;
    let mut data = secret.data.unwrap_or_default();
    for (k, v) in secret.string_data.unwrap_or_default() {
        data.entry(k).or_insert(ByteString(v.into_bytes()));
    }
    Ok(Some(data))
}

/// The object store a run of `profile` may use: the profile's own (its Secret read), else the
/// operator-wide default, else none. A missing or unusable Secret is a stall.
pub async fn resolve_object_store(
    ctx: &Context,
    profile: &ResearchProfile,
    namespace: &str,
) -> Result<Result<Option<ObjectStoreConfig>, Stall>, Error> {
    let profile_name = profile.name_any();
    let Some(spec) = &profile.spec.object_store else {
        return Ok(Ok(ctx.default_object_store.clone()));
    };
    let data = match credentials(&ctx.client, spec, namespace, &profile_name).await {
        Ok(data) => data,
        Err(SecretLookup::Missing(stall)) => return Ok(Err(stall)),
        Err(SecretLookup::Kube(source)) => {
            return Err(Error::Kube {
                action: format!(
                    "reading the objectStore credentials Secret of ResearchProfile {namespace}/{profile_name}"
                ),
                source,
            });
        }
    };
    Ok(object_store_config(spec, data.as_ref(), &profile_name).map(Some))
}

/// Pure: the stall for an object store that cannot be used with its configuration.
pub fn probe_stall(config: &ObjectStoreConfig, error: &ObjectStoreError) -> Stall {
    let fix = if config.from_env {
        "fix the credentials in the operator's environment (AWS_*, GOOGLE_*, AZURE_*)"
    } else {
        "fix the keys of the credentials Secret"
    };
    match error {
        ObjectStoreError::AccessDenied { url, message } => Stall {
            reason: reasons::OBJECT_STORE_ACCESS_DENIED,
            message: format!(
                "the object store at {url} refused the credentials of {}: {message}; {fix} and the run starts",
                config.origin
            ),
        },
        ObjectStoreError::BucketNotFound { url, message } => Stall {
            reason: reasons::OBJECT_STORE_UNAVAILABLE,
            message: format!(
                "the bucket of {} ({url}) does not exist: {message}; create it or fix the url",
                config.origin
            ),
        },
        ObjectStoreError::Unavailable { url, message } => Stall {
            reason: reasons::OBJECT_STORE_UNAVAILABLE,
            message: format!(
                "the object store of {} ({url}) is not reachable: {message}; the run starts once it answers",
                config.origin
            ),
        },
        other => Stall {
            reason: reasons::OBJECT_STORE_INVALID,
            message: other.to_string(),
        },
    }
}

/// Adds the artifacts finalizer to a run before its first object write, through kube-runtime's
/// `finalizer` helper (which adds it to a run that lacks it and does nothing else).
pub struct FinalizerGuard {
    api: Api<ResearchRun>,
    name: String,
    location: Option<String>,
}

impl FinalizerGuard {
    /// The guard of run `name` in `namespace`, whose objects go under `location` (recorded in
    /// [`LOCATION_ANNOTATION`] before the finalizer is added).
    pub fn new(client: Client, namespace: &str, name: &str, location: Option<String>) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            location,
        }
    }

    /// The guard as the store's hook before its first object write.
    pub fn into_hook(self) -> BeforeFirstObject {
        let guard = Arc::new(self);
        Arc::new(move || {
            let guard = guard.clone();
            Box::pin(async move { guard.ensure().await })
        })
    }

    /// Adds the finalizer unless the run carries it; fails when the run is being deleted.
    pub async fn ensure(&self) -> Result<(), StoreError> {
        let failed = |message: String| StoreError::Io {
            key: String::new(),
            message,
        };
        let run = self
            .api
            .get(&self.name)
            .await
            .map_err(|e| failed(format!("reading ResearchRun {}: {e}", self.name)))?;
        if run.metadata.deletion_timestamp.is_some() {
            // A finalizer cannot be added any more: writing now could leave objects behind.
            return Err(failed(format!(
                "ResearchRun {} is being deleted; nothing more is written to the object store",
                self.name
            )));
        }
        if has_finalizer(&run) {
            return Ok(());
        }
        if let Some(location) = &self.location {
            let patch =
                serde_json::json!({"metadata": {"annotations": {LOCATION_ANNOTATION: location}}});
            self.api
                .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| failed(format!("annotating ResearchRun {}: {e}", self.name)))?;
        }
        finalizer(&self.api, ARTIFACTS_FINALIZER, Arc::new(run), |_| async {
            Ok::<_, StoreError>(Action::await_change())
        })
        .await
        .map_err(|e| failed(format!("adding finalizer {ARTIFACTS_FINALIZER}: {e}")))?;
        info!(run = %self.name, "added finalizer {ARTIFACTS_FINALIZER} before the first object write");
        Ok(())
    }
}

/// Maps the helper's error onto the reconciler's.
pub fn finalizer_error(e: finalizer::Error<Error>) -> Error {
    match e {
        finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e) => e,
        finalizer::Error::AddFinalizer(source) => Error::Kube {
            action: format!("adding finalizer {ARTIFACTS_FINALIZER}"),
            source,
        },
        finalizer::Error::RemoveFinalizer(source) => Error::Kube {
            action: format!("removing finalizer {ARTIFACTS_FINALIZER}"),
            source,
        },
        finalizer::Error::UnnamedObject => Error::MissingMetadata("name"),
        finalizer::Error::InvalidFinalizer => Error::MissingMetadata("finalizers"),
    }
}

/// Pure: the message of a failed cleanup, with the way out.
pub fn cleanup_failed_message(run: &ResearchRun, what: &str) -> String {
    format!(
        "{what}; the run is kept until its object-store artifacts are deleted (retried every 10s). Fix the object store or its credentials, or delete the run and keep the objects with: kubectl patch researchrun {} -n {} --type=json -p '[{{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}}]'",
        run.name_any(),
        run.namespace().unwrap_or_default()
    )
}

/// The finalizer's cleanup: deletes the run's objects; or, when they can no longer be reached
/// because the run's namespace is being deleted, leaves them with a Warning Event; or marks the
/// run stalled (with a Warning Event) and fails so the deletion is retried.
pub async fn cleanup(run: Arc<ResearchRun>, ctx: &Context) -> Result<Action, Error> {
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let uid = run.uid().ok_or(Error::MissingMetadata("uid"))?;
    ctx.registry.forget(&uid);
    let outcome = match reach_objects(&run, ctx, &namespace, &uid).await? {
        Reach::Store(config) => delete_objects(&run, &config).await?,
        Reach::Gone(why) if namespace_terminating(ctx, &namespace).await => {
            leave_objects(&run, ctx, &namespace, &why).await;
            ctx.launched_stores.forget(&uid);
            return Ok(Action::await_change());
        }
        Reach::Gone(why) | Reach::Unusable(why) => Err(why),
    };
    match outcome {
        Ok((count, url)) => {
            ctx.launched_stores.forget(&uid);
            info!(run = %run.name_any(), namespace = %namespace, objects = count, "deleted the run's object-store artifacts");
            let event = Event {
                type_: EventType::Normal,
                reason: reasons::ARTIFACTS_DELETED.into(),
                note: Some(format!("deleted {count} objects under {url}")),
                action: "Cleanup".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &run.object_ref(&())).await {
                warn!(run = %run.name_any(), error = %e, "publishing event failed");
            }
            Ok(Action::await_change())
        }
        Err(what) => {
            let message = cleanup_failed_message(&run, &what);
            warn!(run = %run.name_any(), namespace = %namespace, "{message}");
            apply_status(ctx, &run, RunView::CleanupFailed { message: &message }).await?;
            Err(Error::ArtifactCleanup(message))
        }
    }
}

/// How the cleanup can reach a run's objects.
enum Reach {
    /// Through this store.
    Store(ObjectStoreConfig),
    /// Not at all: the profile or its credentials Secret no longer exists (why, as a sentence).
    Gone(String),
    /// Not with the configuration as it is now (why, with the fix).
    Unusable(String),
}

/// The store of the run's objects: its profile's as it is now, else the one the run was
/// launched with in this process.
async fn reach_objects(
    run: &ResearchRun,
    ctx: &Context,
    namespace: &str,
    uid: &str,
) -> Result<Reach, Error> {
    let profile_name = &run.spec.profile_ref;
    let profiles: Api<ResearchProfile> = Api::namespaced(ctx.client.clone(), namespace);
    let profile = profiles
        .get_opt(profile_name)
        .await
        .map_err(kube_err(format!(
            "reading ResearchProfile {namespace}/{profile_name}"
        )))?;
    let reach = match profile {
        Some(profile) => match resolve_object_store(ctx, &profile, namespace).await? {
            Ok(Some(config)) => Reach::Store(config),
            Ok(None) => Reach::Unusable(format!(
                "ResearchProfile \"{profile_name}\" no longer configures an object store (and the operator has no default), so the run's objects cannot be reached; restore its objectStore"
            )),
            Err(stall) if stall.reason == reasons::SECRET_NOT_FOUND => Reach::Gone(stall.message),
            Err(stall) => Reach::Unusable(stall.message),
        },
        None => Reach::Gone(format!(
            "ResearchProfile \"{profile_name}\" (spec.profileRef) no longer exists, so where the run's objects are and their credentials are unknown; recreate it"
        )),
    };
    Ok(match (reach, ctx.launched_stores.get(uid)) {
        (Reach::Store(config), _) => Reach::Store(config),
        (_, Some(launched)) => {
            info!(run = %run.name_any(), namespace = %namespace, "the run's profile or credentials are not usable any more; deleting its objects with the store it was launched with");
            Reach::Store(launched)
        }
        (why, None) => why,
    })
}

/// Whether `namespace` is being deleted (an unreadable namespace counts as not: the cleanup then
/// stalls, which can be fixed, rather than leaving objects behind).
async fn namespace_terminating(ctx: &Context, namespace: &str) -> bool {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    match namespaces.get_opt(namespace).await {
        Ok(Some(ns)) => ns.metadata.deletion_timestamp.is_some(),
        Ok(None) => true,
        Err(e) => {
            warn!(namespace = %namespace, error = %e, "could not read the namespace; treating it as not being deleted");
            false
        }
    }
}

/// Pure: where a run's objects are, as recorded on it (the guard's annotation, else its report's
/// directory), else as far as is known without its profile.
pub fn recorded_location(run: &ResearchRun) -> String {
    if let Some(location) = run.annotations().get(LOCATION_ANNOTATION) {
        return location.clone();
    }
    let report = run
        .status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .and_then(|r| r.object_url.as_deref());
    if let Some(url) = report
        && let Some((dir, _)) = url.rsplit_once('/')
    {
        return format!("{dir}/");
    }
    let prefix = run
        .spec
        .report
        .prefix
        .as_deref()
        .map(|p| format!("{}/", p.trim_matches('/')))
        .unwrap_or_default();
    format!(
        "{prefix}{}/{}/ in the object store of ResearchProfile \"{}\"",
        run.namespace().unwrap_or_default(),
        run.name_any(),
        run.spec.profile_ref
    )
}

/// Pure: the Warning of a run whose objects were left because its namespace is being deleted.
pub fn left_message(run: &ResearchRun, why: &str) -> String {
    format!(
        "the objects of ResearchRun {}/{} under {} were left in place: its namespace is being deleted and {why}; the finalizer {ARTIFACTS_FINALIZER} was removed so the namespace can go. Delete them with the object store's own tools",
        run.namespace().unwrap_or_default(),
        run.name_any(),
        recorded_location(run)
    )
}

/// Removes nothing from the object store and says so: a Warning Event on the run and on its
/// Namespace (that one outlives the namespace's own Events), and the log.
async fn leave_objects(run: &ResearchRun, ctx: &Context, namespace: &str, why: &str) {
    let message = left_message(run, why);
    warn!(run = %run.name_any(), namespace = %namespace, "{message}");
    let event = Event {
        type_: EventType::Warning,
        reason: reasons::ARTIFACTS_LEFT.into(),
        note: Some(message),
        action: "Cleanup".into(),
        secondary: None,
    };
    let namespace_ref = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Namespace".into()),
        name: Some(namespace.to_owned()),
        ..Default::default()
    };
    for reference in [run.object_ref(&()), namespace_ref] {
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            warn!(run = %run.name_any(), error = %e, "publishing event failed");
        }
    }
}

/// Deletes the run's objects: `Ok(Ok((count, url)))`, or `Ok(Err(what failed))`.
async fn delete_objects(
    run: &ResearchRun,
    config: &ObjectStoreConfig,
) -> Result<Result<(usize, String), String>, Error> {
    let store = match Bucket::connect(config) {
        Ok(bucket) => bucket.for_run(&layout(run)?),
        Err(e) => return Ok(Err(e.to_string())),
    };
    let url = store.dir_url();
    Ok(match store.delete_all().await {
        Ok(count) => Ok((count, url)),
        Err(e) => Err(format!("deleting the objects under {url} failed: {e}")),
    })
}

#[cfg(test)]
mod tests;
