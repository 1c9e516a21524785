//! Status and watch hygiene, measured on the real API server: the requests the operator (the
//! chart's ServiceAccount) makes for one deep run, read from the audit log and counted by verb and
//! resource. Goals: at most 30 write requests per run, and no hot loop (no more than
//! one status write per second). The cost journal is the exception, by design: it is written
//! once per answered model call (at most), so a run's spend survives a SIGKILL exactly; the
//! test holds it to that bound and everything else to 30.
//!
//! The table is printed (`--no-capture`); BENCHMARKS.md records it.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::Api;
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::kube_operator::{
    Operator, OperatorOptions, RELEASE_NAMESPACE, Request, apply, audit_requests,
    install_chart_rbac, service_account_user, wait_for,
};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::searx::SearchStack;
use serde_json::json;

/// Seconds since the epoch of an audit timestamp (RFC 3339, UTC, microseconds).
fn seconds(time: &str) -> f64 {
    chrono::DateTime::parse_from_rfc3339(time)
        .map(|t| t.timestamp_micros() as f64 / 1e6)
        .unwrap_or_default()
}

fn table(requests: &[&Request]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for r in requests {
        let resource = if r.subresource.is_empty() {
            r.resource.clone()
        } else {
            format!("{}/{}", r.resource, r.subresource)
        };
        *counts
            .entry(format!("{:<7} {resource}", r.verb))
            .or_insert(0) += 1;
    }
    counts
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_deep_run_costs_at_most_30_writes_and_no_status_hot_loop() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let sa = install_chart_rbac(&plane, &[]).await.unwrap();
    let stack = SearchStack::start().await.expect("the local search stack");
    let docs = stack.docs.base_url();
    let pages: Vec<String> = ["json", "pickle", "csv"]
        .iter()
        .map(|p| format!("{docs}/python3.11-doc/html/library/{p}.html"))
        .collect();
    let tasks = ["JSON in Python", "pickle in Python", "CSV files in Python"];
    let mut script = Script::default()
        .with_route(quarry_e2e::deep_script::planner(&tasks))
        .with_route(
            Route::new("evaluator", "You are the lead evaluator", vec![])
                .with_fallback(Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10)),
        )
        .with_route(quarry_e2e::deep_script::summarizer())
        .with_route(quarry_e2e::deep_script::study(&format!(
            "<research_result>\n# Serialization\n\n## Key Takeaways\n1. JSON is a lightweight data interchange format ([json]({})).\n\n## Abstract\nThree modules.\n</research_result>",
            pages[0]
        )));
    for (task, url) in tasks.iter().zip(&pages) {
        let report = format!("## Summary\n{task}: documented here ([doc]({url})).");
        script = script.with_route(
            Route::new(
                *task,
                format!("Research task: {task}\n"),
                vec![
                    Step::tool_call("search", json!({"queries": [task]})).with_usage(1000, 10),
                    // Paced: a run that takes seconds shows whether status writes follow progress
                    // or a timer.
                    Step::delay(
                        700,
                        Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1200, 10),
                    ),
                    Step::delay(
                        700,
                        Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1400, 12),
                    ),
                    Step::text(report.clone()).with_usage(3000, 120),
                ],
            )
            .with_fallback(Step::text(report).with_usage(900, 100))
            .by_turn(),
        );
    }
    let model = ScriptedModel::start(script).await.unwrap();
    let client = plane.client();
    let ns = plane.namespace("requests").await.unwrap();
    apply(&client, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "k"}})).await.unwrap();
    apply(
        &client,
        Some(&ns),
        &json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": "default"},
            "spec": {
                "models": {"primary": {"baseURL": model.base_url(), "model": "scripted",
                           "apiKeySecretRef": {"name": "model-key", "key": "apiKey"}}},
                "search": {"url": stack.searx.base_url()},
                "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
            }
        }),
    )
    .await
    .unwrap();
    let mut operator = Operator::start(&OperatorOptions {
        kubeconfig: sa,
        identity: "quarry-0".into(),
        pod_namespace: RELEASE_NAMESPACE.into(),
        args: vec![],
        log: plane.scratch().join("operator.log"),
    })
    .await
    .unwrap();
    // Let start-up requests (lease, watches, list) settle before the run exists.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    apply(
        &client,
        Some(&ns),
        &json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": "measured"},
                "spec": {"query": "How do Python's JSON, pickle and csv modules differ?", "mode": "deep"}}),
    )
    .await
    .unwrap();
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    let done = wait_for(
        "run measured finished",
        Duration::from_secs(180),
        || async { runs.get("measured").await.ok() },
        |r: &ResearchRun| r.is_finished(),
    )
    .await
    .unwrap();
    assert_eq!(done.phase().as_str(), "Completed", "{:?}", done.status);
    let finished = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Requests after completion (TTL and report lookups) belong to the run too: wait a little.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let user = service_account_user(RELEASE_NAMESPACE, "quarry");
    let all = audit_requests(&plane);
    let ours: Vec<&Request> = all
        .iter()
        .filter(|r| r.user == user && seconds(&r.time) >= started)
        .collect();
    let in_run_namespace: Vec<&Request> =
        ours.iter().copied().filter(|r| r.namespace == ns).collect();
    let writes: Vec<&Request> = in_run_namespace
        .iter()
        .copied()
        .filter(|r| r.is_write())
        .collect();
    let status: Vec<f64> = writes
        .iter()
        .filter(|r| r.subresource == "status")
        .map(|r| seconds(&r.time))
        .collect();
    let duration = finished - started;
    // The writer sleeps one status interval (1 s) between writes; the audit clock sees them at
    // least 0.9 s apart.
    let burst = status
        .iter()
        .map(|t| status.iter().filter(|u| **u >= *t && **u < t + 0.9).count())
        .max()
        .unwrap_or(0);
    let journal = writes
        .iter()
        .filter(|r| r.resource == "configmaps" && r.name.ends_with("-events"))
        .count();
    let answered = model.recorded().iter().filter(|r| r.answered).count();
    let lease_writes = ours
        .iter()
        .filter(|r| r.resource == "leases" && r.is_write())
        .count();
    println!("requests of the operator for one deep run (3 researchers, {duration:.1} s):");
    for (what, n) in table(&in_run_namespace) {
        println!("  {n:>4}  {what}");
    }
    let mut by_object: BTreeMap<String, usize> = BTreeMap::new();
    for r in &writes {
        *by_object
            .entry(format!("{} {}/{}", r.verb, r.resource, r.name))
            .or_insert(0) += 1;
    }
    println!("  writes by object: {by_object:?}");
    println!(
        "  total {} in the run's namespace, {} writes ({} status); lease renewals meanwhile: {lease_writes}; max status writes in one second: {burst}",
        in_run_namespace.len(),
        writes.len(),
        status.len()
    );
    println!(
        "  cost journal: {journal} writes for {answered} answered model calls; every other write: {}",
        writes.len() - journal
    );
    let offsets: Vec<String> = status
        .iter()
        .map(|t| format!("{:.2}", t - started))
        .collect();
    println!(
        "  status writes at (s after creation): {}",
        offsets.join(", ")
    );
    // The cost journal is written once per answered model call at most (group commit): spend
    // survives a SIGKILL exactly. Everything else the run writes stays within 30.
    assert!(
        journal <= answered,
        "{journal} journal writes for {answered} calls"
    );
    assert!(
        writes.len() - journal <= 30,
        "{} writes besides the journal: {:#?}",
        writes.len() - journal,
        table(&writes)
    );
    assert!(
        (status.len() as f64) <= duration.ceil() + 1.0,
        "{} status writes in {duration:.1} s",
        status.len()
    );
    assert!(burst <= 1, "{burst} status writes within one second");
    operator.kill().await.unwrap();
}
