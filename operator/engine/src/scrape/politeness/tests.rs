//! Unit tests of `politeness`.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn limits(concurrency: usize, delay_ms: u64) -> HostLimits {
    HostLimits {
        concurrency,
        delay: MS * delay_ms as u32,
    }
}

#[test]
fn starts_are_spaced_by_the_delay_and_capped_in_number() {
    let t0 = Instant::now();
    let mut s = HostSlots::default();
    let l = limits(2, 500);
    assert_eq!(s.admit(t0, l), Some(t0));
    // Admitted at once but scheduled one delay after the first start.
    assert_eq!(s.admit(t0, l), Some(t0 + 500 * MS));
    // Two in flight: the third waits for a release.
    assert_eq!(s.admit(t0 + 10 * MS, l), None);
    s.release();
    assert_eq!(s.admit(t0 + 10 * MS, l), Some(t0 + 1000 * MS));
    assert_eq!(s.in_flight(), 2);
}

#[test]
fn a_late_request_starts_at_once_and_zero_delay_never_waits() {
    let t0 = Instant::now();
    let mut s = HostSlots::default();
    assert_eq!(s.admit(t0, limits(4, 100)), Some(t0));
    s.release();
    // Long after the reserved slot: no wait.
    assert_eq!(
        s.admit(t0 + 5000 * MS, limits(4, 100)),
        Some(t0 + 5000 * MS)
    );
    s.release();
    let mut z = HostSlots::default();
    for _ in 0..3 {
        assert_eq!(z.admit(t0, limits(3, 0)), Some(t0));
    }
    assert_eq!(z.admit(t0, limits(3, 0)), None);
}

#[test]
fn zero_concurrency_means_one_and_idleness_needs_no_reserved_start() {
    let t0 = Instant::now();
    let mut s = HostSlots::default();
    assert!(s.is_idle(t0));
    assert_eq!(s.admit(t0, limits(0, 200)), Some(t0));
    assert_eq!(s.admit(t0, limits(0, 200)), None);
    s.release();
    assert!(!s.is_idle(t0 + 100 * MS), "a start is still reserved");
    assert!(s.is_idle(t0 + 200 * MS));
}

#[tokio::test(start_paused = true)]
async fn the_limiter_holds_a_third_request_until_a_permit_drops() {
    let limiter = Arc::new(HostLimiter::new());
    let l = limits(2, 0);
    let a = limiter.acquire("Example.org", l).await;
    let _b = limiter.acquire("example.org", l).await;
    assert_eq!(limiter.in_flight("example.org"), 2);
    let waiting = {
        let limiter = Arc::clone(&limiter);
        tokio::spawn(async move { limiter.acquire("example.org", l).await })
    };
    // Another host is not held up.
    let _other = limiter.acquire("example.net", l).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!waiting.is_finished());
    drop(a);
    let _c = waiting.await.unwrap();
    assert_eq!(limiter.in_flight("example.org"), 2);
}
