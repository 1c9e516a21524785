//! Unit tests of `schedules`.

use super::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use quarry_api::{ResearchScheduleStatus, ScheduleReport};

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

fn schedule(name: &str, suspend: bool) -> ResearchSchedule {
    let mut s: ResearchSchedule = serde_json::from_value(serde_json::json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule",
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": "2026-11-20T07:00:00Z"},
            "spec": {"schedule": "0 7 * * *", "timeZone": "Europe/Berlin", "suspend": suspend,
                     "runTemplate": {"spec": {"query": "New OpenSSL advisories?", "mode": "quick"}}}
        }))
        .unwrap();
    s.status = Some(ResearchScheduleStatus {
        last_schedule_time: Some(at(1_000_000 - 120)),
        next_schedule_time: (!suspend).then(|| at(1_000_000 + 3600)),
        active: vec![format!("{name}-16666")],
        last_report: Some(ScheduleReport {
            run: format!("{name}-16600"),
            config_map: Some(format!("{name}-16600-report")),
            object_url: None,
        }),
        last_changes: Some(3),
        ..Default::default()
    });
    s
}

#[test]
fn the_table_shows_state_times_report_and_changes() {
    let now = Timestamp::from_second(1_000_000).unwrap();
    let text = schedules_table(
        &[schedule("advisories", false), schedule("paused", true)],
        now,
        true,
        true,
    );
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("NAMESPACE") && lines[0].contains("CHANGES"),
        "{text}"
    );
    assert!(
        lines[1].contains("advisories") && lines[1].contains("Active"),
        "{text}"
    );
    assert!(
        lines[1].contains("2m ago") && lines[1].contains("in 60m"),
        "{text}"
    );
    assert!(
        lines[1].contains("advisories-16600") && lines[1].contains("Europe/Berlin"),
        "{text}"
    );
    assert!(lines[2].contains("Suspended"), "{text}");
}

#[test]
fn one_schedule_names_its_report_and_why_it_is_stalled() {
    let now = Timestamp::from_second(1_000_000).unwrap();
    let mut s = schedule("advisories", false);
    let text = describe(&s, &[], now);
    assert!(text.contains("Report:     advisories-16600 (ConfigMap advisories-16600-report); quarry report advisories-16600"), "{text}");
    assert!(
        text.contains("Changes:    3 since the run before"),
        "{text}"
    );
    assert!(text.contains("none yet"), "{text}");
    if let Some(status) = s.status.as_mut() {
        quarry_api::set_condition(
            &mut status.conditions,
            condition_types::STALLED,
            quarry_api::ConditionStatus::True,
            "ScheduleInvalid",
            "spec.timeZone \"Mars/Olympus\" is not an IANA time zone",
            None,
            &at(1_000_000),
        );
    }
    assert_eq!(state(&s), "Stalled");
    assert!(describe(&s, &[], now).contains("Stalled:    ScheduleInvalid — spec.timeZone"));
}
