//! Unit tests of `plan`.

use super::*;
use chrono::TimeZone;

fn at(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 25, h, m, 0).unwrap()
}

fn policy(concurrency: ConcurrencyPolicy) -> Policy {
    Policy {
        concurrency,
        starting_deadline_secs: None,
        suspend: false,
        keep_successful: 2,
        keep_failed: 1,
    }
}

fn run(name: &str, scheduled_at: DateTime<Utc>, succeeded: Option<bool>) -> Run {
    Run {
        name: name.into(),
        scheduled_at,
        succeeded,
    }
}

#[test]
fn patterns_and_zones_are_checked() {
    assert!(When::parse("0 7 * * 1-5", None).is_ok());
    assert!(When::parse("@daily", Some("Europe/Berlin")).is_ok());
    assert!(matches!(
        When::parse("61 * * * *", None),
        Err(WhenError::Pattern { .. })
    ));
    assert!(matches!(
        When::parse("0 7 * * *", Some("Mars/Olympus")),
        Err(WhenError::Zone { .. })
    ));
}

#[test]
fn the_time_zone_decides_when_a_daily_run_is_due() {
    let berlin = When::parse("0 7 * * *", Some("Europe/Berlin")).unwrap();
    // 07:00 in Berlin is 06:00 UTC in November.
    assert_eq!(berlin.next_after(at(5, 0)), Some(at(6, 0)));
    let utc = When::parse("0 7 * * *", None).unwrap();
    assert_eq!(utc.next_after(at(5, 0)), Some(at(7, 0)));
}

#[test]
fn a_due_time_creates_one_run_and_the_next_time_is_known() {
    let when = When::parse("*/15 * * * *", None).unwrap();
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Forbid),
        &[],
        None,
        at(8, 0),
        at(8, 16),
    );
    assert_eq!(p.create, Some(at(8, 15)));
    assert_eq!(p.last_schedule, Some(at(8, 15)));
    assert_eq!(p.next, Some(at(8, 30)));
    // Reconciled again before the status write landed: the run exists, nothing new.
    let runs = [run(&run_name("s", at(8, 15)), at(8, 15), None)];
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Forbid),
        &runs,
        None,
        at(8, 0),
        at(8, 16),
    );
    assert_eq!(p.create, None);
    // Nothing is due before the schedule existed.
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Forbid),
        &[],
        None,
        at(8, 16),
        at(8, 20),
    );
    assert_eq!(p.create, None);
}

#[test]
fn after_downtime_only_the_latest_missed_time_is_made_up_within_the_deadline() {
    let when = When::parse("*/15 * * * *", None).unwrap();
    // Down from 8:05 to 9:10: 8:15, 8:30, 8:45, 9:00 were missed; one run, for 9:00.
    let mut pol = policy(ConcurrencyPolicy::Allow);
    let p = plan(&when, &pol, &[], Some(at(8, 0)), at(7, 0), at(9, 10));
    assert_eq!(p.create, Some(at(9, 0)));
    // With a 5-minute starting deadline, 9:00 is 10 minutes late: skipped, not made up.
    pol.starting_deadline_secs = Some(300);
    let p = plan(&when, &pol, &[], Some(at(8, 0)), at(7, 0), at(9, 10));
    assert_eq!(p.create, None);
    assert_eq!(p.skipped.map(|s| s.0), Some(at(9, 0)));
    assert_eq!(p.last_schedule, Some(at(9, 0)));
}

#[test]
fn concurrency_policies_forbid_allow_and_replace() {
    let when = When::parse("0 * * * *", None).unwrap();
    let runs = [run("s-old", at(8, 0), None)];
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Forbid),
        &runs,
        Some(at(8, 0)),
        at(7, 0),
        at(9, 1),
    );
    assert_eq!((p.create, p.skipped.map(|s| s.0)), (None, Some(at(9, 0))));
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Allow),
        &runs,
        Some(at(8, 0)),
        at(7, 0),
        at(9, 1),
    );
    assert_eq!((p.create, p.cancel.len()), (Some(at(9, 0)), 0));
    let p = plan(
        &when,
        &policy(ConcurrencyPolicy::Replace),
        &runs,
        Some(at(8, 0)),
        at(7, 0),
        at(9, 1),
    );
    assert_eq!(
        (p.create, p.cancel),
        (Some(at(9, 0)), vec!["s-old".to_string()])
    );
}

#[test]
fn suspended_schedules_make_nothing_and_history_keeps_the_newest() {
    let when = When::parse("0 * * * *", None).unwrap();
    let runs = [
        run("ok-5", at(5, 0), Some(true)),
        run("ok-6", at(6, 0), Some(true)),
        run("ok-7", at(7, 0), Some(true)),
        run("bad-3", at(3, 0), Some(false)),
        run("bad-4", at(4, 0), Some(false)),
        run("going", at(8, 0), None),
    ];
    let mut pol = policy(ConcurrencyPolicy::Allow);
    pol.suspend = true;
    let p = plan(&when, &pol, &runs, Some(at(8, 0)), at(1, 0), at(9, 30));
    assert_eq!(p.create, None);
    assert_eq!(p.delete, vec!["ok-5".to_string(), "bad-3".to_string()]);
    assert_eq!(p.next, Some(at(10, 0)));
}

#[test]
fn run_names_are_valid_and_stable() {
    let name = run_name("weekly-advisories", at(9, 0));
    assert_eq!(
        name,
        format!("weekly-advisories-{}", at(9, 0).timestamp() / 60)
    );
    let long = run_name(&"a".repeat(80), at(9, 0));
    assert!(long.len() <= 63, "{long}");
    assert_eq!(long, run_name(&"a".repeat(80), at(9, 0)));
}
