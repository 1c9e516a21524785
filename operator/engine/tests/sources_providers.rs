//! The API search providers (Brave, Tavily, Serper) and Stack Exchange against local servers that
//! answer in each provider's documented format: requests as documented, hits parsed, and every
//! error (auth, rate limit, bad JSON, oversize body, throttle, backoff) mapped as promised.

use std::io::Write;
use std::time::Duration;

use axum::http::Method;
use serde_json::{Value, json};

use quarry_engine::sources::http::Secret;
use quarry_engine::sources::providers::{
    BraveGatherer, ProviderConfig, ProviderKind, SerperGatherer, TavilyGatherer, build_providers,
};
use quarry_engine::sources::specialised::QuestionSearch;
use quarry_engine::sources::stackexchange::{StackExchange, StackExchangeConfig};
use quarry_engine::sources::{Gatherer, SearchHit, SourceError, normalize_and_dedup};

const KEY: &str = "sk-test-0123456789";

mod replay;
use replay::{reply, serve};

fn config(base: &str) -> ProviderConfig {
    ProviderConfig::new(Secret::new(KEY))
        .with_base_url(base)
        .with_timeout(Duration::from_secs(5))
}

fn urls(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.url.as_str()).collect()
}

/// Brave's documented web search answer (trimmed to the fields a client reads, plus neighbours).
const BRAVE_ANSWER: &str = r#"{
  "type": "search",
  "query": {"original": "rust async runtime", "more_results_available": true},
  "mixed": {"type": "mixed", "main": [{"type": "web", "index": 0, "all": false}]},
  "web": {
    "type": "search",
    "family_friendly": true,
    "results": [
      {"type": "search_result", "title": "Asynchronous Programming in <strong>Rust</strong>",
       "url": "https://rust-lang.github.io/async-book/", "is_source_local": false,
       "description": "Async <strong>Rust</strong> &amp; the <strong>runtime</strong> ecosystem.",
       "age": "March 2, 2024", "language": "en", "family_friendly": true,
       "profile": {"name": "GitHub", "url": "https://github.io"}},
      {"type": "search_result", "title": "Tokio - An asynchronous Rust runtime",
       "url": "https://tokio.rs/?utm_source=brave", "description": "Tokio is a runtime."},
      {"type": "search_result", "title": "Tokio again", "url": "https://tokio.rs/#top",
       "description": "duplicate"},
      {"type": "search_result", "title": "no url"}
    ]
  }
}"#;

#[tokio::test]
async fn brave_sends_the_documented_request_and_parses_web_results() {
    let (base, log) = serve(|_| reply(200, BRAVE_ANSWER)).await;
    let brave = BraveGatherer::new(config(&base)).unwrap();
    let hits = brave.search("rust async runtime", 5).await.unwrap();
    assert_eq!(
        hits,
        vec![
            SearchHit {
                url: "https://rust-lang.github.io/async-book/".into(),
                title: "Asynchronous Programming in Rust".into(),
                snippet: "Async Rust & the runtime ecosystem.".into(),
                engine: "brave".into(),
            },
            SearchHit {
                url: "https://tokio.rs/?utm_source=brave".into(),
                title: "Tokio - An asynchronous Rust runtime".into(),
                snippet: "Tokio is a runtime.".into(),
                engine: "brave".into(),
            },
        ]
    );
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 1);
    let r = &log[0];
    assert_eq!(r.method, Method::GET);
    assert_eq!(r.path, "/res/v1/web/search");
    assert_eq!(r.q("q"), Some("rust async runtime"));
    assert_eq!(r.q("count"), Some("5"));
    assert_eq!(r.header("x-subscription-token"), Some(KEY));
    assert_eq!(r.header("accept"), Some("application/json"));
    assert!(r.body.is_empty());
}

#[tokio::test]
async fn tavily_posts_the_documented_body_with_a_bearer_key() {
    let answer = r#"{
      "query": "rust async runtime",
      "follow_up_questions": null,
      "answer": null,
      "images": [],
      "results": [
        {"title": "Tokio", "url": "https://tokio.rs/", "content": "An asynchronous  runtime\n for Rust.",
         "score": 0.98, "raw_content": null},
        {"title": "async-std", "url": "https://async.rs/", "content": "Async version of std.", "score": 0.71,
         "raw_content": null},
        {"title": "bad", "url": "ftp://files.example/x", "content": "", "score": 0.1}
      ],
      "response_time": 1.09
    }"#;
    let (base, log) = serve(move |_| reply(200, answer)).await;
    let tavily = TavilyGatherer::new(config(&base))
        .unwrap()
        .with_search_depth("basic");
    let hits = tavily.search("rust async runtime", 3).await.unwrap();
    assert_eq!(urls(&hits), vec!["https://tokio.rs/", "https://async.rs/"]);
    assert_eq!(hits[0].snippet, "An asynchronous runtime for Rust.");
    assert_eq!(hits[0].engine, "tavily");
    let log = log.lock().unwrap();
    let r = &log[0];
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/search");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.json(),
        json!({"query": "rust async runtime", "max_results": 3, "search_depth": "basic"})
    );
}

#[tokio::test]
async fn serper_posts_q_and_num_and_orders_by_position() {
    let answer = r#"{
      "searchParameters": {"q": "rust async runtime", "type": "search", "engine": "google"},
      "knowledgeGraph": {"title": "Rust"},
      "organic": [
        {"title": "async-std", "link": "https://async.rs/", "snippet": "Async version of std.", "position": 2},
        {"title": "Tokio", "link": "https://tokio.rs/", "snippet": "A runtime for Rust.", "position": 1,
         "sitelinks": [{"title": "Docs", "link": "https://tokio.rs/docs"}]},
        {"title": "smol", "link": "https://github.com/smol-rs/smol", "snippet": "A small runtime.", "position": 3}
      ],
      "peopleAlsoAsk": [],
      "relatedSearches": [{"query": "tokio vs async-std"}]
    }"#;
    let (base, log) = serve(move |_| reply(200, answer)).await;
    let serper = SerperGatherer::new(config(&base)).unwrap();
    let hits = serper.search("rust async runtime", 2).await.unwrap();
    assert_eq!(urls(&hits), vec!["https://tokio.rs/", "https://async.rs/"]);
    assert_eq!(hits[0].title, "Tokio");
    assert_eq!(hits[0].snippet, "A runtime for Rust.");
    assert_eq!(hits[0].engine, "serper");
    let r = &log.lock().unwrap()[0];
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/search");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.json(), json!({"q": "rust async runtime", "num": 2}));
}

/// The three providers built by kind, for error tests that hold for all of them.
fn all_providers(base: &str) -> Vec<(&'static str, Box<dyn Gatherer>)> {
    vec![
        (
            "brave",
            Box::new(BraveGatherer::new(config(base)).unwrap()) as Box<dyn Gatherer>,
        ),
        (
            "tavily",
            Box::new(TavilyGatherer::new(config(base)).unwrap()),
        ),
        (
            "serper",
            Box::new(SerperGatherer::new(config(base)).unwrap()),
        ),
    ]
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_naming_the_provider_never_the_key() {
    let (base, _) = serve(|_| reply(401, format!(r#"{{"detail":"invalid key {KEY}"}}"#))).await;
    for (name, gatherer) in all_providers(&base) {
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::Auth { provider, status: 401 } if provider == name),
            "{name}: {err:?}"
        );
        let msg = err.to_string();
        assert!(msg.contains(name) && msg.contains("Secret"), "{msg}");
        assert!(!msg.contains(KEY) && !format!("{err:?}").contains(KEY));
    }
    let (base, _) = serve(|_| reply(403, "{}")).await;
    let err = BraveGatherer::new(config(&base))
        .unwrap()
        .search("q", 5)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SourceError::Auth { status: 403, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn too_many_requests_carries_retry_after_and_blocks_the_next_call() {
    let (base, log) =
        serve(|_| reply(429, r#"{"error":"slow down"}"#).header("retry-after", "12")).await;
    for (name, gatherer) in all_providers(&base) {
        let before = log.lock().unwrap().len();
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::RateLimited { provider, retry_after: Some(d) } if provider == name && *d == Duration::from_secs(12)),
            "{name}: {err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("{name} is rate limiting requests; retry after 12s")
        );
        // The provider asked for 12 s: the next call is refused here, without a request.
        let again = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(again, SourceError::RateLimited { retry_after: Some(d), .. } if d <= Duration::from_secs(12)),
            "{name}: {again:?}"
        );
        assert_eq!(log.lock().unwrap().len(), before + 1, "{name}");
    }
}

#[tokio::test]
async fn server_errors_malformed_json_and_oversize_bodies() {
    let (base, _) = serve(|_| reply(503, "upstream down")).await;
    for (name, gatherer) in all_providers(&base) {
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::ProviderStatus { provider, status: 503 } if provider == name),
            "{name}: {err:?}"
        );
    }
    let (base, _) = serve(|_| reply(200, "<html>not json</html>")).await;
    for (name, gatherer) in all_providers(&base) {
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::Malformed(m) if m.starts_with(&format!("{name}: answer is not JSON"))),
            "{name}: {err:?}"
        );
    }
    // JSON, but not a search answer of that provider.
    let (base, _) = serve(|_| reply(200, r#"{"message": "hello"}"#)).await;
    for (name, gatherer) in all_providers(&base) {
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(matches!(err, SourceError::Malformed(_)), "{name}: {err:?}");
    }
    let (base, _) = serve(|_| reply(200, BRAVE_ANSWER)).await;
    let small = |b: &str| config(b).with_max_body_bytes(256);
    let gatherers: Vec<(&str, Box<dyn Gatherer>)> = vec![
        ("brave", Box::new(BraveGatherer::new(small(&base)).unwrap())),
        (
            "tavily",
            Box::new(TavilyGatherer::new(small(&base)).unwrap()),
        ),
        (
            "serper",
            Box::new(SerperGatherer::new(small(&base)).unwrap()),
        ),
    ];
    for (name, gatherer) in gatherers {
        let err = gatherer.search("q", 5).await.unwrap_err();
        assert!(
            matches!(&err, SourceError::TooLarge { provider, limit: 256 } if provider == name),
            "{name}: {err:?}"
        );
    }
}

#[tokio::test]
async fn client_side_rate_limit_refuses_without_sending() {
    let (base, log) = serve(|_| reply(200, BRAVE_ANSWER)).await;
    let brave = BraveGatherer::new(config(&base).with_requests_per_minute(1)).unwrap();
    assert_eq!(brave.search("q", 5).await.unwrap().len(), 2);
    // One per minute: the next call would wait ~60 s, beyond what a tool call may wait.
    let err = brave.search("q", 5).await.unwrap_err();
    assert!(
        matches!(err, SourceError::RateLimited { retry_after: Some(d), .. } if d > Duration::from_secs(50)),
        "{err:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn unreachable_and_timeouts_never_show_the_key() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let brave = BraveGatherer::new(config(&format!("http://{addr}"))).unwrap();
    let err = brave.search("secret query", 5).await.unwrap_err();
    match &err {
        SourceError::Unreachable { endpoint, .. } => {
            assert_eq!(endpoint, &format!("http://{addr}/res/v1/web/search"));
        }
        other => panic!("{other:?}"),
    }
    assert!(!format!("{err} {err:?}").contains(KEY));
}

#[tokio::test]
async fn providers_built_in_order_query_in_order() {
    let (base, log) = serve(|r| match r.path.as_str() {
        "/res/v1/web/search" => reply(200, BRAVE_ANSWER),
        _ => reply(
            200,
            r#"{"searchParameters":{"q":"x"},"organic":[{"title":"Tokio","link":"https://tokio.rs","snippet":"s","position":1}]}"#,
        ),
    })
    .await;
    let providers = build_providers(vec![
        (
            ProviderKind::Serper,
            ProviderConfig::new(Secret::new("search-keys-serper")).with_base_url(base.clone()),
        ),
        (ProviderKind::Brave, {
            let mut c =
                ProviderConfig::new(Secret::new("search-keys-brave")).with_base_url(base.clone());
            c.requests_per_minute = Some(60);
            c
        }),
    ])
    .unwrap();
    assert_eq!(
        providers
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        vec!["serper", "brave"]
    );
    let mut merged = Vec::new();
    for (_, g) in &providers {
        merged.extend(g.search("tokio", 5).await.unwrap());
    }
    // Serper's https://tokio.rs and Brave's https://tokio.rs/?utm_source=brave are one page.
    let merged = normalize_and_dedup(merged);
    assert_eq!(
        urls(&merged),
        vec![
            "https://tokio.rs",
            "https://rust-lang.github.io/async-book/"
        ]
    );
    let log = log.lock().unwrap();
    assert_eq!(log[0].header("x-api-key"), Some("search-keys-serper"));
    assert_eq!(
        log[1].header("x-subscription-token"),
        Some("search-keys-brave")
    );
}

// ---- Stack Exchange ----

/// The documented `/2.3/search/advanced` answer with `filter=withbody`.
fn se_answer(backoff: Option<u64>) -> String {
    let mut v = json!({
      "items": [
        {"tags": ["nginx", "ssl"], "owner": {"reputation": 10, "display_name": "a"},
         "is_answered": true, "view_count": 1200, "accepted_answer_id": 2, "answer_count": 3, "score": 12,
         "last_activity_date": 1700000000, "creation_date": 1600000000, "question_id": 1,
         "content_license": "CC BY-SA 4.0",
         "link": "https://serverfault.com/questions/1/nginx-ssl-handshake-failed",
         "title": "nginx &quot;SSL_do_handshake() failed&quot; behind a load balancer",
         "body": "<p>I get <code>SSL_do_handshake() failed</code> when proxying.</p>\n<pre><code>proxy_pass https://backend;\n</code></pre>"},
        {"tags": ["tls"], "is_answered": false, "answer_count": 0, "score": -1, "question_id": 7,
         "link": "https://serverfault.com/questions/7/tls", "title": "TLS &amp; SNI", "body": "<p>Why?</p>"}
      ],
      "has_more": true,
      "quota_max": 300,
      "quota_remaining": 297
    });
    if let Some(b) = backoff {
        v["backoff"] = json!(b);
    }
    v.to_string()
}

fn gzip(body: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body.as_bytes()).unwrap();
    enc.finish().unwrap()
}

fn se(base: &str, key: Option<&str>) -> StackExchange {
    StackExchange::new(StackExchangeConfig {
        base_url: Some(base.to_string()),
        key: key.map(Secret::new),
        timeout: Duration::from_secs(5),
        ..StackExchangeConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn stackexchange_request_gzip_answer_and_plain_text_bodies() {
    // The API always gzips; the client must ask for and decode it.
    let (base, log) =
        serve(|_| reply(200, gzip(&se_answer(None))).header("content-encoding", "gzip")).await;
    let client = se(&base, Some("se-key-1"));
    let answer = client
        .questions("nginx ssl handshake", Some("serverfault"))
        .await
        .unwrap();
    assert_eq!(
        urls(&answer.hits),
        vec![
            "https://serverfault.com/questions/1/nginx-ssl-handshake-failed",
            "https://serverfault.com/questions/7/tls"
        ]
    );
    assert_eq!(
        answer.hits[0].title,
        "nginx \"SSL_do_handshake() failed\" behind a load balancer"
    );
    assert_eq!(answer.hits[0].engine, "stackexchange");
    assert_eq!(answer.hits[1].title, "TLS & SNI");
    assert!(
        answer
            .text
            .contains("score 12, 3 answers, answered, tags: nginx, ssl"),
        "{}",
        answer.text
    );
    assert!(
        answer.text.contains("proxy_pass https://backend;"),
        "{}",
        answer.text
    );
    assert!(
        !answer.text.contains("<p>") && !answer.text.contains("<code>"),
        "{}",
        answer.text
    );
    let r = &log.lock().unwrap()[0];
    assert_eq!(r.method, Method::GET);
    assert_eq!(r.path, "/2.3/search/advanced");
    for (k, v) in [
        ("order", "desc"),
        ("sort", "relevance"),
        ("q", "nginx ssl handshake"),
        ("site", "serverfault"),
        ("pagesize", "8"),
        ("filter", "withbody"),
        ("key", "se-key-1"),
    ] {
        assert_eq!(r.q(k), Some(v), "{k}");
    }
    assert!(r.header("accept-encoding").unwrap_or("").contains("gzip"));
}

#[tokio::test]
async fn stackexchange_default_site_and_invalid_sites() {
    let (base, log) = serve(|_| reply(200, se_answer(None))).await;
    let client = se(&base, None);
    client.questions("x", None).await.unwrap();
    assert_eq!(log.lock().unwrap()[0].q("site"), Some("stackoverflow"));
    assert_eq!(log.lock().unwrap()[0].q("key"), None);
    let err = client
        .questions("x", Some("stackoverflow&key=stolen"))
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::Invalid { .. }), "{err:?}");
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "an invalid site is never sent"
    );
}

#[tokio::test]
async fn stackexchange_throttle_violation_is_rate_limited_and_blocks() {
    let (base, log) = serve(|_| {
        reply(
            400,
            r#"{"error_id":502,"error_message":"too many requests from this IP, more requests available in 30 seconds","error_name":"throttle_violation"}"#,
        )
    })
    .await;
    let client = se(&base, None);
    let err = client.questions("x", None).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::RateLimited { provider, retry_after: Some(d) } if provider == "stackexchange" && *d == Duration::from_secs(30)),
        "{err:?}"
    );
    let again = client.questions("x", None).await.unwrap_err();
    assert!(
        matches!(again, SourceError::RateLimited { .. }),
        "{again:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn stackexchange_backoff_refuses_calls_until_it_passes() {
    let (base, log) = serve(|_| reply(200, se_answer(Some(1)))).await;
    let client = se(&base, None);
    let answer = client.questions("x", None).await.unwrap();
    assert_eq!(
        answer.hits.len(),
        2,
        "the answer carrying the backoff is still used"
    );
    assert!(answer.text.contains("pause of 1 s"));
    let err = client.questions("x", None).await.unwrap_err();
    assert!(
        matches!(err, SourceError::RateLimited { retry_after: Some(d), .. } if d <= Duration::from_secs(1)),
        "{err:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client.questions("x", None).await.unwrap();
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn stackexchange_key_errors_bad_parameters_and_oversize() {
    let (base, _) = serve(|_| {
        reply(
            400,
            r#"{"error_id":400,"error_message":"key se-key-2 is not valid for passed access_token","error_name":"bad_parameter"}"#,
        )
    })
    .await;
    let err = se(&base, Some("se-key-2"))
        .questions("x", None)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, SourceError::Invalid { .. }), "{err:?}");
    assert!(
        msg.contains("error 400") && !msg.contains("se-key-2"),
        "{msg}"
    );
    let (base, _) = serve(|_| {
        reply(
            403,
            r#"{"error_id":403,"error_message":"access denied","error_name":"access_denied"}"#,
        )
    })
    .await;
    let err = se(&base, None).questions("x", None).await.unwrap_err();
    assert!(matches!(err, SourceError::Auth { .. }), "{err:?}");
    let (base, _) = serve(|_| reply(200, "{not json")).await;
    let err = se(&base, None).questions("x", None).await.unwrap_err();
    assert!(matches!(err, SourceError::Malformed(_)), "{err:?}");
    // A bomb: 6 MiB of JSON gzipped to a few KiB is still refused after decompression.
    let huge = format!(r#"{{"items":[],"pad":"{}"}}"#, "a".repeat(6 * 1024 * 1024));
    let compressed = gzip(&huge);
    assert!(compressed.len() < 64 * 1024);
    let (base, _) =
        serve(move |_| reply(200, compressed.clone()).header("content-encoding", "gzip")).await;
    let err = se(&base, None).questions("x", None).await.unwrap_err();
    assert!(matches!(err, SourceError::TooLarge { .. }), "{err:?}");
}

#[tokio::test]
async fn stackexchange_text_stays_within_seed_002_limits() {
    let body = "<p>".to_string() + &"line of text\n".repeat(400) + "</p>";
    let items: Vec<Value> = (0..100)
        .map(|i| {
            json!({"question_id": i, "title": format!("Q{i}"), "link": format!("https://stackoverflow.com/questions/{i}"),
                   "score": 1, "answer_count": 1, "is_answered": true, "tags": ["a"], "body": body})
        })
        .collect();
    let answer = json!({"items": items, "has_more": false, "quota_remaining": 10}).to_string();
    let (base, _) = serve(move |_| reply(200, answer.clone())).await;
    let client = StackExchange::new(StackExchangeConfig {
        base_url: Some(base),
        page_size: 100,
        body_chars: 100_000,
        ..StackExchangeConfig::default()
    })
    .unwrap();
    let out = client.questions("x", None).await.unwrap();
    assert_eq!(out.hits.len(), 100);
    assert!(out.text.len() <= 50 * 1024, "{} bytes", out.text.len());
    assert!(
        out.text.lines().count() <= 2001,
        "{} lines",
        out.text.lines().count()
    );
    assert!(out.text.contains("[Truncated"));
}
