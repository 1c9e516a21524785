//! Unit tests of `json_extract`.

use super::*;

#[test]
fn cut_off_values_are_closed_after_their_last_complete_element() {
    let cut = "```json\n{\"tool\": \"scrape\", \"arguments\": {\"urls\": [\"http://a/1\", \"http://a/2\", \"http://a:";
    let closed = close_truncated_json(cut).unwrap();
    let v: Value = serde_json::from_str(&closed).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"tool": "scrape", "arguments": {"urls": ["http://a/1", "http://a/2"]}})
    );
    // Escaped quotes and brackets inside strings do not confuse it.
    let closed = close_truncated_json(r#"{"a": "x\"]}", "b": [1, 2], "c": "#).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&closed).unwrap(),
        serde_json::json!({"a": "x\"]}", "b": [1, 2]})
    );
    assert_eq!(close_truncated_json(r#"{"complete": true}"#), None);
    assert_eq!(close_truncated_json("no json here"), None);
    assert_eq!(close_truncated_json(r#"{"nothing complete yet"#), None);
}
use serde_json::json;

#[test]
fn plain_object() {
    assert_eq!(extract_json(r#"{"a": 1}"#).unwrap(), json!({"a": 1}));
}

#[test]
fn plain_array_with_whitespace() {
    assert_eq!(extract_json("  \n[1, 2]\n ").unwrap(), json!([1, 2]));
}

#[test]
fn fenced_with_language() {
    let t = "Here is the plan:\n```json\n{\"tasks\": [\"a\", \"b\"]}\n```\nDone.";
    assert_eq!(extract_json(t).unwrap(), json!({"tasks": ["a", "b"]}));
}

#[test]
fn fenced_without_language() {
    let t = "```\n{\"x\": true}\n```";
    assert_eq!(extract_json(t).unwrap(), json!({"x": true}));
}

#[test]
fn fenced_uppercase_language_and_crlf() {
    let t = "```JSON\r\n{\"x\": 2}\r\n```\r\n";
    assert_eq!(extract_json(t).unwrap(), json!({"x": 2}));
}

#[test]
fn inline_fence() {
    assert_eq!(extract_json("```{\"x\": 3}```").unwrap(), json!({"x": 3}));
}

#[test]
fn unclosed_fence_truncated_after_object() {
    let t = "```json\n{\"x\": 4}\n";
    assert_eq!(extract_json(t).unwrap(), json!({"x": 4}));
}

#[test]
fn object_in_prose() {
    let t = "Sure! Based on the question, I suggest {\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"}} as the next step.";
    assert_eq!(
        extract_json(t).unwrap(),
        json!({"tool": "search", "arguments": {"q": "rust"}})
    );
}

#[test]
fn braces_inside_strings_do_not_confuse() {
    let t = r#"Answer: {"text": "use {braces} and ] here \" quoted", "n": 1} trailing"#;
    assert_eq!(
        extract_json(t).unwrap(),
        json!({"text": "use {braces} and ] here \" quoted", "n": 1})
    );
}

#[test]
fn trailing_commas_removed() {
    let t = "{\"a\": [1, 2, 3,], \"b\": {\"c\": 1,},}";
    assert_eq!(
        extract_json(t).unwrap(),
        json!({"a": [1, 2, 3], "b": {"c": 1}})
    );
}

#[test]
fn trailing_comma_inside_string_is_kept() {
    let t = r#"{"a": "x,}", }"#;
    assert_eq!(extract_json(t).unwrap(), json!({"a": "x,}"}));
}

#[test]
fn think_preamble_with_braces_is_skipped() {
    let t = "<think>Maybe {\"wrong\": true}? No.</think>\n{\"right\": true}";
    assert_eq!(extract_json(t).unwrap(), json!({"right": true}));
}

#[test]
fn stray_closing_think_tag() {
    let t = "reasoning {\"wrong\": 1} here</think>{\"right\": 2}";
    assert_eq!(extract_json(t).unwrap(), json!({"right": 2}));
}

#[test]
fn unclosed_think_still_finds_json() {
    let t = "<think>I will answer {\"a\": 1}";
    assert_eq!(extract_json(t).unwrap(), json!({"a": 1}));
}

#[test]
fn object_only_skips_citation_arrays() {
    let t = "As shown in [1], the result is {\"ok\": true}.";
    assert_eq!(extract_json(t).unwrap(), json!([1]));
    assert_eq!(extract_json_object(t).unwrap(), json!({"ok": true}));
}

#[test]
fn object_only_rejects_array() {
    let err = extract_json_object("[1, 2]").unwrap_err();
    assert_eq!(
        err,
        JsonExtractError::NotAnObject {
            snippet: "[1,2]".into()
        }
    );
}

#[test]
fn nested_arrays_of_objects() {
    let t = "Result:\n[{\"url\": \"https://a\"}, {\"url\": \"https://b\"}]";
    assert_eq!(
        extract_json(t).unwrap(),
        json!([{"url": "https://a"}, {"url": "https://b"}])
    );
}

#[test]
fn unicode_around_json() {
    let t = "Voilà — résumé: {\"titre\": \"été\"} ✓";
    assert_eq!(extract_json(t).unwrap(), json!({"titre": "été"}));
}

#[test]
fn scalar_only_when_whole_answer() {
    assert_eq!(extract_json("42").unwrap(), json!(42));
    assert_eq!(
        extract_json("The answer is 42").unwrap_err(),
        JsonExtractError::NotFound {
            snippet: "The answer is 42".into()
        }
    );
}

#[test]
fn empty_answer() {
    assert_eq!(extract_json("  ").unwrap_err(), JsonExtractError::Empty);
    assert_eq!(
        extract_json("<think>hmm</think>").unwrap_err(),
        JsonExtractError::Empty
    );
}

#[test]
fn truncated_object_is_unbalanced() {
    let err = extract_json("Here: {\"a\": [1, 2").unwrap_err();
    assert_eq!(
        err,
        JsonExtractError::Unbalanced {
            snippet: "{\"a\": [1, 2".into()
        }
    );
    assert!(err.to_string().contains("never closed"), "{err}");
}

#[test]
fn invalid_json_quotes_error_and_text() {
    let err = extract_json("{'a': 1}").unwrap_err();
    match &err {
        JsonExtractError::Invalid { message, snippet } => {
            assert_eq!(snippet, "{'a': 1}");
            assert!(message.contains("line 1 column 2"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("{'a': 1}"));
}

#[test]
fn second_candidate_used_when_first_invalid() {
    let t = "{not json} but then {\"a\": 1}";
    assert_eq!(extract_json(t).unwrap(), json!({"a": 1}));
}

#[test]
fn long_snippets_are_cut() {
    let long = "x".repeat(500);
    match extract_json(&long).unwrap_err() {
        JsonExtractError::NotFound { snippet } => {
            assert_eq!(snippet.chars().count(), SNIPPET_CHARS + 1);
            assert!(snippet.ends_with('…'));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn json_string_escapes_and_backslashes() {
    let t = r#"{"path": "C:\\dir\\", "q": "a\"b"}"#;
    assert_eq!(
        extract_json(t).unwrap(),
        json!({"path": "C:\\dir\\", "q": "a\"b"})
    );
}

#[test]
fn two_fenced_blocks_first_valid_wins() {
    let t = "```json\n{\"first\": 1}\n```\ntext\n```json\n{\"second\": 2}\n```";
    assert_eq!(extract_json(t).unwrap(), json!({"first": 1}));
}
