//! Hard budgets through `quarry run`: the router reserves each call's worst case against
//! `--max-cost-usd`, prefers the budget tier past 80%, and stops the run with a partial report when
//! no tier fits. Real searx over the docs corpus, the scripted model server.

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

/// A scratch directory removed when the test ends (pass or fail).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Primary at 1.25 / 10.00 USD per million tokens; optionally a budget tier on the same server.
fn profile(model_url: &str, searx_url: &str, with_budget_tier: bool) -> String {
    let budget = if with_budget_tier {
        format!(
            r#"
    budget:
      baseURL: "{model_url}"
      model: scripted-budget
      timeoutSeconds: 20
      contextWindow: 32768
      maxOutputTokens: 700"#
        )
    } else {
        String::new()
    };
    format!(
        r#"apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: budget
spec:
  models:
    primary:
      baseURL: "{model_url}"
      model: scripted
      timeoutSeconds: 20
      contextWindow: 32768
      maxOutputTokens: 700{budget}
  prices:
    - model: scripted
      inputUSDPerMillion: "1.25"
      outputUSDPerMillion: "10.00"
    - model: scripted-budget
      inputUSDPerMillion: "0.10"
      outputUSDPerMillion: "0.40"
  search:
    url: "{searx_url}"
  fetch:
    allowedHosts: ["127.0.0.1"]
    # One local docs server is every host here: no politeness spacing needed.
    politenessDelayMillis: 0
    perHostConcurrency: 8
    pageCharsForModel: 4000
"#
    )
}

async fn run(dir: &Path, profile_text: String, args: &[&str]) -> Output {
    let profile = dir.join("profile.yaml");
    std::fs::write(&profile, profile_text).unwrap();
    let bin = quarry_bin().unwrap();
    let mut all: Vec<String> = vec![
        "run".into(),
        "How do I decode JSON in Python?".into(),
        "--profile".into(),
        profile.display().to_string(),
        "--out".into(),
        dir.join("report.md").display().to_string(),
        "--state-dir".into(),
        dir.join("state").display().to_string(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args(&all)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn findings(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state/findings.json")).unwrap())
        .unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn past_eighty_percent_of_the_budget_the_budget_tier_answers() {
    let stack = SearchStack::start_for("budget_tier_past_80").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let pickle_url = format!("{docs}/python3.11-doc/html/library/pickle.html");
    // Each call reports 5000 tokens in and 100 out: $0.00725 on the primary, $0.00054 on the
    // budget tier. With $0.035 the fifth call starts at 82.9% spent.
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder pickle"]})).with_usage(5000, 100),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(5000, 100),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(5000, 100),
        Step::tool_call("scrape", json!({"urls": [pickle_url]})).with_usage(5000, 100),
        Step::text(format!(
            "## Summary\nJSON is a lightweight data interchange format inspired by JavaScript object literal syntax ([json]({json_url}))."
        ))
        .with_usage(5000, 100),
    ]))
    .await
    .unwrap();
    let dir = scratch();
    let out = run(
        dir.path(),
        profile(&model.base_url(), stack.searx.base_url(), true),
        &["--mode", "quick", "--max-cost-usd", "0.035"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let models: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r["model"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        models,
        vec![
            "scripted",
            "scripted",
            "scripted",
            "scripted",
            "scripted-budget"
        ]
    );
    // 4 × (5000 × 1.25 + 100 × 10) + (5000 × 0.10 + 100 × 0.40) micro-USD.
    let f = findings(dir.path());
    assert_eq!(f["usage"]["costUSD"], json!("0.029540"), "{stderr}");
    // Usage by model, from the router's ledger.
    assert_eq!(f["usage"]["byModel"]["scripted"]["llmCalls"], json!(4));
    assert_eq!(
        f["usage"]["byModel"]["scripted"]["costUSD"],
        json!("0.029000")
    );
    assert_eq!(
        f["usage"]["byModel"]["scripted-budget"]["llmCalls"],
        json!(1)
    );
    assert_eq!(
        f["usage"]["byModel"]["scripted-budget"]["costUSD"],
        json!("0.000540")
    );
    // The provenance log has one line per model call (besides its searches and page reads), and
    // their costs add up to the run's.
    let log = std::fs::read_to_string(dir.path().join("state/events.jsonl")).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "search" && l["cache"] == "miss"),
        "searches are in the log: {log}"
    );
    let calls: Vec<Value> = lines
        .into_iter()
        .filter(|l| l["kind"] == "modelCall")
        .collect();
    let models: Vec<&str> = calls.iter().map(|c| c["model"].as_str().unwrap()).collect();
    assert_eq!(
        models,
        vec![
            "scripted",
            "scripted",
            "scripted",
            "scripted",
            "scripted-budget"
        ]
    );
    let micro: u64 = calls
        .iter()
        .map(|c| {
            let usd = c["costUSD"].as_str().unwrap();
            let (whole, frac) = usd.split_once('.').unwrap();
            whole.parse::<u64>().unwrap() * 1_000_000 + frac.parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(micro, 29_540);
    assert!(
        calls
            .iter()
            .all(|c| c["kind"] == "modelCall" && c["outcome"] == "ok")
    );
    assert_eq!(calls[4]["tier"], json!("budget"));
    assert_eq!(calls[0]["inputTokens"], json!(5000));
    assert_eq!(f["partial"], json!(false));
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_call_that_would_pass_the_budget_is_not_made_and_the_report_is_partial() {
    let stack = SearchStack::start_for("budget_stops_mid_round").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let pickle_url = format!("{docs}/python3.11-doc/html/library/pickle.html");
    let plan = json!({"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": ["JSON decoding", "Pickle serialization"]}).to_string();
    let researcher = |task: &str, query: &str, url: &str| {
        Route::new(
            task.to_string(),
            format!("Research task: {task}\n"),
            vec![
                Step::tool_call("search", json!({"queries": [query]})).with_usage(5000, 100),
                Step::tool_call("scrape", json!({"urls": [url]})).with_usage(5000, 100),
                Step::tool_call("scrape", json!({"urls": [url]})).with_usage(5000, 100),
                Step::text(format!("## Summary\nFindings of {task} ([page]({url}))."))
                    .with_usage(5000, 100),
            ],
        )
    };
    let model = ScriptedModel::start(
        Script::default()
            .with_route(Route::new(
                "planner",
                "You are the research coordinator",
                vec![Step::text(plan).with_usage(5000, 100)],
            ))
            .with_route(researcher("JSON decoding", "json decoder", &json_url))
            .with_route(researcher("Pickle serialization", "pickle", &pickle_url)),
    )
    .await
    .unwrap();
    let dir = scratch();
    // $0.05: the planner and the first researcher spend 5 × $0.00725 = $0.03625; the second
    // researcher's search fits, its next call's worst case ($0.007 of output alone) does not.
    let out = run(
        dir.path(),
        profile(&model.base_url(), stack.searx.base_url(), false),
        &[
            "--mode",
            "deep",
            "--max-concurrent-researchers",
            "1",
            "--max-cost-usd",
            "0.05",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if std::env::var_os("QUARRY_SHOW_REPORT").is_some() {
        eprintln!("{stderr}");
    }
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        model.request_count(),
        6,
        "the planner, 4 + 1 researcher calls; the refused call was never sent"
    );
    let f = findings(dir.path());
    assert_eq!(f["partial"], json!(true));
    // Exactly the sum of the 6 calls made (6 × $0.00725), under the limit: no overshoot at all.
    assert_eq!(f["usage"]["costUSD"], json!("0.043500"), "{stderr}");
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.contains("**Partial report**"), "{report}");
    assert!(report.contains("Findings of JSON decoding"), "{report}");
    assert!(
        stderr.contains("CostLimit")
            || f["tasks"][1]["error"]
                .as_str()
                .unwrap_or_default()
                .starts_with("CostLimit"),
        "{stderr}\n{f:#}"
    );
}
