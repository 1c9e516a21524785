//! RBAC as shipped, on the real API server: the chart's ServiceAccount, ClusterRole(s) and
//! bindings rendered by `helm template` and applied; the operator authenticates with a token
//! minted by TokenRequest for that ServiceAccount, never as admin. Any 403 in its path fails the
//! test (read from the audit log). The same for `watchNamespaces` mode with Roles, and for the
//! `quarry-view` / `quarry-edit` user roles through the `quarry` CLI.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::kube_operator::{
    Operator, OperatorOptions, RELEASE_NAMESPACE, apply, forbidden, install_chart_rbac,
    service_account_user, user_kubeconfig, wait_for,
};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, ScriptedModelHandle, Step};
use quarry_e2e::searx::SearchStack;
use serde_json::{Value, json};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The scripted model: a researcher answering by turn (any task), a planner with two tasks, an
/// evaluator that synthesizes, the summarizer and the study writer.
fn script(page: &str) -> Script {
    let report = format!(
        "## Summary\nThe json module decodes JSON documents ([json]({page})).\n\n## Key findings\n- `json.loads` deserializes a str ([json]({page})).\n\n## Links\n- {page}"
    );
    let study = format!(
        "<research_result>\n# JSON in Python\n\n## Key Takeaways\n1. The json module decodes JSON documents ([json]({page})).\n\n## Abstract\nDecoding JSON.\n</research_result>"
    );
    Script::default()
        .with_route(quarry_e2e::deep_script::planner(&[
            "JSON decoding in Python",
            "JSON encoding in Python",
        ]))
        .with_route(
            Route::new(
                "researcher",
                "Research task:",
                vec![
                    Step::tool_call("search", json!({"queries": ["json decoder"]}))
                        .with_usage(100, 10),
                    Step::tool_call("scrape", json!({"urls": [page]})).with_usage(100, 10),
                    Step::tool_call("scrape", json!({"urls": [page]})).with_usage(200, 10),
                    Step::text(report.clone()).with_usage(300, 50),
                ],
            )
            .with_fallback(Step::text(report).with_usage(300, 50))
            .by_turn(),
        )
        .with_route(
            Route::new("evaluator", "You are the lead evaluator", vec![])
                .with_fallback(Step::text(r#"{"action": "synthesize"}"#).with_usage(200, 10)),
        )
        .with_route(quarry_e2e::deep_script::summarizer())
        .with_route(quarry_e2e::deep_script::study(&study))
}

fn profile(name: &str, model: &str, search: Value) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": name},
        "spec": {
            "models": {"primary": {
                "baseURL": model, "model": "scripted",
                "apiKeySecretRef": {"name": "model-key", "key": "apiKey"},
                "timeoutSeconds": 30
            }},
            "prices": [{"model": "scripted", "inputUSDPerMillion": "1.00", "outputUSDPerMillion": "2.00"}],
            "search": search,
            "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
        }
    })
}

fn run(name: &str, profile: &str, mode: &str, extra: Value) -> Value {
    let mut spec = json!({"query": "How do I decode JSON with the json module in Python?", "mode": mode, "profileRef": profile});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": name}, "spec": spec})
}

async fn phase_of(runs: &Api<ResearchRun>, name: &str) -> Option<String> {
    runs.get(name)
        .await
        .ok()
        .map(|r| r.phase().as_str().to_string())
}

async fn wait_phase(runs: &Api<ResearchRun>, name: &str, phase: &str) -> Result<(), String> {
    wait_for(
        &format!("run {name} {phase}"),
        RUN_TIMEOUT,
        || phase_of(runs, name),
        |p: &String| p == phase || p == "Failed" || p == "Cancelled" || p == "Completed",
    )
    .await
    .and_then(|p| {
        if p == phase {
            Ok(())
        } else {
            Err(format!("run {name} ended {p}, expected {phase}"))
        }
    })
}

/// The services one namespace of runs needs: searx over the docs, the scripted model, the API
/// key Secret and a profile `default`.
struct Research {
    _stack: SearchStack,
    model: ScriptedModelHandle,
    searx: String,
    page: String,
}

async fn research_in(client: &Client, namespace: &str) -> Result<Research, String> {
    let stack = SearchStack::start()
        .await
        .map_err(|e| format!("the local search stack (scripts/install-test-deps.sh): {e}"))?;
    let page = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let model = ScriptedModel::start(script(&page))
        .await
        .map_err(|e| format!("model server: {e}"))?;
    let searx = stack.searx.base_url().to_string();
    apply(
        client,
        Some(namespace),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
    )
    .await?;
    apply(
        client,
        Some(namespace),
        &profile("default", &model.base_url(), json!({"url": searx})),
    )
    .await?;
    Ok(Research {
        _stack: stack,
        model,
        searx,
        page,
    })
}

async fn operator_as_service_account(
    plane: &ControlPlane,
    kubeconfig: PathBuf,
    args: &[&str],
) -> Result<Operator, String> {
    Operator::start(&OperatorOptions {
        kubeconfig,
        identity: "quarry-0".into(),
        pod_namespace: RELEASE_NAMESPACE.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        log: plane.scratch().join("operator.log"),
    })
    .await
}

fn no_403(plane: &ControlPlane, user: &str) -> Result<(), String> {
    let denied = forbidden(plane, user);
    if denied.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{user} was refused {} requests: {denied:#?}",
            denied.len()
        ))
    }
}

/// Cluster-wide mode: quick and deep runs, cancel, TTL deletion, a SearchEngine's children and a
/// SearchEngine scaled up by a run, all with the chart's ServiceAccount and no 403.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn the_operator_under_the_charts_service_account_is_never_refused() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let sa = install_chart_rbac(&plane, &[]).await.unwrap();
    let mut operator = operator_as_service_account(&plane, sa, &[]).await.unwrap();
    let outcome = cluster_wide_scenario(&plane).await;
    let user = service_account_user(RELEASE_NAMESPACE, "quarry");
    let refused = no_403(&plane, &user);
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    if let Err(e) = outcome.and(refused) {
        panic!("{e}\n--- operator log:\n{log}");
    }
}

async fn cluster_wide_scenario(plane: &ControlPlane) -> Result<(), String> {
    let client = plane.client();
    let ns = plane.namespace("research").await?;
    let research = research_in(&client, &ns).await?;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);

    // A quick and a deep run complete, with their report ConfigMaps.
    apply(
        &client,
        Some(&ns),
        &run("quick", "default", "quick", json!({})),
    )
    .await?;
    apply(
        &client,
        Some(&ns),
        &run("deep", "default", "deep", json!({})),
    )
    .await?;
    wait_phase(&runs, "quick", "Completed").await?;
    wait_phase(&runs, "deep", "Completed").await?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in ["quick-report", "deep-report"] {
        let cm = configmaps
            .get(name)
            .await
            .map_err(|e| format!("{name}: {e}"))?;
        let report = cm
            .data
            .unwrap_or_default()
            .get("report.md")
            .cloned()
            .unwrap_or_default();
        if !report.contains(&research.page) {
            return Err(format!("{name} does not cite the page read: {report}"));
        }
    }

    // TTL: a finished run is deleted after ttlSecondsAfterFinished.
    apply(
        &client,
        Some(&ns),
        &run(
            "ttl",
            "default",
            "quick",
            json!({"ttlSecondsAfterFinished": 1}),
        ),
    )
    .await?;
    wait_for(
        "run ttl deleted after it finished",
        RUN_TIMEOUT,
        || async { Some(runs.get_opt("ttl").await.ok().flatten().is_none()) },
        |gone| *gone,
    )
    .await?;

    // Cancel: a run whose researcher call is held is cancelled through spec.cancel.
    research.model.hold_once("researcher", 1);
    apply(
        &client,
        Some(&ns),
        &run("cancel", "default", "quick", json!({})),
    )
    .await?;
    wait_for(
        "the held researcher call",
        RUN_TIMEOUT,
        || async { Some(research.model.held("researcher", 1)) },
        |held| *held,
    )
    .await?;
    runs.patch(
        "cancel",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .map_err(|e| format!("cancelling: {e}"))?;
    wait_phase(&runs, "cancel", "Cancelled").await?;

    // A SearchEngine gets its SearXNG children (owned by it), and a run that needs it scales it
    // up from zero. No kubelet here: its Pod never runs, so the run is cancelled once it waits.
    apply(
        &client,
        Some(&ns),
        &json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine", "metadata": {"name": "managed"},
                "spec": {}}),
    )
    .await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let idle = wait_for(
        "the SearchEngine's Deployment",
        Duration::from_secs(60),
        || async { deployments.get_opt("managed-searxng").await.ok().flatten() },
        |_| true,
    )
    .await?;
    if idle.spec.as_ref().and_then(|s| s.replicas) != Some(0)
        || idle.owner_references().first().map(|o| o.kind.as_str()) != Some("SearchEngine")
    {
        return Err(format!("idle Deployment wrong: {idle:?}"));
    }
    for what in ["ConfigMap", "Service"] {
        let exists = match what {
            "ConfigMap" => configmaps
                .get_opt("managed-searxng")
                .await
                .ok()
                .flatten()
                .is_some(),
            _ => Api::<k8s_openapi::api::core::v1::Service>::namespaced(client.clone(), &ns)
                .get_opt("managed-searxng")
                .await
                .ok()
                .flatten()
                .is_some(),
        };
        if !exists {
            return Err(format!("the SearchEngine's {what} was not created"));
        }
    }
    apply(
        &client,
        Some(&ns),
        &profile(
            "managed",
            &research.model.base_url(),
            json!({"searchEngineRef": {"name": "managed"}}),
        ),
    )
    .await?;
    apply(
        &client,
        Some(&ns),
        &run("scale", "managed", "quick", json!({})),
    )
    .await?;
    wait_for(
        "the SearchEngine scaled up for run scale",
        Duration::from_secs(60),
        || async { deployments.get_opt("managed-searxng").await.ok().flatten() },
        |d: &Deployment| d.spec.as_ref().and_then(|s| s.replicas) == Some(1),
    )
    .await?;
    runs.patch(
        "scale",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"cancel": true}})),
    )
    .await
    .map_err(|e| format!("cancelling scale: {e}"))?;
    wait_phase(&runs, "scale", "Cancelled").await?;

    // A ResearchSchedule makes its run (owned by the schedule, blockOwnerDeletion) and writes its
    // status at the next minute; then it is suspended.
    apply(
        &client,
        Some(&ns),
        &json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule", "metadata": {"name": "minutely"},
                "spec": {"schedule": "* * * * *", "runTemplate": {"spec": {"query": "How do I decode JSON in Python?", "mode": "quick"}}}}),
    )
    .await?;
    let schedules: Api<quarry_api::ResearchSchedule> = Api::namespaced(client.clone(), &ns);
    wait_for(
        "the schedule's first run and status",
        Duration::from_secs(90),
        || async {
            let made = runs
                .list(&kube::api::ListParams::default().labels("quarry.dev/schedule=minutely"))
                .await
                .ok()?
                .items
                .len();
            let status = schedules.get("minutely").await.ok()?.status?;
            Some((made, status.last_schedule_time.is_some()))
        },
        |(made, scheduled)| *made == 1 && *scheduled,
    )
    .await?;
    schedules
        .patch(
            "minutely",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .map_err(|e| format!("suspending: {e}"))?;
    let _ = research.searx;
    Ok(())
}

/// Object-store runs under the ServiceAccount: the finalizer is added, the report goes to S3
/// (moto on 127.0.0.1), and deleting the run deletes its objects, with no 403.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn object_store_finalizers_work_under_the_charts_service_account() {
    use quarry_e2e::s3_server::{BUCKET, S3Server};
    let plane = ControlPlane::start().await.expect("test control plane");
    let sa = install_chart_rbac(&plane, &[]).await.unwrap();
    let mut operator = operator_as_service_account(&plane, sa, &[]).await.unwrap();
    let outcome = async {
        let client = plane.client();
        let ns = plane.namespace("s3").await?;
        let research = research_in(&client, &ns).await?;
        let s3 = S3Server::start().await?;
        apply(
            &client,
            Some(&ns),
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-credentials", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
                    "stringData": {"aws_access_key_id": &s3.access_key_id, "aws_secret_access_key": &s3.secret_access_key}}),
        )
        .await?;
        let mut with_store = profile("s3", &research.model.base_url(), json!({"url": research.searx}));
        with_store["spec"]["objectStore"] = json!({
            "url": format!("s3://{BUCKET}/quarry"), "endpoint": s3.endpoint(), "region": "us-east-1",
            "allowHttp": true, "credentialsSecretRef": {"name": "s3-credentials"}
        });
        apply(&client, Some(&ns), &with_store).await?;
        apply(
            &client,
            Some(&ns),
            &run("stored", "s3", "quick", json!({"report": {"kind": "objectStore"}})),
        )
        .await?;
        let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
        wait_phase(&runs, "stored", "Completed").await?;
        let stored = runs.get("stored").await.map_err(|e| e.to_string())?;
        if !stored.finalizers().iter().any(|f| f == "quarry.dev/artifacts") {
            return Err(format!("no artifacts finalizer: {:?}", stored.finalizers()));
        }
        let store = bucket_of(&s3, &ns, &stored)?;
        let before = store.list().await.map_err(|e| e.to_string())?;
        if !before.iter().any(|k| k.ends_with(".md")) {
            return Err(format!("no report object in S3: {before:?}"));
        }
        runs.delete("stored", &DeleteParams::default())
            .await
            .map_err(|e| e.to_string())?;
        wait_for(
            "run stored gone after its objects were deleted",
            Duration::from_secs(60),
            || async { Some(runs.get_opt("stored").await.ok().flatten().is_none()) },
            |gone| *gone,
        )
        .await?;
        let after = store.list().await.map_err(|e| e.to_string())?;
        if !after.is_empty() {
            return Err(format!("objects left behind: {after:?}"));
        }
        Ok::<(), String>(())
    }
    .await;
    let refused = no_403(&plane, &service_account_user(RELEASE_NAMESPACE, "quarry"));
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    if let Err(e) = outcome.and(refused) {
        panic!("{e}\n--- operator log:\n{log}");
    }
}

/// The run's objects in moto's bucket, as the operator lays them out.
fn bucket_of(
    s3: &quarry_e2e::s3_server::S3Server,
    namespace: &str,
    run: &ResearchRun,
) -> Result<quarry_operator::store::object::ObjectArtifactStore, String> {
    use quarry_operator::store::object::{Bucket, ObjectStoreConfig, RunLayout, SecretValue};
    let config = ObjectStoreConfig {
        url: format!("s3://{}/quarry", quarry_e2e::s3_server::BUCKET),
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
    Ok(Bucket::connect(&config)
        .map_err(|e| e.to_string())?
        .for_run(&RunLayout {
            prefix: None,
            namespace: namespace.to_string(),
            run: run.name_any(),
            uid: run.uid().unwrap_or_default(),
            query: run.spec.query.clone(),
        }))
}

/// `watchNamespaces` mode: Roles in each watched namespace instead of the ClusterRole; the
/// operator (`--namespace=...` as the chart passes it) completes runs there, ignores other
/// namespaces, and is never refused.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn watch_namespaces_mode_works_with_the_charts_roles_only() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let watched = "team-a";
    let other = "team-b";
    for ns in [watched, other] {
        quarry_e2e::kube_operator::ensure_namespace(&client, ns)
            .await
            .unwrap();
    }
    let sa = install_chart_rbac(&plane, &["watchNamespaces={team-a}"])
        .await
        .unwrap();
    let rendered = quarry_e2e::kube_operator::render_chart(&["watchNamespaces={team-a}"]).unwrap();
    assert!(
        !rendered
            .iter()
            .any(|d| d["kind"] == "ClusterRoleBinding" && d["roleRef"]["name"] == "quarry"),
        "watchNamespaces mode must not bind the operator cluster-wide"
    );
    let mut operator = operator_as_service_account(&plane, sa, &["--namespace=team-a"])
        .await
        .unwrap();
    let outcome = async {
        let research = research_in(&client, watched).await?;
        apply(&client, Some(other), &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "k"}})).await?;
        apply(&client, Some(other), &profile("default", &research.model.base_url(), json!({"url": research.searx}))).await?;
        apply(&client, Some(watched), &run("here", "default", "quick", json!({}))).await?;
        apply(&client, Some(other), &run("elsewhere", "default", "quick", json!({}))).await?;
        let here: Api<ResearchRun> = Api::namespaced(client.clone(), watched);
        wait_phase(&here, "here", "Completed").await?;
        let elsewhere = Api::<ResearchRun>::namespaced(client.clone(), other)
            .get("elsewhere")
            .await
            .map_err(|e| e.to_string())?;
        if elsewhere.status.is_some() {
            return Err(format!("a run outside watchNamespaces was touched: {:?}", elsewhere.status));
        }
        Ok::<(), String>(())
    }
    .await;
    let refused = no_403(&plane, &service_account_user(RELEASE_NAMESPACE, "quarry"));
    let log = operator.log_tail();
    operator.kill().await.unwrap();
    if let Err(e) = outcome.and(refused) {
        panic!("{e}\n--- operator log:\n{log}");
    }
}

/// Runs the `quarry` CLI with `kubeconfig`; (success, stdout, stderr).
async fn quarry(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let mut cmd = quarry_e2e::quarry_bin::exempt_loopback(std::process::Command::new(
        quarry_e2e::quarry_bin::quarry_bin().unwrap(),
    ));
    cmd.args(args).env("KUBECONFIG", kubeconfig);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// People: `quarry-edit` creates and cancels runs; `quarry-view` reads them (get, list, logs,
/// report) and is refused create and cancel with a message, not a crash. The person's own
/// identity is what the API server judges.
#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn quarry_view_reads_and_quarry_edit_writes_through_the_cli() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let sa = install_chart_rbac(&plane, &[]).await.unwrap();
    let mut operator = operator_as_service_account(&plane, sa, &[]).await.unwrap();
    let client = plane.client();
    let ns = plane.namespace("people").await.unwrap();
    let research = research_in(&client, &ns).await.unwrap();
    let editor = user_kubeconfig(&plane, &ns, "editor", &["quarry-edit", "quarry-view"])
        .await
        .unwrap();
    let viewer = user_kubeconfig(&plane, &ns, "viewer", &["quarry-view"])
        .await
        .unwrap();

    // The editor creates a run and follows it to the end.
    let (ok, out, err) = quarry(
        &editor,
        &[
            "apply",
            "How do I decode JSON with the json module in Python?",
            "--name",
            "asked",
            "--mode",
            "quick",
            "--wait",
        ],
    )
    .await;
    assert!(
        ok,
        "quarry apply as editor: {out}\n{err}\n{}",
        operator.log_tail()
    );
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    wait_phase(&runs, "asked", "Completed").await.unwrap();

    // The viewer reads it every way the CLI offers.
    for args in [
        vec!["get", "asked"],
        vec!["list"],
        vec!["logs", "asked"],
        vec!["report", "asked"],
    ] {
        let (ok, out, err) = quarry(&viewer, &args).await;
        assert!(ok, "quarry {args:?} as viewer: {out}\n{err}");
        if args[0] == "report" {
            assert!(
                out.contains(&research.page),
                "the report as the viewer reads it: {out}"
            );
        }
    }
    // ...and may not create one.
    let (ok, out, err) = quarry(
        &viewer,
        &[
            "apply",
            "What is VACUUM FULL?",
            "--name",
            "denied",
            "--mode",
            "quick",
        ],
    )
    .await;
    assert!(
        !ok && err.to_lowercase().contains("forbidden"),
        "viewer apply: {out}\n{err}"
    );

    // The editor cancels a running run.
    research.model.hold_once("researcher", 1);
    let (ok, out, err) = quarry(
        &editor,
        &[
            "apply",
            "What does json.dumps do?",
            "--name",
            "stopme",
            "--mode",
            "quick",
        ],
    )
    .await;
    assert!(ok, "{out}\n{err}");
    wait_for(
        "the held researcher call",
        RUN_TIMEOUT,
        || async { Some(research.model.held("researcher", 1)) },
        |held| *held,
    )
    .await
    .unwrap();
    // The viewer may not cancel it; the editor may.
    let (ok, out, err) = quarry(&viewer, &["cancel", "stopme"]).await;
    assert!(
        !ok && err.to_lowercase().contains("forbidden"),
        "viewer cancel: {out}\n{err}"
    );
    let (ok, out, err) = quarry(&editor, &["cancel", "stopme"]).await;
    assert!(ok, "editor cancel: {out}\n{err}");
    wait_phase(&runs, "stopme", "Cancelled").await.unwrap();

    // Only the viewer's two writes were refused; the editor and the operator never were.
    let viewer_user = service_account_user(&ns, "viewer");
    let denied = forbidden(&plane, &viewer_user);
    assert!(
        !denied.is_empty()
            && denied
                .iter()
                .all(|r| r.resource == "researchruns" && r.is_write()),
        "the viewer's refusals: {denied:#?}"
    );
    no_403(&plane, &service_account_user(&ns, "editor")).unwrap();
    no_403(&plane, &service_account_user(RELEASE_NAMESPACE, "quarry")).unwrap();
    operator.kill().await.unwrap();
}
