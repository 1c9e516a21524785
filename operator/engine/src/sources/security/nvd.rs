//! NVD CVE API 2.0: `GET {base}/rest/json/cves/2.0?keywordSearch=..&resultsPerPage=..` or
//! `?cveId=..`, optional `apiKey` header; the answer's `vulnerabilities[].cve` carry `id`,
//! `descriptions[]{lang,value}`, `published`, `lastModified`, `metrics` and `references[]{url}`.
//!
//! NVD allows 5 requests per rolling 30 s without a key and 50 with one, and answers 403 (not
//! 429) when that is exceeded, so the client keeps to the limit itself.

use std::time::{Duration, SystemTime};

use serde_json::Value;
use url::Url;

use super::Advisory;
use crate::sources::SourceError;
use crate::sources::http::{self, HttpSource, Secret, text_field};
use crate::sources::ratelimit::{RateLimiter, Throttle};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://services.nvd.nist.gov";
/// Public page of a CVE.
pub const PAGE_URL: &str = "https://nvd.nist.gov/vuln/detail/";
/// Provider name in errors.
pub const NAME: &str = "nvd";
/// NVD's rolling window.
pub const WINDOW: Duration = Duration::from_secs(30);
/// Requests per window without a key.
pub const REQUESTS_WITHOUT_KEY: u32 = 5;
/// Requests per window with a key.
pub const REQUESTS_WITH_KEY: u32 = 50;
/// A page of 20 full CVE records is well under 1 MiB.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// NVD caps `resultsPerPage` at 2000; a researcher never needs more than a handful.
const MAX_RESULTS: usize = 50;

/// Client of the NVD CVE API.
#[derive(Debug)]
pub struct NvdClient {
    http: HttpSource,
    endpoint: Url,
    key: Option<Secret>,
    throttle: Throttle,
}

impl NvdClient {
    /// Builds the client for `base` (default [`DEFAULT_BASE_URL`]), limited to NVD's rate for
    /// a client with or without a key.
    pub fn new(
        base: Option<&str>,
        key: Option<Secret>,
        timeout: Duration,
    ) -> Result<Self, SourceError> {
        let base = http::base_url(NAME, base.unwrap_or(DEFAULT_BASE_URL))?;
        let key = key.filter(|k| !k.expose().is_empty());
        let per_window = if key.is_some() {
            REQUESTS_WITH_KEY
        } else {
            REQUESTS_WITHOUT_KEY
        };
        Ok(Self {
            http: HttpSource::new(NAME, timeout, MAX_BODY_BYTES, key.iter().cloned().collect())?,
            endpoint: http::endpoint(NAME, &base, "rest/json/cves/2.0")?,
            key,
            throttle: Throttle::new(NAME, Some(RateLimiter::per_window(per_window, WINDOW))),
        })
    }

    /// Overrides how long a call may wait for NVD's rate limit before it is refused.
    pub fn with_max_wait(mut self, max_wait: Duration) -> Self {
        self.throttle = self.throttle.with_max_wait(max_wait);
        self
    }

    /// One CVE by id.
    pub async fn by_cve(&self, cve_id: &str) -> Result<Vec<Advisory>, SourceError> {
        self.get(&[("cveId", cve_id)], 1).await
    }

    /// CVEs whose description holds every word of `keywords`, at most `limit`.
    pub async fn keyword(
        &self,
        keywords: &str,
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        let per_page = limit.clamp(1, MAX_RESULTS).to_string();
        self.get(
            &[("keywordSearch", keywords), ("resultsPerPage", &per_page)],
            limit,
        )
        .await
    }

    async fn get(
        &self,
        params: &[(&str, &str)],
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        self.throttle.acquire().await?;
        let mut request = self
            .http
            .client()
            .get(http::with_query(&self.endpoint, params));
        if let Some(key) = &self.key {
            request = request.header("apiKey", key.header_value("")?);
        }
        let answer = self.http.send(request, &self.endpoint).await?;
        let status = answer.status.as_u16();
        // NVD explains errors in a `message` header ("Invalid apiKey", "... rate limit ...").
        let message = answer
            .headers
            .get("message")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(status, 401 | 403 | 404) && message.contains("apikey") {
            return Err(SourceError::Auth {
                provider: NAME.into(),
                status,
            });
        }
        if matches!(status, 403 | 429) {
            let err = SourceError::RateLimited {
                provider: NAME.into(),
                retry_after: Some(
                    http::retry_after(&answer.headers, SystemTime::now()).unwrap_or(WINDOW),
                ),
            };
            self.throttle.note(&err);
            return Err(err);
        }
        self.http.check_status(&answer)?;
        parse(&self.http.json(&answer.body)?, limit)
    }
}

/// Parses a CVE API answer.
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<Advisory>, SourceError> {
    let vulns = answer
        .get("vulnerabilities")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            SourceError::Malformed(format!("{NAME}: answer has no `vulnerabilities` array"))
        })?;
    Ok(vulns
        .iter()
        .filter_map(|v| v.get("cve"))
        .filter_map(advisory)
        .take(limit)
        .collect())
}

fn advisory(cve: &Value) -> Option<Advisory> {
    let id = text_field(cve, "id")?;
    let descriptions = cve.get("descriptions").and_then(Value::as_array);
    let english = descriptions
        .into_iter()
        .flatten()
        .find(|d| d.get("lang").and_then(Value::as_str) == Some("en"))
        .or_else(|| descriptions.and_then(|d| d.first()))
        .and_then(|d| text_field(d, "value"))
        .unwrap_or_default();
    let references = cve
        .get("references")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("url").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut facts = Vec::new();
    if let Some(status) = text_field(cve, "vulnStatus") {
        facts.push(("NVD status".to_string(), status));
    }
    Some(Advisory {
        source: "NVD",
        url: format!("{PAGE_URL}{id}"),
        title: String::new(),
        details: english,
        severity: cvss(cve.get("metrics")),
        published: text_field(cve, "published"),
        modified: text_field(cve, "lastModified"),
        aliases: vec![],
        references,
        facts,
        id,
    })
}

/// The newest CVSS rating present: v4.0, v3.1, v3.0, then v2 (whose severity sits beside
/// `cvssData` rather than in it).
fn cvss(metrics: Option<&Value>) -> Option<String> {
    let metrics = metrics?;
    for (key, label) in [
        ("cvssMetricV40", "CVSS 4.0"),
        ("cvssMetricV31", "CVSS 3.1"),
        ("cvssMetricV30", "CVSS 3.0"),
        ("cvssMetricV2", "CVSS 2.0"),
    ] {
        let Some(metric) = metrics
            .get(key)
            .and_then(Value::as_array)
            .and_then(|m| m.first())
        else {
            continue;
        };
        let data = metric.get("cvssData");
        let score = data
            .and_then(|d| d.get("baseScore"))
            .and_then(Value::as_f64);
        let severity = data
            .and_then(|d| text_field(d, "baseSeverity"))
            .or_else(|| text_field(metric, "baseSeverity"));
        return match (score, severity) {
            (Some(score), Some(sev)) => Some(format!("{label} {score:.1} {sev}")),
            (Some(score), None) => Some(format!("{label} {score:.1}")),
            (None, Some(sev)) => Some(format!("{label} {sev}")),
            (None, None) => continue,
        };
    }
    None
}

#[cfg(test)]
mod tests;
