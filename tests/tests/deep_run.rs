//! `quarry run --mode deep` end to end: real searx over real documentation pages, a scripted
//! model server whose routes play the planner, each researcher, the evaluator, the summarizer and
//! the synthesizer. The model server's request log and the docs server's access log are the proof.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

use quarry_e2e::deep_script::{contents, planner, study, summarizer};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::profiles::write_scripted_profile;
use quarry_e2e::quarry_bin::{run_args, spawn_quarry};
use quarry_e2e::searx::SearchStack;

/// A scratch directory removed when the test ends (pass or fail).
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

async fn quarry_deep(dir: &Path, model_url: &str, searx_url: &str, extra: &[&str]) -> Output {
    let profile = write_scripted_profile(dir, model_url, searx_url).unwrap();
    let mut args = run_args(
        "How do Python's serialization modules compare?",
        "deep",
        &profile,
        dir,
    );
    args.extend(extra.iter().map(|s| s.to_string()));
    spawn_quarry(
        args,
        vec![("QUARRY_TEST_KEY".into(), "sk-test-secret-123".into())],
    )
    .await
    .unwrap()
}

/// A researcher that searches `query`, takes the handshake, reads `url` and reports `report`.
/// `hold` delays its handshake until another route is used up (so it is still running then).
fn researcher(
    name: &str,
    task: &str,
    query: &str,
    url: &str,
    report: &str,
    hold: Option<&str>,
) -> Route {
    let handshake = Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1200, 10);
    let handshake = match hold {
        Some(other) => Step::await_route(other, 500, handshake),
        None => handshake,
    };
    Route::new(
        name,
        format!("Research task: {task}\n"),
        vec![
            Step::tool_call("search", json!({"queries": [query]})).with_usage(1000, 10),
            handshake,
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1400, 12),
            Step::text(report).with_usage(3000, 120),
        ],
    )
    // A clean-context rewrite (should the named page not be among the results) gets the same report.
    .with_fallback(Step::text(report).with_usage(900, 100))
}

fn findings(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state/findings.json")).unwrap())
        .unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn deep_run_injects_steers_never_refetches_and_gates_every_citation() {
    let stack = SearchStack::start_for("deep_run_injects_steers").await;
    let docs = stack.docs.base_url();
    let page = |name: &str| format!("{docs}/python3.11-doc/html/library/{name}.html");
    let (json_url, pickle_url, csv_url, marshal_url) =
        (page("json"), page("pickle"), page("csv"), page("marshal"));
    let invented = "https://blog.example.invalid/json-speed";
    let tasks = [
        "JSON decoding in Python",
        "Python pickle serialization",
        "CSV files in Python",
    ];
    let study_text = format!(
        "Notes: I used the reports.\n<research_result>\n# Python serialization modules\n\n## Key Takeaways\n1. JSON is a lightweight data interchange format inspired by JavaScript object literal syntax ([json]({json_url})).\n2. The json module was written in Rust and is the fastest parser ever benchmarked ([json]({json_url})).\n3. The pickle module implements binary protocols for serializing and de-serializing a Python object structure ([pickle]({pickle_url})).\n4. Everyone agrees JSON beats pickle ([blog]({invented})).\n\n## Abstract\nThree modules compared.\n</research_result>"
    );
    let ideas_text = format!(
        "Analysis.\n<research_result>\n<research_item>\n<source>{csv_url}</source>\n<content>\n## Description\nUse csv for tabular data.\n</content>\n</research_item>\n<research_item>\n<source>https://ideas.example.invalid/x</source>\n<content>\n## Description\nInvented.\n</content>\n</research_item>\n</research_result>"
    );
    let script = Script::default()
        .with_route(planner(&tasks))
        .with_route(researcher(
            "json",
            tasks[0],
            "json decoder",
            &json_url,
            &format!("## Summary\nJSON-FINDINGS-MARKER: the json module decodes JSON text ([json]({json_url})).\n\n## Key findings\n- json.loads turns a JSON document into Python objects ([json]({json_url}))."),
            None,
        ))
        .with_route(researcher(
            "pickle",
            tasks[1],
            "pickle serialization",
            &pickle_url,
            &format!("## Summary\nPickle serializes Python object structures ([pickle]({pickle_url}))."),
            Some("json"),
        ))
        .with_route(researcher(
            "csv",
            tasks[2],
            "csv reader",
            &csv_url,
            &format!("## Summary\nThe csv module reads and writes tabular data ([csv]({csv_url}))."),
            None,
        ))
        .with_route(researcher(
            "marshal",
            "Python marshal format",
            "marshal",
            &marshal_url,
            &format!("## Summary\nmarshal is Python's internal serialization format ([marshal]({marshal_url}))."),
            None,
        ))
        .with_route(Route::new(
            "evaluator",
            "You are the lead evaluator",
            vec![
                Step::text(r#"{"action": "delegate", "queries": ["Python marshal format"]}"#).with_usage(2000, 20),
                Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10),
            ],
        ))
        .with_route(summarizer())
        .with_route(study(&study_text))
        .with_route(Route::new("ideas", "Mode: idea", vec![]).with_fallback(Step::text(ideas_text).with_usage(4000, 300)));
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = scratch();
    let out = quarry_deep(
        dir.path(),
        &model.base_url(),
        stack.searx.base_url(),
        &[
            "--max-concurrent-researchers",
            "2",
            "--outputs",
            "study,ideas",
            "--top-k",
            "3",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quarry run failed: {stderr}");
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    let f = findings(dir.path());
    if std::env::var_os("QUARRY_SHOW_REPORT").is_some() {
        eprintln!("{stderr}\n{report}\n{f:#}");
    }

    // Two rounds: the planned three tasks, then the evaluator's delegated one.
    assert_eq!(f["rounds"], json!(2), "{stderr}");
    let states: Vec<&str> = f["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["Done"; 4]);
    assert_eq!(model.route_requests("evaluator").len(), 2);

    // (a) Injection: "csv" started after "json" finished, and its first prompt holds json's report.
    let csv_first = contents(&model.route_requests("csv")[0]).join("\n");
    assert!(
        csv_first.contains("--- report of researcher 0 ---")
            && csv_first.contains("JSON-FINDINGS-MARKER"),
        "{csv_first}"
    );
    // The delegated researcher of round 2 starts with every report of round 1.
    let marshal_first = contents(&model.route_requests("marshal")[0]).join("\n");
    for id in 0..3 {
        assert!(
            marshal_first.contains(&format!("--- report of researcher {id} ---")),
            "{marshal_first}"
        );
    }
    // (b) Steering: "pickle" was running when "json" finished and got its report before its next turn.
    let pickle_requests = model.route_requests("pickle");
    let steered_at = pickle_requests
        .iter()
        .position(|r| {
            contents(r).iter().any(|c| {
                c.starts_with("Steering update: researcher 0 of this run just finished")
                    && c.contains("JSON-FINDINGS-MARKER")
            })
        })
        .expect("the running researcher received the finished report");
    assert!(
        steered_at >= 2,
        "steered in mid-conversation, not at the start"
    );
    assert!(
        !contents(&pickle_requests[0])
            .join("\n")
            .contains("JSON-FINDINGS-MARKER")
    );

    // (c) The web server's access log: no URL was fetched twice in the whole run.
    let log = stack.docs.access_log();
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for line in &log {
        *counts.entry(line).or_default() += 1;
    }
    let repeated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        repeated.is_empty(),
        "fetched twice: {repeated:?} in {log:?}"
    );
    assert!(
        log.contains(&"GET /python3.11-doc/html/library/json.html".to_string()),
        "{log:?}"
    );

    // Evidence gate: the unfetched URL is gone, the unsupported claim is caught, precision 2/3.
    assert!(!report.contains("example.invalid"), "{report}");
    assert_eq!(f["citationPrecision"], json!(0.667), "{:#}", f["claims"]);
    let claims = f["claims"].as_array().unwrap();
    let unsupported: Vec<&str> = claims
        .iter()
        .filter(|c| c["supported"] == json!(false))
        .map(|c| c["claim"].as_str().unwrap())
        .collect();
    assert_eq!(unsupported.len(), 1, "{claims:#?}");
    assert!(unsupported[0].contains("written in Rust"));
    let unverified = f["unverifiedReferences"].as_array().unwrap();
    assert!(unverified.contains(&json!(invented)), "{unverified:?}");
    assert!(
        unverified.contains(&json!("https://ideas.example.invalid/x")),
        "{unverified:?}"
    );
    assert!(report.contains("precision 0.67"), "{report}");
    assert!(
        report.contains(&format!(
            "- Not supported by {json_url}: \"The json module was written in Rust"
        )),
        "the reader sees which claim failed: {report}"
    );

    // Outputs: the study's sections, one verified idea.
    assert!(
        report.starts_with("# Python serialization modules\n\n## Key Takeaways"),
        "{report}"
    );
    assert!(report.contains("## Ideas\n"), "{report}");
    assert_eq!(f["ideas"].as_array().unwrap().len(), 1);
    assert_eq!(f["ideas"][0]["source"], json!(csv_url));
    assert_eq!(f["droppedItems"]["unverifiedSource"], json!(1));

    // Per-document summaries: one per page read, before synthesis.
    let pages_read = f["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !report.contains(&format!("({}) (search result", s["url"].as_str().unwrap())))
        .count();
    assert!(pages_read >= 4, "{report}");
    assert_eq!(
        model.route_requests("summarizer").len(),
        f["sourceNotes"].as_array().unwrap().len()
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn an_evaluator_that_never_stops_delegating_is_cut_at_target_rounds_plus_two() {
    let stack = SearchStack::start_for("evaluator_never_stops").await;
    let docs = stack.docs.base_url();
    let page = |name: &str| format!("{docs}/python3.11-doc/html/library/{name}.html");
    let script = Script::default()
        .with_route(planner(&["JSON decoding in Python", "Python pickle serialization"]))
        .with_route(researcher("json", "JSON decoding in Python", "json decoder", &page("json"), &format!("## Summary\nJSON ([json]({})).", page("json")), None))
        .with_route(researcher("pickle", "Python pickle serialization", "pickle serialization", &page("pickle"), &format!("## Summary\nPickle ([pickle]({})).", page("pickle")), None))
        .with_route(researcher("csv", "CSV files in Python", "csv reader", &page("csv"), &format!("## Summary\nCSV ([csv]({})).", page("csv")), None))
        .with_route(researcher("marshal", "Python marshal format", "marshal", &page("marshal"), &format!("## Summary\nMarshal ([marshal]({})).", page("marshal")), None))
        .with_route(Route::new(
            "evaluator",
            "You are the lead evaluator",
            vec![
                Step::text(r#"{"action": "delegate", "queries": ["CSV files in Python"]}"#),
                Step::text(r#"{"action": "delegate", "queries": ["Python marshal format"]}"#),
            ],
        )
        // Never satisfied: it would delegate forever.
        .with_fallback(Step::text(r#"{"action": "delegate", "queries": ["Python shelve module"]}"#)))
        .with_route(summarizer())
        .with_route(study(&format!("<research_result>\n# Cut\n\nJSON is a lightweight data interchange format ([json]({})).\n</research_result>", page("json"))));
    let model = ScriptedModel::start(script).await.unwrap();
    let dir = scratch();
    let out = quarry_deep(dir.path(), &model.base_url(), stack.searx.base_url(), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "quarry run failed: {stderr}");
    let f = findings(dir.path());
    // targetRounds (1) + 2: round 3 is the last; it synthesizes without asking the evaluator again.
    assert_eq!(f["rounds"], json!(3), "{stderr}");
    assert_eq!(model.route_requests("evaluator").len(), 2);
    let queries: Vec<&str> = f["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["query"].as_str().unwrap())
        .collect();
    assert_eq!(
        queries,
        vec![
            "JSON decoding in Python",
            "Python pickle serialization",
            "CSV files in Python",
            "Python marshal format"
        ]
    );
    assert!(!f["tasks"].to_string().contains("shelve"));
    assert_eq!(f["partial"], json!(false));
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(report.starts_with("# Cut"), "{report}");
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_malicious_question_is_refused_before_any_search() {
    let stack = SearchStack::start_for("malicious_refused").await;
    let model = ScriptedModel::start(Script::default().with_route(Route::new(
        "planner",
        "You are the research coordinator",
        vec![
                Step::text(r#"{"intent": "MALICIOUS", "complexity": 1, "tasks": []}"#)
                    .with_usage(300, 20),
            ],
    )))
    .await
    .unwrap();
    let dir = scratch();
    let out = quarry_deep(dir.path(), &model.base_url(), stack.searx.base_url(), &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("quarry: the run failed (PolicyRefused): the question was classified as a request to cause harm; no search was made"),
        "{stderr}"
    );
    assert!(stderr.contains("0 searches, 0 pages read"), "{stderr}");
    assert_eq!(model.request_count(), 1, "only the planner was asked");
    assert!(stack.docs.access_log().is_empty(), "nothing was fetched");
    assert!(!dir.path().join("report.md").exists());
}
