//! Unit tests of `robots`.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

fn url(s: &str) -> Url {
    Url::parse(s).unwrap()
}

#[test]
fn the_agents_own_group_wins_over_the_wildcard() {
    let body = b"User-agent: *\nDisallow: /private\n\nUser-agent: Quarry\nDisallow: /q-only\nCrawl-delay: 2.5\n";
    let r = RobotsRules::parse("quarry", body);
    assert!(r.check(&url("http://h/private/x")).is_ok());
    let err = r.check(&url("http://h/q-only/a?b=1")).unwrap_err();
    assert!(
        err.contains("\"User-agent: quarry\"") && err.contains("/q-only/a?b=1"),
        "{err}"
    );
    assert_eq!(r.crawl_delay(), Some(Duration::from_millis(2500)));

    let other = RobotsRules::parse("otherbot", body);
    let err = other.check(&url("http://h/private/x")).unwrap_err();
    assert!(err.contains("\"User-agent: *\""), "{err}");
    assert_eq!(other.crawl_delay(), None);
}

#[test]
fn robots_txt_itself_and_unlisted_paths_are_allowed_and_delays_are_capped() {
    let r = RobotsRules::parse(
        "quarry",
        b"User-agent: *\nDisallow: /\nCrawl-delay: 86400\n",
    );
    assert!(r.check(&url("http://h/robots.txt")).is_ok());
    assert!(r.check(&url("http://h/anything")).is_err());
    assert_eq!(r.crawl_delay(), Some(MAX_CRAWL_DELAY));
    let empty = RobotsRules::parse("quarry", b"");
    assert!(empty.check(&url("http://h/anything")).is_ok());
}

#[test]
fn unreachable_refuses_everything_for_a_short_while() {
    let r = RobotsRules::Unreachable {
        reason: "HTTP 503".into(),
    };
    let err = r.check(&url("http://h/a")).unwrap_err();
    assert!(err.contains("HTTP 503"), "{err}");
    assert_eq!(r.ttl(), ROBOTS_ERROR_TTL);
    assert_eq!(RobotsRules::AllowAll.ttl(), ROBOTS_TTL);
}

#[test]
fn the_agent_token_is_the_lower_case_product_name() {
    assert_eq!(agent_token("Quarry/0.1.0 (research agent)"), "quarry");
    assert_eq!(agent_token("quarry"), "quarry");
    assert_eq!(
        robots_url(&url("https://u:p@Example.org:8443/a/b?c#d"))
            .unwrap()
            .as_str(),
        "https://example.org:8443/robots.txt"
    );
}

#[tokio::test(start_paused = true)]
async fn answers_are_cached_until_their_ttl_and_errors_are_not() {
    let cache = RobotsCache::new();
    let loads = AtomicUsize::new(0);
    let load = || async {
        loads.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Infallible>(RobotsRules::AllowAll)
    };
    cache.get_or_load("o", load).await.unwrap();
    tokio::time::advance(ROBOTS_TTL - Duration::from_secs(1)).await;
    cache.get_or_load("o", load).await.unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 1, "still fresh");
    tokio::time::advance(Duration::from_secs(2)).await;
    cache.get_or_load("o", load).await.unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 2, "expired, loaded again");
    cache.get_or_load("other", load).await.unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 3, "keys are separate");

    // An unreachable answer expires after the short TTL.
    let down = || async {
        loads.fetch_add(1, Ordering::SeqCst);
        Ok::<_, Infallible>(RobotsRules::Unreachable {
            reason: "HTTP 500".into(),
        })
    };
    cache.get_or_load("d", down).await.unwrap();
    tokio::time::advance(ROBOTS_ERROR_TTL + Duration::from_secs(1)).await;
    cache.get_or_load("d", down).await.unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 5);

    // A loader error is passed on and nothing is cached.
    let failing = || async { Err::<RobotsRules, &str>("refused") };
    assert_eq!(
        cache.get_or_load("e", failing).await.unwrap_err(),
        "refused"
    );
    cache.get_or_load("e", load).await.unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 6);
}

#[tokio::test(start_paused = true)]
async fn concurrent_first_lookups_load_once() {
    let cache = Arc::new(RobotsCache::new());
    let loads = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let (cache, loads) = (Arc::clone(&cache), Arc::clone(&loads));
        tasks.push(tokio::spawn(async move {
            cache
                .get_or_load("o", || async {
                    loads.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    Ok::<_, Infallible>(RobotsRules::AllowAll)
                })
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(loads.load(Ordering::SeqCst), 1);
}
