//! `quarry run --output json`: the run's events as JSON lines on stdout, like the JSON output
//! modes of coding agents (one object per line, `type` first), for agents that call Quarry.
//!
//! Sources today: the executor's [`RunObserver`] (state changes) and the model router's
//! provenance records (model calls, searches, page reads). [`event_json`], [`call_json`] and
//! [`source_json`] are the whole format; a run event stream can feed [`JsonEvents`] instead.
//!
//! Line types: `run_start`, `run_resume`, `plan`, `plan_failed`, `researcher_progress`,
//! `researcher_end`, `researcher_failed`, `evaluation`, `report_written`, `synthesis_failed`,
//! `report_stored`, `time_limit`, `suspended`, `resumed`, `cancelled`, `spend_recovered` (a
//! resumed run's earlier spend), `model_call`, `search`, `fetch`, and last `run_end`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use crate::standalone::error::StandaloneError;
use quarry_engine::llm::router::{CallRecord, SourceRecord, SpendGuard};
use quarry_engine::llm::{Usage, format_pico_usd};
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::{Decision, Mode, RunState};
use quarry_engine::research::shell::executor::RunObserver;

fn usage_json(usage: &Usage) -> Value {
    json!({
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "costUSD": format_pico_usd(usage.cost_pico_usd),
        "llmCalls": usage.llm_calls,
    })
}

/// Pure: the JSON line for one state change, or `None` when it deserves none. Every line
/// carries the run's phase, progress and usage after the change.
pub fn event_json(state: &RunState, event: &Event) -> Option<Value> {
    let mut line = match event {
        Event::Start => json!({
            "type": "run_start",
            "query": state.input.query,
            "mode": match state.input.mode { Mode::Quick => "quick", Mode::Deep => "deep" },
            "outputs": state.input.outputs,
        }),
        Event::Recover => json!({"type": "run_resume", "query": state.input.query}),
        Event::PlanReady { tasks, .. } => json!({"type": "plan", "tasks": tasks}),
        Event::PlanFailed { failure, .. } => {
            json!({"type": "plan_failed", "reason": failure.reason, "message": failure.message})
        }
        Event::ResearcherProgress { task_id, units, .. } => {
            json!({"type": "researcher_progress", "task": task_id, "toolCalls": units})
        }
        Event::ResearcherFinished { report } => json!({
            "type": "researcher_end",
            "task": report.task_id,
            "searches": report.searches,
            "pagesRead": report.fetched.len(),
        }),
        Event::ResearcherFailed { task_id, failure } => json!({
            "type": "researcher_failed",
            "task": task_id,
            "reason": failure.reason,
            "message": failure.message,
        }),
        Event::Evaluated {
            decision: Decision::Synthesize,
            ..
        } => json!({"type": "evaluation", "decision": "synthesize"}),
        Event::Evaluated {
            decision: Decision::Delegate { queries },
            ..
        } => json!({"type": "evaluation", "decision": "delegate", "tasks": queries}),
        Event::Synthesized { report, .. } => json!({
            "type": "report_written",
            "partial": report.partial,
            "sources": report.sources.len(),
        }),
        Event::SynthesisFailed { failure, .. } => json!({
            "type": "synthesis_failed",
            "reason": failure.reason,
            "message": failure.message,
        }),
        Event::Published => json!({"type": "report_stored"}),
        Event::TimeLimitReached => json!({"type": "time_limit"}),
        Event::Suspend => json!({"type": "suspended"}),
        Event::Resume => json!({"type": "resumed"}),
        Event::Cancel => json!({"type": "cancelled"}),
        Event::SpendRecovered { usage } => json!({
            "type": "spend_recovered",
            "recovered": usage_json(usage),
        }),
        Event::ApprovalWaitStarted { estimate, .. } => json!({
            "type": "awaiting_approval",
            "tasks": state.agenda.iter().map(|t| t.query.clone()).collect::<Vec<_>>(),
            "estimatedCostUSD": estimate.map(|(min, max)| json!({
                "min": format_pico_usd(min),
                "max": format_pico_usd(max),
            })),
        }),
        Event::Approve { agenda } => json!({"type": "approved", "agenda": agenda}),
        Event::ApprovalTimedOut => json!({"type": "approval_timeout"}),
    };
    line["phase"] = json!(state.phase.to_string());
    line["progress"] = json!(state.progress());
    line["usage"] = usage_json(&state.usage);
    Some(line)
}

/// Pure: the JSON line of one model call (the provenance record, typed `model_call`).
pub fn call_json(call: &CallRecord) -> Value {
    let mut line = json!({"type": "model_call"});
    if let (Some(map), Ok(Value::Object(mut fields))) =
        (line.as_object_mut(), serde_json::to_value(call))
    {
        fields.remove("kind");
        map.extend(fields);
    }
    line
}

/// Pure: the JSON line of one search or page read (typed `search` or `fetch`).
pub fn source_json(record: &SourceRecord) -> Value {
    let mut line = json!({"type": record.kind});
    if let (Some(map), Ok(Value::Object(mut fields))) =
        (line.as_object_mut(), serde_json::to_value(record))
    {
        fields.remove("kind");
        map.extend(fields);
    }
    line
}

/// Pure: the closing line, with where the report is or why there is none.
pub fn end_json(last: Option<&RunState>, result: &Result<PathBuf, StandaloneError>) -> Value {
    let mut line = json!({"type": "run_end", "ok": result.is_ok()});
    if let Some(state) = last {
        line["phase"] = json!(state.phase.to_string());
        line["usage"] = usage_json(&state.usage);
        line["searches"] = json!(state.searches);
        line["pagesRead"] = json!(state.pages_fetched);
    }
    match result {
        Ok(path) => line["report"] = json!(path.display().to_string()),
        Err(e) => {
            line["error"] = json!(e.to_string());
            if let StandaloneError::NoEvidence { path, .. } = e {
                line["report"] = json!(path.display().to_string());
            }
        }
    }
    line
}

/// Pure: the closing line of a run that could not start.
pub fn failure_json(error: &str) -> Value {
    json!({"type": "run_end", "ok": false, "error": error})
}

#[derive(Default)]
struct Cursor {
    /// Model calls emitted, counting those the router dropped past its cap.
    calls: u64,
    /// Searches and page reads emitted.
    sources: usize,
    /// Tool-call units last emitted per researcher (usage-only updates get no line).
    units: BTreeMap<u32, u32>,
    /// The state after the last change.
    last: Option<RunState>,
}

/// A [`RunObserver`] writing the run's events as JSON lines.
pub struct JsonEvents {
    out: Mutex<Box<dyn Write + Send>>,
    spend: OnceLock<Arc<SpendGuard>>,
    cursor: Mutex<Cursor>,
}

impl std::fmt::Debug for JsonEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonEvents")
    }
}

impl JsonEvents {
    /// Lines go to stdout.
    pub fn stdout() -> Arc<Self> {
        Self::to_writer(Box::new(std::io::stdout()))
    }

    /// Lines go to `out` (tests).
    pub fn to_writer(out: Box<dyn Write + Send>) -> Arc<Self> {
        Arc::new(Self {
            out: Mutex::new(out),
            spend: OnceLock::new(),
            cursor: Mutex::new(Cursor::default()),
        })
    }

    /// Connects the router's provenance records of the run (model calls, searches, reads).
    pub fn attach(&self, spend: Arc<SpendGuard>) {
        let _ = self.spend.set(spend);
    }

    fn cursor(&self) -> std::sync::MutexGuard<'_, Cursor> {
        self.cursor.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lines for the provenance records not emitted yet, oldest first.
    fn new_records(&self, cursor: &mut Cursor) -> Vec<Value> {
        let Some(spend) = self.spend.get() else {
            return Vec::new();
        };
        let (calls, dropped) = spend.calls();
        let mut timed: Vec<(String, Value)> = Vec::new();
        let start = usize::try_from(cursor.calls.saturating_sub(dropped)).unwrap_or(usize::MAX);
        for call in calls.iter().skip(start) {
            timed.push((call.time.clone(), call_json(call)));
        }
        cursor.calls = dropped + calls.len() as u64;
        let sources = spend.sources();
        for record in sources.iter().skip(cursor.sources) {
            timed.push((record.time.clone(), source_json(record)));
        }
        cursor.sources = sources.len();
        // RFC 3339 in UTC with fixed precision sorts as text.
        timed.sort_by(|a, b| a.0.cmp(&b.0));
        timed.into_iter().map(|(_, v)| v).collect()
    }

    fn write(&self, lines: &[Value]) {
        if lines.is_empty() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        for line in lines {
            // A closed stdout must not stop the run: the report is still written to its file.
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
    }

    /// Emits the records not yet emitted and the `run_end` line.
    pub fn finish(&self, result: &Result<PathBuf, StandaloneError>) {
        let mut cursor = self.cursor();
        let mut lines = self.new_records(&mut cursor);
        lines.push(end_json(cursor.last.as_ref(), result));
        drop(cursor);
        self.write(&lines);
    }
}

impl RunObserver for JsonEvents {
    fn on_change(&self, state: &RunState, event: &Event) {
        let mut cursor = self.cursor();
        let mut lines = self.new_records(&mut cursor);
        let repeated = match event {
            Event::ResearcherProgress { task_id, units, .. } => {
                cursor.units.insert(*task_id, *units) == Some(*units)
            }
            _ => false,
        };
        if !repeated && let Some(mut line) = event_json(state, event) {
            line["time"] =
                json!(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
            lines.push(line);
        }
        cursor.last = Some(state.clone());
        drop(cursor);
        self.write(&lines);
    }
}

#[cfg(test)]
mod tests;
