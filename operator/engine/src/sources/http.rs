//! HTTP plumbing shared by the API search providers and the specialised sources: one client
//! per source with a timeout and no redirects, bounded body reads, status mapping, and keys
//! that never reach logs or error messages.

use std::fmt;
use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;
use url::Url;

use super::SourceError;
use crate::egress::EgressPolicy;

/// Default per-call timeout of a source (connect, send and read the whole body).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);
/// Default cap on one JSON answer of a search API (a page of results is a few tens of KiB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Longest `Retry-After` reported as is; longer waits are capped so a bad header cannot park a
/// source for days.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// An API key or token. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key read from a Secret; surrounding whitespace (a trailing newline from
    /// `kubectl create secret --from-file`) is dropped because no API accepts it.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into().trim().to_string())
    }

    /// The key itself, for the one header or parameter that carries it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The key as a header value marked sensitive (hidden from HTTP-level debug output).
    pub fn header_value(&self, prefix: &str) -> Result<HeaderValue, SourceError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            SourceError::Config("the API key contains characters not allowed in a header".into())
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A raw answer: status, headers and the (bounded) body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body, decompressed, within the byte limit.
    pub body: Vec<u8>,
}

/// The HTTP side of one source: its client, name, limits and the secrets to redact.
#[derive(Clone)]
pub struct HttpSource {
    provider: &'static str,
    client: reqwest::Client,
    timeout: Duration,
    max_body_bytes: usize,
    secrets: Vec<Secret>,
    /// The egress policy every request of this source is checked against, when one applies.
    egress: Option<EgressPolicy>,
}

impl fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSource")
            .field("provider", &self.provider)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl HttpSource {
    /// A client for `provider` bounded by `timeout`; `secrets` are scrubbed from every error.
    pub fn new(
        provider: &'static str,
        timeout: Duration,
        max_body_bytes: usize,
        secrets: Vec<Secret>,
    ) -> Result<Self, SourceError> {
        Self::with_egress(
            provider,
            timeout,
            max_body_bytes,
            secrets,
            crate::egress::installed().cloned(),
        )
    }

    /// [`Self::new`] under an explicit egress policy (`None`: no address guard) instead of the
    /// process's.
    pub fn with_egress(
        provider: &'static str,
        timeout: Duration,
        max_body_bytes: usize,
        secrets: Vec<Secret>,
        egress: Option<EgressPolicy>,
    ) -> Result<Self, SourceError> {
        let mut builder = crate::tls::with_shared_tls(reqwest::Client::builder());
        if let Some(policy) = &egress {
            builder = policy.guard(builder);
        }
        let client = builder
            .timeout(timeout)
            .connect_timeout(timeout)
            // APIs answer in place; a redirect would only send the key header somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("quarry/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                SourceError::Config(format!("{provider}: cannot build HTTP client: {e}"))
            })?;
        Ok(Self {
            provider,
            client,
            timeout,
            max_body_bytes,
            secrets: secrets
                .into_iter()
                .filter(|s| !s.expose().is_empty())
                .collect(),
            egress,
        })
    }

    /// The same client with another cap on one answer body.
    pub fn with_max_body_bytes(mut self, max_body_bytes: usize) -> Self {
        self.max_body_bytes = max_body_bytes;
        self
    }

    /// The provider name used in errors and hits.
    pub fn provider(&self) -> &'static str {
        self.provider
    }

    /// The client, to build requests with.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Replaces every secret in `text` so a provider echoing a key cannot leak it.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.expose(), "<redacted>");
        }
        out
    }

    /// Sends a request and reads the whole body within the byte limit, whatever the status.
    ///
    /// `endpoint` names the target in errors; it must not carry the key (query parameters are
    /// dropped from it anyway).
    pub async fn send(
        &self,
        request: reqwest::RequestBuilder,
        endpoint: &Url,
    ) -> Result<Answer, SourceError> {
        let mut shown = endpoint.clone();
        shown.set_query(None);
        let unreachable = |e: reqwest::Error| SourceError::Unreachable {
            endpoint: shown.to_string(),
            message: if e.is_timeout() {
                format!("timed out after {:?}", self.timeout)
            } else {
                // The URL may carry a key parameter; reqwest puts it in its message.
                self.redact(&error_chain(&e.without_url()))
            },
        };
        let request = request.build().map_err(unreachable)?;
        if let Some(policy) = &self.egress {
            // IP literals and cluster-internal names never reach the guarded resolver.
            policy
                .check_url(request.url())
                .map_err(|reason| self.refused(&shown, &reason))?;
        }
        let mut response =
            self.client.execute(request).await.map_err(
                |e| match crate::egress::refused_by_guard(&e) {
                    Some(reason) => self.refused(&shown, &reason),
                    None => unreachable(e),
                },
            )?;
        let status = response.status();
        let headers = response.headers().clone();
        let too_large = || SourceError::TooLarge {
            provider: self.provider.to_string(),
            limit: self.max_body_bytes,
        };
        if response
            .content_length()
            .is_some_and(|len| len > self.max_body_bytes as u64)
        {
            return Err(too_large());
        }
        // Counted after decompression, so a small gzip bomb is cut off too.
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > self.max_body_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    /// The error of a request the egress policy refuses.
    fn refused(&self, endpoint: &Url, reason: &str) -> SourceError {
        SourceError::Config(format!(
            "{}: endpoint {endpoint} is refused by the operator's egress policy: {}",
            self.provider,
            self.redact(reason)
        ))
    }

    /// The common mapping of a non-success status: 401/403 auth, 429 rate limited (with
    /// `Retry-After`), anything else a status error.
    pub fn check_status(&self, answer: &Answer) -> Result<(), SourceError> {
        check_status(self.provider, answer, SystemTime::now())
    }

    /// Parses a JSON body; the error names the provider and never quotes the body.
    pub fn json(&self, body: &[u8]) -> Result<Value, SourceError> {
        parse_json(self.provider, body)
    }
}

/// See [`HttpSource::check_status`]; `now` dates an HTTP-date `Retry-After`.
pub fn check_status(provider: &str, answer: &Answer, now: SystemTime) -> Result<(), SourceError> {
    let status = answer.status;
    if status.is_success() {
        return Ok(());
    }
    Err(match status.as_u16() {
        401 | 403 => SourceError::Auth {
            provider: provider.to_string(),
            status: status.as_u16(),
        },
        429 => SourceError::RateLimited {
            provider: provider.to_string(),
            retry_after: retry_after(&answer.headers, now),
        },
        other => SourceError::ProviderStatus {
            provider: provider.to_string(),
            status: other,
        },
    })
}

/// Parses a JSON answer.
pub fn parse_json(provider: &str, body: &[u8]) -> Result<Value, SourceError> {
    serde_json::from_slice(body)
        .map_err(|e| SourceError::Malformed(format!("{provider}: answer is not JSON: {e}")))
}

/// `Retry-After` in either form (delay seconds or HTTP-date), capped at [`MAX_RETRY_AFTER`].
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    let wait = if let Ok(secs) = value.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at = chrono::DateTime::parse_from_rfc2822(value).ok()?;
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(u64::try_from(at.timestamp()).ok()?);
        at.duration_since(now).unwrap_or(Duration::ZERO)
    };
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A string field of a JSON object, whitespace collapsed; `None` when absent, not a string or
/// blank (providers send `null` or `""` for missing values).
pub fn text_field(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(collapse_whitespace)
        .filter(|s| !s.is_empty())
}

/// Collapses runs of whitespace into single spaces.
pub fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Plain text of an inline HTML fragment (Brave's `<strong>` highlights, Stack Exchange's
/// entity-encoded titles): tags dropped, common and numeric entities decoded, whitespace
/// collapsed.
pub fn inline_html_to_text(s: &str) -> String {
    // Inline tags sit inside words (`<strong>Rust</strong>ic`) and vanish; any other tag
    // separates words.
    const INLINE: [&str; 12] = [
        "a", "b", "strong", "em", "i", "code", "span", "mark", "sup", "sub", "u", "kbd",
    ];
    let mut out = String::with_capacity(s.len());
    let mut tag: Option<String> = None;
    for c in s.chars() {
        match (&mut tag, c) {
            (None, '<') => tag = Some(String::new()),
            (Some(name), '>') => {
                let name = name
                    .trim_start_matches('/')
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                if !INLINE.contains(&name.as_str()) {
                    out.push(' ');
                }
                tag = None;
            }
            (Some(name), c) => name.push(c),
            (None, c) => out.push(c),
        }
    }
    collapse_whitespace(&decode_entities(&out))
}

/// Decodes `&amp;`-style named entities common in API text and `&#NN;` / `&#xNN;` references.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let decoded = tail.find(';').filter(|&end| end <= 10).and_then(|end| {
            let name = &tail[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                "nbsp" => Some(' '),
                _ => {
                    let code = if let Some(hex) =
                        name.strip_prefix("#x").or_else(|| name.strip_prefix("#X"))
                    {
                        u32::from_str_radix(hex, 16).ok()
                    } else {
                        name.strip_prefix('#').and_then(|d| d.parse().ok())
                    };
                    code.and_then(char::from_u32)
                }
            };
            c.map(|c| (c, end))
        });
        match decoded {
            Some((c, end)) => {
                out.push(c);
                rest = &tail[end + 1..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Cuts `s` to at most `max` characters, marking the cut with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// True for an absolute http(s) URL.
pub fn is_http_url(s: &str) -> bool {
    Url::parse(s).is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
}

/// Parses a configured base URL (http or https), keeping any path prefix with a trailing slash
/// so `join("v1/query")` appends instead of replacing the last segment.
pub fn base_url(provider: &str, base: &str) -> Result<Url, SourceError> {
    let invalid = |message: String| {
        SourceError::Config(format!(
            "{provider}: base URL {base:?} is invalid: {message}"
        ))
    };
    let mut url = Url::parse(base.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "scheme {:?} is not http or https",
            url.scheme()
        )));
    }
    url.set_query(None);
    url.set_fragment(None);
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// `endpoint` with query parameters appended, encoded (reqwest's own `query` needs a feature
/// this workspace does not enable).
pub fn with_query(endpoint: &Url, params: &[(&str, &str)]) -> Url {
    let mut url = endpoint.clone();
    url.query_pairs_mut().extend_pairs(params);
    url
}

/// Joins a relative path onto a base from [`base_url`].
pub fn endpoint(provider: &str, base: &Url, path: &str) -> Result<Url, SourceError> {
    base.join(path)
        .map_err(|e| SourceError::Config(format!("{provider}: cannot derive {path}: {e}")))
}

/// reqwest's top-level message hides the cause ("error sending request"); keep the chain.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests;
