//! End-to-end against a real Kubernetes API server: the operator binary reconciles ResearchRuns
//! to report ConfigMaps.
//!
//! Each test starts its own control plane (`quarry_e2e::control_plane`: etcd and the real
//! kube-apiserver on loopback) and is `#[ignore]`d without one, so it shows as skipped;
//! `scripts/test.sh` runs them whenever the apiserver is present. No kubelet is needed:
//! nothing here runs in a pod. The operator runs as a process on this host, so the scripted model
//! server and the search/docs stub listen on 127.0.0.1 (the profile's fetch allow-list names it).
//!
//! The operator binary is `$QUARRY_E2E_OPERATOR_BIN`, else this workspace's `quarry`, built by
//! cargo when needed. It is started as
//! `quarry operator` with `KUBECONFIG`, `QUARRY_BIND` and `QUARRY_NAMESPACE` in its environment.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, State};
use axum::response::Html;
use axum::routing::get;
use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use quarry_api::{ResearchRun, find_condition};
use quarry_e2e::control_plane::{ControlPlane, apply_object};
use quarry_e2e::kube_operator::wait_for;
use quarry_e2e::model_server::{ScriptedModel, Step};
use serde_json::{Value, json};

const FIELD_MANAGER: &str = "quarry-e2e";
/// How long a quick run may take end to end (the scripted model answers at once).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

type TestResult = Result<(), String>;

fn operator_binary() -> Result<PathBuf, String> {
    match std::env::var("QUARRY_E2E_OPERATOR_BIN") {
        Ok(path) => Ok(PathBuf::from(path)),
        // Built (or found fresh) by cargo, so the operator under test is this checkout's.
        Err(_) => quarry_e2e::quarry_bin::quarry_bin(),
    }
}

/// The search and docs stub: `/search?q=..&format=json` over two pages served under `/docs/`.
#[derive(Clone)]
struct Web {
    base: String,
}

async fn search(
    State(web): State<Web>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> axum::Json<Value> {
    let q = params.get("q").cloned().unwrap_or_default();
    axum::Json(json!({
        "query": q,
        "number_of_results": 2,
        "results": [
            {"url": format!("{}/docs/cel.html", web.base), "title": "CEL in Kubernetes", "content": "Common Expression Language validation rules for CRDs", "engine": "stub"},
            {"url": format!("{}/docs/ssa.html", web.base), "title": "Server-Side Apply", "content": "Field managers and apply patches", "engine": "stub"}
        ]
    }))
}

const CEL_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>CEL in Kubernetes</title></head><body><main><article>\
<h1>CEL in Kubernetes</h1><p>The Common Expression Language (CEL) is used to declare validation rules of CustomResourceDefinitions. \
Rules are evaluated by the API server at admission, so invalid objects are rejected before they are stored.</p>\
<p>A transition rule compares self with oldSelf and can make fields immutable after creation.</p></article></main></body></html>";

const SSA_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Server-Side Apply</title></head><body><main><article>\
<h1>Server-Side Apply</h1><p>Server-Side Apply tracks field ownership per field manager and merges applied configuration on the server.</p>\
</article></main></body></html>";

async fn start_web() -> Result<(String, tokio::task::JoinHandle<()>), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    let app = Router::new()
        .route("/search", get(search))
        .route("/docs/cel.html", get(|| async { Html(CEL_PAGE) }))
        .route("/docs/ssa.html", get(|| async { Html(SSA_PAGE) }))
        .with_state(Web { base: base.clone() });
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((base, task))
}

/// The four model turns of one quick-mode researcher: search, scrape handshake, one batch, report.
fn researcher_script(web: &str, topic: &str) -> Vec<Step> {
    vec![
        Step::tool_call("search", json!({"queries": [topic]})).with_usage(100, 10),
        Step::tool_call("scrape", json!({"urls": [format!("{web}/docs/cel.html")]})).with_usage(100, 10),
        Step::tool_call("scrape", json!({"urls": [format!("{web}/docs/cel.html")]})).with_usage(200, 10),
        Step::text(format!(
            "## Summary\n{topic}: CEL rules validate custom resources at admission.\n\n## Key findings\n- Rules run in the API server ([CEL]({web}/docs/cel.html)).\n- oldSelf makes fields immutable ([CEL]({web}/docs/cel.html)).\n\n## Links\n- {web}/docs/cel.html"
        ))
        .with_usage(300, 50),
    ]
}

async fn apply(
    client: &Client,
    api_path: (&str, &str, &str),
    namespace: &str,
    body: Value,
) -> Result<(), String> {
    let (group, version, kind) = api_path;
    let gvk = kube::core::GroupVersionKind::gvk(group, version, kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovering {kind}: {e}"))?;
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|e| format!("applying {kind} {namespace}/{name}: {e}"))?;
    Ok(())
}

fn profile(name: &str, model_url: &str, web: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": name},
        "spec": {
            "models": {"primary": {
                "baseURL": model_url, "model": "scripted",
                "apiKeySecretRef": {"name": "model-key", "key": "apiKey"},
                "timeoutSeconds": 30
            }},
            "prices": [{"model": "scripted", "inputUSDPerMillion": "1.00", "outputUSDPerMillion": "2.00"}],
            "search": {"url": web},
            "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
        }
    })
}

fn run(name: &str, profile: &str, query: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
        "metadata": {"name": name},
        "spec": {"query": query, "mode": "quick", "profileRef": profile}
    })
}

/// Polls the run until `done` holds, failing with its last status after `timeout`.
async fn wait_run(
    api: &Api<ResearchRun>,
    name: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&ResearchRun) -> bool,
) -> Result<ResearchRun, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = None;
    while tokio::time::Instant::now() < deadline {
        if let Ok(run) = api.get(name).await {
            if done(&run) {
                return Ok(run);
            }
            last = Some(run);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(format!(
        "run {name} did not reach {what} within {timeout:?}; last status: {:?}",
        last.and_then(|r| r.status)
    ))
}

fn condition_is(run: &ResearchRun, type_: &str, status: &str, reason: &str) -> bool {
    find_condition(run.conditions(), type_)
        .is_some_and(|c| c.status == status && c.reason == reason)
}

fn log_tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Runs `scenario` in a fresh namespace of a control plane of its own, and fails with the
/// operator log's tail. The control plane (and everything in it) goes when the test ends.
async fn in_test_namespace<F, Fut>(label: &str, scenario: F)
where
    F: FnOnce(Client, String, String, PathBuf, PathBuf) -> Fut,
    Fut: std::future::Future<Output = TestResult>,
{
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let kubeconfig = plane.kubeconfig().display().to_string();
    let namespace = plane.namespace(label).await.unwrap();
    let logs = std::env::temp_dir().join(format!("{namespace}-operator.log"));
    let outcome = std::panic::AssertUnwindSafe(scenario(
        client.clone(),
        kubeconfig,
        namespace.clone(),
        logs.clone(),
        plane.audit_log(),
    ))
    .catch_unwind()
    .await;
    // The operator child was killed when the scenario dropped it.
    drop(client);
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => panic!(
            "{message}\n--- operator log tail ({}):\n{}",
            logs.display(),
            log_tail(&logs)
        ),
        Err(panic) => {
            eprintln!(
                "--- operator log tail ({}):\n{}",
                logs.display(),
                log_tail(&logs)
            );
            std::panic::resume_unwind(panic)
        }
    }
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn operator_reconciles_runs_to_report_configmaps() {
    in_test_namespace(
        "runs",
        |client, kubeconfig, namespace, logs, _audit| async move {
            scenario(&client, &kubeconfig, &namespace, &logs).await
        },
    )
    .await;
}

/// On a real API server: a run with `report.kind: objectStore` keeps its report in S3 (moto on
/// 127.0.0.1), status points at it, `quarry report` reads it, and deleting the run deletes its
/// objects through the finalizer.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn operator_keeps_object_store_runs_in_s3_and_deletes_their_objects() {
    assert!(
        quarry_e2e::s3_server::moto_available(),
        "moto's server is not installed (scripts/install-test-deps.sh)"
    );
    in_test_namespace(
        "s3",
        |client, kubeconfig, namespace, logs, _audit| async move {
            object_store_scenario(&client, &kubeconfig, &namespace, &logs).await
        },
    )
    .await;
}

/// On a real API server: object-store runs never hold their namespace's deletion. The profile
/// and its Secret deleted before the runs (as a namespace deletion may do): the operator that
/// launched a run still deletes its objects; a restarted one, which cannot reach them, keeps the
/// run (a stall, fixable) until the namespace is being deleted, then lets it go and names the
/// objects it left in a Warning Event on the Namespace.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn object_store_runs_never_hold_a_namespace_deletion() {
    assert!(
        quarry_e2e::s3_server::moto_available(),
        "moto's server is not installed (scripts/install-test-deps.sh)"
    );
    in_test_namespace(
        "s3-ns",
        |client, kubeconfig, namespace, logs, _audit| async move {
            namespace_deletion_scenario(&client, &kubeconfig, &namespace, &logs).await
        },
    )
    .await;
}

async fn namespace_deletion_scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
) -> TestResult {
    use k8s_openapi::api::core::v1::{Namespace, Secret};
    use k8s_openapi::api::events::v1::Event;
    use quarry_api::ResearchProfile;
    use quarry_e2e::s3_server::{BUCKET, S3Server};
    use quarry_operator::store::object::{Bucket, ObjectStoreConfig, RunLayout, SecretValue};
    install_crds(client).await?;
    let (web, _web_task) = start_web().await?;
    let mut script = researcher_script(&web, "CEL validation");
    script.extend(researcher_script(&web, "CEL validation"));
    let model = ScriptedModel::start(script)
        .await
        .map_err(|e| format!("model server: {e}"))?;
    let s3 = S3Server::start().await?;
    apply_object_store_profile(client, namespace, &model.base_url(), &web, &s3).await?;
    let (operator, _port) = start_operator(kubeconfig, namespace, logs).await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    let config = ObjectStoreConfig {
        url: format!("s3://{BUCKET}/quarry"),
        endpoint: Some(s3.endpoint()),
        region: Some("us-east-1".into()),
        allow_http: true,
        options: vec![
            (
                "aws_access_key_id".into(),
                SecretValue::new(&s3.access_key_id),
            ),
            (
                "aws_secret_access_key".into(),
                SecretValue::new(&s3.secret_access_key),
            ),
        ],
        from_env: false,
        origin: "test".into(),
    };
    let bucket = Bucket::connect(&config).map_err(|e| e.to_string())?;
    let mut stores = Vec::new();
    for name in ["remembered", "left"] {
        let mut body = run(name, "default", "How do CEL validation rules work in CRDs?");
        body["spec"]["report"] = json!({"kind": "objectStore"});
        apply(
            client,
            ("quarry.dev", "v1alpha1", "ResearchRun"),
            namespace,
            body,
        )
        .await?;
        let done = wait_run(&runs, name, "Completed", RUN_TIMEOUT, |r| r.is_finished()).await?;
        if !condition_is(&done, "Succeeded", "True", "Completed") {
            return Err(format!(
                "run {name} finished without success: {:?}",
                done.status
            ));
        }
        // Where its objects are was recorded with the finalizer.
        let location = format!("s3://{BUCKET}/quarry/{namespace}/{name}/");
        if done.annotations().get("quarry.dev/artifacts-location") != Some(&location)
            || !done
                .finalizers()
                .iter()
                .any(|f| f == "quarry.dev/artifacts")
        {
            return Err(format!(
                "run {name}: no location annotation {location} or no finalizer: {:?}",
                done.metadata
            ));
        }
        let store = bucket.for_run(&RunLayout {
            prefix: None,
            namespace: namespace.to_string(),
            run: name.into(),
            uid: done.uid().unwrap_or_default(),
            query: done.spec.query.clone(),
        });
        if store.list().await.map_err(|e| e.to_string())?.is_empty() {
            return Err(format!("no objects for run {name}"));
        }
        stores.push((name, store, location));
    }
    // The profile and its credentials go first.
    let profiles: Api<ResearchProfile> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    profiles
        .delete("default", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting the profile: {e}"))?;
    secrets
        .delete("s3-creds", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting the Secret: {e}"))?;
    let gone = |name: &'static str| {
        let runs = runs.clone();
        async move {
            wait_for(
                &format!("run {name} to be gone"),
                Duration::from_secs(60),
                || async { runs.get_opt(name).await.ok().map(|r| r.is_none()) },
                |gone: &bool| *gone,
            )
            .await
        }
    };
    // The operator that launched the run still reaches its objects and deletes them.
    let (_, remembered, _) = &stores[0];
    runs.delete("remembered", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting run remembered: {e}"))?;
    gone("remembered").await?;
    let after = remembered.list().await.map_err(|e| e.to_string())?;
    if !after.is_empty() {
        return Err(format!("objects of run remembered left: {after:?}"));
    }
    // A restarted operator cannot: outside a namespace deletion the run stays, stalled, since
    // the profile and Secret can be restored.
    drop(operator);
    let (_operator, _port) = start_operator(kubeconfig, namespace, logs).await?;
    let (_, left, location) = &stores[1];
    let before = left.list().await.map_err(|e| e.to_string())?;
    runs.delete("left", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting run left: {e}"))?;
    wait_run(
        &runs,
        "left",
        "ArtifactCleanupFailed",
        Duration::from_secs(60),
        |r| {
            r.conditions()
                .iter()
                .any(|c| c.reason == "ArtifactCleanupFailed")
        },
    )
    .await?;
    // Its namespace deleted (this API server has no namespace controller: the namespace stays
    // Terminating with its contents, which is what the operator sees in a real deletion).
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete(namespace, &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting the namespace: {e}"))?;
    gone("left").await?;
    let kept = left.list().await.map_err(|e| e.to_string())?;
    if kept != before {
        return Err(format!(
            "objects of run left changed: {kept:?} (were {before:?})"
        ));
    }
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let warned = wait_for(
        "an ArtifactsLeft Warning on the Namespace",
        Duration::from_secs(20),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            Some(list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ArtifactsLeft")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(namespace)
            }))
        },
        |found: &Option<Event>| found.is_some(),
    )
    .await?
    .unwrap_or_default();
    let note = warned.note.unwrap_or_default();
    if warned.type_.as_deref() != Some("Warning")
        || !note.contains(location.as_str())
        || !note.contains("ResearchProfile \"default\"")
    {
        return Err(format!(
            "the Warning does not name the objects and why: {note}"
        ));
    }
    Ok(())
}

/// Applies the model key and S3 credential Secrets (opted in for 127.0.0.1) and the `default`
/// profile keeping reports in `s3`'s bucket.
async fn apply_object_store_profile(
    client: &Client,
    namespace: &str,
    model_url: &str,
    web: &str,
    s3: &quarry_e2e::s3_server::S3Server,
) -> TestResult {
    use quarry_e2e::s3_server::BUCKET;
    for secret in [
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
               "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
               "stringData": {"aws_access_key_id": s3.access_key_id, "aws_secret_access_key": s3.secret_access_key}}),
    ] {
        apply(client, ("", "v1", "Secret"), namespace, secret).await?;
    }
    let mut object_profile = profile("default", model_url, web);
    object_profile["spec"]["objectStore"] = json!({
        "url": format!("s3://{BUCKET}/quarry"), "endpoint": s3.endpoint(), "region": "us-east-1",
        "allowHttp": true, "credentialsSecretRef": {"name": "s3-creds"}
    });
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        object_profile,
    )
    .await
}

async fn object_store_scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
) -> TestResult {
    use quarry_e2e::s3_server::{BUCKET, S3Server};
    use quarry_operator::store::object::{Bucket, ObjectStoreConfig, RunLayout, SecretValue};
    install_crds(client).await?;
    let (web, _web_task) = start_web().await?;
    let model = ScriptedModel::start(researcher_script(&web, "CEL validation"))
        .await
        .map_err(|e| format!("model server: {e}"))?;
    let s3 = S3Server::start().await?;
    apply_object_store_profile(client, namespace, &model.base_url(), &web, &s3).await?;
    let (_operator, _port) = start_operator(kubeconfig, namespace, logs).await?;
    let mut body = run(
        "cel-s3",
        "default",
        "How do CEL validation rules work in CRDs?",
    );
    body["spec"]["report"] = json!({"kind": "objectStore"});
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        body,
    )
    .await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    let done = wait_run(&runs, "cel-s3", "Completed", RUN_TIMEOUT, |r| {
        r.is_finished()
    })
    .await?;
    if !condition_is(&done, "Succeeded", "True", "Completed") {
        return Err(format!(
            "run cel-s3 finished without success: {:?}",
            done.status
        ));
    }
    let report = done
        .status
        .clone()
        .unwrap_or_default()
        .report
        .ok_or("no status.report")?;
    let prefix = format!("s3://{BUCKET}/quarry/{namespace}/cel-s3/");
    if report.config_map.is_some()
        || !report
            .object_url
            .as_deref()
            .is_some_and(|u| u.starts_with(&prefix))
    {
        return Err(format!(
            "status.report does not point into {prefix}: {report:?}"
        ));
    }
    if !done
        .finalizers()
        .iter()
        .any(|f| f == "quarry.dev/artifacts")
    {
        return Err(format!("no artifacts finalizer: {:?}", done.finalizers()));
    }
    let markdown = quarry::report_cli::cluster_report(client, Some(namespace), "cel-s3")
        .await
        .map_err(|e| format!("quarry report: {e}"))?;
    if !markdown.contains(&format!("{web}/docs/cel.html")) {
        return Err(format!("quarry report printed something else: {markdown}"));
    }
    let config = ObjectStoreConfig {
        url: format!("s3://{BUCKET}/quarry"),
        endpoint: Some(s3.endpoint()),
        region: Some("us-east-1".into()),
        allow_http: true,
        options: vec![
            (
                "aws_access_key_id".into(),
                SecretValue::new(&s3.access_key_id),
            ),
            (
                "aws_secret_access_key".into(),
                SecretValue::new(&s3.secret_access_key),
            ),
        ],
        from_env: false,
        origin: "test".into(),
    };
    let store = Bucket::connect(&config)
        .map_err(|e| e.to_string())?
        .for_run(&RunLayout {
            prefix: None,
            namespace: namespace.to_string(),
            run: "cel-s3".into(),
            uid: done.uid().unwrap_or_default(),
            query: done.spec.query.clone(),
        });
    let before = store.list().await.map_err(|e| e.to_string())?;
    if before.is_empty() {
        return Err("no objects in the bucket".into());
    }
    runs.delete("cel-s3", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting the run: {e}"))?;
    wait_for(
        "the run to be gone",
        Duration::from_secs(60),
        || async {
            match runs.get_opt("cel-s3").await {
                Ok(found) => Some(found.is_none()),
                Err(_) => None,
            }
        },
        |gone: &bool| *gone,
    )
    .await?;
    let after = store.list().await.map_err(|e| e.to_string())?;
    if !after.is_empty() {
        return Err(format!(
            "objects left after deletion: {after:?} (were {before:?})"
        ));
    }
    Ok(())
}

async fn scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
) -> TestResult {
    install_crds(client).await?;
    // Local services.
    let (web, _web_task) = start_web().await?;
    let mut steps = researcher_script(&web, "CEL validation");
    steps.extend(researcher_script(&web, "late profile"));
    let model = ScriptedModel::start(steps)
        .await
        .map_err(|e| format!("model server: {e}"))?;
    key_and_profile(client, namespace, &model.base_url(), &web).await?;

    // The operator, restricted to this namespace.
    let (mut operator, port) = start_operator(kubeconfig, namespace, logs).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;

    // A run with everything in place completes with its report ConfigMap.
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run(
            "cel",
            "default",
            "How do CEL validation rules work in CRDs?",
        ),
    )
    .await?;
    let done = wait_run(&runs, "cel", "Completed", RUN_TIMEOUT, |r| r.is_finished()).await?;
    if !condition_is(&done, "Succeeded", "True", "Completed") {
        return Err(format!(
            "run cel finished without success: {:?}",
            done.status
        ));
    }
    let status = done.status.clone().unwrap_or_default();
    if !condition_is(&done, "Reconciling", "False", "Completed")
        || status.observed_generation != done.metadata.generation
    {
        return Err(format!("unexpected final conditions: {status:?}"));
    }
    let usage = status.usage.clone().ok_or("no usage in status")?;
    if (usage.input_tokens, usage.output_tokens, usage.llm_calls) != (700, 80, 4) {
        return Err(format!(
            "usage does not match what the model server reported: {usage:?}"
        ));
    }
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let report = configmaps
        .get("cel-report")
        .await
        .map_err(|e| format!("report ConfigMap: {e}"))?;
    let data = report.data.clone().unwrap_or_default();
    let markdown = data.get("report.md").ok_or("report.md missing")?;
    let cited = format!("{web}/docs/cel.html");
    if !markdown.contains("## Sources") || !markdown.contains(&cited) {
        return Err(format!(
            "report lacks its Sources section or the fetched page:\n{markdown}"
        ));
    }
    let findings: Value =
        serde_json::from_str(data.get("findings.json").ok_or("findings.json missing")?)
            .map_err(|e| format!("findings.json: {e}"))?;
    if !findings.is_object() {
        return Err(format!("findings.json is not an object: {findings}"));
    }
    let owner = report
        .owner_references()
        .first()
        .cloned()
        .ok_or("report ConfigMap has no owner")?;
    if owner.kind != "ResearchRun"
        || owner.name != "cel"
        || owner.controller != Some(true)
        || Some(owner.uid.as_str()) != done.metadata.uid.as_deref()
    {
        return Err(format!("report ConfigMap owner is wrong: {owner:?}"));
    }
    if status.report.as_ref().and_then(|r| r.config_map.as_deref()) != Some("cel-report") {
        return Err(format!(
            "status.report does not name the ConfigMap: {:?}",
            status.report
        ));
    }
    let recorded = model.recorded();
    if recorded
        .iter()
        .any(|r| r.authorization.as_deref() != Some("Bearer sk-e2e-not-a-real-key"))
    {
        return Err("a model request did not carry the Secret's key".into());
    }

    // A run whose profile does not exist yet stalls, then proceeds once the profile appears.
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run(
            "late",
            "late-profile",
            "What do CEL validation rules check in CRDs?",
        ),
    )
    .await?;
    let stalled = wait_run(
        &runs,
        "late",
        "Stalled=True",
        Duration::from_secs(30),
        |r| condition_is(r, "Stalled", "True", "ProfileNotFound"),
    )
    .await?;
    let message = find_condition(stalled.conditions(), "Stalled")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    if !message.contains("ResearchProfile \"late-profile\" not found") {
        return Err(format!(
            "stall message does not name the profile: {message}"
        ));
    }
    // The Event is published right after the status write, so it may land a moment later.
    wait_for(
        "a ProfileNotFound Event for run late",
        Duration::from_secs(10),
        || async { Some(event_reasons(client, namespace, "late").await) },
        |reasons| reasons.iter().any(|r| r == "ProfileNotFound"),
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        profile("late-profile", &model.base_url(), &web),
    )
    .await?;
    // The profile watch (or the 15 s stall retry) starts the run.
    let late = wait_run(&runs, "late", "Completed", RUN_TIMEOUT, |r| r.is_finished()).await?;
    if !condition_is(&late, "Succeeded", "True", "Completed")
        || !condition_is(&late, "Stalled", "False", "Resolved")
    {
        return Err(format!(
            "run late did not complete cleanly: {:?}",
            late.status
        ));
    }
    configmaps
        .get("late-report")
        .await
        .map_err(|e| format!("late-report ConfigMap: {e}"))?;
    let metrics = http
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    let tokens = format!(
        "quarry_llm_tokens_total{{namespace=\"{namespace}\",profile=\"default\",provider=\"127.0.0.1\",model=\"scripted\",kind=\"input\"}} 700"
    );
    if !metrics.contains(&tokens) {
        return Err(format!("metrics lack {tokens}:\n{metrics}"));
    }
    // Every metric the Grafana dashboard and the alert rules query is exported by the operator.
    let exported: std::collections::BTreeSet<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let names = regex::Regex::new(r"\b(quarry_[a-z_]+|controller_runtime_[a-z_]+)\b")
        .map_err(|e| e.to_string())?;
    let queried = format!(
        "{}\n{}",
        include_str!("../../charts/quarry/files/dashboards/quarry.json"),
        include_str!("../../charts/quarry/files/alerts/quarry-rules.yaml")
    );
    let missing: std::collections::BTreeSet<&str> = names
        .find_iter(&queried)
        .map(|m| m.as_str())
        .filter(|n| !exported.contains(n))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the dashboard or alerts query metrics the operator does not export: {missing:?}\n{metrics}"
        ));
    }
    managed_search_engine(client, namespace, &model.base_url(), &web).await?;
    operator
        .kill()
        .await
        .map_err(|e| format!("stopping the operator: {e}"))?;
    Ok(())
}

/// Installs Quarry's CRDs as shipped in `crds/` (idempotent: the control plane installed them
/// at start; scenarios call it so they also run against a server set up elsewhere).
async fn install_crds(client: &Client) -> TestResult {
    quarry_e2e::control_plane::install_crds(client).await
}

/// Starts `quarry operator` for `namespace` with `kubeconfig` and waits (60 s) for `/readyz`.
async fn start_operator(
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
) -> Result<(tokio::process::Child, u16), String> {
    start_operator_as(kubeconfig, namespace, logs, "quarry-e2e", &[]).await
}

/// [`start_operator`] with a replica identity (`POD_NAME`) and extra arguments. The leader Lease
/// lives in the test's namespace, so concurrent tests never compete for one.
async fn start_operator_as(
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
    identity: &str,
    extra: &[&str],
) -> Result<(tokio::process::Child, u16), String> {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        probe.local_addr().map_err(|e| e.to_string())?.port()
    };
    let log_file =
        std::fs::File::create(logs).map_err(|e| format!("creating {}: {e}", logs.display()))?;
    let mut operator = quarry_e2e::quarry_bin::exempt_loopback_async(tokio::process::Command::new(
        operator_binary()?,
    ))
    .arg("operator")
    .args(extra)
    .env("KUBECONFIG", kubeconfig)
    .env("POD_NAMESPACE", namespace)
    .env("POD_NAME", identity)
    .env("QUARRY_BIND", format!("127.0.0.1:{port}"))
    .env("QUARRY_NAMESPACE", namespace)
    .env("RUST_LOG", "info,quarry=debug")
    .stdin(Stdio::null())
    .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
    .stderr(log_file)
    .kill_on_drop(true)
    .spawn()
    .map_err(|e| format!("starting the operator: {e}"))?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    let ready_url = format!("http://127.0.0.1:{port}/readyz");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = operator.try_wait() {
            return Err(format!("the operator exited early with {status}"));
        }
        if http
            .get(&ready_url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return Ok((operator, port));
        }
        if tokio::time::Instant::now() > deadline {
            return Err("the operator did not become ready within 60s".into());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A managed SearchEngine: idle at zero, scaled up with owned children when a run uses it (the
/// run waits for it: no kubelet runs its pods here), back to zero after its idle timeout.
async fn managed_search_engine(
    client: &Client,
    namespace: &str,
    model_url: &str,
    web: &str,
) -> TestResult {
    use k8s_openapi::api::apps::v1::Deployment;
    use quarry_api::SearchEngine;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "SearchEngine"),
        namespace,
        json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine",
            "metadata": {"name": "managed"},
            "spec": {"idleTimeout": "5s", "engines": [{"name": "wikipedia"}]}
        }),
    )
    .await?;
    let engines: Api<SearchEngine> = Api::namespaced(client.clone(), namespace);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let idle = wait_for(
        "SearchEngine managed Idle",
        Duration::from_secs(60),
        || async { engines.get("managed").await.ok() },
        |e: &SearchEngine| {
            e.status.as_ref().is_some_and(|s| {
                s.url.as_deref() == Some(&*format!("http://managed-searxng.{namespace}.svc:8080"))
                    && find_condition(&s.conditions, "Ready")
                        .is_some_and(|c| c.status == "True" && c.reason == "Idle")
            })
        },
    )
    .await?;
    let deployment = deployments
        .get("managed-searxng")
        .await
        .map_err(|e| format!("Deployment managed-searxng: {e}"))?;
    let owner = deployment.owner_references().first().cloned();
    if deployment.spec.as_ref().and_then(|s| s.replicas) != Some(0)
        || owner.as_ref().map(|o| (o.kind.as_str(), o.uid.as_str()))
            != Some((
                "SearchEngine",
                idle.metadata.uid.as_deref().unwrap_or_default(),
            ))
    {
        return Err(format!(
            "idle Deployment wrong: replicas/owner {deployment:?}"
        ));
    }
    for (kind, exists) in [
        (
            "ConfigMap",
            Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .get_opt("managed-searxng")
                .await
                .map_err(|e| e.to_string())?
                .is_some_and(|c| {
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("settings.yml"))
                        .is_some_and(|t| t.contains("wikipedia") && t.contains("json"))
                }),
        ),
        (
            // The operator creates no Secret: SearXNG's key comes from its pod's UID.
            "Deployment keyed by its pod's UID, no Secret:",
            Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), namespace)
                .get_opt("managed-searxng")
                .await
                .map_err(|e| e.to_string())?
                .is_none()
                && serde_json::to_value(&deployment).is_ok_and(|d| {
                    d["spec"]["template"]["spec"]["containers"][0]["env"]
                        .as_array()
                        .is_some_and(|env| {
                            env.iter().any(|e| {
                                e["name"] == "SEARXNG_SECRET"
                                    && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.uid"
                            })
                        })
                }),
        ),
        (
            "Service",
            Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), namespace)
                .get_opt("managed-searxng")
                .await
                .map_err(|e| e.to_string())?
                .is_some(),
        ),
    ] {
        if !exists {
            return Err(format!("{kind} managed-searxng missing or incomplete"));
        }
    }
    // A run whose profile names the engine scales it up and waits for a ready replica.
    let mut managed_profile = profile("managed-profile", model_url, web);
    managed_profile["spec"]["search"] = json!({"searchEngineRef": {"name": "managed"}});
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        managed_profile,
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run("waits", "managed-profile", "Which engines answer servers?"),
    )
    .await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    wait_run(
        &runs,
        "waits",
        "Reconciling=True WaitingForSearchEngine",
        Duration::from_secs(30),
        |r| condition_is(r, "Reconciling", "True", "WaitingForSearchEngine"),
    )
    .await?;
    wait_for(
        "Deployment managed-searxng scaled to 1",
        Duration::from_secs(30),
        || async { deployments.get("managed-searxng").await.ok() },
        |d: &Deployment| d.spec.as_ref().and_then(|s| s.replicas) == Some(1),
    )
    .await?;
    wait_for(
        "SearchEngine managed Starting with 1 active run",
        Duration::from_secs(30),
        || async { engines.get("managed").await.ok() },
        |e: &SearchEngine| {
            e.status.as_ref().is_some_and(|s| {
                s.active_runs == 1
                    && find_condition(&s.conditions, "Ready")
                        .is_some_and(|c| c.status == "False" && c.reason == "Starting")
            })
        },
    )
    .await?;
    // The run goes away: after the 5 s idle timeout the engine is back at zero.
    runs.delete("waits", &DeleteParams::default())
        .await
        .map_err(|e| format!("deleting run waits: {e}"))?;
    wait_for(
        "Deployment managed-searxng back to 0",
        Duration::from_secs(60),
        || async { deployments.get("managed-searxng").await.ok() },
        |d: &Deployment| d.spec.as_ref().and_then(|s| s.replicas) == Some(0),
    )
    .await?;
    Ok(())
}

/// The production launcher wired to local services: the scripted model, the search/docs stub and
/// ConfigMaps on the real API server. No operator process; checks the engine wiring the e2e
/// relies on.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn engine_launcher_completes_a_quick_run_into_configmaps_and_resumes_from_checkpoint() {
    use quarry_engine::research::machine::state::Phase;
    use quarry_operator::engine_builder::ApiKey;
    use quarry_operator::research_run::launcher::EngineLauncher;
    use quarry_operator::research_run::registry::Signal;
    use quarry_operator::research_run::{LaunchRequest, Launcher};
    use std::sync::Arc;

    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let ns = plane.namespace("launcher").await.unwrap();
    let (web, _web_task) = start_web().await.unwrap();
    let model = ScriptedModel::start(researcher_script(&web, "CEL validation"))
        .await
        .unwrap();

    let run: ResearchRun = serde_json::from_value(
        apply_object(
            &client,
            &ns,
            json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
                "metadata": {"name": "cel"},
                "spec": {"query": "How do CEL validation rules work in CRDs?", "mode": "quick"}
            }),
        )
        .await
        .unwrap(),
    )
    .unwrap();
    let run_uid = run.metadata.uid.clone().unwrap();
    let profile: quarry_api::ResearchProfile =
        serde_json::from_value(profile("default", &model.base_url(), &web)).unwrap();
    let key_ref = profile
        .spec
        .models
        .primary
        .api_key_secret_ref
        .clone()
        .unwrap();
    let input = quarry_operator::research_run::run_input(&run.spec, &profile.spec).unwrap();
    let request = LaunchRequest {
        run: Arc::new(run),
        profile_name: "default".into(),
        profile: profile.spec.clone(),
        api_keys: vec![(key_ref, ApiKey::new("sk-local"))],
        input,
        managed_search: None,
        artifacts: Default::default(),
    };
    let launcher = EngineLauncher::new(client.clone());
    let launch = |request: LaunchRequest| {
        let starter = launcher.prepare(request).unwrap();
        let (_control_tx, control_rx) = tokio::sync::watch::channel(Signal::Run);
        let (progress_tx, progress_rx) = tokio::sync::watch::channel(None);
        let task = starter(control_rx, Arc::new(progress_tx));
        async move {
            let state = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("run finishes");
            drop(_control_tx);
            (state, progress_rx)
        }
    };
    let (state, progress) = launch(request.clone()).await;
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    assert_eq!(
        (
            state.usage.input_tokens,
            state.usage.output_tokens,
            state.usage.llm_calls
        ),
        (700, 80, 4)
    );
    assert_eq!(
        progress.borrow().as_ref().map(|s| s.phase),
        Some(Phase::Completed),
        "the observer saw the last state"
    );
    assert!(
        model
            .recorded()
            .iter()
            .all(|r| r.authorization.as_deref() == Some("Bearer sk-local"))
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let report = serde_json::to_value(
        configmaps
            .get("cel-report")
            .await
            .expect("report ConfigMap"),
    )
    .unwrap();
    let checkpoint_cm =
        serde_json::to_value(configmaps.get("cel-state").await.expect("state ConfigMap")).unwrap();
    let markdown = report["data"]["report.md"].as_str().unwrap();
    assert!(
        markdown.contains("## Sources") && markdown.contains(&format!("{web}/docs/cel.html")),
        "{markdown}"
    );
    assert!(
        serde_json::from_str::<Value>(report["data"]["findings.json"].as_str().unwrap())
            .unwrap()
            .is_object()
    );
    assert_eq!(
        report["metadata"]["ownerReferences"][0]["uid"],
        run_uid.as_str()
    );
    assert_eq!(report["metadata"]["ownerReferences"][0]["controller"], true);
    assert!(checkpoint_cm["data"]["checkpoint.json"].is_string());
    // Launched again (an operator restart): the checkpoint says Completed, nothing is redone.
    let calls = model.request_count();
    let (again, _) = launch(request).await;
    assert_eq!(again, state);
    assert_eq!(model.request_count(), calls);
}

/// `spec.report.kind: objectStore` through the production launcher: every artifact goes to a real
/// S3-compatible server (moto, on 127.0.0.1), the finalizer is added before the first object, no
/// ConfigMap is written, and a relaunch resumes from the checkpoint in S3 without model calls.
#[tokio::test]
#[ignore = "needs moto's S3 server and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn engine_launcher_keeps_an_object_store_run_in_s3() {
    use quarry_e2e::s3_server::{BUCKET, S3Server, moto_available};
    use quarry_engine::research::machine::state::Phase;
    use quarry_engine::store::ArtifactStore;
    use quarry_operator::engine_builder::ApiKey;
    use quarry_operator::research_run::artifacts::ArtifactTarget;
    use quarry_operator::research_run::launcher::EngineLauncher;
    use quarry_operator::research_run::registry::Signal;
    use quarry_operator::research_run::{LaunchRequest, Launcher};
    use quarry_operator::store::object::{Bucket, ObjectStoreConfig, SecretValue};
    use quarry_operator::store::routed::{ReportLocation, ReportSlot};
    use std::sync::Arc;

    assert!(
        moto_available(),
        "moto's server is not installed (scripts/install-test-deps.sh)"
    );
    let s3 = S3Server::start().await.unwrap();
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let ns = plane.namespace("launcher-s3").await.unwrap();
    let (web, _web_task) = start_web().await.unwrap();
    let model = ScriptedModel::start(researcher_script(&web, "CEL validation"))
        .await
        .unwrap();
    let run_value = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
        "metadata": {"name": "cel-s3"},
        "spec": {"query": "How do CEL validation rules work in CRDs?", "mode": "quick",
                 "report": {"kind": "objectStore", "prefix": "team"}}
    });
    let run: ResearchRun =
        serde_json::from_value(apply_object(&client, &ns, run_value).await.unwrap()).unwrap();
    // What the launcher asks of the server is counted from here on.
    let before = plane.audit_entries().len();
    let profile: quarry_api::ResearchProfile =
        serde_json::from_value(profile("default", &model.base_url(), &web)).unwrap();
    let key_ref = profile
        .spec
        .models
        .primary
        .api_key_secret_ref
        .clone()
        .unwrap();
    let config = ObjectStoreConfig {
        url: format!("s3://{BUCKET}/quarry"),
        endpoint: Some(s3.endpoint()),
        region: Some("us-east-1".into()),
        allow_http: true,
        options: vec![
            (
                "aws_access_key_id".into(),
                SecretValue::new(&s3.access_key_id),
            ),
            (
                "aws_secret_access_key".into(),
                SecretValue::new(&s3.secret_access_key),
            ),
        ],
        from_env: false,
        origin: "test".into(),
    };
    let slot = ReportSlot::default();
    let request = LaunchRequest {
        input: quarry_operator::research_run::run_input(&run.spec, &profile.spec).unwrap(),
        run: Arc::new(run.clone()),
        profile_name: "default".into(),
        profile: profile.spec.clone(),
        api_keys: vec![(key_ref, ApiKey::new("sk-local"))],
        managed_search: None,
        artifacts: ArtifactTarget {
            object_store: Some(config.clone()),
            report: slot.clone(),
        },
    };
    let launcher = EngineLauncher::new(client.clone());
    launcher
        .check(&request)
        .await
        .expect("the object store answers");
    let launch = |request: LaunchRequest| {
        let starter = launcher.prepare(request).unwrap();
        let (control_tx, control_rx) = tokio::sync::watch::channel(Signal::Run);
        let task = starter(control_rx, Arc::new(tokio::sync::watch::channel(None).0));
        async move {
            let state = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("run finishes");
            drop(control_tx);
            state
        }
    };
    let state = launch(request.clone()).await;
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    let layout = quarry_operator::research_run::artifacts::layout(&run).unwrap();
    let store = Bucket::connect(&config).unwrap().for_run(&layout);
    let report_name = layout.report_name();
    let listed = store.list().await.unwrap();
    for name in ["checkpoint.json", "findings.json", report_name.as_str()] {
        assert!(listed.iter().any(|n| n == name), "{name} in {listed:?}");
    }
    let url = format!("s3://{BUCKET}/quarry/team/{ns}/cel-s3/{report_name}");
    assert_eq!(slot.get(), Some(ReportLocation::Object(url)));
    let markdown = String::from_utf8(store.get("report.md").await.unwrap().unwrap()).unwrap();
    assert!(
        markdown.contains(&format!("{web}/docs/cel.html")),
        "{markdown}"
    );
    // Every request of the launcher in the test namespace, as (verb, resource/name).
    let requests: Vec<(String, String)> = plane.audit_entries()[before..]
        .iter()
        .filter(|e| e["stage"] == "ResponseComplete" && e["objectRef"]["namespace"] == ns.as_str())
        .map(|e| {
            (
                e["verb"].as_str().unwrap_or_default().to_string(),
                format!(
                    "{}/{}",
                    e["objectRef"]["resource"].as_str().unwrap_or_default(),
                    e["objectRef"]["name"].as_str().unwrap_or_default()
                ),
            )
        })
        .collect();
    assert!(
        requests
            .iter()
            .all(|(_, what)| !what.starts_with("configmaps/")),
        "no ConfigMap for an objectStore run: {requests:?}"
    );
    // The guard ran once: one read of the run, one patch recording where its objects go, one
    // finalizer patch.
    let run_request = |verb: &str| (verb.to_string(), "researchruns/cel-s3".to_string());
    assert_eq!(
        requests,
        vec![
            run_request("get"),
            run_request("patch"),
            run_request("patch")
        ]
    );
    let stored = Api::<ResearchRun>::namespaced(client.clone(), &ns)
        .get("cel-s3")
        .await
        .unwrap();
    assert_eq!(
        stored.metadata.finalizers,
        Some(vec!["quarry.dev/artifacts".to_string()])
    );
    assert_eq!(
        stored.annotations().get("quarry.dev/artifacts-location"),
        Some(&format!("s3://{BUCKET}/quarry/team/{ns}/cel-s3/"))
    );
    // Relaunched (an operator restart): the checkpoint in S3 says Completed; nothing is redone
    // and the report is found where it is.
    let calls = model.request_count();
    let relaunched_slot = ReportSlot::default();
    let mut again = request;
    again.artifacts.report = relaunched_slot.clone();
    let resumed = launch(again).await;
    assert_eq!(resumed, state);
    assert_eq!(model.request_count(), calls);
    assert_eq!(relaunched_slot.get(), slot.get());
}

/// A TCP proxy in front of the API server that can be taken down: while down it cuts every open
/// connection and refuses new ones, like an API server that is restarting.
struct ApiProxy {
    port: u16,
    down: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl ApiProxy {
    async fn start(upstream: String) -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = down.clone();
        let task = tokio::spawn(async move {
            let mut open: Vec<tokio::task::JoinHandle<()>> = Vec::new();
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                open.retain(|t| !t.is_finished());
                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                    for t in open.drain(..) {
                        t.abort();
                    }
                    drop(inbound);
                    continue;
                }
                let upstream = upstream.clone();
                let flag = flag.clone();
                open.push(tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let copy = tokio::io::copy_bidirectional(&mut inbound, &mut outbound);
                    tokio::pin!(copy);
                    // Open connections (watches) are cut as soon as the proxy goes down.
                    loop {
                        tokio::select! {
                            _ = &mut copy => return,
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {
                                if flag.load(std::sync::atomic::Ordering::SeqCst) {
                                    return;
                                }
                            }
                        }
                    }
                }));
            }
        });
        Ok(Self { port, down, task })
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A copy of `kubeconfig` whose current cluster is reached through `127.0.0.1:0` (the
/// caller puts in the proxy's port), still verifying the API server's certificate under its own
/// name; returns (path, upstream `host:port`).
fn proxied_kubeconfig(
    kubeconfig: &str,
    dir: &std::path::Path,
) -> Result<(std::path::PathBuf, String), String> {
    let text = std::fs::read_to_string(kubeconfig).map_err(|e| e.to_string())?;
    let mut config: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
    let context_name = config["current-context"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let cluster_name = config["contexts"]
        .as_sequence()
        .and_then(|c| c.iter().find(|c| c["name"].as_str() == Some(&context_name)))
        .and_then(|c| c["context"]["cluster"].as_str())
        .ok_or("kubeconfig has no current context")?
        .to_string();
    let clusters = config["clusters"]
        .as_sequence_mut()
        .ok_or("kubeconfig has no clusters")?;
    let cluster = clusters
        .iter_mut()
        .find(|c| c["name"].as_str() == Some(&cluster_name))
        .ok_or("current cluster not found")?;
    let server = cluster["cluster"]["server"]
        .as_str()
        .ok_or("cluster has no server")?
        .to_string();
    let url = reqwest::Url::parse(&server).map_err(|e| e.to_string())?;
    let host = url.host_str().ok_or("server has no host")?.to_string();
    let bare = host.trim_matches(['[', ']']).to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    let upstream = if bare.contains(':') {
        format!("[{bare}]:{port}")
    } else {
        format!("{bare}:{port}")
    };
    cluster["cluster"]["server"] =
        serde_yaml::Value::from(format!("{}://127.0.0.1:0", url.scheme()));
    if url.scheme() == "https" && cluster["cluster"]["tls-server-name"].is_null() {
        cluster["cluster"]["tls-server-name"] = serde_yaml::Value::from(bare);
    }
    let path = dir.join("proxied-kubeconfig.yaml");
    std::fs::write(
        &path,
        serde_yaml::to_string(&config).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    Ok((path, upstream))
}

/// An API outage shorter than the lease's renew deadline (15 s lease, stepping down 5 s before it
/// could expire): the leader keeps its leadership and its run, which completes with no call
/// repeated. Production behaviour: ride out what the lease allows.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_leader_rides_out_an_api_outage_shorter_than_its_lease() {
    in_test_namespace(
        "outage-short",
        |client, kubeconfig, namespace, logs, _audit| async move {
            api_outage_scenario(&client, &kubeconfig, &namespace, &logs, Outage::Short).await
        },
    )
    .await;
}

/// An API outage longer than the lease: the leader cannot confirm its lease, steps down and exits
/// (another replica may hold the lease by then; researching on would pay twice). The test plays
/// the kubelet: it restarts the exited process with back-off, as often as it exits, and the
/// restarted operator finishes the run from its journal: the run completes, one report exists,
/// and usage counts every call the model answered, the dead attempt's included.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_operator_that_steps_down_in_a_long_api_outage_is_restarted_and_finishes_the_run() {
    in_test_namespace(
        "outage-long",
        |client, kubeconfig, namespace, logs, _audit| async move {
            api_outage_scenario(&client, &kubeconfig, &namespace, &logs, Outage::Long).await
        },
    )
    .await;
}

/// The two outages [`api_outage_scenario`] plays.
#[derive(Clone, Copy, PartialEq)]
enum Outage {
    /// 6 s: under the 10 s a 15 s lease allows before the leader steps down.
    Short,
    /// 30 s: twice the lease.
    Long,
}

/// The operator process, restarted like a container by the kubelet: after each exit, with
/// back-off (1, 2, 4, 5, 5... s), until the test ends.
struct Kubelet {
    kubeconfig: String,
    namespace: String,
    logs: PathBuf,
    child: Option<tokio::process::Child>,
    restart_at: Option<tokio::time::Instant>,
    exits: Vec<std::process::ExitStatus>,
    starts: u32,
}

impl Kubelet {
    async fn start(
        kubeconfig: &str,
        namespace: &str,
        logs: &std::path::Path,
    ) -> Result<Self, String> {
        let mut kubelet = Kubelet {
            kubeconfig: kubeconfig.into(),
            namespace: namespace.into(),
            logs: logs.to_path_buf(),
            child: None,
            restart_at: Some(tokio::time::Instant::now()),
            exits: Vec::new(),
            starts: 0,
        };
        kubelet.tick().await?;
        if kubelet.child.is_none() {
            return Err("the operator did not start".into());
        }
        Ok(kubelet)
    }

    /// The log of the `n`th start (the first keeps the test's log path).
    fn log_of(&self, n: u32) -> PathBuf {
        if n == 0 {
            self.logs.clone()
        } else {
            self.logs.with_extension(format!("restart-{n}.log"))
        }
    }

    /// Notices an exit and schedules the restart; restarts when due.
    async fn tick(&mut self) -> Result<(), String> {
        if let Some(child) = &mut self.child
            && let Ok(Some(status)) = child.try_wait()
        {
            self.exits.push(status);
            self.child = None;
            let backoff = Duration::from_secs((1u64 << self.exits.len().min(3)).min(5) / 2 + 1);
            self.restart_at = Some(tokio::time::Instant::now() + backoff);
        }
        if self.child.is_none()
            && self
                .restart_at
                .is_some_and(|at| tokio::time::Instant::now() >= at)
        {
            let log = self.log_of(self.starts);
            self.starts += 1;
            match start_operator(&self.kubeconfig, &self.namespace, &log).await {
                Ok((child, _)) => {
                    self.child = Some(child);
                    self.restart_at = None;
                }
                // Exited before it was ready (say, the API is still away): a crash loop.
                Err(_) => {
                    self.restart_at = Some(tokio::time::Instant::now() + Duration::from_secs(2));
                }
            }
        }
        Ok(())
    }

    /// Every start's log, concatenated.
    fn all_logs(&self) -> String {
        (0..self.starts.max(1))
            .map(|n| std::fs::read_to_string(self.log_of(n)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n--- restart ---\n")
    }
}

async fn api_outage_scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
    outage: Outage,
) -> TestResult {
    install_crds(client).await?;
    let (web, _web_task) = start_web().await?;
    let mut steps = researcher_script(&web, "API outage");
    if outage == Outage::Short {
        // The report turn answers after the outage: the run is mid-research while the API is gone.
        let last = steps.pop().ok_or("empty script")?;
        steps.push(Step::delay(10_000, last));
    }
    let script = quarry_e2e::model_server::Script::default().with_route(
        quarry_e2e::model_server::Route::new("researcher", "Research task:", steps).by_turn(),
    );
    let model = ScriptedModel::start(script)
        .await
        .map_err(|e| format!("model server: {e}"))?;
    if outage == Outage::Long {
        // The first attempt's report turn never answers: the attempt dies with it in flight.
        model.hold_once("researcher", 3);
    }
    apply(
        client,
        ("", "v1", "Secret"),
        namespace,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-e2e"}}),
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        profile("default", &model.base_url(), &web),
    )
    .await?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (proxied, upstream) = proxied_kubeconfig(kubeconfig, dir.path())?;
    let proxy = ApiProxy::start(upstream).await?;
    // The kubeconfig names the proxy's port, known only now.
    let text = std::fs::read_to_string(&proxied)
        .map_err(|e| e.to_string())?
        .replace("://127.0.0.1:0", &format!("://127.0.0.1:{}", proxy.port));
    std::fs::write(&proxied, text).map_err(|e| e.to_string())?;
    let proxied = proxied.to_string_lossy().into_owned();
    let mut kubelet = Kubelet::start(&proxied, namespace, logs).await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run(
            "outage",
            "default",
            "What happens when the API server goes away?",
        ),
    )
    .await?;
    // The report turn has been asked for: take the API server away.
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    while model.request_count() < 4 {
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "the run never reached its report turn ({} calls)",
                model.request_count()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    proxy.set_down(true);
    let back = tokio::time::Instant::now()
        + match outage {
            Outage::Short => Duration::from_secs(6),
            Outage::Long => Duration::from_secs(30),
        };
    while tokio::time::Instant::now() < back {
        kubelet.tick().await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    proxy.set_down(false);
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let done = loop {
        kubelet.tick().await?;
        if let Ok(run) = runs.get("outage").await
            && run.is_finished()
        {
            break run;
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "run outage did not finish within {RUN_TIMEOUT:?} after the outage; exits {:?}\n{}",
                kubelet.exits,
                kubelet.all_logs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    if !condition_is(&done, "Succeeded", "True", "Completed") {
        return Err(format!("run outage did not complete: {:?}", done.status));
    }
    let usage = done
        .status
        .clone()
        .unwrap_or_default()
        .usage
        .ok_or("no usage")?;
    let recorded = model.recorded();
    let answered = recorded.iter().filter(|r| r.answered).count();
    match outage {
        Outage::Short => {
            if !kubelet.exits.is_empty() {
                return Err(format!(
                    "the operator exited during a short outage: {:?}\n{}",
                    kubelet.exits,
                    kubelet.all_logs()
                ));
            }
            if (usage.input_tokens, usage.output_tokens, usage.llm_calls) != (700, 80, 4)
                || recorded.len() != 4
            {
                return Err(format!(
                    "usage lost or doubled, or calls repeated ({} sent): {usage:?}",
                    recorded.len()
                ));
            }
        }
        Outage::Long => {
            if kubelet.exits.is_empty() || !kubelet.all_logs().contains("leadership ended") {
                return Err(format!(
                    "the leader kept researching through an outage longer than its lease\n{}",
                    kubelet.all_logs()
                ));
            }
            // Three answered turns died with the first attempt; the restarted one redid the
            // researcher (quick mode has no checkpoint before it ends): 3 + 4 answered calls.
            if (answered, usage.llm_calls as usize) != (7, 7) {
                return Err(format!(
                    "usage must count every answered call ({answered} answered, {} sent): {usage:?}",
                    recorded.len()
                ));
            }
        }
    }
    let reports = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|c| c.name_any().ends_with("-report"))
        .count();
    if reports != 1 {
        return Err(format!("{reports} report ConfigMaps, expected exactly one"));
    }
    eprintln!(
        "outage {:?}: {} operator exits, {} starts, {answered} answered calls",
        match outage {
            Outage::Short => "short",
            Outage::Long => "long",
        },
        kubelet.exits.len(),
        kubelet.starts
    );
    Ok(())
}

/// An upgrade that tightens validation, on a server without ratcheting: a run stored while its
/// whitespace-only query was still allowed can have no status written (422). The operator says so
/// once with a Warning Event and stops; it does not retry every 10 s forever.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_run_stored_before_a_stricter_rule_gets_an_event_not_a_retry_loop() {
    in_test_namespace(
        "ratchet",
        |client, kubeconfig, namespace, logs, audit| async move {
            stricter_rule_scenario(&client, &kubeconfig, &namespace, &logs, &audit).await
        },
    )
    .await;
}

async fn stricter_rule_scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &std::path::Path,
    audit: &std::path::Path,
) -> TestResult {
    use quarry_e2e::control_plane::{apply_crd, shipped_crds};
    // The "previous release": the ResearchRun CRD without the non-blank query rule.
    let mut older = shipped_crds()?
        .into_iter()
        .find(|c| c["metadata"]["name"] == "researchruns.quarry.dev")
        .ok_or("no researchruns CRD in crds/")?;
    fn drop_rule(v: &mut Value, rule: &str) -> usize {
        match v {
            Value::Object(map) => {
                let mut n = 0;
                if let Some(Value::Array(rules)) = map.get_mut("x-kubernetes-validations") {
                    let before = rules.len();
                    rules.retain(|r| r["rule"] != rule);
                    n += before - rules.len();
                }
                n + map.values_mut().map(|c| drop_rule(c, rule)).sum::<usize>()
            }
            Value::Array(items) => items.iter_mut().map(|c| drop_rule(c, rule)).sum(),
            _ => 0,
        }
    }
    if drop_rule(&mut older, r"self.matches('\\S')") == 0 {
        return Err("the shipped CRD has no non-blank query rule to drop".into());
    }
    apply_crd(client, older).await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run("blank", "default", "    "),
    )
    .await?;
    // The upgrade: the shipped CRD, rule included.
    install_crds(client).await?;
    let started = tokio::time::Instant::now();
    let (mut operator, _) = start_operator(kubeconfig, namespace, logs).await?;
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), namespace);
    let event = wait_for(
        "a StoredSpecInvalid Event on run blank",
        Duration::from_secs(30),
        || async {
            events
                .list(&ListParams::default())
                .await
                .ok()
                .and_then(|l| {
                    l.items.into_iter().find(|e| {
                        e.reason.as_deref() == Some("StoredSpecInvalid")
                            && e.involved_object.name.as_deref() == Some("blank")
                    })
                })
        },
        |_| true,
    )
    .await?;
    let note = event.message.unwrap_or_default();
    if !note.contains("kubectl delete researchrun blank")
        || event.type_.as_deref() != Some("Warning")
    {
        return Err(format!("the Event does not say what to do: {note}"));
    }
    // Long enough for three rounds of the old 10 s retry.
    tokio::time::sleep(Duration::from_secs(32).saturating_sub(started.elapsed())).await;
    let writes = count_status_writes(audit, namespace, "blank");
    if writes == 0 || writes > 2 {
        return Err(format!(
            "{writes} status writes in 32 s: the operator retries in a loop"
        ));
    }
    let metrics_ok = std::fs::read_to_string(logs)
        .unwrap_or_default()
        .matches("stored spec fails the current validation")
        .count();
    if metrics_ok == 0 || metrics_ok > 2 {
        return Err(format!(
            "expected one or two give-up log lines, saw {metrics_ok}"
        ));
    }
    let run = Api::<ResearchRun>::namespaced(client.clone(), namespace)
        .get("blank")
        .await
        .map_err(|e| e.to_string())?;
    if run.status.is_some() {
        return Err(format!("no status can have been written: {:?}", run.status));
    }
    operator.kill().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Status writes (`patch`/`update` on `researchruns/status`) for run `name` in the audit log.
fn count_status_writes(path: &std::path::Path, namespace: &str, name: &str) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && matches!(e["verb"].as_str(), Some("patch" | "update"))
                && e["objectRef"]["resource"] == "researchruns"
                && e["objectRef"]["subresource"] == "status"
                && e["objectRef"]["namespace"] == namespace
                && e["objectRef"]["name"] == name
        })
        .count()
}

#[test]
fn the_proxied_kubeconfig_points_at_the_proxy_and_verifies_the_real_name() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("config");
    std::fs::write(
        &original,
        "apiVersion: v1\nkind: Config\ncurrent-context: e2e\ncontexts:\n- name: e2e\n  context: {cluster: c1, user: u1}\nclusters:\n- name: c0\n  cluster: {server: 'https://other:1'}\n- name: c1\n  cluster: {server: 'https://api.test.example:6443', certificate-authority-data: QUJD}\nusers:\n- name: u1\n  user: {token: t}\n",
    )
    .unwrap();
    let (path, upstream) = proxied_kubeconfig(original.to_str().unwrap(), dir.path()).unwrap();
    assert_eq!(upstream, "api.test.example:6443");
    let config: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let c1 = &config["clusters"][1]["cluster"];
    assert_eq!(c1["server"].as_str(), Some("https://127.0.0.1:0"));
    assert_eq!(c1["tls-server-name"].as_str(), Some("api.test.example"));
    assert_eq!(c1["certificate-authority-data"].as_str(), Some("QUJD"));
    assert_eq!(
        config["clusters"][0]["cluster"]["server"].as_str(),
        Some("https://other:1")
    );
}

#[tokio::test]
async fn the_api_proxy_cuts_and_refuses_connections_while_down() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // An echo server stands for the API server.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = upstream.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = upstream.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let proxy = ApiProxy::start(addr.to_string()).await.unwrap();
    let echo = |mut s: tokio::net::TcpStream| async move {
        s.write_all(b"ping").await.ok()?;
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), s.read_exact(&mut buf))
            .await
            .ok()?
            .ok()?;
        Some((buf, s))
    };
    let conn = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
        .await
        .unwrap();
    let (buf, mut open) = echo(conn).await.unwrap();
    assert_eq!(&buf, b"ping");
    proxy.set_down(true);
    // The open connection is cut.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(2), open.read_to_end(&mut rest))
        .await
        .unwrap()
        .unwrap_or(0);
    assert_eq!(n, 0, "the connection was closed");
    // New connections are refused while down, and work again after.
    let refused = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
        .await
        .unwrap();
    assert!(echo(refused).await.is_none());
    proxy.set_down(false);
    let conn = tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
        .await
        .unwrap();
    assert_eq!(&echo(conn).await.unwrap().0, b"ping");
}

/// Two operator processes against one API server: only the Lease holder researches; when it is
/// killed mid-researcher the other takes the lease within its duration, resumes the run from its
/// checkpoint and completes it.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn two_operators_one_leader_and_a_killed_leader_is_replaced() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let kubeconfig = plane.kubeconfig().display().to_string();
    let namespace = plane.namespace("le").await.unwrap();
    let logs = |who: &str| std::env::temp_dir().join(format!("{namespace}-operator-{who}.log"));
    let outcome =
        std::panic::AssertUnwindSafe(leader_scenario(&client, &kubeconfig, &namespace, &logs))
            .catch_unwind()
            .await;
    let tails = format!(
        "--- operator a:\n{}\n--- operator b:\n{}",
        log_tail(&logs("a")),
        log_tail(&logs("b"))
    );
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(message)) => panic!("{message}\n{tails}"),
        Err(panic) => {
            eprintln!("{tails}");
            std::panic::resume_unwind(panic)
        }
    }
}

async fn lease_holder(client: &Client, namespace: &str) -> Option<String> {
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), namespace)
        .get("quarry-operator")
        .await
        .ok()
        .and_then(|l| l.spec.and_then(|s| s.holder_identity))
}

async fn leader_scenario(
    client: &Client,
    kubeconfig: &str,
    namespace: &str,
    logs: &dyn Fn(&str) -> PathBuf,
) -> TestResult {
    install_crds(client).await?;
    let (web, _web_task) = start_web().await?;
    let script = quarry_e2e::model_server::Script::default().with_route(
        quarry_e2e::model_server::Route::new(
            "researcher",
            "Research task:",
            researcher_script(&web, "CEL validation"),
        )
        .by_turn(),
    );
    let model = ScriptedModel::start(script)
        .await
        .map_err(|e| format!("model server: {e}"))?;
    // The leader dies while the researcher's third call is held.
    model.hold_once("researcher", 2);
    apply(
        client,
        ("", "v1", "Secret"),
        namespace,
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        profile("default", &model.base_url(), &web),
    )
    .await?;
    let lease = ["--lease-duration-seconds", "6"];
    let (mut a, _) = start_operator_as(kubeconfig, namespace, &logs("a"), "a", &lease).await?;
    let (mut b, _) = start_operator_as(kubeconfig, namespace, &logs("b"), "b", &lease).await?;
    let first = wait_for(
        "a lease holder",
        Duration::from_secs(30),
        || lease_holder(client, namespace),
        |_: &String| true,
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchRun"),
        namespace,
        run(
            "handover",
            "default",
            "How do CEL validation rules work in CRDs?",
        ),
    )
    .await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while model.recorded().len() < 3 {
        if tokio::time::Instant::now() > deadline {
            return Err("the researcher never reached its held call".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let started = |who: &str| {
        std::fs::read_to_string(logs(who))
            .unwrap_or_default()
            .contains("research started")
    };
    let standby = if first == "a" { "b" } else { "a" };
    if !started(&first) || started(standby) {
        return Err(format!("only the holder {first} may research"));
    }
    let killed_at = tokio::time::Instant::now();
    if first == "a" {
        a.start_kill()
    } else {
        b.start_kill()
    }
    .map_err(|e| e.to_string())?;
    let next = wait_for(
        "the standby to take the lease",
        Duration::from_secs(30),
        || lease_holder(client, namespace),
        |h: &String| h == standby,
    )
    .await?;
    let handover = killed_at.elapsed();
    if handover > Duration::from_secs(6 + 6) {
        return Err(format!(
            "handover to {next:?} took {handover:?}, over the lease duration"
        ));
    }
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    let done = wait_run(&runs, "handover", "Completed", RUN_TIMEOUT, |r| {
        r.is_finished()
    })
    .await?;
    if !condition_is(&done, "Succeeded", "True", "Completed") || !started(standby) {
        return Err(format!(
            "the new leader did not complete the run: {:?}",
            done.status
        ));
    }
    // Two answered turns and the held one before the kill, then the redone researcher's four.
    let recorded = model.recorded();
    let answered = recorded.iter().filter(|r| r.answered).count();
    if (recorded.len(), answered) != (7, 6) {
        return Err(format!(
            "unexpected model calls: {} sent, {answered} answered",
            recorded.len()
        ));
    }
    let usage = done.status.unwrap_or_default().usage.unwrap_or_default();
    if usage.llm_calls != 6 {
        return Err(format!(
            "recorded usage must count the killed leader's calls: {usage:?}"
        ));
    }
    Ok(())
}

/// Runs `quarry ARGS` against the test cluster and returns its stdout.
async fn quarry_cli(kubeconfig: &str, args: &[&str]) -> Result<String, String> {
    let out = quarry_e2e::quarry_bin::exempt_loopback_async(tokio::process::Command::new(
        operator_binary()?,
    ))
    .args(args)
    .env("KUBECONFIG", kubeconfig)
    .output()
    .await
    .map_err(|e| format!("quarry {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "quarry {args:?} exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reasons of the Events recorded for the object named `run` in `namespace`.
/// The operator's `/metrics` text (empty when it cannot be read).
async fn scrape_metrics(port: u16) -> String {
    let url = format!("http://127.0.0.1:{port}/metrics");
    match reqwest::get(&url).await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

async fn event_reasons(client: &Client, namespace: &str, run: &str) -> Vec<String> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .into_iter()
                .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(run))
                .filter_map(|e| e.reason)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_plan_waits_for_approval_then_runs_is_rejected_or_times_out() {
    in_test_namespace(
        "approval",
        |client, kubeconfig, namespace, logs, _audit| async move {
            install_crds(&client).await?;
            let (web, _web_task) = start_web().await?;
            let model = ScriptedModel::start(researcher_script(&web, "CEL approval"))
                .await
                .map_err(|e| format!("model server: {e}"))?;
            key_and_profile(&client, &namespace, &model.base_url(), &web).await?;
            let (_operator, port) = start_operator(&kubeconfig, &namespace, &logs).await?;
            let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &namespace);
            let with_approval = |name: &str, timeout: Option<&str>| {
                let mut body = run(name, "default", "How do CEL validation rules work in CRDs?");
                body["spec"]["approval"] = json!({"required": true});
                if let Some(t) = timeout {
                    body["spec"]["approval"]["timeout"] = json!(t);
                }
                body
            };
            let awaiting = |r: &ResearchRun| {
                condition_is(r, "AwaitingApproval", "True", "PlanReady")
                    && r.status.as_ref().is_some_and(|s| {
                        s.approval
                            .as_ref()
                            .is_some_and(|a| a.waiting_since.is_some())
                    })
            };

            // Approved: nothing is asked of the model while the plan waits; then it runs to the end.
            let rr = ("quarry.dev", "v1alpha1", "ResearchRun");
            apply(&client, rr, &namespace, with_approval("approve-me", None)).await?;
            let waiting = wait_run(
                &runs,
                "approve-me",
                "AwaitingApproval",
                RUN_TIMEOUT,
                awaiting,
            )
            .await?;
            let status = waiting.status.clone().unwrap_or_default();
            if status.agenda.len() != 1 || status.phase != Some(quarry_api::Phase::Planning) {
                return Err(format!(
                    "a waiting quick run shows its one task in Planning: {status:?}"
                ));
            }
            let message = status.message.clone().unwrap_or_default();
            if !message.contains(&format!("quarry approve approve-me -n {namespace}")) {
                return Err(format!("the message says how to approve: {message}"));
            }
            // The dashboard counts it among the plans waiting for a person.
            let gauge =
                format!("quarry_runs{{namespace=\"{namespace}\",phase=\"AwaitingApproval\"}} 1");
            wait_for(
                "the AwaitingApproval gauge",
                Duration::from_secs(10),
                || async { Some(scrape_metrics(port).await) },
                |text: &String| text.contains(&gauge),
            )
            .await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            if model.request_count() != 0 {
                return Err(format!(
                    "{} model call(s) while the plan waited for approval",
                    model.request_count()
                ));
            }
            let said =
                quarry_cli(&kubeconfig, &["approve", "approve-me", "-n", &namespace]).await?;
            if !said.contains("researchrun.quarry.dev/approve-me approved") {
                return Err(format!("quarry approve said {said:?}"));
            }
            let done = wait_run(&runs, "approve-me", "Completed", RUN_TIMEOUT, |r| {
                r.is_finished()
            })
            .await?;
            if !condition_is(&done, "Succeeded", "True", "Completed")
                || !condition_is(&done, "AwaitingApproval", "False", "Approved")
            {
                return Err(format!("approved run: {:?}", done.status));
            }
            // Events are published after the status write that reports them: poll for them.
            wait_for(
                "approve-me's Events",
                Duration::from_secs(30),
                || async { Some(event_reasons(&client, &namespace, "approve-me").await) },
                |reasons: &Vec<String>| {
                    ["PlanReady", "Approved", "Completed"]
                        .iter()
                        .all(|w| reasons.iter().any(|r| r == w))
                },
            )
            .await?;

            // Rejected: the run is cancelled without a model call.
            let calls = model.request_count();
            apply(&client, rr, &namespace, with_approval("reject-me", None)).await?;
            wait_run(
                &runs,
                "reject-me",
                "AwaitingApproval",
                RUN_TIMEOUT,
                awaiting,
            )
            .await?;
            quarry_cli(&kubeconfig, &["reject", "reject-me", "-n", &namespace]).await?;
            let rejected = wait_run(&runs, "reject-me", "Cancelled", RUN_TIMEOUT, |r| {
                r.is_finished()
            })
            .await?;
            if !condition_is(&rejected, "Succeeded", "False", "Cancelled") {
                return Err(format!("rejected run: {:?}", rejected.status));
            }

            // Nobody decides within the timeout: Failed/ApprovalTimeout, nothing searched.
            apply(
                &client,
                rr,
                &namespace,
                with_approval("too-late", Some("2s")),
            )
            .await?;
            let late = wait_run(&runs, "too-late", "Failed", RUN_TIMEOUT, |r| {
                r.is_finished()
            })
            .await?;
            if !condition_is(&late, "Succeeded", "False", "ApprovalTimeout") {
                return Err(format!("unapproved run: {:?}", late.status));
            }
            if model.request_count() != calls {
                return Err("the rejected and timed-out runs called the model".into());
            }
            // A spec that adds approval after creation is refused at admission.
            let patched = runs
                .patch(
                    "approve-me",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"approval": {"required": false}}})),
                )
                .await;
            match patched {
                Err(kube::Error::Api(e))
                    if e.message
                        .contains("approval.required and approval.timeout cannot change") => {}
                other => return Err(format!("changing approval.required: {other:?}")),
            }
            Ok(())
        },
    )
    .await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_schedule_makes_runs_at_their_times_compares_them_and_a_suspended_one_makes_none() {
    use quarry_api::ResearchSchedule;
    in_test_namespace("schedule", |client, kubeconfig, namespace, logs, _audit| async move {
        install_crds(&client).await?;
        let (web, _web_task) = start_web().await?;
        // The second run reports one claim more than the first: something changed.
        let mut steps = researcher_script(&web, "CEL schedule");
        let mut second = researcher_script(&web, "CEL schedule");
        if let Some(last) = second.last_mut() {
            *last = Step::text(format!(
                "## Summary\nCEL rules validate custom resources at admission.\n\n## Key findings\n- Rules run in the API server ([CEL]({web}/docs/cel.html)).\n- oldSelf makes fields immutable ([CEL]({web}/docs/cel.html)).\n- Invalid objects are rejected before they are stored ([CEL]({web}/docs/cel.html)).\n"
            ))
            .with_usage(300, 60);
        }
        steps.extend(second);
        let model = ScriptedModel::start(steps)
            .await
            .map_err(|e| format!("model server: {e}"))?;
        key_and_profile(&client, &namespace, &model.base_url(), &web).await?;
        let (_operator, port) = start_operator(&kubeconfig, &namespace, &logs).await?;
        let schedule = |name: &str, suspend: bool, zone: &str| {
            json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule",
                "metadata": {"name": name},
                "spec": {
                    "schedule": "* * * * *",
                    "timeZone": zone,
                    "suspend": suspend,
                    "runTemplate": {
                        "labels": {"team": "docs"},
                        "spec": {"query": "How do CEL validation rules work in CRDs?", "mode": "quick"}
                    }
                }
            })
        };
        let kind = ("quarry.dev", "v1alpha1", "ResearchSchedule");
        apply(&client, kind, &namespace, schedule("every-minute", false, "Europe/Berlin")).await?;
        apply(&client, kind, &namespace, schedule("paused", true, "UTC")).await?;
        apply(&client, kind, &namespace, schedule("nowhere", false, "Mars/Olympus")).await?;
        let schedules: Api<ResearchSchedule> = Api::namespaced(client.clone(), &namespace);
        let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &namespace);
        // A time zone that does not exist stalls the schedule with a message to act on.
        wait_for(
            "nowhere stalled",
            Duration::from_secs(30),
            || async {
                schedules.get("nowhere").await.ok().and_then(|s| {
                    let status = s.status?;
                    quarry_api::find_condition(&status.conditions, "Stalled")
                        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
                })
            },
            |(status, reason, message): &(String, String, String)| {
                status == "True" && reason == "ScheduleInvalid" && message.contains("Mars/Olympus")
            },
        )
        .await?;
        let every_minute_runs = || async {
            runs.list(&ListParams::default().labels("quarry.dev/schedule=every-minute"))
                .await
                .ok()
                .map(|l| l.items)
        };
        // Within the next minute boundary (plus slack) the schedule makes its run.
        let made = wait_for(
            "a run of every-minute",
            Duration::from_secs(90),
            every_minute_runs,
            |items: &Vec<ResearchRun>| !items.is_empty(),
        )
        .await?;
        let run = &made[0];
        let owner = run.owner_references().first().cloned();
        if owner.as_ref().map(|o| (o.kind.as_str(), o.name.as_str(), o.controller))
            != Some(("ResearchSchedule", "every-minute", Some(true)))
        {
            return Err(format!("the run is owned by its schedule: {owner:?}"));
        }
        if run.labels().get("team").map(String::as_str) != Some("docs")
            || !run.annotations().contains_key("quarry.dev/scheduled-at")
        {
            return Err(format!("template labels and the scheduled time: {:?}", run.metadata));
        }
        let status = wait_for(
            "every-minute's status",
            Duration::from_secs(30),
            || async { schedules.get("every-minute").await.ok().and_then(|s| s.status) },
            |s: &quarry_api::ResearchScheduleStatus| {
                s.last_schedule_time.is_some() && s.next_schedule_time.is_some()
            },
        )
        .await?;
        let last = status.last_schedule_time.clone().unwrap();
        let next = status.next_schedule_time.clone().unwrap();
        if next.0.as_second() - last.0.as_second() != 60 {
            return Err(format!("every minute: last {last:?}, next {next:?}"));
        }
        // The run completes, and the schedule points at its report.
        let name = run.name_any();
        wait_run(&runs, &name, "Completed", RUN_TIMEOUT, |r| r.is_finished()).await?;
        wait_for(
            "the schedule's last report",
            Duration::from_secs(30),
            || async {
                schedules
                    .get("every-minute")
                    .await
                    .ok()
                    .and_then(|s| s.status.and_then(|s| s.last_report).map(|r| r.run))
            },
            |r: &String| *r == name,
        )
        .await?;
        // The next minute's run is compared with this one and says what changed.
        let both = wait_for(
            "the second run of every-minute",
            Duration::from_secs(90),
            every_minute_runs,
            |items: &Vec<ResearchRun>| items.len() >= 2,
        )
        .await?;
        let second = both
            .iter()
            .find(|r| r.name_any() != name)
            .map(|r| r.name_any())
            .unwrap_or_default();
        let done = wait_run(&runs, &second, "Completed", RUN_TIMEOUT, |r| r.is_finished()).await?;
        if done.annotations().get("quarry.dev/compare-with") != Some(&name) {
            return Err(format!("the second run is compared with the first: {:?}", done.metadata.annotations));
        }
        let changes = done.status.as_ref().and_then(|s| s.report.as_ref()).and_then(|r| r.changes);
        if changes.is_none_or(|n| n == 0) {
            return Err(format!("the second run found its new claim: {:?}", done.status));
        }
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
        let report = cms
            .get(&format!("{second}-report"))
            .await
            .map_err(|e| e.to_string())?
            .data
            .and_then(|d| d.get("report.md").cloned())
            .unwrap_or_default();
        if !report.contains("## Changes since") || !report.contains("Invalid objects are rejected") {
            return Err(format!("the second report ends with its changes:\n{report}"));
        }
        wait_for(
            "the schedule counts the changes",
            Duration::from_secs(30),
            || async {
                schedules
                    .get("every-minute")
                    .await
                    .ok()
                    .and_then(|s| s.status)
                    .map(|s| (s.last_report.map(|r| r.run), s.last_changes))
            },
            |(run, n): &(Option<String>, Option<u32>)| {
                run.as_deref() == Some(second.as_str()) && *n == changes
            },
        )
        .await?;
        // The metrics an alert pages on: changes found and runs created.
        let changed = format!("quarry_schedule_changes_total{{namespace=\"{namespace}\"}} {}", changes.unwrap_or(0));
        let created = format!(
            "quarry_schedule_runs_total{{namespace=\"{namespace}\",decision=\"Created\"}} "
        );
        wait_for(
            "the schedule metrics",
            Duration::from_secs(10),
            || async { Some(scrape_metrics(port).await) },
            |text: &String| {
                // Two runs so far, a third if the next minute came meanwhile.
                let made = text
                    .lines()
                    .find_map(|l| l.strip_prefix(created.as_str()))
                    .and_then(|v| v.trim().parse::<u64>().ok());
                text.contains(&changed) && made.is_some_and(|n| n >= 2)
            },
        )
        .await?;
        // Events are published after the status write that reports them: poll for them.
        wait_for(
            "every-minute's Events",
            Duration::from_secs(30),
            || async { Some(event_reasons(&client, &namespace, "every-minute").await) },
            |reasons: &Vec<String>| {
                ["Scheduled", "Changed"]
                    .iter()
                    .all(|w| reasons.iter().any(|r| r == w))
            },
        )
        .await?;
        // The suspended schedule made nothing in the same time.
        let paused = runs
            .list(&ListParams::default().labels("quarry.dev/schedule=paused"))
            .await
            .map_err(|e| e.to_string())?;
        if !paused.items.is_empty() {
            return Err("a suspended schedule made a run".into());
        }
        Ok(())
    })
    .await;
}

/// The model-key Secret and the `default` profile (scripted model, the local web stub).
async fn key_and_profile(
    client: &Client,
    namespace: &str,
    model_url: &str,
    web: &str,
) -> TestResult {
    apply(
        client,
        ("", "v1", "Secret"),
        namespace,
        json!({
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
            "stringData": {"apiKey": "sk-e2e-not-a-real-key"}
        }),
    )
    .await?;
    apply(
        client,
        ("quarry.dev", "v1alpha1", "ResearchProfile"),
        namespace,
        profile("default", model_url, web),
    )
    .await
}
