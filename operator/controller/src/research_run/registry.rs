//! The per-run state of this process: one entry per ResearchRun UID, holding its research task
//! (at most one), the control channel to it, where its store put the report, and the channel to
//! its status writer. [`Registry::forget`] drops all of it at once.
//!
//! Reconcile only hands runs over; the research itself runs in tasks spawned here. Each run has a
//! control channel (run, suspend, cancel) and a watch channel of engine states that the status
//! writer drains, which coalesces bursts of progress into at most one status patch per interval.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::store::routed::{ReportLocation, ReportSlot};
use quarry_api::ResearchRun;
use quarry_engine::research::machine::state::RunState;

/// What the controller asks of a running research task: the engine's own control vocabulary
/// (run, suspend at the next safe point keeping the checkpoint, cancel for good).
pub type Signal = quarry_engine::research::shell::executor::Control;

/// State of a registry entry as reconcile sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// No task was ever started for this UID in this process.
    Absent,
    /// A task is running.
    Active,
    /// The task ended in a terminal phase (its final status is being or was written).
    Finished,
    /// The task ended without finishing the run (suspended); it may be started again.
    Stopped,
}

/// The future of one run's research: ends with the engine's last state.
pub type ResearchTask = BoxFuture<'static, RunState>;

struct Entry {
    control: watch::Sender<Signal>,
    /// Aborts the task outright (leadership lost: not one more write).
    abort: Option<tokio::task::AbortHandle>,
    presence: Presence,
    /// The state the task ended with.
    last: Option<Arc<RunState>>,
    /// Where the run's store put (or will put) its report.
    report: Option<ReportSlot>,
    /// The status writer's id and the channel that hands it newer generations of the run, so
    /// status written during research carries the current `observedGeneration`.
    writer: Option<(u64, watch::Sender<Arc<ResearchRun>>)>,
}

/// Registry of research tasks keyed by run UID. Cheap to clone.
#[derive(Clone, Default)]
pub struct Registry {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    writer_ids: Arc<AtomicU64>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("runs", &self.uids().len())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A poisoned lock only means another thread panicked mid-update of a plain map; the map
        // itself is still consistent, so keep serving.
        self.entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Where the task of `uid` stands.
    pub fn presence(&self, uid: &str) -> Presence {
        self.lock()
            .get(uid)
            .map_or(Presence::Absent, |e| e.presence)
    }

    /// The state the task of `uid` ended with, once it ended.
    pub fn final_state(&self, uid: &str) -> Option<Arc<RunState>> {
        self.lock().get(uid).and_then(|e| e.last.clone())
    }

    /// UIDs with an entry (active or finished).
    pub fn uids(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Starts `make_task` for `uid` unless a task is already active; returns whether it started.
    /// `make_task` receives the control receiver; the task's final state goes to `on_done`.
    pub fn start<F, D>(&self, uid: &str, make_task: F, on_done: D) -> bool
    where
        F: FnOnce(watch::Receiver<Signal>) -> ResearchTask,
        D: FnOnce(RunState) + Send + 'static,
    {
        self.start_with(uid, Signal::Run, make_task, on_done)
    }

    /// [`Registry::start`] with the task's first signal (an approved plan, say).
    pub fn start_with<F, D>(&self, uid: &str, initial: Signal, make_task: F, on_done: D) -> bool
    where
        F: FnOnce(watch::Receiver<Signal>) -> ResearchTask,
        D: FnOnce(RunState) + Send + 'static,
    {
        let (tx, rx) = watch::channel(initial);
        {
            let mut entries = self.lock();
            if entries
                .get(uid)
                .is_some_and(|e| matches!(e.presence, Presence::Active | Presence::Finished))
            {
                return false;
            }
            entries.insert(
                uid.to_string(),
                Entry {
                    control: tx,
                    abort: None,
                    presence: Presence::Active,
                    last: None,
                    report: None,
                    writer: None,
                },
            );
        }
        let task = make_task(rx);
        let registry = self.clone();
        let task_uid = uid.to_string();
        let handle = tokio::spawn(async move {
            let uid = task_uid;
            let state = task.await;
            let presence = if state.phase.is_terminal() {
                Presence::Finished
            } else {
                Presence::Stopped
            };
            if let Some(entry) = registry.lock().get_mut(&uid) {
                entry.presence = presence;
                entry.last = Some(Arc::new(state.clone()));
            }
            on_done(state);
        });
        if let Some(entry) = self.lock().get_mut(uid) {
            entry.abort = Some(handle.abort_handle());
        }
        true
    }

    /// Aborts every running task at once, without a final checkpoint or status write (another
    /// replica holds the lease now and owns the runs); returns how many were running.
    pub fn abort_all(&self) -> usize {
        let mut entries = self.lock();
        let mut aborted = 0;
        for entry in entries.values_mut() {
            if entry.presence == Presence::Active {
                if let Some(h) = entry.abort.take() {
                    h.abort();
                }
                entry.presence = Presence::Stopped;
                aborted += 1;
            }
        }
        aborted
    }

    /// Sends `signal` to the active task of `uid`; returns whether there was one.
    pub fn signal(&self, uid: &str, signal: Signal) -> bool {
        match self.lock().get(uid) {
            Some(entry) if entry.presence == Presence::Active => {
                entry.control.send_if_modified(|current| {
                    let changed = *current != signal;
                    *current = signal;
                    changed
                });
                true
            }
            _ => false,
        }
    }

    /// Cancels the task of `uid` and drops everything kept about the run (it was deleted).
    pub fn forget(&self, uid: &str) {
        if let Some(entry) = self.lock().remove(uid) {
            let _ = entry.control.send(Signal::Cancel);
        }
    }

    /// Records where the store of `uid`'s task puts the report.
    pub fn set_report(&self, uid: &str, report: ReportSlot) {
        if let Some(entry) = self.lock().get_mut(uid) {
            entry.report = Some(report);
        }
    }

    /// Where the store of `uid`'s task put the report, once it wrote one.
    pub fn report_location(&self, uid: &str) -> Option<ReportLocation> {
        self.lock()
            .get(uid)
            .and_then(|e| e.report.as_ref().and_then(ReportSlot::get))
    }

    /// Registers a new status writer of `uid`: its id and the receiver of newer run objects.
    pub fn subscribe_writer(
        &self,
        uid: &str,
        run: &Arc<ResearchRun>,
    ) -> (u64, watch::Receiver<Arc<ResearchRun>>) {
        let id = self.writer_ids.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = watch::channel(run.clone());
        if let Some(entry) = self.lock().get_mut(uid) {
            entry.writer = Some((id, tx));
        }
        (id, rx)
    }

    /// Whether a status writer is registered for `uid`.
    pub fn has_writer(&self, uid: &str) -> bool {
        self.lock().get(uid).is_some_and(|e| e.writer.is_some())
    }

    /// Unregisters status writer `id` of `uid` (not a newer writer of the same run).
    pub fn unsubscribe_writer(&self, uid: &str, id: u64) {
        if let Some(entry) = self.lock().get_mut(uid)
            && entry
                .writer
                .as_ref()
                .is_some_and(|(current, _)| *current == id)
        {
            entry.writer = None;
        }
    }

    /// Hands a newer generation of `uid`'s run to its status writer.
    pub fn publish_run(&self, uid: &str, run: &Arc<ResearchRun>) {
        if let Some((_, tx)) = self.lock().get(uid).and_then(|e| e.writer.as_ref()) {
            tx.send_if_modified(|current| {
                let newer = current.metadata.generation != run.metadata.generation;
                if newer {
                    *current = run.clone();
                }
                newer
            });
        }
    }
}

#[cfg(test)]
mod tests;
