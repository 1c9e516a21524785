//! Client-side rate limiting per model endpoint, shared by every run of the process, so many
//! concurrent runs do not turn into a 429 storm.
//!
//! Two token buckets per endpoint: requests per minute and tokens per minute. A caller reserves
//! what it needs (a bucket may go negative) and sleeps until its reservation is covered, so
//! callers are served in arrival order and the long-run rate never exceeds the configured one.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use super::breaker::{BreakerSettings, CircuitBreaker};

/// Seconds of traffic a full bucket may release at once.
pub const BURST_SECONDS: f64 = 5.0;

/// One token bucket: `capacity` tokens, refilled at `per_second`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    capacity: f64,
    per_second: f64,
    level: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket for `per_minute` units per minute, holding [`BURST_SECONDS`] of them.
    pub fn per_minute(per_minute: u64, now: Instant) -> Self {
        let per_second = per_minute as f64 / 60.0;
        let capacity = (per_second * BURST_SECONDS).max(1.0);
        Self {
            capacity,
            per_second,
            level: capacity,
            last: now,
        }
    }

    /// Reserves `n` units (at most one full bucket) and returns how long to wait before using them.
    pub fn reserve(&mut self, n: f64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.level = (self.level + elapsed * self.per_second).min(self.capacity);
        self.level -= n.min(self.capacity);
        if self.level >= 0.0 || self.per_second <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.level / self.per_second)
        }
    }
}

/// Requests and tokens per minute for one endpoint; `None` means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimits {
    pub requests_per_minute: Option<u64>,
    pub tokens_per_minute: Option<u64>,
}

#[derive(Debug)]
struct Buckets {
    limits: RateLimits,
    requests: Option<Bucket>,
    tokens: Option<Bucket>,
}

/// The shared state of one endpoint: its rate limiter and its circuit breaker.
#[derive(Debug)]
pub struct EndpointState {
    buckets: Mutex<Buckets>,
    breaker: Mutex<CircuitBreaker>,
}

impl EndpointState {
    fn new(limits: RateLimits, breaker: BreakerSettings) -> Self {
        let now = Instant::now();
        Self {
            buckets: Mutex::new(Buckets {
                limits,
                requests: limits
                    .requests_per_minute
                    .map(|r| Bucket::per_minute(r, now)),
                tokens: limits.tokens_per_minute.map(|t| Bucket::per_minute(t, now)),
            }),
            breaker: Mutex::new(CircuitBreaker::with(breaker)),
        }
    }

    /// Adopts new limits (profiles can change); buckets restart full, a breaker with new
    /// thresholds restarts closed.
    fn update(&self, limits: RateLimits, breaker: BreakerSettings) {
        {
            let mut b = lock(&self.breaker);
            if b.settings() != breaker {
                *b = CircuitBreaker::with(breaker);
            }
        }
        let mut b = lock(&self.buckets);
        if b.limits != limits {
            let now = Instant::now();
            *b = Buckets {
                limits,
                requests: limits
                    .requests_per_minute
                    .map(|r| Bucket::per_minute(r, now)),
                tokens: limits.tokens_per_minute.map(|t| Bucket::per_minute(t, now)),
            };
        }
    }

    /// Waits until one request of about `tokens` tokens may go out; returns the time waited.
    pub async fn acquire(&self, tokens: u64) -> Duration {
        let wait = {
            let mut b = lock(&self.buckets);
            // Tokio's clock, so tests with paused time see waits pass.
            let now = tokio::time::Instant::now().into_std();
            let r = b
                .requests
                .as_mut()
                .map_or(Duration::ZERO, |bucket| bucket.reserve(1.0, now));
            let t = b
                .tokens
                .as_mut()
                .map_or(Duration::ZERO, |bucket| bucket.reserve(tokens as f64, now));
            r.max(t)
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }

    /// Runs `f` on the endpoint's breaker.
    pub fn with_breaker<T>(&self, f: impl FnOnce(&mut CircuitBreaker) -> T) -> T {
        f(&mut lock(&self.breaker))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

static ENDPOINTS: LazyLock<Mutex<HashMap<String, Arc<EndpointState>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The process-wide state of an endpoint (base URL + model), created on first use.
pub fn endpoint(base_url: &str, model: &str, limits: RateLimits) -> Arc<EndpointState> {
    endpoint_with(base_url, model, limits, BreakerSettings::default())
}

/// Like [`endpoint`], with the breaker's thresholds.
pub fn endpoint_with(
    base_url: &str,
    model: &str,
    limits: RateLimits,
    breaker: BreakerSettings,
) -> Arc<EndpointState> {
    let key = format!("{}|{model}", base_url.trim_end_matches('/'));
    let mut map = lock(&ENDPOINTS);
    let state = map
        .entry(key)
        .or_insert_with(|| Arc::new(EndpointState::new(limits, breaker)))
        .clone();
    state.update(limits, breaker);
    state
}

#[cfg(test)]
mod tests;
