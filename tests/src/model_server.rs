//! A scripted OpenAI-compatible model server for tests.
//!
//! `ScriptedModel::start(script)` binds 127.0.0.1:0 and answers `POST /v1/chat/completions` (and
//! `/chat/completions`) from a script: a list of steps consumed in order, then an optional fallback
//! step repeated forever. Each reply honours the request's `stream` flag (SSE or one JSON body) and
//! reports the usage the step names. Every request body is recorded so tests can assert on prompts,
//! `max_tokens` and headers. The same server runs as a binary (`scripted-model`) for subprocess
//! tests.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

mod wire;
use wire::{render, render_anthropic};

/// Token usage a reply reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyUsage {
    /// Reported as `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// Reported as `usage.completion_tokens`.
    pub completion_tokens: u64,
}

/// A native tool call in a scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedCall {
    /// Call id; omitted from the reply when `None` (servers that send none exist).
    #[serde(default)]
    pub id: Option<String>,
    /// Function name.
    pub name: String,
    /// Arguments, sent JSON-encoded as a string unless `arguments_raw` is set.
    #[serde(default)]
    pub arguments: Value,
    /// Exact `arguments` string to send instead (e.g. fenced JSON or trailing commas).
    #[serde(default)]
    pub arguments_raw: Option<String>,
}

/// One scripted reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// A plain text answer.
    Text {
        text: String,
        #[serde(default)]
        usage: Option<ReplyUsage>,
    },
    /// Native tool calls (with optional accompanying content).
    ToolCalls {
        calls: Vec<ScriptedCall>,
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        usage: Option<ReplyUsage>,
    },
    /// A JSON action protocol answer: `{"tool": ..., "arguments": ...}` as text, optionally fenced
    /// and preceded by prose.
    JsonAction {
        tool: String,
        arguments: Value,
        #[serde(default)]
        fenced: bool,
        #[serde(default)]
        prose: Option<String>,
        #[serde(default)]
        usage: Option<ReplyUsage>,
    },
    /// `prefix` then `chunk` repeated `times` times, one SSE event per chunk when streaming
    /// (a degenerate model looping on one snippet).
    Repeat {
        #[serde(default)]
        prefix: String,
        chunk: String,
        times: usize,
        #[serde(default)]
        usage: Option<ReplyUsage>,
    },
    /// An HTTP error status, with optional `Retry-After` (sent verbatim) and body.
    Status {
        status: u16,
        #[serde(default)]
        retry_after: Option<String>,
        #[serde(default)]
        body: Option<String>,
    },
    /// Wait, then perform the inner step (forces client timeouts).
    Delay { millis: u64, then: Box<Step> },
    /// Wait until the named route has served all its steps (at most 60 s), then `millis` more,
    /// then perform the inner step: orders parallel conversations deterministically.
    AwaitRoute {
        route: String,
        #[serde(default)]
        millis: u64,
        then: Box<Step>,
    },
    /// A raw HTTP 200 body with the given content type (default `application/json`): malformed
    /// JSON, or a hand-written minimal completion.
    Raw {
        body: String,
        #[serde(default)]
        content_type: Option<String>,
    },
    /// A reply cut off midway: an SSE stream without finish_reason and `[DONE]`, or half a JSON body.
    Truncated { text: String },
    /// HTTP 200 with a garbage, non-JSON `text/plain` body.
    Garbage { text: String },
}

impl Step {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Step {
        Step::Text {
            text: text.into(),
            usage: None,
        }
    }
    /// One native tool call with id `call_<name>`.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Step {
        let name = name.into();
        Step::ToolCalls {
            calls: vec![ScriptedCall {
                id: Some(format!("call_{name}")),
                name,
                arguments,
                arguments_raw: None,
            }],
            content: None,
            usage: None,
        }
    }
    /// Native tool calls.
    pub fn tool_calls(calls: Vec<ScriptedCall>) -> Step {
        Step::ToolCalls {
            calls,
            content: None,
            usage: None,
        }
    }
    /// A bare JSON action answer.
    pub fn json_action(tool: impl Into<String>, arguments: Value) -> Step {
        Step::JsonAction {
            tool: tool.into(),
            arguments,
            fenced: false,
            prose: None,
            usage: None,
        }
    }
    /// `chunk` repeated `times` times.
    pub fn repeat(chunk: impl Into<String>, times: usize) -> Step {
        Step::Repeat {
            prefix: String::new(),
            chunk: chunk.into(),
            times,
            usage: None,
        }
    }
    /// An HTTP error status.
    pub fn status(status: u16) -> Step {
        Step::Status {
            status,
            retry_after: None,
            body: None,
        }
    }
    /// An HTTP error status with `Retry-After: <seconds>`.
    pub fn status_retry_after(status: u16, seconds: u64) -> Step {
        Step::Status {
            status,
            retry_after: Some(seconds.to_string()),
            body: None,
        }
    }
    /// Waits `millis` before performing `then`.
    pub fn delay(millis: u64, then: Step) -> Step {
        Step::Delay {
            millis,
            then: Box::new(then),
        }
    }
    /// Waits until route `route` is used up, then `millis` more, before performing `then`.
    pub fn await_route(route: impl Into<String>, millis: u64, then: Step) -> Step {
        Step::AwaitRoute {
            route: route.into(),
            millis,
            then: Box::new(then),
        }
    }
    /// A raw JSON-typed 200 body.
    pub fn raw(body: impl Into<String>) -> Step {
        Step::Raw {
            body: body.into(),
            content_type: None,
        }
    }
    /// A reply cut off midway.
    pub fn truncated(text: impl Into<String>) -> Step {
        Step::Truncated { text: text.into() }
    }
    /// A garbage non-JSON 200 body.
    pub fn garbage(text: impl Into<String>) -> Step {
        Step::Garbage { text: text.into() }
    }
    /// Sets the usage the reply reports (no effect on status, raw, truncated and garbage steps).
    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Step {
        let new = Some(ReplyUsage {
            prompt_tokens,
            completion_tokens,
        });
        match &mut self {
            Step::Text { usage, .. }
            | Step::ToolCalls { usage, .. }
            | Step::JsonAction { usage, .. }
            | Step::Repeat { usage, .. } => *usage = new,
            Step::Delay { then, .. } | Step::AwaitRoute { then, .. } => {
                let inner = std::mem::replace(then.as_mut(), Step::text(""));
                **then = inner.with_usage(prompt_tokens, completion_tokens);
            }
            Step::Status { .. }
            | Step::Raw { .. }
            | Step::Truncated { .. }
            | Step::Garbage { .. } => {}
        }
        self
    }

    /// The usage the reply reports, if any.
    pub fn usage(&self) -> Option<ReplyUsage> {
        match self {
            Step::Text { usage, .. }
            | Step::ToolCalls { usage, .. }
            | Step::JsonAction { usage, .. }
            | Step::Repeat { usage, .. } => *usage,
            Step::Delay { then, .. } | Step::AwaitRoute { then, .. } => then.usage(),
            Step::Status { .. }
            | Step::Raw { .. }
            | Step::Truncated { .. }
            | Step::Garbage { .. } => None,
        }
    }
}

/// A conversation of its own inside a script: requests whose system prompt or first user
/// message contains `when` get this route's steps (then its fallback) instead of the script's.
/// Parallel researchers, the planner and the evaluator can so be scripted independently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Route {
    /// Name, for [`Step::AwaitRoute`].
    pub name: String,
    /// Substring of the first two messages that selects this route.
    pub when: String,
    /// Replies in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Reply once `steps` are used up (HTTP 500 when absent).
    #[serde(default)]
    pub fallback: Option<Step>,
    /// Answer by turn instead of consuming steps: a request gets `steps[n]`, where n is the
    /// number of assistant messages it carries (then `fallback`). Any number of conversations
    /// can so run the same script concurrently (benchmarks run a thousand at once).
    #[serde(default)]
    pub by_turn: bool,
}

impl Route {
    /// A route of steps without fallback.
    pub fn new(name: impl Into<String>, when: impl Into<String>, steps: Vec<Step>) -> Route {
        Route {
            name: name.into(),
            when: when.into(),
            steps,
            fallback: None,
            by_turn: false,
        }
    }
    /// Sets the fallback step.
    pub fn with_fallback(mut self, step: Step) -> Route {
        self.fallback = Some(step);
        self
    }
    /// Answers by turn (see [`Route::by_turn`]).
    pub fn by_turn(mut self) -> Route {
        self.by_turn = true;
        self
    }
}

/// Steps consumed in order, then `fallback` for every later request (HTTP 500 when absent);
/// requests matching a route are answered by that route instead (first match wins).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Replies in order.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// Reply once `steps` are used up.
    #[serde(default)]
    pub fallback: Option<Step>,
    /// Conversations scripted on their own.
    #[serde(default)]
    pub routes: Vec<Route>,
    /// Enforce a provider's rate limit: requests per minute, with a burst of 5 s of them (plus
    /// 2 for network jitter); requests beyond it get HTTP 429 with `Retry-After: 1`.
    #[serde(default)]
    pub rate_limit_per_minute: Option<u64>,
}

impl Script {
    /// A script of steps without fallback.
    pub fn new(steps: Vec<Step>) -> Script {
        Script {
            steps,
            fallback: None,
            routes: Vec::new(),
            rate_limit_per_minute: None,
        }
    }
    /// Sets the fallback step.
    pub fn with_fallback(mut self, step: Step) -> Script {
        self.fallback = Some(step);
        self
    }
    /// Adds a route.
    pub fn with_route(mut self, route: Route) -> Script {
        self.routes.push(route);
        self
    }
    /// Enforces a rate limit of `per_minute` requests (see [`Script::rate_limit_per_minute`]).
    pub fn with_rate_limit(mut self, per_minute: u64) -> Script {
        self.rate_limit_per_minute = Some(per_minute);
        self
    }
}

impl From<Vec<Step>> for Script {
    fn from(steps: Vec<Step>) -> Script {
        Script::new(steps)
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// Request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Name of the route that answered it, if any.
    #[serde(default)]
    pub route: Option<String>,
    /// `Authorization` header value, if any.
    pub authorization: Option<String>,
    /// Query string, if any (Azure's `api-version`).
    #[serde(default)]
    pub query: Option<String>,
    /// Provider headers: `api-key` (Azure), `x-api-key` and `anthropic-version` (Anthropic).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// The body as JSON (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// Whether a reply was sent (false while held, and for requests whose client died first).
    #[serde(default)]
    pub answered: bool,
    /// The usage the reply reported.
    #[serde(default)]
    pub reply_usage: Option<ReplyUsage>,
}

struct RouteState {
    name: String,
    when: String,
    steps: Mutex<VecDeque<Step>>,
    fallback: Option<Step>,
    by_turn: bool,
}

/// The server side of a provider rate limit: a token bucket.
struct ServerBucket {
    per_second: f64,
    capacity: f64,
    level: f64,
    last: std::time::Instant,
    rejected: usize,
}

impl ServerBucket {
    fn admit(&mut self) -> bool {
        let now = std::time::Instant::now();
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.level = (self.level + elapsed * self.per_second).min(self.capacity);
        if self.level >= 1.0 {
            self.level -= 1.0;
            true
        } else {
            self.rejected += 1;
            false
        }
    }
}

struct Inner {
    limit: Option<Mutex<ServerBucket>>,
    steps: Mutex<VecDeque<Step>>,
    fallback: Option<Step>,
    routes: Vec<RouteState>,
    requests: Mutex<Vec<RecordedRequest>>,
    log: Option<Mutex<std::fs::File>>,
    /// (route, turn) pairs whose next request is held without an answer (see `hold_once`).
    holds: Mutex<Vec<(String, usize)>>,
    /// Bumped by `release_held`: a held request waits until it changes.
    releases: Mutex<u64>,
}

/// Starts scripted model servers.
pub struct ScriptedModel;

impl ScriptedModel {
    /// Binds 127.0.0.1:0 and serves `script` until the handle is dropped.
    pub async fn start(script: impl Into<Script>) -> std::io::Result<ScriptedModelHandle> {
        Self::start_on(
            script,
            "127.0.0.1:0".parse().map_err(std::io::Error::other)?,
            None,
        )
        .await
    }

    /// Like [`ScriptedModel::start`] on a chosen address, appending every request as one JSON line
    /// to `log` when given (used by the `scripted-model` binary).
    pub async fn start_on(
        script: impl Into<Script>,
        addr: SocketAddr,
        log: Option<PathBuf>,
    ) -> std::io::Result<ScriptedModelHandle> {
        let script = script.into();
        let log = match log {
            Some(path) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?,
            )),
            None => None,
        };
        let inner = Arc::new(Inner {
            limit: script.rate_limit_per_minute.map(|per_minute| {
                let per_second = per_minute as f64 / 60.0;
                let capacity = per_second * 5.0 + 2.0;
                Mutex::new(ServerBucket {
                    per_second,
                    capacity,
                    level: capacity,
                    last: std::time::Instant::now(),
                    rejected: 0,
                })
            }),
            steps: Mutex::new(script.steps.into()),
            fallback: script.fallback,
            routes: script
                .routes
                .into_iter()
                .map(|r| RouteState {
                    name: r.name,
                    when: r.when,
                    steps: Mutex::new(r.steps.into()),
                    fallback: r.fallback,
                    by_turn: r.by_turn,
                })
                .collect(),
            requests: Mutex::new(Vec::new()),
            log,
            holds: Mutex::new(Vec::new()),
            releases: Mutex::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/chat/completions", post(chat))
            .route(
                "/openai/deployments/{deployment}/chat/completions",
                post(chat),
            )
            .route("/v1/messages", post(messages))
            .route("/v1/models", get(models))
            .route("/models", get(models))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        // TCP_NODELAY, as production servers set it: without it, a reply streamed in pieces waits
        // for the client's delayed ACK (40 ms on Linux), which benchmarks would count as latency.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("scripted model server stopped: {e}");
            }
        });
        Ok(ScriptedModelHandle { addr, inner, task })
    }
}

/// A running scripted server; stops when dropped.
pub struct ScriptedModelHandle {
    addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ScriptedModelHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ScriptedModelHandle {
    /// Bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
    /// Base URL for an OpenAI client: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
    /// Bodies of all requests so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.recorded().into_iter().map(|r| r.body).collect()
    }
    /// All requests so far with path and `Authorization` header.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.requests).clone()
    }
    /// Number of chat requests so far.
    pub fn request_count(&self) -> usize {
        lock(&self.inner.requests).len()
    }
    /// Steps not yet consumed.
    pub fn steps_remaining(&self) -> usize {
        lock(&self.inner.steps).len()
    }
    /// Requests refused with 429 by the server's rate limit.
    pub fn rate_limited(&self) -> usize {
        self.inner.limit.as_ref().map_or(0, |l| lock(l).rejected)
    }
    /// Holds the next request of `route` at `turn` (assistant messages so far) unanswered for
    /// ten minutes, or until `release_held`: a client can be killed mid-call at an exact point.
    /// Once only.
    pub fn hold_once(&self, route: &str, turn: usize) {
        lock(&self.inner.holds).push((route.to_string(), turn));
    }
    /// Answers every request held so far (with its scripted step), as if the model had only been
    /// slow: the client gets its reply at a moment the test chooses.
    pub fn release_held(&self) {
        *lock(&self.inner.releases) += 1;
    }
    /// Whether a request of `route` at `turn` (assistant messages so far) is held unanswered.
    pub fn held(&self, route: &str, turn: usize) -> bool {
        lock(&self.inner.requests).iter().any(|r| {
            r.route.as_deref() == Some(route) && !r.answered && assistant_turns(&r.body) == turn
        })
    }
    /// Requests answered by the named route, in order.
    pub fn route_requests(&self, name: &str) -> Vec<Value> {
        self.recorded()
            .into_iter()
            .filter(|r| r.route.as_deref() == Some(name))
            .map(|r| r.body)
            .collect()
    }
}

/// Locks a mutex, recovering the data if a panicking test thread poisoned it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn models() -> Response {
    axum::Json(json!({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}]}))
        .into_response()
}

/// Wire format of an answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dialect {
    OpenAi,
    Anthropic,
}

async fn chat(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(inner, uri, headers, body, Dialect::OpenAi).await
}

async fn messages(
    State(inner): State<Arc<Inner>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(inner, uri, headers, body, Dialect::Anthropic).await
}

async fn serve(
    inner: Arc<Inner>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    dialect: Dialect,
) -> Response {
    // Read before the request is recorded (and so before `held` can see it): a release after
    // that moment answers it.
    let releases = *lock(&inner.releases);
    let body: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    if let Some(limit) = &inner.limit
        && !lock(limit).admit()
    {
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "application/json")],
            json!({"error": {"message": "rate limit exceeded", "type": "rate_limit"}}).to_string(),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    }
    let head = conversation_head(&body);
    let turn = assistant_turns(&body);
    let route = inner.routes.iter().find(|r| head.contains(&r.when));
    let record = RecordedRequest {
        route: route.map(|r| r.name.clone()),
        query: uri.query().map(str::to_string),
        headers: ["api-key", "x-api-key", "anthropic-version"]
            .iter()
            .filter_map(|h| {
                headers
                    .get(*h)
                    .and_then(|v| v.to_str().ok())
                    .map(|v| (h.to_string(), v.to_string()))
            })
            .collect(),
        path: uri.path().to_string(),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        body,
        answered: false,
        reply_usage: None,
    };
    if let Some(log) = &inner.log {
        let mut file = lock(log);
        let _ = writeln!(
            file,
            "{}",
            serde_json::to_string(&record).unwrap_or_default()
        );
        let _ = file.flush();
    }
    let stream = record
        .body
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let model = record
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted")
        .to_string();
    let index = {
        let mut requests = lock(&inner.requests);
        requests.push(record);
        requests.len()
    };
    let next = match route {
        Some(r) if r.by_turn => lock(&r.steps)
            .get(turn)
            .cloned()
            .or_else(|| r.fallback.clone()),
        Some(r) => lock(&r.steps).pop_front().or_else(|| r.fallback.clone()),
        None => lock(&inner.steps)
            .pop_front()
            .or_else(|| inner.fallback.clone()),
    };
    let held = route.is_some_and(|r| {
        let mut holds = lock(&inner.holds);
        match holds
            .iter()
            .position(|(name, t)| *name == r.name && *t == turn)
        {
            Some(i) => {
                holds.remove(i);
                true
            }
            None => false,
        }
    });
    if held {
        let until = tokio::time::Instant::now() + Duration::from_secs(600);
        while *lock(&inner.releases) == releases && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let Some(mut step) = next else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "scripted model: script exhausted at request {index} (route {:?})",
                route.map(|r| &r.name)
            ),
        )
            .into_response();
    };
    loop {
        match step {
            Step::Delay { millis, then } => {
                tokio::time::sleep(Duration::from_millis(millis)).await;
                step = *then;
            }
            Step::AwaitRoute {
                route: awaited,
                millis,
                then,
            } => {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
                while tokio::time::Instant::now() < deadline
                    && inner
                        .routes
                        .iter()
                        .find(|r| r.name == awaited)
                        .is_some_and(|r| !lock(&r.steps).is_empty())
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                tokio::time::sleep(Duration::from_millis(millis)).await;
                step = *then;
            }
            other => {
                step = other;
                break;
            }
        }
    }
    if let Some(r) = lock(&inner.requests).get_mut(index - 1) {
        r.answered = true;
        r.reply_usage = step.usage();
    }
    match dialect {
        Dialect::OpenAi => render(step, stream, &model, index),
        Dialect::Anthropic => render_anthropic(step, &model, index),
    }
}

/// The system prompt and the first user message of a request, where routes look for their marker.
fn conversation_head(body: &Value) -> String {
    // Anthropic's system prompt is a top-level field and contents are block lists.
    let text_of = |c: &Value| -> String {
        match c {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    };
    let mut parts: Vec<String> = body
        .get("system")
        .and_then(Value::as_str)
        .map(|s| vec![s.to_string()])
        .unwrap_or_default();
    if let Some(messages) = body.get("messages").and_then(Value::as_array) {
        let take = 2 - parts.len();
        parts.extend(
            messages
                .iter()
                .take(take)
                .filter_map(|m| m.get("content"))
                .map(text_of),
        );
    }
    parts.join("\n")
}

/// Assistant messages in a request: the turn a conversation is at.
fn assistant_turns(body: &Value) -> usize {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |m| {
            m.iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count()
        })
}

#[cfg(test)]
mod tests;
