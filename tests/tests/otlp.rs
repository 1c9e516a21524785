//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, `quarry run` exports its spans over OTLP/HTTP
//! (protobuf) to a collector (here a local recorder), with the run, researcher and model-call
//! spans and OpenTelemetry's GenAI attributes on the model calls.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::json;

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

async fn collector() -> (String, Received) {
    let received: Received = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                |State(r): State<Received>, headers: HeaderMap, body: Bytes| async move {
                    let ct = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    r.lock().unwrap().push((ct, body.to_vec()));
                    ""
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_run_exports_its_spans_with_gen_ai_attributes_over_otlp() {
    let stack = SearchStack::start_for("otlp_export").await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nJSON is a lightweight data interchange format ([json]({json_url}))."
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let (endpoint, received) = collector().await;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().to_path_buf();
    let profile = dir.join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let bin = quarry_bin().unwrap();
    let out_dir = dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin)
            .args([
                "run",
                "How do I decode JSON in Python?",
                "--mode",
                "quick",
                "--profile",
            ])
            .arg(&profile)
            .arg("--out")
            .arg(out_dir.join("report.md"))
            .arg("--state-dir")
            .arg(out_dir.join("state"))
            .env("QUARRY_TEST_KEY", "sk-test-secret-123")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The exporter flushes when the process ends; the collector has everything by then.
    let batches = received.lock().unwrap().clone();
    assert!(!batches.is_empty(), "no OTLP export arrived");
    assert!(
        batches.iter().all(|(ct, _)| ct == "application/x-protobuf"),
        "{batches:?}"
    );
    let all: Vec<u8> = batches.into_iter().flat_map(|(_, b)| b).collect();
    for needle in [
        "quarry",
        "research_run",
        "researcher",
        "chat scripted",
        "gen_ai.request.model",
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.system",
    ] {
        assert!(contains(&all, needle), "the export lacks {needle}");
    }
    assert!(
        !contains(&all, "sk-test-secret-123"),
        "the API key must not be exported"
    );
}
