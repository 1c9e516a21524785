//! Secrets hygiene (keys live only in Secrets): a run whose API key is a
//! distinctive canary completes, the key provably reaches the model, and the key appears nowhere
//! else: not in logs, events, status, artifacts, the report or `/metrics`.
//!
//! Two harnesses:
//! - standalone: the `quarry` binary with debug logs (text, then JSON; see [`LOG_FILTER`]) against the scripted model
//!   and the real searx stack; stdout, stderr and every file of the state dir are searched.
//! - operator: `quarry_operator::research_run::reconcile` with the production `EngineLauncher` on
//!   the real kube-apiserver (`quarry_e2e::control_plane`), through a client that records every
//!   request body it sends (status patches, Events, ConfigMaps with the checkpoint and the report);
//!   then what the server kept (the run, ConfigMaps, Events, the audit log), debug tracing
//!   captured into a buffer, and the metrics text. Reconcile was chosen over the launcher alone
//!   because only reconcile writes status and Events; its Secret lookup is the real one too.
//!
//! In each, the model's first answer misbehaves (an HTTP error whose body echoes the key, as some
//! proxies do) so error paths run as well as the happy one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use quarry_e2e::control_plane::{ControlPlane, apply_object};
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

/// The key every run here uses. Its prefix `sk-q` may appear anywhere; any 12 characters of it
/// in a row may not.
const CANARY: &str = "sk-quarry-canary-7f3a9c1e";
/// Shortest piece of the key that counts as a leak.
const WINDOW: usize = 12;

const QUERY: &str = "How do I decode JSON in Python?";

/// Debug for every crate except the HTML parser's selector matching and tree building, which
/// only ever see page HTML (never a key) and print ~700,000 lines for one documentation page.
const LOG_FILTER: &str = "debug,selectors=info,html5ever=info";

/// Standard base64 (the encoding of Secret data), no dependency for one function.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Every form of the key that must not appear: each run of `WINDOW` characters of it, and the
/// part of its base64 that does not depend on what precedes it (for each of the three byte
/// alignments it can have inside a larger encoded value), also URL-safe.
fn forbidden() -> Vec<String> {
    let mut needles: Vec<String> = (0..=CANARY.len() - WINDOW)
        .map(|i| CANARY[i..i + WINDOW].to_owned())
        .collect();
    for pad in 0..3 {
        let mut bytes = vec![b'x'; pad];
        bytes.extend_from_slice(CANARY.as_bytes());
        let encoded = base64(&bytes);
        // Characters touching a padding byte or the end depend on the neighbours: drop them.
        let core = &encoded[(pad * 4).div_ceil(3) + 1..encoded.len() - 4];
        needles.push(core.to_owned());
        needles.push(core.replace('+', "-").replace('/', "_"));
    }
    needles.sort();
    needles.dedup();
    needles
}

/// The leaks in `texts` (label, text): which needle was found where.
fn leaks(texts: &[(String, String)]) -> Vec<String> {
    let needles = forbidden();
    let mut found = Vec::new();
    for (label, text) in texts {
        for needle in &needles {
            if let Some(at) = text.find(needle.as_str()) {
                let mut start = at.saturating_sub(80);
                while !text.is_char_boundary(start) {
                    start -= 1;
                }
                let mut end = (at + needle.len() + 80).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                found.push(format!(
                    "{label}: contains {needle:?} in …{}…",
                    &text[start..end]
                ));
                break;
            }
        }
    }
    found
}

/// Every file under `dir`, recursively, as (path, lossy text).
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.push((
                path.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out.sort();
    out
}

/// The model's side of one quick run over the Python docs, after a first answer that fails with
/// `status` and a body echoing the key.
fn script(json_url: &str, status: u16) -> Script {
    Script::new(vec![
        Step::Status {
            status,
            retry_after: Some("1".into()),
            body: Some(format!(
                "{{\"error\": {{\"message\": \"upstream refused key {CANARY} (Authorization: Bearer {CANARY})\"}}}}"
            )),
        },
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str into Python objects ([json]({json_url})).\n\n## Links\n- {json_url}\n"
        ))
        .with_usage(5200, 160),
    ])
}

/// Asserts that every model call carried the key: the run really used it.
fn assert_key_reached_the_model(
    recorded: &[quarry_e2e::model_server::RecordedRequest],
    at_least: usize,
) {
    assert!(recorded.len() >= at_least, "{} model calls", recorded.len());
    let bearer = format!("Bearer {CANARY}");
    for r in recorded {
        assert_eq!(r.authorization.as_deref(), Some(bearer.as_str()));
    }
}

/// `quarry run` with debug logs in `format`, the model failing first with `status`.
async fn standalone(test: &str, format: &str, status: u16) {
    let stack = SearchStack::start_for(test).await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(script(&json_url, status))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let (report, state): (PathBuf, PathBuf) =
        (dir.path().join("report.md"), dir.path().join("state"));
    let bin = quarry_bin().unwrap();
    let mut command = quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin));
    command
        .args(["run", QUERY, "--mode", "quick", "--profile"])
        .arg(&profile)
        .arg("--out")
        .arg(&report)
        .arg("--state-dir")
        .arg(&state)
        .env("QUARRY_TEST_KEY", CANARY)
        .env("QUARRY_LOG_LEVEL", LOG_FILTER)
        .env("QUARRY_LOG_FORMAT", format);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "quarry run failed: {stderr}");

    // The run used the key, went through the error path, logged at debug and wrote a report.
    assert_key_reached_the_model(&model.recorded(), 5);
    let debug_marker = if format == "json" {
        "\"level\":\"DEBUG\""
    } else {
        "DEBUG"
    };
    assert!(stderr.contains(debug_marker), "no debug logs: {stderr}");
    assert!(
        stderr.contains(&format!("HTTP {status}")),
        "the failed first answer is logged: {stderr}"
    );
    let report_text = std::fs::read_to_string(&report).unwrap();
    assert!(report_text.contains("json.loads"), "{report_text}");

    let mut texts = vec![("stdout".to_owned(), stdout), ("stderr".to_owned(), stderr)];
    let files = files_under(dir.path());
    for name in ["findings.json", "events.jsonl", "report.md"] {
        assert!(
            files.iter().any(|(path, _)| path.ends_with(name)),
            "{name} was written: {:?}",
            files.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    }
    texts.extend(files);
    let found = leaks(&texts);
    assert!(found.is_empty(), "the key leaked:\n{}", found.join("\n"));
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn standalone_run_with_debug_text_logs_never_shows_the_key() {
    standalone("secrets_hygiene_standalone_text", "text", 500).await;
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn standalone_run_with_debug_json_logs_never_shows_the_key() {
    standalone("secrets_hygiene_standalone_json", "json", 429).await;
}

// ------------------------------------------------------------------------------------ operator

/// One request the operator sent to the Kubernetes API.
#[derive(Clone, Debug)]
struct Sent {
    method: String,
    uri: String,
    body: String,
}

/// A client that sends every request through `real` (to the real API server) and records it
/// on the way, body included: what the operator sent is searched as well as what the server kept.
fn recording_client(real: kube::Client, sent: Arc<Mutex<Vec<Sent>>>) -> kube::Client {
    let namespace = real.default_namespace().to_owned();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (real, sent) = (real.clone(), sent.clone());
        async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect_bytes().await?;
            let request = Sent {
                method: parts.method.to_string(),
                uri: parts.uri.to_string(),
                body: String::from_utf8_lossy(&bytes).into_owned(),
            };
            let response = real
                .send(http::Request::from_parts(
                    parts,
                    kube::client::Body::from(bytes),
                ))
                .await;
            // Recorded once answered: a test that saw a write may then read it back.
            sent.lock().unwrap().push(request);
            response
        }
    });
    kube::Client::new(service, namespace)
}

/// A `Write` into a shared buffer, for capturing the operator's logs.
#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
    type Writer = LogBuffer;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Debug logs of every crate (the kube client included) of this test process, in a buffer.
///
/// Installed once per process: nextest runs each test in its own, `cargo test` shares one
/// between the operator tests (their logs then mix, which only widens the search).
fn captured_logs() -> LogBuffer {
    static LOGS: std::sync::OnceLock<LogBuffer> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = LogBuffer::default();
        let installed = tracing::subscriber::set_global_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_writer(logs.clone())
                .finish(),
        );
        assert!(installed.is_ok(), "no other subscriber in this process");
        logs
    })
    .clone()
}

/// Drives one run through `reconcile` to a terminal phase, the model answering HTTP `status`
/// first; returns the phase. Then searches everything the operator emitted for the key.
async fn operator_run(test: &str, status: u16) -> String {
    use quarry_operator::research_run::launcher::EngineLauncher;
    use quarry_operator::research_run::{Context, reconcile};

    let stack = SearchStack::start_for(test).await;
    let logs = captured_logs();

    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(script(&json_url, status))
        .await
        .unwrap();
    let run = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
        "metadata": {"name": "canary"},
        "spec": {"query": QUERY, "mode": "quick", "profileRef": "default"}
    });
    let profile = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": "default"},
        "spec": {
            "models": {"primary": {
                "baseURL": model.base_url(), "model": "scripted", "timeoutSeconds": 20,
                "contextWindow": 32768, "maxOutputTokens": 700,
                "apiKeySecretRef": {"name": "model-key", "key": "apiKey"}
            }},
            "prices": [{"model": "scripted", "inputUSDPerMillion": "1.25", "outputUSDPerMillion": "10.00"}],
            "search": {"url": stack.searx.base_url()},
            "fetch": {"allowedHosts": ["127.0.0.1"], "politenessDelayMillis": 0, "perHostConcurrency": 8}
        }
    });
    let secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
        "data": {"apiKey": base64(CANARY.as_bytes())}
    });
    let plane = ControlPlane::start().await.expect("test control plane");
    let ns = plane.namespace(test).await.unwrap();
    for object in [secret, profile, run] {
        apply_object(&plane.client(), &ns, object).await.unwrap();
    }
    let runs: kube::Api<quarry_api::ResearchRun> = kube::Api::namespaced(plane.client(), &ns);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let client = recording_client(plane.client(), sent.clone());
    let metrics = quarry_engine::telemetry::Metrics::new();
    let mut ctx = Context::new(
        client.clone(),
        Arc::new(EngineLauncher::new(client)),
        metrics.clone(),
    );
    ctx.status_interval = Duration::from_millis(200);
    let ctx = Arc::new(ctx);

    reconcile(Arc::new(runs.get("canary").await.unwrap()), ctx.clone())
        .await
        .unwrap();

    // The status writer reports the end by itself.
    let terminal = |sent: &[Sent]| {
        sent.iter().rev().find_map(|s| {
            let body: Value = serde_json::from_str(&s.body).ok()?;
            let phase = body["status"]["phase"].as_str()?;
            (s.uri.contains("/status") && matches!(phase, "Completed" | "Failed")).then_some(body)
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let final_status = loop {
        if let Some(body) = terminal(&sent.lock().unwrap()) {
            break body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no terminal status within 120s; requests: {:#?}",
            sent.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Reconciled again as finished (what the watch delivers next): the finished path runs too.
    let finished = runs.get("canary").await.unwrap();
    assert_eq!(
        serde_json::to_value(&finished.status).unwrap()["phase"],
        final_status["status"]["phase"],
        "the server holds the terminal status"
    );
    reconcile(Arc::new(finished), ctx.clone()).await.unwrap();
    // Let trailing Events land.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let phase = final_status["status"]["phase"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_key_reached_the_model(&model.recorded(), 1);
    let sent = sent.lock().unwrap().clone();
    if phase == "Completed" {
        let report = sent
            .iter()
            .rev()
            .find(|s| {
                (s.uri.contains("/configmaps/canary-report") && s.method == "PATCH")
                    || (s.method == "POST" && s.body.contains("\"name\":\"canary-report\""))
            })
            .expect("the report ConfigMap was written");
        assert!(report.body.contains("json.loads"), "{}", report.body);
    }
    assert!(
        sent.iter().any(|s| s.uri.contains("/events")),
        "Events were published"
    );
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(logs.contains("DEBUG"), "debug logs were captured");
    assert!(
        logs.contains(&format!("HTTP {status}")),
        "the failed first model answer is logged"
    );
    let metrics_text = metrics.encode().unwrap();
    assert!(metrics_text.contains("quarry_"), "{metrics_text}");

    let mut texts: Vec<(String, String)> = sent
        .iter()
        .map(|s| (format!("{} {}", s.method, s.uri), s.body.clone()))
        .collect();
    texts.push((
        "request URIs".to_owned(),
        sent.iter()
            .map(|s| s.uri.clone())
            .collect::<Vec<_>>()
            .join("\n"),
    ));
    texts.push(("logs".to_owned(), logs));
    // What the server kept: the run with its status, the ConfigMaps and Events of the namespace,
    // and the audit log of every request.
    let kept = |what: &str, value: Value| (format!("stored {what}"), value.to_string());
    texts.push(kept(
        "ResearchRun",
        serde_json::to_value(runs.get("canary").await.unwrap()).unwrap(),
    ));
    let configmaps: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(plane.client(), &ns);
    let stored_configmaps = configmaps.list(&Default::default()).await.unwrap();
    assert!(
        stored_configmaps
            .items
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some("canary-state")),
        "the checkpoint ConfigMap is stored"
    );
    texts.push(kept(
        "ConfigMaps",
        serde_json::to_value(stored_configmaps).unwrap(),
    ));
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(plane.client(), &ns);
    let stored_events = events.list(&Default::default()).await.unwrap();
    assert!(!stored_events.items.is_empty(), "Events are stored");
    texts.push(kept("Events", serde_json::to_value(stored_events).unwrap()));
    texts.push((
        "audit log".to_owned(),
        std::fs::read_to_string(plane.audit_log()).unwrap(),
    ));
    texts.push(("/metrics".to_owned(), metrics_text));
    let found = leaks(&texts);
    assert!(found.is_empty(), "the key leaked:\n{}", found.join("\n"));
    phase
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn operator_run_never_shows_the_key_in_status_events_configmaps_logs_or_metrics() {
    let phase = operator_run("secrets_hygiene_operator", 500).await;
    assert_eq!(phase, "Completed");
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn operator_run_failed_by_a_refused_key_never_shows_it() {
    // 401 is not retried: the run ends on the error path, whose message reaches status and Events.
    let phase = operator_run("secrets_hygiene_operator_401", 401).await;
    assert_eq!(phase, "Failed");
}

#[test]
fn the_needles_catch_the_key_in_every_form() {
    let needles = forbidden();
    let hit = |text: &str| needles.iter().any(|n| text.contains(n.as_str()));
    assert!(hit(CANARY));
    assert!(hit(&format!("Authorization: Bearer {CANARY}")));
    assert!(hit(&CANARY[3..CANARY.len() - 5]));
    for pad in ["", "a", "ab", "abc"] {
        assert!(hit(&base64(format!("{pad}{CANARY}").as_bytes())), "{pad:?}");
        assert!(hit(&base64(
            format!("{{\"apiKey\":\"{CANARY}\"}}").as_bytes()
        )));
    }
    assert!(!hit("sk-q and sk-quarry are fine, the run is named canary"));
    assert_eq!(base64(b"Man"), "TWFu");
    assert_eq!(base64(b"Ma"), "TWE=");
    assert_eq!(base64(b"M"), "TQ==");
}
