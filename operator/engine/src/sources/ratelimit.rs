//! Client-side rate limiting of one source: a token bucket, plus a "blocked until" instant for
//! the waits a provider asks for (`Retry-After`, Stack Exchange's `backoff`).
//!
//! [`RateLimiter`] is pure (the caller passes the time); [`Throttle`] wraps it for async use.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::SourceError;

/// Longest a call waits for its turn before it is refused as rate limited: a researcher's tool
/// call should not hang, and a refused call tells the model to try another source.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(10);

/// A token bucket of `capacity` calls refilled at `per_second`, with an optional block.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimiter {
    capacity: f64,
    per_second: f64,
    level: f64,
    last: Option<Instant>,
    blocked_until: Option<Instant>,
}

impl RateLimiter {
    /// `requests` calls per `window`, all of which may be used at once (NVD's rolling window).
    pub fn per_window(requests: u32, window: Duration) -> Self {
        let capacity = f64::from(requests.max(1));
        Self {
            capacity,
            per_second: capacity / window.as_secs_f64().max(0.001),
            level: capacity,
            last: None,
            blocked_until: None,
        }
    }

    /// `rpm` calls per minute, spread out: at most one second's worth (at least one) at once,
    /// since plans like "1 request per second" are stated per minute too.
    pub fn per_minute(rpm: u32) -> Self {
        let per_second = f64::from(rpm.max(1)) / 60.0;
        let capacity = per_second.max(1.0).floor();
        Self {
            capacity,
            per_second,
            level: capacity,
            last: None,
            blocked_until: None,
        }
    }

    /// Takes one call. `Ok(wait)`: the call is reserved and may start after `wait`.
    /// `Err(wait)`: it would have to wait longer than `max_wait`, so nothing is reserved.
    pub fn reserve(&mut self, now: Instant, max_wait: Duration) -> Result<Duration, Duration> {
        if let Some(until) = self.blocked_until {
            if until > now {
                return Err(until - now);
            }
            self.blocked_until = None;
        }
        let elapsed = self.last.map_or(0.0, |last| {
            now.saturating_duration_since(last).as_secs_f64()
        });
        let level = (self.level + elapsed * self.per_second).min(self.capacity) - 1.0;
        let wait = if level >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-level / self.per_second)
        };
        if wait > max_wait {
            return Err(wait);
        }
        self.level = level;
        self.last = Some(now);
        Ok(wait)
    }

    /// Refuses every call until `now + wait` (a provider asked for it).
    pub fn block_for(&mut self, now: Instant, wait: Duration) {
        let until = now + wait;
        if self.blocked_until.is_none_or(|b| b < until) {
            self.blocked_until = Some(until);
        }
    }

    /// How long calls are still refused, if they are.
    pub fn blocked_for(&self, now: Instant) -> Option<Duration> {
        self.blocked_until
            .filter(|until| *until > now)
            .map(|until| until - now)
    }
}

/// A [`RateLimiter`] shared by the calls of one source; waits its turn or refuses.
#[derive(Debug)]
pub struct Throttle {
    provider: &'static str,
    limiter: Mutex<RateLimiter>,
    max_wait: Duration,
}

impl Throttle {
    /// A throttle for `provider`; `None` means no client-side limit (a block still applies).
    pub fn new(provider: &'static str, limiter: Option<RateLimiter>) -> Self {
        // Without a limit only blocks matter; an unlimited bucket keeps one code path.
        let limiter =
            limiter.unwrap_or_else(|| RateLimiter::per_window(u32::MAX, Duration::from_secs(1)));
        Self {
            provider,
            limiter: Mutex::new(limiter),
            max_wait: DEFAULT_MAX_WAIT,
        }
    }

    /// Overrides how long a call may wait for its turn.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = max_wait;
        self
    }

    fn with_limiter<T>(&self, f: impl FnOnce(&mut RateLimiter) -> T) -> T {
        let mut guard = match self.limiter.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        f(&mut guard)
    }

    /// Waits for the next call's turn, or refuses with a rate-limited error.
    pub async fn acquire(&self) -> Result<(), SourceError> {
        let max_wait = self.max_wait;
        match self.with_limiter(|l| l.reserve(Instant::now(), max_wait)) {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                tracing::debug!(
                    provider = self.provider,
                    ?wait,
                    "waiting for the client-side rate limit"
                );
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Err(wait) => Err(SourceError::RateLimited {
                provider: self.provider.to_string(),
                retry_after: Some(wait),
            }),
        }
    }

    /// Refuses calls for `wait` (after a 429's `Retry-After` or a `backoff`).
    pub fn block_for(&self, wait: Duration) {
        self.with_limiter(|l| l.block_for(Instant::now(), wait));
    }

    /// Blocks for the wait a rate-limited error carries, so the next calls do not hit the
    /// provider again before it allows.
    pub fn note(&self, err: &SourceError) {
        if let Some(wait) = err.retry_after() {
            self.block_for(wait);
        }
    }
}

#[cfg(test)]
mod tests;
