//! Tavily: `POST {base}/search` with `Authorization: Bearer <key>` and a JSON body
//! `{query, max_results, search_depth}`; the answer's `results[]` carry `title`, `url`,
//! `content` and `score`.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{ProviderConfig, ProviderCore};
use crate::sources::http::{is_http_url, text_field};
use crate::sources::{Gatherer, SearchHit, SourceError, normalize_and_dedup};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://api.tavily.com";
/// Provider name (errors) and `engine` of its hits.
pub const NAME: &str = "tavily";
/// Most results Tavily returns per request.
const MAX_RESULTS: usize = 20;

/// A [`Gatherer`] over the Tavily search API.
#[derive(Debug)]
pub struct TavilyGatherer {
    core: ProviderCore,
    search_depth: Option<String>,
}

impl TavilyGatherer {
    /// Builds the client; fails on an empty key or an invalid base URL.
    pub fn new(config: ProviderConfig) -> Result<Self, SourceError> {
        Ok(Self {
            core: ProviderCore::new(NAME, DEFAULT_BASE_URL, "search", config)?,
            search_depth: None,
        })
    }

    /// Asks for `basic` or `advanced` depth (advanced costs two credits per call).
    pub fn with_search_depth(mut self, depth: impl Into<String>) -> Self {
        self.search_depth = Some(depth.into());
        self
    }
}

#[async_trait]
impl Gatherer for TavilyGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut body = json!({"query": query, "max_results": limit.min(MAX_RESULTS)});
        if let Some(depth) = &self.search_depth {
            body["search_depth"] = json!(depth);
        }
        let request = self
            .core
            .http
            .client()
            .post(self.core.endpoint.clone())
            .header(
                reqwest::header::AUTHORIZATION,
                self.core.key.header_value("Bearer ")?,
            )
            .json(&body);
        let answer = self.core.call(request).await?;
        parse(&answer, limit)
    }
}

/// Parses a Tavily answer into at most `limit` hits (in Tavily's order, best score first).
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| SourceError::Malformed(format!("{NAME}: answer has no `results` array")))?;
    let hits = results
        .iter()
        .filter_map(|r| {
            let url = r.get("url").and_then(Value::as_str)?.trim();
            is_http_url(url).then(|| SearchHit {
                url: url.to_string(),
                title: text_field(r, "title").unwrap_or_default(),
                snippet: text_field(r, "content").unwrap_or_default(),
                engine: NAME.to_string(),
            })
        })
        .collect();
    Ok(normalize_and_dedup(hits).into_iter().take(limit).collect())
}
