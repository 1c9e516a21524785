//! Brave Search API: `GET {base}/res/v1/web/search?q=..&count=..` with `X-Subscription-Token`;
//! the answer's `web.results[]` carry `title`, `url` and `description` (with `<strong>`
//! highlights, stripped here).

use async_trait::async_trait;
use serde_json::Value;

use super::{ProviderConfig, ProviderCore};
use crate::sources::http::{inline_html_to_text, is_http_url, with_query};
use crate::sources::{Gatherer, SearchHit, SourceError, normalize_and_dedup};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://api.search.brave.com";
/// Provider name (errors) and `engine` of its hits.
pub const NAME: &str = "brave";
/// Most results Brave returns per request.
const MAX_COUNT: usize = 20;

/// A [`Gatherer`] over the Brave Search API.
#[derive(Debug)]
pub struct BraveGatherer {
    core: ProviderCore,
}

impl BraveGatherer {
    /// Builds the client; fails on an empty key or an invalid base URL.
    pub fn new(config: ProviderConfig) -> Result<Self, SourceError> {
        Ok(Self {
            core: ProviderCore::new(NAME, DEFAULT_BASE_URL, "res/v1/web/search", config)?,
        })
    }
}

#[async_trait]
impl Gatherer for BraveGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let count = limit.min(MAX_COUNT).to_string();
        let request = self
            .core
            .http
            .client()
            .get(with_query(
                &self.core.endpoint,
                &[("q", query), ("count", count.as_str())],
            ))
            .header(reqwest::header::ACCEPT, "application/json")
            .header("X-Subscription-Token", self.core.key.header_value("")?);
        let answer = self.core.call(request).await?;
        parse(&answer, limit)
    }
}

/// Parses a Brave web search answer into at most `limit` hits.
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
    let Some(object) = answer.as_object() else {
        return Err(SourceError::Malformed(format!(
            "{NAME}: answer is not a JSON object"
        )));
    };
    // Brave leaves `web` out when nothing matched; an answer that is not a search answer at
    // all (no `type`, no `query`) means a wrong endpoint, not zero results.
    let results = match object.get("web") {
        Some(web) => web
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| {
                SourceError::Malformed(format!("{NAME}: `web` has no `results` array"))
            })?,
        None if object.contains_key("type") || object.contains_key("query") => return Ok(vec![]),
        None => {
            return Err(SourceError::Malformed(format!(
                "{NAME}: answer has neither `web.results` nor `query`"
            )));
        }
    };
    let hits = results
        .iter()
        .filter_map(|r| {
            let url = r.get("url").and_then(Value::as_str)?.trim();
            is_http_url(url).then(|| SearchHit {
                url: url.to_string(),
                title: r
                    .get("title")
                    .and_then(Value::as_str)
                    .map(inline_html_to_text)
                    .unwrap_or_default(),
                snippet: r
                    .get("description")
                    .and_then(Value::as_str)
                    .map(inline_html_to_text)
                    .unwrap_or_default(),
                engine: NAME.to_string(),
            })
        })
        .collect();
    Ok(normalize_and_dedup(hits).into_iter().take(limit).collect())
}
