//! Unit tests of `external`: a small fixture report with an invented citation.

use super::*;
use crate::eval::score::{parse_questions, totals};
use crate::eval::table::facts_cell;

const SET: &str = r#"{"id": "py-json-decode", "question": "How do I decode JSON in Python?", "keyFacts": [{"fact": "json.loads decodes a str", "match": ["json.loads"]}, {"fact": "invalid JSON raises JSONDecodeError", "match": ["jsondecodeerror"]}]}
{"id": "sqlalchemy-pool", "kind": "no-answer", "question": "What is SQLAlchemy's default pool size?"}"#;

const JSON_URL: &str = "http://127.0.0.1:9/python3.11-doc/html/library/json.html";
const PICKLE_URL: &str = "http://127.0.0.1:9/python3.11-doc/html/library/pickle.html";
const MADE_UP: &str = "https://docs.python.org/3/library/json.html";

/// A gpt-researcher-style report: title, body with inline citations, a References list.
fn report() -> String {
    format!(
        "# Decoding JSON in Python\n\n## Introduction\n\n\
         The json.loads function deserializes a str instance containing a JSON document to a Python object ([json docs]({JSON_URL}#json.loads)).\n\
         Pickle is the fastest serializer in the world since 1995 ([pickle]({PICKLE_URL})).\n\
         The json module also supports streaming incremental decoding of huge documents ([Python docs]({MADE_UP})).\n\n\
         ## References\n\n\
         - [JSONDecodeError explained]({JSON_URL})\n\
         - [pickle]({PICKLE_URL})\n\
         - [Python docs]({MADE_UP})\n\
         - https://invented.example/jsondecodeerror\n"
    )
}

fn run(outcome: ExternalOutcome) -> ExternalRun {
    ExternalRun {
        id: "py-json-decode".into(),
        outcome,
        seconds: 93.44,
        input_tokens: Some(52_000),
        output_tokens: None,
        fetched_urls: vec![format!("{JSON_URL}/")],
        searched_urls: vec![PICKLE_URL.into()],
        error: None,
    }
}

fn pages() -> BTreeMap<String, PageText> {
    BTreeMap::from([
        (
            normalize_url(JSON_URL),
            PageText {
                title: "json — JSON encoder and decoder".into(),
                text: "json.loads(s): Deserialize s (a str, bytes or bytearray instance containing a JSON document) to a Python object using this conversion table.".into(),
            },
        ),
        (
            normalize_url(PICKLE_URL),
            PageText {
                title: "pickle — Python object serialization".into(),
                text: "The pickle module implements binary protocols for serializing and de-serializing a Python object structure.".into(),
            },
        ),
    ])
}

fn questions() -> Vec<Question> {
    parse_questions(SET).unwrap()
}

#[test]
fn run_files_parse_and_must_name_their_question() {
    let text = r#"{"id": "a", "outcome": "timeout", "seconds": 600.0, "inputTokens": null, "outputTokens": 12, "fetchedUrls": [], "searchedUrls": ["http://h/x"], "error": "killed after 600 s"}"#;
    let r = ExternalRun::parse(text, "a").unwrap();
    assert_eq!(r.outcome, ExternalOutcome::Timeout);
    assert_eq!((r.input_tokens, r.output_tokens), (None, Some(12)));
    assert_eq!(r.outcome().label(), "Failed(TimeLimit)");
    assert!(r.outcome().is_runaway());
    assert!(ExternalRun::parse(text, "b").unwrap_err().contains("\"a\""));
    assert!(ExternalRun::parse(r#"{"id": "a", "outcome": "maybe"}"#, "a").is_err());
    // Optional fields may be left out.
    let r =
        ExternalRun::parse(r#"{"id": "a", "outcome": "failed", "error": "boom"}"#, "a").unwrap();
    assert_eq!(r.outcome().label(), "Failed(Error)");
    assert_eq!(r.outcome().message.as_deref(), Some("boom"));
}

#[test]
fn the_reference_list_is_neither_facts_nor_claims() {
    let body = external_body(&report(), "How do I decode JSON in Python?");
    assert!(body.contains("## Introduction"));
    assert!(!body.contains("JSONDecodeError explained"), "{body}");
    assert!(!body.contains("invented.example"), "{body}");
    assert_eq!(
        external_body("# Q\n\nText.\n\n### Sources:\n- x\n", "Q"),
        "\n\nText.\n\n"
    );
    // The last such heading cuts: a "Sources" section mid-report followed by text is kept
    // only up to the final list.
    let two = "A.\n## References\nB.\n## References\n- r\n";
    assert_eq!(external_body(two, "Q"), "A.\n## References\nB.\n");
    assert_eq!(external_body("No lists here.", "Q"), "No lists here.");
}

#[test]
fn citations_are_split_into_fetched_seen_and_invented() {
    let c = citations(&report(), &run(ExternalOutcome::Completed));
    assert_eq!(
        c.known,
        vec![format!("{JSON_URL}/"), PICKLE_URL.to_string()]
    );
    assert_eq!(c.fetched, vec![format!("{JSON_URL}/")]);
    assert_eq!(
        c.invented,
        vec![
            MADE_UP.to_string(),
            "https://invented.example/jsondecodeerror".to_string()
        ]
    );
    assert_eq!(c.all().count(), 4);
}

#[test]
fn a_fixture_report_is_scored_like_quarrys_own() {
    let qs = questions();
    let report = report();
    let run = run(ExternalOutcome::Completed);
    let input = ExternalInput {
        run: Ok(&run),
        report: Some(&report),
        report_path: Some("/x/reports/py-json-decode.md".into()),
    };
    let r = score_external(&qs[0], &input, &pages());
    assert_eq!(r.outcome.label(), "Completed");
    // json.loads is in the body; JSONDecodeError only in the reference list, which does not count.
    assert_eq!((r.key_facts_found, r.key_facts), (1, 2));
    assert_eq!(r.facts[1].matched, None);
    // Three cited sentences: the json one is supported by the page; the pickle one states a
    // number and words the page lacks; the invented URL's page could not be fetched.
    assert_eq!(
        (r.claims, r.supported_claims, r.unsupported_claims),
        (3, 1, 2)
    );
    assert_eq!(r.citation_precision, Some(0.333));
    // Four cited URLs: one fetched, one only searched, two invented.
    assert_eq!((r.cited_fetched, r.cited_urls), (1, 4));
    assert_eq!(r.removed_citations, 2);
    assert_eq!((r.input_tokens, r.output_tokens), (52_000, 0));
    assert_eq!(r.cost_pico_usd, 0);
    assert_eq!(r.wall_seconds, 93.4);
    assert!(!r.runaway);
    assert_eq!(r.report.as_deref(), Some("/x/reports/py-json-decode.md"));
    // Without page texts, every cited sentence is unsupported.
    let r = score_external(&qs[0], &input, &BTreeMap::new());
    assert_eq!((r.claims, r.supported_claims), (3, 0));
    let t = totals(std::slice::from_ref(&r));
    assert_eq!(t.invented_urls, 2);
}

#[test]
fn missing_files_are_unfinished_questions_not_errors() {
    let qs = questions();
    let input = ExternalInput {
        run: Err("runs/py-json-decode.json: No such file or directory".into()),
        report: None,
        report_path: None,
    };
    let r = score_external(&qs[0], &input, &BTreeMap::new());
    assert_eq!(r.outcome.label(), "Failed(NotFinished)");
    assert_eq!((r.key_facts_found, r.key_facts), (0, 2));
    let unfinished = ExternalInput {
        run: Err("missing".into()),
        report: None,
        report_path: None,
    };
    assert_eq!(
        facts_cell(&score_external(&qs[1], &unfinished, &BTreeMap::new())),
        "-"
    );
    assert_eq!((r.claims, r.cited_urls, r.input_tokens), (0, 0, 0));
    // A run that says it completed but left no report did not finish either.
    let done = run(ExternalOutcome::Completed);
    let input = ExternalInput {
        run: Ok(&done),
        report: None,
        report_path: None,
    };
    let r = score_external(&qs[0], &input, &BTreeMap::new());
    assert_eq!(r.outcome.label(), "Failed(NotFinished)");
    assert_eq!(r.wall_seconds, 93.4);
    // A timeout without a report is a runaway.
    let timeout = run(ExternalOutcome::Timeout);
    let input = ExternalInput {
        run: Ok(&timeout),
        report: None,
        report_path: None,
    };
    let r = score_external(&qs[0], &input, &BTreeMap::new());
    assert!(r.runaway);
    assert_eq!(totals(&[r]).runaways, 1);
}

#[test]
fn no_answer_questions_are_honest_or_invented_as_for_quarry() {
    let qs = questions();
    let mut r = run(ExternalOutcome::Completed);
    r.id = "sqlalchemy-pool".into();
    let honest = "# SQLAlchemy pool size\n\nThe sources I read do not mention SQLAlchemy.\n";
    let input = ExternalInput {
        run: Ok(&r),
        report: Some(honest),
        report_path: None,
    };
    let s = score_external(&qs[1], &input, &pages());
    assert_eq!((s.honest, s.invented), (Some(true), Some(false)));
    assert_eq!(facts_cell(&s), "honest");
    let made_up = format!(
        "# Pool\n\nThe default pool size of the engine is five connections ([json]({JSON_URL})).\n"
    );
    let input = ExternalInput {
        run: Ok(&r),
        report: Some(&made_up),
        report_path: None,
    };
    let s = score_external(&qs[1], &input, &pages());
    assert_eq!((s.honest, s.invented), (Some(false), Some(true)));
    assert_eq!(s.key_facts, 0);
}
