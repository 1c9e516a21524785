//! robots.txt (RFC 9309): what a site allows Quarry, cached per origin with a time to live.
//!
//! Parsing uses `texting_robots`: it parses a file once into the rules of one user agent (so a
//! cached entry answers each URL with a few regex matches), follows Google's reading of the
//! format, and exposes `Crawl-delay`. `robotstxt` (the port of Google's matcher) re-parses the
//! whole file on every check and ignores `Crawl-delay`.
//!
//! Status semantics (RFC 9309 §2.3.1): a 2xx body is parsed; a missing file (404, 410 and the
//! other 4xx) allows everything; a server error (5xx), 429, a network error or a timeout means
//! the site cannot say, which the RFC says to read as "disallow everything". Such an answer is
//! cached only for [`ROBOTS_ERROR_TTL`], so a passing outage does not block a host for long.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use texting_robots::Robot;
use tokio::time::Instant;
use url::Url;

/// Bytes of a robots.txt that are read; the rest is ignored (RFC 9309 asks for at least 500 KiB).
pub const ROBOTS_MAX_BYTES: u64 = 512 * 1024;
/// How long a fetched robots.txt (or its absence) is trusted.
pub const ROBOTS_TTL: Duration = Duration::from_secs(3600);
/// How long "the site could not say" (5xx, network error) blocks a host before asking again.
pub const ROBOTS_ERROR_TTL: Duration = Duration::from_secs(60);
/// Largest `Crawl-delay` honoured; larger values would only make every fetch time out.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(60);
/// Origins remembered before expired ones are dropped.
const MAX_ORIGINS: usize = 4096;

/// What an origin's robots.txt allows one user agent.
#[derive(Debug)]
pub enum RobotsRules {
    /// No robots.txt (404, 410, other 4xx) or an unreadable one: everything may be fetched.
    AllowAll,
    /// The site could not say (5xx, 429, network error, timeout): nothing may be fetched.
    Unreachable {
        /// What went wrong, for the refusal message.
        reason: String,
    },
    /// A parsed robots.txt.
    Parsed {
        /// The rules of the group that applies to the agent.
        robot: Robot,
        /// The `User-agent` group that applies: the agent's own, or `*`.
        group: String,
    },
}

impl RobotsRules {
    /// Parses a robots.txt body for `agent`; a body the parser rejects counts as no robots.txt.
    pub fn parse(agent: &str, body: &[u8]) -> Self {
        // The parser is fuzzed upstream, but a panic here must not take a researcher down.
        match std::panic::catch_unwind(AssertUnwindSafe(|| Robot::new(agent, body))) {
            Ok(Ok(robot)) => Self::Parsed {
                robot,
                group: if names_agent(agent, body) {
                    agent.to_ascii_lowercase()
                } else {
                    "*".to_string()
                },
            },
            Ok(Err(_)) | Err(_) => Self::AllowAll,
        }
    }

    /// Whether `url` may be fetched; the error says which rule refused it.
    pub fn check(&self, url: &Url) -> Result<(), String> {
        match self {
            Self::AllowAll => Ok(()),
            Self::Unreachable { reason } => Err(format!(
                "robots.txt could not be read ({reason}); RFC 9309 says to fetch nothing until \
                 it can, asked again after {}s",
                ROBOTS_ERROR_TTL.as_secs()
            )),
            Self::Parsed { robot, group } => {
                if robot.allowed(url.as_str()) {
                    Ok(())
                } else {
                    let mut path = url.path().to_string();
                    if let Some(q) = url.query() {
                        path.push('?');
                        path.push_str(q);
                    }
                    Err(format!(
                        "a Disallow rule of the \"User-agent: {group}\" group matches {path}"
                    ))
                }
            }
        }
    }

    /// The `Crawl-delay` of the agent's group, capped at [`MAX_CRAWL_DELAY`].
    pub fn crawl_delay(&self) -> Option<Duration> {
        match self {
            Self::Parsed { robot, .. } => robot
                .delay
                .filter(|d| d.is_finite() && *d > 0.0)
                .map(|d| Duration::from_secs_f64(f64::from(d)).min(MAX_CRAWL_DELAY)),
            _ => None,
        }
    }

    /// How long this answer is cached.
    pub fn ttl(&self) -> Duration {
        match self {
            Self::Unreachable { .. } => ROBOTS_ERROR_TTL,
            _ => ROBOTS_TTL,
        }
    }
}

/// Whether a `User-agent` line names `agent` itself (to say which group refused a URL).
fn names_agent(agent: &str, body: &[u8]) -> bool {
    String::from_utf8_lossy(body).lines().any(|line| {
        let line = line.split('#').next().unwrap_or_default();
        line.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("user-agent") && v.trim().eq_ignore_ascii_case(agent)
        })
    })
}

/// The user-agent token matched in robots.txt: the product name of a User-Agent header,
/// lower-case (`Quarry/0.1.0 (research agent)` gives `quarry`).
pub fn agent_token(user_agent: &str) -> String {
    user_agent
        .split(|c: char| c == '/' || c.is_whitespace())
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// The robots.txt URL of `url`'s origin.
pub fn robots_url(url: &Url) -> Option<Url> {
    let mut r = url.join("/robots.txt").ok()?;
    let _ = r.set_username("");
    let _ = r.set_password(None);
    Some(r)
}

/// A robots.txt answer and when it stops being trusted.
#[derive(Debug, Clone)]
struct Cached {
    rules: Arc<RobotsRules>,
    expires: Instant,
}

/// One origin's cache slot; its async lock makes concurrent first fetches load once.
type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// robots.txt answers per origin (and agent), each fetched once per time to live.
#[derive(Debug, Default)]
pub struct RobotsCache {
    slots: Mutex<HashMap<String, Slot>>,
}

impl RobotsCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn slot(&self, key: &str) -> Slot {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.len() >= MAX_ORIGINS {
            let now = Instant::now();
            // Drop expired and idle entries; a slot someone holds or loads is kept.
            slots.retain(|_, s| match s.try_lock() {
                Ok(c) => c.as_ref().is_some_and(|c| c.expires > now),
                Err(_) => true,
            });
        }
        Arc::clone(slots.entry(key.to_string()).or_default())
    }

    /// The cached answer for `key`, or the result of `load` when there is none or it expired.
    ///
    /// Callers asking for one key at the same time wait for a single load. A loader error is
    /// returned and not cached.
    pub async fn get_or_load<F, Fut, E>(&self, key: &str, load: F) -> Result<Arc<RobotsRules>, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<RobotsRules, E>>,
    {
        let slot = self.slot(key);
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.expires > Instant::now()) {
            return Ok(Arc::clone(&c.rules));
        }
        let rules = Arc::new(load().await?);
        *cached = Some(Cached {
            rules: Arc::clone(&rules),
            expires: Instant::now() + rules.ttl(),
        });
        Ok(rules)
    }
}

#[cfg(test)]
mod tests;
