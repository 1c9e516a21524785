//! Unit tests of `critical_path`.

use super::*;

fn span(kind: &str, purpose: Option<&str>, task: Option<u32>, start: i64, end: i64) -> Span {
    Span {
        kind: kind.into(),
        purpose: purpose.map(str::to_string),
        task,
        start_ms: start,
        end_ms: end,
    }
}

fn shape(rounds: &[(u32, u32)], researcher_slots: usize) -> Shape {
    Shape {
        round_of: rounds.iter().copied().collect(),
        researcher_slots,
        summary_slots: 2,
    }
}

#[test]
fn parses_the_engines_lines() {
    let log = r#"{"time":"2025-01-01T00:00:01.250Z","kind":"modelCall","purpose":"research","durationMs":200,"task":3}
{"time":"2025-01-01T00:00:01.300Z","kind":"fetch","subject":"u","cache":"miss","outcome":"ok","durationMs":20}
{"time":"2025-01-01T00:00:02.000Z","kind":"other"}
"#;
    let spans = parse(log).unwrap();
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].task, Some(3));
    assert_eq!(spans[0].end_ms - spans[0].start_ms, 200);
    assert_eq!(spans[1].purpose, None);
    assert_eq!(spans[1].end_ms - spans[0].end_ms, 50);
    assert!(parse("{not json").is_err());
}

#[test]
fn parallel_researchers_count_once_and_batches_count_as_their_union() {
    let spans = vec![
        span("modelCall", Some("plan"), None, 0, 200),
        // Researcher 0: 200 model + a batch of two 20 ms reads at once + 200 model.
        span("modelCall", Some("research"), Some(0), 210, 410),
        span("fetch", None, Some(0), 410, 430),
        span("fetch", None, Some(0), 411, 431),
        span("modelCall", Some("research"), Some(0), 431, 631),
        // Researcher 1 overlaps and is shorter.
        span("modelCall", Some("research"), Some(1), 215, 415),
        span("modelCall", Some("evaluate"), None, 640, 840),
        span("modelCall", Some("synthesize"), None, 850, 1050),
    ];
    let cp = derive(&spans, &shape(&[(0, 1), (1, 1)], 3));
    // 200 + (200 + 21 + 200) + 200 + 200.
    assert_eq!(cp.total_ms, 1021, "{cp:?}");
    let names: Vec<&str> = cp.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "plan",
            "round 1 (2 researchers, 5 calls)",
            "evaluate (1 calls)",
            "write (1 calls)"
        ]
    );
}

#[test]
fn slots_limit_what_runs_at_once() {
    // Three 100 ms researchers on two slots: two waves.
    let spans: Vec<Span> = (0..3)
        .map(|t| span("modelCall", Some("research"), Some(t), 0, 100))
        .collect();
    assert_eq!(
        derive(&spans, &shape(&[(0, 1), (1, 1), (2, 1)], 2)).total_ms,
        200
    );
    assert_eq!(
        derive(&spans, &shape(&[(0, 1), (1, 1), (2, 1)], 3)).total_ms,
        100
    );
    // Five summaries on two slots: three waves.
    let spans: Vec<Span> = (0..5)
        .map(|i| span("modelCall", Some("summarize"), None, i, i + 100))
        .collect();
    assert_eq!(derive(&spans, &shape(&[], 1)).total_ms, 300);
}

#[test]
fn rounds_are_sequential() {
    let spans = vec![
        span("modelCall", Some("research"), Some(0), 0, 100),
        span("modelCall", Some("research"), Some(1), 500, 650),
    ];
    let cp = derive(&spans, &shape(&[(0, 1), (1, 2)], 3));
    assert_eq!(cp.total_ms, 250);
    assert_eq!(cp.stages.len(), 2);
}

#[test]
fn union_and_makespan_edge_cases() {
    assert_eq!(union_len(vec![]), 0);
    assert_eq!(union_len(vec![(0, 10), (5, 20), (30, 40)]), 30);
    assert_eq!(makespan(vec![], 3), 0);
    assert_eq!(makespan(vec![(0, 5)], 0), 5);
}
