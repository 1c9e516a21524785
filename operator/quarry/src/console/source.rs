//! Where the console's runs come from: a cluster (as the user's kubeconfig identity, or as the
//! operator after the console authorised the caller) or a tree of standalone `quarry run` state
//! directories. Both give [`RunView`]s and the stored artifacts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use serde_json::Value;

use quarry_api::ResearchRun;
use quarry_engine::research::shell::executor::load_checkpoint;
use quarry_engine::store::ArtifactStore;
use quarry_engine::store::keys::{
    CHECKPOINT_KEY, CHECKPOINT_SLOTS, EVENTS_KEY, FINDINGS_KEY, REPORT_KEY,
};
use quarry_engine::store::local::LocalStore;
use quarry_operator::store::configmap::{
    configmap_value, events_configmap_name, report_configmap_name,
};

use super::model::{self, RunView, STANDALONE};
use crate::cli::approval::approve_patch;
use crate::cli::runs::{cancel_patch, generated_prefix};

/// Field manager of the console's writes.
pub const FIELD_MANAGER: &str = "quarry-console";
/// Most events shown on a run page (the newest).
pub const MAX_EVENTS: usize = 500;

/// Why the console cannot show or do something; each message is for a person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// RBAC said no.
    #[error("{0}")]
    Forbidden(String),
    /// No such run.
    #[error("{0}")]
    NotFound(String),
    /// The API server refused the object (schema, CEL rules).
    #[error("{0}")]
    Invalid(String),
    /// This source cannot do it (standalone runs are read-only here).
    #[error("{0}")]
    Unsupported(String),
    /// The cluster or the files could not be read.
    #[error("{0}")]
    Unavailable(String),
}

/// A run's stored artifacts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Artifacts {
    /// `report.md`, once stored.
    pub report: Option<String>,
    /// `findings.json`, once stored.
    pub findings: Option<Value>,
    /// The stored event log (`events.jsonl`), oldest first.
    pub events: Vec<Value>,
}

/// A new run from the console's form.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct NewRun {
    /// The question.
    pub query: String,
    /// quick or deep.
    #[serde(default)]
    pub mode: String,
    /// The ResearchProfile.
    #[serde(default)]
    pub profile: String,
    /// Comma-separated outputs (study, ideas, implementations).
    #[serde(default)]
    pub outputs: String,
    /// Cost limit, USD.
    #[serde(default)]
    pub max_cost_usd: String,
    /// Time limit, e.g. 30m.
    #[serde(default)]
    pub timeout: String,
}

impl NewRun {
    /// Pure: the ResearchRun this form asks for, in `namespace` (the API server validates it).
    pub fn to_run(&self, namespace: &str) -> Result<ResearchRun, SourceError> {
        let query = self.query.trim();
        if query.len() < 3 {
            return Err(SourceError::Invalid(
                "the question needs at least 3 characters".into(),
            ));
        }
        let mut spec = serde_json::json!({"query": query});
        let set = |spec: &mut Value, key: &str, value: &str| {
            let value = value.trim();
            if !value.is_empty() {
                spec[key] = Value::String(value.to_string());
            }
        };
        set(&mut spec, "mode", &self.mode);
        set(&mut spec, "profileRef", &self.profile);
        let outputs: Vec<&str> = self
            .outputs
            .split(',')
            .map(str::trim)
            .filter(|o| !o.is_empty())
            .collect();
        if !outputs.is_empty() {
            spec["outputs"] = serde_json::json!(outputs);
        }
        let mut limits = serde_json::json!({});
        set(&mut limits, "maxCostUSD", &self.max_cost_usd);
        set(&mut limits, "timeout", &self.timeout);
        if limits.as_object().is_some_and(|l| !l.is_empty()) {
            spec["limits"] = limits;
        }
        let object = serde_json::json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"generateName": generated_prefix(query), "namespace": namespace},
            "spec": spec,
        });
        serde_json::from_value(object).map_err(|e| SourceError::Invalid(e.to_string()))
    }
}

/// A source of runs.
pub trait RunSource: Send + Sync {
    /// What the console is looking at, for the page header.
    fn describe(&self) -> String;
    /// The namespace shown when none is asked for (`None`: all).
    fn default_namespace(&self) -> Option<String>;
    /// Runs of `namespace` (`None`: all namespaces).
    fn list<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<RunView>, SourceError>>;
    /// One run.
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<RunView, SourceError>>;
    /// The run's stored report, findings and event log.
    fn artifacts<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Artifacts, SourceError>>;
    /// Creates a run; returns its name.
    fn create<'a>(
        &'a self,
        namespace: &'a str,
        run: &'a NewRun,
    ) -> BoxFuture<'a, Result<String, SourceError>>;
    /// Cancels a run.
    fn cancel<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>>;
    /// Approves a run's plan (`spec.approval.approved`); rejecting a plan is cancelling the run.
    fn approve<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>>;
    /// Every change to a run of `namespace` (`None`: all) from now on, as it happens.
    fn watch(&self, namespace: Option<String>) -> BoxStream<'static, RunView>;
    /// Whether runs can be created and cancelled here.
    fn writable(&self) -> bool;
    /// This source acting as the person whose bearer token `token` is, so the API server
    /// authorizes, admits and audits them; `None` when the source already acts as its user
    /// (the local console) or reads files.
    fn as_person<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn RunSource>>, SourceError>> {
        let _ = token;
        Box::pin(async { Ok(None) })
    }
}

/// Pure: a Kubernetes error as a message a person can act on.
pub fn kube_error(e: kube::Error, action: &str, namespace: &str) -> SourceError {
    match e {
        kube::Error::Api(s) if s.code == 403 || s.code == 401 => SourceError::Forbidden(format!(
            "Kubernetes refused to {action} in namespace {namespace}: {}. Ask a cluster admin to bind you the quarry-view ClusterRole (to read runs) or quarry-edit (to create and cancel them) in that namespace.",
            s.message
        )),
        kube::Error::Api(s) if s.code == 404 => SourceError::NotFound(format!(
            "{action} in namespace {namespace}: not found ({})",
            s.message
        )),
        kube::Error::Api(s) if s.code == 400 || s.code == 422 => {
            SourceError::Invalid(format!("the API server refused the run: {}", s.message))
        }
        e => SourceError::Unavailable(format!("cannot {action}: {e}")),
    }
}

/// Runs on a cluster, read and written with one client's identity.
#[derive(Clone)]
pub struct KubeSource {
    client: Client,
    /// Shown in the header (the cluster URL and whose identity).
    label: String,
    /// The kubeconfig context's namespace.
    namespace: String,
    /// In the cluster: how to reach the API server as a signed-in person (the operator's own
    /// connection settings, found once, with the person's token instead of the operator's).
    people: Option<Arc<tokio::sync::OnceCell<kube::Config>>>,
}

impl KubeSource {
    /// A source on `client`; `label` says which cluster and identity, `namespace` is shown
    /// first.
    pub fn new(client: Client, label: String, namespace: String) -> Self {
        Self {
            client,
            label,
            namespace,
            people: None,
        }
    }

    /// Lets [`RunSource::as_person`] act as signed-in people, connecting as `config` does
    /// (`None`: as `kube::Config::infer` finds it when first needed) but with their token.
    pub fn for_people(mut self, config: Option<kube::Config>) -> Self {
        self.people = Some(Arc::new(tokio::sync::OnceCell::new_with(config)));
        self
    }

    /// Pure: `base` with its credentials replaced by `token` alone.
    pub fn person_config(base: &kube::Config, token: &str) -> kube::Config {
        let mut config = base.clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..kube::config::AuthInfo::default()
        };
        config
    }

    fn api(&self, namespace: Option<&str>) -> Api<ResearchRun> {
        match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// Applies a merge patch to a run's spec as this source's identity (cancel, approve: the
    /// same patches `quarry cancel` and `quarry approve` send).
    async fn patch_run(
        &self,
        namespace: &str,
        name: &str,
        patch: Value,
    ) -> Result<(), SourceError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        self.api(Some(namespace))
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .map_err(|e| kube_error(e, &format!("patch researchrun {name}"), namespace))?;
        Ok(())
    }

    async fn configmap(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ConfigMap>, SourceError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| kube_error(e, &format!("read ConfigMap {name}"), namespace))
    }
}

fn value_of(cm: &ConfigMap, key: &str) -> Option<Vec<u8>> {
    configmap_value(cm, key, key).ok().flatten()
}

fn jsonl(bytes: &[u8]) -> Vec<Value> {
    let events: Vec<Value> = String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let skip = events.len().saturating_sub(MAX_EVENTS);
    events.into_iter().skip(skip).collect()
}

impl RunSource for KubeSource {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn default_namespace(&self) -> Option<String> {
        Some(self.namespace.clone())
    }

    fn list<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<RunView>, SourceError>> {
        Box::pin(async move {
            let now = Timestamp::now();
            let mut runs = self
                .api(namespace)
                .list(&ListParams::default())
                .await
                .map_err(|e| kube_error(e, "list researchruns", namespace.unwrap_or("(all)")))?
                .items;
            runs.sort_by(|a, b| {
                (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                    .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
            });
            Ok(runs.iter().map(|r| model::from_cluster(r, now)).collect())
        })
    }

    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<RunView, SourceError>> {
        Box::pin(async move {
            let run = self
                .api(Some(namespace))
                .get(name)
                .await
                .map_err(|e| kube_error(e, &format!("get researchrun {name}"), namespace))?;
            Ok(model::from_cluster(&run, Timestamp::now()))
        })
    }

    fn artifacts<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Artifacts, SourceError>> {
        Box::pin(async move {
            let mut out = Artifacts::default();
            if let Some(cm) = self
                .configmap(namespace, &report_configmap_name(name))
                .await?
            {
                out.report =
                    value_of(&cm, REPORT_KEY).map(|b| String::from_utf8_lossy(&b).into_owned());
                out.findings =
                    value_of(&cm, FINDINGS_KEY).and_then(|b| serde_json::from_slice(&b).ok());
            }
            if out.report.is_none() {
                // Reports kept in an object store: read as `quarry report` does.
                let run = self.get(namespace, name).await?;
                if run.finished && run.report != "-" {
                    out.report =
                        crate::report_cli::cluster_report(&self.client, Some(namespace), name)
                            .await
                            .ok();
                }
            }
            if let Some(cm) = self
                .configmap(namespace, &events_configmap_name(name))
                .await?
            {
                out.events = value_of(&cm, EVENTS_KEY)
                    .map(|b| jsonl(&b))
                    .unwrap_or_default();
            }
            Ok(out)
        })
    }

    fn create<'a>(
        &'a self,
        namespace: &'a str,
        run: &'a NewRun,
    ) -> BoxFuture<'a, Result<String, SourceError>> {
        Box::pin(async move {
            let object = run.to_run(namespace)?;
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..PostParams::default()
            };
            let made = self
                .api(Some(namespace))
                .create(&params, &object)
                .await
                .map_err(|e| kube_error(e, "create researchruns", namespace))?;
            Ok(made.metadata.name.unwrap_or_default())
        })
    }

    fn cancel<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(self.patch_run(namespace, name, cancel_patch()))
    }

    fn approve<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(self.patch_run(namespace, name, approve_patch(&[])))
    }

    fn watch(&self, namespace: Option<String>) -> BoxStream<'static, RunView> {
        let api = self.api(namespace.as_deref());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .filter_map(|r| async move { r.ok() })
            .map(|run| model::from_cluster(&run, Timestamp::now()))
            .boxed()
    }

    fn writable(&self) -> bool {
        true
    }

    fn as_person<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn RunSource>>, SourceError>> {
        Box::pin(async move {
            let Some(people) = &self.people else {
                return Ok(None);
            };
            let base = people
                .get_or_try_init(kube::Config::infer)
                .await
                .map_err(|e| {
                    SourceError::Unavailable(format!(
                        "cannot act as you: the console found no way to reach the API server: {e}"
                    ))
                })?;
            let client = Client::try_from(Self::person_config(base, token))
                .map_err(|e| SourceError::Unavailable(format!("cannot act as you: {e}")))?;
            let person = KubeSource {
                client,
                label: self.label.clone(),
                namespace: self.namespace.clone(),
                people: None,
            };
            Ok(Some(Arc::new(person) as Arc<dyn RunSource>))
        })
    }
}

/// Standalone runs: every `quarry run --state-dir` directory under a root (or the root itself).
#[derive(Debug, Clone)]
pub struct LocalSource {
    root: PathBuf,
}

impl LocalSource {
    /// Runs under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The state directories: the root when it holds a run, else its subdirectories that do.
    fn dirs(&self) -> Result<Vec<(String, PathBuf)>, SourceError> {
        let holds_run = |d: &Path| {
            d.join(REPORT_KEY).exists()
                || d.join(CHECKPOINT_KEY).exists()
                || CHECKPOINT_SLOTS.iter().any(|s| d.join(s).exists())
        };
        let name_of = |d: &Path| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "run".into())
        };
        if holds_run(&self.root) {
            return Ok(vec![(name_of(&self.root), self.root.clone())]);
        }
        let entries = std::fs::read_dir(&self.root).map_err(|e| {
            SourceError::Unavailable(format!("cannot read {}: {e}", self.root.display()))
        })?;
        let mut dirs: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir() && holds_run(p))
            .map(|p| (name_of(&p), p))
            .collect();
        dirs.sort();
        Ok(dirs)
    }

    fn dir(&self, namespace: &str, name: &str) -> Result<PathBuf, SourceError> {
        if namespace != STANDALONE {
            return Err(SourceError::NotFound(format!(
                "standalone runs have namespace {STANDALONE}, not {namespace}"
            )));
        }
        self.dirs()?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p)
            .ok_or_else(|| {
                SourceError::NotFound(format!("no run {name} under {}", self.root.display()))
            })
    }

    async fn view(name: &str, dir: &Path) -> Option<RunView> {
        let store = LocalStore::new(dir);
        let state = load_checkpoint(&store).await.ok().flatten()?;
        let report = dir
            .join(REPORT_KEY)
            .exists()
            .then(|| dir.join(REPORT_KEY).display().to_string());
        Some(model::from_standalone(&state, name, report))
    }
}

impl RunSource for LocalSource {
    fn describe(&self) -> String {
        format!("standalone runs in {}", self.root.display())
    }

    fn default_namespace(&self) -> Option<String> {
        None
    }

    fn list<'a>(
        &'a self,
        namespace: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<RunView>, SourceError>> {
        Box::pin(async move {
            if namespace.is_some_and(|ns| ns != STANDALONE) {
                return Ok(Vec::new());
            }
            let mut out = Vec::new();
            for (name, dir) in self.dirs()? {
                if let Some(view) = Self::view(&name, &dir).await {
                    out.push(view);
                }
            }
            Ok(out)
        })
    }

    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<RunView, SourceError>> {
        Box::pin(async move {
            let dir = self.dir(namespace, name)?;
            Self::view(name, &dir).await.ok_or_else(|| {
                SourceError::NotFound(format!("{} holds no readable checkpoint", dir.display()))
            })
        })
    }

    fn artifacts<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Artifacts, SourceError>> {
        Box::pin(async move {
            let store = LocalStore::new(self.dir(namespace, name)?);
            let read = |key: &'static str| {
                let store = store.clone();
                async move { store.get(key).await.ok().flatten() }
            };
            Ok(Artifacts {
                report: read(REPORT_KEY)
                    .await
                    .map(|b| String::from_utf8_lossy(&b).into_owned()),
                findings: read(FINDINGS_KEY)
                    .await
                    .and_then(|b| serde_json::from_slice(&b).ok()),
                events: read(EVENTS_KEY)
                    .await
                    .map(|b| jsonl(&b))
                    .unwrap_or_default(),
            })
        })
    }

    fn create<'a>(
        &'a self,
        _namespace: &'a str,
        _run: &'a NewRun,
    ) -> BoxFuture<'a, Result<String, SourceError>> {
        Box::pin(async {
            Err(SourceError::Unsupported(
                "this console shows standalone runs; start one with quarry run --state-dir DIR"
                    .into(),
            ))
        })
    }

    fn cancel<'a>(
        &'a self,
        _namespace: &'a str,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async {
            Err(SourceError::Unsupported(
                "a standalone run is stopped with Ctrl-C in its terminal".into(),
            ))
        })
    }

    fn approve<'a>(
        &'a self,
        _namespace: &'a str,
        _name: &'a str,
    ) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async {
            Err(SourceError::Unsupported(
                "a standalone plan is approved on its terminal (quarry run --approve)".into(),
            ))
        })
    }

    fn watch(&self, _namespace: Option<String>) -> BoxStream<'static, RunView> {
        // Standalone runs are files: the pages show them as of the request.
        futures::stream::pending().boxed()
    }

    fn writable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests;
