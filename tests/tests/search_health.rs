//! Engine health against a real searx: Debian's searx with two engines, the docs index and a
//! `json_engine` whose server answers like a Cloudflare CAPTCHA wall. Quarry's health record must
//! read searx's `unresponsive_engines`, keep the CAPTCHA state while searx silently skips the
//! suspended engine, and the failover chain's breaker must stop calling a searx that is gone.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use quarry::sources::Gatherer;
use quarry::sources::failover::{Backend, FailoverGatherer, FailoverObserver};
use quarry::sources::health::{EngineState, HealthBook};
use quarry::sources::searxng::SearxngGatherer;
use quarry_e2e::searx::{ENGINE_NAME, SearchStack};
use serde_json::json;

/// A server that answers every request like Cloudflare's JavaScript challenge (searx's
/// `raise_for_captcha` recognises it and suspends the engine); counts requests.
async fn captcha_wall() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = Router::new().fallback(get(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("server", "cloudflare"), ("content-type", "text/html")],
                "<html><form action=\"/?__cf_chl_jschl_tk__=abc\">Checking your browser</form></html>",
            )
        }
    }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), hits)
}

fn flaky_engine(base: &str) -> serde_json::Value {
    json!({
        "name": "flaky",
        "engine": "json_engine",
        "shortcut": "fl",
        "categories": "general",
        "search_url": format!("{base}/search?q={{query}}"),
        "url_query": "url",
        "title_query": "title",
        "content_query": "content",
        "results_query": "results",
        "paging": false,
        "enable_http": true,
        "timeout": 3.0,
        "disabled": false
    })
}

#[tokio::test]
async fn a_captcha_engine_is_recorded_and_stays_recorded_while_searx_skips_it() {
    let (wall, wall_hits) = captcha_wall().await;
    let Some(stack) =
        SearchStack::start_with_engines_or_skip("captcha_engine_health", vec![flaky_engine(&wall)])
            .await
    else {
        return;
    };
    let book = Arc::new(HealthBook::new());
    book.expect_engines("test", vec![ENGINE_NAME.into(), "flaky".into()]);
    let gatherer = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(20))
        .unwrap()
        .with_health(book.clone(), "test");

    // First query: the docs engine answers, the flaky one hits the wall.
    let hits = gatherer.search("json decoder", 5).await.unwrap();
    assert!(!hits.is_empty(), "the healthy engine still answers");
    assert_eq!(wall_hits.load(Ordering::SeqCst), 1);
    let health = book.snapshot("test");
    assert_eq!(health[ENGINE_NAME].state, EngineState::Healthy);
    assert_eq!(health["flaky"].state, EngineState::Captcha);
    assert_eq!(health["flaky"].consecutive_failures, 1);
    assert!(
        health["flaky"]
            .last_error
            .as_deref()
            .unwrap()
            .contains("CAPTCHA"),
        "{:?}",
        health["flaky"].last_error
    );

    // searx suspends the engine for days and then leaves it out without a word: the record keeps
    // the CAPTCHA state instead of reading the silence as healthy.
    gatherer.search("postgresql vacuum", 5).await.unwrap();
    assert_eq!(wall_hits.load(Ordering::SeqCst), 1, "suspended: not asked");
    let health = book.snapshot("test");
    assert_eq!(health["flaky"].state, EngineState::Captcha);
    assert_eq!(health[ENGINE_NAME].state, EngineState::Healthy);
    assert!(health[ENGINE_NAME].results >= 2);
}

#[derive(Default)]
struct Calls(std::sync::Mutex<Vec<String>>);

impl FailoverObserver for Calls {
    fn on_call(&self, backend: &str, outcome: &'static str) {
        self.0.lock().unwrap().push(format!("{backend}:{outcome}"));
    }
    fn on_breaker(&self, backend: &str, gauge: i64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{backend}:breaker={gauge}"));
    }
}

#[tokio::test]
async fn the_breaker_stops_calling_a_searx_that_went_down() {
    let Some(mut stack) = SearchStack::start_or_skip("searx_down_breaker").await else {
        return;
    };
    let searx = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(10)).unwrap();
    // The second backend is a second searx-shaped endpoint: the docs index through another
    // instance would need a second process; an empty answer is enough to see the order.
    let calls = Arc::new(Calls::default());
    let key = format!("searx-down-test {}", stack.searx.base_url());
    let chain = FailoverGatherer::new(vec![Backend {
        name: "searxng".into(),
        breaker_key: key,
        gatherer: Arc::new(searx),
    }])
    .with_observer(calls.clone());
    assert!(!chain.search("json decoder", 5).await.unwrap().is_empty());
    stack.searx.stop();
    for _ in 0..4 {
        assert!(chain.search("json decoder", 5).await.is_err());
    }
    let calls = calls.0.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            "searxng:ok",
            "searxng:error",
            "searxng:error",
            "searxng:breaker=2",
            "searxng:error",
            "searxng:skipped"
        ]
    );
}
