//! The Redis Streams event stream: one stream per run (`quarry:events:{namespace}/{name}:{uid}`),
//! shared by every operator replica, so any replica serves any run's events.
//!
//! Publishing only queues: one writer task drains the queue in batches (`XADD ... MAXLEN ~`,
//! pipelined, 500 ms deadline). A full queue or a failed batch drops events and counts them in
//! `quarry_event_stream_publish_total{outcome="dropped"|"error"}`; the run never waits on Redis.
//! A stream expires [`RedisSettings::active_ttl`] after its last event, and
//! [`RedisSettings::finished_ttl`] after its run finished. Followers read with `XREAD BLOCK` on a
//! connection of their own (a blocking read would hold up every command sharing a connection).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis::streams::{StreamReadOptions, StreamReadReply};
use tokio::sync::mpsc;
use tracing::warn;

use crate::redis::{COMMAND_TIMEOUT, RedisConnector};
use quarry_engine::events::{
    EventId, EventReader, EventsError, RunEvent, RunEvents, RunRef, StoredEvent,
};
use quarry_engine::telemetry::Metrics;

/// Prefix of every run's stream key.
pub const KEY_PREFIX: &str = "quarry:events:";

/// Bounds of the Redis stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisSettings {
    /// Approximate cap on a run's stream (`XADD MAXLEN ~`).
    pub max_len: usize,
    /// Expiry of a stream after its last event while the run goes on (a crashed run's stream
    /// does not stay forever).
    pub active_ttl: Duration,
    /// Expiry of a stream once its run finished; later, history comes from `events.jsonl`.
    pub finished_ttl: Duration,
    /// Events queued for the writer at most; more are dropped.
    pub queue: usize,
    /// Events sent in one pipeline at most.
    pub batch: usize,
}

impl Default for RedisSettings {
    fn default() -> Self {
        Self {
            max_len: 10_000,
            active_ttl: Duration::from_secs(24 * 3600),
            finished_ttl: Duration::from_secs(3600),
            queue: 4096,
            batch: 128,
        }
    }
}

/// The stream key of a run.
pub fn stream_key(run: &RunRef) -> String {
    format!("{KEY_PREFIX}{}/{}:{}", run.namespace, run.name, run.uid)
}

enum Outgoing {
    Event { key: String, event: RunEvent },
    Finish { key: String },
}

/// Run events in Redis Streams.
pub struct RedisEvents {
    conn: Arc<RedisConnector>,
    tx: mpsc::Sender<Outgoing>,
    metrics: Option<Metrics>,
}

fn backend_error(message: impl Into<String>) -> EventsError {
    EventsError::Backend {
        backend: "redis",
        message: message.into(),
    }
}

impl RedisEvents {
    /// Streams in Redis at `url`, connected on first use; starts the writer task (call inside a
    /// Tokio runtime).
    pub fn start(
        url: &str,
        settings: RedisSettings,
        metrics: Option<Metrics>,
    ) -> Result<Self, EventsError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| backend_error("the Redis event stream needs a Tokio runtime"))?;
        let conn = Arc::new(RedisConnector::new(url).map_err(|e| backend_error(e.to_string()))?);
        let (tx, rx) = mpsc::channel(settings.queue.max(1));
        runtime.spawn(writer(conn.clone(), rx, settings, metrics.clone()));
        Ok(Self { conn, tx, metrics })
    }

    fn count(&self, outcome: &str) {
        if let Some(m) = &self.metrics {
            m.stream_published("redis", outcome, 1);
        }
    }
}

/// Drains the queue into Redis, a batch per pipeline, until every sender is gone.
async fn writer(
    conn: Arc<RedisConnector>,
    mut rx: mpsc::Receiver<Outgoing>,
    settings: RedisSettings,
    metrics: Option<Metrics>,
) {
    let mut batch = Vec::with_capacity(settings.batch);
    while rx.recv_many(&mut batch, settings.batch.max(1)).await > 0 {
        let events = batch
            .iter()
            .filter(|o| matches!(o, Outgoing::Event { .. }))
            .count() as u64;
        let outcome = match send(&conn, &batch, &settings).await {
            Ok(()) => "ok",
            Err(e) => {
                // Once per failed batch at most: Redis being down must not flood the logs.
                warn!(error = %e, events, "run events dropped: Redis did not take them");
                "error"
            }
        };
        if let Some(m) = &metrics
            && events > 0
        {
            m.stream_published("redis", outcome, events);
        }
        batch.clear();
    }
}

async fn send(
    conn: &RedisConnector,
    batch: &[Outgoing],
    settings: &RedisSettings,
) -> Result<(), EventsError> {
    let mut conn = conn.connection().await.map_err(backend_error)?;
    let mut pipe = redis::pipe();
    let mut active = BTreeSet::new();
    let mut finished = BTreeSet::new();
    for item in batch {
        match item {
            Outgoing::Event { key, event } => {
                pipe.cmd("XADD")
                    .arg(key)
                    .arg("MAXLEN")
                    .arg("~")
                    .arg(settings.max_len)
                    .arg("*")
                    .arg("type")
                    .arg(&event.kind)
                    .arg("data")
                    .arg(&event.json)
                    .ignore();
                active.insert(key.as_str());
            }
            Outgoing::Finish { key } => {
                finished.insert(key.as_str());
            }
        }
    }
    for key in active.difference(&finished) {
        pipe.cmd("EXPIRE")
            .arg(*key)
            .arg(settings.active_ttl.as_secs().max(1))
            .ignore();
    }
    for key in &finished {
        pipe.cmd("EXPIRE")
            .arg(*key)
            .arg(settings.finished_ttl.as_secs().max(1))
            .ignore();
    }
    match tokio::time::timeout(COMMAND_TIMEOUT, pipe.query_async::<()>(&mut conn)).await {
        Ok(result) => result.map_err(|e| backend_error(e.to_string())),
        Err(_) => Err(backend_error(format!(
            "no answer within {COMMAND_TIMEOUT:?}"
        ))),
    }
}

#[async_trait]
impl RunEvents for RedisEvents {
    fn backend(&self) -> &'static str {
        "redis"
    }

    fn publish(&self, run: &RunRef, event: RunEvent) {
        let outgoing = Outgoing::Event {
            key: stream_key(run),
            event,
        };
        if self.tx.try_send(outgoing).is_err() {
            self.count("dropped");
        }
    }

    fn finish(&self, run: &RunRef) {
        // Losing this only keeps the stream for `active_ttl` instead of `finished_ttl`.
        let _ = self.tx.try_send(Outgoing::Finish {
            key: stream_key(run),
        });
    }

    async fn exists(&self, run: &RunRef) -> Result<bool, EventsError> {
        let mut conn = self.conn.connection().await.map_err(backend_error)?;
        match tokio::time::timeout(COMMAND_TIMEOUT, conn.exists::<_, bool>(stream_key(run))).await {
            Ok(result) => result.map_err(|e| backend_error(e.to_string())),
            Err(_) => Err(backend_error(format!(
                "no answer within {COMMAND_TIMEOUT:?}"
            ))),
        }
    }

    async fn reader(&self, run: &RunRef) -> Result<Box<dyn EventReader>, EventsError> {
        Ok(Box::new(RedisReader {
            client: self.conn.client().clone(),
            conn: None,
            key: stream_key(run),
        }))
    }
}

struct RedisReader {
    client: redis::Client,
    /// This follower's own connection, made on first read.
    conn: Option<MultiplexedConnection>,
    key: String,
}

impl RedisReader {
    async fn connection(&mut self) -> Result<MultiplexedConnection, EventsError> {
        if let Some(conn) = &self.conn {
            return Ok(conn.clone());
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(COMMAND_TIMEOUT))
            // Blocking reads set their own deadline.
            .set_response_timeout(None);
        let conn = tokio::time::timeout(
            COMMAND_TIMEOUT * 2,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| backend_error("connect timed out"))?
        .map_err(|e| backend_error(e.to_string()))?;
        self.conn = Some(conn.clone());
        Ok(conn)
    }
}

#[async_trait]
impl EventReader for RedisReader {
    async fn next(
        &mut self,
        after: Option<EventId>,
        wait: Duration,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, EventsError> {
        let mut conn = self.connection().await?;
        let from = after.map_or_else(|| "0-0".to_string(), |id| id.to_string());
        let mut options = StreamReadOptions::default().count(limit.max(1));
        // BLOCK 0 would wait forever: a zero wait is a plain read.
        let block_ms = wait.as_millis() as usize;
        if block_ms > 0 {
            options = options.block(block_ms);
        }
        let keys = [&self.key];
        let ids = [&from];
        let read = conn.xread_options::<_, _, Option<StreamReadReply>>(&keys, &ids, &options);
        let reply = match tokio::time::timeout(wait + COMMAND_TIMEOUT, read).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => {
                self.conn = None;
                return Err(backend_error(e.to_string()));
            }
            Err(_) => {
                self.conn = None;
                return Err(backend_error(format!(
                    "no answer within {:?}",
                    wait + COMMAND_TIMEOUT
                )));
            }
        };
        let mut out = Vec::new();
        for key in reply.map(|r| r.keys).unwrap_or_default() {
            for entry in key.ids {
                let Ok(id) = entry.id.parse::<EventId>() else {
                    continue;
                };
                let (Some(kind), Some(json)) =
                    (entry.get::<String>("type"), entry.get::<String>("data"))
                else {
                    continue;
                };
                out.push(StoredEvent { id, kind, json });
            }
        }
        Ok(out)
    }
}
