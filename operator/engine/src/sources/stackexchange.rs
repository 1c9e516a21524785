//! Stack Exchange (the researcher's `stackexchange` tool): `GET {base}/2.3/search/advanced?order=desc&
//! sort=relevance&q=..&site=..&pagesize=..&filter=withbody[&key=..]`; the answer is
//! `{items[]{question_id,title,link,score,answer_count,is_answered,tags,body}, has_more,
//! quota_remaining, backoff?}` or an error `{error_id, error_message, error_name}`.
//!
//! The API always gzips its answers (reqwest's `gzip` feature decodes them) and asks clients to
//! honour `backoff`: no call to the same method until that many seconds pass.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use serde_json::Value;
use url::Url;

use super::http::{self, HttpSource, Secret, clip, inline_html_to_text, text_field};
use super::ratelimit::Throttle;
use super::specialised::{QuestionSearch, ToolAnswer};
use super::{SearchHit, SourceError, normalize_and_dedup};
use crate::scrape::extract::whole_page_markdown;
use crate::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://api.stackexchange.com";
/// Site searched when none is named.
pub const DEFAULT_SITE: &str = "stackoverflow";
/// Provider name in errors and the `engine` of its hits.
pub const NAME: &str = "stackexchange";
/// `error_id` of `throttle_violation`.
pub const THROTTLE_VIOLATION: u64 = 502;
/// Questions asked for per call.
pub const DEFAULT_PAGE_SIZE: usize = 8;
/// Characters of a question body shown to the model.
pub const DEFAULT_BODY_CHARS: usize = 1500;
/// Characters of a question body kept as the hit's snippet.
const SNIPPET_CHARS: usize = 300;
/// A page of questions with bodies is tens of KiB.
const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

static SITE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(quarry_vocab::patterns::STACK_EXCHANGE_SITE)
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static SECONDS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d+) seconds?").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// Endpoint, key and sizes of the client.
#[derive(Debug, Clone)]
pub struct StackExchangeConfig {
    /// Base URL; `None` means the public API.
    pub base_url: Option<String>,
    /// Site searched when the model names none; `None` means `stackoverflow`.
    pub default_site: Option<String>,
    /// A Stack Apps key (raises the daily quota); sent as the `key` parameter.
    pub key: Option<Secret>,
    /// Bound on one call.
    pub timeout: Duration,
    /// Questions per call (1..=100).
    pub page_size: usize,
    /// Characters of each body shown to the model.
    pub body_chars: usize,
}

impl Default for StackExchangeConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            default_site: None,
            key: None,
            timeout: http::DEFAULT_TIMEOUT,
            page_size: DEFAULT_PAGE_SIZE,
            body_chars: DEFAULT_BODY_CHARS,
        }
    }
}

/// Client of the Stack Exchange search API.
#[derive(Debug)]
pub struct StackExchange {
    http: HttpSource,
    endpoint: Url,
    key: Option<Secret>,
    default_site: String,
    page_size: usize,
    body_chars: usize,
    throttle: Throttle,
}

/// One question as returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// `question_id`.
    pub question_id: u64,
    /// `title`, entities decoded.
    pub title: String,
    /// `link`, the question page.
    pub link: String,
    /// `score` (votes).
    pub score: i64,
    /// `answer_count`.
    pub answer_count: u64,
    /// `is_answered` (an accepted or upvoted answer exists).
    pub is_answered: bool,
    /// `tags`.
    pub tags: Vec<String>,
    /// The body as plain Markdown (HTML converted, code kept).
    pub body: String,
}

/// A parsed search answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchAnswer {
    /// `items`.
    pub questions: Vec<Question>,
    /// `has_more`.
    pub has_more: bool,
    /// `quota_remaining` (requests left today).
    pub quota_remaining: Option<u64>,
    /// Seconds to wait before the next call, when the API asked for it.
    pub backoff: Option<u64>,
}

/// Checks a site parameter: a short lowercase name (`stackoverflow`, `unix`,
/// `math.stackexchange`), so a model cannot inject other parameters.
pub fn valid_site(site: &str) -> bool {
    SITE.is_match(site)
}

impl StackExchange {
    /// Builds the client; fails on an invalid base URL or default site.
    pub fn new(config: StackExchangeConfig) -> Result<Self, SourceError> {
        let base = http::base_url(NAME, config.base_url.as_deref().unwrap_or(DEFAULT_BASE_URL))?;
        let default_site = config.default_site.unwrap_or_else(|| DEFAULT_SITE.into());
        if !valid_site(&default_site) {
            return Err(SourceError::Config(format!(
                "{NAME}: default site {default_site:?} is not a site name like `stackoverflow`"
            )));
        }
        let key = config.key.filter(|k| !k.expose().is_empty());
        Ok(Self {
            http: HttpSource::new(
                NAME,
                config.timeout,
                MAX_BODY_BYTES,
                key.iter().cloned().collect(),
            )?,
            endpoint: http::endpoint(NAME, &base, "2.3/search/advanced")?,
            key,
            default_site,
            page_size: config.page_size.clamp(1, 100),
            body_chars: config.body_chars.max(100),
            // Stack Exchange has no per-minute plan; only its `backoff` and throttle blocks apply.
            throttle: Throttle::new(NAME, None),
        })
    }

    /// Searches questions on `site` (the default site when `None`).
    pub async fn search(
        &self,
        query: &str,
        site: Option<&str>,
    ) -> Result<SearchAnswer, SourceError> {
        let site = site
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.default_site);
        if !valid_site(site) {
            return Err(SourceError::Invalid {
                provider: NAME.into(),
                message: format!(
                    "site {site:?} is not a Stack Exchange site name (e.g. stackoverflow, serverfault, unix, superuser)"
                ),
            });
        }
        self.throttle.acquire().await?;
        let page_size = self.page_size.to_string();
        let mut params = vec![
            ("order", "desc"),
            ("sort", "relevance"),
            ("q", query),
            ("site", site),
            ("pagesize", page_size.as_str()),
            ("filter", "withbody"),
        ];
        if let Some(key) = &self.key {
            params.push(("key", key.expose()));
        }
        let request = self
            .http
            .client()
            .get(http::with_query(&self.endpoint, &params))
            .header(reqwest::header::ACCEPT, "application/json");
        let answer = self.http.send(request, &self.endpoint).await?;
        // Errors come as JSON with an `error_id` (usually HTTP 400), so read the body first.
        let json = self.http.json(&answer.body);
        if let Ok(v) = &json
            && let Some(err) = self.api_error(v)
        {
            self.throttle.note(&err);
            return Err(err);
        }
        self.http.check_status(&answer)?;
        let parsed = parse(&json?, self.body_chars)?;
        if let Some(secs) = parsed.backoff.filter(|s| *s > 0) {
            tracing::debug!(backoff = secs, "Stack Exchange asked to back off");
            self.throttle.block_for(Duration::from_secs(secs));
        }
        Ok(parsed)
    }

    /// Maps an error answer: throttle violation to rate limited, key problems to auth.
    fn api_error(&self, v: &Value) -> Option<SourceError> {
        let id = v.get("error_id").and_then(Value::as_u64)?;
        let message = self.http.redact(
            &text_field(v, "error_message")
                .or_else(|| text_field(v, "error_name"))
                .unwrap_or_default(),
        );
        Some(match id {
            THROTTLE_VIOLATION => SourceError::RateLimited {
                provider: NAME.into(),
                // "too many requests from this IP, more requests available in 81684 seconds"
                retry_after: SECONDS
                    .captures(&message)
                    .and_then(|c| c.get(1))
                    .and_then(|m| m.as_str().parse().ok())
                    .map(|s: u64| Duration::from_secs(s).min(http::MAX_RETRY_AFTER)),
            },
            401..=403 | 405 | 406 => SourceError::Auth {
                provider: NAME.into(),
                status: u16::try_from(id).unwrap_or(400),
            },
            _ => SourceError::Invalid {
                provider: NAME.into(),
                message: format!("error {id}: {message}"),
            },
        })
    }
}

/// Parses a search answer; bodies become Markdown cut to `body_chars`.
pub fn parse(answer: &Value, body_chars: usize) -> Result<SearchAnswer, SourceError> {
    let items = answer
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| SourceError::Malformed(format!("{NAME}: answer has no `items` array")))?;
    let questions = items
        .iter()
        .filter_map(|q| {
            let link = q.get("link").and_then(Value::as_str)?.trim().to_string();
            if !http::is_http_url(&link) {
                return None;
            }
            let body = q
                .get("body")
                .and_then(Value::as_str)
                .map(|html| whole_page_markdown(html).trim().to_string())
                .unwrap_or_default();
            Some(Question {
                question_id: q.get("question_id").and_then(Value::as_u64).unwrap_or(0),
                // Titles arrive HTML-encoded (`&quot;`).
                title: q
                    .get("title")
                    .and_then(Value::as_str)
                    .map(inline_html_to_text)
                    .unwrap_or_default(),
                link,
                score: q.get("score").and_then(Value::as_i64).unwrap_or(0),
                answer_count: q.get("answer_count").and_then(Value::as_u64).unwrap_or(0),
                is_answered: q
                    .get("is_answered")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
                tags: q
                    .get("tags")
                    .and_then(Value::as_array)
                    .map(|t| {
                        t.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                body: clip(&body, body_chars),
            })
        })
        .collect();
    Ok(SearchAnswer {
        questions,
        has_more: answer
            .get("has_more")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        quota_remaining: answer.get("quota_remaining").and_then(Value::as_u64),
        backoff: answer.get("backoff").and_then(Value::as_u64),
    })
}

/// The model's view of an answer and its hits.
pub fn render(query: &str, site: &str, answer: &SearchAnswer) -> ToolAnswer {
    let mut text = format!(
        "Stack Exchange questions on {site} for \"{}\"",
        query.trim()
    );
    if answer.questions.is_empty() {
        text.push_str(": none found.\n");
    } else {
        text.push_str(
            ". Each link can be read with `scrape` (the page holds the answers) and cited.\n",
        );
    }
    let mut hits = Vec::new();
    for q in &answer.questions {
        let answered = if q.is_answered { ", answered" } else { "" };
        text.push_str(&format!(
            "\n- {} — {} (score {}, {} answers{answered}",
            q.title, q.link, q.score, q.answer_count
        ));
        if !q.tags.is_empty() {
            text.push_str(&format!(", tags: {}", q.tags.join(", ")));
        }
        text.push_str(")\n");
        if !q.body.is_empty() {
            for line in q.body.lines() {
                text.push_str("  ");
                text.push_str(line);
                text.push('\n');
            }
        }
        hits.push(SearchHit {
            url: q.link.clone(),
            title: q.title.clone(),
            snippet: clip(&http::collapse_whitespace(&q.body), SNIPPET_CHARS),
            engine: NAME.into(),
        });
    }
    if let Some(backoff) = answer.backoff.filter(|b| *b > 0) {
        text.push_str(&format!(
            "\nStack Exchange asked for a pause of {backoff} s before the next search.\n"
        ));
    }
    ToolAnswer {
        hits: normalize_and_dedup(hits),
        text: truncate_head(&text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES).text,
    }
}

#[async_trait]
impl QuestionSearch for StackExchange {
    async fn questions(&self, query: &str, site: Option<&str>) -> Result<ToolAnswer, SourceError> {
        let answer = self.search(query, site).await?;
        let site = site
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.default_site);
        Ok(render(query, site, &answer))
    }
}

#[cfg(test)]
mod tests;
