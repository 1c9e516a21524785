//! Unit tests of `searxng`.

use super::*;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Seen = Arc<Mutex<Vec<HashMap<String, String>>>>;

/// Starts an axum app on 127.0.0.1:0 and returns its base URL.
async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    format!("http://{addr}")
}

/// A fake instance answering `body` with `status` on /search and recording query parameters.
async fn fake_searx(status: StatusCode, body: &'static str) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app =
            Router::new()
                .route(
                    "/search",
                    get(
                        move |State(seen): State<Seen>,
                              Query(q): Query<HashMap<String, String>>| async move {
                            seen.lock().unwrap().push(q);
                            (status, [("content-type", "application/json")], body)
                        },
                    ),
                )
                .with_state(seen.clone());
    (serve(app).await, seen)
}

const ANSWER: &str = r#"{
        "query": "json decoder",
        "number_of_results": 0,
        "results": [
            {"url": "http://127.0.0.1:1/python/json.html#decoders", "title": "json — JSON encoder and decoder",
             "content": "  Decoders\n and   encoders ", "engine": "docs", "engines": ["docs"],
             "parsed_url": ["http", "127.0.0.1:1", "/python/json.html", "", "", ""], "score": 1.0,
             "category": "general", "positions": [1], "extra": {"nested": true}},
            {"title": "no url at all", "content": "skipped", "engine": "docs"},
            {"url": null, "title": "null url"},
            {"url": "javascript:alert(1)", "title": "not http"},
            {"url": "http://127.0.0.1:1/python/json.html#other", "title": "same page, other anchor", "engine": "docs"},
            {"url": "https://example.org/a", "engines": ["wikipedia", "ddg"], "content": null},
            {"url": "https://example.org/b", "title": 42, "engine": ""}
        ],
        "answers": [], "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []
    }"#;

#[tokio::test]
async fn parses_tolerantly_dedupes_and_sends_the_right_query() {
    let (base, seen) = fake_searx(StatusCode::OK, ANSWER).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5))
        .unwrap()
        .with_pageno(2)
        .with_categories("general,it");
    let hits = gatherer.search("json decoder & more", 10).await.unwrap();
    assert_eq!(
        hits,
        vec![
            SearchHit {
                url: "http://127.0.0.1:1/python/json.html#decoders".into(),
                title: "json — JSON encoder and decoder".into(),
                snippet: "Decoders and encoders".into(),
                engine: "docs".into(),
            },
            SearchHit {
                url: "https://example.org/a".into(),
                title: "https://example.org/a".into(),
                snippet: String::new(),
                engine: "wikipedia".into(),
            },
            SearchHit {
                url: "https://example.org/b".into(),
                title: "https://example.org/b".into(),
                snippet: String::new(),
                engine: "searxng".into(),
            },
        ]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let expected: HashMap<String, String> = [
        ("q", "json decoder & more"),
        ("format", "json"),
        ("pageno", "2"),
        ("categories", "general,it"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(seen[0], expected);
}

#[tokio::test]
async fn limit_truncates_and_zero_limit_sends_nothing() {
    let (base, seen) = fake_searx(StatusCode::OK, ANSWER).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    let hits = gatherer.search("q", 2).await.unwrap();
    assert_eq!(
        hits.iter().map(|h| h.url.as_str()).collect::<Vec<_>>(),
        vec![
            "http://127.0.0.1:1/python/json.html#decoders",
            "https://example.org/a"
        ]
    );
    assert_eq!(gatherer.search("q", 0).await.unwrap(), vec![]);
    assert_eq!(seen.lock().unwrap().len(), 1);
    let params = &seen.lock().unwrap()[0];
    assert_eq!(params.get("pageno"), None);
    assert_eq!(params.get("categories"), None);
}

#[tokio::test]
async fn answers_feed_the_engine_health_book() {
    let (base, _) = fake_searx(
            StatusCode::OK,
            r#"{"results":[
                {"url":"https://a.example/1","engines":["docs","wiki"]},
                {"url":"https://a.example/2","engine":"docs"}],
              "unresponsive_engines":[["google","CAPTCHA required"],["ddg","Suspended: too many requests", 1]]}"#,
        )
        .await;
    let book = Arc::new(HealthBook::new());
    book.expect_engines("ext", vec!["bing".into()]);
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5))
        .unwrap()
        .with_health(book.clone(), "ext");
    assert_eq!(gatherer.search("q", 1).await.unwrap().len(), 1);
    let snap = book.snapshot("ext");
    use crate::sources::health::EngineState::*;
    let states: Vec<(&str, _, u64)> = snap
        .iter()
        .map(|(k, v)| (k.as_str(), v.state, v.results))
        .collect();
    assert_eq!(
        states,
        vec![
            ("bing", Empty, 0),
            ("ddg", Suspended, 0),
            ("docs", Healthy, 2),
            ("google", Captcha, 0),
            ("wiki", Healthy, 1),
        ]
    );
}

#[tokio::test]
async fn empty_results_are_not_an_error() {
    let (base, _) = fake_searx(
        StatusCode::OK,
        r#"{"query":"zzz","results":[],"unresponsive_engines":[]}"#,
    )
    .await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    assert_eq!(gatherer.search("zzz", 5).await.unwrap(), vec![]);
}

#[tokio::test]
async fn http_errors_become_status_errors() {
    let (base, _) = fake_searx(StatusCode::TOO_MANY_REQUESTS, "{}").await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(err, SourceError::Status { status: 429 }),
        "{err:?}"
    );
}

#[tokio::test]
async fn non_json_and_missing_results_are_malformed() {
    let (base, _) = fake_searx(StatusCode::OK, "<html>searx</html>").await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Malformed(m) if m.starts_with("not JSON")),
        "{err:?}"
    );

    let (base, _) = fake_searx(StatusCode::OK, r#"{"answers":[]}"#).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Malformed(m) if m == "answer has no `results` array"),
        "{err:?}"
    );
}

#[tokio::test]
async fn oversized_bodies_are_refused() {
    let (base, _) = fake_searx(StatusCode::OK, ANSWER).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5))
        .unwrap()
        .with_max_body_bytes(100);
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Malformed(m) if m == "answer exceeds the limit of 100 bytes"),
        "{err:?}"
    );

    // Chunked answer without Content-Length: the streaming check must catch it too.
    let app = Router::new().route(
        "/search",
        get(|| async {
            let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(vec![b' '; 1024]));
            axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response()
        }),
    );
    let base = serve(app).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(5))
        .unwrap()
        .with_max_body_bytes(10_000);
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Malformed(m) if m == "answer exceeds the limit of 10000 bytes"),
        "{err:?}"
    );
}

#[tokio::test]
async fn slow_servers_time_out() {
    let app = Router::new().route(
        "/search",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            r#"{"results":[]}"#
        }),
    );
    let base = serve(app).await;
    let gatherer = SearxngGatherer::new(&base, Duration::from_millis(200)).unwrap();
    let started = std::time::Instant::now();
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    match err {
        SourceError::Unreachable { endpoint, message } => {
            assert_eq!(endpoint, format!("{base}/search"));
            assert_eq!(message, "timed out after 200ms");
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
}

#[tokio::test]
async fn refused_connections_are_unreachable() {
    // Bind then drop a listener so the port is (almost certainly) closed.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let gatherer = SearxngGatherer::new(&format!("http://{addr}"), Duration::from_secs(2)).unwrap();
    let err = gatherer.search("q", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Unreachable { endpoint, .. } if *endpoint == format!("http://{addr}/search")),
        "{err:?}"
    );
}

#[test]
fn base_urls_keep_their_path_prefix() {
    let t = Duration::from_secs(1);
    let cases = [
        ("http://h:8080", "http://h:8080/search"),
        ("http://h:8080/", "http://h:8080/search"),
        ("http://h/searx", "http://h/searx/search"),
        ("http://h/searx/?x=1#f", "http://h/searx/search"),
    ];
    for (base, expected) in cases {
        let g = SearxngGatherer::new(base, t).unwrap();
        assert_eq!(g.search_url().as_str(), expected, "{base}");
    }
    assert_eq!(
        SearxngGatherer::new("http://h/", t)
            .unwrap()
            .request_url("a b&c")
            .as_str(),
        "http://h/search?q=a+b%26c&format=json"
    );
    for bad in ["not a url", "ftp://h/", ""] {
        let err = SearxngGatherer::new(bad, t).unwrap_err();
        assert!(
            matches!(&err, SourceError::Unreachable { endpoint, .. } if endpoint == bad),
            "{bad}: {err:?}"
        );
    }
}
