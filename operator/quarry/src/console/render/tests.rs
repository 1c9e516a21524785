//! Unit tests of `render`.

use super::*;

#[test]
fn model_calls_are_summed_per_role_exactly() {
    let events: Vec<Value> = [
            ("planner", 1200, 40, "0.001900"),
            ("researcher", 3000, 120, "0.004950"),
            ("researcher", 2500, 100, "0.004125"),
            ("writer", 5200, 160, "0.008100"),
        ]
        .iter()
        .map(|(p, i, o, c)| serde_json::json!({"type": "modelCall", "purpose": p, "inputTokens": i, "outputTokens": o, "costUSD": c}))
        .chain(std::iter::once(serde_json::json!({"type": "search", "subject": "q"})))
        .collect();
    assert_eq!(
        cost_by_role(&events),
        vec![
            ("planner".to_string(), 1, 1240, 1900),
            ("researcher".to_string(), 2, 5720, 9075),
            ("writer".to_string(), 1, 5360, 8100),
        ]
    );
}
