//! `quarry eval` end to end: a two-question set through the standalone engine (real searx over
//! real documentation pages, a scripted model), scored into `eval.json`, then resumed.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("quarry-eval-{name}-{}", std::process::id()));
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

async fn quarry_eval(dir: &Path, profile: &Path, questions: &Path) -> Output {
    let bin = quarry_bin().unwrap();
    let (dir, profile, questions) = (
        dir.to_path_buf(),
        profile.to_path_buf(),
        questions.to_path_buf(),
    );
    tokio::task::spawn_blocking(move || {
        quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(bin))
            .arg("eval")
            .arg(&questions)
            .args(["--mode", "quick", "--profile"])
            .arg(&profile)
            .arg("--out")
            .arg(dir.join("results"))
            .current_dir(&dir)
            .env("QUARRY_TEST_KEY", "sk-test-secret-123")
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn eval_scores_facts_and_honesty_and_a_rerun_skips_finished_questions() {
    let stack = SearchStack::start_for("eval_scores_facts_and_honesty").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let invented = "https://docs.example.invalid/made-up.html";
    // Each question's conversation is a route of its own, selected by the question's words.
    let model = ScriptedModel::start(
        Script::default()
            .with_route(Route::new(
                "json",
                "decode JSON in Python",
                vec![
                    Step::tool_call("search", json!({"queries": ["json decoder"]}))
                        .with_usage(900, 20),
                    Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
                    Step::tool_call("scrape", json!({"urls": [json_url, invented]}))
                        .with_usage(1600, 18),
                    Step::text(format!(
                        "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str into Python objects ([json]({json_url})).\n- It is the fastest parser on earth ([blog]({invented})).\n"
                    ))
                    .with_usage(5200, 160),
                ],
            ))
            .with_route(Route::new(
                "nothing",
                "zzqxv",
                vec![
                    Step::tool_call("search", json!({"queries": ["zzqxv wqqz"]}))
                        .with_usage(800, 10),
                    Step::text(
                        "Python's zzqxv module is widely used ([docs](https://invented.example/zz)).",
                    )
                    .with_usage(900, 30),
                ],
            )),
    )
    .await
    .unwrap();
    let dir = Dir::new("two");
    let profile = dir.0.join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let questions = dir.0.join("questions.jsonl");
    let lines = [
        json!({"id": "py-json-decode", "kind": "fact", "question": "How do I decode JSON in Python?",
               "expect": "answer", "pages": ["python3.11-doc/html/library/json.html"],
               "keyFacts": [{"fact": "json.loads deserializes a str", "match": ["json.loads", "loads("],
                             "page": "python3.11-doc/html/library/json.html", "quote": "Deserialize s"}],
               "reviewNote": "extra fields are ignored"}),
        json!({"id": "zz-nothing", "kind": "no-answer", "question": "zzqxv wqqz", "expect": "no-answer",
               "keyFacts": [], "pages": [], "absentTerms": ["zzqxv"]}),
    ];
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&questions, text.join("\n") + "\n").unwrap();

    let out = quarry_eval(&dir.0, &profile, &questions).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "quarry eval failed: {stderr}\n{stdout}"
    );
    let results = dir.0.join("results");
    let eval = read_json(&results.join("eval.json"));
    let first = &eval["results"][0];
    let second = &eval["results"][1];

    // The answerable question: completed, its fact found, only the fetched page cited.
    assert_eq!(first["id"], json!("py-json-decode"), "{eval:#}");
    assert_eq!(first["outcome"]["phase"], json!("Completed"), "{eval:#}");
    assert_eq!(first["keyFactsFound"], json!(1), "{eval:#}");
    assert_eq!(first["keyFacts"], json!(1));
    assert_eq!(first["facts"][0]["matched"], json!("json.loads"));
    assert_eq!(first["citedUrls"], json!(1), "{eval:#}");
    assert_eq!(first["citedFetched"], json!(1));
    assert_eq!(
        first["removedCitations"],
        json!(1),
        "the invented URL was removed"
    );
    assert!(first["claims"].as_u64().unwrap() >= 1, "{eval:#}");
    assert!(first["citationPrecision"].is_number(), "{eval:#}");
    assert_eq!(first["inputTokens"], json!(900 + 1500 + 1600 + 5200));
    assert_eq!(first["outputTokens"], json!(20 + 15 + 18 + 160));
    assert_eq!(first["costUSD"], json!("0.013630"));
    assert!(first["wallSeconds"].as_f64().unwrap() > 0.0);
    let report = std::fs::read_to_string(first["report"].as_str().unwrap()).unwrap();
    assert!(report.contains("json.loads"), "{report}");

    // The unanswerable question: the honest NoEvidence report, nothing invented.
    assert_eq!(second["id"], json!("zz-nothing"));
    assert_eq!(second["outcome"]["phase"], json!("Failed"), "{eval:#}");
    assert_eq!(second["outcome"]["reason"], json!("NoEvidence"));
    assert_eq!(second["honest"], json!(true));
    assert_eq!(second["invented"], json!(false));
    assert_eq!(second["keyFacts"], json!(0));
    assert_eq!(second["inputTokens"], json!(800 + 900));

    let totals = &eval["totals"];
    assert_eq!(totals["questions"], json!(2), "{totals:#}");
    assert_eq!(totals["completed"], json!(1));
    assert_eq!(totals["noEvidence"], json!(1));
    assert_eq!(totals["failed"], json!(0));
    assert_eq!(totals["answerable"], json!(1));
    assert_eq!(totals["allFactsFound"], json!(1));
    assert_eq!(totals["allFactsShare"], json!(1.0));
    assert_eq!(totals["meanFactShare"], json!(1.0));
    assert_eq!(totals["noAnswer"], json!(1));
    assert_eq!(totals["honest"], json!(1));
    assert_eq!(totals["invented"], json!(0));
    assert_eq!(totals["inventedUrls"], json!(1));
    assert_eq!(totals["inputTokens"], json!(9200 + 1700));
    assert_eq!(totals["outputTokens"], json!(213 + 40));

    // The table on stdout, one progress line per question on stderr.
    let row = |id: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("no row for {id}: {stdout}"))
            .to_string()
    };
    assert!(stdout.starts_with("system: quarry\nID "), "{stdout}");
    let json_row = row("py-json-decode");
    assert!(
        json_row.contains("Completed") && json_row.contains("1/1"),
        "{json_row}"
    );
    let nothing_row = row("zz-nothing");
    assert!(
        nothing_row.contains("Failed(NoEvidence)") && nothing_row.contains("honest"),
        "{nothing_row}"
    );
    assert!(stdout.contains("no-answer: 1/1 honest"), "{stdout}");
    assert!(stderr.contains("[1/2] py-json-decode … "), "{stderr}");
    assert!(stderr.contains("1/1 facts"), "{stderr}");
    assert!(stderr.contains("[2/2] zz-nothing … "), "{stderr}");
    assert!(!stderr.contains("sk-test-secret-123"));
    for id in ["py-json-decode", "zz-nothing"] {
        assert_eq!(
            read_json(&results.join(format!("results/{id}.json")))["id"],
            json!(id)
        );
    }

    // A rerun skips both (no model call) and reports the same scores.
    let calls = model.recorded().len();
    let again = quarry_eval(&dir.0, &profile, &questions).await;
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(stderr.contains("[1/2] py-json-decode skipped"), "{stderr}");
    assert!(stderr.contains("[2/2] zz-nothing skipped"), "{stderr}");
    assert_eq!(
        model.recorded().len(),
        calls,
        "a resumed eval calls no model"
    );
    let rerun = read_json(&results.join("eval.json"));
    assert_eq!(rerun["results"], eval["results"]);
    assert_eq!(rerun["totals"], eval["totals"]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), stdout);
}
