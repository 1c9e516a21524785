//! Shared clusters, on the real API server: a person bound only to the chart's `quarry-edit`
//! cannot use the operator (the chart's ServiceAccount, which may read Secrets and write
//! ConfigMaps) as a deputy. A profile naming a Secret that did not opt in stalls with a message
//! saying how to opt in, and the key never leaves the cluster; an opted-in Secret works. A
//! ConfigMap named like a run's report, made by someone else, is left exactly as it was.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use quarry_api::{ResearchRun, find_condition};
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::kube_operator::{
    Operator, OperatorOptions, RELEASE_NAMESPACE, apply, install_chart_rbac, service_account_user,
    user_kubeconfig, wait_for,
};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::searx::SearchStack;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
/// The value of the Secret that did not opt in: it must reach no one.
const DB_PASSWORD: &str = "db-password-never-to-leave";

/// A quick run's script: one researcher reading the page, then the study.
fn script(page: &str) -> Script {
    let report = format!("## Summary\nThe json module decodes JSON ([json]({page})).");
    let study = format!(
        "<research_result>\n# JSON in Python\n\n## Key Takeaways\n1. The json module decodes JSON documents ([json]({page})).\n\n## Abstract\nDecoding JSON.\n</research_result>"
    );
    Script::default()
        .with_route(
            Route::new(
                "researcher",
                "Research task:",
                vec![
                    Step::tool_call("search", json!({"queries": ["json decoder"]}))
                        .with_usage(100, 10),
                    Step::tool_call("scrape", json!({"urls": [page]})).with_usage(100, 10),
                    Step::text(report.clone()).with_usage(300, 50),
                ],
            )
            .with_fallback(Step::text(report).with_usage(300, 50))
            .by_turn(),
        )
        .with_route(quarry_e2e::deep_script::summarizer())
        .with_route(quarry_e2e::deep_script::study(&study))
}

fn profile(name: &str, model: &str, secret: &str, search: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": name},
        "spec": {
            "models": {"primary": {
                "baseURL": model, "model": "scripted", "timeoutSeconds": 30,
                "apiKeySecretRef": {"name": secret, "key": "apiKey"}
            }},
            "search": {"url": search},
            "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0}
        }
    })
}

fn run(name: &str, profile: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": name},
        "spec": {"query": "How do I decode JSON with the json module in Python?", "mode": "quick", "profileRef": profile}
    })
}

/// The run's `Stalled=True` condition (reason, message), once it has one.
async fn stalled(runs: &Api<ResearchRun>, name: &str) -> Result<(String, String), String> {
    wait_for(
        &format!("run {name} Stalled"),
        WAIT,
        || async {
            let run = runs.get(name).await.ok()?;
            let status = run.status?;
            let c = find_condition(&status.conditions, "Stalled")?;
            (c.status == "True").then(|| (c.reason.clone(), c.message.clone()))
        },
        |_| true,
    )
    .await
}

async fn operator(plane: &ControlPlane) -> Operator {
    let sa = install_chart_rbac(plane, &[]).await.unwrap();
    Operator::start(&OperatorOptions {
        kubeconfig: sa,
        identity: "quarry-0".into(),
        pod_namespace: RELEASE_NAMESPACE.into(),
        args: vec![],
        log: plane.scratch().join("operator.log"),
    })
    .await
    .unwrap()
}

async fn client_of(kubeconfig: &std::path::Path) -> Client {
    quarry_e2e::control_plane::client_for(kubeconfig)
        .await
        .unwrap()
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_quarry_editor_cannot_have_the_operator_send_a_secret_that_did_not_opt_in() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let mut operator = operator(&plane).await;
    let admin = plane.client();
    let ns = plane.namespace("tenancy").await.unwrap();
    let stack = SearchStack::start().await.expect("the local search stack");
    let page = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(script(&page)).await.unwrap();
    // The namespace admin's Secrets: one for something else entirely, one made for Quarry.
    apply(&admin, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "database"}, "stringData": {"apiKey": DB_PASSWORD}})).await.unwrap();
    apply(&admin, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-for-quarry"}})).await.unwrap();

    // A person bound only to quarry-edit: may not read Secrets themselves...
    let editor = user_kubeconfig(&plane, &ns, "editor", &["quarry-edit"])
        .await
        .unwrap();
    let as_editor = client_of(&editor).await;
    let secrets: Api<Secret> = Api::namespaced(as_editor.clone(), &ns);
    let denied = secrets.get("database").await.unwrap_err();
    assert!(
        matches!(&denied, kube::Error::Api(s) if s.code == 403),
        "{denied}"
    );
    // ...so they try the operator: a profile sending that Secret to their own model server.
    let searx = stack.searx.base_url().to_string();
    apply(
        &as_editor,
        Some(&ns),
        &profile("borrowed", &model.base_url(), "database", &searx),
    )
    .await
    .unwrap();
    apply(&as_editor, Some(&ns), &run("steal", "borrowed"))
        .await
        .unwrap();
    let runs: Api<ResearchRun> = Api::namespaced(as_editor.clone(), &ns);
    let (reason, message) = stalled(&runs, "steal").await.unwrap();
    assert_eq!(reason, "SecretNotOptedIn", "{message}");
    assert_eq!(
        message,
        format!(
            "Secret \"database\" in namespace \"{ns}\" (ResearchProfile \"borrowed\" models.primary.apiKeySecretRef) has not opted in to use by Quarry, so Quarry will not send it to 127.0.0.1. If that is what the Secret is for, opt it in: kubectl -n {ns} label secret database quarry.dev/credential=true && kubectl -n {ns} annotate --overwrite secret database quarry.dev/credential-hosts=127.0.0.1"
        )
    );
    // The same stall is an Event the editor can read.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(admin.clone(), &ns);
    let event = wait_for(
        "the SecretNotOptedIn Event",
        WAIT,
        || async {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("SecretNotOptedIn"))
        },
        |_| true,
    )
    .await
    .unwrap();
    assert_eq!(event.note.as_deref(), Some(message.as_str()));
    assert_eq!(event.type_.as_deref(), Some("Warning"));

    // A profile naming the Secret made for Quarry, at the host it names, works end to end.
    apply(
        &as_editor,
        Some(&ns),
        &profile("proper", &model.base_url(), "model-key", &searx),
    )
    .await
    .unwrap();
    apply(&as_editor, Some(&ns), &run("works", "proper"))
        .await
        .unwrap();
    let phase = wait_for(
        "run works to finish",
        WAIT,
        || async {
            let run = runs.get("works").await.ok()?;
            let phase = run.phase();
            run.is_finished().then_some(phase)
        },
        |_| true,
    )
    .await;
    let recorded = model.recorded();
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    assert_eq!(
        phase.map(|p| p.as_str()),
        Ok("Completed"),
        "operator log:\n{log}"
    );
    assert!(!recorded.is_empty());
    for r in &recorded {
        assert_eq!(r.authorization.as_deref(), Some("Bearer sk-for-quarry"));
        assert!(!format!("{r:?}").contains(DB_PASSWORD));
    }
    assert!(!log.contains(DB_PASSWORD));
    // The editor was refused only the Secret read it tried itself.
    let editor_user = service_account_user(&ns, "editor");
    let refused = quarry_e2e::kube_operator::forbidden(&plane, &editor_user);
    assert!(
        refused.iter().all(|r| r.resource == "secrets"),
        "{refused:#?}"
    );
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_configmap_named_like_a_runs_report_is_left_intact() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let mut operator = operator(&plane).await;
    let admin = plane.client();
    let ns = plane.namespace("tenancy-cm").await.unwrap();
    // Someone's ConfigMap that happens to have the name a run's report would get.
    let theirs = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "taken-report", "labels": {"team": "payments"}},
        "data": {"report.md": "the payments team's runbook", "owner": "payments"}
    });
    apply(&admin, Some(&ns), &theirs).await.unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    let before = configmaps.get("taken-report").await.unwrap();
    // A profile needing no Secret: the run gets as far as its ConfigMaps.
    apply(
        &admin,
        Some(&ns),
        &json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile", "metadata": {"name": "default"},
            "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:9/v1", "model": "m"}}, "search": {"url": "http://127.0.0.1:9"}}
        }),
    )
    .await
    .unwrap();
    let editor = user_kubeconfig(&plane, &ns, "editor", &["quarry-edit"])
        .await
        .unwrap();
    let as_editor = client_of(&editor).await;
    apply(&as_editor, Some(&ns), &run("taken", "default"))
        .await
        .unwrap();
    let runs: Api<ResearchRun> = Api::namespaced(admin.clone(), &ns);
    let stall = stalled(&runs, "taken").await;
    // Give a wrong operator every chance to write before looking.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = configmaps.get("taken-report").await.unwrap();
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    let (reason, message) = stall.unwrap_or_else(|e| panic!("{e}\n{log}"));
    assert_eq!(reason, "ConfigMapNotOwned", "{message}");
    assert_eq!(
        message,
        "ConfigMap \"taken-report\" already exists and is not this run's (Quarry's carry the label quarry.dev/run=taken and a controller owner reference to this ResearchRun); Quarry never overwrites or adopts an object it did not create: delete or rename that ConfigMap if it is stale, or create the run under another name"
    );
    assert_eq!(after.data, before.data);
    assert_eq!(after.metadata.labels, before.metadata.labels);
    assert_eq!(after.metadata.owner_references, None);
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "not written at all"
    );
    let operator_user = service_account_user(RELEASE_NAMESPACE, "quarry");
    let writes: Vec<_> = quarry_e2e::kube_operator::audit_requests(&plane)
        .into_iter()
        .filter(|r| r.user == operator_user && r.resource == "configmaps" && r.is_write())
        .filter(|r| r.namespace == ns)
        .collect();
    assert!(
        writes.is_empty(),
        "the operator wrote ConfigMaps: {writes:#?}"
    );
}
