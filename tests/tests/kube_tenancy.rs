//! Shared clusters, on the real API server: a person bound only to the chart's `quarry-edit`
//! cannot use the operator (the chart's ServiceAccount, which may read Secrets and write
//! ConfigMaps) as a deputy. Profiles and SearchEngines are `quarry-admin`'s; a profile naming a
//! Secret that did not opt in stalls with a message saying how to opt in, and the key never
//! leaves the cluster; an opted-in Secret works. A ConfigMap named like a run's report, made by
//! someone else, is left exactly as it was.

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

/// Whether `result` is the API server's 403.
fn is_forbidden<T: std::fmt::Debug>(result: &Result<T, String>) -> bool {
    matches!(result, Err(e) if e.contains("forbidden") || e.contains("Forbidden"))
}

/// Who may configure what, with the chart's user roles: a person bound only to `quarry-edit`
/// may start runs but not write a ResearchProfile or a SearchEngine (which decide where keys go
/// and which hosts are reached), nor read Secrets. A person bound only to `quarry-admin`
/// writes profiles but cannot read Secrets either, so a profile naming a Secret that did not
/// opt in stalls with a message saying how to opt in, and the key never leaves the cluster. An
/// opted-in Secret in an admin's profile serves the editor's run end to end.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_quarry_editor_can_neither_write_profiles_nor_have_the_operator_send_a_secret() {
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
    let searx = stack.searx.base_url().to_string();
    // The namespace admin's Secrets: one for something else entirely, one made for Quarry.
    apply(&admin, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "database"}, "stringData": {"apiKey": DB_PASSWORD}})).await.unwrap();
    apply(&admin, Some(&ns), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-for-quarry"}})).await.unwrap();
    // Quarry's administrator in the namespace (quarry-admin alone: no Secrets) writes profiles.
    let quarry_admin = user_kubeconfig(&plane, &ns, "profiles", &["quarry-admin"])
        .await
        .unwrap();
    let as_quarry_admin = client_of(&quarry_admin).await;
    apply(
        &as_quarry_admin,
        Some(&ns),
        &profile("proper", &model.base_url(), "model-key", &searx),
    )
    .await
    .unwrap();

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
    // ...nor write a profile sending that Secret to their own server, nor repoint the admin's,
    // nor run a SearchEngine with settings of their own.
    let created = apply(
        &as_editor,
        Some(&ns),
        &profile("borrowed", &model.base_url(), "database", &searx),
    )
    .await;
    assert!(is_forbidden(&created), "{created:?}");
    let repointed = apply(
        &as_editor,
        Some(&ns),
        &profile("proper", &model.base_url(), "database", &searx),
    )
    .await;
    assert!(is_forbidden(&repointed), "{repointed:?}");
    let engine = apply(
        &as_editor,
        Some(&ns),
        &json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine", "metadata": {"name": "mine"},
                "spec": {"settingsOverrides": {"outgoing": {"proxies": {"all://": ["http://169.254.169.254"]}}}}}),
    )
    .await;
    assert!(is_forbidden(&engine), "{engine:?}");

    // Whoever writes profiles cannot send a Secret that did not opt in either.
    apply(
        &as_quarry_admin,
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

    // The intended flow: the editor's run on the admin's profile, with the opted-in Secret.
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
    // The editor was refused exactly what it tried beyond its role: the Secret read, the two
    // profile writes and the SearchEngine; the profile admin was refused nothing.
    let editor_user = service_account_user(&ns, "editor");
    let mut refused: Vec<(String, String)> =
        quarry_e2e::kube_operator::forbidden(&plane, &editor_user)
            .into_iter()
            .map(|r| (r.verb, r.resource))
            .collect();
    refused.sort();
    assert_eq!(
        refused,
        [
            ("get", "secrets"),
            ("patch", "researchprofiles"),
            ("patch", "researchprofiles"),
            ("patch", "searchengines"),
        ]
        .map(|(v, r)| (v.to_string(), r.to_string()))
    );
    let profile_admin = service_account_user(&ns, "profiles");
    assert!(quarry_e2e::kube_operator::forbidden(&plane, &profile_admin).is_empty());
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

/// The run event stream on the operator's port, as the chart's ServiceAccount serves it: no
/// token, or one the API server rejects, is 401 with how to get one; a person who may not read
/// runs in the namespace is 403; a viewer there gets the stream (token in `Authorization`, or
/// in `X-Quarry-Token` as the API server's service proxy passes it). One caller holds at most 8
/// streams: the ninth is 429 while another person still gets in, and a closed stream frees its
/// slot.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn the_event_stream_needs_a_token_that_may_read_the_run_and_bounds_each_caller() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let mut operator = operator(&plane).await;
    let admin = plane.client();
    let ns = plane.namespace("stream").await.unwrap();
    let elsewhere = plane.namespace("elsewhere").await.unwrap();
    // A run that waits (its profile does not exist), so its stream stays open.
    apply(&admin, Some(&ns), &run("waiting", "missing"))
        .await
        .unwrap();
    let mut tokens = Vec::new();
    for (namespace, name) in [(&ns, "viewer"), (&ns, "second"), (&elsewhere, "outsider")] {
        user_kubeconfig(&plane, namespace, name, &["quarry-view"])
            .await
            .unwrap();
        tokens.push(plane.service_account_token(namespace, name).await.unwrap());
    }
    let (viewer, second, outsider) = (&tokens[0], &tokens[1], &tokens[2]);
    let url = format!(
        "http://127.0.0.1:{}/api/v1/namespaces/{ns}/researchruns/waiting/events",
        operator.port
    );
    let http = reqwest::Client::new();
    let problem = |r: reqwest::Response| async move {
        let status = r.status().as_u16();
        let retry = r
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap_or_default().to_string());
        let body: Value = r.json().await.unwrap_or_default();
        (
            status,
            body["error"].as_str().unwrap_or_default().to_string(),
            body["message"].as_str().unwrap_or_default().to_string(),
            retry,
        )
    };

    let (status, reason, message, _) = problem(http.get(&url).send().await.unwrap()).await;
    assert_eq!(
        (status, reason.as_str()),
        (401, "Unauthenticated"),
        "{message}"
    );
    assert!(message.contains("kubectl create token"), "{message}");
    let r = http
        .get(&url)
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    let (status, _, message, _) = problem(r).await;
    assert_eq!(status, 401, "{message}");
    let r = http.get(&url).bearer_auth(outsider).send().await.unwrap();
    let (status, reason, message, _) = problem(r).await;
    assert_eq!((status, reason.as_str()), (403, "Forbidden"), "{message}");
    assert!(
        message.contains(&format!(
            "may not get researchruns.quarry.dev in namespace {ns}"
        )),
        "{message}"
    );

    let open = |token: &str, proxied: bool| {
        let request = http.get(&url);
        let request = if proxied {
            request.header("x-quarry-token", token)
        } else {
            request.bearer_auth(token)
        };
        request.send()
    };
    let mut held = Vec::new();
    for i in 0..8 {
        let r = open(viewer, i % 2 == 1).await.unwrap();
        assert_eq!(r.status(), 200, "stream {i}: {:?}", r.text().await);
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        held.push(r);
    }
    let (status, reason, message, retry) = problem(open(viewer, false).await.unwrap()).await;
    assert_eq!(
        (status, reason.as_str(), retry.as_deref()),
        (429, "TooManyStreamsForCaller", Some("5")),
        "{message}"
    );
    let r = open(second, false).await.unwrap();
    assert_eq!(r.status(), 200, "another person is not locked out");
    drop(r);
    drop(held.pop());
    let reopened = wait_for(
        "a slot freed by a closed stream",
        Duration::from_secs(40),
        || async { Some(open(viewer, false).await.ok()?.status().as_u16()) },
        |status| *status == 200,
    )
    .await;
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    reopened.unwrap_or_else(|e| panic!("{e}\n{log}"));
}
