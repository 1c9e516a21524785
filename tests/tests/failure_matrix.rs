//! The failure matrix through real processes: `quarry run` against real searx and a scripted model
//! server that misbehaves.
//!
//! - Model faults (429 with Retry-After, 500, timeouts, cut-off bodies, invalid JSON, empty
//!   choices) on a third of the calls: the run completes, and its usage is exactly the answered
//!   calls' (nothing paid for is lost or counted twice).
//! - The same faults on every call: the run ends failed with a clear reason and no report.
//! - searx down for the whole run: an honest failure, or the run completes through an API
//!   provider when the profile has one.
//! - Redis down mid-run: the cache turns into misses, the run completes.
//! - Disk full for the local store: no panic; the paid-for report is printed instead of lost.
//!
//! The API server being unavailable for 30 s is in the kube end-to-end suite (`kube_e2e.rs`).

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::redis_server::{RedisServer, redis_available};
use quarry_e2e::searx::SearchStack;
use serde_json::{Value, json};

const QUERY: &str = "How do I decode JSON in Python?";

/// Runs `quarry run` with `out`/`state` under `dir` (or the given paths) and extra args/env.
async fn quarry_run(dir: &Path, profile: &Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = quarry_bin().unwrap();
    let dir = dir.to_path_buf();
    let profile = profile.to_path_buf();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args(["run", QUERY, "--mode", "quick", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(dir.join("report.md"))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(&extra)
            .current_dir(&dir)
            .env("HOME", &dir)
            .env("QUARRY_TEST_KEY", "sk-test")
            .envs(env)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// The four answered turns of a quick researcher, with their usage.
fn good_steps(json_url: &str) -> Vec<Step> {
    vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str ([json]({json_url})).\n\n## Links\n- {json_url}\n"
        ))
        .with_usage(5200, 160),
    ]
}

/// A profile with a short model timeout (the timeout fault waits longer) and quick retries.
fn write_profile(dir: &Path, model_url: &str, searx_url: &str) -> std::path::PathBuf {
    let text = scripted_profile(model_url, searx_url).replace(
        "timeoutSeconds: 20",
        "timeoutSeconds: 2\n      maxRetries: 3",
    );
    let path = dir.join("profile.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// Each kind of model fault, as the scripted server serves it.
fn faults() -> Vec<(&'static str, Step, &'static str)> {
    vec![
        (
            "429 Retry-After",
            Step::status_retry_after(429, 1),
            "ModelUnreachable",
        ),
        ("500", Step::status(500), "ModelUnreachable"),
        (
            "timeout",
            Step::delay(4_000, Step::text("too late")),
            "ModelUnreachable",
        ),
        (
            "cut-off body",
            Step::truncated("The answer is"),
            "ModelOutputInvalid",
        ),
        (
            "invalid JSON",
            Step::raw("{\"choices\": [{\"message\":"),
            "ModelOutputInvalid",
        ),
        (
            "empty choices",
            Step::raw(r#"{"id":"x","object":"chat.completion","choices":[]}"#),
            "ModelOutputInvalid",
        ),
    ]
}

fn findings(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state/findings.json")).unwrap())
        .unwrap()
}

async fn faults_on_a_third_of_calls(kind: &str) {
    let stack = SearchStack::start_for("faults_on_a_third").await;
    let (_, fault, _) = faults().into_iter().find(|(k, _, _)| *k == kind).unwrap();
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let good = good_steps(&json_url);
    // Six calls, two of them faults: before the first and the third answer.
    let script = vec![
        fault.clone(),
        good[0].clone(),
        good[1].clone(),
        fault,
        good[2].clone(),
        good[3].clone(),
    ];
    let model = ScriptedModel::start(Script::new(script)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &model.base_url(), stack.searx.base_url());
    let out = quarry_run(dir.path(), &profile, &[], &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{kind}: {stderr}");
    assert_eq!(model.request_count(), 6, "{kind}: each fault retried once");
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.contains(&json_url), "{kind}: {report}");
    // Usage: exactly the four answered calls; the faults cost nothing and are not lost either.
    let f = findings(dir.path());
    assert_eq!(f["usage"]["llmCalls"], json!(4), "{kind}");
    assert_eq!(
        f["usage"]["inputTokens"],
        json!(900 + 1500 + 1600 + 5200),
        "{kind}"
    );
    assert_eq!(
        f["usage"]["outputTokens"],
        json!(20 + 15 + 18 + 160),
        "{kind}"
    );
    assert!(!stderr.contains("panicked"), "{kind}: {stderr}");
}

async fn faults_on_every_call(kind: &str) {
    let stack = SearchStack::start_for("faults_on_every_call").await;
    let (_, fault, reason) = faults().into_iter().find(|(k, _, _)| *k == kind).unwrap();
    let model = ScriptedModel::start(Script::default().with_fallback(fault))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &model.base_url(), stack.searx.base_url());
    let out = quarry_run(dir.path(), &profile, &[], &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{kind}: {stderr}");
    assert!(
        stderr.contains(&format!("quarry: the run failed ({reason}): ")),
        "{kind}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{kind}: {stderr}");
    // No report is invented, anywhere.
    assert!(!dir.path().join("report.md").exists(), "{kind}");
    assert!(!dir.path().join("state/report.md").exists(), "{kind}");
    // Bounded: the first call's retries (1 + maxRetries) and nothing after the run failed.
    assert!(
        model.request_count() <= 8,
        "{kind}: {}",
        model.request_count()
    );
}

macro_rules! fault_cases {
    ($($name:ident => $kind:expr),* $(,)?) => {
        mod a_third_of_calls_fail {
            $(#[tokio::test]
            #[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
            async fn $name() {
                super::faults_on_a_third_of_calls($kind).await;
            })*
        }
        mod every_call_fails {
            $(#[tokio::test]
            #[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
            async fn $name() {
                super::faults_on_every_call($kind).await;
            })*
        }
    };
}

fault_cases! {
    rate_limited_with_retry_after => "429 Retry-After",
    server_error => "500",
    timeout => "timeout",
    cut_off_body => "cut-off body",
    invalid_json => "invalid JSON",
    empty_choices => "empty choices",
}

/// A port nothing listens on.
fn closed_port_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn searx_down_for_the_whole_run_fails_honestly() {
    let stack = SearchStack::start_for("searx_down_whole_run").await;
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::text("JSON is decoded with json.loads ([docs](https://invented.example/json)).")
            .with_usage(1000, 30),
    ]))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &model.base_url(), &closed_port_url());
    let out = quarry_run(dir.path(), &profile, &[], &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("quarry: the run failed (NoEvidence)"),
        "{stderr}"
    );
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.starts_with("# Unable to research"), "{report}");
    assert!(!report.contains("invented.example"), "{report}");
    drop(stack);
}

/// A Brave Search API double whose one result is a page the docs server serves.
async fn brave_api(result_url: String) -> String {
    use axum::routing::get;
    let app = axum::Router::new().route(
        "/res/v1/web/search",
        get(move || {
            let url = result_url.clone();
            async move {
                axum::Json(json!({"web": {"results": [
                    {"title": "json — JSON encoder and decoder", "url": url, "description": "json.loads"}
                ]}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn searx_down_for_the_whole_run_completes_through_an_api_provider() {
    let stack = SearchStack::start_for("searx_down_provider").await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let brave = brave_api(json_url.clone()).await;
    let model = ScriptedModel::start(Script::new(good_steps(&json_url)))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &model.base_url(), &closed_port_url());
    let text = std::fs::read_to_string(&profile).unwrap().replace(
        "  fetch:\n",
        &format!(
            "    providers:\n      - kind: brave\n        apiKeySecretRef: {{name: search-keys, key: brave}}\n        baseURL: \"{brave}\"\n  fetch:\n"
        ),
    );
    std::fs::write(&profile, text).unwrap();
    let out = quarry_run(
        dir.path(),
        &profile,
        &[],
        &[("QUARRY_SECRET_SEARCH_KEYS_BRAVE", "brave-key")],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.contains(&json_url), "{report}");
}

#[tokio::test]
#[ignore = "needs redis-server and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn redis_down_mid_run_only_costs_the_cache() {
    assert!(
        redis_available(),
        "redis-server is not installed: run scripts/install-test-deps.sh"
    );
    let stack = SearchStack::start_for("redis_down_mid_run").await;
    let mut redis = RedisServer::start().unwrap();
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let mut steps = good_steps(&json_url);
    // The scrape handshake answers late: Redis is stopped after the search, before the read.
    steps[1] = Step::delay(1_500, steps[1].clone());
    let model = ScriptedModel::start(Script::new(steps)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = write_profile(dir.path(), &model.base_url(), stack.searx.base_url());
    let url = redis.url();
    let run = {
        let dir = dir.path().to_path_buf();
        let profile = profile.clone();
        tokio::spawn(async move { quarry_run(&dir, &profile, &["--redis-url", &url], &[]).await })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while model.request_count() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never got to its second call"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    redis.stop();
    let out = run.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let log = std::fs::read_to_string(dir.path().join("state/events.jsonl")).unwrap();
    let caches: Vec<(String, String)> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "search" || v["kind"] == "fetch")
        .map(|v| {
            (
                v["kind"].as_str().unwrap().into(),
                v["cache"].as_str().unwrap().into(),
            )
        })
        .collect();
    // Five searches (the question as written, as keywords, its key term, the key term with its
    // product, then the model's query) before Redis died, the page read after.
    let mut expected: Vec<(String, String)> = vec![("search".into(), "miss".into()); 5];
    expected.push(("fetch".into(), "error".into()));
    assert_eq!(caches, expected);
}

/// A tmpfs of `kib` KiB mounted for the test; unmounted on drop.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn mount(kib: u32) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Self(dir))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[tokio::test]
#[ignore = "needs root (a tmpfs mount) and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_full_disk_loses_nothing_paid_for() {
    let stack = SearchStack::start_for("disk_full").await;
    // Room for the first checkpoints, not for the page text and the report.
    let disk = SmallDisk::mount(24).expect("mounting a tmpfs (this test needs root)");
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(Script::new(good_steps(&json_url)))
        .await
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let profile = write_profile(work.path(), &model.base_url(), stack.searx.base_url());
    let out = quarry_run(disk.0.path(), &profile, &[], &[]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("quarry: the run failed (ReportStoreFailed)"),
        "{stderr}"
    );
    // The report every model call paid for is on stdout, citing the page it read.
    assert!(stderr.contains("printed on stdout"), "{stderr}");
    assert!(
        stdout.contains("json.loads") && stdout.contains(&json_url),
        "{stdout}"
    );
    assert_eq!(model.request_count(), 4);
}
