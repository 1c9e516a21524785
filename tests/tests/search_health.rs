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
use quarry_e2e::searx::{ENGINE_NAME, SearchStack};
use quarry_engine::sources::Gatherer;
use quarry_engine::sources::failover::{Backend, FailoverGatherer, FailoverObserver};
use quarry_engine::sources::health::{EngineState, HealthBook};
use quarry_engine::sources::searxng::SearxngGatherer;
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
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_captcha_engine_is_recorded_and_stays_recorded_while_searx_skips_it() {
    let (wall, wall_hits) = captcha_wall().await;
    let stack =
        SearchStack::start_with_engines_for("captcha_engine_health", vec![flaky_engine(&wall)])
            .await;
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

/// A Brave Search API double: the documented `GET /res/v1/web/search` with the key in
/// `X-Subscription-Token`, answering `web.results[]` with `title`, `url`, `description`.
async fn brave_api() -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
    let seen: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let app = Router::new().route(
        "/res/v1/web/search",
        get(
            move |headers: axum::http::HeaderMap,
                  axum::extract::Query(q): axum::extract::Query<
                std::collections::HashMap<String, String>,
            >| {
                let log = log.clone();
                async move {
                    let token = headers
                        .get("x-subscription-token")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    log.lock().unwrap().push(format!("{}|{token}", q["q"]));
                    axum::Json(json!({
                        "type": "search",
                        "query": {"original": q["q"]},
                        "web": {"type": "search", "results": [
                            {"title": "JSON in Python", "url": "https://brave.example/json", "description": "json.loads parses", "age": "2 days"}
                        ]}
                    }))
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn when_searx_goes_down_search_falls_over_to_brave_and_the_breaker_stops_calling_searx() {
    let mut stack = SearchStack::start_for("searx_down_failover").await;
    let (brave_url, brave_seen) = brave_api().await;
    let mut config = quarry_engine::sources::providers::ProviderConfig::new(
        quarry_engine::sources::http::Secret::new("brave-test-key"),
    );
    config.base_url = Some(brave_url.clone());
    let brave = quarry_engine::sources::providers::brave::BraveGatherer::new(config).unwrap();
    let searx = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(10)).unwrap();
    let calls = Arc::new(Calls::default());
    let chain = FailoverGatherer::new(vec![
        Backend {
            name: "searxng".into(),
            breaker_key: format!("failover-test {}", stack.searx.base_url()),
            gatherer: Arc::new(searx),
        },
        Backend {
            name: "brave".into(),
            breaker_key: format!("failover-test {brave_url}"),
            gatherer: Arc::new(brave),
        },
    ])
    .with_observer(calls.clone());
    // searx up: it answers, Brave is not asked.
    let hits = chain.search("json decoder", 5).await.unwrap();
    assert!(hits.iter().all(|h| h.engine != "brave"), "{hits:?}");
    assert!(brave_seen.lock().unwrap().is_empty());
    // searx down: every search is answered by Brave; after three failures searx is skipped.
    stack.searx.stop();
    for _ in 0..4 {
        let hits = chain.search("json decoder", 5).await.unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].url, "https://brave.example/json");
        assert_eq!(hits[0].engine, "brave");
    }
    assert_eq!(
        *brave_seen.lock().unwrap(),
        vec!["json decoder|brave-test-key"; 4]
    );
    let calls = calls.0.lock().unwrap().clone();
    assert_eq!(
        calls,
        vec![
            "searxng:breaker=0",
            "brave:breaker=0",
            "searxng:ok",
            "searxng:error",
            "brave:ok",
            "searxng:error",
            "brave:ok",
            "searxng:error",
            "searxng:breaker=2",
            "brave:ok",
            "searxng:skipped",
            "brave:ok"
        ]
    );
}
