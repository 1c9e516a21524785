//! The OpenAI-compatible client against the scripted model server.

use std::time::Duration;

use quarry_e2e::model_server::{
    ReplyUsage, Script, ScriptedCall, ScriptedModel, ScriptedModelHandle, Step,
};
use quarry_engine::llm::openai::OpenAiClient;
use quarry_engine::llm::pricing::Price;
use quarry_engine::llm::{
    CallPurpose, ChatModel, ChatRequest, LlmError, Message, ModelConfig, ToolCall, ToolMode,
    ToolSpec, Usage,
};
use serde_json::{Value, json};

const KEY: &str = "sk-test-4f9a1c7e0b";

fn config(server: &ScriptedModelHandle, stream: bool) -> ModelConfig {
    ModelConfig {
        stream,
        max_retries: 2,
        timeout: Duration::from_secs(10),
        retry_min_delay: Duration::from_millis(10),
        retry_max_delay: Duration::from_millis(50),
        ..ModelConfig::new(server.base_url(), "test-model")
    }
}

fn client(cfg: ModelConfig) -> OpenAiClient {
    OpenAiClient::new(cfg).expect("valid config")
}

fn search_tool() -> ToolSpec {
    ToolSpec {
        name: "search".into(),
        description: "Search the web for a query".into(),
        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    }
}

fn request(tools: Vec<ToolSpec>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: vec![
            Message::system("You are a researcher."),
            Message::user("What is Rust?"),
        ],
        tools,
        json_mode: false,
        json_schema: None,
        max_tokens,
        purpose: CallPurpose::Research,
    }
}

/// Every request the server saw carries the output cap the caller asked for.
fn assert_max_tokens(server: &ScriptedModelHandle, want: u32) {
    let requests = server.requests();
    assert!(!requests.is_empty());
    for body in requests {
        assert_eq!(
            body["max_tokens"],
            json!(want),
            "request without max_tokens: {body}"
        );
        assert!(body.get("max_completion_tokens").is_none());
    }
}

#[tokio::test]
async fn native_tool_call_is_parsed_non_streaming_and_streaming() {
    for stream in [false, true] {
        let server = ScriptedModel::start(vec![Step::tool_call(
            "search",
            json!({"q": "rust language"}),
        )])
        .await
        .unwrap();
        let answer = client(config(&server, stream))
            .chat(request(vec![search_tool()], 256))
            .await
            .unwrap();
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "call_search".into(),
                name: "search".into(),
                arguments: json!({"q": "rust language"})
            }],
            "stream={stream}"
        );
        assert_eq!(answer.content, "");
        assert_eq!(answer.finish_reason.as_deref(), Some("tool_calls"));
        let body = &server.requests()[0];
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "search");
        assert_eq!(body["stream"], json!(stream));
        if stream {
            assert_eq!(body["stream_options"], json!({"include_usage": true}));
        }
        assert_max_tokens(&server, 256);
    }
}

#[tokio::test]
async fn native_tool_call_without_id_with_fenced_trailing_comma_arguments() {
    let call = ScriptedCall {
        id: None,
        name: "search".into(),
        arguments: Value::Null,
        arguments_raw: Some("```json\n{\"q\": \"fenced\",}\n```".into()),
    };
    for stream in [false, true] {
        let server = ScriptedModel::start(vec![Step::tool_calls(vec![call.clone()])])
            .await
            .unwrap();
        let answer = client(config(&server, stream))
            .chat(request(vec![search_tool()], 64))
            .await
            .unwrap();
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "search".into(),
                arguments: json!({"q": "fenced"})
            }]
        );
    }
}

#[tokio::test]
async fn json_action_protocol_is_parsed_and_no_tools_field_is_sent() {
    for stream in [false, true] {
        let server = ScriptedModel::start(vec![Step::json_action(
            "search",
            json!({"q": "borrow checker"}),
        )])
        .await
        .unwrap();
        let cfg = ModelConfig {
            tool_mode: ToolMode::JsonAction,
            ..config(&server, stream)
        };
        let answer = client(cfg)
            .chat(request(vec![search_tool()], 128))
            .await
            .unwrap();
        assert_eq!(
            answer.tool_calls,
            vec![ToolCall {
                id: "call_0".into(),
                name: "search".into(),
                arguments: json!({"q": "borrow checker"})
            }]
        );
        let body = &server.requests()[0];
        assert!(
            body.get("tools").is_none(),
            "tools sent in JSON action mode: {body}"
        );
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2);
        let system = messages[0]["content"].as_str().unwrap();
        assert!(
            system.starts_with("You are a researcher.\n\n## Tools"),
            "{system}"
        );
        assert!(
            system.contains("{\"tool\": \"<tool name>\", \"arguments\": {<arguments>}}"),
            "{system}"
        );
        assert!(
            system.contains("- search: Search the web for a query"),
            "{system}"
        );
        assert_eq!(
            messages[1],
            json!({"role": "user", "content": "What is Rust?"})
        );
        assert_max_tokens(&server, 128);
    }
}

#[tokio::test]
async fn json_action_fenced_with_prose_and_tool_results_as_user_messages() {
    let step = Step::JsonAction {
        tool: "search".into(),
        arguments: json!({"q": "lifetimes"}),
        fenced: true,
        prose: Some("I need more sources, so I will search.".into()),
        usage: None,
    };
    let server = ScriptedModel::start(vec![step, Step::text("Rust is a systems language.")])
        .await
        .unwrap();
    let model = client(ModelConfig {
        tool_mode: ToolMode::JsonAction,
        ..config(&server, false)
    });
    let mut req = request(vec![search_tool()], 100);
    let first = model.chat(req.clone()).await.unwrap();
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].arguments, json!({"q": "lifetimes"}));

    req.messages.push(Message::assistant(
        first.content.clone(),
        first.tool_calls.clone(),
    ));
    req.messages.push(Message::tool(
        first.tool_calls[0].id.clone(),
        "1. The Rust Book",
    ));
    let second = model.chat(req).await.unwrap();
    assert_eq!(second.tool_calls, vec![]);
    assert_eq!(second.content, "Rust is a systems language.");

    let body = &server.requests()[1];
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["content"], json!(first.content));
    assert_eq!(
        messages[3],
        json!({"role": "user", "content": "Result of tool `search`:\n1. The Rust Book"})
    );
    assert!(messages.iter().all(|m| m["role"] != "tool"));
}

#[tokio::test]
async fn json_action_unknown_tool_is_malformed() {
    let server = ScriptedModel::start(vec![Step::json_action("delete_everything", json!({}))])
        .await
        .unwrap();
    let model = client(ModelConfig {
        tool_mode: ToolMode::JsonAction,
        ..config(&server, false)
    });
    let err = model
        .chat(request(vec![search_tool()], 50))
        .await
        .unwrap_err();
    match err.unbilled() {
        LlmError::Malformed(m) => {
            assert_eq!(
                m,
                "the model asked for unknown tool `delete_everything` (available: search)"
            )
        }
        other => panic!("unexpected {other:?}"),
    }
    // The server answered in full: the unusable answer is billed as reported.
    let billed = err.billed();
    assert_eq!(billed.llm_calls, 1, "{err:?}");
    assert!(
        billed.input_tokens > 0 && billed.output_tokens > 0,
        "{err:?}"
    );
    assert_eq!(
        server.request_count(),
        1,
        "malformed answers are not retried"
    );
}

#[tokio::test]
async fn json_mode_sends_response_format_only_when_supported() {
    for supported in [true, false] {
        let server = ScriptedModel::start(vec![Step::text("```json\n{\"tasks\": [\"a\"]}\n```")])
            .await
            .unwrap();
        let model = client(ModelConfig {
            json_mode: supported,
            ..config(&server, false)
        });
        let mut req = request(vec![], 300);
        req.json_mode = true;
        let answer = model.chat(req).await.unwrap();
        let body = &server.requests()[0];
        if supported {
            assert_eq!(body["response_format"], json!({"type": "json_object"}));
        } else {
            assert!(body.get("response_format").is_none());
        }
        assert_eq!(
            quarry_engine::llm::json_extract::extract_json(&answer.content).unwrap(),
            json!({"tasks": ["a"]})
        );
    }
}

#[tokio::test]
async fn retry_after_429_then_success() {
    let server = ScriptedModel::start(vec![
        Step::status_retry_after(429, 1),
        Step::text("ok").with_usage(10, 2),
    ])
    .await
    .unwrap();
    let answer = client(config(&server, false))
        .chat(request(vec![], 20))
        .await
        .unwrap();
    assert_eq!(answer.content, "ok");
    assert_eq!(answer.usage.llm_calls, 1);
    assert_eq!(server.request_count(), 2);
    assert_max_tokens(&server, 20);
}

#[tokio::test]
async fn server_errors_exhaust_retries() {
    let server = ScriptedModel::start(Script::new(vec![]).with_fallback(Step::status(500)))
        .await
        .unwrap();
    let cfg = config(&server, false);
    let max_retries = cfg.max_retries as usize;
    let err = client(cfg).chat(request(vec![], 20)).await.unwrap_err();
    match &err {
        LlmError::Status {
            status,
            body,
            retry_after,
        } => {
            assert_eq!(*status, 500);
            assert!(body.contains("scripted status 500"), "{body}");
            assert_eq!(*retry_after, None);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(server.request_count(), max_retries + 1);
    assert_max_tokens(&server, 20);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = ScriptedModel::start(vec![Step::status(400), Step::text("never")])
        .await
        .unwrap();
    let err = client(config(&server, false))
        .chat(request(vec![], 20))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Status { status: 400, .. }),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn per_attempt_timeout() {
    let server = ScriptedModel::start(
        Script::new(vec![]).with_fallback(Step::delay(3_000, Step::text("late"))),
    )
    .await
    .unwrap();
    let cfg = ModelConfig {
        timeout: Duration::from_millis(300),
        max_retries: 1,
        ..config(&server, false)
    };
    let err = client(cfg).chat(request(vec![], 20)).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { seconds: 1 }), "{err:?}");
    assert_eq!(
        server.request_count(),
        2,
        "a timed-out attempt is retried once"
    );
}

#[tokio::test]
async fn garbled_bodies_are_retried_then_reported() {
    let cases = [
        (
            Step::garbage("<<<not json at all>>>"),
            false,
            "<<<not json at all>>>",
        ),
        (
            Step::raw("{\"choices\": [{\"message\": "),
            false,
            "response is not JSON",
        ),
        (
            Step::raw("{\"object\": \"chat.completion\"}"),
            false,
            "no choices",
        ),
        (
            Step::truncated("The answer is"),
            false,
            "response is not JSON",
        ),
        (
            Step::truncated("The answer is"),
            true,
            "stream ended before the answer was complete",
        ),
        (
            Step::garbage("<<<not json at all>>>"),
            true,
            "<<<not json at all>>>",
        ),
    ];
    for (step, stream, needle) in cases {
        // The damaged answer every time: two retries (max_retries: 2), then the error.
        let server = ScriptedModel::start(Script::default().with_fallback(step.clone()))
            .await
            .unwrap();
        let err = client(config(&server, stream))
            .chat(request(vec![], 20))
            .await
            .unwrap_err();
        match &err {
            LlmError::Garbled(m) => assert!(m.contains(needle), "{step:?} stream={stream}: {m}"),
            other => panic!("{step:?} stream={stream}: unexpected {other:?}"),
        }
        assert_eq!(server.request_count(), 3, "{step:?} stream={stream}");
        // Damaged once: the retry gets the real answer.
        let server = ScriptedModel::start(vec![step.clone(), Step::text("fine")])
            .await
            .unwrap();
        let answer = client(config(&server, stream))
            .chat(request(vec![], 20))
            .await
            .unwrap();
        assert_eq!(answer.content, "fine", "{step:?} stream={stream}");
    }
}

#[tokio::test]
async fn usage_and_cost_are_exactly_what_the_server_reported() {
    let price = Price::parse("0.15", "0.60").unwrap();
    for stream in [false, true] {
        let server = ScriptedModel::start(vec![Step::text("Rust is fast.").with_usage(1234, 567)])
            .await
            .unwrap();
        let model = client(ModelConfig {
            price,
            ..config(&server, stream)
        });
        let answer = model.chat(request(vec![], 20)).await.unwrap();
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 0,
                input_tokens: 1234,
                output_tokens: 567,
                // 1234 * 150_000 + 567 * 600_000 pico-USD
                cost_pico_usd: 185_100_000 + 340_200_000,
                llm_calls: 1
            },
            "stream={stream}"
        );
        assert_eq!(answer.usage.cost_usd_string(), "0.000525");
        assert_eq!(answer.model, "test-model");
        assert_eq!(answer.content, "Rust is fast.");
    }
}

#[tokio::test]
async fn missing_usage_is_estimated_from_characters() {
    for stream in [false, true] {
        // 40 characters of answer -> 10 tokens; prompt "You are a researcher." (21) + "What is Rust?" (13) -> 34 -> 9.
        let server = ScriptedModel::start(vec![Step::text("a".repeat(20) + &"b".repeat(20))])
            .await
            .unwrap();
        let model = client(ModelConfig {
            price: Price::parse("1", "2").unwrap(),
            ..config(&server, stream)
        });
        let answer = model.chat(request(vec![], 20)).await.unwrap();
        assert_eq!(
            answer.usage,
            Usage {
                cached_input_tokens: 0,
                input_tokens: 9,
                output_tokens: 10,
                cost_pico_usd: 9 * 1_000_000 + 10 * 2_000_000,
                llm_calls: 1
            }
        );
    }
}

#[tokio::test]
async fn minimal_completion_without_optional_fields() {
    let body = r#"{"choices":[{"message":{"content":"just text"}}]}"#;
    let server = ScriptedModel::start(vec![Step::raw(body)]).await.unwrap();
    let answer = client(config(&server, false))
        .chat(request(vec![], 20))
        .await
        .unwrap();
    assert_eq!(answer.content, "just text");
    assert_eq!(answer.finish_reason, None);
    assert_eq!(answer.model, "test-model");
    assert_eq!(answer.usage.llm_calls, 1);
}

#[tokio::test]
async fn streaming_degenerate_answer_is_stopped() {
    let step = Step::Repeat {
        prefix: "Here is what I found. ".into(),
        chunk: "the snippet. ".into(),
        times: 3000,
        usage: Some(ReplyUsage {
            prompt_tokens: 10,
            completion_tokens: 9000,
        }),
    };
    let server = ScriptedModel::start(vec![step, Step::text("never reached")])
        .await
        .unwrap();
    let err = client(config(&server, true))
        .chat(request(vec![], 4000))
        .await
        .unwrap_err();
    match err.unbilled() {
        // Stopped after ~600 characters of loop (about 160 estimated tokens), not 39,000 characters.
        LlmError::Degenerate { tokens } => {
            assert!((150..=200).contains(tokens), "stopped at {tokens} tokens")
        }
        other => panic!("unexpected {other:?}"),
    }
    // A provider bills the prompt and every token streamed before the stop: so does Quarry
    // (estimated here, as the stream was cut before its usage chunk).
    let billed = err.billed();
    assert_eq!(billed.llm_calls, 1, "{err:?}");
    assert!(billed.input_tokens > 0, "{err:?}");
    assert!((150..=200).contains(&billed.output_tokens), "{err:?}");
    assert_eq!(
        server.request_count(),
        1,
        "degenerate answers are not retried"
    );
}

#[tokio::test]
async fn api_key_is_sent_as_bearer_and_never_shown() {
    let echo = format!("{{\"error\": {{\"message\": \"invalid key Bearer {KEY}\"}}}}");
    let server = ScriptedModel::start(vec![
        Step::text("hello"),
        Step::Status {
            status: 401,
            retry_after: None,
            body: Some(echo),
        },
    ])
    .await
    .unwrap();
    let cfg = ModelConfig {
        api_key: Some(KEY.to_string()),
        ..config(&server, false)
    };
    assert!(!format!("{cfg:?}").contains(KEY));
    let model = client(cfg);
    let debug = format!("{model:?}");
    assert!(!debug.contains(KEY), "{debug}");
    assert!(debug.contains("[redacted]"), "{debug}");

    model.chat(request(vec![], 20)).await.unwrap();
    let err = model.chat(request(vec![], 20)).await.unwrap_err();
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 2);
    for r in &recorded {
        assert_eq!(
            r.authorization.as_deref(),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(r.path, "/v1/chat/completions");
    }
    assert!(
        matches!(err, LlmError::Status { status: 401, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains(KEY), "{err}");
    assert!(!format!("{err:?}").contains(KEY), "{err:?}");
    // The server's body is never echoed (it may hold anything); the status and its reason are.
    assert!(err.to_string().contains("401"), "{err}");
    assert!(!err.to_string().contains("invalid key"), "{err}");
}

#[tokio::test]
async fn unreachable_endpoint_is_retryable_error() {
    let server = ScriptedModel::start(vec![]).await.unwrap();
    let cfg = ModelConfig {
        max_retries: 0,
        ..config(&server, false)
    };
    drop(server);
    // Give the aborted listener a moment to close.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let err = client(cfg).chat(request(vec![], 20)).await.unwrap_err();
    assert!(matches!(err, LlmError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn zero_output_cap_is_rejected_before_sending() {
    let server = ScriptedModel::start(vec![Step::text("x")]).await.unwrap();
    let err = client(config(&server, false))
        .chat(request(vec![], 0))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LlmError::Config(ref m) if m == "max_tokens must be greater than zero"),
        "{err:?}"
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn scripted_model_binary_serves_a_script_file_and_logs_requests() {
    use tokio::io::AsyncBufReadExt;

    let dir = std::env::temp_dir().join(format!("quarry-scripted-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script_path = dir.join("script.json");
    let log_path = dir.join("requests.jsonl");
    let _ = std::fs::remove_file(&log_path);
    let script = Script::new(vec![Step::text("from the binary").with_usage(7, 3)]);
    std::fs::write(&script_path, serde_json::to_string(&script).unwrap()).unwrap();

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_scripted-model"))
        .arg(&script_path)
        .arg("--log")
        .arg(&log_path)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    tokio::time::timeout(
        Duration::from_secs(10),
        tokio::io::BufReader::new(stdout).read_line(&mut line),
    )
    .await
    .unwrap()
    .unwrap();
    let base_url = line.trim().to_string();
    assert!(
        base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"),
        "{base_url}"
    );

    let cfg = ModelConfig {
        stream: true,
        ..ModelConfig::new(base_url, "bin-model")
    };
    let answer = client(cfg).chat(request(vec![], 42)).await.unwrap();
    assert_eq!(answer.content, "from the binary");
    assert_eq!(answer.usage.input_tokens, 7);
    assert_eq!(answer.usage.output_tokens, 3);
    child.kill().await.unwrap();

    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["body"]["max_tokens"], 42);
    assert_eq!(lines[0]["body"]["model"], "bin-model");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Characters of all message contents of a request body the server received.
fn prompt_chars(body: &Value) -> usize {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().chars().count())
        .sum()
}

#[tokio::test]
async fn prompts_are_trimmed_to_the_context_window_and_a_length_refusal_is_retried_smaller() {
    let server = ScriptedModel::start(vec![
        Step::Status {
            status: 400,
            retry_after: None,
            body: Some(
                r#"{"error":{"code":"context_length_exceeded","message":"prompt is 8192 tokens, the context holds 8192"}}"#
                    .into(),
            ),
        },
        Step::text("an answer from the smaller prompt"),
    ])
    .await
    .unwrap();
    let model = client(ModelConfig {
        context_window: 8192,
        ..config(&server, false)
    });
    let page = "Deserialize s to a Python object. ".repeat(2000);
    let request = ChatRequest {
        messages: vec![
            Message::system("You are a researcher."),
            Message::user("Research task: json"),
            Message::tool("call-1", page.clone()),
            Message::user("Write your report now."),
        ],
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens: 1024,
        purpose: CallPurpose::Research,
    };
    let answer = model.chat(request).await.expect("never the end of a run");
    assert_eq!(answer.content, "an answer from the smaller prompt");
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "one refusal, one smaller retry");
    // The first prompt was already cut to the window (minus the output cap and per-message
    // overhead, at a conservative three characters per token), the second 40% smaller still.
    let budget = (8192 - 1024 - 4 * 8) * 3;
    let (first, second) = (prompt_chars(&sent[0]), prompt_chars(&sent[1]));
    assert!(first < page.len() && first <= budget, "{first} of {budget}");
    assert!(second <= first * 6 / 10 + 100, "{second} after {first}");
    for body in &sent {
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0]["content"], "You are a researcher.");
        assert_eq!(messages[3]["content"], "Write your report now.");
        assert!(
            messages[2]["content"]
                .as_str()
                .unwrap()
                .contains("trimmed to fit the model's context window")
        );
    }
}

#[tokio::test]
async fn a_server_that_refuses_json_schema_is_asked_once_more_in_json_object_mode() {
    // The message tools/llm-server gave before it knew json_schema.
    let server = ScriptedModel::start(vec![
        Step::Status {
            status: 400,
            retry_after: None,
            body: Some(
                r#"{"error":{"message":"response_format.type \"json_schema\" is not supported (text, json_object)","type":"invalid_request_error"}}"#
                    .into(),
            ),
        },
        Step::text(r#"{"points": []}"#),
    ])
    .await
    .unwrap();
    let model = client(ModelConfig {
        json_mode: true,
        ..config(&server, false)
    });
    let schema = quarry_engine::llm::JsonSchema {
        name: "grounded_answer".into(),
        schema: json!({"type": "object"}),
        strict: false,
    };
    let answer = model
        .chat(ChatRequest {
            messages: vec![Message::user("Answer with the JSON object.")],
            tools: vec![],
            json_mode: true,
            json_schema: Some(schema),
            max_tokens: 64,
            purpose: CallPurpose::Research,
        })
        .await
        .expect("answered in json_object mode");
    assert_eq!(answer.content, r#"{"points": []}"#);
    let sent = server.requests();
    assert_eq!(sent.len(), 2, "one refusal, one json_object retry");
    assert_eq!(sent[0]["response_format"]["type"], "json_schema");
    assert_eq!(
        sent[0]["response_format"]["json_schema"]["name"],
        "grounded_answer"
    );
    assert_eq!(sent[1]["response_format"], json!({"type": "json_object"}));
}
