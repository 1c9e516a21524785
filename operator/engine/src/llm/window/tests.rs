//! Unit tests of `window`.

use super::*;
use crate::llm::{CallPurpose, Message};

fn request(messages: Vec<Message>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens,
        purpose: CallPurpose::Research,
    }
}

#[test]
fn a_prompt_that_fits_is_sent_unchanged() {
    let r = request(vec![Message::system("s"), Message::user("hello")], 100);
    let (fitted, cut) = fit(r.clone(), 1000);
    assert_eq!(cut, 0);
    assert_eq!(fitted.messages, r.messages);
}

#[test]
fn pages_are_trimmed_before_the_system_prompt_and_the_last_message() {
    let page = "p".repeat(30_000);
    let r = request(
        vec![
            Message::system("You are a researcher."),
            Message::user("Research task: json"),
            Message::tool("call-1".to_string(), page.clone()),
            Message::user("Write your report now."),
        ],
        1024,
    );
    let budget = prompt_budget_chars(&r, 8192);
    assert_eq!(budget, (8192 - 1024 - 4 * 8) * 3);
    let (fitted, cut) = fit(r, budget);
    assert!(
        request_chars(&fitted) <= budget,
        "{}",
        request_chars(&fitted)
    );
    assert!(cut > 0);
    assert_eq!(fitted.messages[0].content, "You are a researcher.");
    assert_eq!(fitted.messages[3].content, "Write your report now.");
    assert!(fitted.messages[2].content.contains(TRIM_NOTICE));
    assert!(fitted.messages[2].content.starts_with("ppp"));
}

#[test]
fn when_only_the_ends_are_large_they_are_trimmed_too() {
    let r = request(
        vec![
            Message::system("s".repeat(5000)),
            Message::user("u".repeat(5000)),
        ],
        10,
    );
    let (fitted, _) = fit(r, 3000);
    assert!(request_chars(&fitted) <= 3000, "{}", request_chars(&fitted));
}

#[test]
fn a_prompt_that_cannot_fit_stops_at_the_floor_without_looping() {
    let r = request(
        (0..50).map(|_| Message::user("x".repeat(1000))).collect(),
        10,
    );
    let (fitted, _) = fit(r, 100);
    assert!(
        fitted
            .messages
            .iter()
            .all(|m| m.content.chars().count()
                <= MIN_MESSAGE_CHARS + TRIM_NOTICE.chars().count() + 1)
    );
}

#[test]
fn context_overflow_refusals_are_recognised() {
    for body in [
        r#"{"error":{"code":"context_length_exceeded","message":"This model's maximum context length is 8192 tokens"}}"#,
        "prompt is 8192 tokens, the context holds 8192",
        r#"{"error":"the request exceeds the available context size"}"#,
        "input is too long for requested model context",
    ] {
        assert!(is_context_overflow(400, body), "{body}");
    }
    assert!(!is_context_overflow(400, "invalid api key"));
    assert!(!is_context_overflow(500, "context length exceeded"));
}
