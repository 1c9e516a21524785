//! Serves a documentation tree (normally `/usr/share/doc`) read-only over HTTP on 127.0.0.1, so
//! the URLs the test searx instance returns can really be fetched.
//!
//! tower-http's `ServeDir` does the file serving: only GET and HEAD, content types from the file
//! extension, `index.html` for directories, and request paths containing `..` (also
//! percent-encoded) rejected with 404, so nothing outside the root is reachable by URL. Symlinks
//! inside the tree are followed, as Debian's doc packages use them for shared assets
//! (`python3.11-doc/html -> ../python3.11/html`, `_static/jquery.js -> /usr/share/javascript/...`).
//! A documentation tree outside the root ([`crate::doc_trees`]) is mounted at its absolute path
//! without the leading `/`, the URL path its index entries carry.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower_http::services::ServeDir;

pub use crate::doc_trees::DEFAULT_DOC_ROOT;
use crate::doc_trees::DocTrees;

/// Errors starting the docs server.
#[derive(Debug, thiserror::Error)]
pub enum DocsServerError {
    /// The root to serve is missing or not a directory.
    #[error("docs root {path} is not a directory")]
    NoRoot { path: PathBuf },
    /// A documentation tree outside the root is missing or not a directory.
    #[error("documentation tree {path} is not a directory")]
    NoTree { path: PathBuf },
    /// Binding 127.0.0.1:0 failed.
    #[error("cannot bind 127.0.0.1:0 for the docs server: {0}")]
    Bind(#[source] std::io::Error),
}

/// A running docs server; it stops when dropped.
#[derive(Debug)]
pub struct DocsServer {
    addr: SocketAddr,
    root: PathBuf,
    /// Every request as `METHOD path?query`, in arrival order (the access log).
    log: Arc<Mutex<Vec<String>>>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl DocsServer {
    /// Starts serving `root` on 127.0.0.1 on a free port. Must be called inside a tokio runtime.
    pub async fn start(root: impl AsRef<Path>) -> Result<Self, DocsServerError> {
        Self::start_with_mounts(root.as_ref(), &[]).await
    }

    /// Serves the doc root of `trees`, and each of its trees outside that root at the tree's URL
    /// path.
    pub async fn start_with_trees(trees: &DocTrees) -> Result<Self, DocsServerError> {
        let mounts: Vec<(String, PathBuf)> = trees
            .trees()
            .iter()
            .filter(|tree| !tree.is_under_root())
            .map(|tree| (tree.url_path().to_string(), tree.dir().to_path_buf()))
            .collect();
        Self::start_with_mounts(trees.root(), &mounts).await
    }

    async fn start_with_mounts(
        root: &Path,
        mounts: &[(String, PathBuf)],
    ) -> Result<Self, DocsServerError> {
        let root = root.to_path_buf();
        if !root.is_dir() {
            return Err(DocsServerError::NoRoot { path: root });
        }
        let mut app = Router::new();
        for (url_path, dir) in mounts {
            if !dir.is_dir() {
                return Err(DocsServerError::NoTree { path: dir.clone() });
            }
            app = app.nest_service(&format!("/{url_path}"), ServeDir::new(dir));
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(DocsServerError::Bind)?;
        let addr = listener.local_addr().map_err(DocsServerError::Bind)?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let recorder = log.clone();
        let app = app
            .fallback_service(ServeDir::new(&root))
            .layer(middleware::from_fn(move |req: Request, next: Next| {
                let recorder = recorder.clone();
                async move {
                    let line = format!("{} {}", req.method(), req.uri());
                    recorder
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(line);
                    let response: Response = next.run(req).await;
                    response
                }
            }));
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async move {
                // Either an explicit stop or the handle being dropped ends the server.
                let _ = stopped.await;
            });
            if let Err(e) = server.await {
                eprintln!("docs server on {addr} stopped with an error: {e}");
            }
        });
        Ok(Self {
            addr,
            root,
            log,
            shutdown: Some(shutdown),
            task,
        })
    }

    /// `http://127.0.0.1:<port>` (no trailing slash); a file `<root>/a/b.html` is at `<base>/a/b.html`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The directory being served.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The access log: every request as `METHOD /path?query`, in arrival order.
    pub fn access_log(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for DocsServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // Open keep-alive connections would hold a graceful shutdown open; tests want it gone.
        self.task.abort();
    }
}

#[cfg(test)]
mod tests;
