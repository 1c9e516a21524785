//! The event stream's pure parts (ids, event shapes, derivation from the reducer's states, the
//! stored-log fallback) and the in-memory backend.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::memory::{MemoryEvents, MemoryLimits};
use super::*;
use crate::llm::Usage;
use crate::research::machine::reducer::reduce;
use crate::research::machine::state::{
    Failure, Limits, Mode, ResearcherReport, RunInput, SourceRef,
};

fn run_ref() -> RunRef {
    RunRef::new("team-a", "json-run", "uid-1")
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cost_pico_usd: input * 1_000_000,
        llm_calls: 1,
        ..Usage::default()
    }
}

fn report(task_id: u32) -> ResearcherReport {
    ResearcherReport {
        task_id,
        markdown: format!("report {task_id}"),
        fetched: vec![SourceRef::new(format!("http://x/{task_id}"), "t")],
        seen: vec![],
        pages: vec![],
        irrelevant: vec![],
        queries: vec![],
        searches: 2,
        usage: usage(100, 10),
    }
}

fn parse(event: &RunEvent) -> Value {
    serde_json::from_str(&event.json).unwrap()
}

#[test]
fn ids_parse_print_and_order_like_redis_stream_ids() {
    let id: EventId = "1718000000000-3".parse().unwrap();
    assert_eq!(
        id,
        EventId {
            millis: 1_718_000_000_000,
            seq: 3
        }
    );
    assert_eq!(id.to_string(), "1718000000000-3");
    assert!("1718000000000-10".parse::<EventId>().unwrap() > id);
    assert!("1718000000001-0".parse::<EventId>().unwrap() > id);
    for bad in [
        "",
        "12",
        "a-1",
        "1-",
        "-1",
        "1-2-3",
        "1 -2",
        "99999999999999999999999-1",
    ] {
        assert!(bad.parse::<EventId>().is_err(), "{bad:?} parsed");
    }
}

#[test]
fn next_ids_increase_even_when_the_clock_stands_still_or_steps_back() {
    let first = EventId::next_after(None, 1000);
    assert_eq!(first.to_string(), "1000-0");
    let same_ms = EventId::next_after(Some(first), 1000);
    assert_eq!(same_ms.to_string(), "1000-1");
    let clock_back = EventId::next_after(Some(same_ms), 990);
    assert_eq!(clock_back.to_string(), "1000-2");
    let later = EventId::next_after(Some(clock_back), 1005);
    assert_eq!(later.to_string(), "1005-0");
    assert!(first < same_ms && same_ms < clock_back && clock_back < later);
}

#[test]
fn engine_events_carry_type_time_run_fields_and_the_snapshot() {
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    state.phase = Phase::Researching;
    state.round = 1;
    state.usage = usage(1200, 34);
    let body = EventBody::Evaluation {
        decision: "delegate",
        queries: vec!["marshal".into()],
        run: Snapshot::of(&state),
    };
    let event = RunEvent::from_body(&run_ref(), &body, "2024-06-10T08:00:00.000Z");
    assert_eq!(event.kind, "evaluation");
    assert_eq!(
        parse(&event),
        json!({
            "type": "evaluation",
            "time": "2024-06-10T08:00:00.000Z",
            "namespace": "team-a",
            "run": "json-run",
            "uid": "uid-1",
            "decision": "delegate",
            "queries": ["marshal"],
            "phase": "Researching",
            "progress": "0%",
            "round": 1,
            "tokens": 1234,
            "costUSD": "0.001200",
        })
    );
}

#[test]
fn provenance_records_keep_their_fields_and_time_and_type_comes_from_kind() {
    let record = crate::llm::router::SourceRecord {
        time: "2024-06-10T08:00:01.500Z".into(),
        kind: "search",
        subject: "json decoder".into(),
        cache: "miss",
        outcome: "ok",
        duration_ms: 51,
        task: Some(2),
    };
    let event = RunEvent::from_record(&run_ref(), &record).unwrap();
    assert_eq!(event.kind, "search");
    assert_eq!(
        parse(&event),
        json!({
            "type": "search",
            "time": "2024-06-10T08:00:01.500Z",
            "namespace": "team-a",
            "run": "json-run",
            "uid": "uid-1",
            "subject": "json decoder",
            "cache": "miss",
            "outcome": "ok",
            "durationMs": 51,
            "task": 2,
        })
    );
}

#[test]
fn a_stored_log_becomes_events_with_increasing_ids_and_skips_junk() {
    let log = concat!(
        r#"{"time":"2024-06-10T08:00:01.000Z","kind":"modelCall","model":"m","inputTokens":5}"#,
        "\n",
        "not json\n",
        r#"{"time":"2024-06-10T08:00:01.000Z","kind":"search","subject":"q"}"#,
        "\n",
        r#"{"no":"kind"}"#,
        "\n",
        r#"{"time":"2024-06-10T08:00:00.500Z","kind":"fetch","subject":"http://x"}"#,
        "\n",
    );
    let events = log_events(&run_ref(), log.as_bytes());
    let ids: Vec<String> = events.iter().map(|e| e.id.to_string()).collect();
    // The third line's time went back: its id keeps the previous millisecond.
    assert_eq!(
        ids,
        ["1718006401000-0", "1718006401000-2", "1718006401000-4"]
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["modelCall", "search", "fetch"]);
    let first: Value = serde_json::from_str(&events[0].json).unwrap();
    assert_eq!(first["type"], "modelCall");
    assert_eq!(first["run"], "json-run");
    assert_eq!(first["inputTokens"], 5);
    assert!(first.get("kind").is_none());
}

fn types(bodies: &[EventBody]) -> Vec<String> {
    bodies
        .iter()
        .map(|b| {
            serde_json::to_value(b).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

/// Applies `event` with the real reducer and returns what the tracker derives.
fn step(tracker: &mut EventTracker, state: &mut RunState, event: Event) -> Vec<EventBody> {
    let (next, _) = reduce(state.clone(), event.clone());
    *state = next;
    tracker.derive(state, &event)
}

#[test]
fn a_deep_run_is_told_once_per_change_in_order() {
    let mut input = RunInput::new("compare json libraries", Mode::Deep);
    input.limits = Limits {
        max_concurrent_researchers: 1,
        ..Limits::default()
    };
    let mut state = RunState::new(input);
    let mut tracker = EventTracker::new();
    assert_eq!(
        types(&step(&mut tracker, &mut state, Event::Start)),
        ["phase"]
    );
    let planned = step(
        &mut tracker,
        &mut state,
        Event::PlanReady {
            tasks: vec!["json".into(), "pickle".into()],
            usage: usage(300, 40),
        },
    );
    assert_eq!(
        types(&planned),
        ["phase", "agendaPlanned", "researcherStarted"]
    );
    match &planned[1] {
        EventBody::AgendaPlanned { tasks, .. } => assert_eq!(
            tasks,
            &vec![
                TaskInfo {
                    id: 0,
                    query: "json".into()
                },
                TaskInfo {
                    id: 1,
                    query: "pickle".into()
                },
            ]
        ),
        other => panic!("{other:?}"),
    }
    let progress = |units| Event::ResearcherProgress {
        task_id: 0,
        units,
        usage: usage(10, 1),
    };
    assert_eq!(
        types(&step(&mut tracker, &mut state, progress(1))),
        ["researcherProgress"]
    );
    // A usage-only update (same units) tells nothing.
    assert!(step(&mut tracker, &mut state, progress(1)).is_empty());
    let finished = step(
        &mut tracker,
        &mut state,
        Event::ResearcherFinished { report: report(0) },
    );
    assert_eq!(
        types(&finished),
        ["researcherFinished", "researcherStarted"]
    );
    match &finished[0] {
        EventBody::ResearcherFinished {
            task,
            searches,
            pages_read,
            input_tokens,
            ..
        } => assert_eq!(
            (*task, *searches, *pages_read, *input_tokens),
            (0, 2, 1, 100)
        ),
        other => panic!("{other:?}"),
    }
    let failed = step(
        &mut tracker,
        &mut state,
        Event::ResearcherFailed {
            task_id: 1,
            failure: Failure::new("ModelUnreachable", "connection refused"),
        },
    );
    // The round is over: the evaluator is asked (no phase change).
    assert_eq!(types(&failed), ["researcherFailed"]);
    match &failed[0] {
        EventBody::ResearcherFailed { task, reason, .. } => {
            assert_eq!((*task, reason.as_str()), (1, "ModelUnreachable"))
        }
        other => panic!("{other:?}"),
    }
    let delegated = step(
        &mut tracker,
        &mut state,
        Event::Evaluated {
            decision: Decision::Delegate {
                queries: vec!["marshal".into()],
            },
            usage: usage(200, 20),
        },
    );
    assert_eq!(
        types(&delegated),
        ["agendaPlanned", "evaluation", "researcherStarted"]
    );
    let json = serde_json::to_value(&delegated[1]).unwrap();
    assert_eq!(json["decision"], "delegate");
    assert_eq!(json["round"], 2);
}

#[test]
fn a_recovered_run_tells_only_the_recovery_and_the_redone_researchers() {
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    for e in [
        Event::Start,
        Event::PlanReady {
            tasks: vec!["a".into(), "b".into()],
            usage: usage(1, 1),
        },
        Event::ResearcherFinished { report: report(0) },
    ] {
        state = reduce(state, e).0;
    }
    assert_eq!(state.agenda[1].state, TaskState::Running);
    let mut tracker = EventTracker::new();
    let told = step(&mut tracker, &mut state, Event::Recover);
    let kinds = types(&told);
    assert!(kinds.contains(&"control".to_string()), "{kinds:?}");
    assert!(!kinds.contains(&"agendaPlanned".to_string()), "{kinds:?}");
    assert!(
        !kinds.contains(&"researcherFinished".to_string()),
        "{kinds:?}"
    );
    let started: Vec<u32> = told
        .iter()
        .filter_map(|b| match b {
            EventBody::ResearcherStarted { task, .. } => Some(*task),
            _ => None,
        })
        .collect();
    assert_eq!(started, [1]);
}

#[test]
fn the_final_event_carries_outcome_and_totals() {
    let mut state = RunState::new(RunInput::new("q", Mode::Quick));
    state.phase = Phase::Failed;
    state.failure = Some(Failure::new("NoEvidence", "nothing usable"));
    state.usage = usage(500, 50);
    state.searches = 4;
    state.pages_fetched = 3;
    let event = RunEvent::from_body(&run_ref(), &EventBody::finished(&state), "t");
    assert_eq!(event.kind, RUN_FINISHED);
    let json = parse(&event);
    assert_eq!(json["phase"], "Failed");
    assert_eq!(json["reason"], "NoEvidence");
    assert_eq!(json["inputTokens"], 500);
    assert_eq!(json["searches"], 4);
    assert_eq!(json["pagesRead"], 3);
    assert_eq!(json["report"], false);
}

/// Everything the memory stream holds for `run`.
async fn all(events: &MemoryEvents, run: &RunRef) -> Vec<StoredEvent> {
    events
        .reader(run)
        .await
        .unwrap()
        .next(None, Duration::ZERO, 100)
        .await
        .unwrap()
}

fn event(n: u32) -> RunEvent {
    RunEvent::from_object(
        &run_ref(),
        "search",
        serde_json::Map::from_iter([("n".to_string(), Value::from(n))]),
        "t",
    )
}

#[tokio::test]
async fn memory_readers_resume_after_any_id_and_followers_wake_on_publish() {
    let events = Arc::new(MemoryEvents::default());
    let run = run_ref();
    assert!(!events.exists(&run).await.unwrap());
    for n in 0..5 {
        events.publish(&run, event(n));
    }
    assert!(events.exists(&run).await.unwrap());
    let mut reader = events.reader(&run).await.unwrap();
    let all = reader.next(None, Duration::ZERO, 100).await.unwrap();
    assert_eq!(all.len(), 5);
    assert!(all.windows(2).all(|w| w[0].id < w[1].id));
    let rest = reader
        .next(Some(all[1].id), Duration::ZERO, 2)
        .await
        .unwrap();
    assert_eq!(rest, all[2..4].to_vec());
    // Nothing after the last: a follower waits, and a publish wakes it well before its wait ends.
    let last = all[4].id;
    let publisher = events.clone();
    let waiter = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let got = reader
            .next(Some(last), Duration::from_secs(10), 10)
            .await
            .unwrap();
        (got, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    publisher.publish(&run, event(5));
    let (got, waited) = waiter.await.unwrap();
    assert_eq!(got.len(), 1);
    assert!(got[0].json.contains("\"n\":5"));
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    // And a follower with nothing new gives up at its wait.
    let mut reader = events.reader(&run).await.unwrap();
    let quiet = reader
        .next(Some(got[0].id), Duration::from_millis(50), 10)
        .await
        .unwrap();
    assert!(quiet.is_empty());
}

#[tokio::test]
async fn memory_stream_is_bounded_per_run_and_in_runs_evicting_finished_first() {
    let limits = MemoryLimits {
        per_run: 3,
        runs: 2,
        finished_ttl: Duration::from_secs(60),
    };
    let events = MemoryEvents::new(limits, None);
    let a = RunRef::new("ns", "a", "1");
    let b = RunRef::new("ns", "b", "2");
    let c = RunRef::new("ns", "c", "3");
    for n in 0..5 {
        events.publish(&a, event(n));
    }
    let kept = all(&events, &a).await;
    assert_eq!(kept.len(), 3, "oldest events go first");
    assert!(kept[0].json.contains("\"n\":2"));
    events.publish(&b, event(0));
    events.finish(&a);
    // A third run: the finished one goes, the running one stays.
    events.publish(&c, event(0));
    assert!(!events.exists(&a).await.unwrap());
    assert!(events.exists(&b).await.unwrap());
    assert!(events.exists(&c).await.unwrap());
    // The directory view: known runs, terminal once finished.
    events.finish(&b);
    let info = events.lookup("ns", "b").await.unwrap().unwrap();
    assert_eq!(info.run, b);
    assert!(info.terminal);
    assert!(events.lookup("ns", "a").await.unwrap().is_none());
}

#[tokio::test]
async fn a_new_run_with_an_old_name_starts_a_fresh_stream() {
    let events = MemoryEvents::default();
    let old = RunRef::new("ns", "same", "old-uid");
    let new = RunRef::new("ns", "same", "new-uid");
    events.publish(&old, event(1));
    events.publish(&new, event(2));
    assert!(!events.exists(&old).await.unwrap());
    let got = all(&events, &new).await;
    assert_eq!(got.len(), 1);
    assert!(got[0].json.contains("\"n\":2"));
    assert_eq!(
        events.lookup("ns", "same").await.unwrap().unwrap().run.uid,
        "new-uid"
    );
}

#[tokio::test(start_paused = true)]
async fn a_follower_woken_at_its_deadline_still_gets_the_event_that_woke_it() {
    let events = Arc::new(MemoryEvents::default());
    let run = run_ref();
    events.publish(&run, event(0));
    let first = all(&events, &run).await[0].id;
    let mut reader = events.reader(&run).await.unwrap();
    let waiter = tokio::spawn(async move {
        reader
            .next(Some(first), Duration::from_millis(100), 10)
            .await
    });
    // The follower is waiting; an event comes just as its wait runs out (a busy machine runs it
    // only after its deadline).
    tokio::task::yield_now().await;
    events.publish(&run, event(1));
    tokio::time::advance(Duration::from_millis(100)).await;
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(got.len(), 1, "the event that woke the follower was lost");
    assert!(got[0].json.contains("\"n\":1"));
}
