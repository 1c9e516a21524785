//! OpenAI-compatible chat completions client (`POST {base_url}/chat/completions`).
//!
//! Works with hosted APIs and local servers (llama.cpp, node-llama-cpp, vLLM). Tolerates the
//! variations those emit: missing `id` / `finish_reason` / `usage`, null content, tool-call
//! arguments as objects or fenced strings, streams without a usage chunk. Tools are offered
//! natively or through the JSON action protocol ([`ToolMode::JsonAction`]).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use serde_json::{Map, Value, json};

use super::json_extract::{extract_json, extract_json_object, strip_think};
use super::repetition::{self, StreamGuard};
use super::window;
use super::{
    ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelConfig, Role, ToolCall, ToolMode,
    ToolSpec, Usage,
};

/// Largest non-streamed response body accepted.
const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Largest total size of a streamed response.
const MAX_STREAM_BYTES: usize = 16 * 1024 * 1024;
/// Largest single SSE line (a chunk never comes close; guards against a server without newlines).
const MAX_SSE_LINE_BYTES: usize = 1024 * 1024;
/// How much of an error body is kept in `LlmError::Status`.
const MAX_ERROR_BODY_CHARS: usize = 1000;
/// Upper bound on a server's `Retry-After` that is honoured (longer waits are capped).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(120);
/// Connection setup timeout, separate from the per-attempt timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters per token for estimates when a server reports no usage (a common rule of thumb
/// for English text with BPE tokenizers; good enough for budgets, never used when usage is sent).
const CHARS_PER_TOKEN: u64 = 4;

/// A [`ChatModel`] speaking the OpenAI chat completions protocol.
pub struct OpenAiClient {
    config: ModelConfig,
    http: reqwest::Client,
    endpoint: String,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config's Debug redacts the key; the reqwest client is left out on purpose.
        f.debug_struct("OpenAiClient")
            .field("endpoint", &self.endpoint)
            .field("config", &self.config)
            .finish()
    }
}

/// Checks what every provider client needs (an http(s) base URL, a model, a timeout, a key that
/// fits a header) and builds the HTTP client; shared by the OpenAI-compatible and Anthropic clients.
pub(crate) fn validated_http_client(config: &ModelConfig) -> Result<reqwest::Client, LlmError> {
    let base = url::Url::parse(config.base_url.trim()).map_err(|e| {
        LlmError::Config(format!("base_url `{}` is not a URL: {e}", config.base_url))
    })?;
    if base.scheme() != "http" && base.scheme() != "https" {
        return Err(LlmError::Config(format!(
            "base_url `{}` must be http or https",
            config.base_url
        )));
    }
    if config.model.trim().is_empty() {
        return Err(LlmError::Config("model name is empty".into()));
    }
    if config.timeout.is_zero() {
        return Err(LlmError::Config("timeout must be greater than zero".into()));
    }
    if let Some(key) = &config.api_key
        && (key.is_empty()
            || reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err())
    {
        // Never echo the key itself.
        return Err(LlmError::Config(
            "api key is empty or contains characters not allowed in a header".into(),
        ));
    }
    crate::tls::with_shared_tls(reqwest::Client::builder())
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build HTTP client: {e}")))
}

/// Removes the API key from text that came from a server (some echo request headers).
pub(crate) fn redact_key(text: String, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "[redacted]"),
        _ => text,
    }
}

/// The error of a non-2xx answer: status, `Retry-After`, and the start of the body, key redacted.
pub(crate) async fn status_error(response: reqwest::Response, key: Option<&str>) -> LlmError {
    let status = response.status().as_u16();
    let retry_after = parse_retry_after(response.headers());
    let text = read_limited(response, MAX_ERROR_BODY_CHARS * 4)
        .await
        .unwrap_or_default();
    let text: String = String::from_utf8_lossy(&text)
        .chars()
        .take(MAX_ERROR_BODY_CHARS)
        .collect();
    LlmError::Status {
        status,
        body: redact_key(text, key),
        retry_after,
    }
}

/// Runs `attempt` with the config's retry policy: each attempt bounded by the per-attempt
/// timeout, exponential backoff with jitter on retryable errors, a server's `Retry-After`
/// honoured (capped) while retries remain.
pub(crate) async fn with_retries<F, Fut>(
    config: &ModelConfig,
    attempt: F,
) -> Result<ChatResponse, LlmError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<ChatResponse, LlmError>>,
{
    let backoff = ExponentialBuilder::default()
        .with_jitter()
        .with_min_delay(config.retry_min_delay)
        .with_max_delay(config.retry_max_delay)
        .with_max_times(config.max_retries as usize);
    let max_retry_after = config.retry_max_delay.max(MAX_RETRY_AFTER);
    let mut attempt = attempt;
    let timeout = config.timeout;
    let bounded = move || {
        let fut = attempt();
        async move {
            tokio::time::timeout(timeout, fut)
                .await
                .unwrap_or(Err(LlmError::Timeout {
                    seconds: timeout.as_millis().div_ceil(1000) as u64,
                }))
        }
    };
    bounded
        .retry(backoff)
        .when(LlmError::is_retryable)
        .adjust(|err, next| match (err, next) {
            // Only while retries remain (`next` is None once the backoff is exhausted).
            (LlmError::Status { retry_after: Some(wait), .. }, Some(_)) => {
                Some((*wait).min(max_retry_after))
            }
            (_, next) => next,
        })
        .notify(|err, wait| {
            tracing::warn!(model = %config.model, error = %err, wait_ms = wait.as_millis() as u64, "retrying model call");
        })
        .await
}

impl OpenAiClient {
    /// Validates the config and builds the HTTP client.
    pub fn new(config: ModelConfig) -> Result<Self, LlmError> {
        let http = validated_http_client(&config)?;
        let base = config.base_url.trim().trim_end_matches('/');
        let endpoint = match &config.azure_api_version {
            // Azure OpenAI: the deployment is in the path, the API version in the query.
            Some(version) => format!(
                "{base}/openai/deployments/{}/chat/completions?api-version={version}",
                config.model.trim()
            ),
            None => format!("{base}/chat/completions"),
        };
        Ok(Self {
            config,
            http,
            endpoint,
        })
    }

    /// The configuration this client was built from.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The JSON body sent for `request` (exposed for tests and provenance logs).
    pub fn request_body(&self, request: &ChatRequest) -> Value {
        let mode = self.config.tool_mode;
        let offer_tools = !request.tools.is_empty();
        let messages = match mode {
            ToolMode::Native => request
                .messages
                .iter()
                .map(native_message)
                .collect::<Vec<_>>(),
            ToolMode::JsonAction => json_action_messages(&request.messages, &request.tools),
        };
        let mut body = Map::new();
        body.insert("model".into(), json!(self.config.model));
        body.insert("messages".into(), Value::Array(messages));
        // Always sent: llama.cpp ignores `max_completion_tokens` and would otherwise run unbounded.
        body.insert("max_tokens".into(), json!(request.max_tokens));
        if let Some(t) = self.config.temperature {
            // Through f32's shortest decimal form so 0.7 is sent as 0.7, not 0.699999988079071.
            let t: f64 = t.to_string().parse().unwrap_or(f64::from(t));
            body.insert("temperature".into(), json!(t));
        }
        if mode == ToolMode::Native && offer_tools {
            body.insert(
                "tools".into(),
                Value::Array(request.tools.iter().map(native_tool).collect()),
            );
        }
        if request.json_mode && self.config.json_mode {
            body.insert("response_format".into(), json!({"type": "json_object"}));
        }
        body.insert("stream".into(), json!(self.config.stream));
        if self.config.stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        Value::Object(body)
    }

    async fn attempt_inner(
        &self,
        body: &Value,
        request: &ChatRequest,
    ) -> Result<ChatResponse, LlmError> {
        let mut builder = self.http.post(&self.endpoint).json(body);
        match (&self.config.api_key, &self.config.azure_api_version) {
            (Some(key), Some(_)) => {
                let mut value = reqwest::header::HeaderValue::from_str(key)
                    .map_err(|_| LlmError::Config("api key is not a valid header value".into()))?;
                value.set_sensitive(true);
                builder = builder.header("api-key", value);
            }
            // bearer_auth marks the header sensitive, so reqwest never prints it either.
            (Some(key), None) => builder = builder.bearer_auth(key),
            (None, _) => {}
        }
        let response = builder.send().await.map_err(|e| self.transport_error(e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(response, self.config.api_key.as_deref()).await);
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let is_sse = content_type.contains("event-stream")
            || (self.config.stream && !content_type.contains("json"));
        let raw = if is_sse {
            match self.read_stream(response).await {
                // Stopped mid-stream: the prompt and every token streamed so far are billed.
                Err(LlmError::Degenerate { tokens }) => {
                    let usage = self.usage_of(request, None, tokens, 0);
                    return Err(LlmError::Billed {
                        usage,
                        source: Box::new(LlmError::Degenerate { tokens }),
                    });
                }
                other => other?,
            }
        } else {
            let bytes = read_limited(response, MAX_BODY_BYTES + 1)
                .await
                .map_err(|e| self.transport_error(e))?;
            if bytes.len() > MAX_BODY_BYTES {
                return Err(LlmError::Malformed(format!(
                    "response body larger than {MAX_BODY_BYTES} bytes"
                )));
            }
            parse_completion(&bytes).map_err(|e| self.redact_err(e))?
        };
        self.finish(request, raw)
    }

    /// Reads an SSE stream, assembling deltas and stopping on degenerate repetition.
    async fn read_stream(&self, response: reqwest::Response) -> Result<RawAnswer, LlmError> {
        let mut stream = response.bytes_stream();
        let mut acc = StreamAccumulator::default();
        let mut line_buf: Vec<u8> = Vec::new();
        let mut total = 0usize;
        let mut guard = StreamGuard::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.transport_error(e))?;
            total += chunk.len();
            if total > MAX_STREAM_BYTES {
                return Err(LlmError::Malformed(format!(
                    "streamed answer larger than {MAX_STREAM_BYTES} bytes"
                )));
            }
            line_buf.extend_from_slice(&chunk);
            while let Some(pos) = line_buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = line_buf.drain(..=pos).collect();
                let before = acc.content_chars;
                acc.feed_line(&String::from_utf8_lossy(&line))
                    .map_err(|e| self.redact_err(e))?;
                let added = acc.content_chars - before;
                if added > 0
                    && let Some(rep) = guard.observe(&acc.content, added)
                {
                    tracing::warn!(
                        model = %self.config.model,
                        period = rep.period,
                        span = rep.span,
                        "stopping a degenerate streamed answer"
                    );
                    return Err(LlmError::Degenerate {
                        tokens: estimate_tokens(acc.content_chars),
                    });
                }
                if acc.done {
                    return Ok(acc.into_answer());
                }
            }
            if line_buf.len() > MAX_SSE_LINE_BYTES {
                return Err(LlmError::Malformed(format!(
                    "stream line longer than {MAX_SSE_LINE_BYTES} bytes"
                )));
            }
        }
        if !line_buf.is_empty() {
            acc.feed_line(&String::from_utf8_lossy(&line_buf))
                .map_err(|e| self.redact_err(e))?;
        }
        acc.feed_line("").map_err(|e| self.redact_err(e))?;
        if acc.events == 0
            && let Some(line) = acc.foreign_line
        {
            return Err(self.redact_err(LlmError::Garbled(format!(
                "response is not an event stream: `{line}`"
            ))));
        }
        if !acc.done && acc.finish_reason.is_none() {
            return Err(LlmError::Garbled(format!(
                "stream ended before the answer was complete (no finish_reason and no [DONE]) after {} characters",
                acc.content.chars().count()
            )));
        }
        Ok(acc.into_answer())
    }

    /// Turns the raw answer into a `ChatResponse`: tool calls, usage and cost.
    fn finish(&self, request: &ChatRequest, raw: RawAnswer) -> Result<ChatResponse, LlmError> {
        let output_chars = raw.content.chars().count()
            + raw
                .tool_calls
                .iter()
                .map(|c| c.arguments.to_string().chars().count())
                .sum::<usize>();
        let usage = self.usage_of(
            request,
            raw.usage,
            estimate_tokens(output_chars),
            raw.cached,
        );
        // An answer the server completed is paid for even when it cannot be used.
        let billed = |source: LlmError| LlmError::Billed {
            usage,
            source: Box::new(source),
        };
        if let Some(rep) = repetition::detect(&raw.content) {
            tracing::warn!(model = %self.config.model, period = rep.period, span = rep.span, "degenerate answer");
            return Err(billed(LlmError::Degenerate {
                tokens: estimate_tokens(raw.content.chars().count()),
            }));
        }
        let content = strip_think(&raw.content).trim().to_string();
        let tool_calls = if request.tools.is_empty() {
            Vec::new()
        } else {
            let calls = match self.config.tool_mode {
                ToolMode::Native if !raw.tool_calls.is_empty() => native_calls(raw.tool_calls),
                // Some servers leave Hermes/Qwen-style `<tool_call>` tags in the content.
                ToolMode::Native => tagged_calls(&content),
                ToolMode::JsonAction => parse_json_action(&content),
            }
            .map_err(billed)?;
            for call in &calls {
                if !request.tools.iter().any(|t| t.name == call.name) {
                    let available: Vec<&str> =
                        request.tools.iter().map(|t| t.name.as_str()).collect();
                    return Err(billed(LlmError::Malformed(format!(
                        "the model asked for unknown tool `{}` (available: {})",
                        call.name,
                        available.join(", ")
                    ))));
                }
            }
            calls
        };
        Ok(ChatResponse {
            content,
            tool_calls,
            usage,
            model: raw.model.unwrap_or_else(|| self.config.model.clone()),
            finish_reason: raw.finish_reason,
        })
    }

    /// Usage and cost of one call: the server's counts when it sent them, otherwise the
    /// prompt's size and `estimated_output` tokens (estimates at four characters per token).
    fn usage_of(
        &self,
        request: &ChatRequest,
        reported: Option<(u64, u64)>,
        estimated_output: u64,
        cached: u64,
    ) -> Usage {
        let (input_tokens, output_tokens) =
            reported.unwrap_or((estimate_tokens(request_chars(request)), estimated_output));
        let cached = cached.min(input_tokens);
        Usage {
            input_tokens,
            cached_input_tokens: cached,
            output_tokens,
            cost_pico_usd: self.config.price.cost_with_cache_pico_usd(
                input_tokens,
                cached,
                output_tokens,
            ),
            llm_calls: 1,
        }
    }

    fn transport_error(&self, source: reqwest::Error) -> LlmError {
        if source.is_timeout() {
            return LlmError::Timeout {
                seconds: CONNECT_TIMEOUT.as_secs(),
            };
        }
        LlmError::Unreachable {
            endpoint: self.endpoint.clone(),
            source,
        }
    }

    /// Removes the API key from text that came from the server (some echo request headers).
    fn redact(&self, text: String) -> String {
        redact_key(text, self.config.api_key.as_deref())
    }

    fn redact_err(&self, err: LlmError) -> LlmError {
        match err {
            LlmError::Malformed(m) => LlmError::Malformed(self.redact(m)),
            LlmError::Billed { usage, source } => LlmError::Billed {
                usage,
                source: Box::new(self.redact_err(*source)),
            },
            LlmError::Garbled(m) => LlmError::Garbled(self.redact(m)),
            LlmError::Status {
                status,
                body,
                retry_after,
            } => LlmError::Status {
                status,
                body: self.redact(body),
                retry_after,
            },
            other => other,
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiClient {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        if request.max_tokens == 0 {
            // An unset cap is a caller bug; a model without a cap can loop for thousands of tokens.
            return Err(LlmError::Config(
                "max_tokens must be greater than zero".into(),
            ));
        }
        // The context window is a hard limit: the prompt is measured and trimmed to fit
        // before it is sent (issue 14: a conversation grew to 8192 of 8192 tokens).
        let budget = window::prompt_budget_chars(&request, self.config.context_window);
        let (request, cut) = window::fit(request, budget);
        if cut > 0 {
            tracing::info!(model = %self.config.model, cut_chars = cut, budget_chars = budget, "prompt trimmed to fit the context window");
        }
        let body = self.request_body(&request);
        let started = Instant::now();
        let mut result = with_retries(&self.config, || self.attempt_inner(&body, &request)).await;
        if let Err(LlmError::Status {
            status, body: msg, ..
        }) = &result
            && window::is_context_overflow(*status, msg)
        {
            // The server counts denser than the estimate: once more, with a prompt 40% smaller.
            let smaller = request_chars(&request) * 6 / 10;
            let (request, cut) = window::fit(request.clone(), smaller);
            tracing::warn!(model = %self.config.model, cut_chars = cut, "the server refused the prompt as too long for its context; retrying once with a smaller one");
            let body = self.request_body(&request);
            result = with_retries(&self.config, || self.attempt_inner(&body, &request)).await;
        }
        match &result {
            Ok(r) => tracing::debug!(
                model = %self.config.model,
                purpose = ?request.purpose,
                input_tokens = r.usage.input_tokens,
                output_tokens = r.usage.output_tokens,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "model call finished"
            ),
            Err(e) => {
                tracing::warn!(model = %self.config.model, purpose = ?request.purpose, error = %e, "model call failed")
            }
        }
        result
    }

    fn context_window(&self) -> u64 {
        self.config.context_window
    }
}

/// Parses `Retry-After` in its seconds form (the HTTP-date form is rare for APIs and ignored).
pub(crate) fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // Some providers send fractional seconds.
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Reads at most `limit` bytes of a body.
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut out = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

/// Tokens a text of `chars` characters is assumed to hold when the server reports no usage.
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(CHARS_PER_TOKEN)
}

/// Characters a request sends: messages, tool-call arguments and tool definitions.
pub fn request_chars(request: &ChatRequest) -> usize {
    let messages: usize = request
        .messages
        .iter()
        .map(|m| {
            m.content.chars().count()
                + m.tool_calls
                    .iter()
                    .map(|c| c.arguments.to_string().len())
                    .sum::<usize>()
        })
        .sum();
    let tools: usize = request
        .tools
        .iter()
        .map(|t| t.description.len() + t.parameters.to_string().len())
        .sum();
    messages + tools
}

fn native_tool(tool: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    })
}

fn native_message(m: &Message) -> Value {
    match m.role {
        Role::Assistant if !m.tool_calls.is_empty() => {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .map(|c| {
                    json!({
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments.to_string()},
                    })
                })
                .collect();
            let content = if m.content.is_empty() {
                Value::Null
            } else {
                json!(m.content)
            };
            json!({"role": "assistant", "content": content, "tool_calls": calls})
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
            "content": m.content,
        }),
        role => json!({"role": role, "content": m.content}),
    }
}

/// The instruction describing the JSON action protocol and the available tools.
pub fn json_action_instruction(tools: &[ToolSpec]) -> String {
    let mut s = String::from(
        "## Tools\nYou can call exactly one tool per answer. To call a tool, answer with exactly one JSON \
         object and nothing else, in this form:\n{\"tool\": \"<tool name>\", \"arguments\": {<arguments>}}\n\
         When you do not need a tool, answer with your final text directly instead (no JSON object with a \
         \"tool\" key).\n\nAvailable tools:\n",
    );
    for t in tools {
        s.push_str(&format!(
            "- {}: {}\n  arguments (JSON Schema): {}\n",
            t.name, t.description, t.parameters
        ));
    }
    s
}

/// Messages for the JSON action protocol: the instruction goes into the first system message
/// (many chat templates accept a single leading system message only), assistant tool calls are
/// rendered as the JSON action text and tool results become user messages (servers without tool
/// support reject role `tool`).
fn json_action_messages(messages: &[Message], tools: &[ToolSpec]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len() + 1);
    let instruction = (!tools.is_empty()).then(|| json_action_instruction(tools));
    let mut instruction_placed = instruction.is_none();
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::System if !instruction_placed => {
                let text = instruction.as_deref().unwrap_or_default();
                out.push(json!({"role": "system", "content": format!("{}\n\n{text}", m.content)}));
                instruction_placed = true;
            }
            Role::Assistant if !m.tool_calls.is_empty() => {
                let content = if m.content.trim().is_empty() {
                    m.tool_calls
                        .iter()
                        .map(|c| json!({"tool": c.name, "arguments": c.arguments}).to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                } else {
                    m.content.clone()
                };
                out.push(json!({"role": "assistant", "content": content}));
            }
            Role::Tool => {
                let id = m.tool_call_id.as_deref().unwrap_or_default();
                // The call this answers: the latest earlier assistant call with that id.
                let name = messages[..i]
                    .iter()
                    .rev()
                    .flat_map(|p| p.tool_calls.iter())
                    .find(|c| c.id == id)
                    .map(|c| c.name.as_str())
                    .unwrap_or("tool");
                out.push(json!({"role": "user", "content": format!("Result of tool `{name}`:\n{}", m.content)}));
            }
            role => out.push(json!({"role": role, "content": m.content})),
        }
    }
    if !instruction_placed && let Some(text) = instruction {
        out.insert(0, json!({"role": "system", "content": text}));
    }
    out
}

/// A tool call as the server sent it, arguments not yet validated.
#[derive(Debug, Default)]
struct RawToolCall {
    id: Option<String>,
    name: String,
    arguments: Value,
}

/// A completion before tool-call parsing and costing.
#[derive(Debug, Default)]
struct RawAnswer {
    content: String,
    tool_calls: Vec<RawToolCall>,
    usage: Option<(u64, u64)>,
    /// Prompt tokens served from the provider's cache (`prompt_tokens_details.cached_tokens`).
    cached: u64,
    model: Option<String>,
    finish_reason: Option<String>,
}

fn snippet(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).chars().take(200).collect()
}

/// Parses a non-streamed completion body.
fn parse_completion(bytes: &[u8]) -> Result<RawAnswer, LlmError> {
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
fn stream_or_body_error(v: &Value) -> Option<LlmError> {
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
fn content_text(v: Option<&Value>) -> String {
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
fn parse_cached(v: Option<&Value>) -> u64 {
    v.and_then(|u| u.get("prompt_tokens_details"))
        .and_then(|d| d.get("cached_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

fn parse_usage(v: Option<&Value>) -> Option<(u64, u64)> {
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
struct StreamAccumulator {
    cached: u64,
    content: String,
    /// Tool calls by their `index`, arguments as concatenated string fragments.
    calls: Vec<(Option<String>, String, String)>,
    usage: Option<(u64, u64)>,
    model: Option<String>,
    finish_reason: Option<String>,
    done: bool,
    /// `data:` lines of the event being read (SSE allows several per event).
    data: Vec<String>,
    /// Characters in `content`, kept incrementally so the repetition guard costs O(delta).
    content_chars: usize,
    /// Events dispatched so far.
    events: usize,
    /// The first line that is not SSE at all, quoted when the stream turns out to be garbage.
    foreign_line: Option<String>,
}

impl StreamAccumulator {
    fn feed_line(&mut self, line: &str) -> Result<(), LlmError> {
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

    fn dispatch(&mut self) -> Result<(), LlmError> {
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

    fn into_answer(self) -> RawAnswer {
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
fn native_calls(raw: Vec<RawToolCall>) -> Result<Vec<ToolCall>, LlmError> {
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
fn parse_arguments(tool: &str, value: Value) -> Result<Value, LlmError> {
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
fn tagged_calls(content: &str) -> Result<Vec<ToolCall>, LlmError> {
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
fn cut_off_action(text: &str) -> Result<Vec<ToolCall>, LlmError> {
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
const TOOL_KEYS: [&str; 4] = ["tool", "name", "function", "action"];
/// Keys holding the arguments.
const ARGUMENT_KEYS: [&str; 6] = [
    "arguments",
    "args",
    "parameters",
    "input",
    "action_input",
    "tool_input",
];

/// One action object as a tool call; `None` when the object names no tool.
fn action_to_call(v: &Value, index: usize) -> Result<Option<ToolCall>, LlmError> {
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

#[cfg(test)]
mod tests {
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
        let err =
            parse_completion(br#"{"error":{"message":"overloaded","code":503}}"#).unwrap_err();
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
}
