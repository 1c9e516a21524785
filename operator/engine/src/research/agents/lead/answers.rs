//! The planner's and the evaluator's answers, parsed: pure and tolerant.

use serde_json::Value;

use super::super::prompts;
use crate::llm::json_extract::extract_json_object;
use crate::research::machine::state::Decision;

/// Tasks per complexity level (1 → 2, 2 → 3, 3 → 5).
pub fn tasks_for_complexity(complexity: u64) -> usize {
    match complexity {
        0 | 1 => 2,
        2 => 3,
        _ => 5,
    }
}

/// What the coordinator's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanOutcome {
    Agenda(Vec<String>),
    Refused,
}

/// Parses the coordinator's answer into an agenda; the error quotes what was wrong for a repair retry.
pub fn parse_plan(answer: &str) -> Result<PlanOutcome, String> {
    let v = extract_json_object(answer).map_err(|e| e.to_string())?;
    // The planner classifies the question's intent; only MALICIOUS stops the run (the user asked
    // for research).
    if v.get("intent")
        .and_then(Value::as_str)
        .is_some_and(|i| i.trim().eq_ignore_ascii_case("malicious"))
    {
        return Ok(PlanOutcome::Refused);
    }
    let tasks: Vec<String> = match v.get("tasks").or_else(|| v.get("agenda")) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|t| match t {
                Value::String(s) => Some(s.trim().to_string()),
                Value::Object(o) => o
                    .get("task")
                    .or_else(|| o.get("query"))
                    .or_else(|| o.get("title"))
                    .and_then(Value::as_str)
                    .map(|s| s.trim().to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect(),
        _ => return Err("the JSON object has no `tasks` array".to_string()),
    };
    let copied = tasks.len();
    let tasks: Vec<String> = tasks
        .into_iter()
        .filter(|t| !prompts::is_placeholder(t, prompts::PLANNER))
        .collect();
    if tasks.is_empty() && copied > 0 {
        return Err(
            "the tasks are the example's placeholders; write tasks about the question itself"
                .to_string(),
        );
    }
    if tasks.is_empty() {
        return Err("the `tasks` array is empty".to_string());
    }
    let wanted = v
        .get("complexity")
        .and_then(Value::as_u64)
        .map(tasks_for_complexity)
        .unwrap_or(5);
    Ok(PlanOutcome::Agenda(
        tasks.into_iter().take(wanted.max(2)).collect(),
    ))
}

/// Like [`parse_plan`], but an agenda shorter than its complexity asks for (2, 3 or
/// 5 tasks) is an error, so the first answer gets a repair retry that names the shortfall.
pub fn parse_plan_strict(answer: &str) -> Result<PlanOutcome, String> {
    let outcome = parse_plan(answer)?;
    if let PlanOutcome::Agenda(tasks) = &outcome {
        let complexity = extract_json_object(answer)
            .ok()
            .and_then(|v| v.get("complexity").and_then(Value::as_u64))
            .unwrap_or(1);
        let wanted = tasks_for_complexity(complexity);
        if tasks.len() < wanted {
            return Err(format!(
                "the agenda has {} task(s) but complexity {complexity} needs exactly {wanted} distinct tasks",
                tasks.len()
            ));
        }
    }
    Ok(outcome)
}

/// Parses the evaluator's answer; anything that is not a JSON delegation counts as synthesis.
pub fn parse_decision(answer: &str, max_queries: usize) -> Decision {
    let Ok(v) = extract_json_object(answer) else {
        return Decision::Synthesize;
    };
    let delegate = v
        .get("action")
        .and_then(Value::as_str)
        .is_some_and(|a| a.eq_ignore_ascii_case("delegate"));
    let queries: Vec<String> = v
        .get("queries")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::trim)
                .filter(|s| !prompts::is_placeholder(s, prompts::EVALUATOR))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if delegate && !queries.is_empty() {
        Decision::Delegate {
            queries: queries.into_iter().take(max_queries).collect(),
        }
    } else {
        Decision::Synthesize
    }
}
