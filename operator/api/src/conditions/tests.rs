//! Unit tests of `conditions`.

use super::*;

fn at(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

#[test]
fn new_condition_is_added_with_transition_time() {
    let mut conds = Vec::new();
    assert!(set_condition(
        &mut conds,
        types::STALLED,
        ConditionStatus::True,
        reasons::PROFILE_NOT_FOUND,
        "ResearchProfile default not found",
        Some(1),
        &at(100),
    ));
    assert_eq!(
        conds,
        vec![Condition {
            type_: "Stalled".into(),
            status: "True".into(),
            reason: "ProfileNotFound".into(),
            message: "ResearchProfile default not found".into(),
            observed_generation: Some(1),
            last_transition_time: at(100),
        }]
    );
}

#[test]
fn same_status_keeps_transition_time_but_updates_reason() {
    let mut conds = Vec::new();
    set_condition(
        &mut conds,
        "Stalled",
        ConditionStatus::True,
        "ProfileNotFound",
        "a",
        Some(1),
        &at(100),
    );
    assert!(set_condition(
        &mut conds,
        "Stalled",
        ConditionStatus::True,
        "SecretNotFound",
        "b",
        Some(2),
        &at(200)
    ));
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0].last_transition_time, at(100));
    assert_eq!(conds[0].reason, "SecretNotFound");
    assert_eq!(conds[0].message, "b");
    assert_eq!(conds[0].observed_generation, Some(2));
}

#[test]
fn identical_set_reports_no_change() {
    let mut conds = Vec::new();
    set_condition(
        &mut conds,
        "Ready",
        ConditionStatus::True,
        "Ready",
        "ok",
        Some(3),
        &at(100),
    );
    let before = conds.clone();
    assert!(!set_condition(
        &mut conds,
        "Ready",
        ConditionStatus::True,
        "Ready",
        "ok",
        Some(3),
        &at(500)
    ));
    assert_eq!(conds, before);
}

#[test]
fn status_change_moves_transition_time() {
    let mut conds = Vec::new();
    set_condition(
        &mut conds,
        "Succeeded",
        ConditionStatus::Unknown,
        "Running",
        "",
        Some(1),
        &at(100),
    );
    set_condition(
        &mut conds,
        "Reconciling",
        ConditionStatus::True,
        "Running",
        "",
        Some(1),
        &at(100),
    );
    assert!(set_condition(
        &mut conds,
        "Succeeded",
        ConditionStatus::True,
        "Completed",
        "done",
        Some(1),
        &at(300)
    ));
    let s = find_condition(&conds, "Succeeded").unwrap();
    assert_eq!(
        (s.status.as_str(), s.last_transition_time.clone()),
        ("True", at(300))
    );
    assert!(is_condition_true(&conds, "Succeeded"));
    assert!(is_condition_true(&conds, "Reconciling"));
    assert!(!is_condition_true(&conds, "Stalled"));
    assert!(remove_condition(&mut conds, "Reconciling"));
    assert!(!remove_condition(&mut conds, "Reconciling"));
    assert_eq!(conds.len(), 1);
}

#[test]
fn long_messages_are_truncated_on_a_char_boundary() {
    let mut conds = Vec::new();
    // 'é' is two bytes starting at odd offsets after the leading 'x', so byte 32768 falls inside one.
    let message = format!("x{}", "é".repeat(20_000));
    set_condition(
        &mut conds,
        "Degraded",
        ConditionStatus::True,
        "Failed",
        &message,
        None,
        &at(1),
    );
    assert_eq!(conds[0].message.len(), MAX_CONDITION_MESSAGE_BYTES - 1);
    assert!(message.starts_with(&conds[0].message));
}

#[test]
fn reasons_match_the_condition_reason_format() {
    let re = regex::Regex::new(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$").unwrap();
    for r in [
        reasons::PROFILE_NOT_FOUND,
        reasons::PROFILE_INVALID,
        reasons::SECRET_NOT_FOUND,
        reasons::SECRET_KEY_MISSING,
        reasons::SECRET_NOT_OPTED_IN,
        reasons::LIMITS_ABOVE_PROFILE,
        reasons::CONFIGMAP_NOT_OWNED,
        reasons::MODEL_UNREACHABLE,
        reasons::SEARCH_UNREACHABLE,
        reasons::PLAN_UNPARSEABLE,
        reasons::MODEL_OUTPUT_INVALID,
        reasons::POLICY_REFUSED,
        reasons::NO_SOURCES,
        reasons::SUSPENDED,
        reasons::CANCELLED,
        reasons::COMPLETED,
        reasons::RUNNING,
        reasons::TIME_LIMIT,
        reasons::COST_LIMIT,
        reasons::TOKEN_LIMIT,
        reasons::ROUND_LIMIT,
        reasons::FAILED,
        reasons::RESOLVED,
        reasons::READY,
    ] {
        assert!(re.is_match(r), "{r}");
    }
}
