//! The URL pool sibling researchers share, so no page is read twice in one run.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// A URL pool kept outside this process, shared by the researchers of one run on every worker
/// (Redis in scale-out mode, `quarry_operator::queue`).
#[async_trait::async_trait]
pub trait SharedUrls: Send + Sync {
    /// Claims `url` for this researcher's task; false when another task of the run has it.
    async fn claim(&self, url: &str) -> Result<bool, String>;
    /// Every URL claimed in the run.
    async fn taken(&self) -> Result<BTreeSet<String>, String>;
    /// Gives back `url` when this researcher's task holds it, so another task may read it.
    async fn release(&self, url: &str) -> Result<(), String>;
}

/// The per-run pool of URLs already read, shared by sibling researchers.
#[derive(Default)]
pub struct UrlPool {
    pub(super) urls: Mutex<BTreeSet<String>>,
    /// The run's pool on other processes; the local set then only backs it up.
    pub(super) shared: Option<Arc<dyn SharedUrls>>,
}

impl std::fmt::Debug for UrlPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlPool")
            .field("shared", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl UrlPool {
    /// A pool pre-filled with URLs read before (after a restart).
    pub fn with(urls: impl IntoIterator<Item = String>) -> Self {
        Self {
            urls: Mutex::new(urls.into_iter().collect()),
            shared: None,
        }
    }
    /// A pool kept in `shared` (the run's researchers on other workers claim from it too).
    pub fn shared(shared: Arc<dyn SharedUrls>) -> Self {
        Self {
            urls: Mutex::default(),
            shared: Some(shared),
        }
    }
    pub(super) fn local(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.urls.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Claims a URL for reading; false when a sibling already did.
    pub async fn claim(&self, url: &str) -> bool {
        if let Some(shared) = &self.shared {
            // The shared pool lets a task re-claim its own URLs (see `queue::pool`); this
            // researcher still reads each URL once.
            if self.local().contains(url) {
                return false;
            }
            match shared.claim(url).await {
                Ok(claimed) => {
                    if claimed {
                        self.local().insert(url.to_string());
                    }
                    return claimed;
                }
                // The shared pool saves duplicate reads; without it the research still goes on.
                Err(e) => {
                    tracing::warn!(error = %e, "shared URL pool unavailable; using the local one")
                }
            }
        }
        self.local().insert(url.to_string())
    }
    /// Gives back a URL this researcher claimed and found nothing on for its task: a sibling
    /// whose task it bears on may read it. The 0.5B deep run on "How do Python's json.loads()
    /// and PostgreSQL's jsonb type each handle duplicate keys?" had the jsonb researcher claim
    /// Python's `json.html`, leave it out as off its task, and the json.loads researcher,
    /// refused it, read release notes and answered nothing.
    pub async fn release(&self, url: &str) {
        self.local().remove(url);
        if let Some(shared) = &self.shared
            && let Err(e) = shared.release(url).await
        {
            tracing::warn!(error = %e, "shared URL pool unavailable; the URL stays claimed");
        }
    }
    /// Every claimed URL.
    pub async fn taken(&self) -> BTreeSet<String> {
        let mut all = self.local().clone();
        if let Some(shared) = &self.shared {
            match shared.taken().await {
                Ok(urls) => all.extend(urls),
                Err(e) => {
                    tracing::warn!(error = %e, "shared URL pool unavailable; using the local one")
                }
            }
        }
        all
    }
    /// True when the URL was already claimed.
    pub async fn contains(&self, url: &str) -> bool {
        self.taken().await.contains(url)
    }
    /// Up to `limit` claimed URLs, in order.
    pub async fn snapshot(&self, limit: usize) -> Vec<String> {
        self.taken().await.into_iter().take(limit).collect()
    }
}
