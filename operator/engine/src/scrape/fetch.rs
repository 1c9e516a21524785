//! The HTTP fetcher: address guard, allowed and denied domains, robots.txt, per-host
//! politeness, manual redirects, byte/decompression/time limits, content-type and charset
//! handling, then extraction (HTML, text, PDF).
//!
//! Every hop of a fetch (redirect targets included) is checked in the same order: scheme and
//! host names (denied domains, then allowed domains, then the address guard), then the
//! origin's robots.txt, then a per-host slot from the shared [`HostLimiter`]. The policy's
//! timeout covers the whole fetch, including waiting for robots.txt and for a host slot.
//!
//! Decompression is done here rather than by reqwest so that both limits are exact: the wire
//! counter sees the compressed bytes as they arrive and the decompressed counter sees what
//! the decoder produces, and each stops the transfer as soon as it passes its cap.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_compression::tokio::bufread::{BrotliDecoder, GzipDecoder, ZlibDecoder};
use async_trait::async_trait;
use futures::StreamExt;
use reqwest::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, LOCATION};
use tokio::io::{AsyncBufRead, AsyncRead, AsyncReadExt};
use tokio_util::io::StreamReader;
use url::Url;

use super::charset::{self, DocKind};
use super::extract;
use super::guard::{self, BlockedAddress, GuardedResolver, HostRules, Lookup};
use super::pdf_sandbox;
use super::politeness::{HostLimiter, HostLimits, HostPermit};
use super::robots::{self, ROBOTS_MAX_BYTES, RobotsCache, RobotsRules};
use super::{FetchError, Fetcher, Page};

/// Time a robots.txt fetch may take (within the fetch's own timeout).
const ROBOTS_TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects of a robots.txt followed (RFC 9309 asks for at least five).
const ROBOTS_REDIRECTS: u8 = 5;
/// Content types that say nothing about the body; a `.pdf` path then means PDF.
const GENERIC_TYPES: [&str; 6] = [
    "application/octet-stream",
    "binary/octet-stream",
    "application/binary",
    "application/download",
    "application/force-download",
    "application/x-download",
];

/// What may be fetched and how much of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Hosts or IP literals exempt from the address guard (tests allow "127.0.0.1"); this
    /// lifts the SSRF guard for them and restricts nothing else.
    pub allowed_hosts: Vec<String>,
    /// When non-empty, the only domains fetched (with their subdomains, redirect targets
    /// included); this restricts and never lifts the address guard.
    pub allowed_domains: Vec<String>,
    /// Domains refused together with their subdomains (wins over `allowed_domains`).
    pub denied_domains: Vec<String>,
    /// Whether robots.txt is fetched and obeyed for the product token of `user_agent`.
    pub respect_robots: bool,
    /// Requests in flight to one host at most, across every fetcher sharing a [`FetchShared`].
    pub per_host_concurrency: usize,
    /// Least time between request starts to one host (zero disables); a robots.txt
    /// `Crawl-delay` raises it for that host.
    pub politeness_delay: Duration,
    /// Cap on body bytes received on the wire (Content-Length and streamed count).
    pub max_bytes: u64,
    /// Cap on body bytes after content decoding.
    pub max_decompressed_bytes: u64,
    /// Cap on the whole fetch, redirects included.
    pub timeout: Duration,
    /// Redirects followed before giving up.
    pub max_redirects: u8,
    /// The User-Agent header sent.
    pub user_agent: String,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_domains: Vec::new(),
            denied_domains: Vec::new(),
            respect_robots: true,
            per_host_concurrency: 2,
            politeness_delay: Duration::from_millis(500),
            max_bytes: 5 * 1024 * 1024,
            max_decompressed_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(20),
            max_redirects: 5,
            user_agent: concat!("Quarry/", env!("CARGO_PKG_VERSION"), " (research agent)")
                .to_string(),
        }
    }
}

/// A fetched and decoded document, before extraction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The URL after redirects.
    pub final_url: String,
    /// Whether it is HTML or plain text.
    pub kind: DocKind,
    /// The MIME type the server declared (lower-case, without parameters).
    pub mime: String,
    /// The encoding the body was decoded with (WHATWG name).
    pub encoding: &'static str,
    /// The decoded body (for a PDF, its extracted text).
    pub text: String,
    /// A title carried outside the text (a PDF's Info Title), if any.
    pub title: Option<String>,
    /// Body bytes received on the wire.
    pub wire_bytes: u64,
}

/// State every fetcher of a process should share: per-host admission and robots.txt answers.
#[derive(Debug, Clone, Default)]
pub struct FetchShared {
    /// Per-host concurrency cap and politeness delay.
    pub limiter: Arc<HostLimiter>,
    /// robots.txt answers per origin.
    pub robots: Arc<RobotsCache>,
}

impl FetchShared {
    /// Fresh state, shared with nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide state: fetchers built on it (one per run) are polite to a host together.
    pub fn process() -> Self {
        static SHARED: OnceLock<FetchShared> = OnceLock::new();
        SHARED.get_or_init(FetchShared::new).clone()
    }
}

/// Caps of one body read.
#[derive(Debug, Clone, Copy)]
struct BodyCaps {
    /// Bytes on the wire.
    wire: u64,
    /// Bytes after content decoding.
    decoded: u64,
    /// Keep what was read when a cap is reached instead of failing (robots.txt).
    truncate: bool,
}

/// Which cap a body read ran into; carried inside `io::Error` out of the decoder stack.
#[derive(Debug, thiserror::Error)]
enum LimitHit {
    #[error("more than {0} bytes on the wire")]
    Wire(u64),
}

/// Reqwest-based [`Fetcher`] enforcing a [`FetchPolicy`].
#[derive(Debug, Clone)]
pub struct HttpFetcher {
    client: reqwest::Client,
    policy: FetchPolicy,
    rules: Arc<HostRules>,
    shared: FetchShared,
    /// The robots.txt product token (from the User-Agent).
    agent: String,
}

/// Response codes followed as redirects.
const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

impl HttpFetcher {
    /// Builds a fetcher with its own host limiter and robots.txt cache; fails only if the HTTP
    /// client cannot be constructed.
    pub fn new(policy: FetchPolicy) -> Result<Self, FetchError> {
        Self::with_shared(policy, FetchShared::new())
    }

    /// Builds a fetcher on shared per-host state (see [`FetchShared::process`]).
    pub fn with_shared(policy: FetchPolicy, shared: FetchShared) -> Result<Self, FetchError> {
        Self::build(policy, shared, None)
    }

    /// Builds a fetcher whose names are looked up by `lookup` instead of the system resolver
    /// (the address guard still judges every answer); tests use it to point names at
    /// private addresses.
    pub fn with_lookup(
        policy: FetchPolicy,
        shared: FetchShared,
        lookup: Lookup,
    ) -> Result<Self, FetchError> {
        Self::build(policy, shared, Some(lookup))
    }

    fn build(
        policy: FetchPolicy,
        shared: FetchShared,
        lookup: Option<Lookup>,
    ) -> Result<Self, FetchError> {
        let rules = Arc::new(
            HostRules::new(&policy.allowed_hosts, &policy.denied_domains)
                .with_allowed_domains(&policy.allowed_domains),
        );
        let resolver = match lookup {
            Some(lookup) => GuardedResolver::with_lookup(Arc::clone(&rules), lookup),
            None => GuardedResolver::new(Arc::clone(&rules)),
        };
        let client = crate::tls::with_shared_tls(reqwest::Client::builder())
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(resolver)
            .no_proxy()
            .no_gzip()
            .no_brotli()
            .no_deflate()
            .no_zstd()
            .user_agent(policy.user_agent.clone())
            .connect_timeout(policy.timeout.min(Duration::from_secs(10)))
            .timeout(policy.timeout)
            .build()
            .map_err(|e| FetchError::Config {
                message: error_chain(&e),
            })?;
        Ok(Self {
            client,
            agent: robots::agent_token(&policy.user_agent),
            policy,
            rules,
            shared,
        })
    }

    /// The per-host state this fetcher uses.
    pub fn shared(&self) -> &FetchShared {
        &self.shared
    }

    /// The policy this fetcher enforces.
    pub fn policy(&self) -> &FetchPolicy {
        &self.policy
    }

    /// Fetches and decodes a document without extracting it, within the policy's total timeout.
    pub async fn fetch_document(&self, url: &str) -> Result<Document, FetchError> {
        match tokio::time::timeout(self.policy.timeout, self.fetch_inner(url)).await {
            Ok(r) => r,
            Err(_) => Err(FetchError::Timeout {
                url: url.to_string(),
                after: self.policy.timeout,
            }),
        }
    }

    /// Checks scheme and host of one hop before any connection is made.
    fn check_url(&self, asked: &str, url: &Url) -> Result<(), FetchError> {
        let refuse = |reason: String| FetchError::Refused {
            url: asked.to_string(),
            reason,
        };
        if !matches!(url.scheme(), "http" | "https") {
            return Err(refuse(format!(
                "scheme {} is not http or https",
                url.scheme()
            )));
        }
        let host = url
            .host()
            .ok_or_else(|| refuse(format!("{url} has no host")))?;
        guard::check_host(&self.rules, &host).map_err(|r| refuse(format!("{url}: {r}")))
    }

    async fn fetch_inner(&self, asked: &str) -> Result<Document, FetchError> {
        let mut current = Url::parse(asked).map_err(|e| FetchError::Refused {
            url: asked.to_string(),
            reason: format!("invalid URL: {e}"),
        })?;
        let mut redirects: u8 = 0;
        loop {
            self.check_url(asked, &current)?;
            let crawl_delay = self.check_robots(asked, &current).await?;
            let permit = self.admit(&current, crawl_delay).await;
            let resp = self
                .client
                .get(current.clone())
                .header(ACCEPT, "text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,application/pdf;q=0.8,*/*;q=0.1")
                .header(ACCEPT_ENCODING, "gzip, br, deflate")
                .send()
                .await
                .map_err(|e| self.send_error(asked, &current, &e))?;
            let status = resp.status().as_u16();
            if REDIRECTS.contains(&status) {
                let location = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| FetchError::Status {
                        url: current.to_string(),
                        status,
                    })?;
                if redirects >= self.policy.max_redirects {
                    return Err(FetchError::Redirects {
                        url: asked.to_string(),
                        limit: self.policy.max_redirects,
                    });
                }
                redirects += 1;
                current = current.join(location).map_err(|e| FetchError::Refused {
                    url: asked.to_string(),
                    reason: format!("bad redirect target {location:?}: {e}"),
                })?;
                continue;
            }
            if !(200..300).contains(&status) {
                return Err(FetchError::Status {
                    url: current.to_string(),
                    status,
                });
            }
            return self.read_document(current, resp, permit).await;
        }
    }

    /// Waits for a slot of `url`'s host under the policy (a Crawl-delay can raise the delay).
    async fn admit(&self, url: &Url, crawl_delay: Option<Duration>) -> HostPermit {
        let limits = HostLimits {
            concurrency: self.policy.per_host_concurrency,
            delay: self
                .policy
                .politeness_delay
                .max(crawl_delay.unwrap_or_default()),
        };
        self.shared
            .limiter
            .acquire(url.host_str().unwrap_or_default(), limits)
            .await
    }

    /// Refuses `url` when its origin's robots.txt disallows it; returns the Crawl-delay.
    async fn check_robots(&self, asked: &str, url: &Url) -> Result<Option<Duration>, FetchError> {
        if !self.policy.respect_robots {
            return Ok(None);
        }
        let Some(robots_url) = robots::robots_url(url) else {
            return Ok(None);
        };
        let key = format!("{} {robots_url}", self.agent);
        let rules = self
            .shared
            .robots
            .get_or_load(&key, || self.load_robots(asked, robots_url.clone()))
            .await?;
        rules
            .check(url)
            .map_err(|reason| FetchError::RobotsDisallowed {
                url: asked.to_string(),
                robots_url: robots_url.to_string(),
                reason,
            })?;
        Ok(rules.crawl_delay())
    }

    /// Fetches and parses a robots.txt within [`ROBOTS_TIMEOUT`]; only a guard refusal of the
    /// origin itself is an error (so the researcher sees the real reason), anything else is an
    /// answer (see [`robots`] for the status semantics).
    async fn load_robots(&self, asked: &str, robots_url: Url) -> Result<RobotsRules, FetchError> {
        let limit = self.policy.timeout.min(ROBOTS_TIMEOUT);
        match tokio::time::timeout(limit, self.fetch_robots(asked, robots_url)).await {
            Ok(r) => r,
            Err(_) => Ok(RobotsRules::Unreachable {
                reason: format!("no answer within {limit:?}"),
            }),
        }
    }

    async fn fetch_robots(&self, asked: &str, start: Url) -> Result<RobotsRules, FetchError> {
        let mut current = start;
        for hop in 0..=ROBOTS_REDIRECTS {
            // The first hop is the page's own origin, already checked. A redirect to a host the
            // policy refuses is not followed: no rules can be read there, which RFC 9309 treats
            // like a missing file (the page itself is still guarded).
            if hop > 0 && self.check_url(asked, &current).is_err() {
                return Ok(RobotsRules::AllowAll);
            }
            let _permit = self.admit(&current, None).await;
            let resp = match self
                .client
                .get(current.clone())
                .header(ACCEPT, "text/plain,*/*;q=0.1")
                .header(ACCEPT_ENCODING, "gzip, br, deflate")
                .send()
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    return match self.send_error(asked, &current, &e) {
                        refused @ FetchError::Refused { .. } if hop == 0 => Err(refused),
                        FetchError::Refused { .. } => Ok(RobotsRules::AllowAll),
                        other => Ok(RobotsRules::Unreachable {
                            reason: other.to_string(),
                        }),
                    };
                }
            };
            let status = resp.status().as_u16();
            if REDIRECTS.contains(&status) {
                let next = resp
                    .headers()
                    .get(LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|l| current.join(l).ok());
                match next {
                    Some(next) => {
                        current = next;
                        continue;
                    }
                    None => return Ok(RobotsRules::AllowAll),
                }
            }
            return Ok(match status {
                200..=299 => {
                    let encoding = resp
                        .headers()
                        .get(CONTENT_ENCODING)
                        .and_then(|v| v.to_str().ok())
                        .map(|e| e.trim().to_ascii_lowercase())
                        .unwrap_or_default();
                    let caps = BodyCaps {
                        wire: ROBOTS_MAX_BYTES,
                        decoded: ROBOTS_MAX_BYTES,
                        truncate: true,
                    };
                    match self
                        .read_body(current.as_str(), resp, &encoding, caps)
                        .await
                    {
                        Ok((body, _, truncated)) => {
                            RobotsRules::parse(&self.agent, whole_lines(&body, truncated))
                        }
                        Err(e) => RobotsRules::Unreachable {
                            reason: e.to_string(),
                        },
                    }
                }
                // Google reads 429 as a server error, and so does Quarry: the site is busy.
                429 => RobotsRules::Unreachable {
                    reason: "HTTP 429".to_string(),
                },
                400..=499 => RobotsRules::AllowAll,
                _ => RobotsRules::Unreachable {
                    reason: format!("HTTP {status}"),
                },
            });
        }
        // More redirects than RFC 9309 asks to follow: treated as unavailable.
        Ok(RobotsRules::AllowAll)
    }

    /// Maps a send error: guard refusals and timeouts get their own variants.
    fn send_error(&self, asked: &str, current: &Url, e: &reqwest::Error) -> FetchError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(s) = source {
            if let Some(b) = s.downcast_ref::<BlockedAddress>() {
                return FetchError::Refused {
                    url: asked.to_string(),
                    reason: format!("{current}: {b}"),
                };
            }
            source = s.source();
        }
        if e.is_timeout() {
            return FetchError::Timeout {
                url: asked.to_string(),
                after: self.policy.timeout,
            };
        }
        FetchError::Network {
            url: current.to_string(),
            message: error_chain(e),
        }
    }

    /// Checks the content type, reads the body within the caps (holding the host slot) and
    /// decodes it, or extracts its text when it is a PDF.
    async fn read_document(
        &self,
        url: Url,
        resp: reqwest::Response,
        permit: HostPermit,
    ) -> Result<Document, FetchError> {
        let url_s = url.to_string();
        let header = |name| {
            resp.headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
        };
        let ct = header(CONTENT_TYPE).map(charset::parse_content_type);
        let declared = ct.as_ref().map(|c| c.mime.clone()).unwrap_or_default();
        // A missing Content-Type is sniffed from the body below; a declared unreadable one is
        // refused before any of the body is downloaded.
        let kind = if declared.is_empty() {
            None
        } else {
            Some(kind_of(&url, &declared)?)
        };
        let encoding = header(CONTENT_ENCODING)
            .map(|e| e.trim().to_ascii_lowercase())
            .unwrap_or_default();
        if let Some(len) = resp
            .content_length()
            .filter(|len| *len > self.policy.max_bytes)
        {
            return Err(FetchError::TooLarge {
                url: url_s,
                what: format!(
                    "Content-Length {len} is over the {} byte limit",
                    self.policy.max_bytes
                ),
            });
        }
        let charset_param = ct.and_then(|c| c.charset);
        let caps = BodyCaps {
            wire: self.policy.max_bytes,
            decoded: self.policy.max_decompressed_bytes,
            truncate: false,
        };
        let (body, wire_bytes, _) = self.read_body(&url_s, resp, &encoding, caps).await?;
        // The request is over: the next one to this host need not wait for the extraction.
        drop(permit);
        let kind = match kind {
            Some(k) => k,
            None => sniff(&body)
                .or_else(|| has_pdf_path(&url).then_some(DocKind::Pdf))
                .ok_or_else(|| FetchError::Unsupported {
                    url: url_s.clone(),
                    content_type: "no Content-Type and not HTML".to_string(),
                })?,
        };
        if kind == DocKind::Pdf {
            let text =
                pdf_sandbox::extract_pdf(body)
                    .await
                    .map_err(|e| FetchError::Extraction {
                        url: url_s.clone(),
                        message: format!("unreadable PDF: {e}"),
                    })?;
            return Ok(Document {
                final_url: url_s,
                kind,
                mime: "application/pdf".to_string(),
                encoding: "UTF-8",
                text: text.text,
                title: text.title,
                wire_bytes,
            });
        }
        let (text, enc) = charset::decode(&body, charset_param.as_deref(), kind);
        let mime = if declared.is_empty() {
            "text/html".to_string()
        } else {
            declared
        };
        Ok(Document {
            final_url: url_s,
            kind,
            mime,
            encoding: enc.name(),
            text,
            title: None,
            wire_bytes,
        })
    }

    /// Streams the body through the wire counter and the decoder, stopping at either cap;
    /// returns the body, the wire bytes and whether a truncating read stopped at a cap.
    async fn read_body(
        &self,
        url: &str,
        resp: reqwest::Response,
        encoding: &str,
        caps: BodyCaps,
    ) -> Result<(Vec<u8>, u64, bool), FetchError> {
        let max_wire = caps.wire;
        let wire = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&wire);
        let stream = resp.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            let total =
                counter.fetch_add(chunk.len() as u64, Ordering::Relaxed) + chunk.len() as u64;
            if total > max_wire {
                return Err(std::io::Error::other(LimitHit::Wire(max_wire)));
            }
            Ok(chunk)
        });
        let raw = StreamReader::new(stream);
        let decoded: Box<dyn AsyncRead + Send + Unpin> = match encoding {
            "" | "identity" => Box::new(raw),
            "gzip" | "x-gzip" => Box::new(gzip(raw)),
            "deflate" => Box::new(ZlibDecoder::new(raw)),
            "br" => Box::new(BrotliDecoder::new(raw)),
            other => {
                return Err(FetchError::Unsupported {
                    url: url.to_string(),
                    content_type: format!("content-encoding {other}"),
                });
            }
        };
        let cap = caps.decoded;
        let mut body = Vec::new();
        // Read one byte past the cap so that "exactly at the cap" is still accepted.
        let read = decoded
            .take(cap.saturating_add(1))
            .read_to_end(&mut body)
            .await;
        let wire_bytes = wire.load(Ordering::Relaxed);
        if caps.truncate {
            let hit_wire =
                matches!(&read, Err(e) if e.get_ref().is_some_and(|i| i.is::<LimitHit>()));
            if read.is_ok() || hit_wire {
                let truncated = hit_wire || body.len() as u64 > cap;
                body.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
                return Ok((body, wire_bytes, truncated));
            }
        }
        match read {
            Err(e) if e.get_ref().is_some_and(|i| i.is::<LimitHit>()) => {
                Err(FetchError::TooLarge {
                    url: url.to_string(),
                    what: format!("body over the {max_wire} byte wire limit"),
                })
            }
            // The client's own deadline can fire inside the body stream, where it arrives
            // wrapped as a decode error: it is still the policy's timeout.
            Err(e) if timed_out(&e) => Err(FetchError::Timeout {
                url: url.to_string(),
                after: self.policy.timeout,
            }),
            Err(e) => Err(FetchError::Network {
                url: url.to_string(),
                message: format!("reading body: {}", error_chain(&e)),
            }),
            Ok(_) if body.len() as u64 > cap => Err(FetchError::TooLarge {
                url: url.to_string(),
                what: format!(
                    "body over the {cap} byte decompressed limit ({wire_bytes} bytes on the wire so far)"
                ),
            }),
            Ok(_) => Ok((body, wire_bytes, false)),
        }
    }
}

/// A gzip decoder that also reads concatenated members, as browsers do.
fn gzip<R: AsyncBufRead>(raw: R) -> GzipDecoder<R> {
    let mut d = GzipDecoder::new(raw);
    d.multiple_members(true);
    d
}

/// The kind of a declared MIME type; a generic binary type at a `.pdf` path is a PDF.
fn kind_of(url: &Url, mime: &str) -> Result<DocKind, FetchError> {
    charset::doc_kind(mime)
        .or_else(|| (GENERIC_TYPES.contains(&mime) && has_pdf_path(url)).then_some(DocKind::Pdf))
        .ok_or_else(|| FetchError::Unsupported {
            url: url.to_string(),
            content_type: mime.to_string(),
        })
}

/// Whether the URL's path names a `.pdf` file.
fn has_pdf_path(url: &Url) -> bool {
    url.path().to_ascii_lowercase().ends_with(".pdf")
}

/// A truncated robots.txt without its last, possibly cut, line (a cut rule could mean more).
fn whole_lines(body: &[u8], truncated: bool) -> &[u8] {
    if !truncated {
        return body;
    }
    match body.iter().rposition(|b| *b == b'\n') {
        Some(i) => &body[..=i],
        None => &[],
    }
}

/// A PDF's title when its Info dictionary has none: the file name, else the host.
fn file_title(url: &str) -> String {
    let Ok(url) = Url::parse(url) else {
        return url.to_string();
    };
    url.path_segments()
        .and_then(|mut s| s.rfind(|s| !s.is_empty()).map(str::to_string))
        .map(|name| {
            percent_encoding::percent_decode_str(&name)
                .decode_utf8_lossy()
                .into_owned()
        })
        .or_else(|| url.host_str().map(str::to_string))
        .unwrap_or_default()
}

/// Guesses the kind of an unlabelled body: markup means HTML, `%PDF-` a PDF, anything else is
/// refused.
fn sniff(body: &[u8]) -> Option<DocKind> {
    if body.starts_with(b"%PDF-") {
        return Some(DocKind::Pdf);
    }
    let head = &body[..body.len().min(512)];
    let start = head
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(head.len());
    let lower = head[start..].to_ascii_lowercase();
    (lower.starts_with(b"<!doctype html")
        || lower.starts_with(b"<html")
        || lower.starts_with(b"<head")
        || lower.starts_with(b"<body"))
    .then_some(DocKind::Html)
}

/// An error with its sources, joined, so a log line says what actually failed.
/// Whether an error, or any error it wraps, is a timeout (reqwest's or an I/O one).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = current {
        if err
            .downcast_ref::<reqwest::Error>()
            .is_some_and(reqwest::Error::is_timeout)
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return true;
            }
            // An I/O error's `source` skips the error it wraps: look at that one itself.
            if let Some(inner) = io.get_ref()
                && timed_out(inner)
            {
                return true;
            }
        }
        current = err.source();
    }
    false
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// First non-empty line of a text document, without Markdown heading marks, as its title.
fn text_title(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    line.trim_start_matches('#')
        .trim()
        .chars()
        .take(200)
        .collect()
}

#[async_trait]
impl Fetcher for HttpFetcher {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        let doc = self.fetch_document(url).await?;
        let Document {
            final_url,
            kind,
            text,
            title,
            wire_bytes,
            ..
        } = doc;
        let (title, markdown) = match kind {
            DocKind::Text => (text_title(&text), text),
            DocKind::Pdf => (title.unwrap_or_else(|| file_title(&final_url)), text),
            DocKind::Html => {
                // Extraction is CPU-bound (milliseconds to seconds on large pages): keep it off
                // the async workers.
                let base = final_url.clone();
                let e =
                    tokio::task::spawn_blocking(move || extract::extract_markdown(&text, &base))
                        .await
                        .map_err(|e| FetchError::Extraction {
                            url: final_url.clone(),
                            message: e.to_string(),
                        })?;
                (e.title, e.markdown)
            }
        };
        Ok(Page {
            url: url.to_string(),
            final_url,
            title,
            markdown,
            bytes: wire_bytes,
        })
    }
}

#[cfg(test)]
mod tests;
