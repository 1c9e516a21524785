//! The wire protocol of scale-out mode, and its pure decisions.
//!
//! Streams and keys:
//! - `quarry:tasks` (consumer group `quarry-workers`): one entry per researcher task dispatch,
//!   fields `run`, `task` (for people reading the stream), `m` (the [`TaskMessage`] as JSON) and,
//!   for operator runs, `k` (the run's API keys sealed for that message, see [`super::seal`]).
//! - `quarry:run:<run>:results`: what workers report back to the run's leader, field `m` (a
//!   [`ResultMessage`]): progress with usage and provenance lines, then one terminal result.
//! - `quarry:run:<run>:steer:<task>`: sibling reports steered into a running task, field `m`.
//! - `quarry:run:<run>:urls`: the run's URL pool, a hash URL -> task id.
//! - `quarry:run:<run>:cancelled`: attempt ids the leader abandoned (a set);
//!   `quarry:run:<run>:done`: set once the run ended, so queued tasks of it are dropped unrun.
//!
//! Keys never travel in plaintext: the task message carries the profile spec, whose key fields
//! are references; an operator run's key values are in the sealed field `k`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use quarry_api::ResearchProfileSpec;
use quarry_engine::llm::router::{CallRecord, RunTotal, SourceRecord};
use quarry_engine::llm::{CallPurpose, Usage};
use quarry_engine::research::agents::researcher::INJECTED_REPORT_CHARS;
use quarry_engine::research::machine::state::{Failure, ResearcherReport, RunInput};

/// The stream researcher tasks are published to (the chart's KEDA trigger reads it).
pub const TASKS_STREAM: &str = "quarry:tasks";
/// The consumer group of the workers.
pub const GROUP: &str = "quarry-workers";
/// Version of the messages; a worker refuses others.
pub const VERSION: u32 = 1;
/// Largest task message: the profile, the run input and up to ~50 injected reports of 50k chars.
pub const MAX_TASK_BYTES: usize = 4 << 20;
/// Largest result message: a researcher report with the text of the pages it read.
pub const MAX_RESULT_BYTES: usize = 8 << 20;
/// Largest steering message: one report's Markdown (50k characters, up to 4 bytes each).
pub const MAX_STEER_BYTES: usize = 256 << 10;
/// Provenance lines carried by one progress message at most (the rest follow in the next).
pub const MAX_LINES_PER_MESSAGE: usize = 256;
/// Longest run key (operator runs use their UID, standalone runs 32 hex digits).
pub const MAX_RUN_KEY: usize = 128;
/// How long per-run keys live after their last write: a run that died without cleaning up
/// leaves nothing behind for longer.
pub const RUN_KEY_TTL: Duration = Duration::from_secs(24 * 3600);
/// Deliveries of one task entry before it is given up (a task that kills every worker).
pub const MAX_DELIVERIES: u64 = 5;

/// Failure reasons of remote researchers (a run's condition reason when they end it).
pub mod reasons {
    /// A worker has no usable API key for the task: sealed keys it cannot open (no or another
    /// sealing key), or for a standalone run an environment variable that is not set.
    pub const SECRET_UNAVAILABLE: &str = "SecretUnavailable";
    /// Every worker that took the task stopped without finishing it.
    pub const WORKER_LOST: &str = "WorkerLost";
    /// The task could not be queued or its result not read (Redis down).
    pub const WORK_QUEUE_UNAVAILABLE: &str = "WorkQueueUnavailable";
    /// The worker could not build the researcher from the task (a message it cannot read, a
    /// profile it cannot use).
    pub const WORKER_MISCONFIGURED: &str = "WorkerMisconfigured";
}

/// Errors reading a message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtocolError {
    #[error("message of {size} bytes exceeds the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("message is not valid JSON for its kind: {0}")]
    Malformed(String),
    #[error("message version {found} is not supported (this worker speaks {VERSION})")]
    Version { found: u32 },
    #[error("run key {0:?} is not 1..=128 characters of [A-Za-z0-9._-]")]
    RunKey(String),
}

/// True for a run key that is safe inside Redis key names.
pub fn valid_run_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= MAX_RUN_KEY
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The Redis keys of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunKeys {
    pub results: String,
    pub urls: String,
    pub cancelled: String,
    pub done: String,
    prefix: String,
}

impl RunKeys {
    /// The keys of run `run` (a valid run key).
    pub fn new(run: &str) -> Self {
        let prefix = format!("quarry:run:{run}");
        Self {
            results: format!("{prefix}:results"),
            urls: format!("{prefix}:urls"),
            cancelled: format!("{prefix}:cancelled"),
            done: format!("{prefix}:done"),
            prefix,
        }
    }
    /// The steering stream of one task.
    pub fn steer(&self, task_id: u32) -> String {
        format!("{}:steer:{task_id}", self.prefix)
    }
}

/// The managed SearchEngine a leader resolved for the run's profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireSearch {
    pub backend: String,
    pub url: String,
}

/// What every task of one run shares: where to report, how to build the researcher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunHeader {
    pub run: String,
    /// Namespace of the ResearchRun (keys sealed in the entry's field `k`); `None` for a
    /// standalone run (keys from the worker's env).
    pub namespace: Option<String>,
    /// Name of the ResearchProfile (metric labels, messages).
    pub profile_name: String,
    /// The profile spec: Secret references and environment variable names, never values.
    pub profile: ResearchProfileSpec,
    pub managed_search: Option<WireSearch>,
    /// Specialised tools the run asks for (security, Stack Exchange); `None`: all configured.
    pub specialised: Option<(bool, bool)>,
}

/// One researcher task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskMessage {
    pub v: u32,
    #[serde(flatten)]
    pub header: RunHeader,
    pub task_id: u32,
    pub round: u32,
    /// Unique per dispatch; reclaimed deliveries of the same entry share it.
    pub attempt: String,
    pub query: String,
    pub input: RunInput,
    /// Sibling reports to inject, reduced to what injection reads (task id and Markdown).
    pub injected: Vec<ResearcherReport>,
    /// What the run had spent when the task was dispatched (the worker's budget guard starts there).
    pub spent: Usage,
}

/// One model call in the provenance log, as it travels from a worker to the leader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireCall {
    pub time: String,
    pub tier: String,
    pub provider: String,
    pub model: String,
    pub purpose: CallPurpose,
    pub outcome: String,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: String,
    /// The exact cost (`costUSD` is rounded).
    #[serde(rename = "costPicoUSD", default)]
    pub cost_pico_usd: u64,
    pub duration_ms: u64,
    pub trace_id: Option<String>,
    pub task: Option<u32>,
}

/// One search or page read in the provenance log, as it travels to the leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireSource {
    pub time: String,
    pub kind: String,
    pub subject: String,
    pub cache: String,
    pub outcome: String,
    pub duration_ms: u64,
    pub task: Option<u32>,
}

/// The label among `known` equal to `value`, or `"unknown"` (log labels are static strings).
fn label(value: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .find(|k| **k == value)
        .copied()
        .unwrap_or("unknown")
}

const CALL_OUTCOMES: [&str; 9] = [
    "ok",
    "rate_limited",
    "unavailable",
    "timeout",
    "invalid_output",
    "rejected",
    "budget_refused",
    "circuit_open",
    "unknown",
];

impl From<&CallRecord> for WireCall {
    fn from(c: &CallRecord) -> Self {
        Self {
            time: c.time.clone(),
            tier: c.tier.clone(),
            provider: c.provider.clone(),
            model: c.model.clone(),
            purpose: c.purpose,
            outcome: c.outcome.to_string(),
            input_tokens: c.input_tokens,
            cached_input_tokens: c.cached_input_tokens,
            output_tokens: c.output_tokens,
            cost_usd: c.cost_usd.clone(),
            cost_pico_usd: c.cost_pico_usd,
            duration_ms: c.duration_ms,
            trace_id: c.trace_id.clone(),
            task: c.task,
        }
    }
}

impl WireCall {
    /// The provenance record the leader logs (its run total is stamped when it is logged).
    pub fn into_record(self) -> CallRecord {
        CallRecord {
            time: self.time,
            kind: "modelCall",
            tier: self.tier,
            provider: self.provider,
            model: self.model,
            purpose: self.purpose,
            outcome: label(&self.outcome, &CALL_OUTCOMES),
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
            duration_ms: self.duration_ms,
            trace_id: self.trace_id,
            task: self.task,
            cost_pico_usd: self.cost_pico_usd,
            run_total: RunTotal::default(),
        }
    }
}

impl From<&SourceRecord> for WireSource {
    fn from(s: &SourceRecord) -> Self {
        Self {
            time: s.time.clone(),
            kind: s.kind.to_string(),
            subject: s.subject.clone(),
            cache: s.cache.to_string(),
            outcome: s.outcome.to_string(),
            duration_ms: s.duration_ms,
            task: s.task,
        }
    }
}

impl WireSource {
    /// The provenance record the leader logs.
    pub fn into_record(self) -> SourceRecord {
        SourceRecord {
            time: self.time,
            kind: label(&self.kind, &["search", "fetch", "unknown"]),
            subject: self.subject.chars().take(2048).collect(),
            cache: label(&self.cache, &["hit", "miss", "error", "unknown"]),
            outcome: label(&self.outcome, &["ok", "empty", "error", "unknown"]),
            duration_ms: self.duration_ms,
            task: self.task,
        }
    }
}

/// Who produced a result: the task, its dispatch and the delivery that ran it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Origin {
    pub task_id: u32,
    pub round: u32,
    pub attempt: String,
    /// `<attempt>/<consumer>/<delivery>`: one worker's run of the task.
    pub execution: String,
    /// Position in the execution's messages, from 1; a retried publish repeats it.
    pub seq: u64,
}

/// What a worker reports on a run's results stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ResultMessage {
    /// Spend since the previous message: tool units so far, the usage of successful calls,
    /// that usage per model, and the provenance lines (failed calls included).
    #[serde(rename_all = "camelCase")]
    Progress {
        #[serde(flatten)]
        origin: Origin,
        units: u32,
        usage: Usage,
        by_model: BTreeMap<String, Usage>,
        calls: Vec<WireCall>,
        sources: Vec<WireSource>,
    },
    /// The task's report. Every spend of the execution was reported before it.
    Finished {
        #[serde(flatten)]
        origin: Origin,
        report: ResearcherReport,
    },
    /// The task failed for good (spend reported before, as for `Finished`).
    Failed {
        #[serde(flatten)]
        origin: Origin,
        failure: Failure,
    },
}

impl ResultMessage {
    /// Who produced it.
    pub fn origin(&self) -> &Origin {
        match self {
            ResultMessage::Progress { origin, .. }
            | ResultMessage::Finished { origin, .. }
            | ResultMessage::Failed { origin, .. } => origin,
        }
    }
}

/// A sibling report as steering needs it: task id and Markdown, cut to the injected size.
pub fn slim_report(report: &ResearcherReport) -> ResearcherReport {
    ResearcherReport {
        task_id: report.task_id,
        markdown: report
            .markdown
            .chars()
            .take(INJECTED_REPORT_CHARS)
            .collect(),
        fetched: Vec::new(),
        seen: Vec::new(),
        pages: Vec::new(),
        irrelevant: vec![],
        queries: vec![],
        searches: report.searches,
        usage: Usage::default(),
    }
}

fn check_size(bytes: &[u8], limit: usize) -> Result<(), ProtocolError> {
    if bytes.len() > limit {
        return Err(ProtocolError::TooLarge {
            size: bytes.len(),
            limit,
        });
    }
    Ok(())
}

fn malformed(e: serde_json::Error) -> ProtocolError {
    ProtocolError::Malformed(e.to_string())
}

/// Encodes a task; injected reports are slimmed first, and the result must fit the bound.
pub fn encode_task(task: &TaskMessage) -> Result<Vec<u8>, ProtocolError> {
    let mut slim = task.clone();
    slim.injected = task.injected.iter().map(slim_report).collect();
    let bytes = serde_json::to_vec(&slim).map_err(malformed)?;
    check_size(&bytes, MAX_TASK_BYTES)?;
    Ok(bytes)
}

/// Decodes and checks a task message.
pub fn decode_task(bytes: &[u8]) -> Result<TaskMessage, ProtocolError> {
    check_size(bytes, MAX_TASK_BYTES)?;
    let task: TaskMessage = serde_json::from_slice(bytes).map_err(malformed)?;
    if task.v != VERSION {
        return Err(ProtocolError::Version { found: task.v });
    }
    if !valid_run_key(&task.header.run) {
        return Err(ProtocolError::RunKey(task.header.run));
    }
    Ok(task)
}

/// Encodes a result, within its bound (a report over it cannot be delivered).
pub fn encode_result(message: &ResultMessage) -> Result<Vec<u8>, ProtocolError> {
    let bytes = serde_json::to_vec(message).map_err(malformed)?;
    check_size(&bytes, MAX_RESULT_BYTES)?;
    Ok(bytes)
}

/// Decodes a result message.
pub fn decode_result(bytes: &[u8]) -> Result<ResultMessage, ProtocolError> {
    check_size(bytes, MAX_RESULT_BYTES)?;
    serde_json::from_slice(bytes).map_err(malformed)
}

/// Encodes a report for steering (slimmed, so always within its bound).
pub fn encode_steer(report: &ResearcherReport) -> Result<Vec<u8>, ProtocolError> {
    let bytes = serde_json::to_vec(&slim_report(report)).map_err(malformed)?;
    check_size(&bytes, MAX_STEER_BYTES)?;
    Ok(bytes)
}

/// Decodes a steered report.
pub fn decode_steer(bytes: &[u8]) -> Result<ResearcherReport, ProtocolError> {
    check_size(bytes, MAX_STEER_BYTES)?;
    serde_json::from_slice(bytes).map_err(malformed)
}

/// The leader's memory of what it applied, so every result counts once: progress per execution
/// in sequence order (a retried publish is dropped), one terminal result per (task, round)
/// (a reclaimed or re-dispatched task that also finishes is ignored).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ResultBook {
    progress: BTreeMap<String, u64>,
    finished: BTreeSet<(u32, u32)>,
}

impl ResultBook {
    /// Executions remembered at most; the oldest are forgotten past it (a run has tens).
    pub const MAX_EXECUTIONS: usize = 4096;

    /// True when a progress message should be applied (its usage counted).
    pub fn admit_progress(&mut self, origin: &Origin) -> bool {
        match self.progress.get(&origin.execution) {
            Some(last) if *last >= origin.seq => false,
            _ => {
                if self.progress.len() >= Self::MAX_EXECUTIONS
                    && !self.progress.contains_key(&origin.execution)
                    && let Some(first) = self.progress.keys().next().cloned()
                {
                    self.progress.remove(&first);
                }
                self.progress.insert(origin.execution.clone(), origin.seq);
                true
            }
        }
    }

    /// True when a terminal result should be handed to the run: the first for its task and
    /// round while the run awaits one.
    pub fn admit_terminal(&mut self, origin: &Origin, awaited: bool) -> bool {
        awaited && self.finished.insert((origin.task_id, origin.round))
    }
}

/// What a worker does with a task entry it reclaimed from a silent consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaim {
    /// The owner may still be alive: leave it.
    NotYet,
    /// Run it again.
    Run,
    /// Too many workers died on it: report it failed instead of killing another.
    GiveUp,
}

/// Pure: whether a pending entry idle for `idle` after `deliveries` deliveries is reclaimed.
/// Live workers refresh their entries every [`heartbeat_interval`], so an entry idle for the
/// visibility timeout belongs to a dead (or partitioned) worker.
pub fn reclaim_decision(
    idle: Duration,
    deliveries: u64,
    visibility_timeout: Duration,
    max_deliveries: u64,
) -> Reclaim {
    if idle < visibility_timeout {
        Reclaim::NotYet
    } else if deliveries >= max_deliveries {
        Reclaim::GiveUp
    } else {
        Reclaim::Run
    }
}

/// How often a worker refreshes the entries it runs: three heartbeats fit in one visibility
/// timeout, so two can be lost (a slow Redis, a GC-like pause) before the entry is reclaimed.
pub fn heartbeat_interval(visibility_timeout: Duration) -> Duration {
    (visibility_timeout / 3).max(Duration::from_millis(100))
}

/// Usage in `now` that is not in `before`, per model (the ledger only grows).
pub fn usage_delta(
    now: &BTreeMap<String, Usage>,
    before: &BTreeMap<String, Usage>,
) -> BTreeMap<String, Usage> {
    now.iter()
        .filter_map(|(model, u)| {
            let b = before.get(model).copied().unwrap_or_default();
            let d = Usage {
                input_tokens: u.input_tokens.saturating_sub(b.input_tokens),
                cached_input_tokens: u.cached_input_tokens.saturating_sub(b.cached_input_tokens),
                output_tokens: u.output_tokens.saturating_sub(b.output_tokens),
                cost_pico_usd: u.cost_pico_usd.saturating_sub(b.cost_pico_usd),
                llm_calls: u.llm_calls.saturating_sub(b.llm_calls),
            };
            (d != Usage::default()).then(|| (model.clone(), d))
        })
        .collect()
}

/// A profile for the queue's tests: a model key by Secret and by environment variable, and a
/// search provider key.
#[cfg(test)]
pub(crate) fn test_profile() -> ResearchProfileSpec {
    const PROFILE: &str = r#"
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata: {name: p}
spec:
  models:
    primary: {baseURL: "https://api.example.com/v1", model: m, apiKeyEnv: OPENAI_KEY, apiKeySecretRef: {name: model-keys, key: openai}}
  search:
    url: "http://searx:8080"
    providers:
      - {kind: brave, apiKeySecretRef: {name: search-keys, key: brave}}
"#;
    quarry_api::ResearchProfile::from_yaml(PROFILE)
        .map(|p| p.spec)
        .unwrap_or_else(|e| panic!("test profile: {e}"))
}

#[cfg(test)]
mod tests;
