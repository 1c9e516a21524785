//! The operator's HTTP server: `/metrics` (OpenMetrics), `/livez`, `/readyz`, the run event
//! stream ([`run_events`]) and, when configured, extra routes (the web console, which checks its
//! callers' tokens and permissions itself) on one port.
//!
//! Who may read run events: a caller whose bearer token the API server accepts and who may
//! `get` ResearchRuns in the run's namespace ([`stream_auth`]), each holding a bounded number of
//! streams. `quarry logs` reaches the port through the API server's service proxy, which
//! removes `Authorization` after authenticating the caller, so it sends its token in
//! [`stream_auth::TOKEN_HEADER`] as well.

pub mod run_events;
pub mod run_finder;
pub mod stream_auth;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use quarry_engine::telemetry::{Metrics, OPENMETRICS_CONTENT_TYPE};

/// Readiness shared between the controller (which sets it once its caches have synced) and
/// `/readyz`. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// A flag that starts not ready.
    pub fn new() -> Self {
        Self::default()
    }
    /// Marks the operator ready (or not).
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }
    /// True once the operator is ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct ServerState {
    /// The metrics exported on `/metrics`.
    pub metrics: Metrics,
    /// The flag `/readyz` reports.
    pub readiness: Readiness,
    /// The run event stream, when served.
    pub events: Option<run_events::EventsApi>,
}

/// Errors of the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("HTTP server failed: {0}")]
    Serve(#[source] std::io::Error),
}

/// Builds the router with all endpoints.
pub fn router(state: ServerState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route(run_events::EVENTS_ROUTE, get(run_events::run_events))
        .with_state(state)
}

/// Binds `addr` (e.g. `0.0.0.0:8080`; port 0 picks a free port) and returns the listener, so the
/// caller can read the bound port before serving.
pub async fn bind(addr: &str) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: addr.to_string(),
            source,
        })
}

/// Serves the router on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
}

/// Serves the router and `extra` routes (the console) on `listener` until `shutdown` completes.
pub async fn serve_with(
    listener: TcpListener,
    extra: Option<Router>,
    state: ServerState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let mut app = router(state);
    if let Some(extra) = extra {
        app = app.merge(extra);
    }
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(ServerError::Serve)
}

/// The server serving in the background (operator, worker) until [`RunningServer::stop`].
pub struct RunningServer {
    /// The bound address.
    pub addr: std::net::SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(), ServerError>>,
}

/// Binds `addr` and serves `state` in the background.
pub async fn start(addr: &str, state: ServerState) -> Result<RunningServer, ServerError> {
    let listener = bind(addr).await?;
    let bound = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: addr.to_string(),
        source,
    })?;
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(serve(listener, state, async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    Ok(RunningServer {
        addr: bound,
        stop,
        task,
    })
}

impl RunningServer {
    /// Stops serving (open requests finish) and returns how serving ended.
    pub async fn stop(self) -> Result<(), ServerError> {
        let _ = self.stop.send(true);
        match self.task.await {
            Ok(result) => result,
            Err(e) => {
                tracing::warn!(error = %e, "server task ended abnormally");
                Ok(())
            }
        }
    }
}

async fn metrics(State(state): State<ServerState>) -> Response {
    match state.metrics.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE)], body).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        )
            .into_response(),
    }
}

async fn livez() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<ServerState>) -> Response {
    if state.readiness.is_ready() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: controller caches have not synced yet",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests;
