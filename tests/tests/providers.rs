//! Provider kinds against scripted servers: Anthropic's Messages API (tool use, tool results,
//! usage and price, Retry-After, a whole quick run) and Azure OpenAI's deployment path,
//! `api-version` and `api-key` header.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use quarry_api::ResearchProfile;
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;
use quarry_engine::llm::{CallPurpose, ChatRequest, Message, ToolSpec};
use quarry_engine::research::shell::executor::Engine;
use quarry_engine::store::memory::MemoryStore;
use quarry_operator::engine_builder;

fn engine(yaml: &str, key: &str) -> Engine {
    let profile = ResearchProfile::from_yaml(yaml).unwrap();
    let key = key.to_string();
    let key_for = move |_: &quarry_api::ModelTier| Some(key.clone());
    engine_builder::build_engine(&profile.spec, &key_for, Arc::new(MemoryStore::new()), None)
        .unwrap()
}

fn anthropic_profile(url: &str, searx: &str) -> String {
    format!(
        r#"apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: anthropic
spec:
  models:
    primary:
      provider: anthropic
      baseURL: "{url}/v1"
      model: claude-test
      apiKeyEnv: QUARRY_TEST_KEY
      timeoutSeconds: 20
      contextWindow: 200000
      maxOutputTokens: 700
  prices:
    - model: claude-test
      inputUSDPerMillion: "3.00"
      outputUSDPerMillion: "15.00"
  search:
    url: "{searx}"
  fetch:
    allowedHosts: ["127.0.0.1"]
    # One local docs server is every host here: no politeness spacing needed.
    politenessDelayMillis: 0
    perHostConcurrency: 8
    pageCharsForModel: 4000
"#
    )
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "search".into(),
        description: "Search the web".into(),
        parameters: json!({"type": "object", "properties": {"queries": {"type": "array"}}}),
    }]
}

#[tokio::test]
async fn anthropic_messages_carry_system_tools_tool_results_and_usage() {
    let server = ScriptedModel::start(Script::new(vec![
        Step::status_retry_after(429, 1),
        Step::tool_call("search", json!({"queries": ["json"]})).with_usage(1000, 20),
        Step::text("The json module decodes JSON.").with_usage(2000, 100),
    ]))
    .await
    .unwrap();
    let e = engine(
        &anthropic_profile(&server.base_url().replace("/v1", ""), "http://127.0.0.1:9"),
        "sk-ant-test",
    );
    let mut messages = vec![
        Message::system("You research."),
        Message::user("Research task: json"),
    ];
    let started = Instant::now();
    let first = e
        .model
        .chat(ChatRequest {
            messages: messages.clone(),
            tools: tools(),
            json_mode: false,
            json_schema: None,
            max_tokens: 100,
            purpose: CallPurpose::Research,
        })
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After honoured"
    );
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].name, "search");
    assert_eq!(first.tool_calls[0].arguments, json!({"queries": ["json"]}));
    // 1000 × 3 + 20 × 15 µUSD.
    assert_eq!(first.usage.cost_pico_usd, 3_300_000_000);
    messages.push(Message::assistant("", first.tool_calls.clone()));
    messages.push(Message::tool(
        first.tool_calls[0].id.clone(),
        "1. json — JSON encoder",
    ));
    let second = e
        .model
        .chat(ChatRequest {
            messages,
            tools: tools(),
            json_mode: false,
            json_schema: None,
            max_tokens: 100,
            purpose: CallPurpose::Research,
        })
        .await
        .unwrap();
    assert_eq!(second.content, "The json module decodes JSON.");
    assert_eq!(second.finish_reason.as_deref(), Some("end_turn"));
    let recorded = server.recorded();
    assert_eq!(recorded.len(), 3);
    for r in &recorded {
        assert_eq!(r.path, "/v1/messages");
        assert_eq!(
            r.headers.get("x-api-key").map(String::as_str),
            Some("sk-ant-test")
        );
        assert_eq!(
            r.headers.get("anthropic-version").map(String::as_str),
            Some("2023-06-01")
        );
        assert_eq!(r.authorization, None, "no bearer token on the Messages API");
    }
    let body: &Value = &recorded[2].body;
    assert_eq!(body["system"], json!("You research."));
    assert_eq!(body["tools"][0]["input_schema"]["type"], json!("object"));
    assert_eq!(body["messages"][1]["content"][0]["type"], json!("tool_use"));
    assert_eq!(
        body["messages"][2]["content"][0]["type"],
        json!("tool_result")
    );
    assert_eq!(
        body["messages"][2]["content"][0]["tool_use_id"],
        body["messages"][1]["content"][0]["id"]
    );
}

#[tokio::test]
async fn azure_openai_uses_the_deployment_path_api_version_and_api_key_header() {
    let server = ScriptedModel::start(Script::new(vec![
        Step::text("hello from azure").with_usage(10, 2),
    ]))
    .await
    .unwrap();
    let base = server.base_url().replace("/v1", "");
    let yaml = format!(
        "apiVersion: quarry.dev/v1alpha1\nkind: ResearchProfile\nmetadata:\n  name: azure\nspec:\n  models:\n    primary:\n      provider: azureOpenai\n      apiVersion: \"2024-10-21\"\n      baseURL: \"{base}\"\n      model: my-gpt-deployment\n      stream: false\n  search:\n    url: \"http://127.0.0.1:9\"\n"
    );
    let e = engine(&yaml, "azure-key-123");
    let answer = e
        .model
        .chat(ChatRequest {
            messages: vec![Message::user("hi")],
            tools: vec![],
            json_mode: false,
            json_schema: None,
            max_tokens: 16,
            purpose: CallPurpose::Research,
        })
        .await
        .unwrap();
    assert_eq!(answer.content, "hello from azure");
    let r = &server.recorded()[0];
    assert_eq!(
        r.path,
        "/openai/deployments/my-gpt-deployment/chat/completions"
    );
    assert_eq!(r.query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(
        r.headers.get("api-key").map(String::as_str),
        Some("azure-key-123")
    );
    assert_eq!(r.authorization, None);
    // Without apiVersion the profile is refused, naming the field.
    let bad = yaml.replace("      apiVersion: \"2024-10-21\"\n", "");
    let profile = ResearchProfile::from_yaml(&bad).unwrap();
    let no_key = |_: &quarry_api::ModelTier| None;
    let err =
        engine_builder::build_engine(&profile.spec, &no_key, Arc::new(MemoryStore::new()), None)
            .err()
            .unwrap();
    assert!(
        err.to_string()
            .contains("provider azureOpenai needs apiVersion"),
        "{err}"
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_quick_run_on_anthropic_cites_what_it_read() {
    let stack = SearchStack::start_for("anthropic_quick_run").await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let server = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nJSON is a lightweight data interchange format inspired by JavaScript object literal syntax ([json]({json_url}))."
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let profile: PathBuf = dir.join("profile.yaml");
    std::fs::write(
        &profile,
        anthropic_profile(
            &server.base_url().replace("/v1", ""),
            stack.searx.base_url(),
        ),
    )
    .unwrap();
    let bin = quarry_bin().unwrap();
    let out_path = dir.join("report.md");
    let state = dir.join("state");
    let profile_arg = profile.clone();
    let out = tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args([
                "run",
                "How do I decode JSON in Python?",
                "--mode",
                "quick",
                "--profile",
            ])
            .arg(&profile_arg)
            .arg("--out")
            .arg(&out_path)
            .arg("--state-dir")
            .arg(&state)
            .env("QUARRY_TEST_KEY", "sk-ant-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        report.contains(&format!("([json]({json_url}))")),
        "{report}"
    );
    // 9200 × 3 + 213 × 15 µUSD.
    assert!(stderr.contains("cost $0.030795"), "{stderr}");
    assert!(server.recorded().iter().all(|r| r.path == "/v1/messages"));
}
