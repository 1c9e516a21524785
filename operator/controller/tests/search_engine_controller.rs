//! Request-level scenarios of the SearchEngine reconciler against a mocked Kubernetes API (the
//! kube-rs `tower-test` pattern): every step checks the exact method, path, query and body.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::client::Body;
use kube::runtime::controller::Action;
use quarry_api::SearchEngine;
use quarry_engine::sources::health::{AnswerReport, HealthBook};
use quarry_engine::telemetry::Metrics;
use quarry_operator::search_engine::{EngineContext, reconcile_inner};
use serde_json::{Value, json};

mod mock_api;
use mock_api::{Handle, expect, expect_no_request_within};

const APPLY_QUERY: &str = "?&force=true&fieldManager=quarry-operator";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";
const NOW: i64 = 1_800_000_000;

fn at(offset: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(NOW + offset).unwrap())
}

fn stamp(offset: i64) -> String {
    at(offset).0.to_string()
}

fn engine(status: Option<Value>) -> SearchEngine {
    let mut v = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine",
        "metadata": {"name": "default", "namespace": "ns", "uid": "se-1", "generation": 1, "resourceVersion": "3"},
        "spec": {"replicas": 2, "idleTimeout": "10m", "engines": [{"name": "wikipedia"}, {"name": "bing", "timeout": 3.0}]}
    });
    if let Some(s) = status {
        v["status"] = s;
    }
    serde_json::from_value(v).unwrap()
}

fn profile_list() -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfileList", "metadata": {"resourceVersion": "1"},
        "items": [{
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
            "metadata": {"name": "managed", "namespace": "ns"},
            "spec": {"models": {"primary": {"baseURL": "http://m/v1", "model": "m"}}, "search": {"searchEngineRef": {"name": "default"}}}
        }]
    })
}

fn run_list(phases: &[Option<&str>]) -> Value {
    let items: Vec<Value> = phases
        .iter()
        .enumerate()
        .map(|(i, phase)| {
            let mut r = json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
                "metadata": {"name": format!("r{i}"), "namespace": "ns"},
                "spec": {"query": "q", "profileRef": "managed"}
            });
            if let Some(p) = phase {
                r["status"] = json!({"phase": p});
            }
            r
        })
        .collect();
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRunList", "metadata": {"resourceVersion": "1"}, "items": items})
}

fn ok(value: &Value) -> Response<Body> {
    Response::builder()
        .status(200)
        .body(Body::from(serde_json::to_vec(value).unwrap()))
        .unwrap()
}

fn context() -> (EngineContext, Handle, Arc<HealthBook>) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "ns");
    let book = Arc::new(HealthBook::new());
    (
        EngineContext::new(client, Metrics::new(), book.clone()),
        handle,
        book,
    )
}

async fn expect_silence(handle: &mut Handle) {
    expect_no_request_within(handle, Duration::from_millis(300)).await;
}

/// Serves the two lookups (runs, then profiles).
async fn serve_lookups(handle: &mut Handle, runs: Value) {
    let (_, send) = expect(
        handle,
        Method::GET,
        "/apis/quarry.dev/v1alpha1/namespaces/ns/researchruns?",
    )
    .await;
    send.send_response(ok(&runs));
    let (_, send) = expect(
        handle,
        Method::GET,
        "/apis/quarry.dev/v1alpha1/namespaces/ns/researchprofiles?",
    )
    .await;
    send.send_response(ok(&profile_list()));
}

fn owner() -> Value {
    json!([{"apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine", "name": "default", "uid": "se-1", "controller": true}])
}

/// Serves the ConfigMap, Service and Deployment applies (no Secret is read or written: the
/// operator's RBAC has only `get` on Secrets, for opted-in keys). Returns the ConfigMap and
/// Deployment bodies; the Deployment answers with `ready` ready replicas.
async fn serve_children(handle: &mut Handle, ready: i32) -> (Value, Value) {
    let (config_map, send) = expect(
        handle,
        Method::PATCH,
        &format!("/api/v1/namespaces/ns/configmaps/default-searxng{APPLY_QUERY}"),
    )
    .await;
    assert_eq!(config_map["metadata"]["ownerReferences"], owner());
    send.send_response(ok(&config_map));
    let (service, send) = expect(
        handle,
        Method::PATCH,
        &format!("/api/v1/namespaces/ns/services/default-searxng{APPLY_QUERY}"),
    )
    .await;
    assert_eq!(service["metadata"]["ownerReferences"], owner());
    assert_eq!(service["spec"]["ports"][0]["port"], 8080);
    send.send_response(ok(&service));
    let (deployment, send) = expect(
        handle,
        Method::PATCH,
        &format!("/apis/apps/v1/namespaces/ns/deployments/default-searxng{APPLY_QUERY}"),
    )
    .await;
    assert_eq!(deployment["metadata"]["ownerReferences"], owner());
    let mut answer = deployment.clone();
    answer["status"] = json!({"replicas": deployment["spec"]["replicas"], "readyReplicas": ready});
    send.send_response(ok(&answer));
    (config_map, deployment)
}

async fn expect_status(handle: &mut Handle) -> Value {
    let (body, send) = expect(
        handle,
        Method::PATCH,
        &format!(
            "/apis/quarry.dev/v1alpha1/namespaces/ns/searchengines/default/status{APPLY_QUERY}"
        ),
    )
    .await;
    let mut object = serde_json::to_value(engine(None)).unwrap();
    object["status"] = body["status"].clone();
    send.send_response(ok(&object));
    body["status"].clone()
}

async fn expect_event(handle: &mut Handle, reason: &str, note: &str) {
    expect_event_of(handle, "Normal", reason, note).await;
}

async fn expect_event_of(handle: &mut Handle, type_: &str, reason: &str, note: &str) {
    let (body, send) = expect(handle, Method::POST, &format!("{EVENTS}?")).await;
    assert_eq!(body["type"], type_);
    assert_eq!(body["reason"], reason);
    assert_eq!(body["note"], note);
    assert_eq!(
        body["regarding"],
        json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine", "name": "default", "namespace": "ns", "uid": "se-1"})
    );
    send.send_response(
        Response::builder()
            .status(201)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap(),
    );
}

fn condition<'a>(status: &'a Value, type_: &str) -> (&'a str, &'a str) {
    let c = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap();
    (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
}

#[tokio::test]
async fn a_new_run_scales_the_engine_from_zero_and_creates_owned_children() {
    let (ctx, mut handle, _) = context();
    let idle = engine(Some(
        json!({"replicas": 0, "readyReplicas": 0, "activeRuns": 0}),
    ));
    let task = tokio::spawn(async move { reconcile_inner(&idle, &ctx, &at(0)).await.unwrap() });
    // One run in progress and one finished: only the first counts.
    serve_lookups(
        &mut handle,
        run_list(&[Some("Researching"), Some("Completed")]),
    )
    .await;
    let (config_map, deployment) = serve_children(&mut handle, 0).await;
    // Settings: the spec's engines, JSON output, limiter off, no secret key in the ConfigMap.
    let settings: Value =
        serde_yaml::from_str(config_map["data"]["settings.yml"].as_str().unwrap()).unwrap();
    assert_eq!(
        settings["use_default_settings"]["engines"]["keep_only"],
        json!(["wikipedia", "bing"])
    );
    assert_eq!(
        settings["engines"][1],
        json!({"name": "bing", "timeout": 3.0})
    );
    assert_eq!(settings["server"]["limiter"], json!(false));
    assert!(
        settings["search"]["formats"]
            .as_array()
            .unwrap()
            .contains(&json!("json"))
    );
    assert!(
        !config_map["data"]["settings.yml"]
            .as_str()
            .unwrap()
            .contains("secret_key")
    );
    // Deployment: spec.replicas while a run is active, SearXNG's key from the pod's UID.
    assert_eq!(deployment["spec"]["replicas"], 2);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["env"][1],
        json!({"name": "SEARXNG_SECRET", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})
    );
    let status = expect_status(&mut handle).await;
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["readyReplicas"], 0);
    assert_eq!(status["activeRuns"], 1);
    assert_eq!(status["url"], "http://default-searxng.ns.svc:8080");
    assert_eq!(status["lastActivityTime"], stamp(0));
    assert_eq!(condition(&status, "Ready"), ("False", "Starting"));
    assert_eq!(condition(&status, "Reconciling"), ("True", "Starting"));
    expect_event(
        &mut handle,
        "ScaledUp",
        "scaled SearXNG from 0 to 2 replicas for 1 active run(s)",
    )
    .await;
    let action = task.await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(30)));
    expect_silence(&mut handle).await;
}

#[tokio::test]
async fn status_comes_from_the_deployment_and_the_health_book() {
    let (ctx, mut handle, book) = context();
    book.observe(
        "ns/default",
        &AnswerReport {
            results_by_engine: [("wikipedia".to_string(), 3)].into(),
            unresponsive: vec![("bing".into(), "CAPTCHA required".into())],
        },
        std::time::SystemTime::now(),
    );
    let starting = engine(Some(json!({
        "replicas": 2, "readyReplicas": 0, "activeRuns": 1, "lastActivityTime": stamp(-20),
        "url": "http://default-searxng.ns.svc:8080"
    })));
    let task = tokio::spawn(async move { reconcile_inner(&starting, &ctx, &at(0)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[None])).await;
    // The Secret exists: it is not rewritten (a new key would log every user out mid-run).
    let (_, deployment) = serve_children(&mut handle, 2).await;
    assert_eq!(deployment["spec"]["replicas"], 2);
    let status = expect_status(&mut handle).await;
    assert_eq!(status["readyReplicas"], 2);
    assert_eq!(condition(&status, "Ready"), ("True", "Ready"));
    assert_eq!(condition(&status, "Reconciling"), ("False", "Reconciled"));
    assert_eq!(
        status["lastActivityTime"],
        stamp(-20),
        "fresh activity is not rewritten"
    );
    let engines = status["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 2);
    assert_eq!(engines[0]["name"], "bing");
    assert_eq!(engines[0]["state"], "Captcha");
    assert_eq!(engines[0]["consecutiveFailures"], 1);
    assert_eq!(engines[0]["lastError"], "CAPTCHA required");
    assert_eq!(engines[1]["name"], "wikipedia");
    assert_eq!(engines[1]["state"], "Healthy");
    // Same replica count: no scale Event.
    task.await.unwrap();
    expect_silence(&mut handle).await;
}

#[tokio::test]
async fn an_idle_engine_stays_up_until_the_idle_timeout_then_scales_to_zero() {
    // Two minutes idle of ten: still up, looked at again when the time is up, no writes.
    let (ctx, mut handle, _) = context();
    let mut recent = engine(None);
    // The status an earlier reconcile wrote for this very situation.
    recent.status = Some(quarry_operator::search_engine::desired_status(
        &recent,
        &quarry_operator::search_engine::Scale {
            replicas: 2,
            last_activity: Some(at(-120)),
            requeue: None,
        },
        0,
        2,
        vec![],
        None,
        &at(0),
    ));
    let task = {
        let recent = recent.clone();
        tokio::spawn(async move { reconcile_inner(&recent, &ctx, &at(0)).await.unwrap() })
    };
    serve_lookups(&mut handle, run_list(&[Some("Completed")])).await;
    let (_, deployment) = serve_children(&mut handle, 2).await;
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(
        task.await.unwrap(),
        Action::requeue(Duration::from_secs(480))
    );
    expect_silence(&mut handle).await;

    // Eleven minutes idle: zero replicas, Idle (healthy for GitOps), ScaledDown Event.
    let (ctx, mut handle, _) = context();
    recent.status = Some(
        serde_json::from_value(json!({
            "replicas": 2, "readyReplicas": 2, "activeRuns": 0, "lastActivityTime": stamp(-660),
            "url": "http://default-searxng.ns.svc:8080"
        }))
        .unwrap(),
    );
    let task = tokio::spawn(async move { reconcile_inner(&recent, &ctx, &at(0)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[])).await;
    let (_, deployment) = serve_children(&mut handle, 0).await;
    assert_eq!(deployment["spec"]["replicas"], 0);
    let status = expect_status(&mut handle).await;
    assert_eq!(status["replicas"], 0);
    assert_eq!(status["activeRuns"], 0);
    assert_eq!(condition(&status, "Ready"), ("True", "Idle"));
    assert_eq!(status["lastActivityTime"], stamp(-660));
    expect_event(
        &mut handle,
        "ScaledDown",
        "scaled SearXNG from 2 to 0 replicas: idle",
    )
    .await;
    assert_eq!(
        task.await.unwrap(),
        Action::requeue(Duration::from_secs(300))
    );
}

#[tokio::test]
async fn invalid_overrides_stall_with_a_message_and_no_children_are_applied() {
    let (ctx, mut handle, _) = context();
    let mut bad: SearchEngine = engine(None);
    bad.spec.settings_overrides = Some(json!(["not", "an", "object"]));
    let task = tokio::spawn(async move { reconcile_inner(&bad, &ctx, &at(0)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[])).await;
    let status = expect_status(&mut handle).await;
    assert_eq!(condition(&status, "Ready"), ("False", "SettingsInvalid"));
    assert_eq!(condition(&status, "Stalled"), ("True", "SettingsInvalid"));
    expect_event(
        &mut handle,
        "Configured",
        "SearXNG configured with 0 replicas",
    )
    .await;
    assert_eq!(
        task.await.unwrap(),
        Action::requeue(Duration::from_secs(60))
    );
    expect_silence(&mut handle).await;
}

#[tokio::test]
async fn an_image_from_a_repository_the_operator_does_not_allow_is_never_deployed() {
    let (ctx, mut handle, _) = context();
    let mut foreign: SearchEngine = engine(None);
    foreign.spec.image = "ghcr.io/someone/miner:1.0".into();
    let task = {
        let foreign = foreign.clone();
        tokio::spawn(async move { reconcile_inner(&foreign, &ctx, &at(0)).await.unwrap() })
    };
    serve_lookups(&mut handle, run_list(&[Some("Researching")])).await;
    // No Secret, ConfigMap, Service or Deployment: straight to status.
    let status = expect_status(&mut handle).await;
    let message = "spec.image \"ghcr.io/someone/miner:1.0\" is not from an image repository this operator allows (docker.io/searxng/searxng); use an image from one of them, or have the cluster admin add the repository to the chart value searchEngine.allowedImages (operator flag --allowed-search-images)";
    assert_eq!(condition(&status, "Ready"), ("False", "ImageNotAllowed"));
    assert_eq!(condition(&status, "Stalled"), ("True", "ImageNotAllowed"));
    let stalled = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Stalled")
        .unwrap();
    assert_eq!(stalled["message"], message);
    expect_event_of(&mut handle, "Warning", "ImageNotAllowed", message).await;
    assert_eq!(
        task.await.unwrap(),
        Action::requeue(Duration::from_secs(60))
    );
    expect_silence(&mut handle).await;

    // Looked at again with that status: still nothing deployed, and no second write or Event.
    let (ctx, mut handle, _) = context();
    let mut refused = foreign.clone();
    refused.status = Some(serde_json::from_value(status).unwrap());
    let task = tokio::spawn(async move { reconcile_inner(&refused, &ctx, &at(5)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[Some("Researching")])).await;
    task.await.unwrap();
    expect_silence(&mut handle).await;

    // The operator may allow more: the same image from an allowed prefix is deployed.
    let (ctx, mut handle, _) = context();
    let ctx = ctx.with_allowed_images(vec![
        "docker.io/searxng/searxng".into(),
        "ghcr.io/someone/".into(),
    ]);
    let task = tokio::spawn(async move { reconcile_inner(&foreign, &ctx, &at(0)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[Some("Researching")])).await;
    let (_, deployment) = serve_children(&mut handle, 0).await;
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "ghcr.io/someone/miner:1.0"
    );
    expect_status(&mut handle).await;
    expect_event(
        &mut handle,
        "ScaledUp",
        "scaled SearXNG from 0 to 2 replicas for 1 active run(s)",
    )
    .await;
    task.await.unwrap();
}

#[tokio::test]
async fn searxng_pods_run_hardened_like_the_operator() {
    let (ctx, mut handle, _) = context();
    let task =
        tokio::spawn(async move { reconcile_inner(&engine(None), &ctx, &at(0)).await.unwrap() });
    serve_lookups(&mut handle, run_list(&[Some("Researching")])).await;
    let (_, deployment) = serve_children(&mut handle, 0).await;
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(pod["securityContext"]["runAsUser"], 977);
    assert_eq!(
        pod["securityContext"]["seccompProfile"],
        json!({"type": "RuntimeDefault"})
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["securityContext"],
        json!({
            "runAsNonRoot": true,
            "readOnlyRootFilesystem": true,
            "allowPrivilegeEscalation": false,
            "privileged": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"}
        })
    );
    // With a read-only root, every path SearXNG writes is an emptyDir.
    let mounts: Vec<(&str, &str)> = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap(),
                m["mountPath"].as_str().unwrap(),
            )
        })
        .collect();
    for (name, path) in [
        ("workdir", "/etc/searxng"),
        ("tmp", "/tmp"),
        ("cache", "/var/cache/searxng"),
    ] {
        assert!(mounts.contains(&(name, path)), "{mounts:?}");
        assert!(
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|v| v["name"] == name && v["emptyDir"] == json!({})),
            "{name} is an emptyDir"
        );
    }
    expect_status(&mut handle).await;
    expect_event(
        &mut handle,
        "ScaledUp",
        "scaled SearXNG from 0 to 2 replicas for 1 active run(s)",
    )
    .await;
    task.await.unwrap();
}
