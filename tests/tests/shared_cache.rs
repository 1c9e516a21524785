//! The search and page cache in Redis, shared by two Quarry processes: Debian's redis-server,
//! real searx over the docs index, a scripted model. The second process answers its search and
//! its page read from the cache: no request reaches the docs server again, and its provenance log
//! says so.

use std::path::Path;
use std::process::Output;

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::redis_server::{RedisServer, redis_available};
use quarry_e2e::searx::SearchStack;
use serde_json::{Value, json};

async fn quarry_run(dir: &Path, profile: &Path, redis_url: &str) -> Output {
    let bin = quarry_bin().unwrap();
    let (dir, profile, redis_url) = (
        dir.to_path_buf(),
        profile.to_path_buf(),
        redis_url.to_string(),
    );
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args([
                "run",
                "How do I decode JSON in Python?",
                "--mode",
                "quick",
                "--profile",
            ])
            .arg(&profile)
            .arg("--out")
            .arg(dir.join("report.md"))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .args(["--redis-url", &redis_url])
            .env("QUARRY_TEST_KEY", "sk-test")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn run_steps(json_url: &str) -> Vec<Step> {
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

/// The `search` and `fetch` lines of a run's provenance log: (kind, cache).
fn source_lines(state: &Path) -> Vec<(String, String)> {
    let log = std::fs::read_to_string(state.join("events.jsonl")).unwrap();
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "search" || v["kind"] == "fetch")
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["cache"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs redis-server and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn two_processes_share_search_and_page_cache_through_redis() {
    assert!(
        redis_available(),
        "redis-server is not installed: run scripts/install-test-deps.sh"
    );
    let stack = SearchStack::start_for("two_processes_share_cache").await;
    let redis = RedisServer::start().unwrap();
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let mut steps = run_steps(&json_url);
    steps.extend(run_steps(&json_url));
    let model = ScriptedModel::start(Script::new(steps)).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();

    let first = dir.path().join("first");
    let out = quarry_run(&first, &profile, &redis.url()).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = dir.path().join("second");
    let out = quarry_run(&second, &profile, &redis.url()).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The page was read from the docs server once, by the first process.
    let page_path = "/python3.11-doc/html/library/json.html";
    let reads = stack
        .docs
        .access_log()
        .into_iter()
        .filter(|line| line.contains(page_path))
        .count();
    assert_eq!(reads, 1, "{:?}", stack.docs.access_log());

    // Provenance: misses then hits.
    assert_eq!(source_lines(&first.join("state")), lookups("miss"));
    assert_eq!(source_lines(&second.join("state")), lookups("hit"));
    // Both reports cite the page; the second one from its cached copy.
    for run in [&first, &second] {
        let report = std::fs::read_to_string(run.join("report.md")).unwrap();
        assert!(report.contains(&json_url), "{report}");
    }
}

#[tokio::test]
#[ignore = "needs redis-server and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_redis_that_is_down_only_costs_the_cache() {
    assert!(
        redis_available(),
        "redis-server is not installed: run scripts/install-test-deps.sh"
    );
    let stack = SearchStack::start_for("redis_down").await;
    let mut redis = RedisServer::start().unwrap();
    let url = redis.url();
    redis.stop();
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(Script::new(run_steps(&json_url)))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = quarry_run(dir.path(), &profile, &url).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "a dead cache must not stall the run"
    );
    assert_eq!(source_lines(&dir.path().join("state")), lookups("error"));
}

/// The cache lookups of one scripted run: four searches (the question as written, as keywords
/// and its key terms, which the engine always runs first, then the model's query) and one
/// page read.
fn lookups(cache: &str) -> Vec<(String, String)> {
    // The question as written, as keywords, its key term, with its product ("Python json"),
    // then the model's query.
    let mut out = vec![("search".to_string(), cache.to_string()); 5];
    out.push(("fetch".to_string(), cache.to_string()));
    out
}
