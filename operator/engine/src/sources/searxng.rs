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
mod tests;
