//! Reading a model's answer: the completion body or the SSE stream accumulated, native tool calls, and the JSON-action protocol parsed tolerantly.

use super::*;

/// A tool call as the server sent it, arguments not yet validated.
#[derive(Debug, Default)]
pub(super) struct RawToolCall {
    pub(super) id: Option<String>,
    pub(super) name: String,
    pub(super) arguments: Value,
}

/// A completion before tool-call parsing and costing.
#[derive(Debug, Default)]
pub(super) struct RawAnswer {
    pub(super) content: String,
    pub(super) tool_calls: Vec<RawToolCall>,
    pub(super) usage: Option<(u64, u64)>,
    /// Prompt tokens served from the provider's cache (`prompt_tokens_details.cached_tokens`).
    pub(super) cached: u64,
    pub(super) model: Option<String>,
    pub(super) finish_reason: Option<String>,
}

pub(super) fn snippet(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(200).collect()
}

/// Parses a non-streamed completion body.
pub(super) fn parse_completion(bytes: &[u8]) -> Result<RawAnswer, LlmError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        LlmError::Garbled(format!("response is not JSON ({e}): `{}`", snippet(bytes)))
    })?;
    if let Some(err) = stream_or_body_error(&v) {
        return Err(err);
    }
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| {
            LlmError::Garbled(format!("response has no choices: `{}`", snippet(bytes)))
        })?;
    let message = choice
        .get("message")
        .or_else(|| choice.get("delta"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut raw = RawAnswer {
        content: content_text(message.get("content")),
        model: v.get("model").and_then(Value::as_str).map(str::to_string),
        finish_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: parse_usage(v.get("usage")),
        cached: parse_cached(v.get("usage")),
        ..RawAnswer::default()
    };
    if raw.content.is_empty() {
        // Legacy completions-style `text`.
        raw.content = content_text(choice.get("text"));
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for call in calls {
            let function = call.get("function").unwrap_or(call);
            raw.tool_calls.push(RawToolCall {
                id: call.get("id").and_then(Value::as_str).map(str::to_string),
                name: function
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: function.get("arguments").cloned().unwrap_or(Value::Null),
            });
        }
    } else if let Some(call) = message.get("function_call") {
        // Legacy single function call.
        raw.tool_calls.push(RawToolCall {
            id: None,
            name: call
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            arguments: call.get("arguments").cloned().unwrap_or(Value::Null),
        });
    }
    Ok(raw)
}

/// An `{"error": ...}` object in a body or stream chunk, as a Status error.
pub(super) fn stream_or_body_error(v: &Value) -> Option<LlmError> {
    let err = v.get("error")?;
    if err.is_null() {
        return None;
    }
    let message = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    let status = err
        .get("code")
        .and_then(|c| {
            c.as_u64()
                .or_else(|| c.as_str().and_then(|s| s.parse().ok()))
        })
        .filter(|c| (400..600).contains(c))
        .unwrap_or(502) as u16;
    Some(LlmError::Status {
        status,
        body: message.chars().take(MAX_ERROR_BODY_CHARS).collect(),
        retry_after: None,
    })
}

/// Message content as text: a string, null, or an array of `{type: text, text}` parts.
pub(super) fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Cached prompt tokens of an OpenAI-style usage object (0 when not reported).
pub(super) fn parse_cached(v: Option<&Value>) -> u64 {
    v.and_then(|u| u.get("prompt_tokens_details"))
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

pub(super) fn parse_usage(v: Option<&Value>) -> Option<(u64, u64)> {
    let u = v?;
    let get = |a: &str, b: &str| u.get(a).or_else(|| u.get(b)).and_then(Value::as_u64);
    let input = get("prompt_tokens", "input_tokens");
    let output = get("completion_tokens", "output_tokens");
    if input.is_none() && output.is_none() {
        return None;
    }
    Some((input.unwrap_or(0), output.unwrap_or(0)))
}

/// Assembles SSE events of a streamed completion.
#[derive(Debug, Default)]
pub(super) struct StreamAccumulator {
    pub(super) cached: u64,
    pub(super) content: String,
    /// Tool calls by their `index`, arguments as concatenated string fragments.
    pub(super) calls: Vec<(Option<String>, String, String)>,
    pub(super) usage: Option<(u64, u64)>,
    pub(super) model: Option<String>,
    pub(super) finish_reason: Option<String>,
    pub(super) done: bool,
    /// `data:` lines of the event being read (SSE allows several per event).
    pub(super) data: Vec<String>,
    /// Characters in `content`, kept incrementally so the repetition guard costs O(delta).
    pub(super) content_chars: usize,
    /// Events dispatched so far.
    pub(super) events: usize,
    /// The first line that is not SSE at all, quoted when the stream turns out to be garbage.
    pub(super) foreign_line: Option<String>,
}

impl StreamAccumulator {
    pub(super) fn feed_line(&mut self, line: &str) -> Result<(), LlmError> {
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return self.dispatch();
        }
        if let Some(data) = line.strip_prefix("data:") {
            let data = data.strip_prefix(' ').unwrap_or(data);
            // Most servers send one JSON per `data:` line; dispatching eagerly when the line is
            // complete JSON (or [DONE]) tolerates servers that omit the blank separator line.
            if self.data.is_empty()
                && (data.trim() == "[DONE]" || serde_json::from_str::<Value>(data).is_ok())
            {
                self.data.push(data.to_string());
                return self.dispatch();
            }
            self.data.push(data.to_string());
        } else if self.foreign_line.is_none()
            && !["event:", "id:", "retry:", ":"]
                .iter()
                .any(|p| line.starts_with(p))
        {
            self.foreign_line = Some(snippet(line.as_bytes()));
        }
        // `event:`, `id:`, `retry:` and `:` comment lines carry nothing we need.
        Ok(())
    }

    pub(super) fn dispatch(&mut self) -> Result<(), LlmError> {
        if self.data.is_empty() {
            return Ok(());
        }
        let data = std::mem::take(&mut self.data).join("\n");
        let data = data.trim();
        self.events += 1;
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            LlmError::Malformed(format!(
                "stream event is not JSON ({e}): `{}`",
                snippet(data.as_bytes())
            ))
        })?;
        if let Some(err) = stream_or_body_error(&v) {
            return Err(err);
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = Some(m.to_string());
        }
        if let Some(u) = parse_usage(v.get("usage")) {
            self.usage = Some(u);
            self.cached = parse_cached(v.get("usage"));
        }
        let Some(choice) = v
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            return Ok(());
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            return Ok(());
        };
        let text = content_text(delta.get("content"));
        self.content_chars += text.chars().count();
        self.content.push_str(&text);
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for (pos, call) in calls.iter().enumerate() {
                let index = call
                    .get("index")
                    .and_then(Value::as_u64)
                    .map(|i| i as usize)
                    .unwrap_or(pos);
                if index > 64 {
                    return Err(LlmError::Malformed(format!(
                        "tool call index {index} out of range"
                    )));
                }
                while self.calls.len() <= index {
                    self.calls.push((None, String::new(), String::new()));
                }
                let slot = &mut self.calls[index];
                if let Some(id) = call.get("id").and_then(Value::as_str)
                    && !id.is_empty()
                {
                    slot.0 = Some(id.to_string());
                }
                let function = call.get("function").unwrap_or(&Value::Null);
                if let Some(name) = function.get("name").and_then(Value::as_str)
                    && slot.1.is_empty()
                {
                    slot.1 = name.to_string();
                }
                match function.get("arguments") {
                    Some(Value::String(fragment)) => slot.2.push_str(fragment),
                    Some(Value::Null) | None => {}
                    Some(other) => slot.2.push_str(&other.to_string()),
                }
            }
        }
        Ok(())
    }

    pub(super) fn into_answer(self) -> RawAnswer {
        RawAnswer {
            content: self.content,
            tool_calls: self
                .calls
                .into_iter()
                .filter(|(_, name, _)| !name.is_empty())
                .map(|(id, name, args)| RawToolCall {
                    id,
                    name,
                    arguments: Value::String(args),
                })
                .collect(),
            usage: self.usage,
            cached: self.cached,
            model: self.model,
            finish_reason: self.finish_reason,
        }
    }
}

/// Native tool calls with arguments parsed tolerantly and missing ids generated.
pub(super) fn native_calls(raw: Vec<RawToolCall>) -> Result<Vec<ToolCall>, LlmError> {
    raw.into_iter()
        .enumerate()
        .map(|(i, c)| {
            if c.name.trim().is_empty() {
                return Err(LlmError::Malformed(
                    "a tool call has no function name".into(),
                ));
            }
            let arguments = parse_arguments(&c.name, c.arguments)?;
            Ok(ToolCall {
                id: c.id.unwrap_or_else(|| format!("call_{i}")),
                name: c.name,
                arguments,
            })
        })
        .collect()
}

/// Tool-call arguments as a JSON object: an object, a JSON string (possibly fenced, with
/// trailing commas, or double-encoded), or empty.
pub(super) fn parse_arguments(tool: &str, value: Value) -> Result<Value, LlmError> {
    let bad = |why: String| {
        LlmError::Malformed(format!(
            "arguments of tool call `{tool}` are not a JSON object: {why}"
        ))
    };
    match value {
        Value::Object(_) => Ok(value),
        Value::Null => Ok(json!({})),
        Value::String(s) if s.trim().is_empty() => Ok(json!({})),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(Value::String(inner)) => match extract_json_object(&inner) {
                Ok(v) => Ok(v),
                Err(e) => Err(bad(e.to_string())),
            },
            _ => extract_json_object(&s).map_err(|e| bad(e.to_string())),
        },
        other => Err(bad(format!("got `{other}`"))),
    }
}

/// `<tool_call>{"name": ..., "arguments": ...}</tool_call>` segments left in the content.
pub(super) fn tagged_calls(content: &str) -> Result<Vec<ToolCall>, LlmError> {
    let mut calls = Vec::new();
    let mut rest = content;
    while let Some(start) = rest.find("<tool_call>") {
        let after = &rest[start + "<tool_call>".len()..];
        let end = after.find("</tool_call>").unwrap_or(after.len());
        let inner = &after[..end];
        let v = extract_json_object(inner).map_err(|e| {
            LlmError::Malformed(format!("unparseable <tool_call> in the answer: {e}"))
        })?;
        if let Some(call) = action_to_call(&v, calls.len())? {
            calls.push(call);
        }
        rest = &after[(end + "</tool_call>".len()).min(after.len())..];
    }
    Ok(calls)
}

/// Tool calls of a JSON action answer. Plain text (or JSON without a tool key) means no call.
pub fn parse_json_action(text: &str) -> Result<Vec<ToolCall>, LlmError> {
    // Tolerate a list of actions when the answer's first JSON value is one.
    if let Ok(Value::Array(items)) = extract_json(text)
        && !items.is_empty()
        && items.iter().all(|i| i.is_object())
    {
        let mut calls = Vec::new();
        for item in &items {
            if let Some(call) = action_to_call(item, calls.len())? {
                calls.push(call);
            }
        }
        return Ok(calls);
    }
    match extract_json_object(text) {
        Ok(v) => Ok(action_to_call(&v, 0)?.into_iter().collect()),
        Err(_) => cut_off_action(text),
    }
}

/// An answer that is no JSON value: plain text (the final answer), or an action the model was
/// cut off in the middle of. The latter is closed after its last complete element when that
/// still names a tool (a truncated URL list keeps its complete URLs), and is an error otherwise:
/// half an action must never pass for a final report.
pub(super) fn cut_off_action(text: &str) -> Result<Vec<ToolCall>, LlmError> {
    let looks_like_action = TOOL_KEYS.iter().any(|k| text.contains(&format!("\"{k}\"")))
        && text
            .trim_start()
            .trim_start_matches("```json")
            .trim_start()
            .starts_with(['{', '[']);
    if !looks_like_action {
        return Ok(Vec::new());
    }
    if let Some(closed) = crate::llm::json_extract::close_truncated_json(text)
        && let Ok(v) = serde_json::from_str::<Value>(&closed)
        && let Some(call) = action_to_call(&v, 0)?
    {
        return Ok(vec![call]);
    }
    Err(LlmError::Malformed(format!(
        "the JSON action was cut off before it named its tool and arguments: `{}`",
        text.chars().take(200).collect::<String>()
    )))
}

/// Keys naming the tool in an action object, in order of preference.
pub(super) const TOOL_KEYS: [&str; 4] = ["tool", "name", "function", "action"];
/// Keys holding the arguments.
pub(super) const ARGUMENT_KEYS: [&str; 6] = [
    "arguments",
    "args",
    "parameters",
    "input",
    "action_input",
    "tool_input",
];

/// One action object as a tool call; `None` when the object names no tool.
pub(super) fn action_to_call(v: &Value, index: usize) -> Result<Option<ToolCall>, LlmError> {
    let Some(obj) = v.as_object() else {
        return Ok(None);
    };
    let has_arguments = ARGUMENT_KEYS.iter().any(|k| obj.contains_key(*k));
    // `tool` always names a tool; the looser keys only together with an arguments key, so a
    // final answer like `{"name": "Ada", ...}` is not mistaken for a call.
    let Some((key, tool)) = TOOL_KEYS
        .iter()
        .filter(|k| **k == "tool" || has_arguments)
        .find_map(|k| obj.get(*k).map(|t| (*k, t)))
    else {
        return Ok(None);
    };
    let name = match tool {
        Value::String(s) => s.trim().to_string(),
        // {"tool": {"name": ..., "arguments": ...}}
        Value::Object(_) => return action_to_call(tool, index),
        _ => return Ok(None),
    };
    if name.is_empty() {
        return Err(LlmError::Malformed(
            "the JSON action names an empty tool".into(),
        ));
    }
    let arguments = match ARGUMENT_KEYS.iter().find_map(|k| obj.get(*k)) {
        Some(a) => parse_arguments(&name, a.clone())?,
        // {"tool": "search", "query": "..."}: the other keys are the arguments.
        None => Value::Object(
            obj.iter()
                .filter(|(k, _)| k.as_str() != key)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
    };
    Ok(Some(ToolCall {
        id: format!("call_{index}"),
        name,
        arguments,
    }))
}
