//! A small fake Kubernetes API server over HTTP on 127.0.0.1, for driving the real `quarry` CLI
//! (and `quarry mcp`) as a process through a kubeconfig: the one fake API server (tests that need
//! no exact requests or scripted watches use the real one, `control_plane`). It serves the ResearchRun, ResearchProfile and ConfigMap paths the
//! CLI uses (create with `generateName`, get, list, JSON merge patch, watch), records every
//! request exactly, and writes a kubeconfig that points at it.
//!
//! It also proxies `/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/...` to an upstream the
//! test names (streaming the answer, and dropping `Authorization` as the real API server does);
//! a Service it was not told about is a 404 `Status`, as on a cluster without it.
//!
//! Watches play a script: the statuses a test queued for a run are applied one after the other
//! (each a `MODIFIED` event, stored too, so a later GET sees the last one); then the stream stays
//! open, as a real watch does, until the client goes away.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Group/version of Quarry's resources.
pub const QUARRY_GV: &str = "quarry.dev/v1alpha1";
/// How long a scripted watch waits before each event by default.
pub const DEFAULT_WATCH_INTERVAL: Duration = Duration::from_millis(150);

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// HTTP method.
    pub method: String,
    /// Path without the query.
    pub path: String,
    /// Raw query string (empty when none).
    pub query: String,
    /// `Content-Type`, if sent.
    pub content_type: Option<String>,
    /// JSON body (`Null` when empty).
    pub body: Value,
}

impl Recorded {
    /// `METHOD path?query`, the way tests compare request sequences.
    pub fn line(&self) -> String {
        if self.query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, self.query)
        }
    }
}

/// (group/version, plural, namespace, name)
type Key = (String, String, String, String);

struct Inner {
    objects: BTreeMap<Key, Value>,
    requests: Vec<Recorded>,
    resource_version: u64,
    generated: u64,
    scripts: BTreeMap<String, Vec<Value>>,
    crds_installed: bool,
    watch_interval: Duration,
    /// `(proxy path prefix, upstream base URL)`.
    proxies: Vec<(String, String)>,
}

type Shared = Arc<Mutex<Inner>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// A running fake API server; stops when dropped.
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Shared,
    task: JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// RFC 3339 time `seconds` ago (for fixtures with a known age).
pub fn ago(seconds: i64) -> String {
    (chrono::Utc::now() - chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// JSON merge patch (RFC 7386).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(fields) => {
            if !target.is_object() {
                *target = json!({});
            }
            if let Some(map) = target.as_object_mut() {
                for (k, v) in fields {
                    if v.is_null() {
                        map.remove(k);
                    } else {
                        merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn list_kind(plural: &str) -> &'static str {
    match plural {
        "researchruns" => "ResearchRunList",
        "researchprofiles" => "ResearchProfileList",
        "researchschedules" => "ResearchScheduleList",
        "configmaps" => "ConfigMapList",
        _ => "List",
    }
}

fn status(code: u16, reason: &str, message: String, details: Value) -> Response {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "details": details, "code": code,
    });
    (
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(code: StatusCode, value: &Value) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn not_found(gv: &str, plural: &str, name: &str) -> Response {
    let group = gv.split_once('/').map_or("", |(g, _)| g);
    let resource = if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    };
    status(
        404,
        "NotFound",
        format!("{resource} \"{name}\" not found"),
        json!({"name": name, "group": group, "kind": plural}),
    )
}

/// The path parsed into (group/version, namespace, plural, name).
fn route(path: &str) -> Option<(String, Option<String>, String, Option<String>)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (gv, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => ("v1".to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    match rest {
        ["namespaces", ns, plural] => Some((gv, Some(ns.to_string()), plural.to_string(), None)),
        ["namespaces", ns, plural, name] => Some((
            gv,
            Some(ns.to_string()),
            plural.to_string(),
            Some(name.to_string()),
        )),
        [plural] => Some((gv, None, plural.to_string(), None)),
        _ => None,
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    url_decode_pairs(query)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn url_decode_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%' && i + 2 < bytes.len())
            .then(|| std::str::from_utf8(&bytes[i + 1..i + 3]).ok())
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (hex, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match answer(&shared, method, &uri, &headers, &body) {
        Answer::Here(response) => response,
        Answer::Proxy(target) => forward(&target, &headers).await,
    }
}

/// What [`answer`] decided: a response, or an upstream URL to forward to.
enum Answer {
    Here(Response),
    Proxy(String),
}

/// Records the request and answers it under one lock (so the recorded order is the order the
/// objects changed in), or names the upstream a service proxy path goes to.
fn answer(shared: &Shared, method: Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Answer {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or_default().to_string();
    let body_json: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body).unwrap_or_else(|_| json!(String::from_utf8_lossy(body)))
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut inner = lock(shared);
    inner.requests.push(Recorded {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        content_type: content_type.clone(),
        body: body_json.clone(),
    });
    let proxy = inner
        .proxies
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix.as_str()))
        .map(|(prefix, upstream)| {
            let rest = uri.path_and_query().map_or(path.as_str(), |p| p.as_str());
            format!("{upstream}{}", &rest[prefix.len()..])
        });
    if let Some(target) = proxy {
        return Answer::Proxy(target);
    }
    Answer::Here(serve(
        shared,
        inner,
        method,
        path,
        query,
        content_type,
        body_json,
    ))
}

/// Answers a request for the objects this server holds.
fn serve(
    shared: &Shared,
    mut inner: std::sync::MutexGuard<'_, Inner>,
    method: Method,
    path: String,
    query: String,
    content_type: Option<String>,
    body_json: Value,
) -> Response {
    if let Some(name) = proxied_service(&path) {
        return not_found("v1", "services", name);
    }
    let Some((gv, namespace, plural, name)) = route(&path) else {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    };
    // Without the CRDs the API server does not know the group at all.
    if gv == QUARRY_GV && !inner.crds_installed {
        return (StatusCode::NOT_FOUND, "404 page not found").into_response();
    }
    match (method, name) {
        (Method::GET, Some(name)) => {
            let key = (
                gv.clone(),
                plural.clone(),
                namespace.unwrap_or_default(),
                name.clone(),
            );
            match inner.objects.get(&key) {
                Some(obj) => ok(StatusCode::OK, obj),
                None => not_found(&gv, &plural, &name),
            }
        }
        (Method::PATCH, Some(name)) => {
            let key = (
                gv.clone(),
                plural.clone(),
                namespace.unwrap_or_default(),
                name.clone(),
            );
            if content_type.as_deref() != Some("application/merge-patch+json") {
                return status(
                    415,
                    "UnsupportedMediaType",
                    format!("the fake API server only takes merge patches, not {content_type:?}"),
                    json!({}),
                );
            }
            inner.resource_version += 1;
            let rv = inner.resource_version;
            let Some(obj) = inner.objects.get_mut(&key) else {
                return not_found(&gv, &plural, &name);
            };
            let spec_before = obj["spec"].clone();
            merge_patch(obj, &body_json);
            if obj["spec"] != spec_before {
                let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
                obj["metadata"]["generation"] = json!(generation);
            }
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            ok(StatusCode::OK, obj)
        }
        (Method::POST, None) => {
            let Some(ns) = namespace else {
                return status(
                    405,
                    "MethodNotAllowed",
                    "create needs a namespace".into(),
                    json!({}),
                );
            };
            let mut obj = body_json;
            let name = match obj["metadata"]["name"].as_str() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => match obj["metadata"]["generateName"].as_str() {
                    Some(prefix) => {
                        inner.generated += 1;
                        // Deterministic where the real server draws five random characters.
                        format!("{prefix}z{:04}", inner.generated)
                    }
                    None => {
                        return status(
                            422,
                            "Invalid",
                            "metadata.name: Required value".into(),
                            json!({}),
                        );
                    }
                },
            };
            let key = (gv.clone(), plural.clone(), ns.clone(), name.clone());
            if inner.objects.contains_key(&key) {
                let group = gv.split_once('/').map_or("", |(g, _)| g);
                return status(
                    409,
                    "AlreadyExists",
                    format!("{plural}.{group} \"{name}\" already exists"),
                    json!({"name": name, "group": group, "kind": plural}),
                );
            }
            inner.resource_version += 1;
            let rv = inner.resource_version;
            let uid = format!("uid-{}", inner.objects.len() + 1);
            obj["metadata"]["name"] = json!(name);
            obj["metadata"]["namespace"] = json!(ns);
            obj["metadata"]["uid"] = json!(uid);
            obj["metadata"]["resourceVersion"] = json!(rv.to_string());
            obj["metadata"]["generation"] = json!(1);
            obj["metadata"]["creationTimestamp"] = json!(ago(0));
            inner.objects.insert(key, obj.clone());
            ok(StatusCode::CREATED, &obj)
        }
        (Method::GET, None) => {
            let selected = query_param(&query, "fieldSelector")
                .and_then(|s| s.strip_prefix("metadata.name=").map(str::to_string));
            let items: Vec<Value> = inner
                .objects
                .iter()
                .filter(|((g, p, ns, n), _)| {
                    *g == gv
                        && *p == plural
                        && namespace.as_ref().is_none_or(|want| want == ns)
                        && selected.as_ref().is_none_or(|want| want == n)
                })
                .map(|(_, v)| v.clone())
                .collect();
            let watching = query_param(&query, "watch").as_deref() == Some("true");
            if !watching {
                let list = json!({
                    "apiVersion": gv, "kind": list_kind(&plural),
                    "metadata": {"resourceVersion": inner.resource_version.to_string()},
                    "items": items,
                });
                return ok(StatusCode::OK, &list);
            }
            let script = selected
                .as_ref()
                .and_then(|n| inner.scripts.remove(n))
                .unwrap_or_default();
            let key =
                selected.map(|n| (gv.clone(), plural.clone(), namespace.unwrap_or_default(), n));
            let interval = inner.watch_interval;
            drop(inner);
            watch_response(shared.clone(), key, script, interval)
        }
        _ => status(
            405,
            "MethodNotAllowed",
            "not served by the fake API server".into(),
            json!({}),
        ),
    }
}

/// The Service name of a service proxy path (`/api/v1/namespaces/{ns}/services/{name}:{port}/proxy...`).
fn proxied_service(path: &str) -> Option<&str> {
    let parts: Vec<&str> = path.trim_matches('/').splitn(7, '/').collect();
    match parts.as_slice() {
        ["api", "v1", "namespaces", _, "services", service, rest @ ..]
            if rest.first().is_some_and(|r| r.starts_with("proxy")) =>
        {
            Some(service.split(':').next().unwrap_or(service))
        }
        _ => None,
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

/// A watch: the scripted statuses as `MODIFIED` events, then an open stream.
fn watch_response(
    shared: Shared,
    key: Option<Key>,
    script: Vec<Value>,
    interval: Duration,
) -> Response {
    let events = futures::stream::unfold(
        (shared, key, script.into_iter()),
        move |(shared, key, mut script)| async move {
            let Some(next) = script.next() else {
                // Stay open like a real watch; the client ends it.
                futures::future::pending::<()>().await;
                return None;
            };
            tokio::time::sleep(interval).await;
            let line = {
                let mut inner = lock(&shared);
                inner.resource_version += 1;
                let rv = inner.resource_version;
                let object = key
                    .as_ref()
                    .and_then(|k| inner.objects.get_mut(k))
                    .map(|obj| {
                        obj["status"] = next;
                        obj["metadata"]["resourceVersion"] = json!(rv.to_string());
                        obj.clone()
                    });
                match object {
                    Some(obj) => format!("{}\n", json!({"type": "MODIFIED", "object": obj})),
                    None => String::new(),
                }
            };
            Some((
                Ok::<Bytes, std::convert::Infallible>(Bytes::from(line)),
                (shared, key, script),
            ))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

impl FakeApiServer {
    /// Starts on 127.0.0.1 on a free port, with the CRDs installed.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared: Shared = Arc::new(Mutex::new(Inner {
            objects: BTreeMap::new(),
            requests: Vec::new(),
            resource_version: 100,
            generated: 0,
            scripts: BTreeMap::new(),
            crds_installed: true,
            watch_interval: DEFAULT_WATCH_INTERVAL,
            proxies: Vec::new(),
        }));
        let app = Router::new().fallback(handle).with_state(shared.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("fake kube API server stopped: {e}");
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes a kubeconfig for this server into `dir` (context namespace `namespace`).
    pub fn write_kubeconfig(&self, dir: &Path, namespace: &str) -> std::io::Result<PathBuf> {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\nusers:\n- name: tester\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: tester\n    namespace: {namespace}\ncurrent-context: fake\n",
            self.url()
        );
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// Stores an object (its apiVersion, kind, namespace and name say where); fills uid,
    /// resourceVersion and generation when missing.
    pub fn insert(&self, mut object: Value) {
        let mut inner = lock(&self.shared);
        inner.resource_version += 1;
        let rv = inner.resource_version;
        let gv = object["apiVersion"].as_str().unwrap_or("v1").to_string();
        let plural = match object["kind"].as_str().unwrap_or_default() {
            "ResearchRun" => "researchruns",
            "ResearchProfile" => "researchprofiles",
            "ResearchSchedule" => "researchschedules",
            "ConfigMap" => "configmaps",
            other => panic!("the fake API server does not serve kind {other:?}"),
        }
        .to_string();
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let count = inner.objects.len() + 1;
        let meta = &mut object["metadata"];
        meta["namespace"] = json!(ns);
        if meta["uid"].is_null() {
            meta["uid"] = json!(format!("uid-{count}"));
        }
        meta["resourceVersion"] = json!(rv.to_string());
        if meta["generation"].is_null() {
            meta["generation"] = json!(1);
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = json!(ago(0));
        }
        inner.objects.insert((gv, plural, ns, name), object);
    }

    /// Proxies the Service `namespace/name` (port `port`) to `upstream` (a base URL).
    pub fn proxy_service(&self, namespace: &str, name: &str, port: &str, upstream: &str) {
        let prefix = format!("/api/v1/namespaces/{namespace}/services/{name}:{port}/proxy");
        lock(&self.shared)
            .proxies
            .push((prefix, upstream.trim_end_matches('/').to_string()));
    }

    /// Queues the statuses a watch on run `name` delivers, in order.
    pub fn script_watch(&self, name: &str, statuses: Vec<Value>) {
        lock(&self.shared)
            .scripts
            .insert(name.to_string(), statuses);
    }

    /// Sets the pause before each scripted watch event.
    pub fn set_watch_interval(&self, interval: Duration) {
        lock(&self.shared).watch_interval = interval;
    }

    /// Makes the server answer Quarry's API group with 404, as a cluster without the CRDs does.
    pub fn remove_crds(&self) {
        lock(&self.shared).crds_installed = false;
    }

    /// A stored object.
    pub fn object(&self, gv: &str, plural: &str, ns: &str, name: &str) -> Option<Value> {
        lock(&self.shared)
            .objects
            .get(&(gv.into(), plural.into(), ns.into(), name.into()))
            .cloned()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared).requests.clone()
    }

    /// Every request as `METHOD path?query`.
    pub fn request_lines(&self) -> Vec<String> {
        self.requests().iter().map(Recorded::line).collect()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        lock(&self.shared).requests.clear();
    }
}

#[cfg(test)]
mod tests;
