//! Harness of the live event stream tests: a scripted run (see [`crate::bench::scripted_run`])
//! driven in-process with its events published, the operator's HTTP server on 127.0.0.1
//! serving them, and a Server-Sent Events client that can drop and resume its connection.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use tokio::sync::watch;

use quarry::logs::{SseMessage, SseParser};
use quarry_api::ResearchProfile;
use quarry_engine::events::publish::{StreamPublisher, run_published};
use quarry_engine::events::{RunDirectory, RunEvents, RunRef};
use quarry_engine::research::machine::state::{Mode, RunInput, RunState};
use quarry_engine::research::shell::executor::{Control, NoopObserver};
use quarry_engine::store::memory::MemoryStore;
use quarry_engine::telemetry::Metrics;
use quarry_operator::server::run_events::{EventsApi, StreamSettings, events_path};
use quarry_operator::server::{Readiness, ServerState};

use crate::bench::{DEEP_QUESTION, QUICK_QUESTION, scripted_run};
use crate::model_server::{ScriptedModel, ScriptedModelHandle};
use crate::profiles::scripted_profile;
use crate::slow_web::SlowWeb;

/// A run in progress whose events go to a stream.
pub struct StreamedRun {
    /// The scripted model (its request log counts the model calls).
    pub model: ScriptedModelHandle,
    /// The run's artifacts (`events.jsonl`, the report).
    pub store: Arc<MemoryStore>,
    /// The run; yields its final state and when it ended.
    pub task: tokio::task::JoinHandle<(RunState, Instant)>,
}

/// Starts a scripted `mode` run against `web` (every model answer after `model_ms`), publishing
/// its events for `run` to `events`.
pub async fn start_streamed_run(
    web: &SlowWeb,
    mode: Mode,
    model_ms: u64,
    events: Arc<dyn RunEvents>,
    run: RunRef,
) -> Result<StreamedRun, Box<dyn std::error::Error>> {
    let model = ScriptedModel::start(scripted_run(web, mode, model_ms)).await?;
    let profile =
        ResearchProfile::from_yaml(&scripted_profile(&model.base_url(), &web.base_url()))?;
    let store = Arc::new(MemoryStore::new());
    let key = |_: &quarry_api::ModelTier| Some("sk-stream-test".to_string());
    let engine =
        quarry_operator::engine_builder::build_engine(&profile.spec, &key, store.clone(), None)?;
    let question = if mode == Mode::Quick {
        QUICK_QUESTION
    } else {
        DEEP_QUESTION
    };
    let publisher = Arc::new(StreamPublisher::new(events, run));
    let task = tokio::spawn(async move {
        // The owner keeps the control channel open for the whole run.
        let (_control, rx) = watch::channel(Control::Run);
        let state = run_published(
            Arc::new(engine),
            RunState::new(RunInput::new(question, mode)),
            Arc::new(NoopObserver),
            rx,
            publisher,
        )
        .await;
        (state, Instant::now())
    });
    Ok(StreamedRun { model, store, task })
}

/// The operator's HTTP server with an event stream, on 127.0.0.1; stops when dropped.
pub struct EventServer {
    base: String,
    /// The metrics it exports on `/metrics`.
    pub metrics: Metrics,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EventServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EventServer {
    /// Serves `events`, finding runs in `directory`.
    pub async fn start(
        events: Arc<dyn RunEvents>,
        directory: Arc<dyn RunDirectory>,
        settings: StreamSettings,
    ) -> std::io::Result<EventServer> {
        let metrics = Metrics::new();
        let listener = quarry_operator::server::bind("127.0.0.1:0")
            .await
            .map_err(std::io::Error::other)?;
        let base = format!("http://{}", listener.local_addr()?);
        let state = ServerState {
            metrics: metrics.clone(),
            readiness: Readiness::new(),
            events: Some(EventsApi::with_settings(
                events,
                directory,
                metrics.clone(),
                settings,
            )),
        };
        let task = tokio::spawn(async move {
            let _ = quarry_operator::server::serve(listener, state, std::future::pending()).await;
        });
        Ok(EventServer {
            base,
            metrics,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The event stream URL of a run.
    pub fn events_url(&self, namespace: &str, name: &str) -> String {
        format!("{}{}", self.base, events_path(namespace, name))
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>;

/// One SSE connection.
pub struct SseConnection {
    body: Body,
    parser: SseParser,
    buffered: std::collections::VecDeque<SseMessage>,
    /// Raw text received (keep-alive comments included).
    pub raw: String,
}

impl SseConnection {
    /// Opens `url`, resuming after `last_id`; the answer's status must be 200.
    pub async fn open(url: &str, last_id: Option<&str>) -> Result<SseConnection, String> {
        let mut request = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream");
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        if response.status() != 200 {
            let status = response.status();
            let body = response.text().await.unwrap_or_default();
            return Err(format!("HTTP {status}: {body}"));
        }
        Ok(SseConnection {
            body: Box::pin(response.bytes_stream()),
            parser: SseParser::new(),
            buffered: Default::default(),
            raw: String::new(),
        })
    }

    /// The next event, `None` when the stream ended or nothing came within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<SseMessage> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(message) = self.buffered.pop_front() {
                return Some(message);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??
                .ok()?;
            self.raw.push_str(&String::from_utf8_lossy(&chunk));
            self.buffered.extend(self.parser.push(&chunk));
        }
    }
}

/// Waits (bounded) until `directory` knows the run `namespace/name`.
pub async fn wait_for_run(
    directory: &dyn RunDirectory,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if matches!(directory.lookup(namespace, name).await, Ok(Some(_))) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}
