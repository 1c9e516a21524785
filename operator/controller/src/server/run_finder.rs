//! Finds runs for the event endpoint: the controller's run cache when it has the run, else the
//! API; a finished run's stored `events.jsonl` from its ConfigMap.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};

use crate::store::configmap::ConfigMapStore;
use quarry_api::ResearchRun;
use quarry_engine::events::{EventsError, RunDirectory, RunInfo, RunRef};
use quarry_engine::store::ArtifactStore;
use quarry_engine::store::keys::EVENTS_KEY;

/// Deadline of one API call of the directory.
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs as the Kubernetes API knows them.
pub struct KubeDirectory {
    client: Client,
    caches: OnceLock<Vec<Store<ResearchRun>>>,
}

impl KubeDirectory {
    /// A directory asking the API through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            caches: OnceLock::new(),
        }
    }

    /// Answers from the controllers' run caches (one per watched namespace) when they have the
    /// run (no API call). Set once, by the leader.
    pub fn use_caches(&self, stores: Vec<Store<ResearchRun>>) {
        let _ = self.caches.set(stores);
    }
}

/// Pure: how the event endpoint sees a run object.
pub fn run_info(run: &ResearchRun) -> Option<RunInfo> {
    let status = run.status.as_ref();
    let mut totals = serde_json::Map::new();
    if let Some(usage) = status.and_then(|s| s.usage.as_ref()) {
        totals.insert("inputTokens".into(), usage.input_tokens.into());
        totals.insert("outputTokens".into(), usage.output_tokens.into());
        totals.insert("llmCalls".into(), usage.llm_calls.into());
        totals.insert("searches".into(), usage.searches.into());
        totals.insert("pagesRead".into(), usage.pages_fetched.into());
        if let Some(cost) = &usage.cost_usd {
            totals.insert("costUSD".into(), cost.as_str().into());
        }
    }
    if let Some(progress) = status.and_then(|s| s.progress.as_ref()) {
        totals.insert("progress".into(), progress.as_str().into());
    }
    totals.insert(
        "report".into(),
        status.and_then(|s| s.report.as_ref()).is_some().into(),
    );
    Some(RunInfo {
        run: RunRef::new(run.namespace()?, run.name_any(), run.uid()?),
        phase: status.and_then(|s| s.phase).map(|p| p.as_str().to_string()),
        terminal: run.is_finished(),
        message: status.and_then(|s| s.message.clone()),
        totals,
    })
}

fn directory_error(message: impl std::fmt::Display) -> EventsError {
    EventsError::Directory(message.to_string())
}

#[async_trait]
impl RunDirectory for KubeDirectory {
    async fn lookup(&self, namespace: &str, name: &str) -> Result<Option<RunInfo>, EventsError> {
        let key = ObjectRef::new(name).within(namespace);
        if let Some(run) = self
            .caches
            .get()
            .and_then(|stores| stores.iter().find_map(|store| store.get(&key)))
        {
            return Ok(run_info(&run));
        }
        let api: Api<ResearchRun> = Api::namespaced(self.client.clone(), namespace);
        match tokio::time::timeout(LOOKUP_TIMEOUT, api.get_opt(name)).await {
            Ok(Ok(run)) => Ok(run.as_ref().and_then(run_info)),
            Ok(Err(e)) => Err(directory_error(format!(
                "reading ResearchRun {namespace}/{name}: {e}"
            ))),
            Err(_) => Err(directory_error(format!(
                "reading ResearchRun {namespace}/{name}: no answer within {LOOKUP_TIMEOUT:?}"
            ))),
        }
    }

    async fn event_log(&self, info: &RunInfo) -> Result<Option<Vec<u8>>, EventsError> {
        let store = run_store(self.client.clone(), &info.run);
        match tokio::time::timeout(LOOKUP_TIMEOUT, store.get(EVENTS_KEY)).await {
            Ok(result) => result.map_err(directory_error),
            Err(_) => Err(directory_error(format!(
                "reading {EVENTS_KEY}: no answer within {LOOKUP_TIMEOUT:?}"
            ))),
        }
    }
}

/// The artifact store of an existing run, for reading (its owner reference is rebuilt from the
/// run's identity).
pub fn run_store(client: Client, run: &RunRef) -> Arc<dyn ArtifactStore> {
    let owner = OwnerReference {
        api_version: ResearchRun::api_version(&()).to_string(),
        kind: ResearchRun::kind(&()).to_string(),
        name: run.name.clone(),
        uid: run.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Arc::new(ConfigMapStore::new(
        client,
        &run.namespace,
        &run.name,
        owner,
    ))
}
