//! Gatherer over the JSON API of SearXNG (and its predecessor searx, which answers in the same shape).
//!
//! `GET {base}/search?q=<query>&format=json[&pageno=N][&categories=C]` returns
//! `{"results":[{"url","title","content","engine","engines",...}], ...}`. Instances differ in which
//! fields they fill (searx's offline engines leave `engines` out, some engines send `content: null`),
//! so every field of a result is read leniently and only a result without a usable URL is dropped.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use url::Url;

use super::health::{AnswerReport, HealthBook};
use super::http::HttpSource;
use super::{Gatherer, SearchHit, SourceError};

/// Default cap on the size of one JSON answer; a page of searx results is a few tens of KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Engine name used when a result names none.
const UNKNOWN_ENGINE: &str = "searxng";

/// A `Gatherer` that queries one SearXNG/searx instance over its JSON API.
#[derive(Debug, Clone)]
pub struct SearxngGatherer {
    /// Client, timeout and body bound (shared with the API providers' clients).
    source: HttpSource,
    search_url: Url,
    pageno: Option<u32>,
    categories: Option<String>,
    /// Where each answer's engine health goes, and under which backend key.
    health: Option<(Arc<HealthBook>, String)>,
}

impl SearxngGatherer {
    /// Builds a gatherer for the instance at `base_url` (e.g. `http://searxng:8080/`); every call
    /// (connect, send, read the whole body) is bounded by `timeout`.
    pub fn new(base_url: &str, timeout: Duration) -> Result<Self, SourceError> {
        Self::build(base_url, timeout, false)
    }

    /// A gatherer for the Service of a SearchEngine the operator manages: the operator resolved
    /// this URL itself, so its host is exempt from the egress policy (a tenant's URL is not).
    pub fn operator_managed(base_url: &str, timeout: Duration) -> Result<Self, SourceError> {
        Self::build(base_url, timeout, true)
    }

    fn build(base_url: &str, timeout: Duration, managed: bool) -> Result<Self, SourceError> {
        let search_url = search_endpoint(base_url)?;
        let egress = crate::egress::installed().map(|p| match search_url.host_str() {
            Some(host) if managed => p.with_exempt(host),
            _ => p.clone(),
        });
        if let Some(policy) = &egress {
            policy.check_url(&search_url).map_err(|reason| {
                SourceError::Config(format!(
                    "searxng: {search_url} is refused by the operator's egress policy: {reason}"
                ))
            })?;
        }
        // No redirects: searx answers 302 to the front page for some bad requests; following
        // it would only turn a clear status into a confusing parse error.
        let source = HttpSource::with_egress(
            "searxng",
            timeout,
            DEFAULT_MAX_BODY_BYTES,
            Vec::new(),
            egress,
        )?;
        Ok(Self {
            source,
            search_url,
            pageno: None,
            categories: None,
            health: None,
        })
    }

    /// Asks for result page `pageno` (1-based) instead of the instance's default first page.
    pub fn with_pageno(mut self, pageno: u32) -> Self {
        self.pageno = Some(pageno.max(1));
        self
    }

    /// Restricts the search to SearXNG categories (comma-separated, e.g. `general,it`).
    pub fn with_categories(mut self, categories: impl Into<String>) -> Self {
        let categories = categories.into();
        self.categories = (!categories.trim().is_empty()).then_some(categories);
        self
    }

    /// Records every answer's per-engine health in `book` under `backend`.
    pub fn with_health(mut self, book: Arc<HealthBook>, backend: impl Into<String>) -> Self {
        self.health = Some((book, backend.into()));
        self
    }

    /// Overrides the cap on the size of one answer body.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.source = self.source.with_max_body_bytes(max_body_bytes);
        self
    }

    /// The `/search` URL queries are sent to (without query parameters).
    pub fn search_url(&self) -> &Url {
        &self.search_url
    }

    /// The full request URL for `query`, with all parameters encoded.
    pub fn request_url(&self, query: &str) -> Url {
        let mut url = self.search_url.clone();
        {
            let mut pairs = url.query_pairs_mut();
            pairs.append_pair("q", query).append_pair("format", "json");
            if let Some(pageno) = self.pageno {
                pairs.append_pair("pageno", &pageno.to_string());
            }
            if let Some(categories) = &self.categories {
                pairs.append_pair("categories", categories);
            }
        }
        url
    }

    async fn fetch_body(&self, query: &str) -> Result<Vec<u8>, SourceError> {
        let url = self.request_url(query);
        let request = self
            .source
            .client()
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json");
        let answer = self.source.send(request, &url).await.map_err(|e| match e {
            SourceError::TooLarge { limit, .. } => {
                SourceError::Malformed(format!("answer exceeds the limit of {limit} bytes"))
            }
            other => other,
        })?;
        if !answer.status.is_success() {
            return Err(SourceError::Status {
                status: answer.status.as_u16(),
            });
        }
        Ok(answer.body)
    }
}

#[async_trait]
impl Gatherer for SearxngGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let body = self.fetch_body(query).await?;
        let (hits, report) = parse_answer(&body, limit)?;
        if let Some((book, backend)) = &self.health {
            book.observe(backend, &report, SystemTime::now());
        }
        Ok(hits)
    }
}

/// Turns a base URL into its `/search` endpoint, keeping any path prefix (`http://h/searx/`).
fn search_endpoint(base_url: &str) -> Result<Url, SourceError> {
    let invalid = |message: String| SourceError::Unreachable {
        endpoint: base_url.to_string(),
        message,
    };
    let mut base = Url::parse(base_url.trim()).map_err(|e| invalid(format!("invalid URL: {e}")))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "scheme {:?} is not http or https",
            base.scheme()
        )));
    }
    base.set_query(None);
    base.set_fragment(None);
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.join("search")
        .map_err(|e| invalid(format!("cannot derive /search from it: {e}")))
}

/// Parses a searx/SearXNG JSON answer into at most `limit` hits in answer order, deduplicated by
/// URL (ignoring the fragment, since `page#a` and `page#b` are one fetch).
pub fn parse_results(body: &[u8], limit: usize) -> Result<Vec<SearchHit>, SourceError> {
    parse_answer(body, limit).map(|(hits, _)| hits)
}

/// Like [`parse_results`], plus what the answer says about each engine: results per engine (over
/// all results, not only the first `limit`) and `unresponsive_engines`.
pub fn parse_answer(
    body: &[u8],
    limit: usize,
) -> Result<(Vec<SearchHit>, AnswerReport), SourceError> {
    let answer: Value = serde_json::from_slice(body)
        .map_err(|e| SourceError::Malformed(format!("not JSON: {e}")))?;
    // A missing `results` array means this is not a search answer (wrong path, JSON format
    // disabled behind a proxy, ...); reporting zero hits instead would make a run conclude that
    // nothing exists on the topic.
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| SourceError::Malformed("answer has no `results` array".to_string()))?;
    let mut seen = HashSet::new();
    let mut hits = Vec::new();
    let mut report = AnswerReport::default();
    for result in results {
        for engine in result_engines(result) {
            *report.results_by_engine.entry(engine).or_default() += 1;
        }
        if hits.len() >= limit {
            continue;
        }
        let Some(hit) = hit_from_result(result) else {
            continue;
        };
        if seen.insert(dedupe_key(&hit.url)) {
            hits.push(hit);
        }
    }
    // `[[engine, message], ...]`; SearXNG once sent a third element (the suspension), ignored.
    if let Some(list) = answer.get("unresponsive_engines").and_then(Value::as_array) {
        for entry in list {
            let mut parts = entry
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str);
            if let Some(name) = parts.next() {
                let message = parts.next().unwrap_or("unresponsive");
                report
                    .unresponsive
                    .push((name.to_string(), collapse_whitespace(message)));
            }
        }
    }
    Ok((hits, report))
}

/// The engines a result names (`engines`, else `engine`), each once.
fn result_engines(result: &Value) -> Vec<String> {
    let mut names: Vec<String> = result
        .get("engines")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    if names.is_empty()
        && let Some(name) = result.get("engine").and_then(Value::as_str)
        && !name.is_empty()
    {
        names.push(name.to_string());
    }
    names.sort();
    names.dedup();
    names
}

/// Reads one result leniently; `None` when it has no http(s) URL.
fn hit_from_result(result: &Value) -> Option<SearchHit> {
    let url = result.get("url").and_then(Value::as_str)?.trim();
    let parsed = Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let text = |key: &str| {
        result
            .get(key)
            .and_then(Value::as_str)
            .map(collapse_whitespace)
            .filter(|s| !s.is_empty())
    };
    let engine = text("engine")
        .or_else(|| {
            result
                .get("engines")
                .and_then(Value::as_array)
                .and_then(|engines| engines.iter().find_map(Value::as_str))
                .map(collapse_whitespace)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| UNKNOWN_ENGINE.to_string());
    Some(SearchHit {
        url: url.to_string(),
        title: text("title").unwrap_or_else(|| url.to_string()),
        snippet: text("content").unwrap_or_default(),
        engine,
    })
}

fn dedupe_key(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.to_string(),
    }
}

fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
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
        let gatherer =
            SearxngGatherer::new(&format!("http://{addr}"), Duration::from_secs(2)).unwrap();
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
}
