//! Serper (Google results): `POST {base}/search` with `X-API-KEY` and a JSON body `{q, num}`;
//! the answer's `organic[]` carry `title`, `link`, `snippet` and `position`.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{ProviderConfig, ProviderCore};
use crate::sources::http::{is_http_url, text_field};
use crate::sources::{Gatherer, SearchHit, SourceError, normalize_and_dedup};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://google.serper.dev";
/// Provider name (errors) and `engine` of its hits.
pub const NAME: &str = "serper";
/// Most results Serper returns per request.
const MAX_NUM: usize = 100;

/// A [`Gatherer`] over the Serper API.
#[derive(Debug)]
pub struct SerperGatherer {
    core: ProviderCore,
}

impl SerperGatherer {
    /// Builds the client; fails on an empty key or an invalid base URL.
    pub fn new(config: ProviderConfig) -> Result<Self, SourceError> {
        Ok(Self {
            core: ProviderCore::new(NAME, DEFAULT_BASE_URL, "search", config)?,
        })
    }
}

#[async_trait]
impl Gatherer for SerperGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let request = self
            .core
            .http
            .client()
            .post(self.core.endpoint.clone())
            .header("X-API-KEY", self.core.key.header_value("")?)
            .json(&json!({"q": query, "num": limit.min(MAX_NUM)}));
        let answer = self.core.call(request).await?;
        parse(&answer, limit)
    }
}

/// Parses a Serper answer into at most `limit` hits ordered by `position`.
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
    let Some(object) = answer.as_object() else {
        return Err(SourceError::Malformed(format!(
            "{NAME}: answer is not a JSON object"
        )));
    };
    // Serper may leave `organic` out when nothing matched; `searchParameters` still shows it
    // was a search answer.
    let organic = match object.get("organic") {
        Some(o) => o
            .as_array()
            .ok_or_else(|| SourceError::Malformed(format!("{NAME}: `organic` is not an array")))?,
        None if object.contains_key("searchParameters") => return Ok(vec![]),
        None => {
            return Err(SourceError::Malformed(format!(
                "{NAME}: answer has neither `organic` nor `searchParameters`"
            )));
        }
    };
    let mut ranked: Vec<(u64, usize, SearchHit)> = organic
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let url = r.get("link").and_then(Value::as_str)?.trim();
            let position = r
                .get("position")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            is_http_url(url).then(|| {
                (
                    position,
                    i,
                    SearchHit {
                        url: url.to_string(),
                        title: text_field(r, "title").unwrap_or_default(),
                        snippet: text_field(r, "snippet").unwrap_or_default(),
                        engine: NAME.to_string(),
                    },
                )
            })
        })
        .collect();
    ranked.sort_by_key(|(position, i, _)| (*position, *i));
    let hits = ranked.into_iter().map(|(_, _, h)| h).collect();
    Ok(normalize_and_dedup(hits).into_iter().take(limit).collect())
}
