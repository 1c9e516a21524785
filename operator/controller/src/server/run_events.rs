//! `GET /api/v1/namespaces/{namespace}/researchruns/{name}/events`: a run's events as
//! Server-Sent Events.
//!
//! - Resumes after the id in `Last-Event-ID` (or `?after=`); ids are the stream's ids.
//! - `?follow=false` sends what is there and ends; by default the stream follows the run and
//!   ends with its `runFinished` event (synthesized from status if the stream lost it).
//! - A finished run whose stream is gone (expired, or kept by another process) is served from
//!   its stored `events.jsonl`.
//! - Keep-alive comments every 15 s; a connection ends after 30 min at most, and the client
//!   resumes with `Last-Event-ID`.
//! - At most [`StreamSettings::max_streams`] streams at once; more get 503 with `Retry-After`.
//! - With [`EventsApi::with_auth`] (the operator sets it), callers need a token that may read
//!   the run's namespace, and each holds a bounded number of streams ([`super::stream_auth`]).
//!
//! A client only reads: disconnecting drops its reader and nothing else, the run never notices.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, warn};

use super::ServerState;
use super::stream_auth::{CallerSlot, Refusal, StreamAuth};
use quarry_engine::events::{
    EventId, EventReader, EventsError, RUN_FINISHED, RunDirectory, RunEvents, RunInfo, StoredEvent,
    log_events, now_rfc3339, synthesized_final,
};
use quarry_engine::telemetry::Metrics;

/// The route of a run's event stream.
pub const EVENTS_ROUTE: &str = "/api/v1/namespaces/{namespace}/researchruns/{name}/events";

/// The path of a run's event stream.
pub fn events_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/researchruns/{name}/events")
}

/// Events sent per read at most.
const BATCH: usize = 256;

/// Bounds and timings of the endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamSettings {
    /// Streams open at once at most.
    pub max_streams: usize,
    /// Interval of keep-alive comments.
    pub keep_alive: Duration,
    /// How long one read waits for new events before the run's state is looked at again.
    pub follow_slice: Duration,
    /// Longest life of one connection (the client resumes after it).
    pub max_age: Duration,
}

impl Default for StreamSettings {
    fn default() -> Self {
        Self {
            max_streams: 64,
            keep_alive: Duration::from_secs(15),
            follow_slice: Duration::from_secs(10),
            max_age: Duration::from_secs(30 * 60),
        }
    }
}

/// What the event endpoint reads from. Cheap to clone.
#[derive(Clone)]
pub struct EventsApi {
    events: Arc<dyn RunEvents>,
    directory: Arc<dyn RunDirectory>,
    slots: Arc<Semaphore>,
    metrics: Metrics,
    settings: StreamSettings,
    auth: Option<Arc<StreamAuth>>,
}

impl std::fmt::Debug for EventsApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventsApi")
            .field("backend", &self.events.backend())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl EventsApi {
    /// Serves `events`, finding runs through `directory`, with the default settings.
    pub fn new(
        events: Arc<dyn RunEvents>,
        directory: Arc<dyn RunDirectory>,
        metrics: Metrics,
    ) -> Self {
        Self::with_settings(events, directory, metrics, StreamSettings::default())
    }

    /// [`EventsApi::new`] with other settings.
    pub fn with_settings(
        events: Arc<dyn RunEvents>,
        directory: Arc<dyn RunDirectory>,
        metrics: Metrics,
        settings: StreamSettings,
    ) -> Self {
        Self {
            events,
            directory,
            slots: Arc::new(Semaphore::new(settings.max_streams.max(1))),
            metrics,
            settings,
            auth: None,
        }
    }

    /// Serves only callers `auth` admits, each with a bounded number of streams.
    pub fn with_auth(mut self, auth: Arc<StreamAuth>) -> Self {
        self.auth = Some(auth);
        self
    }
}

/// The response to a caller who may not open a stream.
fn refusal(refused: &Refusal) -> Response {
    let (status, reason) = match refused {
        Refusal::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, "Unauthenticated"),
        Refusal::Forbidden(_) => (StatusCode::FORBIDDEN, "Forbidden"),
        Refusal::TooMany(_) => (StatusCode::TOO_MANY_REQUESTS, "TooManyStreamsForCaller"),
        Refusal::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "ReviewFailed"),
    };
    let mut response = problem(status, reason, refused.to_string());
    if matches!(refused, Refusal::TooMany(_)) {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
    }
    response
}

/// The query of the endpoint.
#[derive(Debug, Default, serde::Deserialize)]
pub struct EventsQuery {
    /// Resume after this id (`Last-Event-ID` wins when both are given).
    pub after: Option<String>,
    /// `false`: send what is there and end.
    pub follow: Option<bool>,
}

fn problem(status: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    (
        status,
        Json(json!({"error": reason, "message": message.into()})),
    )
        .into_response()
}

/// The handler of [`EVENTS_ROUTE`].
pub async fn run_events(
    State(state): State<ServerState>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(api) = state.events.clone() else {
        return problem(
            StatusCode::NOT_FOUND,
            "EventStreamDisabled",
            "this server does not serve run events",
        );
    };
    let Some(auth) = api.auth.clone() else {
        return api.respond(&namespace, &name, query, &headers).await;
    };
    match auth.admit(&headers, &namespace).await {
        Ok(caller) => {
            api.respond_as(&caller, &namespace, &name, query, &headers)
                .await
        }
        Err(refused) => {
            debug!(run = %name, namespace = %namespace, error = %refused, "event stream refused");
            refusal(&refused)
        }
    }
}

impl EventsApi {
    /// The event stream of run `namespace/name` as an SSE response (or a problem response),
    /// resuming after `Last-Event-ID` or `query.after`. Whoever calls it has decided the caller
    /// may read the run (the web console checks with a SubjectAccessReview first).
    pub async fn respond(
        &self,
        namespace: &str,
        name: &str,
        query: EventsQuery,
        headers: &HeaderMap,
    ) -> Response {
        self.respond_with(None, namespace, name, query, headers)
            .await
    }

    /// [`EventsApi::respond`] for `caller`, who holds at most the per-caller number of streams
    /// when the API has an authorizer ([`EventsApi::with_auth`]).
    pub async fn respond_as(
        &self,
        caller: &str,
        namespace: &str,
        name: &str,
        query: EventsQuery,
        headers: &HeaderMap,
    ) -> Response {
        let slot = match self.auth.as_ref().map(|auth| auth.slot(caller)).transpose() {
            Ok(slot) => slot,
            Err(refused) => {
                warn!(caller, run = %name, namespace = %namespace, "event stream refused: too many open streams for one caller");
                return refusal(&refused);
            }
        };
        self.respond_with(slot, namespace, name, query, headers)
            .await
    }

    async fn respond_with(
        &self,
        slot: Option<CallerSlot>,
        namespace: &str,
        name: &str,
        query: EventsQuery,
        headers: &HeaderMap,
    ) -> Response {
        let api = self.clone();
        let (namespace, name) = (namespace.to_string(), name.to_string());
        let after = headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .or(query.after.filter(|s| !s.trim().is_empty()));
        let after = match after.map(|a| a.parse::<EventId>()).transpose() {
            Ok(after) => after,
            Err(e) => return problem(StatusCode::BAD_REQUEST, "BadEventId", e.to_string()),
        };
        let info = match api.directory.lookup(&namespace, &name).await {
            Ok(Some(info)) => info,
            Ok(None) => {
                return problem(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!(
                        "ResearchRun \"{name}\" not found in namespace \"{namespace}\"; list the runs with `kubectl get researchruns -n {namespace}`"
                    ),
                );
            }
            Err(e) => {
                return problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "LookupFailed",
                    e.to_string(),
                );
            }
        };
        let Ok(permit) = api.slots.clone().try_acquire_owned() else {
            warn!(run = %name, namespace = %namespace, limit = api.settings.max_streams, "event stream refused: too many open streams");
            let mut response = problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "TooManyStreams",
                format!(
                    "{} event streams are open, the most this server serves; retry shortly",
                    api.settings.max_streams
                ),
            );
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("5"));
            return response;
        };
        debug!(run = %name, namespace = %namespace, after = ?after, "event stream opened");
        let keep_alive = api.settings.keep_alive;
        let feed = Feed {
            _client: Client::new(api.metrics.clone(), permit),
            _caller: slot,
            api,
            info,
            after,
            follow: query.follow.unwrap_or(true),
            reader: None,
            pending: VecDeque::new(),
            done: false,
            started: Instant::now(),
        };
        let stream = futures::stream::unfold(feed, Feed::next);
        Sse::new(stream)
            .keep_alive(KeepAlive::new().interval(keep_alive))
            .into_response()
    }
}

/// One connected client: holds its slot and counts in the clients gauge until dropped.
struct Client {
    metrics: Metrics,
    _permit: OwnedSemaphorePermit,
}

impl Client {
    fn new(metrics: Metrics, permit: OwnedSemaphorePermit) -> Self {
        metrics.event_stream_clients.inc();
        Self {
            metrics,
            _permit: permit,
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.metrics.event_stream_clients.dec();
    }
}

/// The state of one client's stream.
struct Feed {
    api: EventsApi,
    info: RunInfo,
    after: Option<EventId>,
    follow: bool,
    reader: Option<Box<dyn EventReader>>,
    pending: VecDeque<SseEvent>,
    done: bool,
    started: Instant,
    /// Held for the slot and the gauge.
    _client: Client,
    /// Held for the caller's own bound.
    _caller: Option<CallerSlot>,
}

fn sse(event: &StoredEvent) -> SseEvent {
    // The event name is one line by construction; guard against a foreign stream entry anyway.
    let kind: String = event
        .kind
        .chars()
        .filter(|c| !matches!(c, '\n' | '\r'))
        .collect();
    SseEvent::default()
        .id(event.id.to_string())
        .event(kind)
        .data(&event.json)
}

impl Feed {
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Feed)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            self.fill().await;
        }
    }

    /// The final event of a run whose stream does not have one: from its status (no id).
    fn synthesized_final(&self) -> SseEvent {
        let event = synthesized_final(&self.info, &now_rfc3339());
        SseEvent::default().event(RUN_FINISHED).data(event.json)
    }

    /// Ends the stream on a backend error; the client resumes after its last id.
    fn fail(&mut self, error: &EventsError) {
        warn!(run = %self.info.run.name, namespace = %self.info.run.namespace, error = %error, "event stream ended by a backend error");
        self.pending.push_back(
            SseEvent::default()
                .event("error")
                .data(json!({"message": error.to_string()}).to_string()),
        );
        self.done = true;
    }

    /// Serves a finished run from its stored provenance log.
    async fn serve_stored_log(&mut self) {
        match self.api.directory.event_log(&self.info).await {
            Ok(Some(log)) => {
                for event in log_events(&self.info.run, &log) {
                    if self.after.is_none_or(|after| event.id > after) {
                        self.pending.push_back(sse(&event));
                    }
                }
            }
            Ok(None) => {}
            Err(e) => warn!(run = %self.info.run.name, error = %e, "stored event log unreadable"),
        }
        self.pending.push_back(self.synthesized_final());
        self.done = true;
    }

    /// Queues what the stream holds after the last event sent, without waiting; whether there
    /// was anything (a run that just ended may have published its last events a moment ago).
    async fn drain(&mut self) -> bool {
        let Some(reader) = &mut self.reader else {
            return false;
        };
        match reader.next(self.after, Duration::ZERO, BATCH).await {
            Ok(batch) if !batch.is_empty() => {
                self.queue(&batch);
                true
            }
            _ => false,
        }
    }

    /// Queues a batch, up to and including the final event.
    fn queue(&mut self, batch: &[StoredEvent]) {
        for event in batch {
            self.after = Some(event.id);
            self.pending.push_back(sse(event));
            if event.kind == RUN_FINISHED {
                self.done = true;
                break;
            }
        }
    }

    async fn fill(&mut self) {
        let reader = match &mut self.reader {
            Some(reader) => reader,
            None => {
                match self.api.events.exists(&self.info.run).await {
                    Err(e) => return self.fail(&e),
                    Ok(false) if self.info.terminal => return self.serve_stored_log().await,
                    Ok(_) => {}
                }
                match self.api.events.reader(&self.info.run).await {
                    Ok(reader) => self.reader.insert(reader),
                    Err(e) => return self.fail(&e),
                }
            }
        };
        let wait = if self.follow {
            self.api.settings.follow_slice
        } else {
            Duration::ZERO
        };
        let batch = match reader.next(self.after, wait, BATCH).await {
            Ok(batch) => batch,
            Err(e) => return self.fail(&e),
        };
        if !batch.is_empty() {
            self.queue(&batch);
            return;
        }
        if !self.follow || self.started.elapsed() >= self.api.settings.max_age {
            self.done = true;
            return;
        }
        // Quiet for a while: is the run still there, and still going?
        let run = &self.info.run;
        match self.api.directory.lookup(&run.namespace, &run.name).await {
            Ok(Some(info)) if info.run.uid == run.uid => {
                self.info = info;
                if self.info.terminal {
                    if matches!(self.api.events.exists(&self.info.run).await, Ok(false)) {
                        // Nothing was streamed here: the stored log is the history.
                        self.reader = None;
                    } else if !self.drain().await {
                        // The stream really has no final event (lost in an outage).
                        self.pending.push_back(self.synthesized_final());
                        self.done = true;
                    }
                }
            }
            // Deleted (or replaced by a new run of the same name).
            Ok(_) => {
                self.pending.push_back(self.synthesized_final());
                self.done = true;
            }
            // The lookup failing is no reason to drop a follower.
            Err(e) => debug!(error = %e, "run lookup failed; still following"),
        }
    }
}

#[cfg(test)]
mod tests;
