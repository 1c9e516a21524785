//! The live event stream of a run.
//!
//! A run publishes what happens to it (phase changes, the agenda, researchers, evaluations, every
//! model call, search and page read, the stored report, the end) to a [`RunEvents`] port; the
//! operator's `/api/v1/namespaces/{ns}/researchruns/{name}/events` endpoint and `quarry logs -f`
//! read it. Publishing never waits and never fails the run: a full queue or an unreachable Redis
//! drops the event and counts it, research goes on.
//!
//! Two implementations: [`memory::MemoryEvents`] (a bounded ring per run, one process) and
//! `quarry_operator::redis::event_stream::RedisEvents` (one Redis stream per run, shared by every replica). Event ids have
//! Redis's shape `<milliseconds>-<sequence>` in both, strictly increasing per run, so a client
//! resumes with `Last-Event-ID` the same way whatever the backend.

pub mod memory;
pub mod publish;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::llm::format_pico_usd;
use crate::research::machine::reducer::Event;
use crate::research::machine::state::{Decision, Phase, RunState, TaskState};

/// Type of the last event of every run's stream.
pub const RUN_FINISHED: &str = "runFinished";

/// Errors of an event stream backend.
#[derive(Debug, thiserror::Error)]
pub enum EventsError {
    /// The backend (Redis) could not be reached or answered with an error.
    #[error("event stream backend {backend}: {message}")]
    Backend {
        backend: &'static str,
        message: String,
    },
    /// The run or its artifacts could not be looked up.
    #[error("looking up the run: {0}")]
    Directory(String),
}

/// Where an event sits in its run's stream: Redis's `<milliseconds>-<sequence>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId {
    pub millis: u64,
    pub seq: u64,
}

impl EventId {
    /// The id after `last` at wall-clock `now_millis`: time moves on, or the sequence does (so
    /// ids stay strictly increasing even when the clock stands still or steps back).
    pub fn next_after(last: Option<EventId>, now_millis: u64) -> EventId {
        match last {
            Some(last) if now_millis <= last.millis => EventId {
                millis: last.millis,
                seq: last.seq + 1,
            },
            _ => EventId {
                millis: now_millis,
                seq: 0,
            },
        }
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.millis, self.seq)
    }
}

/// An event id that is not `<milliseconds>-<sequence>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event id {0:?} is not of the form <milliseconds>-<sequence> (e.g. 1718000000000-3)")]
pub struct BadEventId(pub String);

impl FromStr for EventId {
    type Err = BadEventId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadEventId(s.chars().take(64).collect());
        let (millis, seq) = s.trim().split_once('-').ok_or_else(bad)?;
        let digits =
            |t: &str| !t.is_empty() && t.len() <= 20 && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(millis) || !digits(seq) {
            return Err(bad());
        }
        Ok(EventId {
            millis: millis.parse().map_err(|_| bad())?,
            seq: seq.parse().map_err(|_| bad())?,
        })
    }
}

/// The run an event belongs to. The UID tells apart two runs that had the same name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl RunRef {
    /// A run reference.
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        uid: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// One event as published: its `type` and its JSON object (which holds the `type` too).
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    pub kind: String,
    pub json: String,
}

impl RunEvent {
    /// An event of `run` from a JSON object: adds `type`, the run's fields and, unless the
    /// object has one, `time`.
    pub fn from_object(
        run: &RunRef,
        kind: &str,
        mut object: Map<String, Value>,
        time: &str,
    ) -> Self {
        object.remove("kind");
        let mut out = Map::new();
        out.insert("type".into(), Value::from(kind));
        let time = object.remove("time").unwrap_or_else(|| Value::from(time));
        out.insert("time".into(), time);
        out.insert("namespace".into(), Value::from(run.namespace.as_str()));
        out.insert("run".into(), Value::from(run.name.as_str()));
        out.insert("uid".into(), Value::from(run.uid.as_str()));
        out.extend(object);
        Self {
            kind: kind.to_string(),
            json: Value::Object(out).to_string(),
        }
    }

    /// An engine event of `run` at `time` (RFC 3339).
    pub fn from_body(run: &RunRef, body: &EventBody, time: &str) -> Self {
        let (kind, object) = match serde_json::to_value(body) {
            Ok(Value::Object(mut o)) => {
                let kind = o
                    .remove("type")
                    .and_then(|t| t.as_str().map(str::to_string))
                    .unwrap_or_default();
                (kind, o)
            }
            // Every body serializes to an object with a tag; keep the event rather than panic.
            _ => ("unknown".to_string(), Map::new()),
        };
        Self::from_object(run, &kind, object, time)
    }

    /// A provenance record (a line of `events.jsonl`) of `run`; its `kind` becomes the type.
    pub fn from_record(run: &RunRef, record: &impl Serialize) -> Option<Self> {
        let Ok(Value::Object(object)) = serde_json::to_value(record) else {
            return None;
        };
        let kind = object.get("kind")?.as_str()?.to_string();
        Some(Self::from_object(run, &kind, object, ""))
    }
}

/// An event read back from a stream, with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: EventId,
    pub kind: String,
    pub json: String,
}

/// Reads one run's events in order.
#[async_trait]
pub trait EventReader: Send {
    /// Events after `after` (from the start when `None`), at most `limit`; when none are there
    /// yet, waits up to `wait` for new ones (an empty answer means none came).
    async fn next(
        &mut self,
        after: Option<EventId>,
        wait: Duration,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, EventsError>;
}

/// The port runs publish their events through and the event endpoint reads them from.
#[async_trait]
pub trait RunEvents: Send + Sync {
    /// `memory` or `redis` (metric label).
    fn backend(&self) -> &'static str;
    /// Queues an event; never waits and never fails (a full queue or a down backend drops the
    /// event and counts it).
    fn publish(&self, run: &RunRef, event: RunEvent);
    /// Marks the run's stream finished: it is kept for a while for late readers, then dropped.
    fn finish(&self, run: &RunRef);
    /// Whether the run's stream holds anything.
    async fn exists(&self, run: &RunRef) -> Result<bool, EventsError>;
    /// A reader of the run's events.
    async fn reader(&self, run: &RunRef) -> Result<Box<dyn EventReader>, EventsError>;
}

/// A run as the event endpoint sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunInfo {
    pub run: RunRef,
    /// Phase as recorded in status, when known.
    pub phase: Option<String>,
    /// Completed, Failed or Cancelled.
    pub terminal: bool,
    /// Status message (why it failed), when known.
    pub message: Option<String>,
    /// Totals from status (`inputTokens`, `costUSD`, ...), for a final event made from status.
    pub totals: Map<String, Value>,
}

/// Pure: the final event of a run whose stream has none (expired, lost in a Redis outage, or
/// never kept by this process), made from what its status says. Marked `synthesized`.
pub fn synthesized_final(info: &RunInfo, time: &str) -> RunEvent {
    let mut object = info.totals.clone();
    if let Some(phase) = &info.phase {
        object.insert("phase".into(), Value::from(phase.as_str()));
    }
    if let Some(message) = &info.message {
        object.insert("message".into(), Value::from(message.as_str()));
    }
    object.insert("synthesized".into(), Value::Bool(true));
    RunEvent::from_object(&info.run, RUN_FINISHED, object, time)
}

/// Finds runs and their stored provenance log: the Kubernetes API in the operator, the event
/// store itself in one process.
#[async_trait]
pub trait RunDirectory: Send + Sync {
    /// The run named `name` in `namespace`, if it exists.
    async fn lookup(&self, namespace: &str, name: &str) -> Result<Option<RunInfo>, EventsError>;
    /// The run's stored `events.jsonl`, if any.
    async fn event_log(&self, run: &RunInfo) -> Result<Option<Vec<u8>>, EventsError>;
}

/// The milliseconds of an RFC 3339 time (0 when it does not parse).
pub fn rfc3339_millis(time: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(time)
        .map(|t| u64::try_from(t.timestamp_millis()).unwrap_or(0))
        .unwrap_or(0)
}

/// Now as RFC 3339 with milliseconds (the provenance log's format).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Pure: the events of a stored provenance log (`events.jsonl`), for a finished run whose stream
/// is gone. Ids are `<line time in ms>-<line number>`, increasing like the log's lines; lines
/// that are not JSON objects are skipped.
pub fn log_events(run: &RunRef, log: &[u8]) -> Vec<StoredEvent> {
    let text = String::from_utf8_lossy(log);
    let mut out: Vec<StoredEvent> = Vec::new();
    for (line_no, line) in text.lines().enumerate() {
        let Ok(Value::Object(object)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(kind) = object
            .get("kind")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            continue;
        };
        let millis = object
            .get("time")
            .and_then(Value::as_str)
            .map_or(0, rfc3339_millis);
        // Lines are sorted by time; the line number keeps ids increasing even if one is not.
        let previous = out.last().map(|e| e.id.millis).unwrap_or(0);
        let id = EventId {
            millis: millis.max(previous),
            seq: line_no as u64,
        };
        let event = RunEvent::from_object(run, &kind, object, "");
        out.push(StoredEvent {
            id,
            kind: event.kind,
            json: event.json,
        });
    }
    out
}

/// One agenda task as an event shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskInfo {
    pub id: u32,
    pub query: String,
}

/// What every engine event says about the run as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub phase: String,
    pub progress: String,
    pub round: u32,
    pub tokens: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: String,
}

impl Snapshot {
    /// The snapshot of a state.
    pub fn of(state: &RunState) -> Self {
        Self {
            phase: state.phase.to_string(),
            progress: state.progress(),
            round: state.round,
            tokens: state.usage.input_tokens + state.usage.output_tokens,
            cost_usd: format_pico_usd(state.usage.cost_pico_usd),
        }
    }
}

/// Engine events (the provenance records `modelCall`, `search` and `fetch` are published as
/// logged). Serialized with a `type` tag in camelCase.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum EventBody {
    /// The run moved to another phase.
    #[serde(rename_all = "camelCase")]
    Phase {
        from: String,
        to: String,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// Tasks were added to the agenda (the plan, or an evaluator's delegation).
    #[serde(rename_all = "camelCase")]
    AgendaPlanned {
        tasks: Vec<TaskInfo>,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// A researcher started on a task.
    #[serde(rename_all = "camelCase")]
    ResearcherStarted {
        task: u32,
        query: String,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// A researcher made another tool call.
    #[serde(rename_all = "camelCase")]
    ResearcherProgress {
        task: u32,
        tool_calls: u32,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// A researcher handed in its report.
    #[serde(rename_all = "camelCase")]
    ResearcherFinished {
        task: u32,
        searches: u32,
        pages_read: usize,
        input_tokens: u64,
        output_tokens: u64,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// A researcher gave up.
    #[serde(rename_all = "camelCase")]
    ResearcherFailed {
        task: u32,
        reason: String,
        message: String,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// The lead evaluator decided: `synthesize` or `delegate` (with new queries).
    #[serde(rename_all = "camelCase")]
    Evaluation {
        decision: &'static str,
        queries: Vec<String>,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// Planning or synthesis failed for good.
    #[serde(rename_all = "camelCase")]
    StepFailed {
        step: &'static str,
        reason: String,
        message: String,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// The final report was written (not yet stored).
    #[serde(rename_all = "camelCase")]
    ReportWritten {
        partial: bool,
        aborted: bool,
        sources: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        citation_precision: Option<f64>,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// The final report was stored.
    #[serde(rename_all = "camelCase")]
    ReportStored {
        bytes: usize,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// Suspended, resumed, cancelled, time limit reached, or recovered after a restart.
    #[serde(rename_all = "camelCase")]
    Control {
        action: &'static str,
        #[serde(flatten)]
        run: Snapshot,
    },
    /// The last event of every run: its outcome and totals.
    #[serde(rename_all = "camelCase")]
    RunFinished {
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        input_tokens: u64,
        output_tokens: u64,
        llm_calls: u64,
        searches: u32,
        pages_read: u32,
        report: bool,
        #[serde(flatten)]
        run: Snapshot,
    },
}

impl EventBody {
    /// The final event of a run in `state`.
    pub fn finished(state: &RunState) -> Self {
        EventBody::RunFinished {
            reason: state.failure.as_ref().map(|f| f.reason.clone()),
            message: state.failure.as_ref().map(|f| f.message.clone()),
            input_tokens: state.usage.input_tokens,
            output_tokens: state.usage.output_tokens,
            llm_calls: state.usage.llm_calls,
            searches: state.searches,
            pages_read: state.pages_fetched,
            report: state.published,
            run: Snapshot::of(state),
        }
    }
}

/// Pure: turns the executor's (state, event) pairs into stream events, remembering what it saw
/// (phase, tasks, tool calls) so each change is told once.
#[derive(Debug, Default)]
pub struct EventTracker {
    phase: Option<Phase>,
    tasks: std::collections::BTreeMap<u32, (TaskState, u32)>,
}

impl EventTracker {
    /// A tracker that has seen nothing (a resumed run's tasks are told again once).
    pub fn new() -> Self {
        Self::default()
    }

    /// The events an applied `event` and the resulting `state` stand for.
    pub fn derive(&mut self, state: &RunState, event: &Event) -> Vec<EventBody> {
        let run = Snapshot::of(state);
        let mut out = Vec::new();
        if self.phase.is_none() && *event == Event::Recover {
            // A run resumed from its checkpoint: what it finished before was told before the
            // restart; researchers redone now are told as they start again.
            for task in &state.agenda {
                let state = match task.state {
                    TaskState::Running => TaskState::Pending,
                    other => other,
                };
                self.tasks.insert(task.id, (state, 0));
            }
        }
        let before = self.phase.replace(state.phase);
        if before != Some(state.phase) {
            out.push(EventBody::Phase {
                from: before.map_or_else(|| "None".to_string(), |p| p.to_string()),
                to: state.phase.to_string(),
                run: run.clone(),
            });
        }
        let new_tasks: Vec<TaskInfo> = state
            .agenda
            .iter()
            .filter(|t| !self.tasks.contains_key(&t.id))
            .map(|t| TaskInfo {
                id: t.id,
                query: t.query.clone(),
            })
            .collect();
        if !new_tasks.is_empty() {
            out.push(EventBody::AgendaPlanned {
                tasks: new_tasks,
                run: run.clone(),
            });
        }
        match event {
            Event::Evaluated { decision, .. } => out.push(EventBody::Evaluation {
                decision: match decision {
                    Decision::Synthesize => "synthesize",
                    Decision::Delegate { .. } => "delegate",
                },
                queries: match decision {
                    Decision::Synthesize => Vec::new(),
                    Decision::Delegate { queries } => queries.clone(),
                },
                run: run.clone(),
            }),
            Event::PlanFailed { failure, .. } => out.push(EventBody::StepFailed {
                step: "plan",
                reason: failure.reason.clone(),
                message: failure.message.clone(),
                run: run.clone(),
            }),
            Event::SynthesisFailed { failure, .. } => out.push(EventBody::StepFailed {
                step: "synthesis",
                reason: failure.reason.clone(),
                message: failure.message.clone(),
                run: run.clone(),
            }),
            Event::Synthesized { report, .. } => out.push(EventBody::ReportWritten {
                partial: report.partial,
                aborted: report.aborted,
                sources: report.sources.len(),
                citation_precision: report.citation_precision(),
                run: run.clone(),
            }),
            Event::Published => out.push(EventBody::ReportStored {
                bytes: state.final_report.as_ref().map_or(0, |r| r.markdown.len()),
                run: run.clone(),
            }),
            Event::Suspend
            | Event::Resume
            | Event::Cancel
            | Event::TimeLimitReached
            | Event::Recover => out.push(EventBody::Control {
                action: match event {
                    Event::Suspend => "suspended",
                    Event::Resume => "resumed",
                    Event::Cancel => "cancelled",
                    Event::TimeLimitReached => "timeLimitReached",
                    _ => "recovered",
                },
                run: run.clone(),
            }),
            _ => {}
        }
        // Researchers: started, progressed, finished or failed, told from the agenda's states.
        for task in &state.agenda {
            let seen = self.tasks.insert(task.id, (task.state, task.units));
            let (was, units_before) = seen.unwrap_or((TaskState::Pending, 0));
            if task.state != TaskState::Pending && (seen.is_none() || was == TaskState::Pending) {
                out.push(EventBody::ResearcherStarted {
                    task: task.id,
                    query: task.query.clone(),
                    run: run.clone(),
                });
            }
            if task.state == TaskState::Running && task.units > units_before {
                out.push(EventBody::ResearcherProgress {
                    task: task.id,
                    tool_calls: task.units,
                    run: run.clone(),
                });
            }
            if was == task.state && seen.is_some() {
                continue;
            }
            match task.state {
                TaskState::Done => {
                    let report = state.reports.iter().find(|r| r.task_id == task.id);
                    out.push(EventBody::ResearcherFinished {
                        task: task.id,
                        searches: report.map_or(0, |r| r.searches),
                        pages_read: report.map_or(0, |r| r.fetched.len()),
                        input_tokens: report.map_or(0, |r| r.usage.input_tokens),
                        output_tokens: report.map_or(0, |r| r.usage.output_tokens),
                        run: run.clone(),
                    });
                }
                TaskState::Failed => {
                    let (reason, message) = match event {
                        Event::ResearcherFailed { task_id, failure } if *task_id == task.id => {
                            (failure.reason.clone(), failure.message.clone())
                        }
                        _ => (
                            "Stopped".to_string(),
                            task.error.clone().unwrap_or_default(),
                        ),
                    };
                    out.push(EventBody::ResearcherFailed {
                        task: task.id,
                        reason,
                        message,
                        run: run.clone(),
                    });
                }
                TaskState::Pending | TaskState::Running => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
