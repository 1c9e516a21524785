//! Unit tests of `decide`.

use super::{Next, next};
use crate::research_run::registry::{Presence, Signal};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use quarry_api::{Phase, ResearchRun, ResearchRunSpec, ResearchRunStatus};

fn run(extra: &str) -> ResearchRun {
    let spec: ResearchRunSpec =
        serde_yaml::from_str(&format!("query: what is CEL?\n{extra}")).unwrap();
    ResearchRun::new("r1", spec)
}

#[test]
fn a_new_run_starts_and_a_cancelled_or_suspended_one_is_written_as_it_stands() {
    assert_eq!(next(&run(""), Presence::Absent), Next::Start);
    assert_eq!(next(&run(""), Presence::Stopped), Next::Start);
    assert_eq!(
        next(&run("cancel: true\nsuspend: true"), Presence::Absent),
        Next::Cancel
    );
    assert_eq!(
        next(&run("suspend: true"), Presence::Stopped),
        Next::Suspend
    );
}

#[test]
fn a_running_task_gets_the_spec_signal_and_an_ended_one_is_left_to_its_writer() {
    assert_eq!(
        next(&run("suspend: true"), Presence::Active),
        Next::Signal(Signal::Suspend)
    );
    assert_eq!(next(&run(""), Presence::Finished), Next::TaskEnded);
}

#[test]
fn deletion_wins_then_a_finished_phase() {
    let mut finished = run("cancel: true");
    finished.status = Some(ResearchRunStatus {
        phase: Some(Phase::Completed),
        ..Default::default()
    });
    assert_eq!(next(&finished, Presence::Active), Next::Finished);
    let mut deleted = finished.clone();
    deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(next(&deleted, Presence::Active), Next::Forget);
}
