//! Unit tests of `lead`.

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
fn synthesis_material_fits_a_small_context_window() {
    use crate::research::machine::state::{Mode, ResearcherReport, RunInput};
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    for id in 0..3 {
        state.reports.push(ResearcherReport {
            task_id: id,
            markdown: "r".repeat(30_000),
            fetched: vec![],
            seen: vec![],
            pages: vec![],
            irrelevant: vec![],
            queries: vec![],
            searches: 1,
            usage: Usage::default(),
        });
    }
    let notes: Vec<SourceNote> = (0..8)
        .map(|i| SourceNote {
            url: format!("http://h/{i}"),
            title: "t".into(),
            text: "n".repeat(5_000),
            summarized: true,
        })
        .collect();
    let budget = material_budget(8192);
    assert_eq!(budget, 16_384);
    let small = synthesis_material(&state, &notes, budget);
    // Reports and notes are cut to their shares; fences and notices add a little.
    assert!(small.len() < budget + 3_000, "{}", small.len());
    assert_eq!(
        small.matches("<page url=").count(),
        8,
        "every source keeps its note"
    );
    let large = synthesis_material(&state, &notes, material_budget(1_000_000));
    assert!(large.len() > 3 * 20_000 && large.len() < 3 * 21_000 + 8 * 2_400);
}

#[test]
fn an_answer_that_copies_its_input_is_recognised() {
    let material = "Question: q\n\nResearchers' reports:\n--- researcher 0 ---\nThe json module decodes JSON documents into Python objects quickly.\nIt also encodes Python objects as JSON text for the network.\nSeparators can be compacted with the separators argument.\n";
    assert!(echoes_material(
        "<research_result>\n--- researcher 0 ---\n...",
        material
    ));
    let copy = "The json module decodes JSON documents into Python objects quickly.\nIt also encodes Python objects as JSON text for the network.\nSeparators can be compacted with the separators argument.";
    assert!(echoes_material(copy, material));
    let own = "## Key Takeaways\n1. Use json.loads to decode a JSON document into Python objects.\n2. Use json.dumps with separators to write compact JSON text.\n3. The module handles the JSON types listed in its conversion table.";
    assert!(!echoes_material(own, material));
}

#[test]
fn a_short_agenda_is_repaired_once_then_accepted() {
    let short = r#"{"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": ["only one"]}"#;
    assert_eq!(
        parse_plan_strict(short),
        Err("the agenda has 1 task(s) but complexity 1 needs exactly 2 distinct tasks".into())
    );
    assert_eq!(
        parse_plan(short),
        Ok(PlanOutcome::Agenda(vec!["only one".into()]))
    );
    let ok = r#"{"complexity": 2, "tasks": ["a", "b", "c"]}"#;
    assert_eq!(parse_plan_strict(ok), parse_plan(ok));
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

/// A planner that answers every call the same way (after `delay`), counting its calls.
struct Planner {
    answer: Result<&'static str, crate::llm::LlmError>,
    delay: std::time::Duration,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ChatModel for Planner {
    async fn chat(
        &self,
        _request: ChatRequest,
    ) -> Result<crate::llm::ChatResponse, crate::llm::LlmError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        match &self.answer {
            Ok(content) => Ok(crate::llm::ChatResponse {
                content: (*content).into(),
                usage: Usage {
                    input_tokens: 10,
                    llm_calls: 1,
                    ..Usage::default()
                },
                model: "fake".into(),
                ..crate::llm::ChatResponse::default()
            }),
            Err(crate::llm::LlmError::Timeout { seconds }) => {
                Err(crate::llm::LlmError::Timeout { seconds: *seconds })
            }
            // As the OpenAI client reports it: billed, since the server answered.
            Err(crate::llm::LlmError::Degenerate { tokens }) => Err(crate::llm::LlmError::Billed {
                usage: Usage {
                    output_tokens: *tokens,
                    llm_calls: 1,
                    ..Usage::default()
                },
                source: Box::new(crate::llm::LlmError::Degenerate { tokens: *tokens }),
            }),
            Err(_) => Err(crate::llm::LlmError::Garbled("scripted".into())),
        }
    }
    fn context_window(&self) -> u64 {
        8192
    }
}

fn planner(answer: Result<&'static str, crate::llm::LlmError>, delay_secs: u64) -> Planner {
    Planner {
        answer,
        delay: std::time::Duration::from_secs(delay_secs),
        calls: std::sync::atomic::AtomicUsize::new(0),
    }
}

const TWO_PART: &str = "What does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15 released?";

fn deep_state(query: &str) -> RunState {
    use crate::research::machine::state::{Mode, RunInput};
    RunState::new(RunInput::new(query, Mode::Deep))
}

#[test]
fn the_fallback_agenda_is_the_questions_parts_or_the_question() {
    assert_eq!(
        fallback_agenda(TWO_PART),
        vec![
            "What does the MERGE command introduced in PostgreSQL 15 do?".to_string(),
            "When was PostgreSQL 15 released?".to_string()
        ]
    );
    assert_eq!(
        fallback_agenda(" How do I decode JSON with the json module in Python? "),
        vec!["How do I decode JSON with the json module in Python?".to_string()]
    );
}

#[tokio::test]
async fn an_answer_that_is_no_agenda_falls_back_to_the_questions_parts() {
    let model = planner(Ok("I would rather not use JSON."), 0);
    let event = plan(&model, None, &deep_state(TWO_PART), 200).await;
    // One repair retry, then the deterministic agenda; the two calls are billed.
    assert_eq!(model.calls.load(std::sync::atomic::Ordering::SeqCst), 2);
    match event {
        Event::PlanReady { tasks, usage } => {
            assert_eq!(tasks, fallback_agenda(TWO_PART));
            assert_eq!(usage.input_tokens, 20);
        }
        other => panic!("expected the fallback agenda, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn planning_that_outlasts_its_deadline_falls_back_instead_of_waiting() {
    // A planner that would answer well, but only after ten minutes.
    let model = planner(
        Ok(r#"{"intent": "research", "complexity": 1, "tasks": ["a", "b"]}"#),
        600,
    );
    let started = tokio::time::Instant::now();
    let event = plan(&model, None, &deep_state(TWO_PART), 200).await;
    assert_eq!(started.elapsed(), PLAN_DEADLINE);
    match event {
        Event::PlanReady { tasks, .. } => assert_eq!(tasks, fallback_agenda(TWO_PART)),
        other => panic!("expected the fallback agenda, got {other:?}"),
    }
    // A planning call that times out on its own falls back too.
    let model = planner(Err(crate::llm::LlmError::Timeout { seconds: 900 }), 0);
    match plan(&model, None, &deep_state("What is VACUUM?"), 200).await {
        Event::PlanReady { tasks, .. } => assert_eq!(tasks, vec!["What is VACUUM?".to_string()]),
        other => panic!("expected the fallback agenda, got {other:?}"),
    }
}

#[tokio::test]
async fn a_planner_that_repeats_itself_until_stopped_falls_back_to_the_questions_parts() {
    let model = planner(Err(crate::llm::LlmError::Degenerate { tokens: 168 }), 0);
    match plan(&model, None, &deep_state(TWO_PART), 200).await {
        Event::PlanReady { tasks, usage } => {
            assert_eq!(tasks, fallback_agenda(TWO_PART));
            // What the degenerate answer cost is still counted.
            assert_eq!(usage.output_tokens, 168);
        }
        other => panic!("expected the fallback agenda, got {other:?}"),
    }
    assert_eq!(model.calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refusal_or_another_model_error_still_fails_the_plan() {
    let model = planner(Ok(r#"{"intent": "malicious", "tasks": []}"#), 0);
    assert!(matches!(
        plan(&model, None, &deep_state(TWO_PART), 200).await,
        Event::PlanFailed { .. }
    ));
    let model = planner(Err(crate::llm::LlmError::Garbled("x".into())), 0);
    assert!(matches!(
        plan(&model, None, &deep_state(TWO_PART), 200).await,
        Event::PlanFailed { .. }
    ));
}

#[test]
fn an_answer_that_repeats_its_instructions_is_recognised() {
    // The 0.5B model's deep report: the study outline, returned as the report.
    let copied = "# A title for the report\n\n## Key Takeaways\nA numbered list of 5-7 most important insights for busy readers.\n\n## Abstract\n3-5 sentences summarizing the key findings, methodology, and conclusions.";
    assert!(echoes_instructions(copied, prompts::STUDY));
    // A report that follows the outline shares its headings, not its lines.
    let written = "# JSON decoding\n\n## Key Takeaways\n1. json.loads raises JSONDecodeError for an invalid document.\n2. json.dumps returns a str holding the document.\n\n## Abstract\nThe json module reads and writes JSON text.";
    assert!(!echoes_instructions(written, prompts::STUDY));
}

#[tokio::test]
async fn an_agenda_of_bare_subjects_is_given_the_questions_ask() {
    let state = deep_state(
        "In PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?",
    );
    let model = planner(
        Ok(
            r#"{"intent": "research", "complexity": 2, "tasks": ["TRUNCATE", "plain VACUUM", "DELETE"]}"#,
        ),
        0,
    );
    match plan(&model, None, &state, 256).await {
        Event::PlanReady { tasks, .. } => assert_eq!(
            tasks,
            [
                "TRUNCATE: In PostgreSQL, which reclaims disk space immediately?",
                "plain VACUUM: In PostgreSQL, which reclaims disk space immediately?",
                "DELETE: In PostgreSQL, which reclaims disk space immediately?",
            ]
        ),
        other => panic!("{other:?}"),
    }
}

/// The 1.5B model's plan for a question of two products: the question reworded as one task.
#[tokio::test]
async fn a_planned_agenda_covers_each_product_the_question_asks_of() {
    let state = deep_state(
        "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys in a JSON object?",
    );
    let model = planner(
        Ok(
            r#"{"intent": "research", "complexity": 1, "tasks": ["What is the difference between json.loads() and jsonb type in Python? How do they handle duplicate keys?"]}"#,
        ),
        0,
    );
    match plan(&model, None, &state, 256).await {
        Event::PlanReady { tasks, .. } => assert_eq!(
            tasks,
            [
                "How do Python's json.loads() handle duplicate keys in a JSON object?",
                "How do PostgreSQL's jsonb type each handle duplicate keys in a JSON object?",
            ]
        ),
        other => panic!("{other:?}"),
    }
}

/// The 1.5B model's plan in deep mode: the prompt's example tasks, copied.
#[test]
fn a_plan_of_the_examples_placeholders_is_no_agenda() {
    let copied = r#"{"intent": "RESEARCH_REQUIRED", "complexity": 2, "tasks": ["first task", "second task", "third task"]}"#;
    let err = parse_plan(copied).unwrap_err();
    assert!(err.contains("placeholders"), "{err}");
    // Real tasks beside a copied one are kept, the copy dropped.
    let mixed = r#"{"complexity": 1, "tasks": ["first task", "How does jsonb treat duplicate keys?", "json.loads duplicate keys"]}"#;
    assert_eq!(
        parse_plan(mixed).unwrap(),
        PlanOutcome::Agenda(vec![
            "How does jsonb treat duplicate keys?".to_string(),
            "json.loads duplicate keys".to_string()
        ])
    );
    // The evaluator's "..." placeholders delegate nothing.
    assert_eq!(
        parse_decision(r#"{"action": "delegate", "queries": ["...", "..."]}"#, 3),
        Decision::Synthesize
    );
}
