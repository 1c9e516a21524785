//! A [`ChatModel`] speaking Anthropic's native Messages API (`POST /v1/messages`).
//!
//! System messages become the top-level `system` field; tool calls and results become
//! `tool_use` / `tool_result` content blocks; consecutive user-side turns are merged because the
//! API requires alternating roles. Answers are read whole (no streaming), with the same retry,
//! `Retry-After`, timeout, size and redaction rules as the OpenAI-compatible client.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::json_extract::strip_think;
use super::openai::{
    read_limited, redact_key, status_error, transport_error, validated_http_client, with_retries,
};
use super::window::{estimate_tokens, request_chars};
use super::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelConfig, Role, ToolCall, Usage,
};

/// The API version header every request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// The Messages API client.
pub struct AnthropicClient {
    config: ModelConfig,
    http: reqwest::Client,
    endpoint: String,
}

impl AnthropicClient {
    /// Validates the config and builds the HTTP client.
    pub fn new(config: ModelConfig) -> Result<Self, LlmError> {
        let http = validated_http_client(&config)?;
        let endpoint = format!("{}/messages", config.base_url.trim().trim_end_matches('/'));
        Ok(Self {
            config,
            http,
            endpoint,
        })
    }

    /// The JSON body sent for `request`.
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let system: Vec<&str> = request
            .messages
            .iter()
            .filter(|m| m.role == Role::System)
            .map(|m| m.content.as_str())
            .collect();
        let mut body = json!({
            "model": self.config.model,
            "max_tokens": request.max_tokens,
            "messages": messages(&request.messages),
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(t) = self.config.temperature {
            let t: f64 = t.to_string().parse().unwrap_or(f64::from(t));
            body["temperature"] = json!(t);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
                })
                .collect();
        }
        body
    }

    fn redact(&self, text: String) -> String {
        redact_key(text, self.config.api_key.as_deref())
    }

    async fn attempt_inner(
        &self,
        body: &Value,
        request: &ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        let mut builder = self
            .http
            .post(&self.endpoint)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .json(body);
        if let Some(key) = &self.config.api_key {
            let mut value = reqwest::header::HeaderValue::from_str(key)
                .map_err(|_| LlmError::Config("api key is not a valid header value".into()))?;
            value.set_sensitive(true);
            builder = builder.header("x-api-key", value);
        }
        let unreachable = |source: reqwest::Error| transport_error(&self.endpoint, source);
        let response = builder.send().await.map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(response, self.config.api_key.as_deref()).await);
        }
        let bytes = read_limited(response, MAX_BODY_BYTES + 1)
            .await
            .map_err(unreachable)?;
        if bytes.len() > MAX_BODY_BYTES {
            return Err(LlmError::Malformed(format!(
                "response body larger than {MAX_BODY_BYTES} bytes"
            )));
        }
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
            let start: String = String::from_utf8_lossy(&bytes).chars().take(200).collect();
            LlmError::Garbled(self.redact(format!("not a Messages API answer ({e}): {start}")))
        })?;
        self.finish(request, &v)
    }

    fn finish(&self, request: &ChatRequest, v: &Value) -> Result<ChatResponse, LlmError> {
        let blocks = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Malformed("the answer has no `content` blocks".into()))?;
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for block in blocks {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""))
                }
                Some("tool_use") => {
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string();
                    if !request.tools.iter().any(|t| t.name == name) {
                        return Err(LlmError::Malformed(format!(
                            "the model asked for unknown tool `{name}`"
                        )));
                    }
                    tool_calls.push(ToolCall {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .unwrap_or_else(|| format!("toolu_{}", tool_calls.len())),
                        name,
                        arguments: block.get("input").cloned().unwrap_or(json!({})),
                    });
                }
                // Thinking and other block kinds carry nothing the engine uses.
                _ => {}
            }
        }
        let usage = v.get("usage");
        let count = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
        let cached = count("cache_read_input_tokens").unwrap_or(0);
        let input_tokens = count("input_tokens")
            .map(|n| n + cached)
            .unwrap_or_else(|| estimate_tokens(request_chars(request)));
        let output_tokens =
            count("output_tokens").unwrap_or_else(|| estimate_tokens(text.chars().count()));
        Ok(ChatResponse {
            content: strip_think(&text).trim().to_string(),
            tool_calls,
            usage: Usage {
                input_tokens,
                cached_input_tokens: cached,
                output_tokens,
                cost_pico_usd: self.config.price.cost_with_cache_pico_usd(
                    input_tokens,
                    cached,
                    output_tokens,
                ),
                llm_calls: 1,
            },
            model: v
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or(&self.config.model)
                .to_string(),
            finish_reason: v
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// Converts the conversation to Messages API turns: no system turns, tool results as
/// `tool_result` blocks, and adjacent user-side turns merged (roles must alternate).
fn messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => ("user", vec![json!({"type": "text", "text": m.content})]),
            Role::Tool => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": m.content,
                })],
            ),
            Role::Assistant => {
                let mut blocks = Vec::new();
                if !m.content.trim().is_empty() {
                    blocks.push(json!({"type": "text", "text": m.content}));
                }
                for c in &m.tool_calls {
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}));
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "(no answer)"}));
                }
                ("assistant", blocks)
            }
        };
        match out.last_mut() {
            Some(last) if last["role"] == role => {
                if let Some(existing) = last["content"].as_array_mut() {
                    existing.extend(blocks);
                }
            }
            _ => out.push(json!({"role": role, "content": blocks})),
        }
    }
    out
}

#[async_trait]
impl ChatModel for AnthropicClient {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        if request.max_tokens == 0 {
            return Err(LlmError::Config(
                "max_tokens must be greater than zero".into(),
            ));
        }
        let body = self.request_body(&request);
        with_retries(&self.config, || self.attempt_inner(&body, &request)).await
    }

    fn context_window(&self) -> u64 {
        self.config.context_window
    }
}

#[cfg(test)]
mod tests;
