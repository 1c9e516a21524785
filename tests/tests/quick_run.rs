//! `quarry run` end to end: real searx over real documentation pages, a scripted model server.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("quarry-quickrun-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_profile(dir: &Path, model_url: &str, searx_url: &str) -> PathBuf {
    let path = dir.join("profile.yaml");
    std::fs::write(&path, scripted_profile(model_url, searx_url)).unwrap();
    path
}

async fn quarry_run(dir: &Path, profile: &Path, query: &str) -> Output {
    let bin = quarry_bin().unwrap();
    let out = dir.join("report.md");
    let state = dir.join("state");
    let query = query.to_string();
    let profile = profile.to_path_buf();
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args(["run", &query, "--mode", "quick", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(&out)
            .arg("--state-dir")
            .arg(&state)
            .env("QUARRY_TEST_KEY", "sk-test-secret-123")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn urls_in(markdown: &str) -> Vec<String> {
    let re = regex_lite(markdown);
    re.into_iter().collect()
}

// Every http URL in a text (no regex dependency for one pattern).
fn regex_lite(text: &str) -> Vec<String> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("http://").or_else(|| rest.find("https://")) {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | ']' | '<' | '>' | '"'))
            .unwrap_or(tail.len());
        out.push(tail[..end].trim_end_matches(['.', ',', ';']).to_string());
        rest = &tail[end..];
    }
    out
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn quick_run_on_python_docs_cites_only_fetched_pages_and_accounts_usage_exactly() {
    let stack = SearchStack::start_for("quick_run_on_python_docs").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let invented = "https://docs.example.invalid/made-up.html";
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url, invented]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str into Python objects ([json]({json_url})).\n- It is the fastest parser on earth ([blog]({invented})).\n\n## Links\n- {json_url}\n- {invented}\n"
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let dir = Dir::new("python");
    let profile = write_profile(&dir.0, &model.base_url(), stack.searx.base_url());
    let out = quarry_run(&dir.0, &profile, "How do I decode JSON in Python?").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quarry run failed: {stderr}");
    let report_path = dir.0.join("report.md");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        std::fs::canonicalize(&report_path)
            .unwrap()
            .display()
            .to_string()
    );
    let report = std::fs::read_to_string(&report_path).unwrap();

    // Citations: only the page the run fetched survives; the invented one is gone everywhere.
    assert!(
        report.contains(&format!("([json]({json_url}))")),
        "{report}"
    );
    assert!(!report.contains("example.invalid"), "{report}");
    assert!(report.contains("## Sources\n\n1. ["), "{report}");
    let findings: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.0.join("state/findings.json")).unwrap())
            .unwrap();
    let fetched: Vec<String> = findings["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["url"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(fetched, vec![json_url.clone()]);
    for url in urls_in(report.split("\n---\n_Saved to").next().unwrap()) {
        assert!(
            fetched.contains(&url),
            "report cites {url}, which the run did not fetch"
        );
    }

    // Usage and cost equal what the model server reported, priced by the profile's table.
    let (input, output) = (900 + 1500 + 1600 + 5200u64, 20 + 15 + 18 + 160u64);
    assert_eq!(findings["usage"]["inputTokens"], json!(input));
    assert_eq!(findings["usage"]["outputTokens"], json!(output));
    assert_eq!(findings["usage"]["llmCalls"], json!(4));
    // 9200 * 1.25 + 213 * 10.00 USD per million = 0.011500 + 0.002130
    assert_eq!(findings["usage"]["costUSD"], json!("0.013630"));
    assert!(
        stderr.contains("usage: 9200 input + 213 output tokens in 4 model calls, cost $0.013630"),
        "{stderr}"
    );

    // The model saw the page, fenced, and every call carried an output cap and the key.
    let recorded = model.recorded();
    assert_eq!(recorded.len(), 4);
    for r in &recorded {
        assert_eq!(r.body["max_tokens"], json!(700));
        assert_eq!(
            r.authorization.as_deref(),
            Some("Bearer sk-test-secret-123")
        );
    }
    let last = recorded[3].body.to_string();
    assert!(
        last.contains("<page url=") && last.contains("json.loads"),
        "the page text reached the model"
    );
    assert!(
        !stderr.contains("sk-test-secret-123"),
        "the key must not leak into output"
    );
    assert!(!report.contains("sk-test-secret-123"));
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn garbage_from_the_model_fails_with_a_clear_reason_and_no_report() {
    let stack = SearchStack::start_for("garbage_from_the_model").await;
    let model = ScriptedModel::start(Script::default().with_fallback(Step::raw(
        "<html>502 Bad Gateway: upstream sent garbage</html>",
    )))
    .await
    .unwrap();
    let dir = Dir::new("garbage");
    let profile = write_profile(&dir.0, &model.base_url(), stack.searx.base_url());
    let out = quarry_run(&dir.0, &profile, "How do I decode JSON in Python?").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("quarry: the run failed (ModelOutputInvalid): "),
        "{stderr}"
    );
    assert!(!dir.0.join("report.md").exists());
    assert!(!dir.0.join("state/report.md").exists());
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn no_search_results_give_the_honest_unable_to_research_report() {
    let stack = SearchStack::start_for("no_search_results").await;
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["zzqxv wqqz"]})).with_usage(800, 10),
        Step::text("Python's zzqxv module is widely used ([docs](https://invented.example/zz)).")
            .with_usage(900, 30),
    ]))
    .await
    .unwrap();
    let dir = Dir::new("nothing");
    let profile = write_profile(&dir.0, &model.base_url(), stack.searx.base_url());
    let out = quarry_run(&dir.0, &profile, "zzqxv wqqz").await;
    // The honest report is written, but the run did not succeed: exit status and reason say so.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("quarry: the run failed (NoEvidence): no usable source was found after"),
        "{stderr}"
    );
    assert!(stderr.contains("report.md"), "{stderr}");
    let report = std::fs::read_to_string(dir.0.join("report.md")).unwrap();
    assert!(
        report.starts_with("# Unable to research: zzqxv wqqz"),
        "{report}"
    );
    assert!(
        !report.contains("invented.example"),
        "nothing the model made up is published: {report}"
    );
    assert!(!report.contains("widely used"));
}

/// `quarry run --approve`, answering `answer` on stdin.
async fn quarry_run_approving(dir: &Path, profile: &Path, query: &str, answer: &str) -> Output {
    use std::io::Write;
    let bin = quarry_bin().unwrap();
    let (out, state) = (dir.join("report.md"), dir.join("state"));
    let (query, profile, answer) = (query.to_string(), profile.to_path_buf(), answer.to_string());
    tokio::task::spawn_blocking(move || {
        let mut child = quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .args(["run", &query, "--mode", "quick", "--approve", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(&out)
            .arg("--state-dir")
            .arg(&state)
            .env("QUARRY_TEST_KEY", "sk-test-secret-123")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Written at once: the prompt reads it when the plan waits (a pipe keeps it until then).
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn run_approve_asks_before_researching_and_a_no_cancels_without_a_model_call() {
    let stack = SearchStack::start_for("run_approve").await;
    let model = ScriptedModel::start(Script::default().with_fallback(Step::raw("never asked")))
        .await
        .unwrap();
    let dir = Dir::new("approve-no");
    let profile = write_profile(&dir.0, &model.base_url(), stack.searx.base_url());
    let out =
        quarry_run_approving(&dir.0, &profile, "How do I decode JSON in Python?", "n\n").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1. How do I decode JSON in Python?"),
        "{stderr}"
    );
    assert!(stderr.contains("Research this plan? [y/N]"), "{stderr}");
    assert!(
        stderr.contains("not approved: the run is cancelled, nothing was searched"),
        "{stderr}"
    );
    assert_eq!(model.request_count(), 0);
    assert!(!dir.0.join("report.md").exists());

    // Answered yes, the same question is researched to a report.
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let model = ScriptedModel::start(
        Script::new(vec![
            Step::tool_call("search", json!({"queries": ["json decode python"]}))
                .with_usage(800, 10),
            Step::tool_call("scrape", json!({"urls": [json_url.clone()]})).with_usage(900, 10),
            Step::text(format!(
                "## Summary\nUse json.loads to decode a JSON document ([json]({json_url})).\n"
            ))
            .with_usage(1000, 40),
        ])
        .with_fallback(
            Step::text(format!(
                "## Summary\nUse json.loads to decode a JSON document ([json]({json_url})).\n"
            ))
            .with_usage(1000, 40),
        ),
    )
    .await
    .unwrap();
    let dir = Dir::new("approve-yes");
    let profile = write_profile(&dir.0, &model.base_url(), stack.searx.base_url());
    let out =
        quarry_run_approving(&dir.0, &profile, "How do I decode JSON in Python?", "y\n").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("plan approved"), "{stderr}");
    assert!(model.request_count() >= 3, "{stderr}");
    assert!(dir.0.join("report.md").exists());
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_run_compared_with_an_earlier_one_reports_what_changed() {
    let stack = SearchStack::start_for("compare_with").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let script = |claim: &str| {
        let answer =
            Step::text(format!("## Summary\n{claim} ([json]({json_url})).\n")).with_usage(1000, 40);
        Script::new(vec![
            Step::tool_call("search", json!({"queries": ["json decode python"]}))
                .with_usage(800, 10),
            Step::tool_call("scrape", json!({"urls": [json_url.clone()]})).with_usage(900, 10),
            answer.clone(),
        ])
        .with_fallback(answer)
    };
    let claim =
        "json.loads deserializes a str instance containing a JSON document to a Python object";
    // The first run, then the same question compared with it: the same claim, the same source.
    let model = ScriptedModel::start(script(claim)).await.unwrap();
    let first = Dir::new("compare-first");
    let profile = write_profile(&first.0, &model.base_url(), stack.searx.base_url());
    let out = quarry_run(&first.0, &profile, "How do I decode JSON in Python?").await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let earlier = first.0.join("state/findings.json");
    assert!(earlier.is_file());

    let model = ScriptedModel::start(script(claim)).await.unwrap();
    let second = Dir::new("compare-second");
    let profile = write_profile(&second.0, &model.base_url(), stack.searx.base_url());
    let out = {
        let bin = quarry_bin().unwrap();
        let (dir, profile, earlier) = (second.0.clone(), profile.clone(), earlier.clone());
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
                .arg("--compare-with")
                .arg(&earlier)
                .env("QUARRY_TEST_KEY", "sk-test-secret-123")
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = std::fs::read_to_string(second.0.join("report.md")).unwrap();
    assert!(report.contains("## Changes since "), "{report}");
    assert!(
        report.contains("Nothing changed: the same claims are supported by the same sources."),
        "{report}"
    );
    let findings: Value = serde_json::from_str(
        &std::fs::read_to_string(second.0.join("state/findings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(findings["changes"]["newClaims"], json!([]));
    // The earlier findings reached the model as context.
    let asked = model.requests();
    assert!(
        asked
            .iter()
            .any(|r| r.to_string().contains("An earlier report on this question")),
        "the earlier findings are context"
    );

    // A file that is no findings.json is refused before anything runs.
    let bogus = second.0.join("bogus.json");
    std::fs::write(&bogus, "{\"not\": \"findings\"}").unwrap();
    let out =
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(quarry_bin().unwrap()))
            .args(["run", "q?", "--mode", "quick", "--profile"])
            .arg(&profile)
            .arg("--compare-with")
            .arg(&bogus)
            .env("QUARRY_TEST_KEY", "sk-test-secret-123")
            .output()
            .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("not a findings.json (no claims and sources)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
