//! Routes of the scripted model shared by the deep-mode scenarios: the planner, the summarizer
//! and the study writer, and a helper to read a recorded request's messages.

use serde_json::{Value, json};

use crate::model_server::{Route, Step};

/// The planner route: an agenda of `tasks` (complexity 1, 2, 3 plans 2, 3, 5 tasks).
pub fn planner(tasks: &[&str]) -> Route {
    let complexity = match tasks.len() {
        0..=2 => 1,
        3 | 4 => 2,
        _ => 3,
    };
    let plan = json!({"intent": "RESEARCH_REQUIRED", "complexity": complexity, "tasks": tasks})
        .to_string();
    Route::new(
        "planner",
        "You are the research coordinator",
        vec![Step::text(plan).with_usage(300, 40)],
    )
}

/// The per-page summarizer route: one fixed summary for every page.
pub fn summarizer() -> Route {
    Route::new("summarizer", "You condense one web page", vec![]).with_fallback(
        Step::text("- The page documents a standard library module.").with_usage(800, 30),
    )
}

/// The study writer route: `text` for every study call.
pub fn study(text: &str) -> Route {
    Route::new("study", "Mode: study", vec![]).with_fallback(Step::text(text).with_usage(5000, 400))
}

/// The text of every message of a recorded request body.
pub fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter_map(|m| m["content"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
