//! A circuit breaker per model endpoint: closed → open after 5 consecutive failures →
//! half-open after 60 s → closed after 2 successes; a failure while half-open opens it again.
//!
//! Pure: the caller passes the time, so every transition is tested without sleeping.

use std::time::{Duration, Instant};

/// Consecutive failures that open the circuit.
pub const FAILURES_TO_OPEN: u32 = 5;
/// How long an open circuit refuses calls before letting trial calls through.
pub const OPEN_FOR: Duration = Duration::from_secs(60);
/// Successful trial calls that close a half-open circuit.
pub const SUCCESSES_TO_CLOSE: u32 = 2;

/// The state of a breaker, as exported in metrics (0 closed, 1 half-open, 2 open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed { failures: u32 },
    Open { since: Instant },
    HalfOpen { successes: u32 },
}

impl BreakerState {
    /// The metric value: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> i64 {
        match self {
            BreakerState::Closed { .. } => 0,
            BreakerState::HalfOpen { .. } => 1,
            BreakerState::Open { .. } => 2,
        }
    }
}

/// When a breaker opens and closes (by default: after 5 failures, for 60 s, closed by 2 successes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    pub failures_to_open: u32,
    pub open_for: Duration,
    pub successes_to_close: u32,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            failures_to_open: FAILURES_TO_OPEN,
            open_for: OPEN_FOR,
            successes_to_close: SUCCESSES_TO_CLOSE,
        }
    }
}

/// One endpoint's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    state: BreakerState,
    settings: BreakerSettings,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        Self::with(BreakerSettings::default())
    }
}

impl CircuitBreaker {
    /// A closed breaker with the given thresholds.
    pub fn with(settings: BreakerSettings) -> Self {
        Self {
            state: BreakerState::Closed { failures: 0 },
            settings,
        }
    }

    /// Its thresholds.
    pub fn settings(&self) -> BreakerSettings {
        self.settings
    }

    /// The current state (an open breaker past its wait reports half-open only after `allow`).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Whether a call may go out now; an open breaker whose wait is over turns half-open.
    pub fn allow(&mut self, now: Instant) -> bool {
        match self.state {
            BreakerState::Closed { .. } | BreakerState::HalfOpen { .. } => true,
            BreakerState::Open { since }
                if now.saturating_duration_since(since) >= self.settings.open_for =>
            {
                self.state = BreakerState::HalfOpen { successes: 0 };
                true
            }
            BreakerState::Open { .. } => false,
        }
    }

    /// Records a call that reached the endpoint and got a usable answer.
    pub fn on_success(&mut self) {
        self.state = match self.state {
            BreakerState::HalfOpen { successes }
                if successes + 1 < self.settings.successes_to_close =>
            {
                BreakerState::HalfOpen {
                    successes: successes + 1,
                }
            }
            _ => BreakerState::Closed { failures: 0 },
        };
    }

    /// Records a call that failed because of the endpoint (unreachable, timeout, 429, 5xx).
    pub fn on_failure(&mut self, now: Instant) {
        self.state = match self.state {
            BreakerState::Closed { failures } if failures + 1 < self.settings.failures_to_open => {
                BreakerState::Closed {
                    failures: failures + 1,
                }
            }
            BreakerState::Open { since } => BreakerState::Open { since },
            _ => BreakerState::Open { since: now },
        };
    }
}

#[cfg(test)]
mod tests;
