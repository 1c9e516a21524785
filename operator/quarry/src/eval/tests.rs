//! Tests of the eval shell: `--external` scoring and `--judge` against a tiny HTTP server on
//! 127.0.0.1 that serves the cited pages and answers as an OpenAI-compatible judge.

use super::*;
use crate::config::{Layer, Origin};
use axum::Json;
use axum::routing::{get, post};
use std::sync::atomic::{AtomicUsize, Ordering};

const JSON_PAGE: &str = r#"<!DOCTYPE html><html><head><title>json — JSON encoder and decoder</title></head>
<body><div class="body" role="main"><h1>json — JSON encoder and decoder</h1>
<p>Deserialize s (a str, bytes or bytearray instance containing a JSON document) to a Python object using this conversion table. The json.loads function is the usual way to parse JSON text held in a string.</p>
<p>If the data being deserialized is not a valid JSON document, a JSONDecodeError will be raised.</p>
</div></body></html>"#;

/// A local server: `/doc/json.html`, a 404 for anything else, and a judge that says `stated`
/// for facts mentioning json.loads and not otherwise, counting its calls.
async fn server(calls: Arc<AtomicUsize>) -> String {
    let judge = move |Json(body): Json<Value>| {
        let calls = calls.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let user = body["messages"][1]["content"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let fact = user.lines().next().unwrap_or("");
            let answer = if fact.contains("json.loads") {
                "{\"stated\": true}"
            } else {
                "{\"stated\": false}"
            };
            Json(serde_json::json!({
                "model": "judge",
                "choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 6}
            }))
        }
    };
    let app = axum::Router::new()
        .route(
            "/doc/json.html",
            get(|| async { axum::response::Html(JSON_PAGE) }),
        )
        .route("/v1/chat/completions", post(judge));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}")
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("quarry-eval-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const QUESTIONS: &str = r#"{"id": "py-json-decode", "question": "How do I decode JSON in Python?", "keyFacts": [{"fact": "json.loads decodes a str", "match": ["json.loads"]}, {"fact": "invalid input raises JSONDecodeError", "match": ["jsondecodeerror"]}]}
{"id": "py-late", "question": "What does pickle.dumps return?", "keyFacts": [{"fact": "a bytes object", "match": ["bytes object"]}]}"#;

fn profile(base: &str) -> String {
    format!(
        "apiVersion: quarry.dev/v1alpha1\nkind: ResearchProfile\nmetadata:\n  name: judge\nspec:\n  models:\n    primary:\n      baseURL: \"{base}/v1\"\n      model: judge\n      jsonMode: true\n      stream: false\n      maxRetries: 0\n      contextWindow: 4096\n      maxOutputTokens: 256\n  search:\n    url: \"{base}\"\n"
    )
}

fn settings(profile: Option<PathBuf>) -> Settings {
    let s = Settings::resolve(&[(Origin::Default, Layer::defaults())]).unwrap();
    Settings { profile, ..s }
}

fn args(questions: PathBuf) -> EvalArgs {
    EvalArgs {
        questions,
        profile: None,
        out: PathBuf::from("unused"),
        mode: None,
        limit: None,
        only: Vec::new(),
        fresh: false,
        rescore: false,
        timeout: None,
        max_cost_usd: None,
        judge: false,
        judge_profile: None,
        judge_claims_only: false,
        external: None,
        system: None,
    }
}

#[tokio::test]
async fn external_reports_are_scored_with_fetched_pages_and_judged_once() {
    let calls = Arc::new(AtomicUsize::new(0));
    let base = server(calls.clone()).await;
    let tmp = Scratch::new("external");
    let questions = tmp.write("questions.jsonl", QUESTIONS);
    let judge_profile = tmp.write("judge.yaml", &profile(&base));
    let json = format!("{base}/doc/json.html");
    let gone = format!("{base}/doc/pickle.html");
    tmp.write(
        "peer/reports/py-json-decode.md",
        &format!(
            "# Decoding JSON\n\nUse json.loads to deserialize a str instance containing a JSON document to a Python object ([json]({json}#json.loads)).\nPickle serializes Python object structures into binary protocols ([pickle]({gone})).\nThe json module parses documents faster than any other language ([blog](https://blog.example/json)).\n\n## References\n\n- [json]({json})\n"
        ),
    );
    tmp.write(
        "peer/runs/py-json-decode.json",
        &format!(
            r#"{{"id": "py-json-decode", "outcome": "completed", "seconds": 12.5, "inputTokens": 4000, "outputTokens": null, "fetchedUrls": ["{json}"], "searchedUrls": ["{gone}"], "error": null}}"#
        ),
    );
    let dir = tmp.0.join("peer");
    let mut a = args(questions);
    a.external = Some(dir.clone());
    a.system = Some("gpt-researcher".into());
    a.judge = true;
    a.judge_profile = Some(judge_profile);
    let table = eval(&a, settings(None)).await.unwrap();
    assert!(table.starts_with("system: gpt-researcher\n"), "{table}");
    assert!(table.contains("Failed(NotFinished)"), "{table}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("eval.json")).unwrap()).unwrap();
    assert_eq!(doc["system"], "gpt-researcher");
    let t = &doc["totals"];
    assert_eq!(
        (t["completed"].as_u64(), t["failed"].as_u64()),
        (Some(1), Some(1))
    );
    // Claims: json (supported by the served page), pickle (404: unsupported), blog (invented,
    // not on this machine: unsupported).
    assert_eq!(
        (t["supportedClaims"].as_u64(), t["claims"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(
        (t["citedFetched"].as_u64(), t["citedUrls"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(t["inventedUrls"], 1);
    assert_eq!(t["inputTokens"], 4000);
    // Judge: json.loads yes (agrees), JSONDecodeError no (agrees); the unfinished question's
    // fact is a no without a call.
    assert_eq!(t["keyFactsJudged"], 1);
    assert_eq!(t["judgedFacts"], 3);
    assert_eq!(t["judgeAgreement"], 3);
    assert_eq!(t["judgeSpend"]["calls"], 2);
    assert_eq!(t["judgeSpend"]["inputTokens"], 240);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let r = &doc["results"][0];
    assert_eq!(r["facts"][0]["judge"], "yes");
    assert_eq!(r["facts"][1]["judge"], "no");
    assert_eq!(
        r["inputTokens"], 4000,
        "the judge's tokens are not the run's"
    );

    // A rerun reuses the judged result; the unfinished question is looked at again.
    eval(&a, settings(None)).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    tmp.write(
        "peer/reports/py-late.md",
        "pickle.dumps returns the pickled representation as a bytes object.",
    );
    tmp.write(
        "peer/runs/py-late.json",
        r#"{"id": "py-late", "outcome": "timeout", "seconds": 600}"#,
    );
    let table = eval(&a, settings(None)).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(table.contains("1 runaways"), "{table}");
    let late: QuestionResult =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results/py-late.json")).unwrap())
            .unwrap();
    assert!(late.runaway);
    assert_eq!(late.key_facts_found, 1);
    assert_eq!(late.facts[0].judge, Some(Verdict::No));
}

#[tokio::test]
async fn results_on_disk_are_judged_without_running_the_research_again() {
    let calls = Arc::new(AtomicUsize::new(0));
    let base = server(calls.clone()).await;
    let tmp = Scratch::new("rejudge");
    let questions = tmp.write("questions.jsonl", QUESTIONS);
    let profile = tmp.write("profile.yaml", &profile(&base));
    let report = "# How do I decode JSON in Python?\n\nCall json.loads on the string.\n\n## Sources\n\n1. [JSONDecodeError](http://x/)\n";
    tmp.write("out/state/py-json-decode/report.md", report);
    let qs = parse_questions(QUESTIONS).unwrap();
    let f =
        serde_json::json!({"aborted": false, "usage": {"inputTokens": 9000, "outputTokens": 300}});
    let r = score(
        &qs[0],
        &FinishedRun {
            outcome: Some(Outcome::completed()),
            report: Some(report),
            findings: Some(&f),
            spend: Spend::from_findings(&f),
            wall_seconds: 80.0,
            report_path: None,
        },
    );
    assert_eq!(r.facts[0].judge, None);
    tmp.write(
        "out/results/py-json-decode.json",
        &serde_json::to_string(&r).unwrap(),
    );
    let mut a = args(questions);
    a.only = vec!["py-json-decode".into()];
    a.out = tmp.0.join("out");
    a.judge = true;
    let table = eval(&a, settings(Some(profile))).await.unwrap();
    assert!(table.contains("JUDGE"), "{table}");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "two facts judged, no research run"
    );
    let back: QuestionResult = serde_json::from_str(
        &std::fs::read_to_string(tmp.0.join("out/results/py-json-decode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(back.facts[0].judge, Some(Verdict::Yes));
    // The generated Sources section is not shown to the judge either.
    assert_eq!(back.facts[1].judge, Some(Verdict::No));
    assert_eq!((back.input_tokens, back.output_tokens), (9000, 300));
    assert_eq!(back.judge_spend.map(|s| s.input_tokens), Some(240));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.0.join("out/eval.json")).unwrap())
            .unwrap();
    assert_eq!(doc["system"], "quarry");
    assert!(
        doc["judgeProfile"]
            .as_str()
            .unwrap()
            .ends_with("profile.yaml")
    );
    // Judged once: a rerun calls nothing.
    eval(&a, settings(Some(tmp.0.join("profile.yaml"))))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // --rescore matches the stored report again (here changed to name the error) and runs
    // nothing: no research, no judge.
    tmp.write(
        "out/state/py-json-decode/report.md",
        "# How do I decode JSON in Python?\n\nCall json.loads; bad input raises `JSONDecodeError`.\n",
    );
    a.judge = false;
    a.rescore = true;
    eval(&a, settings(Some(tmp.0.join("profile.yaml"))))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let back: QuestionResult = serde_json::from_str(
        &std::fs::read_to_string(tmp.0.join("out/results/py-json-decode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(back.key_facts_found, 2);
    assert_eq!(back.facts[1].judge, Some(Verdict::No));
    assert_eq!((back.input_tokens, back.output_tokens), (9000, 300));
}

#[tokio::test]
async fn cited_claims_are_judged_against_their_fetched_pages_and_disagreements_listed() {
    let calls = Arc::new(AtomicUsize::new(0));
    let base = server(calls.clone()).await;
    let tmp = Scratch::new("claims");
    let questions = tmp.write("questions.jsonl", QUESTIONS);
    let profile = tmp.write("profile.yaml", &profile(&base));
    let page = format!("{base}/doc/json.html");
    let report = format!(
        "# How do I decode JSON in Python?\n\n## Summary\n\njson.loads parses a string ([json]({page})).\n"
    );
    tmp.write("out/state/py-json-decode/report.md", &report);
    // The run's own check: the first claim unsupported, the second supported.
    let findings = serde_json::json!({
        "aborted": false,
        "claims": [
            {"claim": "json.loads parses a string.", "url": format!("{page}#json.loads"), "supported": false},
            {"claim": "pickle.dumps writes a file.", "url": page, "supported": true}
        ]
    });
    tmp.write(
        "out/state/py-json-decode/findings.json",
        &findings.to_string(),
    );
    let qs = parse_questions(QUESTIONS).unwrap();
    let r = score(
        &qs[0],
        &FinishedRun {
            outcome: Some(Outcome::completed()),
            report: Some(&report),
            findings: Some(&findings),
            spend: Spend::default(),
            wall_seconds: 10.0,
            report_path: None,
        },
    );
    tmp.write(
        "out/results/py-json-decode.json",
        &serde_json::to_string(&r).unwrap(),
    );
    let mut a = args(questions);
    a.only = vec!["py-json-decode".into()];
    a.out = tmp.0.join("out");
    a.judge = true;
    a.judge_claims_only = true;
    let table = eval(&a, settings(Some(profile))).await.unwrap();
    // Two claims judged (the scripted judge says yes to the json.loads one only); no fact.
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let back: QuestionResult = serde_json::from_str(
        &std::fs::read_to_string(tmp.0.join("out/results/py-json-decode.json")).unwrap(),
    )
    .unwrap();
    assert!(back.facts.iter().all(|f| f.judge.is_none()));
    assert_eq!(
        back.claim_verdicts
            .iter()
            .map(|c| c.judge)
            .collect::<Vec<_>>(),
        vec![Some(Verdict::Yes), Some(Verdict::No)]
    );
    assert!(
        table.contains("precision by the judge 0.50 (1/2 claims, 0 of them word for word on their page), by the run's check 0.50 on the same claims; 2 disagreements"),
        "{table}"
    );
    assert!(
        table.contains("py-json-decode: run check not supported, judge supported: \"json.loads parses a string.\""),
        "{table}"
    );
    assert!(
        table.contains(
            "py-json-decode: run check supported, judge not: \"pickle.dumps writes a file.\""
        ),
        "{table}"
    );
    // Judged once: a rerun calls nothing.
    eval(&a, settings(Some(tmp.0.join("profile.yaml"))))
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn only_pages_on_this_machine_are_fetched() {
    assert!(fetchable(
        "http://127.0.0.1:8080/python3.11-doc/html/library/json.html"
    ));
    assert!(fetchable("http://localhost/x"));
    assert!(fetchable("https://127.0.0.1"));
    assert!(!fetchable("https://docs.python.org/3/library/json.html"));
    assert!(!fetchable("http://127.0.0.1.evil.example/x"));
    assert!(!fetchable("ftp://127.0.0.1/x"));
}
