//! Unit tests of `judge`, with a scripted model.

use super::*;
use crate::eval::score::{FinishedRun, Outcome, Spend, parse_questions, score};
use async_trait::async_trait;
use quarry_engine::llm::{ChatResponse, LlmError, Role};
use std::sync::Mutex;

/// Answers each call with the next scripted result and keeps the requests.
struct Script {
    answers: Mutex<Vec<Result<&'static str, LlmError>>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Script {
    fn new(answers: Vec<Result<&'static str, LlmError>>) -> Self {
        Self {
            answers: Mutex::new(answers),
            requests: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait]
impl ChatModel for Script {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request);
        let mut answers = self.answers.lock().unwrap();
        let next = if answers.is_empty() {
            Ok("{\"stated\": false}")
        } else {
            answers.remove(0)
        };
        next.map(|content| ChatResponse {
            content: content.into(),
            usage: Usage {
                input_tokens: 100,
                output_tokens: 5,
                cost_pico_usd: 7,
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

#[test]
fn answers_are_read_tolerantly() {
    for (answer, want) in [
        ("{\"stated\": true}", Verdict::Yes),
        ("{\"stated\": false}", Verdict::No),
        ("```json\n{\"Stated\": \"yes\"}\n```", Verdict::Yes),
        ("{\"stated\": \"No\"}", Verdict::No),
        (
            "Sure! {\"stated\": true, \"why\": \"it says no more\"}",
            Verdict::Yes,
        ),
        // Cut off before the closing brace.
        ("{\"stated\": tru", Verdict::Unknown),
        ("{\"stated\": false", Verdict::No),
        ("stated: yes", Verdict::Yes),
        ("Yes.", Verdict::Yes),
        ("NO", Verdict::No),
        ("No, it never says yes.", Verdict::No),
        ("The answer is true.", Verdict::Yes),
        ("I think the report says so; answer: false", Verdict::No),
        ("It is true and false.", Verdict::Unknown),
        ("", Verdict::Unknown),
        ("The report mentions json.loads.", Verdict::Unknown),
        ("{\"answer\": 1}", Verdict::Unknown),
        // Words that merely contain yes/no do not count.
        ("notably, yesterday", Verdict::Unknown),
    ] {
        assert_eq!(parse_verdict(answer), want, "{answer:?}");
    }
}

#[test]
fn the_prompt_budget_is_the_window_minus_the_output_cap_at_three_and_a_half_chars_per_token() {
    // (8192 - 400 - 64) tokens * 3.5 chars.
    assert_eq!(SETTINGS.prompt_chars(), 27_048);
    let tiny = JudgeSettings {
        context_window: 600,
        max_output_tokens: 512,
        json_mode: false,
    };
    assert_eq!(tiny.prompt_chars(), 84);
    assert_eq!(body_chars(&tiny, "a fact"), 0);
    assert_eq!(SETTINGS.max_tokens(), JUDGE_MAX_TOKENS);
    assert_eq!(tiny.max_tokens(), JUDGE_MAX_TOKENS);
    let small_cap = JudgeSettings {
        max_output_tokens: 8,
        ..SETTINGS
    };
    assert_eq!(small_cap.max_tokens(), 8);
    let fixed = SETTINGS.prompt_chars() - body_chars(&SETTINGS, "fact");
    let messages = judge_messages("fact", "");
    let total: usize = messages.iter().map(|m| m.content.chars().count()).sum();
    assert_eq!(fixed, total, "the fixed part is measured exactly");
}

#[test]
fn a_report_that_fits_is_kept_whole() {
    let body = "  json.loads parses a str.\nSecond line.  ";
    assert_eq!(
        fit_body(body, "json.loads", 100),
        "json.loads parses a str.\nSecond line."
    );
}

#[test]
fn a_long_report_is_cut_to_the_sentences_that_best_match_the_fact_in_report_order() {
    let filler = "Unrelated text about pickle protocols and marshalling formats.";
    let mut body = String::new();
    for _ in 0..20 {
        body.push_str(filler);
        body.push(' ');
    }
    body.push_str("The default maxsize of lru_cache is 128 entries. ");
    for _ in 0..20 {
        body.push_str(filler);
        body.push('\n');
    }
    body.push_str("Setting maxsize to None makes the cache unbounded.");
    let key = "lru_cache maxsize default 128";
    let out = fit_body(&body, key, 160);
    assert!(out.chars().count() <= 160, "{out}");
    let first = out.find("The default maxsize").unwrap();
    let second = out.find("Setting maxsize to None").unwrap();
    assert!(first < second, "report order: {out}");
    assert!(!out.contains("pickle"), "{out}");
    assert!(
        out.starts_with("…\n"),
        "a gap before the first kept sentence: {out}"
    );
    // With room for a single sentence, the best one.
    let out = fit_body(&body, key, 60);
    assert_eq!(
        out,
        "…\nThe default maxsize of lru_cache is 128 entries.\n…"
    );
    // Less room than any sentence: the best sentence's beginning, never more than allowed.
    let out = fit_body(&body, key, 10);
    assert_eq!(out, "The defaul");
    assert_eq!(fit_body(&body, key, 0), "");
    // Multi-byte characters are cut on character boundaries.
    let wide = "é".repeat(50);
    assert_eq!(fit_body(&wide, "x", 7).chars().count(), 7);
}

#[test]
fn the_fact_key_holds_the_quote_and_match_strings() {
    let f = KeyFact {
        fact: "the default is 128".into(),
        matches: vec!["maxsize=128".into()],
        page: None,
        quote: Some("If maxsize is set to None".into()),
    };
    assert_eq!(
        fact_key(&f),
        "the default is 128 If maxsize is set to None maxsize=128"
    );
}

const SET: &str = r#"{"id": "lru", "question": "What is lru_cache's default maxsize?", "keyFacts": [{"fact": "the default maxsize is 128", "match": ["maxsize=128"]}, {"fact": "None makes the cache unbounded", "match": ["grow without bound"]}]}
{"id": "none", "kind": "no-answer", "question": "What is SQLAlchemy's pool size?"}"#;

fn scored(report: &str) -> (Question, QuestionResult) {
    let qs = parse_questions(SET).unwrap();
    let r = score(
        &qs[0],
        &FinishedRun {
            outcome: Some(Outcome::completed()),
            report: Some(report),
            findings: None,
            spend: Spend {
                input_tokens: 1000,
                output_tokens: 50,
                cost_pico_usd: 3,
            },
            wall_seconds: 1.0,
            report_path: None,
        },
    );
    (qs[0].clone(), r)
}

#[tokio::test]
async fn each_fact_is_asked_once_with_the_report_and_its_spend_is_kept_apart() {
    let report = "lru_cache uses maxsize=128 unless told otherwise. With None it is unbounded.";
    let (q, mut r) = scored(report);
    assert_eq!((r.key_facts_found, r.key_facts), (1, 2));
    let model = Script::new(vec![Ok("{\"stated\": true}"), Ok("yes")]);
    judge_result(&model, &SETTINGS, &q, Some(report), &mut r).await;
    let verdicts: Vec<Option<Verdict>> = r.facts.iter().map(|f| f.judge).collect();
    assert_eq!(verdicts, vec![Some(Verdict::Yes), Some(Verdict::Yes)]);
    assert_eq!(r.key_facts_judged, Some(2));
    // The judge found the paraphrase the string match missed: they agree on one fact.
    assert_eq!(r.judge_agreement, Some(1));
    assert_eq!(
        r.judge_spend,
        Some(JudgeSpend {
            calls: 2,
            input_tokens: 200,
            output_tokens: 10,
            cost_pico_usd: 14,
        })
    );
    // The run's own spend is untouched.
    assert_eq!(
        (r.input_tokens, r.output_tokens, r.cost_pico_usd),
        (1000, 50, 3)
    );
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    let req = &requests[0];
    assert!(req.json_mode && req.json_schema.is_some());
    assert!(req.tools.is_empty());
    assert_eq!(req.max_tokens, JUDGE_MAX_TOKENS);
    assert_eq!(req.messages[0].role, Role::System);
    let user = &req.messages[1].content;
    assert!(user.contains("Fact: the default maxsize is 128"), "{user}");
    assert!(user.contains(report), "{user}");
    assert!(
        requests[1].messages[1]
            .content
            .contains("None makes the cache unbounded")
    );
}

#[tokio::test]
async fn failures_and_garbage_are_unknown_and_a_rerun_judges_only_what_is_missing() {
    let report = "lru_cache uses maxsize=128.";
    let (q, mut r) = scored(report);
    let model = Script::new(vec![
        Ok("I cannot tell."),
        Err(LlmError::Timeout { seconds: 9 }),
    ]);
    let failed = judge_result(&model, &SETTINGS, &q, Some(report), &mut r).await;
    // Garbage is `unknown`; a failed call leaves its fact unjudged, to be asked again.
    assert_eq!(failed, 1);
    let verdicts: Vec<Option<Verdict>> = r.facts.iter().map(|f| f.judge).collect();
    assert_eq!(verdicts, vec![Some(Verdict::Unknown), None]);
    assert_eq!((r.key_facts_judged, r.judge_agreement), (Some(0), Some(0)));
    assert!(needs_judge(&r));
    let model = Script::new(vec![Ok("no")]);
    assert_eq!(
        judge_result(&model, &SETTINGS, &q, Some(report), &mut r).await,
        0
    );
    assert_eq!(r.facts[1].judge, Some(Verdict::No));
    assert_eq!(r.judge_spend.map(|s| s.calls), Some(3));
    assert!(!needs_judge(&r));
    // A result from before --judge (no verdicts) is judged; one fully judged is left alone.
    let (_, mut partly) = scored(report);
    partly.facts[0].judge = Some(Verdict::No);
    assert!(needs_judge(&partly));
    let model = Script::new(vec![Ok("{\"stated\": false}")]);
    judge_result(&model, &SETTINGS, &q, Some(report), &mut partly).await;
    assert_eq!(model.requests.lock().unwrap().len(), 1);
    assert!(
        model.requests.lock().unwrap()[0].messages[1]
            .content
            .contains("None makes the cache unbounded")
    );
    assert_eq!(partly.facts[0].judge, Some(Verdict::No));
    assert_eq!(partly.facts[1].judge, Some(Verdict::No));
    // found + no, not found + no: one agreement.
    assert_eq!(partly.judge_agreement, Some(1));
}

#[tokio::test]
async fn no_report_is_a_no_without_a_model_call() {
    let (q, mut r) = scored("");
    let model = Script::new(vec![]);
    judge_result(&model, &SETTINGS, &q, None, &mut r).await;
    judge_result(&model, &SETTINGS, &q, Some("   "), &mut r).await;
    assert!(model.requests.lock().unwrap().is_empty());
    assert!(r.facts.iter().all(|f| f.judge == Some(Verdict::No)));
    assert_eq!(r.judge_spend.map(|s| s.calls), Some(0));
}

#[tokio::test]
async fn a_long_report_is_trimmed_to_the_window() {
    let mut report = String::new();
    for i in 0..3000 {
        report.push_str(&format!("Sentence {i} is about pickle and marshal. "));
    }
    report.push_str("lru_cache uses maxsize=128 by default.");
    let (q, mut r) = scored(&report);
    let settings = JudgeSettings {
        context_window: 1024,
        max_output_tokens: 256,
        json_mode: false,
    };
    let model = Script::new(vec![Ok("true"), Ok("false")]);
    judge_result(&model, &settings, &q, Some(&report), &mut r).await;
    let requests = model.requests.lock().unwrap();
    for req in requests.iter() {
        let chars: usize = req.messages.iter().map(|m| m.content.chars().count()).sum();
        assert!(chars <= settings.prompt_chars(), "{chars}");
        assert!(!req.json_mode);
    }
    assert!(
        requests[0].messages[1]
            .content
            .contains("lru_cache uses maxsize=128 by default.")
    );
    assert_eq!(r.facts[0].judge, Some(Verdict::Yes));
}

#[tokio::test]
async fn a_changed_question_set_leaves_facts_unjudged() {
    let (mut q, mut r) = scored("maxsize=128");
    q.key_facts[1].fact = "reworded".into();
    let model = Script::new(vec![Ok("yes")]);
    judge_result(&model, &SETTINGS, &q, Some("maxsize=128"), &mut r).await;
    assert_eq!(r.facts[0].judge, Some(Verdict::Yes));
    assert_eq!(r.facts[1].judge, None);
    assert_eq!(r.key_facts_judged, Some(1));
}

#[tokio::test]
async fn the_answer_schema_goes_only_with_json_mode() {
    let (q, _) = scored("maxsize=128");
    let model = Script::new(vec![Ok("{\"stated\": true}")]);
    let (v, usage) = judge_fact(&model, &SETTINGS, &q.key_facts[0], "maxsize=128").await;
    assert_eq!(v, Some(Verdict::Yes));
    assert_eq!(usage.input_tokens, 100);
    let schema = model.requests.lock().unwrap()[0]
        .json_schema
        .clone()
        .unwrap();
    assert_eq!(schema.schema["required"], serde_json::json!(["stated"]));
    let plain = JudgeSettings {
        json_mode: false,
        ..SETTINGS
    };
    let model = Script::new(vec![Ok("yes")]);
    let (v, _) = judge_fact(&model, &plain, &q.key_facts[0], "maxsize=128").await;
    assert_eq!(v, Some(Verdict::Yes));
    let req = model.requests.lock().unwrap()[0].clone();
    assert!(!req.json_mode && req.json_schema.is_none());
    // A failed call is no verdict, and its bill is kept.
    let model = Script::new(vec![Err(LlmError::Billed {
        usage: Usage {
            input_tokens: 70,
            ..Usage::default()
        },
        source: Box::new(LlmError::Degenerate { tokens: 3 }),
    })]);
    let (v, usage) = judge_fact(&model, &SETTINGS, &q.key_facts[0], "maxsize=128").await;
    assert_eq!((v, usage.input_tokens), (None, 70));
}
