//! Unit tests of `openai`.

use super::parse::*;
use super::*;
use crate::llm::CallPurpose;

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "search".into(),
        description: "Search the web".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }]
}

#[test]
fn arguments_tolerance() {
    assert_eq!(
        parse_arguments("t", json!("{\"q\": \"x\"}")).unwrap(),
        json!({"q": "x"})
    );
    assert_eq!(
        parse_arguments("t", json!({"q": "x"})).unwrap(),
        json!({"q": "x"})
    );
    assert_eq!(
        parse_arguments("t", json!("```json\n{\"q\": \"x\",}\n```")).unwrap(),
        json!({"q": "x"})
    );
    assert_eq!(
        parse_arguments("t", json!("\"{\\\"q\\\": 1}\"")).unwrap(),
        json!({"q": 1})
    );
    assert_eq!(parse_arguments("t", json!("")).unwrap(), json!({}));
    assert_eq!(parse_arguments("t", Value::Null).unwrap(), json!({}));
    let err = parse_arguments("search", json!("q=x")).unwrap_err();
    assert!(err.to_string().contains("`search`"), "{err}");
    assert!(parse_arguments("t", json!(5)).is_err());
}

#[test]
fn json_action_shapes() {
    let call = |text: &str| parse_json_action(text).unwrap();
    let want = vec![ToolCall {
        id: "call_0".into(),
        name: "search".into(),
        arguments: json!({"q": "rust"}),
    }];
    assert_eq!(
        call(r#"{"tool": "search", "arguments": {"q": "rust"}}"#),
        want
    );
    assert_eq!(
        call(
            "I'll search.\n```json\n{\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"},}\n```"
        ),
        want
    );
    assert_eq!(
        call(r#"{"name": "search", "args": "{\"q\": \"rust\"}"}"#),
        want
    );
    assert_eq!(call(r#"{"tool": "search", "q": "rust"}"#), want);
    assert_eq!(
        call(r#"{"tool": {"name": "search", "arguments": {"q": "rust"}}}"#),
        want
    );
    assert_eq!(
        call(
            "<think>hmm {\"tool\": \"x\"}</think>{\"tool\": \"search\", \"arguments\": {\"q\": \"rust\"}}"
        ),
        want
    );
    assert_eq!(call("Final answer: Rust is a language [1]."), vec![]);
    assert_eq!(call(r#"{"answer": "no tool"}"#), vec![]);
    assert_eq!(call(r#"{"name": "Ada Lovelace", "born": 1815}"#), vec![]);
    let two = call(
        r#"[{"tool": "search", "arguments": {"q": "a"}}, {"tool": "search", "arguments": {"q": "b"}}]"#,
    );
    assert_eq!(two.len(), 2);
    assert_eq!(two[1].id, "call_1");
}

#[test]
fn tagged_tool_calls() {
    let calls = tagged_calls(
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>",
    )
    .unwrap();
    assert_eq!(
        calls,
        vec![ToolCall {
            id: "call_0".into(),
            name: "search".into(),
            arguments: json!({"q": "x"})
        }]
    );
    assert_eq!(tagged_calls("no tags").unwrap(), vec![]);
}

#[test]
fn json_action_messages_place_instruction_and_map_tool_results() {
    let call = ToolCall {
        id: "call_0".into(),
        name: "search".into(),
        arguments: json!({"q": "a"}),
    };
    let msgs = vec![
        Message::system("You research."),
        Message::user("Question?"),
        Message::assistant("", vec![call]),
        Message::tool("call_0", "results here"),
    ];
    let out = json_action_messages(&msgs, &tools());
    assert_eq!(out.len(), 4);
    let sys = out[0]["content"].as_str().unwrap();
    assert!(sys.starts_with("You research.\n\n## Tools"), "{sys}");
    assert!(sys.contains("- search: Search the web"), "{sys}");
    assert_eq!(
        out[2],
        json!({"role": "assistant", "content": "{\"arguments\":{\"q\":\"a\"},\"tool\":\"search\"}"})
    );
    assert_eq!(
        out[3],
        json!({"role": "user", "content": "Result of tool `search`:\nresults here"})
    );
    // No system message: one is inserted first.
    let out = json_action_messages(&[Message::user("hi")], &tools());
    assert_eq!(out[0]["role"], "system");
    assert_eq!(out[1], json!({"role": "user", "content": "hi"}));
}

#[test]
fn native_messages_shape() {
    let call = ToolCall {
        id: "c1".into(),
        name: "search".into(),
        arguments: json!({"q": "a"}),
    };
    assert_eq!(
        native_message(&Message::assistant("", vec![call])),
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"a\"}"}}
        ]})
    );
    assert_eq!(
        native_message(&Message::tool("c1", "r")),
        json!({"role": "tool", "tool_call_id": "c1", "content": "r"})
    );
}

#[test]
fn body_has_max_tokens_and_modes() {
    let mut cfg = ModelConfig::new("http://127.0.0.1:1/v1/", "m");
    cfg.json_mode = true;
    cfg.stream = false;
    let client = OpenAiClient::new(cfg).unwrap();
    assert_eq!(client.endpoint, "http://127.0.0.1:1/v1/chat/completions");
    let req = ChatRequest {
        messages: vec![Message::user("x")],
        tools: tools(),
        json_mode: true,
        json_schema: None,
        max_tokens: 77,
        purpose: CallPurpose::Plan,
    };
    let body = client.request_body(&req);
    assert_eq!(body["max_tokens"], 77);
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(body["tools"][0]["function"]["name"], "search");
    assert_eq!(body["stream"], false);
    assert!(body.get("stream_options").is_none());
    assert!(body.get("temperature").is_none());

    let mut cfg = ModelConfig::new("http://127.0.0.1:1/v1", "m");
    cfg.temperature = Some(0.7);
    let body = OpenAiClient::new(cfg).unwrap().request_body(&req);
    assert_eq!(body["temperature"].to_string(), "0.7");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    // The server does not support JSON mode: nothing is sent.
    assert!(body.get("response_format").is_none());
}

#[test]
fn a_json_schema_is_sent_as_response_format_json_schema_when_the_profile_has_json_mode() {
    let schema = crate::llm::JsonSchema {
        name: "answer".into(),
        schema: json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 9}}}),
        strict: false,
    };
    let req = ChatRequest {
        messages: vec![Message::system("s"), Message::user("x")],
        tools: vec![],
        json_mode: true,
        json_schema: Some(schema),
        max_tokens: 40,
        purpose: CallPurpose::Research,
    };
    let mut cfg = ModelConfig::new("http://127.0.0.1:1/v1", "m");
    cfg.json_mode = true;
    cfg.stream = false;
    cfg.tool_mode = ToolMode::JsonAction;
    let client = OpenAiClient::new(cfg.clone()).unwrap();
    assert!(client.json_mode(CallPurpose::Research));
    assert_eq!(
        client.request_body(&req),
        json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "x"}
            ],
            "max_tokens": 40,
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "answer",
                "schema": {"type": "object", "properties": {"a": {"type": "string", "maxLength": 9}}},
                "strict": false
            }},
            "stream": false
        })
    );
    // The schema wins even when the request did not also set json_mode: it implies JSON.
    let body = client.request_body(&ChatRequest {
        json_mode: false,
        ..req.clone()
    });
    assert_eq!(body["response_format"]["type"], "json_schema");

    // Without the profile's jsonMode the server is not asked for JSON in any form.
    cfg.json_mode = false;
    let client = OpenAiClient::new(cfg).unwrap();
    assert!(!client.json_mode(CallPurpose::Research));
    let body = client.request_body(&req);
    assert!(body.get("response_format").is_none(), "{body}");
}

#[test]
fn cached_prompt_tokens_are_read_and_priced_lower() {
    let raw = parse_completion(br#"{"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 800}}}"#).unwrap();
    assert_eq!(raw.usage, Some((1000, 10)));
    assert_eq!(raw.cached, 800);
    let mut config = ModelConfig::new("http://127.0.0.1:1/v1", "m");
    config.price = crate::llm::pricing::Price::parse("2.00", "8.00")
        .unwrap()
        .with_cached_input("0.50")
        .unwrap();
    let client = OpenAiClient::new(config).unwrap();
    let request = ChatRequest {
        messages: vec![Message::user("hi")],
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens: 10,
        purpose: crate::llm::CallPurpose::Research,
    };
    let resp = client.finish(&request, raw).unwrap();
    assert_eq!(resp.usage.cached_input_tokens, 800);
    // 200 × 2.00 + 800 × 0.50 + 10 × 8.00 µUSD = 880 µUSD.
    assert_eq!(resp.usage.cost_pico_usd, 880_000_000);
}

#[test]
fn completion_parsing_tolerates_missing_fields() {
    let raw = parse_completion(br#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"search","arguments":{"q":"a"}}}]}}]}"#).unwrap();
    assert_eq!(raw.content, "");
    assert_eq!(raw.usage, None);
    assert_eq!(raw.finish_reason, None);
    assert_eq!(raw.tool_calls.len(), 1);
    let calls = native_calls(raw.tool_calls).unwrap();
    assert_eq!(calls[0].id, "call_0");
    assert_eq!(calls[0].arguments, json!({"q": "a"}));
    let err = parse_completion(b"<html>oops</html>").unwrap_err();
    assert!(
        matches!(err, LlmError::Garbled(ref m) if m.contains("<html>oops</html>")),
        "{err}"
    );
    let err = parse_completion(br#"{"error":{"message":"overloaded","code":503}}"#).unwrap_err();
    assert!(matches!(err, LlmError::Status { status: 503, .. }), "{err}");
}

#[test]
fn stream_accumulates_fragments() {
    let mut acc = StreamAccumulator::default();
    let lines = [
        r#"data: {"choices":[{"delta":{"role":"assistant","content":""}}]}"#,
        "",
        r#"data: {"choices":[{"delta":{"content":"Hel"}}]}"#,
        "",
        ": keep-alive",
        r#"data: {"choices":[{"delta":{"content":"lo"}}]}"#,
        r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"search","arguments":"{\"q\":"}}]}}]}"#,
        r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]}}]}"#,
        r#"data: {"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        r#"data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}"#,
        "data: [DONE]",
    ];
    for l in lines {
        acc.feed_line(l).unwrap();
    }
    assert!(acc.done);
    let raw = acc.into_answer();
    assert_eq!(raw.content, "Hello");
    assert_eq!(raw.usage, Some((5, 3)));
    assert_eq!(raw.finish_reason.as_deref(), Some("tool_calls"));
    let calls = native_calls(raw.tool_calls).unwrap();
    assert_eq!(
        calls,
        vec![ToolCall {
            id: "a".into(),
            name: "search".into(),
            arguments: json!({"q": "x"})
        }]
    );
}

#[test]
fn retry_after_forms() {
    let mut h = reqwest::header::HeaderMap::new();
    h.insert(reqwest::header::RETRY_AFTER, "3".parse().unwrap());
    assert_eq!(parse_retry_after(&h), Some(Duration::from_secs(3)));
    h.insert(reqwest::header::RETRY_AFTER, "0.5".parse().unwrap());
    assert_eq!(parse_retry_after(&h), Some(Duration::from_millis(500)));
    h.insert(
        reqwest::header::RETRY_AFTER,
        "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
    );
    assert_eq!(parse_retry_after(&h), None);
}

#[test]
fn config_errors_do_not_leak_key() {
    let mut cfg = ModelConfig::new("http://127.0.0.1:1/v1", "m");
    cfg.api_key = Some("sk-secret\nvalue".into());
    let err = OpenAiClient::new(cfg).unwrap_err();
    assert!(!err.to_string().contains("sk-secret"), "{err}");
    let mut cfg = ModelConfig::new("ftp://x", "m");
    cfg.api_key = Some("sk-secret".into());
    assert!(matches!(OpenAiClient::new(cfg), Err(LlmError::Config(_))));
    assert!(matches!(
        OpenAiClient::new(ModelConfig::new("http://x/v1", " ")),
        Err(LlmError::Config(_))
    ));
}

#[test]
fn only_a_refusal_of_the_response_format_counts_as_refusing_json_schema() {
    assert!(refuses_json_schema(
        400,
        r#"{"error":{"message":"response_format.type \"json_schema\" is not supported"}}"#
    ));
    assert!(refuses_json_schema(
        400,
        "Invalid schema for response_format 'grounded_answer': 'maxLength' is not permitted."
    ));
    assert!(refuses_json_schema(422, "unknown field json_schema"));
    assert!(!refuses_json_schema(
        400,
        "prompt is 8192 tokens, the context holds 8192"
    ));
    assert!(!refuses_json_schema(500, "response_format handler crashed"));
}
