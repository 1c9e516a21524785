//! Unit tests of `health`.

use super::*;
use std::time::Duration;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

#[test]
fn messages_of_searx_and_searxng_are_classified() {
    let cases = [
        ("HTTP timeout", EngineState::Timeout),
        ("timeout", EngineState::Timeout),
        ("CAPTCHA required", EngineState::Captcha),
        ("Suspended: CAPTCHA", EngineState::Captcha),
        ("too many requests", EngineState::Suspended),
        ("Suspended: too many requests", EngineState::Suspended),
        ("access denied", EngineState::Suspended),
        ("blocked", EngineState::Suspended),
        ("HTTP error", EngineState::Error),
        ("unexpected crash", EngineState::Error),
        ("parsing error", EngineState::Error),
    ];
    for (message, state) in cases {
        assert_eq!(classify(message), state, "{message}");
    }
}

#[test]
fn failures_count_up_and_results_reset_them() {
    let h1 = next_health(None, &Signal::Failed("CAPTCHA required".into()), at(1));
    assert_eq!(h1.state, EngineState::Captcha);
    assert_eq!(h1.consecutive_failures, 1);
    let h2 = next_health(Some(&h1), &Signal::Failed("CAPTCHA required".into()), at(2));
    assert_eq!(h2.consecutive_failures, 2);
    assert_eq!(h2.since, at(1), "same state keeps its start");
    let h3 = next_health(Some(&h2), &Signal::Results(4), at(3));
    assert_eq!(h3.state, EngineState::Healthy);
    assert_eq!(h3.consecutive_failures, 0);
    assert_eq!(h3.results, 4);
    assert_eq!(h3.since, at(3));
    assert_eq!(h3.last_error.as_deref(), Some("CAPTCHA required"));
}

#[test]
fn silence_keeps_a_failure_but_marks_a_healthy_engine_empty() {
    let suspended = next_health(None, &Signal::Failed("too many requests".into()), at(1));
    let still = next_health(Some(&suspended), &Signal::Silent, at(2));
    assert_eq!(still.state, EngineState::Suspended);
    assert_eq!(still.last_seen, at(2));
    let healthy = next_health(None, &Signal::Results(2), at(1));
    let empty = next_health(Some(&healthy), &Signal::Silent, at(2));
    assert_eq!(empty.state, EngineState::Empty);
    assert_eq!(empty.results, 2);
}

#[test]
fn the_book_folds_answers_and_tells_the_listener_about_changes() {
    let book = HealthBook::new();
    let seen: Arc<Mutex<Vec<(String, String, EngineState)>>> = Arc::default();
    let s = seen.clone();
    book.set_listener(Arc::new(move |backend, engine, record| {
        s.lock()
            .unwrap()
            .push((backend.into(), engine.into(), record.state));
    }));
    book.expect_engines(
        "ns/default",
        vec!["docs".into(), "flaky".into(), "wiki".into()],
    );
    let report = AnswerReport {
        results_by_engine: [("docs".to_string(), 3)].into(),
        unresponsive: vec![("flaky".into(), "CAPTCHA required".into())],
    };
    book.observe("ns/default", &report, at(10));
    book.observe("ns/default", &report, at(11));
    let snap = book.snapshot("ns/default");
    assert_eq!(snap["docs"].state, EngineState::Healthy);
    assert_eq!(snap["docs"].results, 6);
    assert_eq!(snap["flaky"].state, EngineState::Captcha);
    assert_eq!(snap["flaky"].consecutive_failures, 2);
    assert_eq!(snap["wiki"].state, EngineState::Empty);
    // Listener: one call per state change, not per answer.
    assert_eq!(seen.lock().unwrap().len(), 3);
    assert!(book.snapshot("other").is_empty());
}
