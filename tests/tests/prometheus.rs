//! The Grafana dashboard and the alert rules on a real Prometheus (Debian's `prometheus` package):
//!
//! - `promtool check rules` on the PrometheusRule's groups and `promtool test rules` on
//!   `charts/quarry/files/alerts/tests/quarry-rules.test.yaml`, which must have a firing and a
//!   quiet case for every alert;
//! - the operator on the real API server runs scripted research while a Prometheus of the test's
//!   own scrapes it every second; afterwards every expression of the dashboard is evaluated through
//!   Prometheus's HTTP API as Grafana would send it (stat panels as instant queries at the end of
//!   the time range, time series as range queries over it) and must answer plausibly: spend equals
//!   the runs' `status.usage.costUSD` within a cent, runs by phase count the runs, rates are
//!   positive, ratios within 0..1, quantiles within the histogram buckets of what was observed.
//!
//! rate() and increase() take a series' first sample as its start: the first model call after the
//! operator starts is invisible to a rate. A long-running operator has its series; here a warm-up
//! round (one plain run, one whose model fails once, the schedule's first run) plays that part,
//! and the dashboard's time range is the measured round after it. The scenario makes every panel
//! move: the primary model answers one call with HTTP 500 (error rate, fallbacks, an open
//! breaker), its endpoint is rate limited (waits), pages are fetched twice (page cache hits), the
//! search stub reports engines with a CAPTCHA and a suspension, a plan waits for approval and one
//! is rejected, a schedule runs twice (its second run finds a change) and a schedule whose template
//! the API server refuses fails its reconciles. A second evaluation over the whole test checks the
//! stat panels where every series is new.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::dashboard::{self, Facts};
use quarry_e2e::kube_operator::{Operator, OperatorOptions, apply, wait_for};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, ScriptedModelHandle, Step};
use quarry_e2e::prometheus::{Prometheus, promtool, rule_file_of, unix_now};
use serde_json::{Value, json};

const DASHBOARD: &str = include_str!("../../charts/quarry/files/dashboards/quarry.json");
const RULES: &str = include_str!("../../charts/quarry/files/alerts/quarry-rules.yaml");
const RULE_TESTS: &str =
    include_str!("../../charts/quarry/files/alerts/tests/quarry-rules.test.yaml");
/// The rule file the unit tests name (the PrometheusRule's groups, written by the test).
const RULE_FILE: &str = "quarry-rules.groups.yaml";

/// Alerts of the rules without a unit test expecting them to fire, and without one expecting
/// them quiet.
fn uncovered(alerts: &[String], tests: &serde_yaml::Value) -> (Vec<String>, Vec<String>) {
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for group in tests["tests"].as_sequence().into_iter().flatten() {
        for case in group["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = case["alertname"].as_str().unwrap_or_default().to_string();
            let expected = case["exp_alerts"].as_sequence().map_or(0, Vec::len);
            if expected > 0 {
                firing.insert(name);
            } else {
                quiet.insert(name);
            }
        }
    }
    let missing = |seen: &BTreeSet<String>| {
        alerts
            .iter()
            .filter(|a| !seen.contains(*a))
            .cloned()
            .collect()
    };
    (missing(&firing), missing(&quiet))
}

fn alert_names(rule_file: &str) -> Vec<String> {
    let groups: serde_yaml::Value = serde_yaml::from_str(rule_file).unwrap();
    groups["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().into_iter().flatten())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect()
}

#[test]
#[ignore = "needs prometheus (promtool; scripts/install-test-deps.sh installs Debian's prometheus)"]
fn promtool_checks_the_rules_and_unit_tests_every_alert() {
    let rule_file = rule_file_of(RULES).unwrap();
    let alerts = alert_names(&rule_file);
    assert!(alerts.len() >= 8, "{alerts:?}");
    let tests: serde_yaml::Value = serde_yaml::from_str(RULE_TESTS).unwrap();
    let named: Vec<&str> = tests["rule_files"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert_eq!(named, vec![RULE_FILE], "the unit tests' rule_files");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(RULE_FILE), &rule_file).unwrap();
    std::fs::write(dir.path().join("quarry-rules.test.yaml"), RULE_TESTS).unwrap();
    let checked = promtool(dir.path(), &["check", "rules", RULE_FILE]).unwrap();
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", alerts.len())),
        "{checked}"
    );
    let tested = promtool(dir.path(), &["test", "rules", "quarry-rules.test.yaml"]).unwrap();
    assert!(tested.contains("SUCCESS"), "{tested}");

    // Every alert fires in some case and stays quiet in another; no case names an unknown alert.
    let (no_firing, no_quiet) = uncovered(&alerts, &tests);
    assert!(
        no_firing.is_empty(),
        "alerts never expected to fire: {no_firing:?}"
    );
    assert!(
        no_quiet.is_empty(),
        "alerts never expected quiet: {no_quiet:?}"
    );
    let (unknown, _) = uncovered(
        &[alerts.clone(), vec!["QuarryNotThere".into()]].concat(),
        &tests,
    );
    assert_eq!(
        unknown,
        vec!["QuarryNotThere"],
        "the comparison finds a gap"
    );
    for group in tests["tests"].as_sequence().unwrap() {
        for case in group["alert_rule_test"].as_sequence().unwrap() {
            let name = case["alertname"].as_str().unwrap();
            assert!(
                alerts.iter().any(|a| a == name),
                "a case for unknown alert {name}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The scenario on the real API server.

/// Search results over two pages, and two engines SearXNG reports blocked.
async fn start_web() -> Result<(String, tokio::task::JoinHandle<()>), String> {
    use axum::response::Html;
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let page = |title: &str, text: &str| {
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title></head><body><main><article><h1>{title}</h1><p>{text}</p></article></main></body></html>"
        )
    };
    let cel = page(
        "CEL in Kubernetes",
        "The Common Expression Language (CEL) declares validation rules of CustomResourceDefinitions. The API server evaluates them at admission, so invalid objects are rejected before they are stored. A transition rule compares self with oldSelf.",
    );
    let ssa = page(
        "Server-Side Apply",
        "Server-Side Apply tracks field ownership per field manager and merges applied configuration on the server.",
    );
    let results = json!([
        {"url": format!("{base}/docs/cel.html"), "title": "CEL in Kubernetes", "content": "Validation rules for CRDs", "engine": "google"},
        {"url": format!("{base}/docs/ssa.html"), "title": "Server-Side Apply", "content": "Field managers", "engine": "google"}
    ]);
    let app = axum::Router::new()
        .route(
            "/search",
            get(move || {
                let results = results.clone();
                async move {
                    axum::Json(json!({
                        "query": "q", "number_of_results": 2, "results": results,
                        "unresponsive_engines": [["bing", "CAPTCHA required"], ["duckduckgo", "Suspended: too many requests"]]
                    }))
                }
            }),
        )
        .route("/docs/cel.html", get(move || async move { Html(cel) }))
        .route("/docs/ssa.html", get(move || async move { Html(ssa) }));
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((base, task))
}

/// The four turns of a quick-mode researcher (search, scrape handshake, a batch, the report),
/// 700 input and 80 output tokens; `more` adds a finding (a scheduled run that finds a change).
fn researcher(web: &str, topic: &str, more: bool) -> Vec<Step> {
    let cel = format!("{web}/docs/cel.html");
    let extra = if more {
        format!("- Invalid objects are rejected before they are stored ([CEL]({cel})).\n")
    } else {
        String::new()
    };
    vec![
        Step::tool_call("search", json!({"queries": [topic]})).with_usage(100, 10),
        Step::tool_call("scrape", json!({"urls": [cel]})).with_usage(100, 10),
        Step::tool_call("scrape", json!({"urls": [cel]})).with_usage(200, 10),
        Step::text(format!(
            "## Summary\nCEL rules validate custom resources at admission.\n\n## Key findings\n- Rules run in the API server ([CEL]({cel})).\n- oldSelf makes fields immutable ([CEL]({cel})).\n{extra}"
        ))
        .with_usage(300, 50),
    ]
}

/// Plain runs, runs whose first model call fails on the primary, the scheduled query.
const PLAIN: [&str; 2] = ["case alpha", "case beta"];
const FLAKY: [&str; 2] = ["case flaky-one", "case flaky-two"];
const SCHEDULED: &str = "What changed in CEL validation rules this week?";

fn query(case: &str) -> String {
    format!("How do CEL validation rules work in CRDs, {case}?")
}

/// The three scripted endpoints: the primary (`scripted`, answering by turn per run; the flaky
/// runs' first turn is HTTP 500), the fallback (`scripted-fallback`) and the schedule's model
/// (`scripted-schedule`: its first run, then a second that reports one finding more).
struct Models {
    primary: ScriptedModelHandle,
    fallback: ScriptedModelHandle,
    schedule: ScriptedModelHandle,
}

impl Models {
    async fn start(web: &str) -> Result<Models, String> {
        let mut primary = Script::default();
        let mut fallback = Script::default();
        for case in PLAIN {
            primary =
                primary.with_route(Route::new(case, case, researcher(web, case, false)).by_turn());
        }
        for case in FLAKY {
            let mut steps = researcher(web, case, false);
            fallback = fallback.with_route(Route::new(case, case, steps.clone()).by_turn());
            steps[0] = Step::status(500);
            primary = primary.with_route(Route::new(case, case, steps).by_turn());
        }
        let mut scheduled = researcher(web, SCHEDULED, false);
        scheduled.extend(researcher(web, SCHEDULED, true));
        let start = |s: Script| async move {
            ScriptedModel::start(s)
                .await
                .map_err(|e| format!("model server: {e}"))
        };
        Ok(Models {
            primary: start(primary).await?,
            fallback: start(fallback).await?,
            schedule: start(Script::new(scheduled)).await?,
        })
    }
}

fn tier(url: &str, model: &str, extra: Value) -> Value {
    let mut tier = json!({
        "baseURL": url, "model": model, "timeoutSeconds": 30, "maxRetries": 0,
        "apiKeySecretRef": {"name": "model-key", "key": "apiKey"}
    });
    if let (Some(t), Some(e)) = (tier.as_object_mut(), extra.as_object()) {
        t.extend(e.clone());
    }
    tier
}

fn profile(name: &str, web: &str, models: Value) -> Value {
    // Prices that make a run cost about 4 cents, so "within a cent" means something.
    let price = |m: &str| json!({"model": m, "inputUSDPerMillion": "50.00", "outputUSDPerMillion": "100.00"});
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": name},
        "spec": {
            "models": models,
            "prices": [price("scripted"), price("scripted-fallback"), price("scripted-schedule")],
            "search": {"url": web},
            "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
        }
    })
}

fn run(name: &str, query: &str, approval: bool) -> Value {
    let mut body = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": name},
        "spec": {"query": query, "mode": "quick", "profileRef": "default"}
    });
    if approval {
        body["spec"]["approval"] = json!({"required": true});
    }
    body
}

fn schedule(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule", "metadata": {"name": name},
        "spec": {"schedule": "* * * * *", "runTemplate": {"spec": spec}}
    })
}

fn awaiting(run: &ResearchRun) -> bool {
    quarry_api::find_condition(run.conditions(), "AwaitingApproval")
        .is_some_and(|c| c.status == "True")
}

async fn run_until(
    runs: &Api<ResearchRun>,
    name: &str,
    what: &str,
    done: impl Fn(&ResearchRun) -> bool,
) -> Result<ResearchRun, String> {
    wait_for(
        &format!("run {name} {what}"),
        Duration::from_secs(120),
        || async { runs.get(name).await.ok() },
        |r: &ResearchRun| done(r),
    )
    .await
}

/// Runs a ResearchRun to its end; fails unless it completed.
async fn complete(client: &Client, namespace: &str, body: Value) -> Result<ResearchRun, String> {
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    apply(client, Some(namespace), &body).await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    let done = run_until(&runs, &name, "finished", ResearchRun::is_finished).await?;
    if done.phase() != quarry_api::Phase::Completed {
        return Err(format!("run {name} did not complete: {:?}", done.status));
    }
    Ok(done)
}

/// The `n`th run (oldest first) of schedule `name`, once finished.
async fn scheduled_run(
    runs: &Api<ResearchRun>,
    name: &str,
    n: usize,
) -> Result<ResearchRun, String> {
    let list = ListParams::default().labels(&format!("quarry.dev/schedule={name}"));
    let made = wait_for(
        &format!("run {n} of schedule {name} finished"),
        Duration::from_secs(150),
        || async {
            let mut items = runs.list(&list).await.ok()?.items;
            items.sort_by_key(|r| r.creation_timestamp().map(|t| t.0));
            Some(items)
        },
        |items: &Vec<ResearchRun>| items.get(n - 1).is_some_and(ResearchRun::is_finished),
    )
    .await?;
    Ok(made[n - 1].clone())
}

/// Waits until the operator's `/metrics` has a sample line starting with `prefix` whose value
/// is at least `min`.
async fn exported(operator: &Operator, prefix: &str, min: f64) -> Result<(), String> {
    wait_for(
        &format!("{prefix} >= {min} on /metrics"),
        Duration::from_secs(30),
        || async { operator.metrics().await.ok() },
        |text: &String| {
            text.lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .any(|v| v >= min)
        },
    )
    .await
    .map(|_| ())
}

fn cost(run: &ResearchRun) -> f64 {
    run.status
        .as_ref()
        .and_then(|s| s.usage.as_ref()?.cost_usd.as_deref()?.parse().ok())
        .unwrap_or(0.0)
}

fn facts_of(all: &[ResearchRun], window: &BTreeSet<String>) -> Facts {
    let mut facts = Facts::default();
    let mut finished = (0.0, 0.0, 0.0, 0.0);
    for run in all {
        let phase = if awaiting(run) {
            "AwaitingApproval".to_string()
        } else {
            run.phase().as_str().to_string()
        };
        *facts.phases.entry(phase).or_default() += 1.0;
        let in_window = window.contains(&run.name_any());
        let status = run.status.clone().unwrap_or_default();
        facts.total_cost += cost(run);
        let changes = status.report.as_ref().and_then(|r| r.changes).unwrap_or(0) as f64;
        facts.total_changes += changes;
        if run.is_finished() {
            let ok = f64::from(u8::from(run.phase() == quarry_api::Phase::Completed));
            finished.0 += ok;
            finished.1 += 1.0;
            if in_window {
                finished.2 += ok;
                finished.3 += 1.0;
            }
            if let (Some(start), Some(end)) = (&status.start_time, &status.completion_time) {
                let secs = (end.0.as_second() - start.0.as_second()) as f64;
                facts.longest_run = facts.longest_run.max(secs);
            }
        }
        if in_window {
            facts.window_cost += cost(run);
            facts.window_changes += changes;
            if run.is_finished() {
                facts.run_costs.push(cost(run));
            }
        }
    }
    facts.total_success = finished.0 / finished.1;
    facts.window_success = finished.2 / finished.3;
    facts
}

#[tokio::test]
#[ignore = "needs prometheus and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn every_dashboard_panel_answers_plausibly_on_prometheus_after_scripted_runs() {
    quarry_e2e::prometheus::binary("prometheus");
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let namespace = plane.namespace("prometheus").await.unwrap();
    let (web, _web) = start_web().await.unwrap();
    let models = Models::start(&web).await.unwrap();
    apply(
        &client,
        Some(&namespace),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
                "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
    )
    .await
    .unwrap();
    // The primary is rate limited (2.5 calls at once, then one every 2 s) and its breaker opens
    // at the first failure for a second.
    let primary = tier(
        &models.primary.base_url(),
        "scripted",
        json!({"requestsPerMinute": 30, "circuitBreaker": {"failureThreshold": 1, "openSeconds": 1, "successThreshold": 1}}),
    );
    let fallback = tier(&models.fallback.base_url(), "scripted-fallback", json!({}));
    let scheduled = tier(&models.schedule.base_url(), "scripted-schedule", json!({}));
    for body in [
        profile(
            "default",
            &web,
            json!({"primary": primary, "fallback": fallback}),
        ),
        profile("scheduled", &web, json!({"primary": scheduled})),
    ] {
        apply(&client, Some(&namespace), &body).await.unwrap();
    }
    let operator = Operator::start(&OperatorOptions {
        kubeconfig: plane.kubeconfig().to_path_buf(),
        identity: "quarry-prometheus".into(),
        pod_namespace: namespace.clone(),
        args: vec![format!("--namespace={namespace}")],
        log: plane.scratch().join("operator.log"),
    })
    .await
    .unwrap();
    let rules = rule_file_of(RULES).unwrap();
    let prometheus = Prometheus::start(
        &[format!("127.0.0.1:{}", operator.port)],
        "1s",
        Some(&rules),
    )
    .await
    .unwrap();
    let outcome = scenario(&client, &namespace, &operator, &prometheus, &models).await;
    if let Err(message) = outcome {
        panic!(
            "{message}\n--- operator log:\n{}\n--- prometheus log:\n{}",
            operator.log_tail(),
            prometheus.log_tail()
        );
    }
}

async fn scenario(
    client: &Client,
    namespace: &str,
    operator: &Operator,
    prometheus: &Prometheus,
    models: &Models,
) -> Result<(), String> {
    prometheus.wait_for_targets(Duration::from_secs(30)).await?;
    let t0 = unix_now();
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    // Schedules: one researching every minute with its own profile, one whose template the API
    // server refuses (a query of blanks), failing its reconcile at every due time and retry.
    apply(
        client,
        Some(namespace),
        &schedule(
            "watch",
            json!({"query": SCHEDULED, "mode": "quick", "profileRef": "scheduled"}),
        ),
    )
    .await?;
    apply(
        client,
        Some(namespace),
        &schedule("broken", json!({"query": "   ", "mode": "quick"})),
    )
    .await?;

    // Warm-up: every series the measured round moves exists before it.
    complete(client, namespace, run("alpha", &query(PLAIN[0]), false)).await?;
    complete(client, namespace, run("flaky-one", &query(FLAKY[0]), false)).await?;
    scheduled_run(&runs, "watch", 1).await?;
    exported(operator, "quarry_schedule_runs_total{", 1.0).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t1 = unix_now();
    // Grafana rounds the range to whole seconds, so the window may start up to half a second
    // after t1; two seconds leave a scrape between its start and the round's first model call,
    // which increase() would otherwise fold into its first sample and miss.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let watch_runs = ListParams::default().labels("quarry.dev/schedule=watch");
    if runs
        .list(&watch_runs)
        .await
        .map_err(|e| e.to_string())?
        .items
        .len()
        != 1
    {
        return Err("the warm-up took past the schedule's second minute".into());
    }

    // The measured round.
    complete(client, namespace, run("beta", &query(PLAIN[1]), false)).await?;
    let flaky = complete(client, namespace, run("flaky-two", &query(FLAKY[1]), false)).await?;
    let by_model: Vec<&str> = flaky
        .status
        .as_ref()
        .and_then(|s| s.usage.as_ref())
        .map(|u| u.by_model.iter().map(|m| m.model.as_str()).collect())
        .unwrap_or_default();
    if !by_model.contains(&"scripted-fallback") {
        return Err(format!(
            "flaky-two was not served by the fallback: {:?}",
            flaky.status
        ));
    }
    apply(
        client,
        Some(namespace),
        &run("rejected", &query("case rejected"), true),
    )
    .await?;
    run_until(&runs, "rejected", "awaiting approval", awaiting).await?;
    runs.patch(
        "rejected",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .map_err(|e| format!("rejecting: {e}"))?;
    run_until(&runs, "rejected", "cancelled", ResearchRun::is_finished).await?;
    apply(
        client,
        Some(namespace),
        &run("waiting", &query("case waiting"), true),
    )
    .await?;
    run_until(&runs, "waiting", "awaiting approval", awaiting).await?;
    let second = scheduled_run(&runs, "watch", 2).await?;
    exported(operator, "quarry_schedule_changes_total{", 1.0).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let t2 = unix_now();
    for server in [&models.primary, &models.fallback] {
        if let Some(stray) = server.recorded().iter().find(|r| r.route.is_none()) {
            return Err(format!(
                "a model request matched no scripted run: {}",
                stray.body
            ));
        }
    }

    let all = runs
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    let window: BTreeSet<String> = ["beta", "flaky-two", "rejected", "waiting"]
        .iter()
        .map(|s| s.to_string())
        .chain(std::iter::once(second.name_any()))
        .collect();
    let mut facts = facts_of(&all, &window);
    facts.namespace = namespace.to_string();
    (facts.t0, facts.t1, facts.t2) = (t0, t1, t2);
    let shown = dashboard::evaluate(prometheus, DASHBOARD, &facts).await?;
    eprintln!("{facts:#?}\nthe stat panels show:\n{}", shown.join("\n"));

    // The alert rules, evaluated by the same Prometheus every second: the schedule's changes
    // page at once; the blocked engines and the waiting plan are pending (30 min, 4 h).
    let alerts = |state: &'static str| async move {
        let series = prometheus
            .query(&format!("ALERTS{{alertstate=\"{state}\"}}"), t2)
            .await?;
        Ok::<BTreeSet<String>, String>(
            series
                .iter()
                .map(|s| s.label("alertname").to_string())
                .collect(),
        )
    };
    let firing = alerts("firing").await?;
    let pending = alerts("pending").await?;
    if firing != BTreeSet::from(["QuarryScheduleFoundChanges".to_string()]) {
        return Err(format!("alerts firing: {firing:?} (pending: {pending:?})"));
    }
    for want in ["QuarrySearxngEnginesBlocked", "QuarryPlanAwaitingApproval"] {
        if !pending.contains(want) {
            return Err(format!("{want} is not pending: {pending:?}"));
        }
    }
    Ok(())
}
