//! Unit tests of `table`.

use super::*;
use serde_json::json;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(seconds).unwrap()
}

#[test]
fn ages_follow_kubectl() {
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (200, "3m20s"),
        (600, "10m"),
        (179 * 60, "179m"),
        (3 * 3600, "3h"),
        (5 * 3600 + 10 * 60, "5h10m"),
        (8 * 3600 + 59 * 60, "8h"),
        (47 * 3600, "47h"),
        (48 * 3600, "2d"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (20 * 86400, "20d"),
        (2 * 365 * 86400 + 30 * 86400, "2y30d"),
        (9 * 365 * 86400, "9y"),
    ];
    for (seconds, text) in cases {
        assert_eq!(human_duration(seconds), text, "{seconds}");
    }
}

fn run(value: serde_json::Value) -> ResearchRun {
    serde_json::from_value(value).unwrap()
}

fn sample() -> Vec<ResearchRun> {
    vec![
        run(json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": "vacuum-full", "namespace": "team-a", "creationTimestamp": "1970-01-01T00:00:00Z"},
            "spec": {"query": "What does VACUUM FULL lock in PostgreSQL?", "mode": "quick"},
            "status": {"phase": "Completed", "progress": "100%",
                       "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630"},
                       "report": {"configMap": "vacuum-full-report", "sources": 3}}
        })),
        run(json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": "json", "namespace": "team-b", "creationTimestamp": "1970-01-01T02:00:00Z"},
            "spec": {"query": "How do I decode JSON with the json module in Python, and which errors can it raise?"}
        })),
    ]
}

#[test]
fn tables_match_kubectl_layout() {
    let now = at(3 * 3600);
    assert_eq!(
        runs_table(&sample(), now, false, false),
        "NAME          PHASE       PROGRESS   COST        SOURCES   AGE\n\
             vacuum-full   Completed   100%       $0.013630   3         3h\n\
             json          Pending     -          -           -         60m\n"
    );
    assert_eq!(
        runs_table(&sample(), now, true, true),
        "NAMESPACE   NAME          PHASE       PROGRESS   COST        SOURCES   AGE   MODE    PROFILE   TOKENS   QUERY\n\
             team-a      vacuum-full   Completed   100%       $0.013630   3         3h    quick   default   9413     What does VACUUM FULL lock in PostgreSQL?\n\
             team-b      json          Pending     -          -           -         60m   deep    default   -        How do I decode JSON with the json module in Py…\n"
    );
}

#[test]
fn progress_and_outcome_lines() {
    let mut r = sample().remove(0);
    assert_eq!(
        progress_line(&r),
        "[Completed] 100% | 0 searches, 0 pages read | 9413 tok | $0.013630"
    );
    assert_eq!(
        outcome_line(&r),
        "researchrun/vacuum-full Completed: 3 sources, $0.013630; report in ConfigMap vacuum-full-report (quarry report vacuum-full)"
    );
    r.status = Some(
            serde_json::from_value(json!({
                "phase": "Pending", "message": "waiting",
                "conditions": [{"type": "Stalled", "status": "True", "reason": "ProfileNotFound",
                                "message": "ResearchProfile \"default\" not found", "lastTransitionTime": "1970-01-01T00:00:00Z"}]
            }))
            .unwrap(),
        );
    assert_eq!(
        progress_line(&r),
        "[Pending] - | 0 searches, 0 pages read | 0 tok | - | stalled (ProfileNotFound): ResearchProfile \"default\" not found"
    );
}

#[test]
fn a_plan_awaiting_approval_shows_as_such_until_the_run_ends() {
    let waiting = run(json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
        "metadata": {"name": "r"},
        "spec": {"query": "What does VACUUM FULL lock?", "approval": {"required": true}},
        "status": {"phase": "Planning", "conditions": [{
            "type": "AwaitingApproval", "status": "True", "reason": "PlanReady",
            "message": "waits", "lastTransitionTime": "1970-01-01T00:00:00Z"
        }]}
    }));
    assert_eq!(phase_label(&waiting), "AwaitingApproval");
    assert!(progress_line(&waiting).starts_with("[AwaitingApproval]"));
    let mut ended = waiting.clone();
    if let Some(s) = ended.status.as_mut() {
        s.phase = Some(quarry_api::Phase::Cancelled);
    }
    assert_eq!(phase_label(&ended), "Cancelled");
}
