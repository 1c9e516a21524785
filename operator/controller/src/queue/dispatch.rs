//! The leader's side of scale-out mode: the executor's researcher dispatch over Redis.
//!
//! `start` queues a task on `quarry:tasks` (in command order, through one publisher task) and
//! waits for its result. One reader per run follows the run's results stream: progress is applied
//! at once (usage, the per-model ledger and the provenance log, so cost accounting is exact,
//! including attempts that die), terminal results go to the task that waits for them, once per
//! (task, round). Finished sibling reports are forwarded to the running tasks' steering streams.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use redis::aio::ConnectionManager;
use redis::streams::{StreamReadOptions, StreamReadReply};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use tracing::{debug, info, warn};

use super::protocol::reasons::WORK_QUEUE_UNAVAILABLE;
use super::protocol::{
    self, Origin, ResultBook, ResultMessage, RunHeader, RunKeys, TASKS_STREAM, TaskMessage,
};
use super::seal::SealingKey;
use super::{COMMAND_TIMEOUT, QueueError, connect, ensure_group, field_bytes, timed};
use crate::engine_builder::ApiKey;
use quarry_api::SecretKeyRef;
use quarry_engine::llm::router::SpendGuard;
use quarry_engine::research::agents::researcher::SteeringInbox;
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::Failure;
use quarry_engine::research::shell::dispatch::{ResearcherDispatch, ResearcherJob, ResearcherWork};

/// How long one blocking read of the results stream waits.
const READ_BLOCK: Duration = Duration::from_secs(1);
/// Result entries read at once.
const READ_COUNT: usize = 64;
/// Attempts to queue a task before its researcher fails (about 6 s of backoff in all).
const PUBLISH_TRIES: u32 = 5;
/// How long `finish` waits for queued writes and the cleanup.
const FINISH_TIMEOUT: Duration = Duration::from_secs(10);

/// A run key for a standalone run: 32 random hex digits.
pub fn new_run_key() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

enum Outgoing {
    Task {
        key: (u32, u32),
        attempt: String,
        bytes: Vec<u8>,
        /// The run's API keys sealed for this task (field `k`), for workers without API access.
        sealed: Option<Vec<u8>>,
    },
    Steer {
        task_id: u32,
        bytes: Vec<u8>,
    },
    Cancel {
        attempt: String,
    },
    Finish {
        done: oneshot::Sender<()>,
    },
}

struct Waiter {
    attempt: String,
    tx: oneshot::Sender<Event>,
}

/// What the publisher, the reader and the waiting tasks share.
struct LeaderState {
    run: String,
    keys: RunKeys,
    spend: Arc<SpendGuard>,
    waiters: Mutex<HashMap<(u32, u32), Waiter>>,
    book: Mutex<ResultBook>,
    /// The executor's event channel (set by the first `start`).
    events: Mutex<Option<mpsc::UnboundedSender<Event>>>,
    /// Tasks that have a steering stream (deleted by `finish`).
    steered: Mutex<BTreeSet<u32>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LeaderState {
    /// Hands `event` to the waiter of `key` if it is still the waiter of `attempt`.
    fn resolve(&self, key: (u32, u32), attempt: &str, event: Event) {
        let mut waiters = lock(&self.waiters);
        if waiters.get(&key).is_some_and(|w| w.attempt == attempt)
            && let Some(w) = waiters.remove(&key)
        {
            let _ = w.tx.send(event);
        }
    }

    /// Applies one message of the results stream; true when it logged model calls.
    fn apply(&self, message: ResultMessage) -> bool {
        match message {
            ResultMessage::Progress {
                origin,
                units,
                usage,
                by_model,
                calls,
                sources,
            } => {
                if !lock(&self.book).admit_progress(&origin) {
                    debug!(execution = %origin.execution, seq = origin.seq, "repeated progress ignored");
                    return false;
                }
                // The ledger first: the executor copies it into the state when it applies the
                // event, and call lines carry the run total that includes it.
                self.spend.account_remote(&by_model);
                let logged = !calls.is_empty();
                for call in calls {
                    self.spend.log_call(call.into_record());
                }
                for source in sources {
                    self.spend.log_source(source.into_record());
                }
                if let Some(tx) = lock(&self.events).as_ref() {
                    let _ = tx.send(Event::ResearcherProgress {
                        task_id: origin.task_id,
                        units,
                        usage,
                    });
                }
                logged
            }
            ResultMessage::Finished { origin, report } => {
                self.terminal(&origin, Event::ResearcherFinished { report });
                false
            }
            ResultMessage::Failed { origin, failure } => {
                let task_id = origin.task_id;
                self.terminal(&origin, Event::ResearcherFailed { task_id, failure });
                false
            }
        }
    }

    fn terminal(&self, origin: &Origin, event: Event) {
        let key = (origin.task_id, origin.round);
        let mut waiters = lock(&self.waiters);
        let awaited = waiters.contains_key(&key);
        if !lock(&self.book).admit_terminal(origin, awaited) {
            info!(task_id = origin.task_id, round = origin.round, execution = %origin.execution, "duplicate or unawaited result ignored");
            return;
        }
        if let Some(w) = waiters.remove(&key) {
            info!(task_id = origin.task_id, execution = %origin.execution, "researcher result received");
            let _ = w.tx.send(event);
        }
    }
}

/// The API keys the operator resolved for a run (each Secret opted in for its host), handed to
/// workers sealed with every task (see [`super::seal`]).
pub struct TaskKeys {
    /// The key shared with the workers.
    pub sealing: Arc<SealingKey>,
    /// The run's keys, as the operator's own engine uses them.
    pub keys: Vec<(SecretKeyRef, ApiKey)>,
}

/// The executor's dispatch port over Redis for one run.
pub struct RedisDispatch {
    header: RunHeader,
    keys: Option<TaskKeys>,
    outgoing: mpsc::UnboundedSender<Outgoing>,
    state: Arc<LeaderState>,
    reader: AbortHandle,
}

impl Drop for RedisDispatch {
    // The reader stops with the run. The publisher is left to drain: it ends once the last
    // abandoned task's work has been dropped and its cancellation written.
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl RedisDispatch {
    /// Connects to Redis at `url` and starts following the run's results; `spend` is the run
    /// engine's guard, which remote usage is charged to.
    pub async fn connect(
        url: &str,
        header: RunHeader,
        spend: Arc<SpendGuard>,
    ) -> Result<Self, QueueError> {
        if !protocol::valid_run_key(&header.run) {
            return Err(QueueError::Protocol(protocol::ProtocolError::RunKey(
                header.run.clone(),
            )));
        }
        let client = redis::Client::open(url).map_err(super::redis_err("open"))?;
        let mut conn = connect(&client, COMMAND_TIMEOUT).await?;
        ensure_group(&mut conn).await?;
        let keys = RunKeys::new(&header.run);
        // Results from here on: what was reported before this leader started was already
        // counted by the one before it (or belongs to a run that ended).
        let last: Vec<redis::streams::StreamId> = {
            let reply: redis::streams::StreamRangeReply = timed(
                "XREVRANGE results",
                COMMAND_TIMEOUT,
                redis::cmd("XREVRANGE")
                    .arg(&keys.results)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .query_async(&mut conn),
            )
            .await?;
            reply.ids
        };
        let from = last
            .first()
            .map_or_else(|| "0-0".to_string(), |e| e.id.clone());
        let reader_conn = connect(&client, READ_BLOCK + COMMAND_TIMEOUT).await?;
        let state = Arc::new(LeaderState {
            run: header.run.clone(),
            keys,
            spend,
            waiters: Mutex::default(),
            book: Mutex::default(),
            events: Mutex::default(),
            steered: Mutex::default(),
        });
        let (outgoing, rx) = mpsc::unbounded_channel();
        tokio::spawn(publish(conn, rx, state.clone()));
        let reader = tokio::spawn(read_results(reader_conn, state.clone(), from));
        Ok(Self {
            header,
            keys: None,
            outgoing,
            state,
            reader: reader.abort_handle(),
        })
    }

    /// Hands `keys` to the workers with every task, sealed (operator runs: workers have no API
    /// access to read Secrets).
    pub fn with_keys(mut self, keys: TaskKeys) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Ends the run's use of Redis: marks it done (queued tasks of it are dropped unrun, running
    /// ones stop) and deletes its results, URL pool and steering streams.
    pub async fn finish(&self) {
        let (done, rx) = oneshot::channel();
        if self.outgoing.send(Outgoing::Finish { done }).is_ok()
            && tokio::time::timeout(FINISH_TIMEOUT, rx).await.is_err()
        {
            warn!("work queue cleanup did not finish in time");
        }
    }
}

/// Abandons a task whose work was dropped before its result came (cancel, suspend, time limit).
struct CancelOnDrop {
    outgoing: mpsc::UnboundedSender<Outgoing>,
    state: Arc<LeaderState>,
    key: (u32, u32),
    attempt: String,
    settled: bool,
}

impl CancelOnDrop {
    /// The result came: nothing to abandon.
    fn settle(&mut self) {
        self.settled = true;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        {
            let mut waiters = lock(&self.state.waiters);
            if waiters
                .get(&self.key)
                .is_some_and(|w| w.attempt == self.attempt)
            {
                waiters.remove(&self.key);
            }
        }
        let _ = self.outgoing.send(Outgoing::Cancel {
            attempt: self.attempt.clone(),
        });
    }
}

impl ResearcherDispatch for RedisDispatch {
    fn start(
        &self,
        job: ResearcherJob,
        mut steering: SteeringInbox,
        events: mpsc::UnboundedSender<Event>,
    ) -> ResearcherWork {
        {
            let mut slot = lock(&self.state.events);
            if slot.is_none() {
                *slot = Some(events);
            }
        }
        let task_id = job.task_id;
        let key = (job.task_id, job.round);
        let attempt = new_run_key();
        let message = TaskMessage {
            v: protocol::VERSION,
            header: self.header.clone(),
            task_id: job.task_id,
            round: job.round,
            attempt: attempt.clone(),
            query: job.query,
            input: job.input,
            injected: job.injected,
            spent: job.spent,
        };
        let bytes = match protocol::encode_task(&message) {
            Ok(b) => b,
            Err(e) => {
                let failure = Failure::new(
                    WORK_QUEUE_UNAVAILABLE,
                    format!("researcher task {task_id} could not be queued: {e}"),
                );
                return Box::pin(async move { Event::ResearcherFailed { task_id, failure } });
            }
        };
        // Sealed over the exact message bytes: a task changed in Redis does not open.
        let sealed = match &self.keys {
            Some(k) => match k.sealing.seal(&k.keys, &bytes) {
                Ok(sealed) => Some(sealed),
                Err(e) => {
                    let failure = Failure::new(
                        WORK_QUEUE_UNAVAILABLE,
                        format!("researcher task {task_id} could not be queued: {e}"),
                    );
                    return Box::pin(async move { Event::ResearcherFailed { task_id, failure } });
                }
            },
            None => None,
        };
        let (tx, mut rx) = oneshot::channel();
        lock(&self.state.waiters).insert(
            key,
            Waiter {
                attempt: attempt.clone(),
                tx,
            },
        );
        let _ = self.outgoing.send(Outgoing::Task {
            key,
            attempt: attempt.clone(),
            bytes,
            sealed,
        });
        let mut guard = CancelOnDrop {
            outgoing: self.outgoing.clone(),
            state: self.state.clone(),
            key,
            attempt,
            settled: false,
        };
        Box::pin(async move {
            let mut steering_open = true;
            loop {
                tokio::select! {
                    result = &mut rx => {
                        guard.settle();
                        return result.unwrap_or_else(|_| Event::ResearcherFailed {
                            task_id,
                            failure: Failure::new(
                                WORK_QUEUE_UNAVAILABLE,
                                "the run's work queue stopped before the researcher's result came",
                            ),
                        });
                    }
                    report = steering.recv(), if steering_open => match report {
                        Some(report) => match protocol::encode_steer(&report) {
                            Ok(bytes) => {
                                let _ = guard.outgoing.send(Outgoing::Steer { task_id, bytes });
                            }
                            Err(e) => warn!(error = %e, "steering report not sent"),
                        },
                        None => steering_open = false,
                    },
                }
            }
        })
    }
}

/// Writes the run's outgoing messages in order.
async fn publish(
    mut conn: ConnectionManager,
    mut rx: mpsc::UnboundedReceiver<Outgoing>,
    state: Arc<LeaderState>,
) {
    let ttl = protocol::RUN_KEY_TTL.as_secs();
    while let Some(message) = rx.recv().await {
        match message {
            Outgoing::Task {
                key,
                attempt,
                bytes,
                sealed,
            } => {
                let mut last = String::new();
                let mut queued = false;
                for n in 0..PUBLISH_TRIES {
                    if n > 0 {
                        tokio::time::sleep(Duration::from_millis(200 << n)).await;
                    }
                    let mut add = redis::cmd("XADD");
                    add.arg(TASKS_STREAM)
                        .arg("*")
                        .arg("run")
                        .arg(&state.run)
                        .arg("task")
                        .arg(key.0)
                        .arg("m")
                        .arg(&bytes);
                    if let Some(sealed) = &sealed {
                        add.arg("k").arg(sealed);
                    }
                    let added: Result<String, QueueError> = timed(
                        "XADD quarry:tasks",
                        COMMAND_TIMEOUT,
                        add.query_async(&mut conn),
                    )
                    .await;
                    match added {
                        Ok(id) => {
                            info!(task_id = key.0, round = key.1, entry = %id, "researcher task queued");
                            queued = true;
                            break;
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                if !queued {
                    warn!(task_id = key.0, error = %last, "researcher task not queued");
                    state.resolve(
                        key,
                        &attempt,
                        Event::ResearcherFailed {
                            task_id: key.0,
                            failure: Failure::new(
                                WORK_QUEUE_UNAVAILABLE,
                                format!(
                                    "researcher task {} could not be queued on the Redis stream {TASKS_STREAM}: {last}; check that Redis is reachable at the configured redis URL",
                                    key.0
                                ),
                            ),
                        },
                    );
                }
            }
            Outgoing::Steer { task_id, bytes } => {
                let stream = state.keys.steer(task_id);
                lock(&state.steered).insert(task_id);
                let sent: Result<(), QueueError> = timed(
                    "XADD steering",
                    COMMAND_TIMEOUT,
                    redis::pipe()
                        .cmd("XADD")
                        .arg(&stream)
                        .arg("*")
                        .arg("m")
                        .arg(&bytes)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(&stream)
                        .arg(ttl)
                        .ignore()
                        .query_async(&mut conn),
                )
                .await;
                if let Err(e) = sent {
                    // Steering improves a report; its loss is not worth failing the task.
                    warn!(task_id, error = %e, "steering report not delivered");
                }
            }
            Outgoing::Cancel { attempt } => {
                let sent: Result<(), QueueError> = timed(
                    "SADD cancelled",
                    COMMAND_TIMEOUT,
                    redis::pipe()
                        .cmd("SADD")
                        .arg(&state.keys.cancelled)
                        .arg(&attempt)
                        .ignore()
                        .cmd("EXPIRE")
                        .arg(&state.keys.cancelled)
                        .arg(ttl)
                        .ignore()
                        .query_async(&mut conn),
                )
                .await;
                if let Err(e) = sent {
                    warn!(error = %e, "abandoned researcher task not marked; it runs to its end");
                }
            }
            Outgoing::Finish { done } => {
                let steered: Vec<String> = lock(&state.steered)
                    .iter()
                    .map(|t| state.keys.steer(*t))
                    .collect();
                let mut pipe = redis::pipe();
                // Kept an hour: workers that still hold a task of this run see it ended.
                pipe.cmd("SET")
                    .arg(&state.keys.done)
                    .arg(1)
                    .arg("EX")
                    .arg(3600)
                    .ignore()
                    .cmd("EXPIRE")
                    .arg(&state.keys.cancelled)
                    .arg(3600)
                    .ignore()
                    .cmd("DEL")
                    .arg(&state.keys.results)
                    .arg(&state.keys.urls)
                    .ignore();
                for s in &steered {
                    pipe.cmd("DEL").arg(s).ignore();
                }
                let cleaned: Result<(), QueueError> =
                    timed("finish run", COMMAND_TIMEOUT, pipe.query_async(&mut conn)).await;
                if let Err(e) = cleaned {
                    warn!(error = %e, "run's work queue keys not cleaned up; they expire in a day");
                }
                let _ = done.send(());
            }
        }
    }
}

/// Follows the run's results stream from entry `from` on.
async fn read_results(mut conn: ConnectionManager, state: Arc<LeaderState>, from: String) {
    let mut last = from;
    let mut failing_since: Option<tokio::time::Instant> = None;
    let options = StreamReadOptions::default()
        .block(READ_BLOCK.as_millis() as usize)
        .count(READ_COUNT);
    loop {
        let reply: Result<Option<StreamReadReply>, QueueError> = timed(
            "XREAD results",
            READ_BLOCK + COMMAND_TIMEOUT,
            redis::cmd("XREAD")
                .arg(&options)
                .arg("STREAMS")
                .arg(&state.keys.results)
                .arg(&last)
                .query_async(&mut conn),
        )
        .await;
        let reply = match reply {
            Ok(r) => {
                if failing_since.take().is_some() {
                    info!("work queue results readable again");
                }
                r
            }
            Err(e) => {
                // Results stay in the stream: nothing is lost while Redis is away.
                if failing_since.is_none() {
                    warn!(error = %e, "cannot read researcher results; retrying");
                    failing_since = Some(tokio::time::Instant::now());
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for key in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in key.ids {
                last = entry.id.clone();
                let Some(bytes) = field_bytes(&entry.map, "m") else {
                    warn!(entry = %entry.id, "result entry without message");
                    continue;
                };
                match protocol::decode_result(&bytes) {
                    Ok(message) => {
                        // Remote calls are made durable in the run's cost journal like local ones.
                        if state.apply(message) {
                            state.spend.sync_journal().await;
                        }
                    }
                    Err(e) => warn!(entry = %entry.id, error = %e, "unreadable result entry"),
                }
            }
        }
    }
}
