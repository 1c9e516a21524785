//! The in-memory event stream: a bounded ring of events per run, with a watch channel per run
//! that wakes its followers. One process only (the standalone CLI, or an operator without Redis).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;

use super::{
    EventId, EventReader, EventsError, RunDirectory, RunEvent, RunEvents, RunInfo, RunRef,
    StoredEvent,
};
use crate::telemetry::Metrics;

/// How much the memory stream keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Events kept per run; the oldest go first.
    pub per_run: usize,
    /// Runs kept; finished runs are evicted first, oldest first.
    pub runs: usize,
    /// How long a finished run's events stay.
    pub finished_ttl: Duration,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        Self {
            per_run: 4096,
            runs: 256,
            finished_ttl: Duration::from_secs(3600),
        }
    }
}

struct RunLog {
    uid: String,
    events: VecDeque<StoredEvent>,
    last: Option<EventId>,
    finished: Option<Instant>,
    touched: Instant,
    /// The id of the newest event; followers wait on it.
    notify: watch::Sender<Option<EventId>>,
}

impl RunLog {
    fn new(uid: &str) -> Self {
        Self {
            uid: uid.to_string(),
            events: VecDeque::new(),
            last: None,
            finished: None,
            touched: Instant::now(),
            notify: watch::channel(None).0,
        }
    }
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    runs: HashMap<Key, RunLog>,
}

/// Every run's recent events in this process's memory.
pub struct MemoryEvents {
    inner: Arc<Mutex<Inner>>,
    limits: MemoryLimits,
    metrics: Option<Metrics>,
}

impl Default for MemoryEvents {
    fn default() -> Self {
        Self::new(MemoryLimits::default(), None)
    }
}

fn lock(inner: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    // The map stays consistent even if a holder panicked.
    inner.lock().unwrap_or_else(|p| p.into_inner())
}

fn key(run: &RunRef) -> Key {
    (run.namespace.clone(), run.name.clone())
}

fn now_millis() -> u64 {
    u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0)
}

impl MemoryEvents {
    /// A stream bounded by `limits`, counting publications in `metrics`.
    pub fn new(limits: MemoryLimits, metrics: Option<Metrics>) -> Self {
        Self {
            inner: Arc::default(),
            limits,
            metrics,
        }
    }

    /// The run's log, created (or replaced, when the name now belongs to another UID) if needed.
    fn log_mut<'a>(&self, inner: &'a mut Inner, run: &RunRef) -> &'a mut RunLog {
        let k = key(run);
        if !inner.runs.contains_key(&k) {
            self.evict(inner);
        }
        let log = inner.runs.entry(k).or_insert_with(|| RunLog::new(&run.uid));
        if log.uid != run.uid {
            *log = RunLog::new(&run.uid);
        }
        log
    }

    /// Drops expired finished runs, then, while over the limit, finished runs oldest first and
    /// then the least recently active.
    fn evict(&self, inner: &mut Inner) {
        let ttl = self.limits.finished_ttl;
        inner
            .runs
            .retain(|_, log| log.finished.is_none_or(|t| t.elapsed() < ttl));
        while inner.runs.len() >= self.limits.runs.max(1) {
            let victim = inner
                .runs
                .iter()
                .min_by_key(|(_, log)| {
                    (log.finished.is_none(), log.finished.unwrap_or(log.touched))
                })
                .map(|(k, _)| k.clone());
            match victim {
                Some(k) => {
                    inner.runs.remove(&k);
                }
                None => break,
            }
        }
    }
}

#[async_trait]
impl RunEvents for MemoryEvents {
    fn backend(&self) -> &'static str {
        "memory"
    }

    fn publish(&self, run: &RunRef, event: RunEvent) {
        {
            let mut inner = lock(&self.inner);
            let per_run = self.limits.per_run.max(1);
            let log = self.log_mut(&mut inner, run);
            let id = EventId::next_after(log.last, now_millis());
            log.last = Some(id);
            log.touched = Instant::now();
            log.events.push_back(StoredEvent {
                id,
                kind: event.kind,
                json: event.json,
            });
            while log.events.len() > per_run {
                log.events.pop_front();
            }
            log.notify.send_replace(Some(id));
        }
        if let Some(m) = &self.metrics {
            m.stream_published("memory", "ok", 1);
        }
    }

    fn finish(&self, run: &RunRef) {
        let mut inner = lock(&self.inner);
        if let Some(log) = inner.runs.get_mut(&key(run))
            && log.uid == run.uid
        {
            log.finished = Some(Instant::now());
            // Followers re-check the run's state.
            log.notify.send_modify(|_| {});
        }
    }

    async fn exists(&self, run: &RunRef) -> Result<bool, EventsError> {
        let inner = lock(&self.inner);
        Ok(inner
            .runs
            .get(&key(run))
            .is_some_and(|log| log.uid == run.uid && !log.events.is_empty()))
    }

    async fn reader(&self, run: &RunRef) -> Result<Box<dyn EventReader>, EventsError> {
        Ok(Box::new(MemoryReader {
            inner: self.inner.clone(),
            run: run.clone(),
        }))
    }
}

/// In one process the stream itself knows its runs: a run exists once it published, and is
/// terminal once finished. There is no stored log to fall back on.
#[async_trait]
impl RunDirectory for MemoryEvents {
    async fn lookup(&self, namespace: &str, name: &str) -> Result<Option<RunInfo>, EventsError> {
        let inner = lock(&self.inner);
        Ok(inner
            .runs
            .get(&(namespace.to_string(), name.to_string()))
            .map(|log| RunInfo {
                run: RunRef::new(namespace, name, log.uid.clone()),
                phase: None,
                terminal: log.finished.is_some(),
                message: None,
                totals: Default::default(),
            }))
    }

    async fn event_log(&self, _run: &RunInfo) -> Result<Option<Vec<u8>>, EventsError> {
        Ok(None)
    }
}

struct MemoryReader {
    inner: Arc<Mutex<Inner>>,
    run: RunRef,
}

/// What a reader finds under the lock.
enum Look {
    Events(Vec<StoredEvent>),
    Wait(watch::Receiver<Option<EventId>>),
    NoLog,
}

impl MemoryReader {
    fn look(&self, after: Option<EventId>, limit: usize) -> Look {
        let inner = lock(&self.inner);
        let Some(log) = inner
            .runs
            .get(&key(&self.run))
            .filter(|log| log.uid == self.run.uid)
        else {
            return Look::NoLog;
        };
        let start = match after {
            Some(after) => log.events.partition_point(|e| e.id <= after),
            None => 0,
        };
        if start < log.events.len() {
            return Look::Events(
                log.events
                    .iter()
                    .skip(start)
                    .take(limit.max(1))
                    .cloned()
                    .collect(),
            );
        }
        // Subscribed under the lock that publishers take: no event slips in between.
        let mut rx = log.notify.subscribe();
        rx.borrow_and_update();
        Look::Wait(rx)
    }
}

#[async_trait]
impl EventReader for MemoryReader {
    async fn next(
        &mut self,
        after: Option<EventId>,
        wait: Duration,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, EventsError> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Whatever woke us (a publish, `finish`, an eviction, or nothing), look first: an
            // event that is there is returned even when the wait is over.
            let look = self.look(after, limit);
            if let Look::Events(events) = look {
                return Ok(events);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(Vec::new());
            }
            match look {
                Look::Events(_) => {}
                // Nothing published yet: look again shortly.
                Look::NoLog => {
                    tokio::time::sleep((deadline - now).min(Duration::from_millis(100))).await;
                }
                // Woken by a publish, by `finish`, or by the log being evicted (the sender
                // dropped; the next look finds no log and sleeps).
                Look::Wait(mut rx) => {
                    let _ = tokio::time::timeout_at(deadline, rx.changed()).await;
                }
            }
        }
    }
}
