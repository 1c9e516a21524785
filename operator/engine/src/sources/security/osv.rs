//! OSV: `POST {base}/v1/query` with `{"package":{"name","ecosystem"},"version"}` or
//! `{"commit"}`; the answer is `{"vulns":[...]}` (or `{}` when nothing is known) with `id`,
//! `summary`, `details`, `aliases`, `published`, `modified`, `references[]{type,url}`,
//! `severity[]{type,score}` and `affected[]`.

use std::time::Duration;

use serde_json::{Value, json};
use url::Url;

use super::Advisory;
use crate::sources::SourceError;
use crate::sources::http::{self, HttpSource, text_field};

/// Public API base.
pub const DEFAULT_BASE_URL: &str = "https://api.osv.dev";
/// Public page of an OSV record.
pub const PAGE_URL: &str = "https://osv.dev/vulnerability/";
/// Provider name in errors.
pub const NAME: &str = "osv";
/// OSV answers for popular packages run to a few MiB (every record in full).
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Client of the OSV query API.
#[derive(Debug)]
pub struct OsvClient {
    http: HttpSource,
    endpoint: Url,
}

impl OsvClient {
    /// Builds the client for `base` (default [`DEFAULT_BASE_URL`]).
    pub fn new(base: Option<&str>, timeout: Duration) -> Result<Self, SourceError> {
        let base = http::base_url(NAME, base.unwrap_or(DEFAULT_BASE_URL))?;
        Ok(Self {
            http: HttpSource::new(NAME, timeout, MAX_BODY_BYTES, vec![])?,
            endpoint: http::endpoint(NAME, &base, "v1/query")?,
        })
    }

    /// The request body for a package (and version), or for a commit when `version` is a
    /// 40-digit hash.
    pub fn body(package: &str, ecosystem: &str, version: Option<&str>) -> Value {
        match version {
            Some(v) if v.len() == 40 && v.chars().all(|c| c.is_ascii_hexdigit()) => {
                json!({"commit": v})
            }
            Some(v) => json!({"package": {"name": package, "ecosystem": ecosystem}, "version": v}),
            None => json!({"package": {"name": package, "ecosystem": ecosystem}}),
        }
    }

    /// Known vulnerabilities of a package (at a version), at most `limit`, newest first.
    pub async fn query(
        &self,
        package: &str,
        ecosystem: &str,
        version: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        let request = self
            .http
            .client()
            .post(self.endpoint.clone())
            .json(&Self::body(package, ecosystem, version));
        let answer = self.http.send(request, &self.endpoint).await?;
        if answer.status.as_u16() == 400 {
            // OSV says 400 for an unknown ecosystem; its message says which.
            let message = self
                .http
                .json(&answer.body)
                .ok()
                .and_then(|v| text_field(&v, "message"))
                .unwrap_or_else(|| "bad request".into());
            return Err(SourceError::Invalid {
                provider: NAME.into(),
                message,
            });
        }
        self.http.check_status(&answer)?;
        parse(&self.http.json(&answer.body)?, limit)
    }
}

/// Parses an OSV query answer.
pub fn parse(answer: &Value, limit: usize) -> Result<Vec<Advisory>, SourceError> {
    let object = answer
        .as_object()
        .ok_or_else(|| SourceError::Malformed(format!("{NAME}: answer is not a JSON object")))?;
    let Some(vulns) = object.get("vulns") else {
        // `{}` is OSV's "no known vulnerabilities".
        return Ok(vec![]);
    };
    let vulns = vulns
        .as_array()
        .ok_or_else(|| SourceError::Malformed(format!("{NAME}: `vulns` is not an array")))?;
    let mut out: Vec<Advisory> = vulns.iter().filter_map(advisory).collect();
    // Newest first: the model should see current advisories before ancient ones.
    out.sort_by(|a, b| b.modified.cmp(&a.modified));
    out.truncate(limit);
    Ok(out)
}

fn advisory(v: &Value) -> Option<Advisory> {
    let id = text_field(v, "id")?;
    let strings = |key: &str| -> Vec<String> {
        v.get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let references = v
        .get("references")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("url").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let mut severity: Vec<String> = v
        .get("severity")
        .and_then(Value::as_array)
        .map(|s| {
            s.iter()
                .filter_map(|s| {
                    let kind = text_field(s, "type")?;
                    let score = text_field(s, "score")?;
                    Some(format!("{kind} {score}"))
                })
                .collect()
        })
        .unwrap_or_default();
    // GitHub-sourced records carry a plain rating here.
    if let Some(rating) = v
        .get("database_specific")
        .and_then(|d| text_field(d, "severity"))
    {
        severity.insert(0, rating);
    }
    let mut facts = Vec::new();
    let mut fixed = Vec::new();
    let mut packages = Vec::new();
    for a in v
        .get("affected")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(p) = a.get("package")
            && let (Some(name), Some(eco)) = (text_field(p, "name"), text_field(p, "ecosystem"))
        {
            let p = format!("{name} ({eco})");
            if !packages.contains(&p) {
                packages.push(p);
            }
        }
        for range in a
            .get("ranges")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            for event in range
                .get("events")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(f) = text_field(event, "fixed")
                    && !fixed.contains(&f)
                {
                    fixed.push(f);
                }
            }
        }
    }
    if !packages.is_empty() {
        facts.push(("Affected packages".to_string(), packages.join(", ")));
    }
    if !fixed.is_empty() {
        facts.push(("Fixed in".to_string(), fixed.join(", ")));
    }
    let details = text_field(v, "details").unwrap_or_default();
    Some(Advisory {
        source: "OSV",
        url: format!("{PAGE_URL}{id}"),
        title: text_field(v, "summary").unwrap_or_else(|| http::clip(&details, 160)),
        details,
        severity: (!severity.is_empty()).then(|| severity.join("; ")),
        published: text_field(v, "published"),
        modified: text_field(v, "modified"),
        aliases: strings("aliases"),
        references,
        facts,
        id,
    })
}

#[cfg(test)]
mod tests;
