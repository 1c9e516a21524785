//! Unit tests of `score`.

use super::*;
use crate::eval::table::*;
use serde_json::json;

const SET: &str = r#"
{"id": "py-json-decode", "kind": "fact", "question": "How do I decode JSON?", "expect": "answer", "keyFacts": [{"fact": "json.loads decodes", "match": ["json.loads", "loads("], "page": "p/json.html", "quote": "q"}, {"fact": "errors raise", "match": ["JSONDecodeError"], "page": "p/json.html", "quote": "q"}], "pages": ["p/json.html"], "reviewer": "extra fields are fine"}

{"id": "sqlalchemy-pool", "kind": "no-answer", "question": "What is SQLAlchemy's default pool size?", "expect": "no-answer", "keyFacts": [], "pages": [], "absentTerms": ["sqlalchemy"]}
"#;

fn questions() -> Vec<Question> {
    parse_questions(SET).unwrap()
}

fn findings(claims: &[bool], cited: &[&str], fetched: &[&str], removed: usize) -> Value {
    let claims: Vec<Value> = claims
        .iter()
        .map(|s| json!({"claim": "c", "url": "http://h/a", "supported": s}))
        .collect();
    let precision = (!claims.is_empty()).then(|| {
        claims
            .iter()
            .filter(|c| c["supported"] == json!(true))
            .count() as f64
            / claims.len() as f64
    });
    json!({
        "aborted": false,
        "partial": false,
        "claims": claims,
        "citationPrecision": precision,
        "citedUrls": cited,
        "researcherReports": [{"taskId": 0, "fetched": fetched.iter().map(|u| json!({"url": u, "title": "t"})).collect::<Vec<_>>()}],
        "unverifiedReferences": (0..removed).map(|i| format!("http://x/{i}")).collect::<Vec<_>>(),
        "usage": {"inputTokens": 10, "outputTokens": 2, "costUSD": "0.000125"},
    })
}

fn finished<'a>(outcome: Outcome, report: &'a str, f: &'a Value) -> FinishedRun<'a> {
    FinishedRun {
        outcome: Some(outcome),
        report: Some(report),
        findings: Some(f),
        spend: Spend::from_findings(f),
        wall_seconds: 41.26,
        report_path: None,
    }
}

#[test]
fn question_lines_parse_with_extra_fields_blank_lines_and_defaults() {
    let qs = questions();
    assert_eq!(qs.len(), 2);
    assert_eq!(qs[0].expects(), Expect::Answer);
    assert_eq!(qs[0].key_facts[0].matches, vec!["json.loads", "loads("]);
    assert_eq!(qs[1].expects(), Expect::NoAnswer);
    // expect defaults from kind.
    let q = parse_questions(r#"{"id": "a", "kind": "no-answer", "question": "q?"}"#).unwrap();
    assert_eq!(q[0].expects(), Expect::NoAnswer);
}

#[test]
fn bad_lines_are_named() {
    let dup = format!("{}\n{}", SET.trim(), SET.trim().lines().next().unwrap());
    assert!(parse_questions(&dup).unwrap_err().contains("used twice"));
    let err =
        parse_questions("{\"id\": \"a\", \"question\": \"q\", \"expect\": \"maybe\"}").unwrap_err();
    assert!(err.starts_with("line 1:"), "{err}");
    let err =
        parse_questions(r#"{"id": "../x", "question": "q", "expect": "no-answer"}"#).unwrap_err();
    assert!(err.contains("names a file"), "{err}");
    let err = parse_questions(
        r#"{"id": "a", "question": "q", "keyFacts": [{"fact": "f", "match": [" "]}]}"#,
    )
    .unwrap_err();
    assert!(err.contains("no match strings"), "{err}");
    assert!(parse_questions(r#"{"id": "a", "question": "q"}"#).is_err());
    assert!(parse_questions("\n\n").is_err());
}

#[test]
fn the_real_question_set_parses() {
    let text = include_str!("../../../../../tests/eval/questions.jsonl");
    let qs = parse_questions(text).unwrap();
    assert!(qs.len() >= 40);
    assert!(
        qs.iter()
            .filter(|q| q.expects() == Expect::NoAnswer)
            .count()
            >= 4
    );
}

#[test]
fn only_and_limit_select_in_file_order() {
    let picked = select(questions(), &["sqlalchemy-pool".into()], None).unwrap();
    assert_eq!(picked.len(), 1);
    assert_eq!(picked[0].id, "sqlalchemy-pool");
    let picked = select(questions(), &[], Some(1)).unwrap();
    assert_eq!(picked[0].id, "py-json-decode");
    let err = select(questions(), &["nope".into()], None).unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn markdown_code_and_escapes_do_not_hide_a_fact() {
    // The 1.5B model's report on ExceptionGroup wrote the names as code.
    let body = normalise(
        "`BaseExceptionGroup` extends `BaseException` and it can wrap any exception; rel\\_tol=1e-09.",
    );
    assert!(holds(&body, "extends baseexception"), "{body}");
    assert!(holds(&body, "rel_tol=1e-09"), "{body}");
    // A match string ending in a backtick asks for the whole name.
    assert!(holds(
        &normalise("Call `json.load` on the file."),
        "json.load`"
    ));
    assert!(holds(&normalise("json.load"), "json.load`"));
    assert!(!holds(&normalise("Call `json.loads(s)`."), "json.load`"));
    assert!(!holds(&normalise("anything"), "``"));
}

#[test]
fn rematching_recounts_the_facts_and_keeps_the_verdicts() {
    let q = parse_questions(
        r#"{"id": "g", "question": "How does BaseExceptionGroup differ from ExceptionGroup?", "expect": "answer", "keyFacts": [{"fact": "base", "match": ["extends baseexception"], "page": "p", "quote": "q"}, {"fact": "other", "match": ["only wrap exception"], "page": "p", "quote": "q"}], "pages": ["p"]}"#,
    )
    .unwrap()
    .remove(0);
    let old = "## Summary\n\n`BaseExceptionGroup` extends `BaseException`.\n";
    let f = findings(&[true], &["http://h/a"], &["http://h/a"], 0);
    let mut r = score(&q, &finished(Outcome::completed(), old, &f));
    r.facts[0].found = false;
    r.key_facts_found = 0;
    r.facts[0].judge = Some(Verdict::Yes);
    r.key_facts_judged = Some(1);
    r.judge_agreement = Some(0);
    rematch(&q, Some(old), &mut r);
    assert_eq!((r.key_facts_found, r.key_facts_stated), (1, 1));
    assert_eq!(r.facts[0].judge, Some(Verdict::Yes));
    assert_eq!(r.judge_agreement, Some(1));
    rematch(&q, None, &mut r);
    assert_eq!(r.key_facts_found, 0);
}

#[test]
fn facts_match_after_lowercasing_and_collapsing_whitespace() {
    assert_eq!(normalise("  Read\n\tCommitted  IS "), "read committed is");
    let qs = questions();
    let f = findings(&[true], &["http://h/a"], &["http://h/a"], 0);
    let report = "# How do I decode JSON?\n\nUse `JSON.loads` to parse.\n\n## Sources\n\n1. [JSONDecodeError docs](http://h/a)\n";
    let r = score(&qs[0], &finished(Outcome::completed(), report, &f));
    assert_eq!((r.key_facts_found, r.key_facts), (1, 2));
    assert_eq!(r.facts[0].matched.as_deref(), Some("json.loads"));
    // The generated Sources section does not count.
    assert!(!r.facts[1].found);
    let report = "Bad input raises\n   JSONDecodeError; loads(s) parses.";
    let r = score(&qs[0], &finished(Outcome::completed(), report, &f));
    assert_eq!((r.key_facts_found, r.key_facts), (2, 2));
    assert_eq!(r.facts[0].matched.as_deref(), Some("loads("));
    assert_eq!(r.honest, None);
}

#[test]
fn the_generated_title_does_not_count_but_the_body_does() {
    let q = &parse_questions(
            r#"{"id": "t", "question": "Is lru_cache(maxsize=None) unbounded?", "keyFacts": [{"fact": "f", "match": ["lru_cache(maxsize=none)"]}]}"#,
        )
        .unwrap()[0];
    let f = findings(&[], &[], &[], 0);
    let r = score(
        q,
        &finished(
            Outcome::completed(),
            "# Is lru_cache(maxsize=None)   unbounded?\n\nYes.",
            &f,
        ),
    );
    assert_eq!(r.key_facts_found, 0);
    let r = score(
        q,
        &finished(
            Outcome::completed(),
            "# Caching\n\n`lru_cache(maxsize=None)` grows without bound.",
            &f,
        ),
    );
    assert_eq!(r.key_facts_found, 1);
}

#[test]
fn an_aborted_report_scores_no_facts_even_if_it_restates_the_question() {
    let qs = questions();
    let f = json!({"aborted": true, "claims": [], "citedUrls": []});
    let report = "# Unable to research: json.loads JSONDecodeError\n\n## What was searched\n\n- `json.loads`\n";
    let r = score(
        &qs[0],
        &finished(Outcome::failed("NoEvidence", "none"), report, &f),
    );
    assert_eq!((r.key_facts_found, r.key_facts), (0, 2));
    assert_eq!(r.outcome.label(), "Failed(NoEvidence)");
}

#[test]
fn no_answer_questions_are_honest_when_no_evidence_or_said_and_invented_when_cited() {
    let q = &questions()[1];
    let empty = json!({"aborted": true, "claims": []});
    let r = score(
        q,
        &finished(Outcome::failed("NoEvidence", "none"), "# Unable", &empty),
    );
    assert_eq!((r.honest, r.invented), (Some(true), Some(false)));
    assert_eq!(facts_cell(&r), "honest");

    let f = findings(&[], &[], &["http://h/a"], 0);
    let said = "The sources I read DON’T  mention SQLAlchemy at all.";
    let r = score(q, &finished(Outcome::completed(), said, &f));
    assert_eq!((r.honest, r.invented), (Some(true), Some(false)));

    let f = findings(&[true, false], &["http://h/a"], &["http://h/a"], 1);
    let made_up = "The default pool size is 5 ([docs](http://h/a)).";
    let r = score(q, &finished(Outcome::completed(), made_up, &f));
    assert_eq!((r.honest, r.invented), (Some(false), Some(true)));
    assert_eq!(facts_cell(&r), "invented");
    assert_eq!(r.key_facts, 0);

    let r = score(
        q,
        &finished(
            Outcome::failed("ModelUnreachable", "down"),
            "",
            &Value::Null,
        ),
    );
    assert_eq!((r.honest, r.invented), (Some(false), Some(false)));
    assert_eq!(facts_cell(&r), "answered");
}

#[test]
fn citation_counts_come_from_findings_json() {
    let qs = questions();
    let f = findings(
        &[true, true, false],
        &["http://h/a", "http://h/seen/"],
        &["http://h/a/", "http://h/b"],
        2,
    );
    let r = score(&qs[0], &finished(Outcome::completed(), "json.loads", &f));
    assert_eq!(
        (r.claims, r.supported_claims, r.unsupported_claims),
        (3, 2, 1)
    );
    assert!((r.citation_precision.unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!((r.cited_fetched, r.cited_urls), (1, 2));
    assert_eq!(r.removed_citations, 2);
    assert_eq!((r.input_tokens, r.output_tokens), (10, 2));
    assert_eq!(r.cost_usd, "0.000125");
    assert_eq!(r.cost_pico_usd, 125_000_000);
    assert_eq!(r.wall_seconds, 41.3);
}

#[test]
fn totals_pool_claims_and_average_fact_shares() {
    let qs = questions();
    let a = score(
        &qs[0],
        &finished(
            Outcome::completed(),
            "json.loads",
            &findings(&[true, false], &[], &[], 1),
        ),
    );
    let b = score(
        &qs[0],
        &finished(
            Outcome::completed(),
            "json.loads jsondecodeerror",
            &findings(&[true, true, true, true], &[], &[], 0),
        ),
    );
    let c = score(
        &qs[1],
        &finished(
            Outcome::failed("NoEvidence", "none"),
            "",
            &json!({"aborted": true}),
        ),
    );
    let mut d = c.clone();
    d.outcome = Outcome::failed("ModelUnreachable", "down");
    d.honest = Some(false);
    let t = totals(&[a, b, c, d]);
    assert_eq!(
        (t.questions, t.completed, t.no_evidence, t.failed),
        (4, 2, 1, 1)
    );
    assert_eq!((t.answerable, t.all_facts_found), (2, 1));
    assert_eq!(t.all_facts_share, Some(0.5));
    assert_eq!(t.mean_fact_share, Some(0.75));
    assert_eq!((t.key_facts_found, t.key_facts), (3, 4));
    assert_eq!((t.no_answer, t.honest, t.invented), (2, 1, 0));
    // Pooled over claims (5/6), not the mean of per-question precisions (0.75).
    assert_eq!((t.supported_claims, t.claims), (5, 6));
    assert_eq!(t.citation_precision, Some(0.833));
    assert_eq!(t.invented_urls, 1);
    assert_eq!(t.input_tokens, 20);
    assert_eq!(t.cost_usd, "0.000250");
    assert_eq!(t.wall_seconds, 165.2);
    let table = render_table("quarry", &[], &t);
    assert!(
        table.contains(
            "answerable: 1/2 with every key fact (50%), mean share of facts found 75%, 3/4 facts"
        ),
        "{table}"
    );
    assert!(
        table.contains("no-answer: 1/2 honest, 0 invented"),
        "{table}"
    );
    assert!(
        table.contains("precision 0.83 (5/6 claims supported)"),
        "{table}"
    );
    assert_eq!(totals(&[]).citation_precision, None);
}

#[test]
fn table_rows_and_progress_lines() {
    let qs = questions();
    let r = score(
        &qs[0],
        &finished(
            Outcome::completed(),
            "json.loads",
            &findings(&[true], &["http://h/a"], &["http://h/a"], 0),
        ),
    );
    let table = render_table(
        "quarry",
        std::slice::from_ref(&r),
        &totals(std::slice::from_ref(&r)),
    );
    let mut lines = table.lines();
    assert_eq!(lines.next(), Some("system: quarry"));
    let header = lines.next().unwrap();
    assert!(header.starts_with("ID   "), "{header}");
    assert!(header.contains("OUTCOME") && header.contains("SECONDS"));
    let row = lines.next().unwrap();
    for cell in [
        "py-json-decode",
        "Completed",
        "1/2",
        "1.00",
        "10/2",
        "$0.000125",
        "41",
    ] {
        assert!(row.contains(cell), "{cell} in {row}");
    }
    assert_eq!(
        progress_line(3, 58, &r),
        "[3/58] py-json-decode … 41 s, 1/2 facts, Completed"
    );
    // A run over five minutes says where the time went: its model calls, from its events.
    let events = concat!(
        r#"{"type":"fetch","durationMs":900}"#,
        "\n",
        r#"{"type":"model_call","durationMs":200000,"inputTokens":800}"#,
        "\nnot json\n",
        r#"{"type":"model_call","durationMs":150400}"#,
        "\n"
    );
    assert_eq!(model_time(events), (2, 350.4));
    let mut slow = r.clone();
    slow.wall_seconds = 361.0;
    (slow.model_calls, slow.model_seconds) = model_time(events);
    assert_eq!(
        progress_line(3, 58, &slow),
        "[3/58] py-json-decode … 361 s, 1/2 facts, Completed; over 5 min: 2 model calls took 350 s (summed)"
    );
}

#[test]
fn resume_skips_ids_with_results_unless_fresh() {
    let qs = questions();
    let r = score(
        &qs[0],
        &finished(
            Outcome::completed(),
            "json.loads",
            &findings(&[], &[], &[], 0),
        ),
    );
    // Results survive the round trip through results/<id>.json.
    let back: QuestionResult = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let done = BTreeMap::from([(r.id.clone(), back)]);
    let plans = plan(&qs, &done, false);
    assert_eq!(plans, vec![Plan::Skip(Box::new(r)), Plan::Run]);
    assert_eq!(plan(&qs, &done, true), vec![Plan::Run, Plan::Run]);
    assert_eq!(
        plan(&qs, &BTreeMap::new(), false),
        vec![Plan::Run, Plan::Run]
    );
}

#[test]
fn outcomes_come_from_the_checkpoint_else_the_error() {
    use quarry_engine::research::machine::state::{Failure, Mode, RunInput};
    let mut s = RunState::new(RunInput::new("q", Mode::Quick));
    s.phase = Phase::Failed;
    s.failure = Some(Failure::new("NoEvidence", "nothing"));
    let err = Err(StandaloneError::Cancelled);
    assert_eq!(Outcome::of(Some(&s), &err).label(), "Failed(NoEvidence)");
    s.phase = Phase::Completed;
    assert_eq!(
        Outcome::of(Some(&s), &Ok(PathBuf::new())),
        Outcome::completed()
    );
    let err = Err(StandaloneError::RunFailed {
        reason: "ModelOutputInvalid".into(),
        message: "garbage".into(),
    });
    assert_eq!(
        Outcome::of(None, &err).label(),
        "Failed(ModelOutputInvalid)"
    );
    assert_eq!(
        Outcome::of(None, &Err(StandaloneError::Cancelled)).label(),
        "Cancelled"
    );
}

#[test]
fn judge_verdicts_are_counted_beside_the_string_match_and_their_spend_apart() {
    let qs = questions();
    let f = findings(&[], &[], &[], 0);
    let mut a = score(&qs[0], &finished(Outcome::completed(), "json.loads", &f));
    // String match: fact 0 found, fact 1 not. Judge: yes, unknown.
    a.facts[0].judge = Some(Verdict::Yes);
    a.facts[1].judge = Some(Verdict::Unknown);
    a.judge_spend = Some(JudgeSpend {
        calls: 2,
        input_tokens: 900,
        output_tokens: 8,
        cost_pico_usd: 0,
    });
    let mut b = score(&qs[0], &finished(Outcome::completed(), "nothing", &f));
    // String match: neither. Judge: yes (a paraphrase), no.
    b.facts[0].judge = Some(Verdict::Yes);
    b.facts[1].judge = Some(Verdict::No);
    let unjudged = score(&qs[0], &finished(Outcome::completed(), "json.loads", &f));
    let t = totals(&[a.clone(), b.clone(), unjudged.clone()]);
    assert_eq!(t.judged_facts, 4);
    assert_eq!(t.key_facts_judged, 2);
    assert_eq!(t.key_facts_found_of_judged, 1);
    assert_eq!(t.judge_agreement, 2);
    assert_eq!(t.judge_unknown, 1);
    assert_eq!(t.judge_spend.calls, 2);
    // The judge's tokens are not the runs' tokens.
    assert_eq!(t.input_tokens, 30);
    assert_eq!(
        (judge_cell(&a), agree_cell(&a)),
        ("1/2".into(), "1/2".into())
    );
    assert_eq!(
        (judge_cell(&b), agree_cell(&b)),
        ("1/2".into(), "1/2".into())
    );
    assert_eq!(
        (judge_cell(&unjudged), agree_cell(&unjudged)),
        ("-".into(), "-".into())
    );
    let table = render_table("quarry", &[a.clone(), b, unjudged], &t);
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.contains("FACTS") && header.contains("JUDGE") && header.contains("AGREE"),
        "{header}"
    );
    assert!(
        table.contains(
            "judge: 2/4 judged facts stated (string match: 1/4), agreement 2/4, 1 unknown"
        ),
        "{table}"
    );
    assert!(
        table
            .contains("judge spend (not in the spend above): 2 calls, 900 input + 8 output tokens"),
        "{table}"
    );
    // Verdicts survive results/<id>.json; a result without them still reads.
    let back: QuestionResult = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
    assert_eq!(back, a);
    let text = serde_json::to_string(&a).unwrap();
    assert!(text.contains(r#""judge":"unknown""#), "{text}");
    // Without any verdict the table has no judge columns.
    let plain = render_table("quarry", &[], &totals(&[]));
    assert!(!plain.contains("JUDGE"), "{plain}");
}

#[test]
fn time_limits_are_runaways_and_not_finished_results_are_scored_again() {
    let qs = questions();
    let f = findings(&[], &[], &[], 0);
    let r = score(
        &qs[0],
        &finished(Outcome::failed("TimeLimit", "10m"), "", &f),
    );
    assert!(r.runaway);
    assert_eq!(totals(std::slice::from_ref(&r)).runaways, 1);
    assert!(!score(&qs[0], &finished(Outcome::completed(), "", &f)).runaway);
    let mut missing = r.clone();
    missing.outcome = Outcome::failed(NOT_FINISHED, "runs/x.json missing");
    let done = BTreeMap::from([(missing.id.clone(), missing)]);
    assert_eq!(plan(&qs[..1], &done, false), vec![Plan::Run]);
}

#[test]
fn a_fact_only_in_a_quoted_passage_is_found_but_not_stated() {
    let body = "## Summary\n\nUse `json.loads()` ([json](http://d/json.html)).\n\n## Evidence\n\n- [json](http://d/json.html):\n\n> If the data is not valid, a JSONDecodeError will be raised.\n";
    assert!(own_words(body).contains("json.loads"));
    assert!(!own_words(body).contains("JSONDecodeError"));
    // Without a Summary section (another system's report), quoted lines are not its words.
    let other = "# Answer\n\njson.loads parses a string.\n\n> JSONDecodeError is raised.\n";
    assert!(
        own_words(other).contains("json.loads") && !own_words(other).contains("JSONDecodeError")
    );
    let q = parse_questions(
        r#"{"id": "j", "question": "How do I decode JSON?", "expect": "answer", "keyFacts": [{"fact": "loads", "match": ["json.loads"], "page": "p", "quote": "Deserialize s to a Python object using this table."}, {"fact": "error", "match": ["jsondecodeerror"], "page": "p", "quote": "If the data is not valid a JSONDecodeError will be raised here."}], "pages": ["p"]}"#,
    )
    .unwrap()
    .remove(0);
    let mut facts = match_facts(&q, &normalise(body));
    mark_stated(&q, &mut facts, &normalise(&own_words(body)));
    assert!(facts.iter().all(|f| f.found));
    assert_eq!(
        facts.iter().map(|f| f.stated).collect::<Vec<_>>(),
        [true, false]
    );
}
