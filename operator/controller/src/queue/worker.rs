//! `quarry worker`: consumes researcher tasks from `quarry:tasks` through the consumer group
//! `quarry-workers`, runs each researcher and reports back on the run's results stream.
//!
//! Liveness: a worker refreshes every entry it runs (`XCLAIM ... JUSTID`, only while it still
//! owns it) three times per visibility timeout. An entry idle for the whole timeout therefore
//! belongs to a dead worker and is taken over with `XAUTOCLAIM`. A researcher may legitimately run
//! for an hour on a slow model; deriving the timeout from that budget would leave a dead worker's
//! task waiting an hour, whereas heartbeats let the timeout stay short (default 30s, a heartbeat
//! every 10s) however long researchers take. A worker that finds its entry taken over stops its copy of the task.
//!
//! Delivery is at least once: a result is published before its entry is acknowledged, and the
//! leader keeps one result per (task, round). Usage is published as it is spent, so a task that
//! dies mid-way is still paid for in the run's cost.
//!
//! A worker uses no Kubernetes API (its Pod has no token): an operator run's task comes with the
//! API keys the operator resolved and checked, sealed for that task with the key the operator and
//! the workers share (see [`super::seal`]), so Redis never holds them in plaintext. Standalone
//! tasks take keys from the worker's environment, exactly as `quarry run` does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::streams::{
    StreamAutoClaimReply, StreamId, StreamInfoGroupsReply, StreamPendingCountReply,
    StreamReadOptions, StreamReadReply,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tracing::{Instrument, info, warn};

use super::pool::RedisUrls;
use super::protocol::reasons::{SECRET_UNAVAILABLE, WORKER_LOST, WORKER_MISCONFIGURED};
use super::protocol::{
    self, GROUP, MAX_DELIVERIES, Origin, Reclaim, ResultMessage, RunKeys, TASKS_STREAM, TaskMessage,
};
use super::seal::{SEALING_KEY_ENV, SealingKey};
use super::{COMMAND_TIMEOUT, QueueError, connect, ensure_group, field_bytes, timed};
use crate::server::{Readiness, ServerState};
use quarry_api::SecretKeyRef;
use quarry_engine::llm::Usage;
use quarry_engine::llm::router::{RESEARCH_TASK, SpendGuard};
use quarry_engine::research::agents::researcher::{ResearcherDeps, UrlPool, run_researcher};
use quarry_engine::research::machine::state::{Failure, ResearcherReport};
use quarry_engine::research::shell::executor::Engine;
use quarry_engine::telemetry::Metrics;

mod report;
use report::{Reporter, heartbeat, poll_run, publish_progress, send_result};

mod config;
pub use config::{WorkerArgs, WorkerConfig, default_consumer, missing_env_key, sealed_keys};

/// How long one blocking read of new tasks waits (between reclaim scans and shutdown checks).
const TAKE_BLOCK: Duration = Duration::from_secs(1);
/// How often a running task looks for steered reports and for its run's cancellation.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// How often the stream's lag is measured for the metrics.
const LAG_EVERY: Duration = Duration::from_secs(5);
/// Tries of one result publish (same sequence number: the leader drops repeats).
const PUBLISH_TRIES: u32 = 3;

/// Refreshes an entry the worker still owns: 1 refreshed, 0 gone (acknowledged or deleted),
/// -1 taken over by another consumer.
const KEEPALIVE: &str = r#"
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
if #p == 0 then return 0 end
if p[1][2] ~= ARGV[2] then return -1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'JUSTID')
return 1
"#;

/// A task entry this worker took.
struct Taken {
    entry: StreamId,
    deliveries: u64,
}

/// What the worker shares between its tasks.
struct Worker {
    config: WorkerConfig,
    conn: ConnectionManager,
    metrics: Metrics,
    services: crate::engine_builder::Services,
    /// Opens the keys sealed with operator runs' tasks (`None`: standalone tasks only).
    sealing: Option<SealingKey>,
}

/// Why a running task is stopped from beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Another worker took the entry over.
    Lost,
    /// The run ended or abandoned the attempt.
    Cancelled,
}

/// How a task's run ended on this worker.
enum Ending {
    Done(Result<ResearcherReport, Failure>),
    /// Another worker took the entry over (this one was presumed dead).
    Lost,
    /// The run no longer wants it (ended, or abandoned the attempt).
    Cancelled,
    /// Shutdown: handed back to the queue.
    Released,
    /// Delivered too often: reported failed without running.
    GaveUp,
    /// The result could not be published: left unacknowledged, for another worker to redo.
    Unpublished,
}

/// Runs a worker until SIGTERM or SIGINT, then drains (see [`WorkerArgs::drain_timeout`]).
pub async fn run_worker(config: WorkerConfig) -> Result<(), QueueError> {
    // A key file that is set but unusable stops the worker at once rather than failing tasks.
    let sealing = match &config.sealing_key_file {
        Some(path) => {
            let key = SealingKey::load(path).map_err(|e| {
                QueueError::Config(format!("--sealing-key-file ({SEALING_KEY_ENV}): {e}"))
            })?;
            info!(sealing_key = %key.id(), "opening operator runs' keys with the sealing key");
            Some(key)
        }
        None => None,
    };
    let metrics = Metrics::worker();
    let readiness = Readiness::new();
    let server = crate::server::start(
        &config.listen,
        ServerState {
            metrics: metrics.clone(),
            readiness: readiness.clone(),
            // Workers serve no run events: the leader's operator does.
            events: None,
        },
    )
    .await?;
    info!(addr = %server.addr, consumer = %config.consumer, "worker serving /metrics, /livez, /readyz");
    let (shutdown_tx, mut shutdown) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = shutdown_tx.send(true);
    });
    let client = redis::Client::open(config.redis_url.as_str())
        .map_err(|e| QueueError::Config(format!("redisUrl: {e}")))?;
    // Redis may come up after the worker (a rolling deploy): wait for it, not ready meanwhile.
    let (conn, mut blocking) = loop {
        let attempt = async {
            let mut conn = connect(&client, COMMAND_TIMEOUT).await?;
            ensure_group(&mut conn).await?;
            let blocking = connect(&client, TAKE_BLOCK + COMMAND_TIMEOUT).await?;
            Ok::<_, QueueError>((conn, blocking))
        };
        match attempt.await {
            Ok(c) => break c,
            Err(e) => {
                warn!(error = %e, "work queue unreachable; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                    _ = shutdown.wait_for(|s| *s) => {
                        server.stop().await?;
                        return Ok(());
                    }
                }
            }
        }
    };
    readiness.set(true);
    let services = crate::startup::services(Some(&config.redis_url), Some(metrics.clone()))
        .map_err(|e| QueueError::Config(e.to_string()))?;
    let worker = Arc::new(Worker {
        config: config.clone(),
        conn,
        metrics: metrics.clone(),
        services,
        sealing,
    });
    let slots = Arc::new(Semaphore::new(config.concurrency));
    let (release_tx, release_rx) = watch::channel(false);
    let mut running = tokio::task::JoinSet::new();
    let mut cursor = "0-0".to_string();
    let mut next_lag = tokio::time::Instant::now();
    info!(consumer = %config.consumer, concurrency = config.concurrency, visibility_timeout = ?config.visibility_timeout, "worker taking tasks from {TASKS_STREAM}");
    loop {
        while running.try_join_next().is_some() {}
        if *shutdown.borrow() {
            break;
        }
        if tokio::time::Instant::now() >= next_lag {
            worker.measure_lag().await;
            next_lag = tokio::time::Instant::now() + LAG_EVERY;
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.wait_for(|s| *s) => break,
            // Keeps the lag metric fresh while every slot is busy.
            _ = tokio::time::sleep(LAG_EVERY) => continue,
        };
        // Not raced against shutdown: an entry read from Redis must reach a task, or it would
        // sit with this consumer until it is reclaimed.
        match worker.take(&mut blocking, &mut cursor).await {
            Ok(Some(taken)) => {
                readiness.set(true);
                let w = worker.clone();
                let release = release_rx.clone();
                running.spawn(async move { w.execute(taken, permit, release).await });
            }
            Ok(None) => readiness.set(true),
            Err(e) => {
                warn!(error = %e, "cannot take tasks; retrying");
                readiness.set(false);
                // A Redis that restarted empty has no group: make it again.
                if e.to_string().contains("NOGROUP") {
                    let _ = ensure_group(&mut worker.conn()).await;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    readiness.set(false);
    info!(
        running = running.len(),
        "stopping: taking no new tasks; running ones may finish within the drain timeout"
    );
    let drained = tokio::time::timeout(config.drain_timeout, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        info!(
            running = running.len(),
            "drain timeout: handing running tasks back to the queue"
        );
        let _ = release_tx.send(true);
        let _ = tokio::time::timeout(COMMAND_TIMEOUT * 4, async {
            while running.join_next().await.is_some() {}
        })
        .await;
    }
    server.stop().await?;
    info!("worker stopped");
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        if let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

impl Worker {
    fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// The next entry: first one a dead consumer left behind, else a new one (waits up to
    /// [`TAKE_BLOCK`]).
    async fn take(
        &self,
        blocking: &mut ConnectionManager,
        cursor: &mut String,
    ) -> Result<Option<Taken>, QueueError> {
        let visibility_ms = self.config.visibility_timeout.as_millis() as u64;
        let reply: StreamAutoClaimReply = timed(
            "XAUTOCLAIM",
            COMMAND_TIMEOUT,
            redis::cmd("XAUTOCLAIM")
                .arg(TASKS_STREAM)
                .arg(GROUP)
                .arg(&self.config.consumer)
                .arg(visibility_ms)
                .arg(cursor.as_str())
                .arg("COUNT")
                .arg(1)
                .query_async(&mut self.conn()),
        )
        .await?;
        *cursor = reply.next_stream_id;
        if let Some(entry) = reply.claimed.into_iter().next() {
            let deliveries = self.deliveries(&entry.id).await.unwrap_or(MAX_DELIVERIES);
            self.metrics.queue.reclaimed.inc();
            info!(entry = %entry.id, deliveries, "reclaimed a task from a silent worker");
            return Ok(Some(Taken { entry, deliveries }));
        }
        let options = StreamReadOptions::default()
            .group(GROUP, &self.config.consumer)
            .count(1)
            .block(TAKE_BLOCK.as_millis() as usize);
        let reply: Option<StreamReadReply> = timed(
            "XREADGROUP",
            TAKE_BLOCK + COMMAND_TIMEOUT,
            redis::cmd("XREADGROUP")
                .arg(&options)
                .arg("STREAMS")
                .arg(TASKS_STREAM)
                .arg(">")
                .query_async(blocking),
        )
        .await?;
        Ok(reply
            .and_then(|r| r.keys.into_iter().next())
            .and_then(|k| k.ids.into_iter().next())
            .map(|entry| Taken {
                entry,
                deliveries: 1,
            }))
    }

    /// How often an entry was delivered (from the group's pending list).
    async fn deliveries(&self, id: &str) -> Result<u64, QueueError> {
        let reply: StreamPendingCountReply = timed(
            "XPENDING",
            COMMAND_TIMEOUT,
            redis::cmd("XPENDING")
                .arg(TASKS_STREAM)
                .arg(GROUP)
                .arg(id)
                .arg(id)
                .arg(1)
                .query_async(&mut self.conn()),
        )
        .await?;
        Ok(reply.ids.first().map_or(1, |p| p.times_delivered as u64))
    }

    async fn measure_lag(&self) {
        let reply: Result<StreamInfoGroupsReply, QueueError> = timed(
            "XINFO GROUPS",
            COMMAND_TIMEOUT,
            redis::cmd("XINFO")
                .arg("GROUPS")
                .arg(TASKS_STREAM)
                .query_async(&mut self.conn()),
        )
        .await;
        if let Ok(reply) = reply
            && let Some(group) = reply.groups.iter().find(|g| g.name == GROUP)
        {
            self.metrics
                .queue
                .lag
                .set(group.lag.unwrap_or(0).min(i64::MAX as usize) as i64);
            self.metrics.queue.pending.set(group.pending as i64);
        }
    }

    /// Acknowledges and deletes an entry (its work is done, or was never to be done); with
    /// `copy`, a copy of it goes to the end of the stream first, atomically (a hand-back).
    async fn ack(&self, id: &str, outcome: &str, copy: Option<&[(&str, Vec<u8>)]>) {
        let mut pipe = redis::pipe();
        pipe.atomic();
        if let Some(fields) = copy {
            pipe.cmd("XADD").arg(TASKS_STREAM).arg("*");
            for (k, v) in fields {
                pipe.arg(*k).arg(v.as_slice());
            }
            pipe.ignore();
        }
        pipe.cmd("XACK")
            .arg(TASKS_STREAM)
            .arg(GROUP)
            .arg(id)
            .ignore()
            .cmd("XDEL")
            .arg(TASKS_STREAM)
            .arg(id)
            .ignore();
        let done: Result<(), QueueError> =
            timed("XACK", COMMAND_TIMEOUT, pipe.query_async(&mut self.conn())).await;
        match done {
            Ok(()) => self.metrics.queue.ack(outcome),
            // Unacknowledged, the entry is reclaimed after the visibility timeout; a result
            // already published is then repeated, and the leader keeps the first.
            Err(e) => warn!(entry = %id, error = %e, "task not acknowledged"),
        }
    }

    /// Publishes one message on a run's results stream, retrying a little.
    async fn publish(&self, keys: &RunKeys, message: &ResultMessage) -> Result<(), QueueError> {
        send_result(&mut self.conn(), keys, message).await
    }

    /// Runs one taken entry to its end.
    async fn execute(
        self: Arc<Self>,
        taken: Taken,
        _permit: OwnedSemaphorePermit,
        release: watch::Receiver<bool>,
    ) {
        self.metrics.queue.taken.inc();
        self.metrics.queue.running.inc();
        let id = taken.entry.id.clone();
        let raw = field_bytes(&taken.entry.map, "m");
        let sealed = field_bytes(&taken.entry.map, "k");
        let task = match raw.as_deref().map(protocol::decode_task) {
            Some(Ok(task)) => task,
            other => {
                let error = match other {
                    Some(Err(e)) => e.to_string(),
                    _ => "no message field".to_string(),
                };
                warn!(entry = %id, error = %error, "unreadable task");
                if let Some(origin) = raw.as_deref().and_then(origin_hint) {
                    let (keys, origin) = origin;
                    let message = ResultMessage::Failed {
                        origin,
                        failure: Failure::new(
                            WORKER_MISCONFIGURED,
                            format!(
                                "worker {} cannot read the task: {error}; run workers of the leader's version",
                                self.config.consumer
                            ),
                        ),
                    };
                    if let Err(e) = self.publish(&keys, &message).await {
                        warn!(error = %e, "failure not reported");
                    }
                }
                self.ack(&id, "invalid", None).await;
                self.metrics.queue.running.dec();
                return;
            }
        };
        let span = tracing::info_span!(
            "researcher_task",
            run = %task.header.run,
            namespace = task.header.namespace.as_deref().unwrap_or("-"),
            task_id = task.task_id,
            round = task.round,
            attempt = %task.attempt,
        );
        let raw = raw.unwrap_or_default();
        let mut fields = vec![
            ("run", task.header.run.clone().into_bytes()),
            ("task", task.task_id.to_string().into_bytes()),
            ("m", raw.clone()),
        ];
        if let Some(sealed) = &sealed {
            fields.push(("k", sealed.clone()));
        }
        let deliveries = taken.deliveries;
        async {
            let outcome = self
                .run_task(&id, &task, (&raw, sealed.as_deref()), deliveries, release)
                .await;
            match outcome {
                Ending::Done(result) => {
                    let outcome = if result.is_ok() { "finished" } else { "failed" };
                    self.ack(&id, outcome, None).await;
                }
                Ending::Cancelled => {
                    info!("the run no longer wants this task; dropped");
                    self.ack(&id, "cancelled", None).await;
                }
                Ending::Lost => {
                    info!("another worker took this task over; stopped");
                    self.metrics.queue.lost.inc();
                }
                Ending::Released => {
                    info!("task handed back to the queue");
                    self.ack(&id, "released", Some(&fields)).await;
                }
                Ending::GaveUp => {
                    warn!(deliveries, "task given up after too many deliveries");
                    self.ack(&id, "given_up", None).await;
                }
                Ending::Unpublished => {
                    warn!("result not delivered; the task is left to be taken over and redone");
                }
            }
        }
        .instrument(span)
        .await;
        self.metrics.queue.running.dec();
    }

    /// Runs the task and publishes its result; the entry's acknowledgement is the caller's.
    /// `entry` is the message's bytes and its sealed keys, as read from the stream.
    async fn run_task(
        &self,
        id: &str,
        task: &TaskMessage,
        entry: (&[u8], Option<&[u8]>),
        deliveries: u64,
        mut release: watch::Receiver<bool>,
    ) -> Ending {
        let keys = RunKeys::new(&task.header.run);
        let execution = format!("{}/{}/{deliveries}", task.attempt, self.config.consumer);
        let mut reporter = Reporter {
            keys: keys.clone(),
            base: Origin {
                task_id: task.task_id,
                round: task.round,
                attempt: task.attempt.clone(),
                execution,
                seq: 0,
            },
            spend: Arc::new(SpendGuard::default()),
            sent_calls: 0,
            sent_sources: 0,
            sent_by_model: BTreeMap::new(),
        };
        if protocol::reclaim_decision(
            self.config.visibility_timeout,
            deliveries,
            self.config.visibility_timeout,
            MAX_DELIVERIES,
        ) == Reclaim::GiveUp
        {
            let failure = Failure::new(
                WORKER_LOST,
                format!(
                    "researcher task {} was started {} times by workers that stopped without finishing it; look for crashes or OOM kills of `quarry worker` pods",
                    task.task_id,
                    deliveries - 1
                ),
            );
            return if self.publish_terminal(&mut reporter, Err(failure)).await {
                Ending::GaveUp
            } else {
                Ending::Unpublished
            };
        }
        if self.run_ended(&keys, &task.attempt).await {
            return Ending::Cancelled;
        }
        let engine = match self.build_engine(task, entry) {
            Ok(engine) => engine,
            Err(failure) => {
                warn!(reason = %failure.reason, message = %failure.message, "task cannot run here");
                if !self
                    .publish_terminal(&mut reporter, Err(failure.clone()))
                    .await
                {
                    return Ending::Unpublished;
                }
                return Ending::Done(Err(failure));
            }
        };
        engine.spend.configure(
            task.input.limits.max_cost_pico_usd,
            task.input.limits.max_tokens,
            &task.spent,
        );
        // The same run and namespace as the task's span.
        engine.spend.set_run(
            task.header.namespace.as_deref().unwrap_or("-"),
            &task.header.run,
        );
        reporter.spend = engine.spend.clone();
        let deps = ResearcherDeps {
            model: engine.model.clone(),
            gatherer: engine.gatherer.clone(),
            fetcher: engine.fetcher.clone(),
            pool: Arc::new(UrlPool::shared(Arc::new(RedisUrls::new(
                self.conn(),
                keys.urls.clone(),
                task.task_id,
            )))),
            settings: engine.settings.researcher.clone(),
            specialised: engine.specialised.clone(),
        };
        // Heartbeat and polling run beside the researcher; either may stop it.
        let (stop_tx, mut stop_rx) = watch::channel(None::<Stop>);
        let heartbeat = tokio::spawn(heartbeat(
            self.conn(),
            self.config.consumer.clone(),
            id.to_string(),
            protocol::heartbeat_interval(self.config.visibility_timeout),
            stop_tx.clone(),
        ));
        let (inbox_tx, inbox) = mpsc::unbounded_channel();
        let poller = tokio::spawn(poll_run(
            self.conn(),
            keys.clone(),
            task.task_id,
            task.attempt.clone(),
            inbox_tx,
            stop_tx,
        ));
        // Spend is published as it happens, in order, by one publisher.
        let (progress_tx, progress_rx) = mpsc::unbounded_channel::<(u32, Usage)>();
        let publisher = tokio::spawn(publish_progress(self.conn(), reporter, progress_rx));
        let progress = move |units: u32, usage: Usage| {
            let _ = progress_tx.send((units, usage));
        };
        let research = RESEARCH_TASK.scope(
            task.task_id,
            run_researcher(
                &deps,
                &task.input,
                task.task_id,
                &task.query,
                &task.injected,
                Some(inbox),
                &progress,
            ),
        );
        let ending = tokio::select! {
            result = research => Ending::Done(result),
            Ok(stop) = stop_rx.wait_for(Option::is_some) => match *stop {
                Some(Stop::Lost) => Ending::Lost,
                _ => Ending::Cancelled,
            },
            Ok(_) = release.wait_for(|r| *r) => Ending::Released,
        };
        heartbeat.abort();
        poller.abort();
        drop(progress);
        // Every bit of spend reaches the run before the result does (or at all, when stopped).
        let mut reporter = match tokio::time::timeout(COMMAND_TIMEOUT * 4, publisher).await {
            Ok(Ok(reporter)) => reporter,
            _ => {
                warn!("spend of this task may not have reached the run");
                return match ending {
                    Ending::Done(_) => Ending::Unpublished,
                    other => other,
                };
            }
        };
        if let Ending::Done(result) = &ending
            && !self.publish_terminal(&mut reporter, result.clone()).await
        {
            return Ending::Unpublished;
        }
        ending
    }

    /// True when the run ended or abandoned this attempt.
    async fn run_ended(&self, keys: &RunKeys, attempt: &str) -> bool {
        let reply: Result<(bool, bool), QueueError> = timed(
            "run state",
            COMMAND_TIMEOUT,
            redis::pipe()
                .cmd("EXISTS")
                .arg(&keys.done)
                .cmd("SISMEMBER")
                .arg(&keys.cancelled)
                .arg(attempt)
                .query_async(&mut self.conn()),
        )
        .await;
        matches!(reply, Ok((done, cancelled)) if done || cancelled)
    }

    async fn publish_terminal(
        &self,
        reporter: &mut Reporter,
        result: Result<ResearcherReport, Failure>,
    ) -> bool {
        let origin = reporter.next_origin();
        let message = match result {
            Ok(report) => ResultMessage::Finished {
                origin: origin.clone(),
                report,
            },
            Err(failure) => ResultMessage::Failed {
                origin: origin.clone(),
                failure,
            },
        };
        let sent = match self.publish(&reporter.keys, &message).await {
            Err(QueueError::Protocol(e)) => {
                // A report over the bound cannot travel: the run learns why instead.
                let failed = ResultMessage::Failed {
                    origin,
                    failure: Failure::new(
                        WORKER_MISCONFIGURED,
                        format!("the researcher's report could not be sent: {e}"),
                    ),
                };
                self.publish(&reporter.keys, &failed).await
            }
            other => other,
        };
        match sent {
            Ok(()) => true,
            Err(e) => {
                warn!(error = %e, "result not published");
                false
            }
        }
    }

    /// The engine parts for a task: the profile with the keys the operator sealed for it
    /// (`entry`: the message bytes they are sealed over, and the sealed field), or for a
    /// standalone run the worker's environment.
    fn build_engine(
        &self,
        task: &TaskMessage,
        (raw, sealed): (&[u8], Option<&[u8]>),
    ) -> Result<Engine, Failure> {
        let h = &task.header;
        let consumer = &self.config.consumer;
        let managed = h
            .managed_search
            .as_ref()
            .map(|m| crate::engine_builder::ManagedSearch {
                backend: m.backend.clone(),
                url: m.url.clone(),
            });
        let store: Arc<dyn quarry_engine::store::ArtifactStore> =
            Arc::new(quarry_engine::store::memory::MemoryStore::new());
        let metrics = Some(self.metrics.for_run(
            h.namespace.as_deref().unwrap_or("standalone"),
            &h.profile_name,
        ));
        let misconfigured = |e: String| {
            Failure::new(
                WORKER_MISCONFIGURED,
                format!(
                    "worker {consumer} cannot use ResearchProfile \"{}\": {e}",
                    h.profile_name
                ),
            )
        };
        match &h.namespace {
            Some(namespace) => {
                let keys = sealed_keys(self.sealing.as_ref(), sealed, raw, namespace, consumer)?;
                crate::engine_builder::build_engine_from_keys(
                    &h.profile,
                    &keys,
                    &self.services,
                    managed,
                    h.specialised,
                    store,
                    metrics,
                )
                .map_err(|e| misconfigured(e.to_string()))
            }
            None => {
                let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
                if let Some((var, field)) = missing_env_key(&h.profile, &env) {
                    return Err(Failure::new(
                        SECRET_UNAVAILABLE,
                        format!(
                            "worker {consumer} has no API key for this standalone run: environment variable {var} (profile {field}) is not set on the worker; set it as for `quarry run`"
                        ),
                    ));
                }
                let api_key =
                    |tier: &quarry_api::ModelTier| tier.api_key_env.as_deref().and_then(&env);
                let secret =
                    |r: &SecretKeyRef| env(&crate::engine_builder::sources::secret_env_var(r));
                let inputs = crate::engine_builder::Inputs {
                    api_key: &api_key,
                    secret: &secret,
                    services: &self.services,
                    managed_search: managed,
                    specialised_filter: h.specialised,
                };
                crate::engine_builder::build_engine_with(&h.profile, &inputs, store, metrics)
                    .map_err(|e| misconfigured(e.to_string()))
            }
        }
    }
}

/// The run and origin a task message names, read loosely (for reporting an unreadable one).
fn origin_hint(bytes: &[u8]) -> Option<(RunKeys, Origin)> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let run = v.get("run")?.as_str()?;
    if !protocol::valid_run_key(run) {
        return None;
    }
    let number = |k: &str| v.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    let attempt = v.get("attempt")?.as_str()?.to_string();
    Some((
        RunKeys::new(run),
        Origin {
            task_id: number("taskId")?,
            round: number("round")?,
            execution: format!("{attempt}/invalid"),
            attempt,
            seq: 1,
        },
    ))
}

#[cfg(test)]
mod tests;
