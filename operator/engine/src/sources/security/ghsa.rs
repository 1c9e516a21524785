//! GitHub Security Advisories (global advisory database): `GET {base}/advisories?cve_id=..` or
//! `?affects=<package>[@version]&ecosystem=..` with `Accept: application/vnd.github+json` and
//! `X-GitHub-Api-Version: 2022-11-28`; the answer is an array of advisories (`ghsa_id`,
//! `cve_id`, `html_url`, `summary`, `description`, `severity`, `published_at`,
//! `vulnerabilities[]`).
//!
//! GitHub signals rate limits with 403 or 429 and `x-ratelimit-remaining: 0` (reset time in
//! `x-ratelimit-reset`) or a `retry-after` for secondary limits; a plain 403 is a token problem.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use url::Url;

use super::Advisory;
use crate::sources::SourceError;
use crate::sources::http::{self, Answer, HttpSource, Secret, text_field};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://api.github.com";
/// Provider name in errors.
pub const NAME: &str = "github-advisories";
/// The REST API version this client reads.
pub const API_VERSION: &str = "2022-11-28";
/// GitHub caps `per_page` at 100.
const MAX_PER_PAGE: usize = 100;
/// A page of advisories with full descriptions stays well under this.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Client of GitHub's global security advisories.
#[derive(Debug)]
pub struct GhsaClient {
    http: HttpSource,
    endpoint: Url,
    token: Option<Secret>,
}

impl GhsaClient {
    /// Builds the client for `base` (default [`DEFAULT_BASE_URL`]); a token raises GitHub's
    /// limit from 60 to 5000 requests per hour.
    pub fn new(
        base: Option<&str>,
        token: Option<Secret>,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        let base = http::base_url(NAME, base.unwrap_or(DEFAULT_BASE_URL))?;
        let token = token.filter(|t| !t.expose().is_empty());
        Ok(Self {
            http: HttpSource::new(
                NAME,
                timeout,
                MAX_BODY_BYTES,
                token.iter().cloned().collect(),
            )?,
            endpoint: http::endpoint(NAME, &base, "advisories")?,
            token,
        })
    }

    /// Advisories of a CVE.
    pub async fn by_cve(&self, cve_id: &str, limit: usize) -> Result<Vec<Advisory>, SourceError> {
        let per_page = limit.clamp(1, MAX_PER_PAGE).to_string();
        self.get(&[("cve_id", cve_id), ("per_page", &per_page)], limit)
            .await
    }

    /// Advisories affecting a package (at a version), in an ecosystem (GitHub's spelling).
    pub async fn affecting(
        &self,
        package: &str,
        version: Option<&str>,
        ecosystem: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        let affects = match version {
            Some(v) => format!("{package}@{v}"),
            None => package.to_string(),
        };
        let per_page = limit.clamp(1, MAX_PER_PAGE).to_string();
        let mut params = vec![("affects", affects.as_str()), ("per_page", &per_page)];
        if let Some(e) = ecosystem {
            params.push(("ecosystem", e));
        }
        self.get(&params, limit).await
    }

    async fn get(
        &self,
        params: &[(&str, &str)],
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        let mut request = self
            .http
            .client()
            .get(http::with_query(&self.endpoint, params))
            .header(reqwest::header::ACCEPT, "application/vnd.github+json")
            .header("X-GitHub-Api-Version", API_VERSION);
        if let Some(token) = &self.token {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                token.header_value("Bearer ")?,
            );
        }
        let answer = self.http.send(request, &self.endpoint).await?;
        check(&self.http, &answer, SystemTime::now())?;
        parse(&self.http.json(&answer.body)?, limit)
    }
}

/// GitHub's status mapping: rate limits (403/429 with `x-ratelimit-remaining: 0`, a
/// `retry-after`, or a "rate limit" message) before auth, and 422 with GitHub's own message.
fn check(http: &HttpSource, answer: &Answer, now: SystemTime) -> Result<(), SourceError> {
    let status = answer.status.as_u16();
    if answer.status.is_success() {
        return Ok(());
    }
    let header = |name: &str| {
        answer
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let message = http
        .json(&answer.body)
        .ok()
        .and_then(|v| text_field(&v, "message"))
        .map(|m| http.redact(&m));
    if matches!(status, 403 | 429) {
        let exhausted = header("x-ratelimit-remaining") == Some("0");
        let says_so = message
            .as_deref()
            .is_some_and(|m| m.to_ascii_lowercase().contains("rate limit"));
        let retry_after = http::retry_after(&answer.headers, now);
        if status == 429 || exhausted || says_so || retry_after.is_some() {
            let until_reset = header("x-ratelimit-reset")
                .and_then(|v| v.parse::<u64>().ok())
                .map(|reset| {
                    let reset = SystemTime::UNIX_EPOCH + Duration::from_secs(reset);
                    reset.duration_since(now).unwrap_or(Duration::ZERO)
                })
                .map(|d| d.min(http::MAX_RETRY_AFTER));
            return Err(SourceError::RateLimited {
                provider: NAME.into(),
                retry_after: retry_after.or(until_reset),
            });
        }
    }
    if status == 422 {
        return Err(SourceError::Invalid {
            provider: NAME.into(),
            message: message.unwrap_or_else(|| "validation failed".into()),
        });
    }
    http.check_status(answer)
}

/// Parses the advisory list.
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<Advisory>, SourceError> {
    let list = answer
        .as_array()
        .ok_or_else(|| SourceError::Malformed(format!("{NAME}: answer is not a JSON array")))?;
    Ok(list.iter().filter_map(advisory).take(limit).collect())
}

fn advisory(v: &Value) -> Option<Advisory> {
    let id = text_field(v, "ghsa_id")?;
    let url = text_field(v, "html_url")
        .filter(|u| http::is_http_url(u))
        .unwrap_or_else(|| format!("https://github.com/advisories/{id}"));
    let mut facts = Vec::new();
    for vuln in v
        .get("vulnerabilities")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let package = vuln.get("package");
        let name = package.and_then(|p| text_field(p, "name"));
        let eco = package.and_then(|p| text_field(p, "ecosystem"));
        let Some(name) = name else { continue };
        let range = text_field(vuln, "vulnerable_version_range").unwrap_or_else(|| "?".into());
        // A string in the global API; an object `{identifier}` in older answers.
        let patched = vuln.get("first_patched_version").and_then(|p| {
            p.as_str()
                .map(str::to_string)
                .or_else(|| text_field(p, "identifier"))
        });
        let mut line = name;
        if let Some(eco) = eco {
            line.push_str(&format!(" ({eco})"));
        }
        line.push_str(&format!(" {range}"));
        match patched {
            Some(p) => line.push_str(&format!(", first patched {p}")),
            None => line.push_str(", no patched version"),
        }
        facts.push(("Affected".to_string(), line));
    }
    Some(Advisory {
        source: "GitHub",
        url,
        title: text_field(v, "summary").unwrap_or_default(),
        details: text_field(v, "description").unwrap_or_default(),
        severity: text_field(v, "severity"),
        published: text_field(v, "published_at"),
        modified: text_field(v, "updated_at"),
        aliases: text_field(v, "cve_id").into_iter().collect(),
        references: v
            .get("references")
            .and_then(Value::as_array)
            .map(|r| {
                r.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        facts,
        id,
    })
}
