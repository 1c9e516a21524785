//! Caching of search answers and page extracts: in Redis when configured (shared by
//! operator replicas and runs), in an in-process LRU otherwise.
//!
//! Keys are normalised so that the same search or page from any run maps to one entry; they
//! include what changes the answer (the search backends, the fetch policy) so a profile never
//! receives content its own policy would have refused. Every lookup is reported to a
//! [`CacheObserver`] (the run's event log and metrics), and a hit costs no request.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::scrape::{FetchError, Fetcher, Page};
use crate::sources::{Gatherer, SearchHit, SourceError};

/// Default time a search answer stays cached.
pub const DEFAULT_SEARCH_TTL: Duration = Duration::from_secs(60 * 60);
/// Default time a page extract stays cached.
pub const DEFAULT_PAGE_TTL: Duration = Duration::from_secs(6 * 60 * 60);
/// Largest value cached; bigger extracts are served but not stored.
pub const MAX_VALUE_BYTES: usize = 2 * 1024 * 1024;
/// Entries the in-memory cache keeps by default.
pub const DEFAULT_MEMORY_ENTRIES: usize = 4096;

/// Errors of a cache backend; callers treat them as misses.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The backend could not be reached or answered with an error.
    #[error("cache backend {backend} failed: {message}")]
    Backend {
        /// `redis` or `memory`.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
}

/// A byte cache with per-entry time to live.
#[async_trait]
pub trait Cache: Send + Sync {
    /// The value stored under `key`, if present and not expired.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CacheError>;
    /// Stores `value` under `key` for `ttl`.
    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), CacheError>;
    /// `memory` or `redis`, for logs and metrics.
    fn backend(&self) -> &'static str;
}

/// An entry of the in-memory cache: when it expires, and the value.
type MemoryEntry = (Instant, Arc<Vec<u8>>);

/// In-process LRU cache with expiry, for a single operator replica or a standalone run.
pub struct MemoryCache {
    entries: Mutex<lru::LruCache<String, MemoryEntry>>,
}

impl MemoryCache {
    /// A cache of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            entries: Mutex::new(lru::LruCache::new(capacity)),
        }
    }
}

impl Default for MemoryCache {
    fn default() -> Self {
        Self::new(DEFAULT_MEMORY_ENTRIES)
    }
}

#[async_trait]
impl Cache for MemoryCache {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, CacheError> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((expires, value)) if *expires > Instant::now() => Ok(Some(value.to_vec())),
            Some(_) => {
                entries.pop(key);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn put(&self, key: &str, value: &[u8], ttl: Duration) -> Result<(), CacheError> {
        let expires = Instant::now() + ttl;
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .put(key.to_string(), (expires, Arc::new(value.to_vec())));
        Ok(())
    }

    fn backend(&self) -> &'static str {
        "memory"
    }
}

/// The key of a search: the backend chain, the normalised query (case and whitespace folded)
/// and the result limit.
pub fn search_key(chain: &str, query: &str, limit: usize) -> String {
    let query = query
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    hashed_key("search", &[chain, &query, &limit.to_string()])
}

/// The key of a page: its URL without fragment, and the fetch policy it was read under.
pub fn page_key(policy: &str, url: &str) -> String {
    let url = match url::Url::parse(url.trim()) {
        Ok(mut u) => {
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => url.trim().to_string(),
    };
    hashed_key("page", &[policy, &url])
}

/// `quarry:v1:<kind>:<sha256 of the parts>`: fixed length whatever the input.
fn hashed_key(kind: &str, parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0u8]);
    }
    format!("quarry:v1:{kind}:{}", hex::encode(h.finalize()))
}

/// One cache lookup, as reported to a [`CacheObserver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// `search` or `page`.
    pub kind: &'static str,
    /// The query or URL.
    pub subject: String,
    /// `hit`, `miss` or `error` (a backend error, served as a miss).
    pub cache: &'static str,
    /// Outcome of the search or fetch: `ok`, `empty` or `error`.
    pub outcome: &'static str,
    /// Time the lookup (and on a miss, the request) took.
    pub duration: Duration,
}

/// Told about every lookup (event log, metrics).
pub trait CacheObserver: Send + Sync {
    /// A lookup finished.
    fn on_lookup(&self, lookup: &Lookup);
}

/// What both cached ports share: the cache, the entries' lifetime and who hears of lookups.
struct Layer {
    cache: Arc<dyn Cache>,
    ttl: Duration,
    observer: Option<Arc<dyn CacheObserver>>,
}

impl Layer {
    /// Serves `key` from the cache, or runs `fetch` and stores its value when `keep` says so;
    /// reports the lookup as `kind` of `subject`.
    async fn get_or_fetch<T, E, F>(
        &self,
        (kind, subject): (&'static str, &str),
        key: &str,
        keep: impl Fn(&T) -> bool,
        outcome: impl Fn(&Result<T, E>) -> &'static str,
        fetch: F,
    ) -> Result<T, E>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: std::future::Future<Output = Result<T, E>>,
    {
        let started = Instant::now();
        let (cached, cache) = lookup::<T>(self.cache.as_ref(), key).await;
        let result = match cached {
            Some(value) => Ok(value),
            None => {
                let result = fetch.await;
                if let Ok(value) = &result
                    && keep(value)
                {
                    store(self.cache.as_ref(), key, value, self.ttl).await;
                }
                result
            }
        };
        if let Some(o) = &self.observer {
            o.on_lookup(&Lookup {
                kind,
                subject: subject.to_string(),
                cache,
                outcome: outcome(&result),
                duration: started.elapsed(),
            });
        }
        result
    }
}

/// A `Gatherer` that answers repeated searches from the cache.
pub struct CachedGatherer {
    inner: Arc<dyn Gatherer>,
    chain: String,
    layer: Layer,
}

impl CachedGatherer {
    /// Caches `inner`'s answers under keys that include `chain` (the backends' identity).
    pub fn new(
        inner: Arc<dyn Gatherer>,
        cache: Arc<dyn Cache>,
        chain: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self {
            inner,
            chain: chain.into(),
            layer: Layer {
                cache,
                ttl,
                observer: None,
            },
        }
    }

    /// Reports every lookup to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn CacheObserver>) -> Self {
        self.layer.observer = Some(observer);
        self
    }
}

#[async_trait]
impl Gatherer for CachedGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        self.layer
            .get_or_fetch(
                ("search", query),
                &search_key(&self.chain, query, limit),
                // Empty answers are not kept: they are often a transient block, not a fact.
                |hits: &Vec<SearchHit>| !hits.is_empty(),
                |result| match result {
                    Ok(h) if h.is_empty() => "empty",
                    Ok(_) => "ok",
                    Err(_) => "error",
                },
                self.inner.search(query, limit),
            )
            .await
    }
}

/// A `Fetcher` that serves pages read before (under the same fetch policy) from the cache.
pub struct CachedFetcher {
    inner: Arc<dyn Fetcher>,
    policy: String,
    layer: Layer,
}

impl CachedFetcher {
    /// Caches `inner`'s pages under keys that include `policy` (the fetch policy's identity).
    pub fn new(
        inner: Arc<dyn Fetcher>,
        cache: Arc<dyn Cache>,
        policy: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        Self {
            inner,
            policy: policy.into(),
            layer: Layer {
                cache,
                ttl,
                observer: None,
            },
        }
    }

    /// Reports every lookup to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn CacheObserver>) -> Self {
        self.layer.observer = Some(observer);
        self
    }
}

#[async_trait]
impl Fetcher for CachedFetcher {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        self.layer
            .get_or_fetch(
                ("page", url),
                &page_key(&self.policy, url),
                |_: &Page| true,
                |result| if result.is_ok() { "ok" } else { "error" },
                self.inner.fetch(url),
            )
            .await
    }
}

/// Reads and decodes an entry: (value, `hit`/`miss`/`error`). An undecodable entry (written by
/// another version) is a miss.
async fn lookup<T: serde::de::DeserializeOwned>(
    cache: &dyn Cache,
    key: &str,
) -> (Option<T>, &'static str) {
    match cache.get(key).await {
        Ok(Some(bytes)) => match serde_json::from_slice(&bytes) {
            Ok(value) => (Some(value), "hit"),
            Err(_) => (None, "miss"),
        },
        Ok(None) => (None, "miss"),
        Err(e) => {
            tracing::debug!(error = %e, "cache read failed; treated as a miss");
            (None, "error")
        }
    }
}

async fn store<T: serde::Serialize>(cache: &dyn Cache, key: &str, value: &T, ttl: Duration) {
    match serde_json::to_vec(value) {
        Ok(bytes) if bytes.len() <= MAX_VALUE_BYTES => {
            if let Err(e) = cache.put(key, &bytes, ttl).await {
                tracing::debug!(error = %e, "cache write failed");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(error = %e, "cache value not serialisable"),
    }
}

#[cfg(test)]
mod tests;
