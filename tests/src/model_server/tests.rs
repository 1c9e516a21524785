//! Unit tests of `model_server`.

use super::wire::split_pieces;
use super::*;

#[test]
fn script_json_round_trip() {
    let script = Script::new(vec![
        Step::text("hi").with_usage(3, 1),
        Step::delay(10, Step::status_retry_after(429, 1)),
        Step::json_action("search", json!({"q": "x"})),
    ])
    .with_fallback(Step::garbage("???"));
    let text = serde_json::to_string(&script).unwrap();
    let back: Script = serde_json::from_str(&text).unwrap();
    assert_eq!(back, script);
    let parsed: Script =
            serde_json::from_str(r#"{"steps": [{"kind": "text", "text": "a", "usage": {"prompt_tokens": 1, "completion_tokens": 2}}]}"#)
                .unwrap();
    assert_eq!(parsed.steps, vec![Step::text("a").with_usage(1, 2)]);
}

#[test]
fn the_turn_is_the_number_of_assistant_messages() {
    let body = json!({"messages": [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": null, "tool_calls": []},
        {"role": "tool", "content": "r"},
        {"role": "assistant", "content": "a"},
    ]});
    assert_eq!(assistant_turns(&body), 2);
    assert_eq!(assistant_turns(&json!({})), 0);
}

#[test]
fn pieces_respect_char_boundaries() {
    let pieces = split_pieces(&"é".repeat(20));
    assert_eq!(pieces.len(), 2);
    assert_eq!(pieces[0].chars().count(), 16);
    assert_eq!(pieces.concat(), "é".repeat(20));
}
