//! Pure: what the console shows of a run, from a cluster's ResearchRun or a standalone run's
//! checkpoint, so both sources render through the same pages.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use quarry_api::{ResearchRun, TaskState};
use quarry_engine::research::machine::state::{
    Phase as EnginePhase, RunState, TaskState as EngineTask,
};

use crate::cli::table;

/// Namespace shown for standalone runs (they have none).
pub const STANDALONE: &str = "standalone";

/// One agenda task and how far it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskView {
    /// The task's question.
    pub query: String,
    /// Pending, Running, Done or Failed.
    pub state: String,
}

/// Usage of one model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCost {
    /// The model.
    pub model: String,
    /// Its cost, USD as a decimal string.
    pub cost_usd: String,
    /// Input and output tokens.
    pub tokens: u64,
    /// Calls it answered.
    pub calls: u64,
}

/// A run as the console shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunView {
    /// Namespace (`standalone` for a local run).
    pub namespace: String,
    /// Name (a local run: its directory's name).
    pub name: String,
    /// The question.
    pub query: String,
    /// quick or deep.
    pub mode: String,
    /// The phase a person sees (`AwaitingApproval` while a plan waits).
    pub phase: String,
    /// `"70%"`, `"exploring"` or `-`.
    pub progress: String,
    /// USD as a decimal string, or `-`.
    pub cost: String,
    /// Input + output tokens.
    pub tokens: u64,
    /// Seconds since creation, when known.
    pub age: String,
    /// Where the report is, for people (`ConfigMap ns/x-report`, a URL, a path), or `-`.
    pub report: String,
    /// The status message (why it failed, how to approve).
    pub message: String,
    /// The agenda.
    pub agenda: Vec<TaskView>,
    /// Cost by model.
    pub by_model: Vec<ModelCost>,
    /// True once Completed, Failed or Cancelled.
    pub finished: bool,
    /// While a plan waits for approval: what the research would cost (`$min–$max`), if known.
    pub estimate: Option<String>,
}

impl RunView {
    /// The run's page in the console.
    pub fn href(&self) -> String {
        format!(
            "/console/runs/{}/{}",
            url_segment(&self.namespace),
            url_segment(&self.name)
        )
    }
}

/// Pure: a path segment with everything but unreserved characters percent-encoded.
pub fn url_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn task_state(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "Pending",
        TaskState::Running => "Running",
        TaskState::Completed => "Completed",
        TaskState::Failed => "Failed",
        TaskState::Cancelled => "Cancelled",
    }
}

/// Pure: a cluster run as the console shows it.
pub fn from_cluster(run: &ResearchRun, now: Timestamp) -> RunView {
    let status = run.status.clone().unwrap_or_default();
    let usage = status.usage.clone().unwrap_or_default();
    let namespace = run.metadata.namespace.clone().unwrap_or_default();
    let name = run.metadata.name.clone().unwrap_or_default();
    let report = status
        .report
        .as_ref()
        .and_then(|r| {
            r.config_map
                .as_ref()
                .map(|c| format!("ConfigMap {namespace}/{c}"))
                .or_else(|| r.object_url.clone())
        })
        .unwrap_or_else(|| table::NONE.to_string());
    RunView {
        query: run.spec.query.clone(),
        mode: run.spec.mode.to_string(),
        phase: table::phase_label(run),
        progress: status
            .progress
            .clone()
            .unwrap_or_else(|| table::NONE.into()),
        cost: usage.cost_usd.clone().unwrap_or_else(|| table::NONE.into()),
        tokens: usage.input_tokens + usage.output_tokens,
        age: run.metadata.creation_timestamp.as_ref().map_or_else(
            || table::NONE.to_string(),
            |t| table::human_duration(now.as_second() - t.0.as_second()),
        ),
        report,
        message: status.message.clone().unwrap_or_default(),
        agenda: status
            .agenda
            .iter()
            .map(|t| TaskView {
                query: t.query.clone(),
                state: task_state(t.state).to_string(),
            })
            .collect(),
        by_model: usage
            .by_model
            .iter()
            .map(|m| ModelCost {
                model: m.model.clone(),
                cost_usd: m.cost_usd.clone(),
                tokens: m.input_tokens + m.output_tokens,
                calls: m.llm_calls,
            })
            .collect(),
        finished: run.is_finished(),
        estimate: status
            .approval
            .as_ref()
            .and_then(|a| a.estimated_cost_usd.as_ref())
            .map(|c| format!("${}–${}", c.min, c.max)),
        namespace,
        name,
    }
}

/// Pure: a standalone run (its checkpoint) as the console shows it; `name` is its directory's
/// name, `report` where its report is.
pub fn from_standalone(state: &RunState, name: &str, report: Option<String>) -> RunView {
    let done = state
        .agenda
        .iter()
        .filter(|t| matches!(t.state, EngineTask::Done | EngineTask::Failed))
        .count();
    let progress = if state.phase.is_terminal() {
        "100%".to_string()
    } else if state.agenda.is_empty() {
        table::NONE.to_string()
    } else {
        format!("{}%", done * 100 / state.agenda.len())
    };
    let phase = match state.phase {
        EnginePhase::Planning if state.approval.waiting => "AwaitingApproval".to_string(),
        p => p.to_string(),
    };
    RunView {
        namespace: STANDALONE.to_string(),
        name: name.to_string(),
        query: state.input.query.clone(),
        mode: format!("{:?}", state.input.mode).to_lowercase(),
        phase,
        progress,
        cost: state.usage.cost_usd_string(),
        tokens: state.usage.input_tokens + state.usage.output_tokens,
        age: table::NONE.to_string(),
        report: report.unwrap_or_else(|| table::NONE.to_string()),
        message: state
            .failure
            .as_ref()
            .map(|f| format!("{}: {}", f.reason, f.message))
            .unwrap_or_default(),
        agenda: state
            .agenda
            .iter()
            .map(|t| TaskView {
                query: t.query.clone(),
                state: format!("{:?}", t.state),
            })
            .collect(),
        by_model: state
            .usage_by_model
            .iter()
            .map(|(model, u)| ModelCost {
                model: model.clone(),
                cost_usd: u.cost_usd_string(),
                tokens: u.input_tokens + u.output_tokens,
                calls: u.llm_calls,
            })
            .collect(),
        finished: state.phase.is_terminal(),
        estimate: None,
    }
}
