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
    CallPurpose, ChatModel, ChatRequest, ChatResponse, LlmError, Message, ModelConfig, Role,
    ToolCall, ToolMode, ToolSpec, Usage,
};

mod parse;
pub use parse::parse_json_action;
use parse::{RawAnswer, StreamAccumulator, native_calls, parse_completion, tagged_calls};

mod request;
use super::window::{estimate_tokens, request_chars};
pub use request::json_action_instruction;
use request::{json_action_messages, native_message, native_tool};

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
    let mut builder =
        crate::tls::with_shared_tls(reqwest::Client::builder()).connect_timeout(CONNECT_TIMEOUT);
    if let Some(egress) = crate::egress::installed() {
        egress.check_url(&base).map_err(|reason| {
            LlmError::Config(format!(
                "base_url `{}` is refused: {reason}",
                config.base_url
            ))
        })?;
        builder = egress.guard(builder);
    }
    builder
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build HTTP client: {e}")))
}

/// The error of a request that got no answer: a timeout, the egress guard refusing the
/// endpoint's addresses (a configuration error, never retried), or an unreachable endpoint.
pub(crate) fn transport_error(endpoint: &str, source: reqwest::Error) -> LlmError {
    if source.is_timeout() {
        return LlmError::Timeout {
            seconds: CONNECT_TIMEOUT.as_secs(),
        };
    }
    if let Some(refused) = crate::egress::refused_by_guard(&source) {
        return LlmError::Config(format!(
            "model endpoint {endpoint} is refused by the operator's egress policy: {refused}"
        ));
    }
    LlmError::Unreachable {
        endpoint: endpoint.to_string(),
        source,
    }
}

/// Removes the API key from text that came from a server (some echo request headers).
pub(crate) fn redact_key(text: String, key: Option<&str>) -> String {
    match key {
        Some(key) if !key.is_empty() && text.contains(key) => text.replace(key, "[redacted]"),
        _ => text,
    }
}

/// The error of a non-2xx answer: status, `Retry-After`, and the start of the body, key redacted
/// (kept to recognise a refused JSON schema; the error's message never shows it).
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
        if self.config.json_mode {
            // A schema is the stronger constraint and implies JSON, so it wins over json_mode.
            if let Some(schema) = &request.json_schema {
                body.insert(
                    "response_format".into(),
                    json!({"type": "json_schema", "json_schema": {
                        "name": schema.name,
                        "schema": schema.schema,
                        "strict": schema.strict,
                    }}),
                );
            } else if request.json_mode {
                body.insert("response_format".into(), json!({"type": "json_object"}));
            }
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
        transport_error(&self.endpoint, source)
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
        // before it is sent (a conversation grew to 8192 of 8192 tokens).
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
        if let Err(LlmError::Status {
            status, body: msg, ..
        }) = &result
            && request.json_schema.is_some()
            && self.config.json_mode
            && refuses_json_schema(*status, msg)
        {
            // JSON mode without json_schema (older llama.cpp, vLLM or Azure API versions, a
            // schema a strict provider rejects): once more as json_object. The prompt asks for
            // the JSON form itself, so the answer is still JSON, only not held to the schema.
            tracing::warn!(model = %self.config.model, "the server refused the JSON schema; retrying once in json_object mode");
            let request = ChatRequest {
                json_mode: true,
                json_schema: None,
                ..request.clone()
            };
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

    fn json_mode(&self, _purpose: CallPurpose) -> bool {
        self.config.json_mode
    }

    fn prompt_tools(&self, _purpose: CallPurpose) -> bool {
        self.config.tool_mode == ToolMode::JsonAction
    }
}

/// Pure: whether a refusal is about the request's `response_format` (a server or API version
/// that does not know `json_schema`, or a schema it rejects), not about the prompt.
pub(crate) fn refuses_json_schema(status: u16, body: &str) -> bool {
    let body = body.to_ascii_lowercase();
    matches!(status, 400 | 422)
        && (body.contains("response_format") || body.contains("json_schema"))
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

#[cfg(test)]
mod tests;
