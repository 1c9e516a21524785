//! Unit tests of `registry`.

use super::*;
use quarry_engine::research::machine::state::{Mode, Phase, RunInput};

fn state(phase: Phase) -> RunState {
    let mut s = RunState::new(RunInput::new("q", Mode::Quick));
    s.phase = phase;
    s
}

#[tokio::test]
async fn one_task_per_uid_and_signals_reach_it() {
    let registry = Registry::new();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let started = registry.start(
        "u1",
        |mut control| {
            Box::pin(async move {
                loop {
                    if *control.borrow_and_update() == Signal::Cancel {
                        return state(Phase::Cancelled);
                    }
                    if control.changed().await.is_err() {
                        return state(Phase::Failed);
                    }
                }
            })
        },
        move |s| {
            let _ = done_tx.send(s.phase);
        },
    );
    assert!(started);
    assert_eq!(registry.presence("u1"), Presence::Active);
    assert!(!registry.start(
        "u1",
        |_| Box::pin(async { state(Phase::Completed) }),
        |_| {}
    ));
    assert!(registry.signal("u1", Signal::Suspend));
    assert!(registry.signal("u1", Signal::Cancel));
    assert_eq!(done_rx.await.unwrap(), Phase::Cancelled);
    assert_eq!(registry.presence("u1"), Presence::Finished);
    assert_eq!(registry.final_state("u1").unwrap().phase, Phase::Cancelled);
    assert!(!registry.signal("u1", Signal::Cancel));
    assert!(!registry.start(
        "u1",
        |_| Box::pin(async { state(Phase::Completed) }),
        |_| {}
    ));
    registry.forget("u1");
    assert_eq!(registry.presence("u1"), Presence::Absent);
}

#[tokio::test]
async fn abort_all_stops_running_tasks_without_their_completion() {
    let registry = Registry::new();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = done.clone();
    registry.start(
        "u1",
        move |_| {
            Box::pin(async move {
                // Holds the sender until aborted: the receiver then sees it dropped.
                let _tx = tx;
                std::future::pending::<()>().await;
                state(Phase::Completed)
            })
        },
        move |_| seen.store(true, std::sync::atomic::Ordering::SeqCst),
    );
    assert_eq!(registry.abort_all(), 1);
    assert!(rx.await.is_err(), "the task was dropped");
    assert!(
        !done.load(std::sync::atomic::Ordering::SeqCst),
        "no completion ran"
    );
    assert_eq!(registry.presence("u1"), Presence::Stopped);
    assert_eq!(registry.abort_all(), 0);
}

#[tokio::test]
async fn a_stopped_task_may_start_again() {
    let registry = Registry::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    registry.start(
        "u1",
        |_| Box::pin(async { state(Phase::Researching) }),
        move |_| {
            let _ = tx.send(());
        },
    );
    rx.await.unwrap();
    assert_eq!(registry.presence("u1"), Presence::Stopped);
    assert!(registry.start("u1", |_| Box::pin(std::future::pending()), |_| {}));
    assert_eq!(registry.presence("u1"), Presence::Active);
}

#[tokio::test]
async fn forget_drops_the_task_the_report_location_and_the_status_writer_at_once() {
    let registry = Registry::new();
    let started = registry.start(
        "u1",
        |mut control| {
            Box::pin(async move {
                let _ = control.wait_for(|s| *s == Signal::Cancel).await;
                state(Phase::Cancelled)
            })
        },
        |_| {},
    );
    assert!(started);
    let slot = ReportSlot::default();
    slot.set(ReportLocation::ConfigMap("r1-report".into()));
    registry.set_report("u1", slot);
    let run = Arc::new(ResearchRun::new(
        "r1",
        serde_yaml::from_str("query: q").unwrap(),
    ));
    let (first, _rx) = registry.subscribe_writer("u1", &run);
    let (second, _rx2) = registry.subscribe_writer("u1", &run);
    assert_ne!(first, second, "every writer gets its own id");
    registry.unsubscribe_writer("u1", first);
    assert!(
        registry.has_writer("u1"),
        "an older writer leaves a newer one"
    );
    assert_eq!(
        registry.report_location("u1"),
        Some(ReportLocation::ConfigMap("r1-report".into()))
    );
    registry.forget("u1");
    assert_eq!(registry.presence("u1"), Presence::Absent);
    assert!(!registry.has_writer("u1"));
    assert_eq!(registry.report_location("u1"), None);
}
