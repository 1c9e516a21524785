//! Unit tests of `cache`.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn keys_fold_case_and_whitespace_and_separate_chains_and_policies() {
    assert_eq!(
        search_key("searx", "  Rust   ASYNC ", 5),
        search_key("searx", "rust async", 5)
    );
    assert_ne!(search_key("searx", "a", 5), search_key("brave", "a", 5));
    assert_ne!(search_key("searx", "a", 5), search_key("searx", "a", 6));
    assert_ne!(search_key("x", "ab", 1), search_key("xa", "b", 1));
    assert_eq!(
        page_key("p", "https://a.example/x#frag"),
        page_key("p", "https://a.example/x")
    );
    assert_ne!(
        page_key("p1", "https://a.example/x"),
        page_key("p2", "https://a.example/x")
    );
    assert!(search_key("s", "q", 1).starts_with("quarry:v1:search:"));
    assert_eq!(search_key("s", &"q".repeat(10_000), 1).len(), 81);
}

#[tokio::test]
async fn memory_entries_expire_and_the_lru_evicts() {
    let cache = MemoryCache::new(2);
    cache.put("a", b"1", Duration::from_secs(60)).await.unwrap();
    cache
        .put("b", b"2", Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(cache.get("a").await.unwrap(), Some(b"1".to_vec()));
    assert_eq!(cache.get("b").await.unwrap(), None, "expired");
    cache.put("c", b"3", Duration::from_secs(60)).await.unwrap();
    cache.put("d", b"4", Duration::from_secs(60)).await.unwrap();
    assert_eq!(cache.get("a").await.unwrap(), None, "evicted");
    assert_eq!(cache.get("d").await.unwrap(), Some(b"4".to_vec()));
}

struct Counting(AtomicUsize, usize);
#[async_trait]
impl Gatherer for Counting {
    async fn search(&self, q: &str, _l: usize) -> Result<Vec<SearchHit>, SourceError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok((0..self.1)
            .map(|i| SearchHit {
                url: format!("https://r.example/{q}/{i}"),
                title: "t".into(),
                snippet: "s".into(),
                engine: "e".into(),
            })
            .collect())
    }
}

#[derive(Default)]
struct Seen(Mutex<Vec<(String, &'static str, &'static str)>>);
impl CacheObserver for Seen {
    fn on_lookup(&self, l: &Lookup) {
        self.0
            .lock()
            .unwrap()
            .push((l.subject.clone(), l.cache, l.outcome));
    }
}

#[tokio::test]
async fn repeated_searches_are_served_from_the_cache_but_empty_ones_are_not() {
    let cache: Arc<dyn Cache> = Arc::new(MemoryCache::default());
    let inner = Arc::new(Counting(AtomicUsize::new(0), 2));
    let seen = Arc::new(Seen::default());
    let g = CachedGatherer::new(inner.clone(), cache.clone(), "chain", DEFAULT_SEARCH_TTL)
        .with_observer(seen.clone());
    let first = g.search("Rust", 5).await.unwrap();
    let second = g.search("  rust ", 5).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(inner.0.load(Ordering::SeqCst), 1);
    let empty = Arc::new(Counting(AtomicUsize::new(0), 0));
    let g2 = CachedGatherer::new(empty.clone(), cache, "other", DEFAULT_SEARCH_TTL)
        .with_observer(seen.clone());
    g2.search("x", 5).await.unwrap();
    g2.search("x", 5).await.unwrap();
    assert_eq!(empty.0.load(Ordering::SeqCst), 2);
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            ("Rust".to_string(), "miss", "ok"),
            ("  rust ".to_string(), "hit", "ok"),
            ("x".to_string(), "miss", "empty"),
            ("x".to_string(), "miss", "empty"),
        ]
    );
}

struct Pages(AtomicUsize);
#[async_trait]
impl Fetcher for Pages {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title: "T".into(),
            markdown: "body".into(),
            bytes: 4,
        })
    }
}

#[tokio::test]
async fn pages_are_cached_per_fetch_policy() {
    let cache: Arc<dyn Cache> = Arc::new(MemoryCache::default());
    let inner = Arc::new(Pages(AtomicUsize::new(0)));
    let f1 = CachedFetcher::new(inner.clone(), cache.clone(), "policy-a", DEFAULT_PAGE_TTL);
    let f2 = CachedFetcher::new(inner.clone(), cache.clone(), "policy-b", DEFAULT_PAGE_TTL);
    let p = f1.fetch("https://a.example/x").await.unwrap();
    assert_eq!(f1.fetch("https://a.example/x#y").await.unwrap(), p);
    assert_eq!(inner.0.load(Ordering::SeqCst), 1);
    f2.fetch("https://a.example/x").await.unwrap();
    assert_eq!(
        inner.0.load(Ordering::SeqCst),
        2,
        "another policy reads again"
    );
}
