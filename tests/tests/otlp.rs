//! Traces: with `OTEL_EXPORTER_OTLP_ENDPOINT` set, `quarry run` exports its spans over OTLP/HTTP
//! (protobuf) to a collector, with the run, researcher and model-call spans and OpenTelemetry's
//! GenAI attributes on the model calls. Once to a local recorder (what goes over the wire), once
//! to a real collector, Rotel (what a receiver makes of it).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde_json::json;

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::rotel::{AttrValue, ReceivedSpan, Rotel};
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

/// The model calls of the scripted run, with the usage each reports: (input, output) tokens.
const SCRIPTED_USAGE: [(u64, u64); 4] = [(900, 20), (1500, 15), (1600, 18), (5200, 160)];

/// The run's question, and the run name `quarry run` gives it.
const QUESTION: &str = "How do I decode JSON in Python?";
const RUN_NAME: &str = "how-do-i-decode-json-in-python";

/// Runs `quarry run` in quick mode on the scripted model (a search, two reads and the answer,
/// with [`SCRIPTED_USAGE`]) with its traces exported to `endpoint`; returns the finished process.
async fn scripted_run(test: &str, endpoint: String) -> std::process::Output {
    let stack = SearchStack::start_for(test).await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let [search, read, reread, answer] = SCRIPTED_USAGE;
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]}))
            .with_usage(search.0, search.1),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(read.0, read.1),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(reread.0, reread.1),
        Step::text(format!(
            "## Summary\nJSON is a lightweight data interchange format ([json]({json_url}))."
        ))
        .with_usage(answer.0, answer.1),
    ]))
    .await
    .unwrap();
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
    // The search stack, the model and the scratch directory live until the run has ended.
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args(["run", QUESTION, "--mode", "quick", "--profile"])
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
    .unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_run_exports_its_spans_with_gen_ai_attributes_over_otlp() {
    let (endpoint, received) = collector().await;
    let out = scripted_run("otlp_export", endpoint).await;
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

/// The spans under `root` in their trace: `root` itself, its children, theirs and so on.
fn descendants<'a>(spans: &'a [ReceivedSpan], root: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    let mut found: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.span_id == root.span_id && s.trace_id == root.trace_id)
        .collect();
    let mut i = 0;
    while i < found.len() {
        let parent = found[i].span_id.clone();
        found.extend(
            spans
                .iter()
                .filter(|s| s.trace_id == root.trace_id && s.parent_span_id == parent),
        );
        i += 1;
    }
    found
}

#[tokio::test]
#[ignore = "needs rotel, searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_real_collector_receives_the_runs_spans_with_gen_ai_attributes() {
    let started = Instant::now();
    let rotel = Rotel::start_for("otlp_rotel");
    let rotel_up = started.elapsed();
    let out = scripted_run("otlp_rotel", rotel.http_endpoint()).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The exporter flushed when quarry ended; the collector prints what it got within its batch
    // timeout. The run's span ends last.
    let spans = rotel
        .wait_for_spans(Duration::from_secs(15), |spans| {
            spans.iter().any(|s| s.name == "research_run")
        })
        .await;
    let output = rotel.output();
    let context = || format!("{spans:#?}\n--- rotel output:\n{output}");

    // One run span, the root of its trace, named after the run, in its namespace.
    let runs: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "research_run").collect();
    assert_eq!(runs.len(), 1, "{}", context());
    let run = runs[0];
    assert_eq!(run.parent_span_id, "", "the run span is a root: {run:#?}");
    assert_eq!(run.attr("run").and_then(AttrValue::as_str), Some(RUN_NAME));
    assert_eq!(
        run.attr("namespace").and_then(AttrValue::as_str),
        Some("local")
    );
    for span in &spans {
        assert_eq!(
            span.resource
                .get("service.name")
                .and_then(AttrValue::as_str),
            Some("quarry"),
            "{span:#?}"
        );
    }
    let tree = descendants(&spans, run);

    // The researcher's span is a child of the run's.
    let researchers: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == "researcher").collect();
    assert!(!researchers.is_empty(), "no researcher span: {}", context());
    for researcher in &researchers {
        assert_eq!(researcher.trace_id, run.trace_id, "{researcher:#?}");
        assert_eq!(researcher.parent_span_id, run.span_id, "{researcher:#?}");
    }

    // One client span per model call, in the run's trace, with the GenAI attributes: the model
    // and the token counts the scripted model reported, plus the run and its namespace.
    let calls: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.attr("gen_ai.operation.name").is_some())
        .collect();
    assert_eq!(calls.len(), SCRIPTED_USAGE.len(), "{}", context());
    let mut usage = Vec::new();
    for call in &calls {
        assert_eq!(call.name, "chat scripted", "{call:#?}");
        assert_eq!(call.kind, "SPAN_KIND_CLIENT", "{call:#?}");
        assert!(
            tree.iter().any(|s| s.span_id == call.span_id),
            "the model call is not under the run span: {call:#?}\n{}",
            context()
        );
        let attr = |key: &str| call.attr(key).cloned();
        assert_eq!(
            attr("gen_ai.operation.name"),
            Some(AttrValue::Str("chat".into()))
        );
        assert_eq!(
            attr("gen_ai.request.model"),
            Some(AttrValue::Str("scripted".into()))
        );
        assert_eq!(attr("quarry.run"), Some(AttrValue::Str(RUN_NAME.into())));
        assert_eq!(
            attr("quarry.namespace"),
            Some(AttrValue::Str("local".into()))
        );
        let tokens = |key: &str| match attr(key) {
            Some(AttrValue::Int(n)) => u64::try_from(n).unwrap(),
            other => panic!("{key} is {other:?}, not an integer: {call:#?}"),
        };
        // Integers, as the conventions define them (a u64 field would arrive as a string).
        assert!(tokens("gen_ai.request.max_tokens") > 0, "{call:#?}");
        usage.push((
            tokens("gen_ai.usage.input_tokens"),
            tokens("gen_ai.usage.output_tokens"),
        ));
    }
    usage.sort_unstable();
    let mut expected = SCRIPTED_USAGE.to_vec();
    expected.sort_unstable();
    assert_eq!(usage, expected, "{}", context());
    // The researcher's calls are its children.
    assert!(
        calls
            .iter()
            .any(|c| researchers.iter().any(|r| r.span_id == c.parent_span_id)),
        "no model call under a researcher span: {}",
        context()
    );
    // Every span name the run exported, counted (shown when something above fails).
    let names: BTreeMap<&str, usize> = tree.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.name.as_str()).or_default() += 1;
        m
    });
    assert!(names.contains_key("chat scripted"), "{names:?}");
    assert!(
        !output.contains("sk-test-secret-123"),
        "the API key must not be exported"
    );
    eprintln!(
        "rotel up in {rotel_up:?}; {} spans received ({names:?}); test took {:?}",
        spans.len(),
        started.elapsed()
    );
}
