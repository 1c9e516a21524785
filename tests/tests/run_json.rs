//! `quarry run --output json`: the run's events as JSON lines on stdout (like coding agents' JSON modes),
//! against real searx over the docs and a scripted model.

use serde_json::{Value, json};

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn json_mode_streams_every_event_and_ends_with_the_report() {
    let stack = SearchStack::start_for("json_mode_streams_every_event").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str into Python objects ([json]({json_url})).\n\n## Links\n- {json_url}\n"
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let dir = dir();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let out_file = dir.path().join("report.md");
    let mut command =
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(quarry_bin().unwrap()));
    command
        .args([
            "run",
            "How do I decode JSON in Python?",
            "--mode",
            "quick",
            "--output",
            "json",
        ])
        .arg("--profile")
        .arg(&profile)
        .arg("--out")
        .arg(&out_file)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("QUARRY_TEST_KEY", "sk-test-secret-123");
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}\n{stdout}");
    // stdout is JSON lines only; the human progress lines are gone.
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!stderr.contains("[Researching]"), "{stderr}");
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    // What the engine guarantees: the run starts first and ends with the researcher's end, the
    // report and the run's end, in that order; in between, every call, search, read and progress
    // step appears once (their interleaving depends on scheduling, not on the engine).
    assert_eq!(types[0], "run_start", "{stdout}");
    assert_eq!(
        types[types.len() - 4..],
        [
            "researcher_end",
            "report_written",
            "report_stored",
            "run_end"
        ],
        "{stdout}"
    );
    let count = |t: &str| types.iter().filter(|x| **x == t).count();
    assert_eq!(
        [
            count("model_call"),
            count("search"),
            count("fetch"),
            count("researcher_progress")
        ],
        [4, 5, 1, 4],
        "{stdout}"
    );
    // A tool's events come after the model call that asked for it.
    let first_call = types.iter().position(|t| *t == "model_call").unwrap();
    let first_search = types.iter().position(|t| *t == "search").unwrap();
    assert!(first_call < first_search, "{stdout}");
    assert_eq!(lines[0]["query"], "How do I decode JSON in Python?");
    assert_eq!(lines[0]["mode"], "quick");
    // Progress lines count the researcher's tool calls, once each.
    let progress: Vec<u64> = lines
        .iter()
        .filter(|l| l["type"] == "researcher_progress")
        .map(|l| l["toolCalls"].as_u64().unwrap())
        .collect();
    assert_eq!(progress, [0, 1, 2, 3]);
    // Model calls carry exactly what the model server reported, priced by the profile.
    let calls: Vec<&Value> = lines.iter().filter(|l| l["type"] == "model_call").collect();
    let tokens: Vec<(u64, u64)> = calls
        .iter()
        .map(|c| {
            (
                c["inputTokens"].as_u64().unwrap(),
                c["outputTokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tokens, [(900, 20), (1500, 15), (1600, 18), (5200, 160)]);
    assert!(
        calls
            .iter()
            .all(|c| c["model"] == "scripted" && c["outcome"] == "ok")
    );
    // The question is searched first, as written, as keywords, by its subject (not the
    // product it is asked in, "Python", alone) and by its subject with that product; the
    // model's query follows.
    let searched: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "search")
        .map(|l| &l["subject"])
        .collect();
    assert_eq!(
        searched,
        [
            &json!("How do I decode JSON in Python?"),
            &json!("decode json python"),
            &json!("json"),
            &json!("Python json"),
            &json!("json decoder")
        ]
    );
    let fetch = lines.iter().find(|l| l["type"] == "fetch").unwrap();
    assert_eq!(fetch["subject"], json!(json_url));
    let end = lines.last().unwrap();
    let report = std::fs::canonicalize(&out_file).unwrap();
    assert_eq!(
        end,
        &json!({
            "type": "run_end", "ok": true, "phase": "Completed",
            "report": report.display().to_string(),
            "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630", "llmCalls": 4},
            "searches": 5, "pagesRead": 1
        })
    );
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(
        text.contains("Python decodes JSON with the json module."),
        "{text}"
    );
    assert!(!stdout.contains("sk-test-secret-123"));
}

#[tokio::test]
async fn json_mode_reports_a_run_that_cannot_start() {
    let dir = dir();
    let mut command =
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(quarry_bin().unwrap()));
    command
        .args(["run", "What is CEL?", "--output", "json", "--profile"])
        .arg(dir.path().join("missing.yaml"));
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(line["type"], "run_end");
    assert_eq!(line["ok"], false);
    let error = line["error"].as_str().unwrap();
    assert!(
        error.starts_with("profile ") && error.contains("missing.yaml"),
        "{error}"
    );
}
