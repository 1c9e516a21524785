//! The HTTP fetcher: address guard, manual redirects, byte/decompression/time limits,
//! content-type and charset handling, then extraction.
//!
//! Decompression is done here rather than by reqwest so that both limits are exact: the wire
//! counter sees the compressed bytes as they arrive and the decompressed counter sees what
//! the decoder produces, and each stops the transfer as soon as it passes its cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
use super::guard::{self, BlockedAddress, GuardedResolver, HostRules};
use super::{FetchError, Fetcher, Page};

/// What may be fetched and how much of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Hosts or IP literals exempt from the address guard (tests allow "127.0.0.1").
    pub allowed_hosts: Vec<String>,
    /// Domains refused together with their subdomains.
    pub denied_domains: Vec<String>,
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
            denied_domains: Vec::new(),
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
    /// The decoded body.
    pub text: String,
    /// Body bytes received on the wire.
    pub wire_bytes: u64,
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
}

/// Response codes followed as redirects.
const REDIRECTS: [u16; 5] = [301, 302, 303, 307, 308];

impl HttpFetcher {
    /// Builds a fetcher; fails only if the HTTP client cannot be constructed.
    pub fn new(policy: FetchPolicy) -> Result<Self, FetchError> {
        let rules = Arc::new(HostRules::new(
            &policy.allowed_hosts,
            &policy.denied_domains,
        ));
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(GuardedResolver::new(Arc::clone(&rules)))
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
            policy,
            rules,
        })
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
            let resp = self
                .client
                .get(current.clone())
                .header(ACCEPT, "text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,*/*;q=0.1")
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
            return self.read_document(current, resp).await;
        }
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

    /// Checks the content type, reads the body within the caps and decodes it.
    async fn read_document(
        &self,
        url: Url,
        resp: reqwest::Response,
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
            Some(self.kind_of(&url_s, &declared)?)
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
        let (body, wire_bytes) = self.read_body(&url_s, resp, &encoding).await?;
        let kind = match kind {
            Some(k) => k,
            None => sniff(&body).ok_or_else(|| FetchError::Unsupported {
                url: url_s.clone(),
                content_type: "no Content-Type and not HTML".to_string(),
            })?,
        };
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
            wire_bytes,
        })
    }

    fn kind_of(&self, url: &str, mime: &str) -> Result<DocKind, FetchError> {
        charset::doc_kind(mime).ok_or_else(|| FetchError::Unsupported {
            url: url.to_string(),
            content_type: mime.to_string(),
        })
    }

    /// Streams the body through the wire counter and the decoder, stopping at either cap.
    async fn read_body(
        &self,
        url: &str,
        resp: reqwest::Response,
        encoding: &str,
    ) -> Result<(Vec<u8>, u64), FetchError> {
        let max_wire = self.policy.max_bytes;
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
        let cap = self.policy.max_decompressed_bytes;
        let mut body = Vec::new();
        // Read one byte past the cap so that "exactly at the cap" is still accepted.
        let read = decoded
            .take(cap.saturating_add(1))
            .read_to_end(&mut body)
            .await;
        let wire_bytes = wire.load(Ordering::Relaxed);
        match read {
            Err(e) if e.get_ref().is_some_and(|i| i.is::<LimitHit>()) => {
                Err(FetchError::TooLarge {
                    url: url.to_string(),
                    what: format!("body over the {max_wire} byte wire limit"),
                })
            }
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
            Ok(_) => Ok((body, wire_bytes)),
        }
    }
}

/// A gzip decoder that also reads concatenated members, as browsers do.
fn gzip<R: AsyncBufRead>(raw: R) -> GzipDecoder<R> {
    let mut d = GzipDecoder::new(raw);
    d.multiple_members(true);
    d
}

/// Guesses the kind of an unlabelled body: markup means HTML, anything else is refused.
fn sniff(body: &[u8]) -> Option<DocKind> {
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
            wire_bytes,
            ..
        } = doc;
        let (title, markdown) = match kind {
            DocKind::Text => (text_title(&text), text),
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
