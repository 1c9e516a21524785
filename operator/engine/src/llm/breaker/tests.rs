//! Unit tests of `breaker`.

use super::*;

#[test]
fn five_failures_open_then_sixty_seconds_half_open_then_two_successes_close() {
    let t0 = Instant::now();
    let mut b = CircuitBreaker::default();
    for _ in 0..4 {
        b.on_failure(t0);
        assert!(b.allow(t0));
    }
    assert_eq!(b.state(), BreakerState::Closed { failures: 4 });
    b.on_failure(t0);
    assert_eq!(b.state(), BreakerState::Open { since: t0 });
    assert!(!b.allow(t0 + Duration::from_secs(59)));
    assert_eq!(b.state().gauge(), 2);
    assert!(b.allow(t0 + Duration::from_secs(60)));
    assert_eq!(b.state(), BreakerState::HalfOpen { successes: 0 });
    b.on_success();
    assert_eq!(b.state(), BreakerState::HalfOpen { successes: 1 });
    b.on_success();
    assert_eq!(b.state(), BreakerState::Closed { failures: 0 });
}

#[test]
fn a_failure_while_half_open_reopens_and_a_success_resets_the_count() {
    let t0 = Instant::now();
    let mut b = CircuitBreaker::default();
    for _ in 0..5 {
        b.on_failure(t0);
    }
    let t1 = t0 + OPEN_FOR;
    assert!(b.allow(t1));
    b.on_failure(t1);
    assert_eq!(b.state(), BreakerState::Open { since: t1 });
    assert!(!b.allow(t1 + Duration::from_secs(1)));

    let mut c = CircuitBreaker::default();
    for _ in 0..4 {
        c.on_failure(t0);
    }
    c.on_success();
    c.on_failure(t0);
    assert_eq!(c.state(), BreakerState::Closed { failures: 1 });
}
