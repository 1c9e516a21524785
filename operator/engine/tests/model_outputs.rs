//! Parser fixtures: outputs real models produced that Quarry's strict parsers rejected, recorded
//! by `tests/tests/real_model_deep.rs` (file names: `<model>-<role>-<n>.txt`). Each must go
//! through the tolerant parser of its role without a panic, with the outcome pinned in
//! `model_outputs/expected.json` (regenerate with `QUARRY_UPDATE_FIXTURES=1` after a deliberate
//! parser change, and review the diff).

use std::collections::BTreeMap;
use std::path::Path;

use quarry_engine::llm::openai::parse_json_action;
use quarry_engine::research::agents::lead::{PlanOutcome, parse_decision, parse_plan};
use quarry_engine::research::machine::state::Decision;

/// What the tolerant parser of `role` makes of `output`, as one line.
fn outcome(role: &str, output: &str) -> String {
    match role {
        "planner" => match parse_plan(output) {
            Ok(PlanOutcome::Agenda(tasks)) => format!("agenda of {} tasks", tasks.len()),
            Ok(PlanOutcome::Refused) => "refused".into(),
            Err(e) => format!("repair retry: {}", e.chars().take(80).collect::<String>()),
        },
        "researcher" => match parse_json_action(output) {
            Ok(calls) if calls.is_empty() => "final text".into(),
            Ok(calls) => format!(
                "calls {}",
                calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Err(e) => format!(
                "error: {}",
                e.to_string().chars().take(80).collect::<String>()
            ),
        },
        "evaluator" => match parse_decision(output, 3) {
            Decision::Synthesize => "synthesize".into(),
            Decision::Delegate { queries } => format!("delegate {} queries", queries.len()),
        },
        _ => "text".into(),
    }
}

#[test]
fn recorded_model_outputs_keep_their_parse_outcome() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/model_outputs");
    let mut outcomes = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("fixture dir") {
        let path = entry.expect("entry").path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if !name.ends_with(".txt") {
            continue;
        }
        let role = ["planner", "researcher", "evaluator", "writer"]
            .into_iter()
            .find(|r| name.contains(&format!("-{r}-")))
            .unwrap_or("writer");
        let output = std::fs::read_to_string(&path).expect("fixture text");
        outcomes.insert(name, outcome(role, &output));
    }
    let expected_path = dir.join("expected.json");
    if std::env::var("QUARRY_UPDATE_FIXTURES").is_ok_and(|v| v == "1") {
        std::fs::write(
            &expected_path,
            serde_json::to_string_pretty(&outcomes).expect("json") + "\n",
        )
        .expect("write expected.json");
        return;
    }
    let expected: BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&expected_path).expect("expected.json"))
            .expect("expected.json parses");
    assert_eq!(outcomes, expected);
}
