//! The coordinator (planning), the lead evaluator and the synthesizer: the model calls of deep mode.
//!
//! Parsing is pure and tolerant ([`parse_plan`], [`parse_decision`]); the async functions only
//! talk to the model and map its answers onto reducer events.

use serde_json::Value;

use super::prompts;
use super::reducer::Event;
use super::report;
use super::researcher::failure_from_llm;
use super::state::{Decision, Failure, RunState, reasons};
use crate::llm::json_extract::{extract_json_object, strip_think};
use crate::llm::{CallPurpose, ChatModel, ChatRequest, Message, Usage};
use crate::scrape::truncate_page;

/// Tasks per complexity level (seed 000: 1 → 2, 2 → 3, 3 → 5).
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
    if v.get("intent")
        .and_then(Value::as_str)
        .is_some_and(|i| i.eq_ignore_ascii_case("malicious"))
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

/// Parses the evaluator's answer; anything that is not a JSON delegation counts as synthesis (seed 000).
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
                .filter(|s| !s.is_empty())
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

fn request(
    messages: Vec<Message>,
    json_mode: bool,
    max_tokens: u32,
    purpose: CallPurpose,
) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![],
        json_mode,
        max_tokens,
        purpose,
    }
}

/// Runs the coordinator: one repair retry quoting the parse error, then `PlanUnparseable`.
pub async fn plan(model: &dyn ChatModel, state: &RunState, max_tokens: u32) -> Event {
    let mut usage = Usage::default();
    let mut user = format!("Question: {}", state.input.query);
    if let Some(c) = state
        .input
        .context
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        user.push_str(&format!("\n\nBackground:\n{c}"));
    }
    let mut messages = vec![Message::system(prompts::PLANNER), Message::user(user)];
    let mut last_error = String::new();
    for attempt in 0..2 {
        let resp = match model
            .chat(request(
                messages.clone(),
                true,
                max_tokens,
                CallPurpose::Plan,
            ))
            .await
        {
            Ok(r) => r,
            Err(e) => {
                return Event::PlanFailed {
                    failure: failure_from_llm(&e),
                    usage,
                };
            }
        };
        usage.add(&resp.usage);
        match parse_plan(&resp.content) {
            Ok(PlanOutcome::Agenda(tasks)) => return Event::PlanReady { tasks, usage },
            Ok(PlanOutcome::Refused) => {
                return Event::PlanFailed {
                    failure: Failure::new(
                        reasons::POLICY_REFUSED,
                        "the question was classified as a request to cause harm; no search was made",
                    ),
                    usage,
                };
            }
            Err(e) if attempt == 0 => {
                last_error = e.clone();
                messages.push(Message::assistant(resp.content, vec![]));
                messages.push(Message::user(format!(
                    "Your answer could not be used: {e}. Answer again with ONE JSON object of the form {{\"intent\": \"research\", \"complexity\": 2, \"tasks\": [\"...\"]}} and nothing else."
                )));
            }
            Err(e) => last_error = e,
        }
    }
    Event::PlanFailed {
        failure: Failure::new(
            reasons::PLAN_UNPARSEABLE,
            format!(
                "the planner's answer was not a usable agenda after a repair retry: {last_error}"
            ),
        ),
        usage,
    }
}

/// Runs the lead evaluator after a round.
pub async fn evaluate(model: &dyn ChatModel, state: &RunState, max_tokens: u32) -> Event {
    let max_queries = state.input.limits.max_concurrent_researchers.max(1) as usize;
    let system = prompts::render(
        prompts::EVALUATOR,
        &[
            ("round", &state.round.to_string()),
            ("max_rounds", &state.input.limits.max_rounds.to_string()),
            ("max_queries", &max_queries.to_string()),
        ],
    );
    let mut user = format!("Question: {}\n\nAgenda:\n", state.input.query);
    for t in &state.agenda {
        user.push_str(&format!("- [{:?}] {}\n", t.state, t.query));
    }
    user.push_str("\nFindings so far:\n");
    user.push_str(&reports_digest(state, 12_000));
    match model
        .chat(request(
            vec![Message::system(system), Message::user(user)],
            true,
            max_tokens,
            CallPurpose::Evaluate,
        ))
        .await
    {
        Ok(resp) => Event::Evaluated {
            decision: parse_decision(&resp.content, max_queries),
            usage: resp.usage,
        },
        // An evaluator that cannot answer must not strand the run: synthesize what exists.
        Err(_) => Event::Evaluated {
            decision: Decision::Synthesize,
            usage: Usage::default(),
        },
    }
}

/// Writes the final report with the model (deep mode), then verifies its citations.
pub async fn synthesize(model: &dyn ChatModel, state: &RunState, max_tokens: u32) -> Event {
    let outputs = format!("Requested outputs: {:?}.", state.input.outputs);
    let system = prompts::render(prompts::SYNTHESIZER, &[("outputs", &outputs)]);
    let user = format!(
        "Question: {}\n\nResearchers' reports:\n{}",
        state.input.query,
        reports_digest(state, 20_000)
    );
    match model
        .chat(request(
            vec![Message::system(system), Message::user(user)],
            false,
            max_tokens,
            CallPurpose::Synthesize,
        ))
        .await
    {
        Ok(resp) => {
            let body = strip_think(&resp.content);
            if body.trim().is_empty() {
                return Event::Synthesized {
                    report: report::compose(state, &merged_reports(state), true),
                    usage: resp.usage,
                };
            }
            Event::Synthesized {
                report: report::compose(state, &body, false),
                usage: resp.usage,
            }
        }
        Err(e) => Event::SynthesisFailed {
            failure: Failure::new(reasons::SYNTHESIS_FAILED, failure_from_llm(&e).message),
            usage: Usage::default(),
        },
    }
}

/// Every researcher report, each capped at `chars_each`, for the evaluator and the synthesizer.
fn reports_digest(state: &RunState, chars_each: usize) -> String {
    let mut out = String::new();
    for r in &state.reports {
        out.push_str(&format!(
            "\n--- researcher {} ---\n{}\n",
            r.task_id,
            truncate_page(&r.markdown, chars_each).text
        ));
    }
    out
}

/// The researchers' reports under their task headings: the body of quick and partial reports.
pub fn merged_reports(state: &RunState) -> String {
    if state.reports.len() == 1 {
        return state.reports[0].markdown.clone();
    }
    let mut body = String::new();
    for r in &state.reports {
        let title = state
            .agenda
            .iter()
            .find(|t| t.id == r.task_id)
            .map(|t| t.query.as_str())
            .unwrap_or("Findings");
        body.push_str(&format!(
            "## {title}\n\n{}\n\n",
            demote_headings(&r.markdown)
        ));
    }
    body
}

/// Pushes headings one level down so researcher sections nest under their task heading.
fn demote_headings(md: &str) -> String {
    md.lines()
        .map(|l| {
            if l.starts_with('#') && l.len() < 200 {
                format!("#{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_is_parsed_from_fenced_json_with_prose_and_trailing_commas() {
        let answer = "Sure! Here is the plan:\n```json\n{\"intent\": \"research\", \"complexity\": 2, \"tasks\": [\"a\", \"b\", \"c\",],}\n```";
        assert_eq!(
            parse_plan(answer),
            Ok(PlanOutcome::Agenda(vec![
                "a".into(),
                "b".into(),
                "c".into()
            ]))
        );
    }

    #[test]
    fn plan_size_follows_complexity() {
        let answer = r#"{"complexity": 1, "tasks": ["a", "b", "c", "d"]}"#;
        assert_eq!(
            parse_plan(answer),
            Ok(PlanOutcome::Agenda(vec!["a".into(), "b".into()]))
        );
        assert_eq!(tasks_for_complexity(3), 5);
        let objects = r#"{"tasks": [{"task": "x"}, {"query": "y"}]}"#;
        assert_eq!(
            parse_plan(objects),
            Ok(PlanOutcome::Agenda(vec!["x".into(), "y".into()]))
        );
    }

    #[test]
    fn malicious_intent_is_refused_and_garbage_is_an_error() {
        assert_eq!(
            parse_plan(r#"{"intent": "MALICIOUS", "tasks": []}"#),
            Ok(PlanOutcome::Refused)
        );
        assert!(
            parse_plan("I cannot do JSON")
                .unwrap_err()
                .contains("no JSON object")
        );
        assert_eq!(
            parse_plan(r#"{"tasks": []}"#),
            Err("the `tasks` array is empty".to_string())
        );
    }

    #[test]
    fn decisions_default_to_synthesis() {
        assert_eq!(
            parse_decision("Here is my final report: ...", 3),
            Decision::Synthesize
        );
        assert_eq!(
            parse_decision(r#"{"action": "synthesize"}"#, 3),
            Decision::Synthesize
        );
        assert_eq!(
            parse_decision(r#"{"action": "delegate", "queries": []}"#, 3),
            Decision::Synthesize
        );
        assert_eq!(
            parse_decision(
                r#"{"action": "delegate", "queries": ["a", " ", "b", "c", "d"]}"#,
                3
            ),
            Decision::Delegate {
                queries: vec!["a".into(), "b".into(), "c".into()]
            }
        );
    }
}
