//! A stand-in Kubernetes API server on 127.0.0.1 for CLI tests: serves the objects a test puts
//! in it by their API path (404 with a `Status` otherwise), proxies
//! `/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/...` to an upstream the test names
//! (streaming the answer, and dropping `Authorization` as the real API server does), records
//! every request, and writes a kubeconfig that points at it over plain HTTP.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde_json::{Value, json};

#[derive(Default)]
struct Shared {
    objects: Mutex<HashMap<String, Value>>,
    /// `(proxy path prefix, upstream base URL)`.
    proxies: Mutex<Vec<(String, String)>>,
    requests: Mutex<Vec<String>>,
}

/// A running fake API server; stops when dropped.
pub struct FakeApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApi {
    /// Binds 127.0.0.1:0 and serves.
    pub async fn start() -> std::io::Result<FakeApi> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("fake API server stopped: {e}");
            }
        });
        Ok(FakeApi { addr, shared, task })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves `object` at its API path (`/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>`
    /// or `/api/v1/...`).
    pub fn put(&self, path: &str, object: Value) {
        if let Ok(mut objects) = self.shared.objects.lock() {
            objects.insert(path.to_string(), object);
        }
    }

    /// Proxies the Service `namespace/name` (port `port`) to `upstream` (a base URL).
    pub fn proxy_service(&self, namespace: &str, name: &str, port: &str, upstream: &str) {
        let prefix = format!("/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy");
        if let Ok(mut proxies) = self.shared.proxies.lock() {
            proxies.push((prefix, upstream.trim_end_matches('/').to_string()));
        }
    }

    /// Every request so far as `METHOD path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// A kubeconfig whose current context talks to this server with a bearer token, in
    /// `namespace`.
    pub fn kubeconfig(&self, namespace: &str) -> String {
        format!(
            r#"apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: {}
users:
- name: tester
  user:
    token: fake-token
contexts:
- name: fake
  context:
    cluster: fake
    user: tester
    namespace: {namespace}
current-context: fake
"#,
            self.base_url()
        )
    }

    /// Writes [`FakeApi::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path, namespace: &str) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig(namespace))
    }
}

fn not_found(path: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": format!("the server could not find the requested resource ({path})"),
            "reason": "NotFound",
            "code": 404,
        })),
    )
        .into_response()
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.to_string());
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(format!("{} {path_and_query}", request.method()));
    }
    let proxy = shared.proxies.lock().ok().and_then(|proxies| {
        proxies
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_str()))
            .map(|(prefix, upstream)| format!("{upstream}{}", &path_and_query[prefix.len()..]))
    });
    if let Some(target) = proxy {
        return forward(&target, request.headers()).await;
    }
    let object = shared
        .objects
        .lock()
        .ok()
        .and_then(|objects| objects.get(&path).cloned());
    match object {
        Some(object) => axum::Json(object).into_response(),
        None => not_found(&path),
    }
}

/// Forwards a GET to `target`, passing the headers an event stream needs (never
/// `Authorization`: the API server keeps the caller's credentials to itself).
async fn forward(target: &str, headers: &HeaderMap) -> Response {
    let client = reqwest::Client::new();
    let mut request = client.get(target);
    for name in [header::ACCEPT.as_str(), "last-event-id"] {
        if let Some(value) = headers.get(name).and_then(|v| v.to_str().ok()) {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/octet-stream")
                .to_string();
            let body = Body::from_stream(response.bytes_stream().map_err(std::io::Error::other));
            Response::builder()
                .status(status)
                .header(header::CONTENT_TYPE, content_type)
                .body(body)
                .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
        }
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("error trying to reach service: {e}"),
        )
            .into_response(),
    }
}
