//! Per-engine health of SearXNG backends, read off every answer.
//!
//! Public engines answer datacenter addresses with CAPTCHAs, suspensions and HTTP 200 with zero
//! results. SearXNG reports the first two in `unresponsive_engines` (`[[engine, message], ...]`)
//! and then skips a suspended engine silently, so the record keeps a failure state until the
//! engine returns results again instead of reading the silence as "healthy".
//!
//! [`next_health`] is the pure transition; [`HealthBook`] holds the records of every backend of
//! the process (keyed by backend, e.g. a SearchEngine's `namespace/name` or an external URL), is
//! read by the SearchEngine controller for its status, and mirrors each change into metrics.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// What an engine's recent answers say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EngineState {
    /// It returned results.
    Healthy,
    /// It was asked to solve a CAPTCHA (SearXNG suspends it for days).
    Captcha,
    /// Too many requests, access denied or blocked: the engine refuses this server for a while.
    Suspended,
    /// It did not answer in time.
    Timeout,
    /// It answered without results (HTTP 200, zero results: often a silent block).
    Empty,
    /// Any other error (HTTP error, parsing error, crash).
    Error,
}

impl EngineState {
    /// Every state, for metrics that export one gauge per state.
    pub const ALL: [EngineState; 6] = [
        EngineState::Healthy,
        EngineState::Captcha,
        EngineState::Suspended,
        EngineState::Timeout,
        EngineState::Empty,
        EngineState::Error,
    ];

    /// The state's name as exported in status and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineState::Healthy => "Healthy",
            EngineState::Captcha => "Captcha",
            EngineState::Suspended => "Suspended",
            EngineState::Timeout => "Timeout",
            EngineState::Empty => "Empty",
            EngineState::Error => "Error",
        }
    }

    /// Whether the engine failed (as opposed to answering, with or without results).
    pub fn is_failure(self) -> bool {
        !matches!(self, EngineState::Healthy | EngineState::Empty)
    }
}

/// Classifies an `unresponsive_engines` message of searx 1.x or SearXNG.
///
/// searx 1.1 sends "HTTP timeout", "HTTP error", "CAPTCHA required", "too many requests",
/// "blocked" and "unexpected crash"; SearXNG sends "timeout", "CAPTCHA", "access denied",
/// "too many requests", "network error", "SSL error", "parsing error", ... and may prefix a
/// suspension ("Suspended: CAPTCHA"). CAPTCHA wins over "suspended" because it says why.
pub fn classify(message: &str) -> EngineState {
    let m = message.to_ascii_lowercase();
    if m.contains("captcha") {
        EngineState::Captcha
    } else if m.contains("too many requests")
        || m.contains("suspended")
        || m.contains("access denied")
        || m.contains("blocked")
    {
        EngineState::Suspended
    } else if m.contains("timeout") || m.contains("timed out") {
        EngineState::Timeout
    } else {
        EngineState::Error
    }
}

/// What one answer said about one engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// The engine contributed this many results (> 0).
    Results(u64),
    /// The engine was listed as unresponsive with this message.
    Failed(String),
    /// The engine is configured but contributed nothing and was not listed.
    Silent,
}

/// The health record of one engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineHealth {
    /// Current state.
    pub state: EngineState,
    /// Answers in a row in which the engine failed.
    pub consecutive_failures: u32,
    /// The last failure message, as the engine reported it.
    pub last_error: Option<String>,
    /// When the state last changed.
    pub since: SystemTime,
    /// When the engine was last observed.
    pub last_seen: SystemTime,
    /// Results it contributed in all.
    pub results: u64,
}

/// The pure transition of an engine's record on one signal.
pub fn next_health(prev: Option<&EngineHealth>, signal: &Signal, now: SystemTime) -> EngineHealth {
    let (state, failures, last_error, results) = match signal {
        Signal::Results(n) => (
            EngineState::Healthy,
            0,
            prev.and_then(|p| p.last_error.clone()),
            prev.map_or(0, |p| p.results) + n,
        ),
        Signal::Failed(message) => (
            classify(message),
            prev.map_or(0, |p| p.consecutive_failures).saturating_add(1),
            Some(message.clone()),
            prev.map_or(0, |p| p.results),
        ),
        Signal::Silent => match prev {
            // SearXNG skips a suspended engine without a word: the failure still holds.
            Some(p) if p.state.is_failure() => (
                p.state,
                p.consecutive_failures,
                p.last_error.clone(),
                p.results,
            ),
            Some(p) => (EngineState::Empty, 0, p.last_error.clone(), p.results),
            None => (EngineState::Empty, 0, None, 0),
        },
    };
    let since = match prev {
        Some(p) if p.state == state => p.since,
        _ => now,
    };
    EngineHealth {
        state,
        consecutive_failures: failures,
        last_error,
        since,
        last_seen: now,
        results,
    }
}

/// One SearXNG answer, as far as engine health is concerned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerReport {
    /// Results per engine (an engine that merged a result with others counts once per result).
    pub results_by_engine: BTreeMap<String, u64>,
    /// `unresponsive_engines`: engine name and message.
    pub unresponsive: Vec<(String, String)>,
}

impl AnswerReport {
    /// The signal per engine: `expected` engines (the configured ones) that are neither listed
    /// nor contributed are `Silent`.
    pub fn signals(&self, expected: &[String]) -> BTreeMap<String, Signal> {
        let mut signals = BTreeMap::new();
        for name in expected {
            signals.insert(name.clone(), Signal::Silent);
        }
        for (name, count) in &self.results_by_engine {
            if *count > 0 {
                signals.insert(name.clone(), Signal::Results(*count));
            }
        }
        for (name, message) in &self.unresponsive {
            signals.insert(name.clone(), Signal::Failed(message.clone()));
        }
        signals
    }
}

/// Called with (backend, engine, new record) on every state change, e.g. to export metrics.
pub type HealthListener = Arc<dyn Fn(&str, &str, &EngineHealth) + Send + Sync>;

/// The engine health records of every search backend of this process.
#[derive(Default)]
pub struct HealthBook {
    records: Mutex<BTreeMap<String, BTreeMap<String, EngineHealth>>>,
    /// Configured engine names per backend (for `Silent` detection).
    expected: Mutex<BTreeMap<String, Vec<String>>>,
    listener: Mutex<Option<HealthListener>>,
}

impl std::fmt::Debug for HealthBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthBook").finish_non_exhaustive()
    }
}

impl HealthBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// Installs the function told about every record change (one per book).
    pub fn set_listener(&self, listener: HealthListener) {
        *lock(&self.listener) = Some(listener);
    }

    /// Declares the engines a backend is configured with, so silent ones are noticed.
    pub fn expect_engines(&self, backend: &str, engines: Vec<String>) {
        lock(&self.expected).insert(backend.to_string(), engines);
    }

    /// Folds one answer of `backend` into its engines' records.
    pub fn observe(&self, backend: &str, report: &AnswerReport, now: SystemTime) {
        let expected = lock(&self.expected)
            .get(backend)
            .cloned()
            .unwrap_or_default();
        let signals = report.signals(&expected);
        let listener = lock(&self.listener).clone();
        let mut changed = Vec::new();
        {
            let mut records = lock(&self.records);
            let engines = records.entry(backend.to_string()).or_default();
            for (engine, signal) in signals {
                let prev = engines.get(&engine);
                let next = next_health(prev, &signal, now);
                if prev.map(|p| p.state) != Some(next.state) {
                    changed.push((engine.clone(), next.clone()));
                }
                engines.insert(engine, next);
            }
        }
        if let Some(listener) = listener {
            for (engine, record) in changed {
                listener(backend, &engine, &record);
            }
        }
    }

    /// The records of one backend, by engine name.
    pub fn snapshot(&self, backend: &str) -> BTreeMap<String, EngineHealth> {
        lock(&self.records)
            .get(backend)
            .cloned()
            .unwrap_or_default()
    }
}

/// A poisoned lock only means another thread panicked mid-update of plain data; keep going.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
