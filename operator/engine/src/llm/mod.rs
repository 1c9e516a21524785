//! Model clients: the `ChatModel` port, the OpenAI-compatible client, pricing.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A message role in a chat conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One chat message. `tool_calls` is set on assistant turns that called tools;
/// `tool_call_id` on tool-result turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: None,
        }
    }
    /// An assistant message, possibly carrying tool calls.
    pub fn assistant(content: impl Into<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            tool_calls,
            tool_call_id: None,
        }
    }
    /// The result of one tool call.
    pub fn tool(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: content.into(),
            tool_calls: vec![],
            tool_call_id: Some(call_id.into()),
        }
    }
}

/// A tool the model may call: name, description and JSON-Schema parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// A tool call requested by the model, with its arguments already parsed as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: serde_json::Value,
}

/// What a call is for; used for metrics labels and provenance, never for behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallPurpose {
    Plan,
    Research,
    Evaluate,
    Synthesize,
    Classify,
    Summarize,
}

/// One chat completion request, independent of the wire protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    /// Tools offered to the model. Empty means a plain completion.
    pub tools: Vec<ToolSpec>,
    /// Ask the server for a JSON object answer (`response_format: json_object`).
    pub json_mode: bool,
    /// A schema the answer must follow, sent as `response_format: json_schema` (instead of
    /// `json_object`) to servers whose profile has `jsonMode`; other servers never see it, so
    /// the prompt must still ask for the JSON form.
    pub json_schema: Option<JsonSchema>,
    /// Output cap; always sent, as `max_tokens` (llama.cpp reads only that).
    pub max_tokens: u32,
    pub purpose: CallPurpose,
}

/// A JSON schema for an answer (OpenAI's `response_format.json_schema`; llama.cpp's server,
/// vLLM and tools/llm-server accept the same shape and constrain decoding to it).
#[derive(Debug, Clone, PartialEq)]
pub struct JsonSchema {
    /// The schema's name; OpenAI requires one (letters, digits, `_` and `-`, at most 64).
    pub name: String,
    /// The schema itself.
    pub schema: serde_json::Value,
    /// OpenAI's strict mode. Off for schemas with keywords strict mode rejects (`maxLength`):
    /// grammar-based servers hold the output to the schema either way.
    pub strict: bool,
}

/// Token usage and cost of one or more calls. Cost is kept in pico-USD so sums are exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// Of the input tokens, those served from the provider's prompt cache (priced lower).
    #[serde(default)]
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_pico_usd: u64,
    pub llm_calls: u64,
}

impl Usage {
    /// Adds another usage record to this one.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_pico_usd += other.cost_pico_usd;
        self.llm_calls += other.llm_calls;
    }
    /// Cost as a decimal USD string with six fractional digits, e.g. `"0.001250"`.
    pub fn cost_usd_string(&self) -> String {
        format_pico_usd(self.cost_pico_usd)
    }
}

/// Formats pico-USD as a decimal USD string with six fractional digits (rounded down).
pub fn format_pico_usd(pico: u64) -> String {
    let micro = pico / 1_000_000;
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// The model's answer: text, tool calls (native or parsed from the JSON action protocol), usage.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub model: String,
    pub finish_reason: Option<String>,
}

/// Errors of a model call. `is_retryable` tells the caller whether trying again can help.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("model endpoint {endpoint} unreachable: {source}")]
    Unreachable {
        endpoint: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("model call timed out after {seconds}s")]
    Timeout { seconds: u64 },
    /// A non-2xx answer. The body is kept for the client's own decisions (a refused JSON
    /// schema) but never shown: it reaches status conditions and reports a tenant reads.
    #[error("model server answered HTTP {status}{}", status_reason(*.status))]
    Status {
        status: u16,
        body: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error("model answer could not be understood: {0}")]
    Malformed(String),
    /// The answer was damaged in transit: a body that is not JSON, no choices, a stream cut off
    /// midway. No usage was reported, and asking again usually works, so it is retried.
    #[error("model answer could not be understood: {0}")]
    Garbled(String),
    #[error("model output degenerated into repetition and was stopped after {tokens} tokens")]
    Degenerate { tokens: u64 },
    #[error("model configuration invalid: {0}")]
    Config(String),
    /// The call was not made: its worst case would pass the run's budget.
    #[error("{message}")]
    BudgetExhausted { tokens: bool, message: String },
    /// Every tier's circuit breaker is open; no call was made.
    #[error("every model endpoint is unavailable (circuit open): {endpoints}")]
    CircuitOpen { endpoints: String },
    /// A call the server answered (and a provider bills) whose output was unusable: stopped as
    /// degenerate or not understood. `usage` is what it cost, so spend is never under-reported.
    #[error("{source}")]
    Billed {
        usage: Usage,
        #[source]
        source: Box<LlmError>,
    },
}

impl LlmError {
    /// What a failed call still cost (zero when the server answered nothing billable).
    pub fn billed(&self) -> Usage {
        match self {
            LlmError::Billed { usage, .. } => *usage,
            _ => Usage::default(),
        }
    }

    /// The failure itself, without its bill.
    pub fn unbilled(&self) -> &LlmError {
        match self {
            LlmError::Billed { source, .. } => source.unbilled(),
            other => other,
        }
    }

    /// The failure itself, its bill dropped (the caller accounted for it).
    pub fn into_unbilled(self) -> LlmError {
        match self {
            LlmError::Billed { source, .. } => source.into_unbilled(),
            other => other,
        }
    }

    /// True when a retry may succeed (timeouts, 429, 5xx, connection errors, garbled answers).
    pub fn is_retryable(&self) -> bool {
        match self.unbilled() {
            LlmError::Unreachable { .. } | LlmError::Timeout { .. } | LlmError::Garbled(_) => true,
            LlmError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// " (Reason Phrase)" of a known HTTP status, else nothing.
fn status_reason(status: u16) -> String {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" ({r})"))
        .unwrap_or_default()
}

/// The port through which the engine talks to any language model.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends one request and returns the full answer with usage and cost accounted.
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError>;
    /// Context window of the model in tokens (used for the 55% scrape gate).
    fn context_window(&self) -> u64;
    /// Whether the model that answers calls of `purpose` has the profile's `jsonMode` (its
    /// server can hold an answer to JSON, or to a [`JsonSchema`]); callers then ask for a JSON form.
    fn json_mode(&self, purpose: CallPurpose) -> bool {
        let _ = purpose;
        false
    }
    /// Whether the model that answers calls of `purpose` is offered tools through the prompt
    /// (the JSON action protocol a profile declares for small models without tool calling).
    fn prompt_tools(&self, purpose: CallPurpose) -> bool {
        let _ = purpose;
        false
    }
}

pub mod anthropic;
pub mod breaker;
pub mod json_extract;
pub mod limiter;
pub mod openai;
pub mod pricing;
pub mod repetition;
pub mod router;
pub mod window;

/// How tools are offered to a model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolMode {
    /// The server's native `tools` / `tool_calls` support.
    #[default]
    Native,
    /// A prompt-level protocol: the model answers with one JSON object `{"tool": ..., "arguments": ...}`.
    /// For small local models and servers without tool support.
    JsonAction,
}

/// Everything needed to call one OpenAI-compatible model. The API key is already resolved
/// (from a Secret or an env var) and is redacted from `Debug`.
#[derive(Clone, PartialEq)]
pub struct ModelConfig {
    /// Base URL including the version prefix, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name sent in every request.
    pub model: String,
    /// Bearer token; never logged, never put in errors or `Debug` output.
    pub api_key: Option<String>,
    /// Native tool calling or the JSON action protocol.
    pub tool_mode: ToolMode,
    /// Whether the server supports `response_format: {"type": "json_object"}`.
    pub json_mode: bool,
    /// Timeout of one attempt (connect, prompt processing and the whole answer).
    pub timeout: std::time::Duration,
    /// Retries after the first attempt on retryable errors.
    pub max_retries: u32,
    /// Context window in tokens.
    pub context_window: u64,
    /// Price used to cost every call.
    pub price: pricing::Price,
    /// Sampling temperature; omitted from requests when `None`.
    pub temperature: Option<f32>,
    /// Stream answers (SSE); required for stopping degenerate repetition early.
    pub stream: bool,
    /// Smallest backoff between retries (jitter is added).
    pub retry_min_delay: std::time::Duration,
    /// Largest backoff between retries; also caps a server's `Retry-After`.
    pub retry_max_delay: std::time::Duration,
    /// Azure OpenAI: the `api-version` query parameter. When set, the model name is the
    /// deployment, the path is `/openai/deployments/<model>/chat/completions` and the key goes in
    /// an `api-key` header.
    pub azure_api_version: Option<String>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            base_url: "http://127.0.0.1:8080/v1".to_string(),
            model: String::new(),
            api_key: None,
            tool_mode: ToolMode::Native,
            json_mode: false,
            // A 2-core machine needs minutes to read an 8k-token prompt with a local model.
            timeout: std::time::Duration::from_secs(300),
            max_retries: 3,
            context_window: 8192,
            price: pricing::Price::FREE,
            temperature: None,
            stream: true,
            retry_min_delay: std::time::Duration::from_secs(1),
            retry_max_delay: std::time::Duration::from_secs(60),
            azure_api_version: None,
        }
    }
}

impl ModelConfig {
    /// A config with defaults for everything but the endpoint and model name.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            ..Self::default()
        }
    }
}

impl std::fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Written by hand so the API key can never reach logs through `{:?}`.
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("tool_mode", &self.tool_mode)
            .field("json_mode", &self.json_mode)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("context_window", &self.context_window)
            .field("price", &self.price)
            .field("temperature", &self.temperature)
            .field("stream", &self.stream)
            .field("retry_min_delay", &self.retry_min_delay)
            .field("retry_max_delay", &self.retry_max_delay)
            .finish()
    }
}
