//! Unit tests of `failover`.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scripted backend: answers from `script` in turn (the last answer repeats).
struct Scripted {
    calls: AtomicUsize,
    script: Vec<Result<usize, u16>>,
}

#[async_trait]
impl Gatherer for Scripted {
    async fn search(&self, _q: &str, _l: usize) -> Result<Vec<SearchHit>, SourceError> {
        let i = self.calls.fetch_add(1, Ordering::SeqCst);
        match self.script[i.min(self.script.len() - 1)] {
            Ok(n) => Ok((0..n)
                .map(|k| SearchHit {
                    url: format!("https://x.example/{k}"),
                    title: "t".into(),
                    snippet: String::new(),
                    engine: "e".into(),
                })
                .collect()),
            Err(status) => Err(SourceError::Status { status }),
        }
    }
}

fn scripted(script: Vec<Result<usize, u16>>) -> Arc<Scripted> {
    Arc::new(Scripted {
        calls: AtomicUsize::new(0),
        script,
    })
}

#[derive(Default)]
struct Seen(Mutex<Vec<String>>);
impl FailoverObserver for Seen {
    fn on_call(&self, backend: &str, outcome: &'static str) {
        self.0.lock().unwrap().push(format!("{backend}:{outcome}"));
    }
    fn on_breaker(&self, backend: &str, gauge: i64) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{backend}:breaker={gauge}"));
    }
}

fn backend(name: &str, key: &str, g: Arc<Scripted>) -> Backend {
    Backend {
        name: name.into(),
        breaker_key: key.into(),
        gatherer: g,
    }
}

#[tokio::test]
async fn errors_and_empty_answers_fall_over_in_order() {
    let searx = scripted(vec![Err(502), Ok(0), Ok(2)]);
    let brave = scripted(vec![Ok(3)]);
    let seen = Arc::new(Seen::default());
    let chain = FailoverGatherer::new(vec![
        backend("searxng", "t1-searx", searx.clone()),
        backend("brave", "t1-brave", brave.clone()),
    ])
    .with_observer(seen.clone());
    assert_eq!(
        chain.search("q", 5).await.unwrap().len(),
        3,
        "error → brave"
    );
    assert_eq!(
        chain.search("q", 5).await.unwrap().len(),
        3,
        "empty → brave"
    );
    assert_eq!(chain.search("q", 5).await.unwrap().len(), 2, "searx again");
    assert_eq!(brave.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            "searxng:breaker=0",
            "brave:breaker=0",
            "searxng:error",
            "brave:ok",
            "searxng:empty",
            "brave:ok",
            "searxng:ok"
        ]
    );
}

#[tokio::test]
async fn an_open_breaker_skips_the_backend_without_calling_it() {
    let searx = scripted(vec![Err(500)]);
    let brave = scripted(vec![Ok(1)]);
    let seen = Arc::new(Seen::default());
    let chain = FailoverGatherer::new(vec![
        backend("searxng", "t2-searx", searx.clone()),
        backend("brave", "t2-brave", brave.clone()),
    ])
    .with_observer(seen.clone());
    for _ in 0..5 {
        chain.search("q", 5).await.unwrap();
    }
    // Three failures open the breaker; the last two searches never reach searx.
    assert_eq!(searx.calls.load(Ordering::SeqCst), 3);
    assert_eq!(brave.calls.load(Ordering::SeqCst), 5);
    let seen = seen.0.lock().unwrap().clone();
    assert!(seen.contains(&"searxng:breaker=2".to_string()), "{seen:?}");
    assert_eq!(seen.iter().filter(|s| *s == "searxng:skipped").count(), 2);
    // Another chain over the same endpoint shares the breaker.
    let again = FailoverGatherer::new(vec![backend("searxng", "t2-searx", searx.clone())]);
    assert!(matches!(
        again.search("q", 5).await,
        Err(SourceError::Exhausted { detail }) if detail == "searxng: circuit open"
    ));
}

#[tokio::test]
async fn all_failing_names_every_backend_and_all_empty_is_empty() {
    let chain = FailoverGatherer::new(vec![
        backend("searxng", "t3-searx", scripted(vec![Err(503)])),
        backend("tavily", "t3-tavily", scripted(vec![Err(401)])),
    ]);
    match chain.search("q", 5).await {
        Err(SourceError::Exhausted { detail }) => assert_eq!(
            detail,
            "searxng: search endpoint answered HTTP 503; tavily: search endpoint answered HTTP 401"
        ),
        other => panic!("{other:?}"),
    }
    let chain = FailoverGatherer::new(vec![
        backend("searxng", "t4-searx", scripted(vec![Ok(0)])),
        backend("serper", "t4-serper", scripted(vec![Err(500)])),
    ]);
    assert_eq!(chain.search("q", 5).await.unwrap(), vec![]);
}
