//! `quarry logs [-f] NAME`: a run's events, followed live or read back.
//!
//! Where the events come from:
//! - `--server URL` (or `QUARRY_SERVER`): the operator's event endpoint at that base URL, e.g.
//!   `http://127.0.0.1:8080` after `kubectl port-forward -n quarry-system svc/quarry 8080:http`,
//!   or a standalone process serving it. The server falls back to the stored log itself.
//! - Otherwise the current kubeconfig context: a finished run's stored `events.jsonl` is read
//!   from its `<run>-events` ConfigMap; a running run's stream is reached through the API
//!   server's service proxy (`/api/v1/namespaces/<operator-namespace>/services/<service>:http/proxy/...`),
//!   so no port-forward is needed and the API server's authentication and RBAC apply.
//!
//! A follower reconnects after a dropped connection with `Last-Event-ID`, so it misses nothing
//! the stream still holds; it exits when the run's `runFinished` event arrives.

use std::io::Write;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use axum::body::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use quarry_api::ResearchRun;
use quarry_engine::events::{RUN_FINISHED, log_events, now_rfc3339, synthesized_final};
use quarry_engine::store::keys::EVENTS_KEY;
use quarry_operator::server::run_events::events_path;

/// Default namespace of the operator's Service.
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "quarry-system";
/// Default name of the operator's Service (its port is named `http`).
pub const DEFAULT_OPERATOR_SERVICE: &str = "quarry";
/// Longest SSE line accepted; longer lines are dropped.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;
/// Connection attempts in a row that may fail before a follower gives up.
pub const MAX_FAILED_ATTEMPTS: u32 = 10;
/// Deadline of connecting and of the answer's headers.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest silence on an open stream (the server sends keep-alives every 15 s).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// How events are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// One line per event for people.
    #[default]
    Text,
    /// The events' JSON objects, one per line, with their `id`.
    Json,
}

/// Arguments of `quarry logs`.
#[derive(Debug, Clone, clap::Args)]
pub struct LogsArgs {
    /// The ResearchRun (standalone runs: the question's file-name stem, namespace `local`).
    pub name: String,
    /// Follow the run until it ends, reconnecting when the connection drops.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Namespace of the run (default: the kubeconfig context's; `default` with --server).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Base URL of the operator's HTTP port (default: through the API server's service proxy).
    #[arg(long, env = "QUARRY_SERVER")]
    pub server: Option<String>,
    /// `text` (lines for people) or `json` (one JSON object per line).
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// Namespace of the operator's Service, for the service proxy.
    #[arg(long, env = "QUARRY_OPERATOR_NAMESPACE", default_value = DEFAULT_OPERATOR_NAMESPACE)]
    pub operator_namespace: String,
    /// Name of the operator's Service (port `http`), for the service proxy.
    #[arg(long, env = "QUARRY_OPERATOR_SERVICE", default_value = DEFAULT_OPERATOR_SERVICE)]
    pub operator_service: String,
    /// Bearer token the operator's event stream checks (TokenReview, then `get researchruns`
    /// in the run's namespace). Default: the kubeconfig's token or token file; a kubeconfig
    /// with a client certificate has none: mint one with `kubectl create token NAME`.
    #[arg(long, env = "QUARRY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// Pure: the bearer token a kubeconfig user authenticates with (a token, or a token file as in
/// a pod), for the operator's event stream; `None` for client certificates and exec plugins.
pub fn config_token(auth: &kube::config::AuthInfo) -> Option<String> {
    use secrecy::ExposeSecret;
    let token = match (&auth.token, &auth.token_file) {
        (Some(token), _) => token.expose_secret().to_string(),
        (None, Some(file)) => std::fs::read_to_string(file).ok()?,
        (None, None) => return None,
    };
    Some(token.trim().to_string()).filter(|t| !t.is_empty())
}

/// Why `quarry logs` could not print a run's events.
#[derive(Debug, thiserror::Error)]
pub enum LogsError {
    /// The run does not exist.
    #[error("{0}")]
    NotFound(String),
    /// No Kubernetes configuration.
    #[error(
        "cannot reach a cluster ({0}); set KUBECONFIG or pass --server URL (e.g. after kubectl port-forward -n {DEFAULT_OPERATOR_NAMESPACE} svc/{DEFAULT_OPERATOR_SERVICE} 8080:http)"
    )]
    NoCluster(String),
    /// A request was refused for good.
    #[error("{0}")]
    Refused(String),
    /// The stream could not be reached, even after retries.
    #[error("{0}")]
    Unreachable(String),
    /// Writing to stdout failed.
    #[error("writing output: {0}")]
    Output(#[from] std::io::Error),
}

/// One Server-Sent Event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseMessage {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Pure, incremental parser of a `text/event-stream` body.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    oversize: bool,
    id: Option<String>,
    event: Option<String>,
    data: Vec<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseMessage> {
        let mut out = Vec::new();
        for &b in chunk {
            if b == b'\n' {
                let mut line = std::mem::take(&mut self.line);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if !std::mem::take(&mut self.oversize) {
                    self.line_done(&String::from_utf8_lossy(&line), &mut out);
                }
            } else if self.line.len() < MAX_LINE_BYTES {
                self.line.push(b);
            } else {
                self.oversize = true;
            }
        }
        out
    }

    fn line_done(&mut self, line: &str, out: &mut Vec<SseMessage>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                out.push(SseMessage {
                    id: self.id.clone(),
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data).join("\n"),
                });
            }
            self.event = None;
            // The id is per event here (the server sends one with every event that has one).
            self.id = None;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => self.data.push(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {}
        }
    }
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

fn task(v: &Value) -> String {
    v.get("task")
        .and_then(Value::as_u64)
        .map_or_else(String::new, |t| format!("#{t} "))
}

/// Pure: one line for people from an event's JSON.
pub fn render(event: &Value) -> String {
    let time = text(event, "time");
    // `2024-06-10T08:00:01.500Z` → `08:00:01`
    let clock = time.get(11..19).unwrap_or("--:--:--");
    let kind = text(event, "type");
    let (label, body) = match kind {
        "phase" => (
            "phase",
            format!("{} -> {}", text(event, "from"), text(event, "to")),
        ),
        "agendaPlanned" => {
            let tasks: Vec<String> = event
                .get("tasks")
                .and_then(Value::as_array)
                .map(|ts| {
                    ts.iter()
                        .map(|t| format!("#{} {}", num(t, "id"), text(t, "query")))
                        .collect()
                })
                .unwrap_or_default();
            (
                "agenda",
                format!("{} tasks: {}", tasks.len(), tasks.join("; ")),
            )
        }
        "researcherStarted" => (
            "researcher",
            format!("{}started: {}", task(event), text(event, "query")),
        ),
        "researcherProgress" => (
            "researcher",
            format!("{}{} tool calls", task(event), num(event, "toolCalls")),
        ),
        "researcherFinished" => (
            "researcher",
            format!(
                "{}finished: {} searches, {} pages read, {} tokens",
                task(event),
                num(event, "searches"),
                num(event, "pagesRead"),
                num(event, "inputTokens") + num(event, "outputTokens")
            ),
        ),
        "researcherFailed" => (
            "researcher",
            format!(
                "{}failed ({}): {}",
                task(event),
                text(event, "reason"),
                text(event, "message")
            ),
        ),
        "evaluation" => {
            let queries: Vec<&str> = event
                .get("queries")
                .and_then(Value::as_array)
                .map(|q| q.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let body = if text(event, "decision") == "delegate" {
                format!("another round: {}", queries.join("; "))
            } else {
                "synthesize".to_string()
            };
            ("evaluator", body)
        }
        "stepFailed" => (
            "failed",
            format!(
                "{} ({}): {}",
                text(event, "step"),
                text(event, "reason"),
                text(event, "message")
            ),
        ),
        "reportWritten" => {
            let mut body = format!("written from {} sources", num(event, "sources"));
            if let Some(p) = event.get("citationPrecision").and_then(Value::as_f64) {
                body.push_str(&format!(", {:.0}% of checked claims supported", p * 100.0));
            }
            if event.get("partial").and_then(Value::as_bool) == Some(true) {
                body.push_str(" (partial)");
            }
            if event.get("aborted").and_then(Value::as_bool) == Some(true) {
                body.push_str(" (unable to research)");
            }
            ("report", body)
        }
        "reportStored" => ("report", format!("stored ({} bytes)", num(event, "bytes"))),
        "control" => ("run", text(event, "action").to_string()),
        "modelCall" => (
            "model",
            format!(
                "{}{} {} ({}) {}: {}+{} tok ${} {} ms",
                task(event),
                text(event, "purpose"),
                text(event, "model"),
                text(event, "tier"),
                text(event, "outcome"),
                num(event, "inputTokens"),
                num(event, "outputTokens"),
                text(event, "costUSD"),
                num(event, "durationMs")
            ),
        ),
        "search" | "fetch" => (
            kind,
            format!(
                "{}{} {}, cache {}, {} ms",
                task(event),
                text(event, "subject"),
                text(event, "outcome"),
                text(event, "cache"),
                num(event, "durationMs")
            ),
        ),
        RUN_FINISHED => {
            let phase = text(event, "phase");
            let reason = text(event, "reason");
            let mut body = if reason.is_empty() {
                phase.to_string()
            } else {
                format!("{phase} ({reason})")
            };
            let message = text(event, "message");
            if !message.is_empty() && phase != "Completed" {
                body.push_str(&format!(": {message}"));
            }
            if event.get("inputTokens").is_some() {
                body.push_str(&format!(
                    "; {} tokens, ${}, {} model calls, {} searches, {} pages read",
                    num(event, "inputTokens") + num(event, "outputTokens"),
                    text(event, "costUSD"),
                    num(event, "llmCalls"),
                    num(event, "searches"),
                    num(event, "pagesRead")
                ));
            }
            ("finished", body)
        }
        other => (other, event.to_string()),
    };
    let mut line = format!("{clock} {label:<10} {body}");
    // Engine events say where the run stands.
    if kind != RUN_FINISHED
        && let (Some(phase), Some(progress)) = (
            event.get("phase").and_then(Value::as_str),
            event.get("progress").and_then(Value::as_str),
        )
    {
        line.push_str(&format!(
            "  [{phase} {progress} | {} tok | ${}]",
            num(event, "tokens"),
            text(event, "costUSD")
        ));
    }
    line
}

/// Pure: the output line of one event (`json`: its object with its `id`).
pub fn format_event(format: OutputFormat, id: Option<&str>, data: &str) -> String {
    let parsed = serde_json::from_str::<Value>(data);
    match (format, parsed) {
        (OutputFormat::Json, Ok(Value::Object(mut object))) => {
            if let Some(id) = id {
                object.insert("id".into(), Value::from(id));
            }
            Value::Object(object).to_string()
        }
        (OutputFormat::Text, Ok(value)) => render(&value),
        (_, _) => data.to_string(),
    }
}

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, String>> + Send>>;

/// Why opening the stream failed.
#[derive(Debug)]
enum OpenError {
    /// The run does not exist (the server said so).
    NotFound(String),
    /// Refused for good (4xx).
    Refused(String),
    /// Worth another try (connection refused, 5xx, timeouts).
    Retry(String),
}

/// How the event endpoint is reached.
enum Transport {
    Direct {
        http: reqwest::Client,
        base: String,
        token: Option<String>,
    },
    Proxy {
        client: kube::Client,
        prefix: String,
        service: String,
        token: Option<String>,
    },
}

/// The server's JSON problem message, or the body as text.
fn problem_message(body: &[u8]) -> (Option<String>, String) {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.get("error").is_some() => (
            v.get("error").and_then(Value::as_str).map(str::to_string),
            text(&v, "message").to_string(),
        ),
        Ok(v) if v.get("kind").and_then(Value::as_str) == Some("Status") => {
            (None, text(&v, "message").to_string())
        }
        _ => (
            None,
            String::from_utf8_lossy(body)
                .trim()
                .chars()
                .take(500)
                .collect(),
        ),
    }
}

fn classify(status: u16, body: &[u8], via: &str) -> OpenError {
    let (reason, message) = problem_message(body);
    match (status, reason.as_deref()) {
        (404, Some("NotFound")) => OpenError::NotFound(message),
        (400..=499, Some(_)) => OpenError::Refused(message),
        (401 | 403, None) => OpenError::Refused(format!(
            "{via} refused the request (HTTP {status}): {message}"
        )),
        (404, None) => OpenError::Refused(format!("{via} answered 404: {message}")),
        _ => OpenError::Retry(format!("{via} answered HTTP {status}: {message}")),
    }
}

impl Transport {
    fn describe(&self) -> String {
        match self {
            Transport::Direct { base, .. } => format!("the server at {base}"),
            Transport::Proxy { service, .. } => format!(
                "the operator Service {service} (through the API server's service proxy; needs `get services/proxy` there; see --operator-namespace, --operator-service, or use --server URL)"
            ),
        }
    }

    async fn open(&self, path: &str, last_id: Option<&str>) -> Result<ByteStream, OpenError> {
        let via = self.describe();
        let (status, mut body): (u16, ByteStream) = match self {
            Transport::Direct { http, base, token } => {
                let mut request = http
                    .get(format!("{base}{path}"))
                    .header(reqwest::header::ACCEPT, "text/event-stream");
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                if let Some(id) = last_id {
                    request = request.header("Last-Event-ID", id);
                }
                let response = answered(&via, request.send()).await?;
                let status = response.status().as_u16();
                let body = response
                    .bytes_stream()
                    .map(|r| r.map_err(|e| e.to_string()));
                (status, Box::pin(body))
            }
            Transport::Proxy {
                client,
                prefix,
                token,
                ..
            } => {
                let mut request = axum::http::Request::get(format!("{prefix}{path}"))
                    .header(axum::http::header::ACCEPT, "text/event-stream");
                // The API server's proxy removes `Authorization` once it has authenticated the
                // caller; the operator reads the token from its own header.
                if let Some(token) = token {
                    request = request.header(
                        quarry_operator::server::stream_auth::TOKEN_HEADER,
                        token.as_str(),
                    );
                }
                if let Some(id) = last_id {
                    request = request.header("Last-Event-ID", id);
                }
                let request = request
                    .body(kube::client::Body::empty())
                    .map_err(|e| OpenError::Refused(e.to_string()))?;
                let response = answered(&via, client.send(request)).await?;
                let status = response.status().as_u16();
                let body = axum::body::Body::new(response.into_body())
                    .into_data_stream()
                    .map(|r| r.map_err(|e| e.to_string()));
                (status, Box::pin(body))
            }
        };
        if status != 200 {
            // The problem's body, bounded.
            let mut text = Vec::new();
            while let Ok(Some(Ok(chunk))) = tokio::time::timeout(CONNECT_TIMEOUT, body.next()).await
            {
                text.extend_from_slice(&chunk);
                if text.len() > 64 * 1024 {
                    break;
                }
            }
            return Err(classify(status, &text, &via));
        }
        Ok(body)
    }
}

/// The answer to a request, within [`CONNECT_TIMEOUT`]; failures are worth another try.
async fn answered<T, E: std::fmt::Display>(
    via: &str,
    send: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, OpenError> {
    tokio::time::timeout(CONNECT_TIMEOUT, send)
        .await
        .map_err(|_| OpenError::Retry(format!("{via} did not answer in {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| OpenError::Retry(format!("cannot reach {via}: {e}")))
}

/// Writes one line and flushes (a follower shows events as they come).
fn emit(out: &mut dyn Write, line: &str) -> Result<(), LogsError> {
    writeln!(out, "{line}")?;
    out.flush()?;
    Ok(())
}

/// Pure: the request path of the stream. The resume position goes in `?after=` as well as in
/// `Last-Event-ID`, in case a proxy on the way drops the header.
pub fn request_path(path: &str, follow: bool, last_id: Option<&str>) -> String {
    let mut query = Vec::new();
    if !follow {
        query.push("follow=false".to_string());
    }
    if let Some(id) = last_id {
        query.push(format!("after={id}"));
    }
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

/// Reads the run's stream to its end (or, with `follow`, until `runFinished`), resuming after
/// dropped connections.
async fn stream(
    transport: &Transport,
    path: &str,
    follow: bool,
    format: OutputFormat,
    out: &mut dyn Write,
) -> Result<(), LogsError> {
    let mut last_id: Option<String> = None;
    let mut failures = 0u32;
    loop {
        let url = request_path(path, follow, last_id.as_deref());
        let outcome: Result<(), String> = match transport.open(&url, last_id.as_deref()).await {
            Err(OpenError::NotFound(message)) => return Err(LogsError::NotFound(message)),
            Err(OpenError::Refused(message)) => return Err(LogsError::Refused(message)),
            Err(OpenError::Retry(message)) => Err(message),
            Ok(mut body) => {
                let mut parser = SseParser::new();
                let mut progressed = false;
                let mut ended = None;
                loop {
                    let chunk = match tokio::time::timeout(READ_TIMEOUT, body.next()).await {
                        Ok(Some(Ok(chunk))) => chunk,
                        Ok(Some(Err(e))) => {
                            ended = Some(format!("the connection broke: {e}"));
                            break;
                        }
                        Ok(None) => break,
                        Err(_) => {
                            ended = Some(format!("no data for {READ_TIMEOUT:?}"));
                            break;
                        }
                    };
                    for message in parser.push(&chunk) {
                        let kind = message.event.as_deref().unwrap_or("message");
                        if kind == "error" {
                            let v: Value = serde_json::from_str(&message.data).unwrap_or_default();
                            ended = Some(format!("the server reported: {}", text(&v, "message")));
                            continue;
                        }
                        emit(
                            out,
                            &format_event(format, message.id.as_deref(), &message.data),
                        )?;
                        progressed = true;
                        if let Some(id) = message.id {
                            last_id = Some(id);
                        }
                        if kind == RUN_FINISHED {
                            return Ok(());
                        }
                    }
                }
                if !follow && ended.is_none() {
                    return Ok(());
                }
                if progressed {
                    failures = 0;
                }
                match ended {
                    Some(reason) => Err(reason),
                    // Ended cleanly without the final event (the server's connection age
                    // limit): resume at once.
                    None if progressed => continue,
                    None => Err("the stream ended without events".to_string()),
                }
            }
        };
        if let Err(reason) = outcome {
            failures += 1;
            if failures >= MAX_FAILED_ATTEMPTS || !follow {
                return Err(LogsError::Unreachable(format!(
                    "{reason} (gave up after {failures} attempts)"
                )));
            }
            let delay = Duration::from_millis(500 * 2u64.pow(failures.min(5) - 1))
                .min(Duration::from_secs(10));
            eprintln!("quarry: {reason}; reconnecting in {delay:?}");
            tokio::time::sleep(delay).await;
        }
    }
}

/// Prints a finished run's stored provenance log and a final line from its status.
async fn print_stored(
    client: kube::Client,
    run: &ResearchRun,
    format: OutputFormat,
    out: &mut dyn Write,
) -> Result<(), LogsError> {
    let Some(info) = quarry_operator::server::run_finder::run_info(run) else {
        return Err(LogsError::Refused("the run has no namespace or UID".into()));
    };
    let store = quarry_operator::server::run_finder::run_store(client, &info.run);
    let log = tokio::time::timeout(CONNECT_TIMEOUT, store.get(EVENTS_KEY))
        .await
        .map_err(|_| LogsError::Unreachable(format!("reading {EVENTS_KEY} timed out")))?
        .map_err(|e| LogsError::Unreachable(e.to_string()))?
        .unwrap_or_default();
    for event in log_events(&info.run, &log) {
        emit(
            out,
            &format_event(format, Some(&event.id.to_string()), &event.json),
        )?;
    }
    let last = synthesized_final(&info, &now_rfc3339());
    emit(out, &format_event(format, None, &last.json))
}

/// `quarry logs`: prints the run's events to `out`.
pub async fn logs(args: &LogsArgs, out: &mut dyn Write) -> Result<(), LogsError> {
    if let Some(server) = &args.server {
        let namespace = args.namespace.as_deref().unwrap_or("default");
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|e| LogsError::Refused(format!("HTTP client: {e}")))?;
        let transport = Transport::Direct {
            http,
            base: server.trim_end_matches('/').to_string(),
            token: args.token.clone(),
        };
        let path = events_path(namespace, &args.name);
        return stream(&transport, &path, args.follow, args.output, out).await;
    }
    let config = kube::Config::infer()
        .await
        .map_err(|e| LogsError::NoCluster(e.to_string()))?;
    let token = args
        .token
        .clone()
        .or_else(|| config_token(&config.auth_info));
    let client = kube::Client::try_from(config).map_err(|e| LogsError::NoCluster(e.to_string()))?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_string());
    let runs: kube::Api<ResearchRun> = kube::Api::namespaced(client.clone(), &namespace);
    let run = tokio::time::timeout(CONNECT_TIMEOUT, runs.get_opt(&args.name))
        .await
        .map_err(|_| LogsError::Unreachable("the API server did not answer".into()))?
        .map_err(|e| LogsError::Unreachable(format!("reading ResearchRun {namespace}/{}: {e}", args.name)))?
        .ok_or_else(|| {
            LogsError::NotFound(format!(
                "ResearchRun \"{}\" not found in namespace \"{namespace}\"; list the runs with `kubectl get researchruns -n {namespace}`",
                args.name
            ))
        })?;
    if run.is_finished() {
        return print_stored(client, &run, args.output, out).await;
    }
    let transport = Transport::Proxy {
        client,
        prefix: format!(
            "/api/v1/namespaces/{}/services/{}:http/proxy",
            args.operator_namespace, args.operator_service
        ),
        service: format!("{}/{}", args.operator_namespace, args.operator_service),
        token,
    };
    let path = events_path(&namespace, &args.name);
    stream(&transport, &path, args.follow, args.output, out).await
}

/// Entry point of `quarry logs`: runs [`logs`] on stdout; errors go to stderr.
pub fn main(args: &LogsArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quarry: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match runtime.block_on(logs(args, &mut out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quarry: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests;
