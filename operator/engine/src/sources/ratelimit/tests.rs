//! Unit tests of `ratelimit`.

use super::*;

const S: Duration = Duration::from_secs(1);

#[test]
fn per_window_allows_a_burst_then_spaces_calls() {
    // NVD without a key: 5 calls per 30 s.
    let t0 = Instant::now();
    let mut l = RateLimiter::per_window(5, 30 * S);
    for _ in 0..5 {
        assert_eq!(l.reserve(t0, Duration::ZERO), Ok(Duration::ZERO));
    }
    // The sixth needs one refill: 6 s.
    assert_eq!(l.reserve(t0, S), Err(6 * S));
    assert_eq!(l.reserve(t0, 10 * S), Ok(6 * S));
    // That reservation is taken: the next waits 12 s from t0.
    assert_eq!(l.reserve(t0, 10 * S), Err(12 * S));
    assert_eq!(l.reserve(t0 + 12 * S, S), Ok(Duration::ZERO));
}

#[test]
fn per_minute_spreads_calls() {
    let t0 = Instant::now();
    let mut l = RateLimiter::per_minute(60);
    assert_eq!(l.reserve(t0, Duration::ZERO), Ok(Duration::ZERO));
    assert_eq!(l.reserve(t0, Duration::ZERO), Err(S));
    assert_eq!(l.reserve(t0 + S, Duration::ZERO), Ok(Duration::ZERO));
    let mut slow = RateLimiter::per_minute(2);
    assert_eq!(slow.reserve(t0, Duration::ZERO), Ok(Duration::ZERO));
    assert_eq!(slow.reserve(t0, Duration::ZERO), Err(30 * S));
}

#[test]
fn blocks_refuse_until_they_pass() {
    let t0 = Instant::now();
    let mut l = RateLimiter::per_minute(600);
    l.block_for(t0, 5 * S);
    l.block_for(t0, 2 * S); // a shorter block does not shorten the longer one
    assert_eq!(l.blocked_for(t0 + S), Some(4 * S));
    assert_eq!(l.reserve(t0 + S, 60 * S), Err(4 * S));
    assert_eq!(l.reserve(t0 + 5 * S, Duration::ZERO), Ok(Duration::ZERO));
    assert_eq!(l.blocked_for(t0 + 5 * S), None);
}

#[tokio::test]
async fn throttle_refuses_beyond_max_wait_and_honours_blocks() {
    let t = Throttle::new("x", Some(RateLimiter::per_minute(1))).with_max_wait(Duration::ZERO);
    t.acquire().await.unwrap();
    let err = t.acquire().await.unwrap_err();
    assert!(
        matches!(&err, SourceError::RateLimited { provider, retry_after: Some(w) } if provider == "x" && *w > 50 * S),
        "{err:?}"
    );
    let unlimited = Throttle::new("y", None);
    for _ in 0..100 {
        unlimited.acquire().await.unwrap();
    }
    unlimited.note(&SourceError::RateLimited {
        provider: "y".into(),
        retry_after: Some(30 * S),
    });
    assert!(matches!(
        unlimited.acquire().await,
        Err(SourceError::RateLimited { .. })
    ));
}
