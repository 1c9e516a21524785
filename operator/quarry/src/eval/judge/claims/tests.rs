//! Unit tests of the claim judge, with a scripted model.

use super::*;
use crate::eval::score::{FinishedRun, Outcome, Spend, parse_questions, score, totals};
use crate::eval::table::render_table;
use async_trait::async_trait;
use quarry_engine::llm::{ChatResponse, LlmError};
use std::sync::Mutex;

/// Answers each call with the next scripted answer and keeps the requests.
struct Script {
    answers: Mutex<Vec<Result<&'static str, LlmError>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Script {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request);
        let next = self.answers.lock().unwrap().remove(0);
        next.map(|content| ChatResponse {
            content: content.into(),
            usage: Usage {
                input_tokens: 50,
                output_tokens: 4,
                llm_calls: 1,
                ..Usage::default()
            },
            model: "fake".into(),
            ..ChatResponse::default()
        })
    }
    fn context_window(&self) -> u64 {
        8192
    }
}

const SETTINGS: JudgeSettings = JudgeSettings {
    context_window: 8192,
    max_output_tokens: 400,
    json_mode: true,
};

const QUESTION: &str = r#"{"id":"q1","kind":"fact","question":"What does json.loads do?","keyFacts":[{"fact":"it decodes","match":["deserialize"]}]}"#;

/// A scored run with two cited claims, the first supported by the run's check, the second not.
fn result() -> QuestionResult {
    let q = &parse_questions(QUESTION).unwrap()[0];
    let findings = serde_json::json!({
        "claims": [
            {"claim": "json.loads deserializes a str to a Python object.", "url": "http://127.0.0.1:1/json.html#json.loads", "supported": true},
            {"claim": "json.loads writes files.", "url": "http://127.0.0.1:1/gone.html", "supported": false}
        ]
    });
    let report = "# What does json.loads do?\n\n## Summary\n\njson.loads deserializes a str.\n";
    let mut r = score(
        q,
        &FinishedRun {
            outcome: Some(Outcome::completed()),
            report: Some(report),
            findings: Some(&findings),
            spend: Spend::default(),
            wall_seconds: 1.0,
            report_path: None,
        },
    );
    r.claim_verdicts = merge_claims(&r, findings_claims(&findings));
    r
}

fn pages() -> BTreeMap<String, PageText> {
    let mut pages = BTreeMap::new();
    pages.insert(
        page_key("http://127.0.0.1:1/json.html"),
        PageText {
            title: "json — JSON encoder and decoder".into(),
            text: "Deserialize s (a str, bytes or bytearray instance containing a JSON document) to a Python object using this conversion table. Other text.".into(),
        },
    );
    pages
}

#[tokio::test]
async fn each_claim_is_judged_against_its_page_and_disagreements_are_printed() {
    let mut r = result();
    assert_eq!(r.claims, 2);
    assert!(needs_claim_judge(&r));
    // The judge says no to a claim the run's check supported: a disagreement.
    let model = Script {
        answers: Mutex::new(vec![Ok("{\"supported\": false}")]),
        requests: Mutex::new(Vec::new()),
    };
    let failed = judge_claims(&model, &SETTINGS, &mut r, &pages(), &BTreeSet::new()).await;
    assert_eq!(failed, 0);
    // One call: the second claim's page was never read, which supports nothing without a call.
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    let prompt = &requests[0].messages[1].content;
    assert!(
        prompt.contains("Claim: json.loads deserializes"),
        "{prompt}"
    );
    assert!(prompt.contains("Deserialize s (a str"), "{prompt}");
    assert_eq!(
        r.claim_verdicts.iter().map(|c| c.judge).collect::<Vec<_>>(),
        vec![Some(Verdict::No), Some(Verdict::No)]
    );
    assert!(!needs_claim_judge(&r));
    assert_eq!(r.judge_spend.unwrap().calls, 1);

    let t = totals(std::slice::from_ref(&r));
    assert_eq!(t.judged_claims, 2);
    assert_eq!(t.judge_supported_claims, 0);
    assert_eq!(t.run_supported_of_judged, 1);
    assert_eq!(t.claim_disagreements, 1);
    assert_eq!(t.judge_precision, Some(0.0));
    let lines = disagreement_lines(std::slice::from_ref(&r));
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("q1: run check supported, judge not:"),
        "{}",
        lines[0]
    );
    let table = render_table("quarry", std::slice::from_ref(&r), &t);
    assert!(
        table.contains("precision by the judge 0.00 (0/2 claims, 0 of them word for word on their page), by the run's check 0.50 on the same claims; 1 disagreement"),
        "{table}"
    );
    assert!(table.contains(&lines[0]), "{table}");
}

#[tokio::test]
async fn a_failed_call_leaves_the_claim_for_the_next_run_and_verdicts_are_kept() {
    let mut r = result();
    let model = Script {
        answers: Mutex::new(vec![Err(LlmError::Timeout { seconds: 1 })]),
        requests: Mutex::new(Vec::new()),
    };
    assert_eq!(
        judge_claims(&model, &SETTINGS, &mut r, &pages(), &BTreeSet::new()).await,
        1
    );
    assert_eq!(r.claim_verdicts[0].judge, None);
    assert!(needs_claim_judge(&r));
    // A rerun lists the claims again from the findings: the verdict already given stays.
    let again = merge_claims(&r, r.claim_verdicts.clone());
    assert_eq!(again[1].judge, Some(Verdict::No));
    assert_eq!(again[0].judge, None);
}

#[test]
fn the_source_is_cut_to_the_sentences_about_the_claim() {
    let filler = "Unrelated sentence about sockets and threads. ".repeat(100);
    let page = PageText {
        title: "json".into(),
        text: format!("{filler}json.loads deserializes a str to a Python object. {filler}"),
    };
    let claim = "json.loads deserializes a str.";
    let text = source_text(&SETTINGS, claim, &page);
    assert!(text.chars().count() <= CLAIM_PASSAGE_CHARS);
    assert!(
        text.contains("json.loads deserializes a str to a Python object."),
        "{text}"
    );
}

#[test]
fn supported_answers_are_read_tolerantly() {
    assert_eq!(
        parse_verdict_as("{\"supported\": true}", "supported"),
        Verdict::Yes
    );
    assert_eq!(parse_verdict_as("supported: no", "supported"), Verdict::No);
    assert_eq!(
        parse_verdict_as("{\"stated\": true}", "supported"),
        Verdict::Yes
    );
}

/// A rerun of the judge after the docs server had stopped judged every claim "no" without a
/// call (precision 0.00): a page whose server does not answer leaves its claims unjudged.
#[tokio::test]
async fn a_claim_whose_page_cannot_be_reached_stays_unjudged() {
    let mut r = result();
    let model = Script {
        answers: Mutex::new(vec![]),
        requests: Mutex::new(Vec::new()),
    };
    let unreachable: BTreeSet<String> = r.claim_verdicts.iter().map(|c| page_key(&c.url)).collect();
    let failed = judge_claims(&model, &SETTINGS, &mut r, &pages(), &unreachable).await;
    assert_eq!(failed, r.claim_verdicts.len());
    assert!(r.claim_verdicts.iter().all(|c| c.judge.is_none()));
    assert!(model.requests.lock().unwrap().is_empty());
    assert!(needs_claim_judge(&r));
}

/// The 1.5B judge, shown a copied sentence without the entry it belongs to, said "no" to
/// sentences the page states word for word. A copy is judged yes without a call; a claim that
/// changes one word, or labels a quote with a name the page lacks, still goes to the model.
#[test]
fn a_claim_the_page_states_word_for_word_needs_no_call() {
    let page = PageText {
        title: "math — Mathematical functions".into(),
        text: "*abs_tol* must be at least zero. If no errors occur, the result will be:\n`abs(a-b) <= max(rel_tol * max(abs(a), abs(b)), abs_tol)`.\n\nconcurrently\n: This option may be faster in cases where a small number of rows are affected.".into(),
    };
    assert!(states_verbatim("abs_tol* must be at least zero.", &page));
    assert!(states_verbatim(
        "“If no errors occur, the result will be …”.",
        &page
    ));
    assert!(states_verbatim(
        "concurrently: “This option may be faster in cases where a small number of rows are affected”.",
        &page
    ));
    assert!(!states_verbatim("abs_tol* must be at least one.", &page));
    assert!(!states_verbatim(
        "work_mem: “This option may be faster in cases where a small number of rows are affected”.",
        &page
    ));
    // Too short to be a copy of anything in particular.
    assert!(!states_verbatim("must be at", &page));
}

#[tokio::test]
async fn copies_are_judged_yes_without_a_call_and_counted() {
    let mut r = result();
    let copy = "to a Python object using this conversion table.";
    r.claim_verdicts[0].claim = copy.into();
    let model = Script {
        answers: Mutex::new(vec![]),
        requests: Mutex::new(Vec::new()),
    };
    let failed = judge_claims(&model, &SETTINGS, &mut r, &pages(), &BTreeSet::new()).await;
    assert_eq!(failed, 0);
    assert!(model.requests.lock().unwrap().is_empty());
    assert_eq!(r.claim_verdicts[0].judge, Some(Verdict::Yes));
    assert!(r.claim_verdicts[0].verbatim);
    let t = totals(std::slice::from_ref(&r));
    assert_eq!(t.verbatim_claims, 1);
    let table = render_table("quarry", std::slice::from_ref(&r), &t);
    assert!(
        table.contains("1 of them word for word on their page"),
        "{table}"
    );
}

#[test]
fn a_claim_is_falsified_by_its_last_number_standing_alone() {
    let page = PageText {
        title: "functools".into(),
        text: "@functools.lru_cache(maxsize=128, typed=False). Python 3.11 keeps 259 entries."
            .into(),
    };
    // 128 → 259 is on the page; the next candidate is not.
    assert_eq!(
        falsified("The default maxsize of functools.lru_cache is 128.", &page).as_deref(),
        Some("The default maxsize of functools.lru_cache is 391.")
    );
    // Versions, names holding digits and grouped numbers are not numbers standing alone.
    assert_eq!(falsified("It was added in Python 3.11.", &page), None);
    assert_eq!(falsified("serial is equivalent to serial4.", &page), None);
    assert_eq!(falsified("A table holds 1,600 columns.", &page), None);
    assert_eq!(falsified("It returns a dict.", &page), None);
    assert_eq!(
        falsified("serial4 holds up to 2147483647 in PostgreSQL 15.", &page).as_deref(),
        Some("serial4 holds up to 2147483647 in PostgreSQL 33.")
    );
}

#[tokio::test]
async fn one_falsified_claim_per_question_controls_the_judge() {
    let q = &parse_questions(QUESTION).unwrap()[0];
    let findings = serde_json::json!({
        "claims": [
            {"claim": "json.loads deserializes a str to a Python object.", "url": "http://127.0.0.1:1/json.html", "supported": true},
            {"claim": "json.loads reads documents of up to 64 levels.", "url": "http://127.0.0.1:1/json.html", "supported": true}
        ]
    });
    let mut r = score(
        q,
        &FinishedRun {
            outcome: Some(Outcome::completed()),
            report: Some("# q\n\n## Summary\n\nx.\n"),
            findings: Some(&findings),
            spend: Spend::default(),
            wall_seconds: 1.0,
            report_path: None,
        },
    );
    r.claim_verdicts = merge_claims(&r, findings_claims(&findings));
    // Both claims judged yes; the control (64 → 131) too: the judge failed its control.
    let model = Script {
        answers: Mutex::new(vec![
            Ok("{\"supported\": true}"),
            Ok("{\"supported\": true}"),
            Ok("{\"supported\": true}"),
        ]),
        requests: Mutex::new(Vec::new()),
    };
    judge_claims(&model, &SETTINGS, &mut r, &pages(), &BTreeSet::new()).await;
    {
        let requests = model.requests.lock().unwrap();
        assert_eq!(requests.len(), 3);
        let control_prompt = &requests[2].messages[1].content;
        assert!(
            control_prompt.contains("Claim: json.loads reads documents of up to 131 levels."),
            "{control_prompt}"
        );
    }
    let control = r.judge_control.clone().unwrap();
    assert_eq!(control.judge, Some(Verdict::Yes));
    let t = totals(std::slice::from_ref(&r));
    assert_eq!((t.judge_controls, t.judge_controls_rejected), (1, 0));
    assert_eq!(t.judged_claims, 2, "the control is no claim of the run");
    let table = render_table("quarry", std::slice::from_ref(&r), &t);
    assert!(
        table.contains("judge controls: the judge rejected 0/1 claims falsified"),
        "{table}"
    );
    // Judged again, the control is not asked twice.
    judge_claims(&model, &SETTINGS, &mut r, &pages(), &BTreeSet::new()).await;
    assert_eq!(model.requests.lock().unwrap().len(), 3);
}
