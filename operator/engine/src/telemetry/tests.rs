//! Unit tests of `telemetry`.

use super::*;

#[test]
fn zeroed_reconcile_error_reasons_are_exported_before_any_error() {
    let metrics = Metrics::new();
    assert!(
        !metrics
            .encode()
            .unwrap()
            .contains("quarry_reconcile_errors_total")
    );
    metrics.zero_reconcile_errors(&["KubeApi", "Config"]);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("quarry_reconcile_errors_total{reason=\"KubeApi\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("quarry_reconcile_errors_total{reason=\"Config\"} 0"),
        "{text}"
    );
}

#[test]
fn a_watched_namespaces_schedule_series_start_at_zero() {
    let metrics = Metrics::new();
    metrics.zero_schedule_series("team");
    let text = metrics.encode().unwrap();
    for decision in ["Created", "Skipped", "Replaced"] {
        let line =
            format!("quarry_schedule_runs_total{{namespace=\"team\",decision=\"{decision}\"}} 0");
        assert!(text.contains(&line), "{text}");
    }
    assert!(
        text.contains("quarry_schedule_changes_total{namespace=\"team\"} 0"),
        "{text}"
    );
    // The ResearchSchedule controller's error series exists before any error.
    assert!(
        text.contains(
            "controller_runtime_reconcile_errors_total{controller=\"researchschedule\"} 0"
        ),
        "{text}"
    );
}

#[test]
fn encodes_openmetrics_with_expected_names() {
    let metrics = Metrics::new();
    metrics.reconciliations.inc();
    metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            reason: "KubeApi".into(),
        })
        .inc();
    let run = metrics.for_run("ns", "default");
    run.llm_request(
        "127.0.0.1",
        "m",
        "ok",
        Some(&crate::llm::Usage {
            cached_input_tokens: 0,
            input_tokens: 100,
            output_tokens: 20,
            cost_pico_usd: 1_500_000_000_000,
            llm_calls: 1,
        }),
        Some(0.2),
        Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
    );
    run.llm_request("127.0.0.1", "m", "rate_limited", None, Some(0.1), None);
    run.breaker_state("127.0.0.1", "m", 2);
    run.rate_limit_wait("127.0.0.1", "m", std::time::Duration::from_millis(500));
    for outcome in ["ok", "ok", "ok", "empty"] {
        run.search(outcome);
    }
    run.fetch("error");
    metrics
        .reconcile_total
        .get_or_create(&ControllerResultLabels {
            controller: "researchrun".into(),
            result: "success".into(),
        })
        .inc();
    metrics.record_finished_run(
        &RunLabels {
            namespace: "ns".into(),
            profile: "default".into(),
        },
        "deep",
        PhaseLabel::Completed,
        Some(3.0),
        0.25,
        Some("0af7651916cd43dd8448eb211c80319c".into()),
    );
    let text = metrics.encode().unwrap();
    assert!(text.contains("quarry_run_duration_seconds_bucket{le=\"4.0\",mode=\"deep\",outcome=\"Completed\"} 1 # {trace_id=\"0af7651916cd43dd8448eb211c80319c\"} 3.0\n"), "{text}");
    assert!(
        text.contains("quarry_run_cost_usd_count{namespace=\"ns\",profile=\"default\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("quarry_reconciliations_total 1\n"), "{text}");
    assert!(
        text.contains("quarry_reconcile_errors_total{reason=\"KubeApi\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "controller_runtime_reconcile_total{controller=\"researchrun\",result=\"success\"} 1\n"
        ),
        "{text}"
    );
    // Families without samples are not exposed at all (prometheus-client's encoder).
    assert!(
        !text.contains("controller_runtime_reconcile_time_seconds"),
        "{text}"
    );
    let ep = "provider=\"127.0.0.1\",model=\"m\"";
    assert!(text.contains(&format!("quarry_llm_requests_total{{namespace=\"ns\",profile=\"default\",{ep},outcome=\"ok\"}} 1\n")), "{text}");
    assert!(text.contains(&format!("quarry_llm_requests_total{{namespace=\"ns\",profile=\"default\",{ep},outcome=\"rate_limited\"}} 1\n")), "{text}");
    assert!(text.contains(&format!("quarry_llm_tokens_total{{namespace=\"ns\",profile=\"default\",{ep},kind=\"input\"}} 100\n")), "{text}");
    assert!(text.contains(&format!("quarry_llm_tokens_total{{namespace=\"ns\",profile=\"default\",{ep},kind=\"output\"}} 20\n")), "{text}");
    assert!(
        text.contains(&format!(
            "quarry_llm_cost_usd_total{{namespace=\"ns\",profile=\"default\",{ep}}} 1.5\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "quarry_llm_request_duration_seconds_count{{{ep}}} 2\n"
        )),
        "{text}"
    );
    // The trace id rides along as the exemplar of the bucket the call landed in.
    assert!(
            text.contains(&format!("quarry_llm_request_duration_seconds_bucket{{le=\"0.2\",{ep}}} 2 # {{trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"}} 0.2\n")),
            "{text}"
        );
    assert!(
        text.contains(&format!("quarry_llm_circuit_breaker_state{{{ep}}} 2\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("quarry_llm_rate_limit_waits_total{{{ep}}} 1\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "quarry_llm_rate_limit_wait_seconds_total{{{ep}}} 0.5\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "quarry_searches_total{namespace=\"ns\",profile=\"default\",outcome=\"ok\"} 3\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "quarry_fetches_total{namespace=\"ns\",profile=\"default\",outcome=\"error\"} 1\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn search_health_failover_and_cache_metrics_are_exported() {
    use crate::sources::failover::FailoverObserver;
    let metrics = Metrics::new();
    metrics.set_engine_state("ns/default", "bing", "Healthy");
    metrics.set_engine_state("ns/default", "bing", "Captcha");
    metrics.on_call("searxng", "error");
    metrics.on_call("brave", "ok");
    metrics.on_breaker("searxng", 2);
    metrics.cache_lookup("page", "redis", "hit");
    metrics.record_reconcile_of("searchengine", true, 0.01);
    let text = metrics.encode().unwrap();
    for line in [
        "quarry_search_engine_state{backend=\"ns/default\",engine=\"bing\",state=\"Captcha\"} 1",
        "quarry_search_engine_state{backend=\"ns/default\",engine=\"bing\",state=\"Healthy\"} 0",
        "quarry_search_backend_requests_total{backend=\"searxng\",outcome=\"error\"} 1",
        "quarry_search_backend_requests_total{backend=\"brave\",outcome=\"ok\"} 1",
        "quarry_search_backend_circuit_breaker_state{backend=\"searxng\"} 2",
        "quarry_cache_requests_total{kind=\"page\",backend=\"redis\",result=\"hit\"} 1",
        "controller_runtime_reconcile_total{controller=\"searchengine\",result=\"success\"} 1",
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn run_phase_gauge_counts_each_run_once() {
    let metrics = Metrics::new();
    let get = |phase| {
        metrics
            .runs
            .get_or_create(&PhaseLabels {
                namespace: "ns".into(),
                phase,
            })
            .get()
    };
    metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Pending));
    metrics.set_run_phase("u2", "ns", Some(PhaseLabel::Pending));
    metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Researching));
    metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Researching));
    assert_eq!(get(PhaseLabel::Pending), 1);
    assert_eq!(get(PhaseLabel::Researching), 1);
    metrics.set_run_phase("u1", "ns", None);
    metrics.set_run_phase("u1", "ns", None);
    assert_eq!(get(PhaseLabel::Researching), 0);
    assert_eq!(get(PhaseLabel::Pending), 1);
    metrics.retain_runs(|uid| uid != "u2");
    assert_eq!(get(PhaseLabel::Pending), 0);
    assert_eq!(
        PhaseLabel::from_phase_name("Completed"),
        Some(PhaseLabel::Completed)
    );
    assert_eq!(PhaseLabel::from_phase_name("nope"), None);
}
