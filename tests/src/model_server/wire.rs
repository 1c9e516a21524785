//! The scripted steps written in the servers' wire formats: OpenAI chat completions (whole or streamed as SSE) and Anthropic messages.

use super::*;

/// Renders a step as an Anthropic Messages API answer (no streaming).
pub(super) fn render_anthropic(step: Step, model: &str, index: usize) -> Response {
    let usage = |u: Option<ReplyUsage>| {
        u.map(|u| json!({"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens}))
            .unwrap_or_else(|| json!({"input_tokens": 0, "output_tokens": 0}))
    };
    let (content, stop, u) = match step {
        Step::Text { text, usage: u } => {
            (vec![json!({"type": "text", "text": text})], "end_turn", u)
        }
        Step::ToolCalls {
            calls,
            content,
            usage: u,
        } => {
            let mut blocks: Vec<Value> = content
                .into_iter()
                .map(|t| json!({"type": "text", "text": t}))
                .collect();
            for (i, c) in calls.iter().enumerate() {
                blocks.push(json!({
                    "type": "tool_use",
                    "id": c.id.clone().unwrap_or_else(|| format!("toolu_{i}")),
                    "name": c.name,
                    "input": c.arguments,
                }));
            }
            (blocks, "tool_use", u)
        }
        Step::Delay { then, .. } | Step::AwaitRoute { then, .. } => {
            return render_anthropic(*then, model, index);
        }
        // Statuses, raw and garbage bodies are the same on every wire.
        other @ (Step::Status { .. } | Step::Raw { .. } | Step::Garbage { .. }) => {
            return render(other, false, model, index);
        }
        Step::JsonAction {
            tool, arguments, ..
        } => (
            vec![
                json!({"type": "text", "text": json!({"tool": tool, "arguments": arguments}).to_string()}),
            ],
            "end_turn",
            None,
        ),
        Step::Repeat {
            prefix,
            chunk,
            times,
            usage: u,
        } => (
            vec![json!({"type": "text", "text": format!("{prefix}{}", chunk.repeat(times))})],
            "max_tokens",
            u,
        ),
        Step::Truncated { text } => {
            let full = json!({"id": format!("msg_{index}"), "type": "message", "content": [{"type": "text", "text": text}]}).to_string();
            let cut: String = full.chars().take(full.chars().count() / 2).collect();
            return (
                [(header::CONTENT_TYPE, "application/json".to_string())],
                cut,
            )
                .into_response();
        }
    };
    axum::Json(json!({
        "id": format!("msg_scripted_{index}"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "usage": usage(u),
    }))
    .into_response()
}

/// The parts of a successful completion.
pub(super) struct Reply {
    pub(super) content: Option<String>,
    pub(super) calls: Vec<ScriptedCall>,
    pub(super) usage: Option<ReplyUsage>,
    pub(super) finish_reason: &'static str,
    /// Content pieces for streaming (one SSE event each).
    pub(super) pieces: Vec<String>,
}
pub(super) fn render(step: Step, stream: bool, model: &str, index: usize) -> Response {
    let id = format!("chatcmpl-scripted-{index}");
    let reply = match step {
        Step::Text { text, usage } => Reply {
            pieces: split_pieces(&text),
            content: Some(text),
            calls: vec![],
            usage,
            finish_reason: "stop",
        },
        Step::ToolCalls {
            calls,
            content,
            usage,
        } => Reply {
            pieces: content.as_deref().map(split_pieces).unwrap_or_default(),
            content,
            calls,
            usage,
            finish_reason: "tool_calls",
        },
        Step::JsonAction {
            tool,
            arguments,
            fenced,
            prose,
            usage,
        } => {
            let action = json!({"tool": tool, "arguments": arguments}).to_string();
            let mut text = prose.map(|p| format!("{p}\n")).unwrap_or_default();
            if fenced {
                text.push_str(&format!("```json\n{action}\n```"));
            } else {
                text.push_str(&action);
            }
            Reply {
                pieces: split_pieces(&text),
                content: Some(text),
                calls: vec![],
                usage,
                finish_reason: "stop",
            }
        }
        Step::Repeat {
            prefix,
            chunk,
            times,
            usage,
        } => {
            let mut pieces = Vec::with_capacity(times + 1);
            if !prefix.is_empty() {
                pieces.push(prefix.clone());
            }
            pieces.extend(std::iter::repeat_n(chunk.clone(), times));
            let content = format!("{prefix}{}", chunk.repeat(times));
            Reply {
                content: Some(content),
                pieces,
                calls: vec![],
                usage,
                finish_reason: "length",
            }
        }
        Step::Status {
            status,
            retry_after,
            body,
        } => {
            let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = body.unwrap_or_else(|| {
                json!({"error": {"message": format!("scripted status {status}"), "type": "scripted"}}).to_string()
            });
            let content_type = if serde_json::from_str::<Value>(&body).is_ok() {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            let mut response = (code, [(header::CONTENT_TYPE, content_type)], body).into_response();
            if let Some(ra) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, ra);
            }
            return response;
        }
        Step::Delay { then, .. } | Step::AwaitRoute { then, .. } => {
            return render(*then, stream, model, index);
        }
        Step::Raw { body, content_type } => {
            let ct = content_type.unwrap_or_else(|| "application/json".to_string());
            return ([(header::CONTENT_TYPE, ct)], body).into_response();
        }
        Step::Garbage { text } => {
            return (
                [(
                    header::CONTENT_TYPE,
                    "text/plain; charset=utf-8".to_string(),
                )],
                text,
            )
                .into_response();
        }
        Step::Truncated { text } => {
            if stream {
                let mut events = vec![sse(&chunk_json(
                    &id,
                    model,
                    json!({"role": "assistant", "content": ""}),
                    None,
                ))];
                for piece in split_pieces(&text) {
                    events.push(sse(&chunk_json(
                        &id,
                        model,
                        json!({"content": piece}),
                        None,
                    )));
                }
                return sse_response(events);
            }
            let full = completion_json(&id, model, Some(&text), &[], None, "stop").to_string();
            let cut: String = full.chars().take(full.chars().count() / 2).collect();
            return (
                [(header::CONTENT_TYPE, "application/json".to_string())],
                cut,
            )
                .into_response();
        }
    };
    if stream {
        stream_reply(&id, model, reply)
    } else {
        json_reply(&id, model, reply)
    }
}
pub(super) fn json_reply(id: &str, model: &str, reply: Reply) -> Response {
    let body = completion_json(
        id,
        model,
        reply.content.as_deref(),
        &reply.calls,
        reply.usage,
        reply.finish_reason,
    );
    axum::Json(body).into_response()
}
pub(super) fn completion_json(
    id: &str,
    model: &str,
    content: Option<&str>,
    calls: &[ScriptedCall],
    usage: Option<ReplyUsage>,
    finish_reason: &str,
) -> Value {
    let mut message = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        let calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                let mut call = json!({"type": "function", "function": {"name": c.name, "arguments": arguments_text(c)}});
                if let Some(id) = &c.id {
                    call["id"] = json!(id);
                }
                call
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    let mut body = json!({
        "id": id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    });
    if let Some(u) = usage {
        body["usage"] = usage_json(u);
    }
    body
}
pub(super) fn stream_reply(id: &str, model: &str, reply: Reply) -> Response {
    let mut events = vec![sse(&chunk_json(
        id,
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    ))];
    for piece in &reply.pieces {
        events.push(sse(&chunk_json(id, model, json!({"content": piece}), None)));
    }
    for (i, call) in reply.calls.iter().enumerate() {
        let mut head = json!({"index": i, "type": "function", "function": {"name": call.name, "arguments": ""}});
        if let Some(call_id) = &call.id {
            head["id"] = json!(call_id);
        }
        events.push(sse(&chunk_json(
            id,
            model,
            json!({"tool_calls": [head]}),
            None,
        )));
        // Arguments in fragments, as real servers send them.
        for fragment in split_pieces(&arguments_text(call)) {
            let delta = json!({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]});
            events.push(sse(&chunk_json(id, model, delta, None)));
        }
    }
    events.push(sse(&chunk_json(
        id,
        model,
        json!({}),
        Some(reply.finish_reason),
    )));
    if let Some(u) = reply.usage {
        let usage_chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [], "usage": usage_json(u),
        });
        events.push(sse(&usage_chunk));
    }
    events.push("data: [DONE]\n\n".to_string());
    sse_response(events)
}
pub(super) fn sse_response(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, Infallible>(Bytes::from(e))),
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
pub(super) fn chunk_json(
    id: &str,
    model: &str,
    delta: Value,
    finish_reason: Option<&str>,
) -> Value {
    json!({
        "id": id,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
}
pub(super) fn sse(v: &Value) -> String {
    format!("data: {v}\n\n")
}
pub(super) fn usage_json(u: ReplyUsage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}
pub(super) fn arguments_text(call: &ScriptedCall) -> String {
    call.arguments_raw
        .clone()
        .unwrap_or_else(|| call.arguments.to_string())
}

/// Splits text into pieces of at most 16 characters (like token deltas).
pub(super) fn split_pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(16).map(|c| c.iter().collect()).collect()
}
