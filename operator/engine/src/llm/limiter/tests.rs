//! Unit tests of `limiter`.

use super::*;

#[test]
fn a_bucket_releases_its_burst_then_the_configured_rate() {
    let t0 = Instant::now();
    // 120 per minute = 2 per second, burst of 10.
    let mut b = Bucket::per_minute(120, t0);
    let waits: Vec<Duration> = (0..12).map(|_| b.reserve(1.0, t0)).collect();
    assert!(waits[..10].iter().all(|w| w.is_zero()));
    assert_eq!(waits[10], Duration::from_millis(500));
    assert_eq!(waits[11], Duration::from_secs(1));
    // Two seconds later four more units have dripped in; two were already owed.
    let w = b.reserve(1.0, t0 + Duration::from_secs(2));
    assert!(w.is_zero(), "{w:?}");
}

#[test]
fn an_oversized_request_waits_for_a_full_bucket_not_forever() {
    let t0 = Instant::now();
    let mut b = Bucket::per_minute(600, t0); // 10/s, capacity 50
    assert!(b.reserve(50.0, t0).is_zero());
    assert_eq!(b.reserve(1_000_000.0, t0), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn endpoints_are_shared_and_limit_in_arrival_order() {
    let limits = RateLimits {
        requests_per_minute: Some(60),
        tokens_per_minute: None,
    };
    let a = endpoint("http://limiter-test.invalid/v1/", "m", limits);
    let b = endpoint("http://limiter-test.invalid/v1", "m", limits);
    assert!(
        Arc::ptr_eq(&a, &b),
        "one state per endpoint, whatever the slash"
    );
    let start = tokio::time::Instant::now();
    // 60/min: a burst of 5, then one per second.
    for _ in 0..5 {
        assert!(a.acquire(10).await.is_zero());
    }
    assert_eq!(b.acquire(10).await, Duration::from_secs(1));
    assert!(tokio::time::Instant::now() - start >= Duration::from_secs(1));
}
