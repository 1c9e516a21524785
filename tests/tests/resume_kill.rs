//! Kill tests through real processes: a deep `quarry run` is killed with SIGKILL at
//! each phase boundary and in the middle of a researcher, then started again with the same state
//! directory. It must resume and complete; the report file exists exactly once; finished work is
//! not requested again (the scripted model server's request log proves it); and the recorded
//! cost equals the sum of every call the server answered, the killed attempt's included.
//!
//! Kill points reached by a model call are held by the server (`hold_once`) while the test
//! sends SIGKILL; the two that no model call separates (synthesis stored, report published) use
//! the engine's crash points (`QUARRY_FAILPOINT`), which abort right after that checkpoint.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use quarry_e2e::model_server::{Route, Script, ScriptedModel, ScriptedModelHandle, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

const QUERY: &str = "How do Python's JSON and pickle modules differ?";
const TASKS: [&str; 2] = ["JSON decoding in Python", "Python pickle serialization"];
/// Prices of `scripted_profile`, in pico-USD per token.
const INPUT_PICO: u64 = 1_250_000;
const OUTPUT_PICO: u64 = 10_000_000;

/// Where the first attempt dies.
enum Kill {
    /// SIGKILL while the server holds `route`'s call at `turn`, once `progress.md` holds `marker`
    /// (when given). Several holds are all awaited.
    Hold {
        holds: Vec<(&'static str, usize)>,
        marker: Option<&'static str>,
    },
    /// The engine aborts itself right after the named checkpoint.
    Failpoint(&'static str),
}

struct Run {
    _stack: SearchStack,
    model: ScriptedModelHandle,
    dir: tempfile::TempDir,
    profile: PathBuf,
}

impl Run {
    fn reports_dir(&self) -> PathBuf {
        self.dir.path().join("reports")
    }
    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn command(&self) -> Command {
        let mut cmd = quarry_e2e::quarry_bin::exempt_loopback(Command::new(quarry_bin().unwrap()));
        cmd.args([
            "run",
            QUERY,
            "--mode",
            "deep",
            "--max-concurrent-researchers",
            "2",
        ])
        .arg("--profile")
        .arg(&self.profile)
        .arg("--state-dir")
        .arg(self.state_dir())
        // No --out: the report file is named after the query in the working directory, so a
        // second file would show.
        .current_dir(self.reports_dir())
        .env("QUARRY_TEST_KEY", "sk-test-secret-123")
        .env_remove("QUARRY_FAILPOINT");
        cmd
    }

    fn spawn(&self, failpoint: Option<&str>) -> Child {
        let mut cmd = self.command();
        if let Some(point) = failpoint {
            cmd.env("QUARRY_FAILPOINT", point);
        }
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

fn page(docs: &str, name: &str) -> String {
    format!("{docs}/python3.11-doc/html/library/{name}.html")
}

/// A researcher answering by turn, so a redone researcher gets the same replies. A `slow` one
/// answers its middle turns after a second each, so its sibling finishes (and checkpoints) first
/// and those calls are paid after the last checkpoint.
fn researcher(name: &str, task: &str, query: &str, url: &str, marker: &str, slow: bool) -> Route {
    let report = format!("## Summary\n{marker}: the module is documented here ([doc]({url})).");
    let pace = |step: Step| if slow { Step::delay(1000, step) } else { step };
    Route::new(
        name,
        format!("Research task: {task}\n"),
        vec![
            Step::tool_call("search", json!({"queries": [query]})).with_usage(1000, 10),
            pace(Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1200, 10)),
            pace(Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1400, 12)),
            Step::text(report.clone()).with_usage(3000, 120),
        ],
    )
    .with_fallback(Step::text(report).with_usage(900, 100))
    .by_turn()
}

async fn setup(test: &str) -> Run {
    let stack = SearchStack::start_for(test).await;
    let docs = stack.docs.base_url();
    let (json_url, pickle_url) = (page(&docs, "json"), page(&docs, "pickle"));
    let plan = json!({"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": TASKS}).to_string();
    let study = format!(
        "<research_result>\n# JSON and pickle\n\n## Key Takeaways\n1. JSON is a lightweight data interchange format ([json]({json_url})).\n2. The pickle module implements binary protocols for serializing a Python object structure ([pickle]({pickle_url})).\n\n## Abstract\nTwo modules compared.\n</research_result>"
    );
    let script = Script::default()
        // One planner reply only: planning twice would fail the run.
        .with_route(Route::new(
            "planner",
            "You are the research coordinator",
            vec![Step::text(plan).with_usage(300, 40)],
        ))
        .with_route(researcher(
            "json",
            TASKS[0],
            "json decoder",
            &json_url,
            "JSON-MARKER",
            false,
        ))
        .with_route(researcher(
            "pickle",
            TASKS[1],
            "pickle",
            &pickle_url,
            "PICKLE-MARKER",
            true,
        ))
        .with_route(
            Route::new(
                "evaluator",
                "You are the lead evaluator",
                vec![Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10)],
            )
            .by_turn(),
        )
        .with_route(
            Route::new("summarizer", "You condense one web page", vec![]).with_fallback(
                Step::text("- The page documents a standard library module.").with_usage(800, 30),
            ),
        )
        .with_route(
            Route::new(
                "study",
                "Mode: study",
                vec![Step::text(study).with_usage(5000, 400)],
            )
            .by_turn(),
        );
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("reports")).unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    Run {
        _stack: stack,
        model,
        dir,
        profile,
    }
}

/// Waits (up to a minute) until `done` holds.
async fn wait_until(what: &str, child: &mut Child, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("quarry exited ({status}) before {what}: {err}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the first attempt until it dies at `kill`, then the second to completion.
async fn kill_and_resume(run: &Run, kill: Kill) -> Output {
    match kill {
        Kill::Hold { holds, marker } => {
            for (route, turn) in &holds {
                run.model.hold_once(route, *turn);
            }
            let mut child = run.spawn(None);
            let progress = run.state_dir().join("progress.md");
            wait_until("the kill point", &mut child, || {
                holds.iter().all(|(r, t)| run.model.held(r, *t))
                    && marker.is_none_or(|m| {
                        std::fs::read_to_string(&progress).is_ok_and(|p| p.contains(m))
                    })
            })
            .await;
            child.kill().unwrap(); // SIGKILL
            let status = child.wait().unwrap();
            assert!(!status.success());
        }
        Kill::Failpoint(point) => {
            let child = run.spawn(Some(point));
            // Blocking here would stall the model server on this test's runtime.
            let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
                .await
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success() && stderr.contains(&format!("failpoint {point}")),
                "the first attempt must die at {point}: {stderr}"
            );
        }
    }
    let mut cmd = run.command();
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Requests of `route` in the whole test (both attempts).
fn count(model: &ScriptedModelHandle, route: &str) -> usize {
    model.route_requests(route).len()
}

/// `usage: I input + O output tokens in N model calls, cost $C` from the last attempt.
fn usage_line(stderr: &str) -> (u64, u64, u64, String) {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.starts_with("usage: "))
        .unwrap_or_else(|| panic!("no usage line: {stderr}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| words[i].parse::<u64>().unwrap();
    let cost = line.rsplit("cost $").next().unwrap();
    let cost = cost.split(',').next().unwrap().to_string();
    (n(1), n(4), n(8), cost)
}

/// The checks every scenario shares; returns the report text.
fn assert_completed_once_with_exact_cost(run: &Run, out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the resumed run failed: {stderr}");
    // Exactly one report file, the one the first attempt named (or would have).
    let files: Vec<PathBuf> = std::fs::read_dir(run.reports_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "exactly one report file: {files:?}");
    let report = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        report.contains("lightweight data interchange format"),
        "{report}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        files[0].canonicalize().unwrap().display().to_string()
    );

    // Cost: every call the server answered, in either attempt, counted once.
    let answered: Vec<_> = run
        .model
        .recorded()
        .into_iter()
        .filter(|r| r.answered)
        .collect();
    let input: u64 = answered
        .iter()
        .map(|r| r.reply_usage.unwrap().prompt_tokens)
        .sum();
    let output: u64 = answered
        .iter()
        .map(|r| r.reply_usage.unwrap().completion_tokens)
        .sum();
    let (in_tok, out_tok, calls, cost) = usage_line(&stderr);
    assert_eq!(
        (in_tok, out_tok, calls as usize),
        (input, output, answered.len()),
        "recorded usage vs the server's log: {stderr}"
    );
    assert_eq!(
        cost,
        quarry_engine::llm::format_pico_usd(input * INPUT_PICO + output * OUTPUT_PICO)
    );
    // The provenance log holds every answered call of both attempts, with the same total.
    let log = std::fs::read_to_string(run.state_dir().join("events.jsonl")).unwrap();
    let calls: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "modelCall" && v["outcome"] == "ok")
        .collect();
    assert_eq!(calls.len(), answered.len(), "{log}");
    let logged: u64 = calls
        .iter()
        .map(|c| c["costPicoUSD"].as_u64().unwrap())
        .sum();
    assert_eq!(logged, input * INPUT_PICO + output * OUTPUT_PICO);
    report
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_after_planning_resumes_without_planning_again() {
    let run = setup("killed_after_planning").await;
    let out = kill_and_resume(
        &run,
        Kill::Hold {
            holds: vec![("json", 0), ("pickle", 0)],
            marker: None,
        },
    )
    .await;
    assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(
        count(&run.model, "planner"),
        1,
        "the agenda was not planned again"
    );
    // Each researcher: one held (killed) request, then its four turns.
    assert_eq!(
        (count(&run.model, "json"), count(&run.model, "pickle")),
        (5, 5)
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_mid_researcher_redoes_only_the_unfinished_one() {
    let run = setup("killed_mid_researcher").await;
    let out = kill_and_resume(
        &run,
        Kill::Hold {
            holds: vec![("pickle", 3)],
            marker: Some("JSON-MARKER"),
        },
    )
    .await;
    assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(count(&run.model, "planner"), 1);
    assert_eq!(
        count(&run.model, "json"),
        4,
        "the finished researcher was not asked again"
    );
    // Three answered turns (two after the sibling's checkpoint) and the held one, then a redo.
    assert_eq!(count(&run.model, "pickle"), 4 + 4);
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_before_evaluation_keeps_every_report() {
    let run = setup("killed_before_evaluation").await;
    let out = kill_and_resume(
        &run,
        Kill::Hold {
            holds: vec![("evaluator", 0)],
            marker: None,
        },
    )
    .await;
    assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(
        (count(&run.model, "json"), count(&run.model, "pickle")),
        (4, 4)
    );
    assert_eq!(
        count(&run.model, "evaluator"),
        2,
        "the held evaluation, then one more"
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_during_synthesis_does_not_research_again() {
    let run = setup("killed_during_synthesis").await;
    let out = kill_and_resume(
        &run,
        Kill::Hold {
            holds: vec![("study", 0)],
            marker: None,
        },
    )
    .await;
    assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(
        (
            count(&run.model, "planner"),
            count(&run.model, "json"),
            count(&run.model, "pickle"),
            count(&run.model, "evaluator"),
            count(&run.model, "study"),
        ),
        (1, 4, 4, 1, 2)
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_after_synthesis_stores_the_same_report_without_a_model_call() {
    let run = setup("killed_after_synthesis").await;
    let out = kill_and_resume(&run, Kill::Failpoint("synthesized")).await;
    let report = assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(
        count(&run.model, "study"),
        1,
        "synthesis was not paid twice"
    );
    let stored = std::fs::read_to_string(run.state_dir().join("report.md")).unwrap();
    assert!(
        report.starts_with(stored.trim_end()),
        "the file is the stored report"
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn killed_after_publishing_writes_the_file_once_and_calls_nothing() {
    let run = setup("killed_after_publishing").await;
    let mut first = run.command();
    first.env("QUARRY_FAILPOINT", "published");
    let out = tokio::task::spawn_blocking(move || first.output().unwrap())
        .await
        .unwrap();
    assert!(!out.status.success());
    let calls = run.model.request_count();
    assert!(Path::new(&run.state_dir().join("report.md")).exists());
    let mut again = run.command();
    let out = tokio::task::spawn_blocking(move || again.output().unwrap())
        .await
        .unwrap();
    assert_completed_once_with_exact_cost(&run, &out);
    assert_eq!(
        run.model.request_count(),
        calls,
        "a finished run makes no model call"
    );
    // And a third start changes nothing: still one file.
    let mut third = run.command();
    let out = tokio::task::spawn_blocking(move || third.output().unwrap())
        .await
        .unwrap();
    assert_completed_once_with_exact_cost(&run, &out);
}
