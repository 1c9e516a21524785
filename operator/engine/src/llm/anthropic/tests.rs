//! Unit tests of `anthropic`.

use super::*;
use crate::llm::{CallPurpose, ToolSpec};

#[test]
fn conversations_map_to_alternating_turns_with_tool_blocks() {
    let call = ToolCall {
        id: "toolu_1".into(),
        name: "search".into(),
        arguments: json!({"queries": ["json"]}),
    };
    let msgs = vec![
        Message::system("be brief"),
        Message::user("task"),
        Message::assistant("", vec![call]),
        Message::tool("toolu_1", "results"),
        Message::user("steering update"),
    ];
    let out = messages(&msgs);
    assert_eq!(
        out,
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": "task"}]}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"queries": ["json"]}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "results"},
                {"type": "text", "text": "steering update"}
            ]}),
        ]
    );
    let client =
        AnthropicClient::new(ModelConfig::new("https://api.anthropic.com/v1", "claude")).unwrap();
    let body = client.request_body(&ChatRequest {
        messages: msgs,
        tools: vec![ToolSpec {
            name: "search".into(),
            description: "Search".into(),
            parameters: json!({"type": "object"}),
        }],
        json_mode: false,
        json_schema: None,
        max_tokens: 50,
        purpose: CallPurpose::Research,
    });
    assert_eq!(body["system"], json!("be brief"));
    assert_eq!(body["max_tokens"], json!(50));
    // Anthropic has no response_format: a JSON schema on the request is not sent.
    let mut config = ModelConfig::new("https://api.anthropic.com/v1", "claude");
    config.json_mode = true;
    let client = AnthropicClient::new(config).unwrap();
    assert!(!client.json_mode(CallPurpose::Research));
    let with_schema = client.request_body(&ChatRequest {
        messages: vec![Message::user("x")],
        tools: vec![],
        json_mode: true,
        json_schema: Some(crate::llm::JsonSchema {
            name: "answer".into(),
            schema: json!({"type": "object"}),
            strict: false,
        }),
        max_tokens: 50,
        purpose: CallPurpose::Research,
    });
    assert!(
        with_schema.get("response_format").is_none(),
        "{with_schema}"
    );
    assert!(!with_schema.to_string().contains("answer"), "{with_schema}");
    assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
    assert_eq!(client.endpoint, "https://api.anthropic.com/v1/messages");
}
