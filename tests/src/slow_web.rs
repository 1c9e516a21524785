//! A fake searx JSON endpoint and a documentation-like page server in one, each answering after a
//! fixed delay: the network a benchmark controls exactly.
//!
//! `GET /search?q=<query>&format=json` answers after `search_delay` with ten results for the query,
//! all pointing at this server's own pages; `GET /page/<slug>.html` answers after `fetch_delay`
//! with a page of a few KiB that repeats the words of its slug (so the engine's relevance scoring
//! and extraction have real work). `/robots.txt` answers at once and allows everything.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::serve::ListenerExt;
use serde_json::json;

/// Results one search answers.
pub const RESULTS_PER_SEARCH: usize = 10;

struct Shared {
    search_delay: Duration,
    fetch_delay: Duration,
    base: String,
    searches: AtomicU64,
    fetches: AtomicU64,
}

/// A running server; stops when dropped.
pub struct SlowWeb {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SlowWeb {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SlowWeb {
    /// Binds 127.0.0.1:0; searches answer after `search_delay`, pages after `fetch_delay`.
    pub async fn start(search_delay: Duration, fetch_delay: Duration) -> std::io::Result<SlowWeb> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            search_delay,
            fetch_delay,
            base: format!("http://{addr}"),
            searches: AtomicU64::new(0),
            fetches: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/search", get(search))
            .route("/page/{file}", get(page))
            .route("/robots.txt", get(robots))
            .with_state(shared.clone());
        // TCP_NODELAY, as production servers set it: without it, a response written in pieces
        // waits for the client's delayed ACK (40 ms on Linux) and the delays are no longer exact.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("slow web server stopped: {e}");
            }
        });
        Ok(SlowWeb { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>`: the searx base URL and the pages' host.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// URL of result `index` (0-based) of a search for `query`.
    pub fn result_url(&self, query: &str, index: usize) -> String {
        result_url(&self.shared.base, query, index)
    }

    /// Searches answered so far.
    pub fn searches(&self) -> u64 {
        self.shared.searches.load(Ordering::Relaxed)
    }

    /// Pages served so far.
    pub fn fetches(&self) -> u64 {
        self.shared.fetches.load(Ordering::Relaxed)
    }
}

fn slug(query: &str) -> String {
    let words: Vec<String> = query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.join("-")
}

fn result_url(base: &str, query: &str, index: usize) -> String {
    format!("{base}/page/{}-{index}.html", slug(query))
}

#[derive(serde::Deserialize)]
struct SearchParams {
    #[serde(default)]
    q: String,
}

async fn search(State(shared): State<Arc<Shared>>, Query(p): Query<SearchParams>) -> Response {
    tokio::time::sleep(shared.search_delay).await;
    shared.searches.fetch_add(1, Ordering::Relaxed);
    let results: Vec<serde_json::Value> = (0..RESULTS_PER_SEARCH)
        .map(|i| {
            json!({
                "url": result_url(&shared.base, &p.q, i),
                "title": format!("{} reference, part {}", p.q, i + 1),
                "content": format!("Documentation of {}: how it works, its options and examples (part {}).", p.q, i + 1),
                "engine": "docs",
                "engines": ["docs"],
                "score": 1.0 / (i as f64 + 1.0),
            })
        })
        .collect();
    axum::Json(json!({
        "query": p.q,
        "number_of_results": results.len(),
        "results": results,
        "unresponsive_engines": [],
    }))
    .into_response()
}

async fn page(State(shared): State<Arc<Shared>>, Path(file): Path<String>) -> Response {
    tokio::time::sleep(shared.fetch_delay).await;
    shared.fetches.fetch_add(1, Ordering::Relaxed);
    let Some(stem) = file.strip_suffix(".html") else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let topic = stem.replace('-', " ");
    let mut body = String::new();
    for i in 1..=12 {
        body.push_str(&format!(
            "<p>Paragraph {i} about {topic}. The {topic} module reads its input, validates every \
             field and returns a structured value; errors carry the position of the problem so the \
             caller can report it. Section {i} lists the options that change this behaviour.</p>\n"
        ));
    }
    let html = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{topic} — documentation</title></head>\
         <body><nav><a href=\"/\">Home</a> | <a href=\"/index.html\">Index</a></nav>\
         <main><article><h1>{topic}</h1>\n{body}</article></main>\
         <footer>Generated for the Quarry benchmarks.</footer></body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

async fn robots() -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain")],
        "User-agent: *\nAllow: /\n",
    )
        .into_response()
}
