//! Unit tests of `protocol`.

use super::*;
use quarry_engine::research::machine::state::Mode;

fn task(injected: Vec<ResearcherReport>) -> TaskMessage {
    let profile = test_profile();
    TaskMessage {
        v: VERSION,
        header: RunHeader {
            run: "0b1c-uid".into(),
            namespace: Some("team-a".into()),
            profile_name: "p".into(),
            profile,
            managed_search: None,
            specialised: Some((true, false)),
        },
        task_id: 3,
        round: 2,
        attempt: "a1".into(),
        query: "task".into(),
        input: RunInput::new("question", Mode::Deep),
        injected,
        spent: Usage {
            cost_pico_usd: 7,
            ..Usage::default()
        },
    }
}

fn report(task_id: u32, chars: usize) -> ResearcherReport {
    ResearcherReport {
        task_id,
        markdown: "x".repeat(chars),
        fetched: vec![quarry_engine::research::machine::state::SourceRef::new(
            "https://a",
            "A",
        )],
        seen: vec![],
        pages: vec![quarry_engine::research::machine::state::PageExtract {
            url: "https://a".into(),
            title: "A".into(),
            text: "page text".repeat(1000),
        }],
        irrelevant: vec![],
        queries: vec![],
        searches: 2,
        usage: Usage::default(),
    }
}

fn origin(task_id: u32, round: u32, execution: &str, seq: u64) -> Origin {
    Origin {
        task_id,
        round,
        attempt: "a1".into(),
        execution: execution.into(),
        seq,
    }
}

#[test]
fn a_task_round_trips_with_slim_injected_reports_and_no_secret_values() {
    let t = task(vec![report(0, 60_000)]);
    let bytes = encode_task(&t).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    // The reference travels, never a value (there is none to send).
    assert!(
        text.contains(r#""apiKeySecretRef":{"key":"openai","name":"model-keys"}"#)
            || text.contains(r#""apiKeySecretRef":{"name":"model-keys","key":"openai"}"#),
        "{text}"
    );
    let back = decode_task(&bytes).unwrap();
    assert_eq!(back.header, t.header);
    assert_eq!(back.task_id, 3);
    assert_eq!(back.round, 2);
    assert_eq!(back.spent.cost_pico_usd, 7);
    // Injection reads the task id and at most 50k characters of Markdown; pages stay home.
    assert_eq!(back.injected.len(), 1);
    assert_eq!(
        back.injected[0].markdown.chars().count(),
        INJECTED_REPORT_CHARS
    );
    assert!(back.injected[0].pages.is_empty() && back.injected[0].fetched.is_empty());
}

#[test]
fn oversized_foreign_and_hostile_tasks_are_refused() {
    let many = (0..100).map(|i| report(i, 60_000)).collect();
    assert!(matches!(
        encode_task(&task(many)),
        Err(ProtocolError::TooLarge {
            limit: MAX_TASK_BYTES,
            ..
        })
    ));
    assert!(matches!(
        decode_task(&vec![b' '; MAX_TASK_BYTES + 1]),
        Err(ProtocolError::TooLarge { .. })
    ));
    let mut t = task(vec![]);
    t.v = 2;
    let bytes = serde_json::to_vec(&t).unwrap();
    assert_eq!(
        decode_task(&bytes),
        Err(ProtocolError::Version { found: 2 })
    );
    let mut t = task(vec![]);
    t.header.run = "x:*".into();
    let bytes = serde_json::to_vec(&t).unwrap();
    assert_eq!(
        decode_task(&bytes),
        Err(ProtocolError::RunKey("x:*".into()))
    );
    assert!(matches!(
        decode_task(b"{\"v\":1}"),
        Err(ProtocolError::Malformed(_))
    ));
    assert!(valid_run_key("7f0c2d1e-33aa-4b6c-9d2e-0123456789ab"));
    assert!(!valid_run_key(""));
    assert!(!valid_run_key(&"a".repeat(MAX_RUN_KEY + 1)));
}

#[test]
fn results_round_trip_and_are_bounded() {
    let progress = ResultMessage::Progress {
        origin: origin(1, 1, "a1/w1/1", 4),
        units: 3,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
            cost_pico_usd: 99,
            llm_calls: 1,
            ..Usage::default()
        },
        by_model: BTreeMap::from([("m".to_string(), Usage::default())]),
        calls: vec![WireCall {
            time: "2026-01-01T00:00:00.000Z".into(),
            tier: "primary".into(),
            provider: "api.example.com".into(),
            model: "m".into(),
            purpose: CallPurpose::Research,
            outcome: "timeout".into(),
            input_tokens: 0,
            cached_input_tokens: 0,
            output_tokens: 0,
            cost_usd: "0.000000".into(),
            cost_pico_usd: 0,
            duration_ms: 5,
            trace_id: None,
            task: Some(1),
        }],
        sources: vec![],
    };
    let bytes = encode_result(&progress).unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains(r#""kind":"progress""#));
    let back = decode_result(&bytes).unwrap();
    assert_eq!(back, progress);
    let ResultMessage::Progress { calls, .. } = back else {
        unreachable!()
    };
    let record = calls[0].clone().into_record();
    assert_eq!(record.outcome, "timeout");
    assert_eq!(record.kind, "modelCall");
    let mut odd = calls[0].clone();
    odd.outcome = "something new".into();
    assert_eq!(odd.into_record().outcome, "unknown");
    let huge = ResultMessage::Finished {
        origin: origin(1, 1, "e", 5),
        report: report(1, MAX_RESULT_BYTES),
    };
    assert!(matches!(
        encode_result(&huge),
        Err(ProtocolError::TooLarge { .. })
    ));
    let steer = encode_steer(&report(4, 80_000)).unwrap();
    assert!(steer.len() <= MAX_STEER_BYTES);
    let back = decode_steer(&steer).unwrap();
    assert_eq!(back.task_id, 4);
    assert_eq!(back.markdown.chars().count(), INJECTED_REPORT_CHARS);
}

#[test]
fn progress_counts_once_per_execution_and_sequence() {
    let mut book = ResultBook::default();
    assert!(book.admit_progress(&origin(1, 1, "a1/w1/1", 1)));
    assert!(book.admit_progress(&origin(1, 1, "a1/w1/1", 2)));
    // A publish retried after a lost reply repeats its sequence number.
    assert!(!book.admit_progress(&origin(1, 1, "a1/w1/1", 2)));
    assert!(!book.admit_progress(&origin(1, 1, "a1/w1/1", 1)));
    // The reclaiming worker's execution counts on its own: both attempts were paid for.
    assert!(book.admit_progress(&origin(1, 1, "a1/w2/2", 1)));
    assert!(book.admit_progress(&origin(1, 1, "a1/w1/1", 3)));
}

#[test]
fn one_terminal_result_per_task_and_round() {
    let mut book = ResultBook::default();
    // Nobody waits (the task was abandoned): not taken, and not remembered as taken.
    assert!(!book.admit_terminal(&origin(1, 1, "a1/w1/1", 9), false));
    assert!(book.admit_terminal(&origin(1, 1, "a1/w2/2", 4), true));
    // The presumed-dead first worker finishes after all: ignored.
    assert!(!book.admit_terminal(&origin(1, 1, "a1/w1/1", 9), true));
    // The same task in another round is another result.
    assert!(book.admit_terminal(&origin(1, 2, "b/w1/1", 3), true));
    assert!(book.admit_terminal(&origin(2, 1, "c/w1/1", 3), true));
}

#[test]
fn the_book_forgets_the_oldest_executions_past_its_bound() {
    let mut book = ResultBook::default();
    for i in 0..ResultBook::MAX_EXECUTIONS + 10 {
        assert!(book.admit_progress(&origin(1, 1, &format!("e{i:05}"), 1)));
    }
    assert_eq!(book.progress.len(), ResultBook::MAX_EXECUTIONS);
}

#[test]
fn entries_are_reclaimed_only_after_the_visibility_timeout_and_given_up_after_max_deliveries() {
    let vis = Duration::from_secs(300);
    assert_eq!(
        reclaim_decision(Duration::from_secs(299), 1, vis, MAX_DELIVERIES),
        Reclaim::NotYet
    );
    assert_eq!(reclaim_decision(vis, 1, vis, MAX_DELIVERIES), Reclaim::Run);
    assert_eq!(
        reclaim_decision(
            Duration::from_secs(900),
            MAX_DELIVERIES - 1,
            vis,
            MAX_DELIVERIES
        ),
        Reclaim::Run
    );
    assert_eq!(
        reclaim_decision(vis, MAX_DELIVERIES, vis, MAX_DELIVERIES),
        Reclaim::GiveUp
    );
    assert_eq!(heartbeat_interval(vis), Duration::from_secs(100));
    assert_eq!(
        heartbeat_interval(Duration::from_millis(30)),
        Duration::from_millis(100)
    );
}

#[test]
fn usage_deltas_are_per_model_and_skip_unchanged_models() {
    let u = |i, o, c| Usage {
        input_tokens: i,
        output_tokens: o,
        cost_pico_usd: c,
        llm_calls: 1,
        ..Usage::default()
    };
    let before = BTreeMap::from([
        ("a".to_string(), u(10, 1, 5)),
        ("b".to_string(), u(3, 3, 3)),
    ]);
    let now = BTreeMap::from([
        (
            "a".to_string(),
            Usage {
                llm_calls: 2,
                ..u(25, 4, 11)
            },
        ),
        ("b".to_string(), u(3, 3, 3)),
        ("c".to_string(), u(1, 1, 1)),
    ]);
    let d = usage_delta(&now, &before);
    assert_eq!(d.len(), 2);
    assert_eq!(d["a"], u(15, 3, 6));
    assert_eq!(d["c"], u(1, 1, 1));
}
