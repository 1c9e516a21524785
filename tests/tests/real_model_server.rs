//! The real local model server (tools/llm-server on node-llama-cpp) speaks enough of the OpenAI
//! chat-completions API for Quarry: capped completions with usage, streaming, JSON mode, errors.
//!
//! Gated: runs when the model is installed (scripts/install-real-model.sh) or `QUARRY_REAL_MODEL=1`,
//! skips with a message otherwise. In CI with `QUARRY_REAL_MODEL=1` a missing install fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use quarry_e2e::real_model::{self, MODEL_NAME, RealModel, RealModelConfig, RealModelError};
use serde_json::{Value, json};

/// Generous per-request timeout: a loaded 2-core machine can take minutes for a short prompt.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("http client")
}

async fn post(model: &RealModel, body: Value) -> (reqwest::StatusCode, String) {
    let resp = client()
        .post(format!("{}/chat/completions", model.base_url()))
        .json(&body)
        .send()
        .await
        .expect("request to the model server");
    let status = resp.status();
    (status, resp.text().await.expect("response body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real model (scripts/install-real-model.sh)"]
async fn real_model_serves_openai_chat_completions() {
    let t0 = Instant::now();
    let model = RealModel::start()
        .await
        .expect("start the real model server");
    eprintln!(
        "model server ready on {} after {:?}",
        model.base_url(),
        t0.elapsed()
    );

    // /v1/models names the model.
    let models: Value = client()
        .get(format!("{}/models", model.base_url()))
        .send()
        .await
        .expect("GET /v1/models")
        .json()
        .await
        .expect("models JSON");
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], MODEL_NAME);

    // A short capped completion at temperature 0: text, usage, the cap honoured.
    let request = json!({
        "model": MODEL_NAME,
        "messages": [
            {"role": "system", "content": "You answer in one short sentence."},
            {"role": "user", "content": "Write a sentence about the Python programming language."}
        ],
        "temperature": 0,
        "max_tokens": 16
    });
    let t = Instant::now();
    let (status, body) = post(&model, request.clone()).await;
    eprintln!("16-token completion took {:?}", t.elapsed());
    assert_eq!(status, 200, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("completion JSON");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], MODEL_NAME);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    let text = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content string");
    assert!(!text.trim().is_empty(), "empty completion: {body}");
    let usage = &v["usage"];
    let prompt_tokens = usage["prompt_tokens"].as_u64().expect("prompt_tokens");
    let completion_tokens = usage["completion_tokens"]
        .as_u64()
        .expect("completion_tokens");
    assert!(prompt_tokens > 10, "prompt_tokens {prompt_tokens}");
    assert!(
        (1..=16).contains(&completion_tokens),
        "completion_tokens {completion_tokens} not in 1..=16"
    );
    assert_eq!(
        usage["total_tokens"].as_u64(),
        Some(prompt_tokens + completion_tokens)
    );
    let finish = v["choices"][0]["finish_reason"].as_str().expect("finish");
    if completion_tokens == 16 {
        assert_eq!(finish, "length");
    } else {
        assert_eq!(finish, "stop");
    }

    // Temperature 0 is deterministic: the same request gives the same text.
    let (status, again) = post(&model, request).await;
    assert_eq!(status, 200, "body: {again}");
    let again: Value = serde_json::from_str(&again).expect("completion JSON");
    assert_eq!(again["choices"][0]["message"]["content"], text);

    // Streaming: SSE chunks, a usage chunk when asked, then [DONE].
    let (status, sse) = post(
        &model,
        json!({
            "messages": [{"role": "user", "content": "Count from 1 to 5, separated by commas."}],
            "temperature": 0,
            "max_tokens": 24,
            "stream": true,
            "stream_options": {"include_usage": true}
        }),
    )
    .await;
    assert_eq!(status, 200, "body: {sse}");
    let data: Vec<&str> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "stream: {sse}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk JSON"))
        .collect();
    assert!(chunks.len() >= 3, "too few chunks: {sse}");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(
        streamed.contains('1') && streamed.contains('5'),
        "streamed text: {streamed:?}"
    );
    let usage_chunk = chunks.last().expect("usage chunk");
    assert_eq!(usage_chunk["choices"], json!([]));
    let streamed_tokens = usage_chunk["usage"]["completion_tokens"]
        .as_u64()
        .expect("stream usage");
    assert!((1..=24).contains(&streamed_tokens), "{streamed_tokens}");
    let finishes: Vec<&str> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["finish_reason"].as_str())
        .collect();
    assert_eq!(finishes.len(), 1, "exactly one finish_reason: {sse}");

    // JSON mode: the grammar makes the answer parseable JSON (an object).
    let (status, body) = post(
        &model,
        json!({
            "messages": [
                {"role": "system", "content": "Reply with a JSON object only."},
                {"role": "user", "content": "Give a JSON object with keys \"name\" (a string) and \"year\" (a number) for the Python language."}
            ],
            "temperature": 0,
            "max_tokens": 96,
            "response_format": {"type": "json_object"}
        }),
    )
    .await;
    assert_eq!(status, 200, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("completion JSON");
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let parsed: Value = serde_json::from_str(content)
        .unwrap_or_else(|e| panic!("json_object answer is not JSON ({e}): {content:?}"));
    assert!(parsed.is_object(), "not an object: {content}");

    // JSON schema mode: a grammar from the schema holds the answer to it (an enum of ids, at
    // most one id, a sentence cut at 40 characters), whatever the model would rather write.
    let schema = json!({
        "type": "object",
        "properties": {"points": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
            "type": "object",
            "properties": {
                "passages": {"type": "array", "minItems": 1, "maxItems": 1, "items": {"type": "integer", "enum": [2, 3]}},
                "sentence": {"type": "string", "minLength": 1, "maxLength": 40}
            },
            "required": ["passages", "sentence"],
            "additionalProperties": false
        }}},
        "required": ["points"],
        "additionalProperties": false
    });
    let (status, body) = post(
        &model,
        json!({
            "messages": [
                {"role": "system", "content": "Answer with a JSON object {\"points\": [{\"passages\": [n], \"sentence\": \"...\"}]}."},
                {"role": "user", "content": "Passages:\n[1] json.loads decodes a JSON string.\n[2] json.dumps encodes a Python object.\n[3] json.load reads a file.\nHow do I decode a JSON string in Python?"}
            ],
            "temperature": 0,
            "max_tokens": 96,
            "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": false}}
        }),
    )
    .await;
    assert_eq!(status, 200, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("completion JSON");
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let parsed: Value = serde_json::from_str(content)
        .unwrap_or_else(|e| panic!("json_schema answer is not JSON ({e}): {content:?}"));
    let points = parsed["points"].as_array().expect("points array");
    assert!((1..=2).contains(&points.len()), "{content}");
    for p in points {
        assert_eq!(p.as_object().expect("point object").len(), 2, "{content}");
        let ids = p["passages"].as_array().expect("passages");
        assert_eq!(ids.len(), 1, "{content}");
        assert!(ids[0] == json!(2) || ids[0] == json!(3), "{content}");
        let sentence = p["sentence"].as_str().expect("sentence");
        assert!((1..=40).contains(&sentence.chars().count()), "{content}");
    }
    // A json_schema without a schema object is the caller's error.
    let (status, body) = post(
        &model,
        json!({
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 4,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}
        }),
    )
    .await;
    assert_eq!(status, 400, "body: {body}");
    assert!(body.contains("json_schema"), "body: {body}");

    // Tool results and earlier assistant turns are accepted (tool text goes in as user text).
    let (status, body) = post(
        &model,
        json!({
            "messages": [
                {"role": "user", "content": "Search for the capital of France."},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"capital of France\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "Paris is the capital of France."},
                {"role": "user", "content": "Answer in one word: what is the capital?"}
            ],
            "temperature": 0,
            "max_tokens": 8
        }),
    )
    .await;
    assert_eq!(status, 200, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("completion JSON");
    assert!(v["usage"]["completion_tokens"].as_u64().expect("usage") <= 8);

    // Bad input is a 400 with an OpenAI-style error, not a crash.
    let (status, body) = post(&model, json!({"messages": [], "max_tokens": 4})).await;
    assert_eq!(status, 400, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("error JSON");
    assert_eq!(v["error"]["message"], "messages must be a non-empty array");
    let (status, body) = post(
        &model,
        json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}),
    )
    .await;
    assert_eq!(status, 400, "body: {body}");

    // A prompt longer than the 8192-token context is refused, not silently truncated.
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(1200);
    let (status, body) = post(
        &model,
        json!({"messages": [{"role": "user", "content": long}], "max_tokens": 4}),
    )
    .await;
    assert_eq!(status, 400, "body: {body}");
    let v: Value = serde_json::from_str(&body).expect("error JSON");
    assert_eq!(v["error"]["code"], "context_length_exceeded");

    // An oversized body (over 4 MiB) gets 413 before anything is parsed.
    let huge = "a".repeat(5 * 1024 * 1024);
    let (status, _) = post(
        &model,
        json!({"messages": [{"role": "user", "content": huge}]}),
    )
    .await;
    assert_eq!(status, 413);

    // The server is still healthy after all of that.
    let health = client()
        .get(format!("{}/health", model.root_url()))
        .send()
        .await
        .expect("health");
    assert_eq!(health.status(), 200);
    eprintln!("server log:\n{}", model.stderr_tail());
}

#[tokio::test]
async fn start_reports_a_missing_model_clearly() {
    let mut cfg = RealModelConfig::from_env();
    let missing = PathBuf::from("/nonexistent/quarry-test/model.gguf");
    cfg.model_path = missing.clone();
    let err = RealModel::start_with(cfg)
        .await
        .expect_err("no model, no server");
    match &err {
        RealModelError::NotInstalled { what, path } => {
            assert_eq!(*what, "the model file");
            assert_eq!(path, &missing);
        }
        other => panic!("expected NotInstalled, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("run scripts/install-real-model.sh"),
        "{err}"
    );
}

#[tokio::test]
async fn start_reports_missing_node_modules_clearly() {
    let mut cfg = RealModelConfig::from_env();
    // Point the model at a file that exists so the node_modules check is the one that fails.
    cfg.model_path = real_model::repo_root().join("Cargo.toml");
    cfg.modules_dir = PathBuf::from("/nonexistent/quarry-test/llm-server");
    let err = RealModel::start_with(cfg)
        .await
        .expect_err("no node_modules, no server");
    match err {
        RealModelError::NotInstalled { what, path } => {
            assert_eq!(what, "node-llama-cpp");
            assert_eq!(
                path,
                PathBuf::from("/nonexistent/quarry-test/llm-server/node_modules/node-llama-cpp")
            );
        }
        other => panic!("expected NotInstalled, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs the real model (scripts/install-real-model.sh)"]
async fn a_server_that_cannot_load_the_model_fails_fast_with_its_reason() {
    // A file that exists but is no GGUF: the server must exit with its reason, not hang.
    let mut cfg = RealModelConfig::from_env();
    cfg.model_path = real_model::repo_root().join("Cargo.toml");
    cfg.start_timeout = Duration::from_secs(120);
    let t = Instant::now();
    let err = RealModel::start_with(cfg)
        .await
        .expect_err("not a model, no server");
    match &err {
        RealModelError::Exited { stderr, .. } => {
            assert!(
                stderr.contains("failed to load the model"),
                "stderr: {stderr}"
            );
        }
        other => panic!("expected Exited, got {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(120));
}
