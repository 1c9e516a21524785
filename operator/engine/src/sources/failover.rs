//! Search failover: SearXNG first, then the API providers the profile configures, each behind a
//! circuit breaker shared by every run of the process.
//!
//! A backend is skipped while its breaker is open; an error counts against the breaker and falls
//! over to the next backend; an answer without results also falls over (public engines often
//! answer a blocked server with HTTP 200 and nothing) but does not trip the breaker, since an
//! obscure query legitimately finds nothing. When every backend answered empty the search is
//! empty; when none answered, the error names each backend's failure.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tracing::{debug, warn};

use super::{Gatherer, SearchHit, SourceError};
use crate::llm::breaker::{BreakerSettings, CircuitBreaker};

/// Breaker settings of a search backend: search is cheap to retry elsewhere, so it opens sooner
/// and probes again sooner than a model endpoint's.
pub const SEARCH_BREAKER: BreakerSettings = BreakerSettings {
    failures_to_open: 3,
    open_for: Duration::from_secs(30),
    successes_to_close: 1,
};

/// Told about each backend call and breaker change (metrics live outside this module).
pub trait FailoverObserver: Send + Sync {
    /// A backend call ended with `outcome` (`ok`, `empty`, `error`, `skipped`).
    fn on_call(&self, backend: &str, outcome: &'static str);
    /// A backend's breaker is now in the state whose gauge value is `gauge` (0 closed,
    /// 1 half-open, 2 open).
    fn on_breaker(&self, backend: &str, gauge: i64);
}

/// One search backend in the failover chain.
#[derive(Clone)]
pub struct Backend {
    /// Name used in logs, metrics and errors (`searxng`, `brave`, ...).
    pub name: String,
    /// Key of the backend's breaker: one breaker per endpoint, shared by every run.
    pub breaker_key: String,
    /// The client.
    pub gatherer: Arc<dyn Gatherer>,
}

/// Process-wide breakers of search backends, by endpoint key.
static BREAKERS: LazyLock<Mutex<HashMap<String, Arc<Mutex<CircuitBreaker>>>>> =
    LazyLock::new(Mutex::default);

/// The shared breaker of a backend endpoint.
pub fn breaker_for(key: &str) -> Arc<Mutex<CircuitBreaker>> {
    lock(&BREAKERS)
        .entry(key.to_string())
        .or_insert_with(|| Arc::new(Mutex::new(CircuitBreaker::with(SEARCH_BREAKER))))
        .clone()
}

/// A `Gatherer` that tries its backends in order.
pub struct FailoverGatherer {
    backends: Vec<(Backend, Arc<Mutex<CircuitBreaker>>)>,
    observer: Option<Arc<dyn FailoverObserver>>,
}

impl FailoverGatherer {
    /// A chain over `backends`, tried in the given order.
    pub fn new(backends: Vec<Backend>) -> Self {
        let backends = backends
            .into_iter()
            .map(|b| {
                let breaker = breaker_for(&b.breaker_key);
                (b, breaker)
            })
            .collect();
        Self {
            backends,
            observer: None,
        }
    }

    /// Reports calls and breaker changes to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn FailoverObserver>) -> Self {
        // Every backend's breaker is visible from the start, not only after its first change.
        for (backend, breaker) in &self.backends {
            observer.on_breaker(&backend.name, lock(breaker).state().gauge());
        }
        self.observer = Some(observer);
        self
    }

    /// Names of the backends, in order.
    pub fn backend_names(&self) -> Vec<&str> {
        self.backends.iter().map(|(b, _)| b.name.as_str()).collect()
    }

    fn note(&self, backend: &Backend, outcome: &'static str) {
        if let Some(o) = &self.observer {
            o.on_call(&backend.name, outcome);
        }
    }

    /// Applies `change` to the breaker and reports a state change.
    fn update(
        &self,
        backend: &Backend,
        breaker: &Mutex<CircuitBreaker>,
        change: impl FnOnce(&mut CircuitBreaker),
    ) {
        let (before, after) = {
            let mut b = lock(breaker);
            let before = b.state().gauge();
            change(&mut b);
            (before, b.state().gauge())
        };
        if before != after {
            if after == 2 {
                warn!(backend = %backend.name, "search backend circuit opened");
            }
            if let Some(o) = &self.observer {
                o.on_breaker(&backend.name, after);
            }
        }
    }
}

#[async_trait]
impl Gatherer for FailoverGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        let mut failures = Vec::new();
        let mut answered_empty = false;
        for (backend, breaker) in &self.backends {
            let allowed = {
                let mut b = lock(breaker);
                let before = b.state().gauge();
                let allowed = b.allow(Instant::now());
                (allowed, before != b.state().gauge())
            };
            if allowed.1
                && let Some(o) = &self.observer
            {
                o.on_breaker(&backend.name, lock(breaker).state().gauge());
            }
            if !allowed.0 {
                self.note(backend, "skipped");
                failures.push(format!("{}: circuit open", backend.name));
                continue;
            }
            match backend.gatherer.search(query, limit).await {
                Ok(hits) if !hits.is_empty() => {
                    self.note(backend, "ok");
                    self.update(backend, breaker, CircuitBreaker::on_success);
                    // One shape whatever answered: canonical-URL duplicates dropped.
                    return Ok(super::normalize_and_dedup(hits));
                }
                Ok(_) => {
                    self.note(backend, "empty");
                    self.update(backend, breaker, CircuitBreaker::on_success);
                    debug!(backend = %backend.name, "no results; trying the next backend");
                    answered_empty = true;
                }
                Err(e) => {
                    self.note(backend, "error");
                    self.update(backend, breaker, |b| b.on_failure(Instant::now()));
                    warn!(backend = %backend.name, error = %e, "search backend failed");
                    failures.push(format!("{}: {e}", backend.name));
                }
            }
        }
        if answered_empty || self.backends.is_empty() {
            return Ok(Vec::new());
        }
        Err(SourceError::Exhausted {
            detail: failures.join("; "),
        })
    }
}

/// A poisoned lock only means a panic elsewhere mid-update of plain data; keep going.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
