//! The metrics a run produces, checked against the Grafana dashboard and the alert rules: every
//! metric name their PromQL uses is in the `/metrics` exposition after a real run (scripted model,
//! real searx over the docs corpus), and the cost counter equals the run's accounted cost.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::watch;

use quarry_api::ResearchProfile;
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::searx::SearchStack;
use quarry_engine::research::machine::state::{Mode, Phase, RunInput, RunState};
use quarry_engine::research::shell::executor::{self, Control, NoopObserver};
use quarry_engine::store::memory::MemoryStore;
use quarry_engine::telemetry::{Metrics, PhaseLabel, RunLabels};
use quarry_operator::engine_builder;

const DASHBOARD: &str = include_str!("../../charts/quarry/files/dashboards/quarry.json");
const RULES: &str = include_str!("../../charts/quarry/files/alerts/quarry-rules.yaml");

/// Every PromQL expression of the dashboard and the rules.
fn expressions() -> Vec<String> {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut exprs: Vec<String> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().iter())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    for var in dashboard["templating"]["list"].as_array().unwrap() {
        if let Some(q) = var["query"]["query"].as_str() {
            exprs.push(q.to_string());
        }
    }
    let rules: serde_yaml::Value = serde_yaml::from_str(RULES).unwrap();
    assert_eq!(rules["kind"].as_str(), Some("PrometheusRule"));
    for group in rules["spec"]["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            exprs.push(rule["expr"].as_str().unwrap().to_string());
        }
    }
    exprs
}

fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\b(quarry_[a-z_]+|controller_runtime_[a-z_]+)\b").unwrap();
    re.find_iter(expr).map(|m| m.as_str().to_string()).collect()
}

/// Sample names in an OpenMetrics exposition.
fn sample_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_dashboard_and_rules_are_well_formed() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let vars: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(vars, vec!["datasource", "namespace", "model"]);
    let titles: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    for wanted in [
        "Spend per hour by namespace and model",
        "Spend per run (p50, p95)",
        "Tokens per second by model and kind",
        "Runs by phase",
        "Run success rate",
        "Run duration by mode (p50, p95)",
        "Model error rate",
        "Fallback rate",
        "Circuit breakers (0 closed, 1 half-open, 2 open)",
        "Search and fetch health",
        "Plans awaiting approval",
        "Schedule changes found",
        "Scheduled runs by decision",
    ] {
        assert!(
            titles.contains(&wanted),
            "missing panel {wanted}: {titles:?}"
        );
    }
    let rules: serde_yaml::Value = serde_yaml::from_str(RULES).unwrap();
    let alerts: Vec<&str> = rules["spec"]["groups"][0]["rules"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|r| r["alert"].as_str().unwrap())
        .collect();
    assert_eq!(
        alerts,
        vec![
            "QuarryRunStuck",
            "QuarrySpendRateHigh",
            "QuarryProviderCircuitOpen",
            "QuarryReconcileErrors",
            "QuarrySearchBackendCircuitOpen",
            "QuarrySearxngEnginesBlocked",
            "QuarryScheduleFoundChanges",
            "QuarryPlanAwaitingApproval"
        ]
    );
    // No label carries a run name.
    for e in expressions() {
        assert!(!e.contains("run=") && !e.contains("name="), "{e}");
    }
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn every_metric_the_dashboard_and_alerts_use_is_exported_after_a_run() {
    let stack = SearchStack::start_for("metrics_after_a_run").await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nJSON is a lightweight data interchange format ([json]({json_url}))."
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let profile =
        ResearchProfile::from_yaml(&scripted_profile(&model.base_url(), stack.searx.base_url()))
            .unwrap();
    let metrics = Metrics::new();
    let key = |_: &quarry_api::ModelTier| Some("sk-test".to_string());
    let engine = engine_builder::build_engine(
        &profile.spec,
        &key,
        Arc::new(MemoryStore::new()),
        Some(metrics.for_run("research", "scripted")),
    )
    .unwrap();
    let (_tx, rx) = watch::channel(Control::Run);
    let state = executor::run(
        Arc::new(engine),
        RunState::new(RunInput::new(
            "How do I decode JSON in Python?",
            Mode::Quick,
        )),
        Arc::new(NoopObserver),
        rx,
    )
    .await;
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    // What the controller records around a run (the same calls its status writer makes).
    metrics.set_run_phase("uid-1", "research", Some(PhaseLabel::Completed));
    metrics.record_reconcile(true, 0.01);
    metrics.record_reconcile(false, 0.02);
    // ... and what the schedule controller records (its reconciles, due times, changes found).
    metrics.record_reconcile_of("researchschedule", false, 0.01);
    metrics
        .schedule_runs
        .get_or_create(&quarry_engine::telemetry::ScheduleLabels {
            namespace: "research".into(),
            decision: quarry_engine::telemetry::ScheduleDecision::Created,
        })
        .inc();
    metrics
        .schedule_changes
        .get_or_create(&quarry_engine::telemetry::NamespaceLabels {
            namespace: "research".into(),
        })
        .inc_by(2);
    metrics.record_finished_run(
        &RunLabels {
            namespace: "research".into(),
            profile: "scripted".into(),
        },
        "quick",
        PhaseLabel::Completed,
        Some(12.0),
        state.usage.cost_pico_usd as f64 / 1e12,
        state.trace_id.clone(),
    );
    let exposition = metrics.encode().unwrap();
    let exported = sample_names(&exposition);
    let mut used = BTreeSet::new();
    for e in expressions() {
        used.extend(metric_names(&e));
    }
    assert!(used.len() >= 14, "{used:?}");
    let missing: Vec<&String> = used.iter().filter(|n| !exported.contains(*n)).collect();
    assert!(
        missing.is_empty(),
        "used but not exported: {missing:?}\n{exposition}"
    );

    // The cost counter equals the run's accounted cost: 9200 × 1.25 + 213 × 10 µUSD.
    let cost: f64 = exposition
        .lines()
        .filter(|l| l.starts_with("quarry_llm_cost_usd_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!((cost - 0.01363).abs() < 1e-12, "{cost}");
    assert_eq!(state.usage.cost_pico_usd, 13_630_000_000);
    assert!(exposition.contains("quarry_llm_requests_total{namespace=\"research\",profile=\"scripted\",provider=\"127.0.0.1\",model=\"scripted\",outcome=\"ok\"} 4\n"), "{exposition}");
    assert!(
        exposition.contains(
            "quarry_fetches_total{namespace=\"research\",profile=\"scripted\",outcome=\"ok\"} 1\n"
        ),
        "{exposition}"
    );
}
