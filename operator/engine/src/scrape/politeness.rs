//! Per-host politeness: a cap on concurrent requests and a minimum gap between request starts.
//!
//! One [`HostLimiter`] is meant to be shared by every fetcher of the process (through
//! [`super::fetch::FetchShared`]), so the researchers of one run and of concurrent runs are polite
//! to a host together rather than each on its own.
//!
//! Hosts are keyed by host name (or IP literal) without the port: politeness is owed to the
//! machine, and two ports of one host are usually one server. Tests that need two independent
//! hosts use two loopback addresses (127.0.0.1 and 127.0.0.2).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Hosts remembered before idle ones are forgotten (bounds memory over a long-running operator).
const PRUNE_ABOVE: usize = 1024;

/// The per-host limits a request is admitted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLimits {
    /// Requests in flight to one host at most (0 is read as 1).
    pub concurrency: usize,
    /// Least time between two request starts to one host (zero disables).
    pub delay: Duration,
}

/// Admission bookkeeping of one host: requests in flight and the earliest next start.
///
/// Pure (the caller passes the clock) so the timing decisions are unit-tested without sleeping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostSlots {
    in_flight: usize,
    next_start: Option<Instant>,
}

impl HostSlots {
    /// Admits a request at `now` when fewer than `limits.concurrency` are in flight and returns
    /// when it may start; that start is reserved, so the next admission starts `delay` later.
    pub fn admit(&mut self, now: Instant, limits: HostLimits) -> Option<Instant> {
        if self.in_flight >= limits.concurrency.max(1) {
            return None;
        }
        self.in_flight += 1;
        // Reserving the start (rather than recording it once the sleep is over) keeps requests
        // admitted together from all waking at the same instant.
        let start = self.next_start.filter(|t| *t > now).unwrap_or(now);
        self.next_start = Some(start + limits.delay);
        Some(start)
    }

    /// Records the end of an admitted request.
    pub fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    /// Requests admitted and not yet released.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Whether forgetting this host changes nothing: nothing in flight and no start reserved.
    pub fn is_idle(&self, now: Instant) -> bool {
        self.in_flight == 0 && self.next_start.is_none_or(|t| t <= now)
    }
}

/// One host's slots and the waiters for a free one.
#[derive(Debug, Default)]
struct HostEntry {
    slots: Mutex<HostSlots>,
    freed: Notify,
}

impl HostEntry {
    fn slots(&self) -> MutexGuard<'_, HostSlots> {
        // The guarded data is plain counters that stay consistent even if a holder panicked.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Admits requests per host under [`HostLimits`]; share one through an `Arc`.
#[derive(Debug, Default)]
pub struct HostLimiter {
    hosts: Mutex<HashMap<String, Arc<HostEntry>>>,
}

/// An admitted request; its slot is freed when this is dropped.
#[derive(Debug)]
pub struct HostPermit {
    entry: Arc<HostEntry>,
}

impl Drop for HostPermit {
    fn drop(&mut self) {
        self.entry.slots().release();
        self.entry.freed.notify_waiters();
    }
}

impl HostLimiter {
    /// An empty limiter.
    pub fn new() -> Self {
        Self::default()
    }

    fn entry(&self, host: &str) -> Arc<HostEntry> {
        let mut hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        if hosts.len() > PRUNE_ABOVE {
            let now = Instant::now();
            hosts.retain(|_, e| Arc::strong_count(e) > 1 || !e.slots().is_idle(now));
        }
        Arc::clone(hosts.entry(host.to_ascii_lowercase()).or_default())
    }

    /// Waits until a request to `host` may start under `limits` and returns its permit.
    ///
    /// Dropping the returned future while it waits gives its place up (a reserved start is
    /// simply skipped), so it can sit under a timeout.
    pub async fn acquire(&self, host: &str, limits: HostLimits) -> HostPermit {
        let entry = self.entry(host);
        loop {
            // Registered before the check so that a release between the check and the await
            // still wakes this waiter.
            let freed = entry.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let admitted = entry.slots().admit(Instant::now(), limits);
            if let Some(start) = admitted {
                let permit = HostPermit {
                    entry: Arc::clone(&entry),
                };
                tokio::time::sleep_until(start).await;
                return permit;
            }
            freed.await;
        }
    }

    /// Requests to `host` admitted and not yet finished (for tests and metrics).
    pub fn in_flight(&self, host: &str) -> usize {
        let hosts = self.hosts.lock().unwrap_or_else(PoisonError::into_inner);
        hosts
            .get(&host.to_ascii_lowercase())
            .map_or(0, |e| e.slots().in_flight())
    }
}

#[cfg(test)]
mod tests;
