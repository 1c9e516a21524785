//! Production launcher: builds the engine of a run (model client, gatherer, fetcher, ConfigMap
//! store) and drives it, resuming from the run's checkpoint when one exists.

use std::sync::Arc;

use kube::{Client, Resource, ResourceExt};
use tokio::sync::watch;
use tracing::{Instrument, info, warn};

use super::artifacts::{self, FinalizerGuard};
use super::{LaunchError, LaunchRequest, Launcher, Stall, Starter};
use crate::engine_builder::build_engine_from_keys;
use crate::error::Error;
use crate::store::configmap::ConfigMapStore;
use crate::store::object::Bucket;
use crate::store::routed::RoutedStore;
use quarry_api::{ReportKind, ResearchRun};
use quarry_engine::events::publish::{StreamPublisher, run_published};
use quarry_engine::events::{RunEvents, RunRef};
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::{Failure, Phase, RunState};
use quarry_engine::research::shell::executor::{self, RunObserver};
use quarry_engine::store::ArtifactStore;
use quarry_engine::telemetry::Metrics;

/// Launcher that runs the research engine in-process.
pub struct EngineLauncher {
    client: Client,
    metrics: Option<Metrics>,
    services: crate::engine_builder::Services,
    /// Redis URL of the work queue in scale-out mode (researchers run on workers), and the key
    /// a run's API keys are sealed with for them.
    workers: Option<(String, Arc<crate::queue::seal::SealingKey>)>,
    /// The live event stream every run publishes to.
    events: Option<Arc<dyn RunEvents>>,
}

impl EngineLauncher {
    /// A launcher whose stores write through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            client,
            metrics: None,
            services: crate::engine_builder::Services::in_memory(),
            workers: None,
            events: None,
        }
    }

    /// Sends researchers to `quarry worker` processes through the Redis at the URL (scale-out
    /// mode), with each run's API keys sealed under the sealing key (workers have no API access).
    pub fn with_workers(
        mut self,
        workers: Option<(String, Arc<crate::queue::seal::SealingKey>)>,
    ) -> Self {
        self.workers = workers;
        self
    }

    /// Publishes every run's events (phases, researchers, model calls, searches, reads) to
    /// `events`, the stream the event endpoint serves.
    pub fn with_events(mut self, events: Arc<dyn RunEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// Records every run's model calls, searches and fetches in `metrics`.
    pub fn with_metrics(mut self, metrics: Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Shares `services` (cache, engine health) between every run of the launcher.
    pub fn with_services(mut self, services: crate::engine_builder::Services) -> Self {
        self.services = services;
        self
    }
}

/// Forwards every engine state to the run's status writer (which coalesces them).
struct ProgressObserver(Arc<watch::Sender<Option<RunState>>>);

impl RunObserver for ProgressObserver {
    fn on_change(&self, state: &RunState, _event: &Event) {
        self.0.send_replace(Some(state.clone()));
    }
}

/// The object store of a run, when it has one (no I/O).
fn run_object_store(
    request: &LaunchRequest,
) -> Result<Option<crate::store::object::ObjectArtifactStore>, LaunchError> {
    let Some(config) = &request.artifacts.object_store else {
        return Ok(None);
    };
    let bucket = Bucket::connect(config)?;
    let layout = artifacts::layout(&request.run)?;
    Ok(Some(bucket.for_run(&layout)))
}

/// The run's store: ConfigMaps with object-store overflow, or the object store alone.
fn run_store(client: &Client, request: &LaunchRequest) -> Result<RoutedStore, LaunchError> {
    let run = &request.run;
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let owner = run
        .controller_owner_ref(&())
        .ok_or(Error::MissingMetadata("uid"))?;
    let object = run_object_store(request)?;
    let guard = FinalizerGuard::new(
        client.clone(),
        &namespace,
        &run.name_any(),
        object.as_ref().map(|o| o.dir_url()),
    )
    .into_hook();
    let report = request.artifacts.report.clone();
    Ok(match (run.spec.report.kind, object) {
        (ReportKind::ObjectStore, Some(object)) => {
            RoutedStore::object_only(object, Some(guard), report)
        }
        (ReportKind::ObjectStore, None) => {
            return Err(LaunchError::NoObjectStore);
        }
        (ReportKind::ConfigMap, object) => RoutedStore::configmap_first(
            ConfigMapStore::new(client.clone(), &namespace, &run.name_any(), owner),
            object,
            Some(guard),
            report,
        ),
    })
}

/// Refuses to start a run when a ConfigMap with the name of one of its artifact ConfigMaps
/// exists and is not the run's: its objects are created only when absent or already its own.
async fn configmaps_check(client: &Client, run: &ResearchRun) -> Result<(), Stall> {
    let (Some(namespace), Some(owner)) = (run.namespace(), run.controller_owner_ref(&())) else {
        return Ok(());
    };
    let store = ConfigMapStore::new(client.clone(), &namespace, &run.name_any(), owner);
    match store.foreign_configmap().await {
        Ok(None) => Ok(()),
        Ok(Some(message)) => Err(Stall {
            reason: quarry_api::reasons::CONFIGMAP_NOT_OWNED,
            message,
        }),
        // Unreadable now (API trouble): the store checks again on every read and write.
        Err(e) => {
            warn!(run = %run.name_any(), error = %e, "could not check the run's ConfigMaps");
            Ok(())
        }
    }
}

impl Launcher for EngineLauncher {
    fn check<'a>(
        &'a self,
        request: &'a LaunchRequest,
    ) -> futures::future::BoxFuture<'a, Result<(), Stall>> {
        Box::pin(async move {
            if request.run.spec.report.kind == ReportKind::ConfigMap {
                configmaps_check(&self.client, &request.run).await?;
            }
            let Some(config) = &request.artifacts.object_store else {
                return Ok(());
            };
            let store = match Bucket::connect(config) {
                Ok(bucket) => {
                    let layout = artifacts::layout(&request.run).map_err(|e| Stall {
                        reason: quarry_api::reasons::OBJECT_STORE_INVALID,
                        message: e.to_string(),
                    })?;
                    bucket.for_run(&layout)
                }
                Err(e) => return Err(artifacts::probe_stall(config, &e)),
            };
            store
                .probe()
                .await
                .map_err(|e| artifacts::probe_stall(config, &e))
        })
    }

    fn prepare(&self, request: LaunchRequest) -> Result<Starter, LaunchError> {
        let run = &request.run;
        let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
        let routed = Arc::new(run_store(&self.client, &request)?);
        let store: Arc<dyn ArtifactStore> = routed.clone();
        let mut engine = build_engine_from_keys(
            &request.profile,
            &request.api_keys,
            &self.services,
            request.managed_search.clone(),
            Some((
                run.spec.uses(quarry_api::SourceKind::Security),
                run.spec.uses(quarry_api::SourceKind::Stackexchange),
            )),
            store.clone(),
            self.metrics
                .as_ref()
                .map(|m| m.for_run(&namespace, &request.profile_name)),
        )?;
        // Scale-out mode: the run's UID keys its work in Redis. Workers have no API token: the
        // keys resolved above (each Secret opted in for its host) go with every task, sealed.
        let scale_out = self.workers.clone().map(|(url, sealing)| {
            let header = crate::queue::protocol::RunHeader {
                run: run.uid().unwrap_or_default(),
                namespace: Some(namespace.clone()),
                profile_name: request.profile_name.clone(),
                profile: request.profile.clone(),
                managed_search: request.managed_search.as_ref().map(|m| {
                    crate::queue::protocol::WireSearch {
                        backend: m.backend.clone(),
                        url: m.url.clone(),
                    }
                }),
                specialised: Some((
                    run.spec.uses(quarry_api::SourceKind::Security),
                    run.spec.uses(quarry_api::SourceKind::Stackexchange),
                )),
            };
            let keys = crate::queue::dispatch::TaskKeys {
                sealing,
                keys: request.api_keys.clone(),
            };
            (url, header, keys)
        });
        let input = request.input.clone();
        let name = run.name_any();
        // A scheduled run after the first is compared with the one before.
        let compare_with = run
            .annotations()
            .get(quarry_api::schedule::COMPARE_WITH_ANNOTATION)
            .cloned()
            .map(|earlier| {
                // The earlier report may be in the profile's object store (no I/O to connect).
                let bucket = request
                    .artifacts
                    .object_store
                    .as_ref()
                    .and_then(|config| Bucket::connect(config).ok());
                (self.client.clone(), namespace.clone(), earlier, bucket)
            });
        let publisher = self.events.clone().map(|events| {
            let run = RunRef::new(
                namespace.clone(),
                name.clone(),
                run.uid().unwrap_or_default(),
            );
            Arc::new(StreamPublisher::new(events, run))
        });
        let span_namespace = namespace.clone();
        Ok(Box::new(move |control, progress| {
            Box::pin(async move {
                // Resume from the last checkpoint: finished work is never redone.
                let state = match executor::load_checkpoint(store.as_ref()).await {
                    Ok(Some(state)) => {
                        info!(run = %name, phase = %state.phase, "resuming from checkpoint");
                        state
                    }
                    Ok(None) => {
                        let mut input = input;
                        if let Some((client, namespace, earlier, bucket)) = &compare_with
                            && let Some(found) = super::earlier_run::earlier_findings(
                                client,
                                namespace,
                                earlier,
                                bucket.as_ref(),
                            )
                            .await
                        {
                            info!(run = %name, earlier = %earlier, "comparing with the earlier run");
                            input = input.with_earlier(found);
                        }
                        RunState::new(input)
                    }
                    Err(e) => {
                        warn!(run = %name, error = %e, "checkpoint unreadable");
                        let mut state = RunState::new(input);
                        state.phase = Phase::Failed;
                        state.failure = Some(Failure::new(
                            "CheckpointUnreadable",
                            format!("the run's checkpoint could not be read: {e}"),
                        ));
                        if let Some(publisher) = &publisher {
                            publisher.finish(&state);
                        }
                        return state;
                    }
                };
                if state.phase.is_terminal() {
                    // Stored before a restart: find the report so status points at it.
                    if state.published
                        && let Err(e) = routed.locate_report().await
                    {
                        warn!(run = %name, error = %e, "stored report not found");
                    }
                    return state;
                }
                let span =
                    tracing::info_span!("research_run", run = %name, namespace = %span_namespace);
                let dispatch = match scale_out {
                    Some((url, header, keys)) => {
                        match crate::queue::dispatch::RedisDispatch::connect(
                            &url,
                            header,
                            engine.spend.clone(),
                        )
                        .await
                        {
                            Ok(d) => Some(Arc::new(d.with_keys(keys))),
                            Err(e) => {
                                // The run goes on in-process rather than stalling on Redis.
                                warn!(run = %name, error = %e, "work queue unavailable; researchers run in the operator");
                                None
                            }
                        }
                    }
                    None => None,
                };
                if let Some(d) = &dispatch {
                    engine.dispatch = Some(d.clone());
                }
                engine.spend.set_run(&span_namespace, &name);
                let engine = Arc::new(engine);
                let observer = Arc::new(ProgressObserver(progress));
                let state = match publisher {
                    Some(publisher) => {
                        run_published(engine, state, observer, control, publisher)
                            .instrument(span)
                            .await
                    }
                    None => {
                        executor::run(engine, state, observer, control)
                            .instrument(span)
                            .await
                    }
                };
                if let Some(d) = dispatch
                    && state.phase.is_terminal()
                {
                    d.finish().await;
                }
                state
            })
        }))
    }
}
