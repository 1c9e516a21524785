//! Request-level scenarios of the ResearchRun reconciler against a mocked Kubernetes API
//! (the kube-rs `tower-test` pattern): every step checks the exact method, path, query and body.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use kube::runtime::controller::Action;
use quarry_api::{ResearchRun, ResearchRunSpec};
use quarry_engine::research::machine::state::{Phase, RunState};
use quarry_engine::telemetry::Metrics;
use quarry_operator::research_run::registry::Signal;
use quarry_operator::research_run::{
    Context, LaunchError, LaunchRequest, Launcher, Starter, reconcile,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

mod mock_api;
use mock_api::{Handle, expect, expect_no_request_within};

const RUNS: &str = "/apis/quarry.dev/v1alpha1/namespaces/ns/researchruns";
const APPLY_QUERY: &str = "?&force=true&fieldManager=quarry-operator";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events";

/// What the fake launcher saw and lets a test drive.
#[derive(Default)]
struct Recorded {
    requests: Vec<LaunchRequest>,
    controls: Vec<watch::Receiver<Signal>>,
    progress: Vec<Arc<watch::Sender<Option<RunState>>>>,
}

/// Launcher double: records each prepared request and start; the task runs until cancelled.
#[derive(Default, Clone)]
struct FakeLauncher {
    recorded: Arc<Mutex<Recorded>>,
    starts: Arc<std::sync::atomic::AtomicUsize>,
}

impl Launcher for FakeLauncher {
    fn prepare(&self, request: LaunchRequest) -> Result<Starter, LaunchError> {
        let recorded = self.recorded.clone();
        let starts = self.starts.clone();
        let input = request.input.clone();
        recorded.lock().unwrap().requests.push(request);
        Ok(Box::new(
            move |control: watch::Receiver<Signal>, progress| {
                starts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut mine = control.clone();
                let mut rec = recorded.lock().unwrap();
                rec.controls.push(control);
                rec.progress.push(progress);
                Box::pin(async move {
                    let _ = mine.wait_for(|s| *s == Signal::Cancel).await;
                    let mut state = RunState::new(input);
                    state.phase = Phase::Cancelled;
                    state
                })
            },
        ))
    }
}

fn run(status: Option<Value>) -> ResearchRun {
    let mut value = json!({
        "apiVersion": "quarry.dev/v1alpha1",
        "kind": "ResearchRun",
        "metadata": {"name": "r1", "namespace": "ns", "uid": "uid-1", "generation": 1, "resourceVersion": "7"},
        "spec": {"query": "what is CEL?", "mode": "quick", "profileRef": "default"}
    });
    if let Some(status) = status {
        value["status"] = status;
    }
    serde_json::from_value(value).unwrap()
}

fn profile(with_secret: bool) -> Value {
    let mut primary = json!({"baseURL": "http://127.0.0.1:9/v1", "model": "scripted"});
    if with_secret {
        primary["apiKeySecretRef"] = json!({"name": "openai", "key": "apiKey"});
    }
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": "default", "namespace": "ns", "uid": "p-1"},
        "spec": {"models": {"primary": primary}, "search": {"url": "http://127.0.0.1:8888"}}
    })
}

fn secret(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "openai", "namespace": "ns", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "data": data})
}

fn not_found(kind: &str, name: &str) -> Response<Body> {
    let body = json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":format!("{kind} \"{name}\" not found"),"reason":"NotFound","code":404});
    Response::builder()
        .status(404)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
}

fn ok(value: &Value) -> Response<Body> {
    Response::builder()
        .status(200)
        .body(Body::from(serde_json::to_vec(value).unwrap()))
        .unwrap()
}

fn context(launcher: FakeLauncher) -> (Arc<Context>, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "ns");
    let mut ctx = Context::new(client, Arc::new(launcher), Metrics::new());
    ctx.status_interval = Duration::from_millis(300);
    (Arc::new(ctx), handle)
}

async fn expect_silence(handle: &mut Handle) {
    expect_no_request_within(handle, Duration::from_millis(400)).await;
}

/// Replaces every `lastTransitionTime`/`startTime` with a marker after checking it is a timestamp.
fn scrub_times(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if matches!(
                    k.as_str(),
                    "lastTransitionTime" | "startTime" | "completionTime"
                ) {
                    let text = v.as_str().expect("time is a string");
                    assert!(
                        text.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
                        "{text}"
                    );
                    *v = json!("<time>");
                } else {
                    scrub_times(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(scrub_times),
        _ => {}
    }
}

fn scrubbed(value: &Value) -> Value {
    let mut copy = value.clone();
    scrub_times(&mut copy);
    copy
}

fn stalled_status_body(reason: &str, message: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1",
        "kind": "ResearchRun",
        "status": {
            "phase": "Pending",
            "observedGeneration": 1,
            "conditions": [
                {"type": "Stalled", "status": "True", "reason": reason, "message": message, "observedGeneration": 1, "lastTransitionTime": "<time>"},
                {"type": "Reconciling", "status": "False", "reason": reason, "message": message, "observedGeneration": 1, "lastTransitionTime": "<time>"},
                {"type": "Succeeded", "status": "Unknown", "reason": reason, "message": message, "observedGeneration": 1, "lastTransitionTime": "<time>"}
            ],
            "message": message
        }
    })
}

/// The end of a stalled scenario: the status write of a stall with `reason` and `message`, its
/// Warning Event, then nothing more; returns the status patch.
async fn expect_stall(handle: &mut Handle, reason: &str, message: &str) -> Value {
    let body = patch_status(handle).await;
    assert_eq!(scrubbed(&body), stalled_status_body(reason, message));
    expect_event(handle, "Warning", reason, message).await;
    expect_silence(handle).await;
    body
}

/// The profile the scenarios' run names, and the Secret of its model key.
const PROFILE: &str = "/apis/quarry.dev/v1alpha1/namespaces/ns/researchprofiles/default";
const SECRET: &str = "/api/v1/namespaces/ns/secrets/openai";

/// One exchange of a scenario: expects `method` on `path_and_query` and answers `response`.
async fn serve(
    handle: &mut Handle,
    method: Method,
    path_and_query: &str,
    response: Response<Body>,
) {
    let (_, send) = expect(handle, method, path_and_query).await;
    send.send_response(response);
}

/// The status write of a scenario: expects the server-side apply of r1's status, answers with
/// the run carrying it, and returns the patch body for the scenario's assertions.
/// The lookup of every run that gets past its profile: the profile (naming a key Secret), then
/// that Secret, holding `data`.
async fn serve_lookup(handle: &mut Handle, data: Value) {
    serve(handle, Method::GET, PROFILE, ok(&profile(true))).await;
    serve(handle, Method::GET, SECRET, ok(&secret(data))).await;
}

async fn patch_status(handle: &mut Handle) -> Value {
    let (body, send) = expect(
        handle,
        Method::PATCH,
        &format!("{RUNS}/r1/status{APPLY_QUERY}"),
    )
    .await;
    answer_status(send, &body);
    body
}

/// The conditions of a cancelled run at `generation` (status scrubbed of times).
fn cancelled_conditions(generation: u64) -> Value {
    json!([
        {"type": "Reconciling", "status": "False", "reason": "Cancelled", "message": "the run was cancelled", "observedGeneration": generation, "lastTransitionTime": "<time>"},
        {"type": "Succeeded", "status": "False", "reason": "Cancelled", "message": "the run was cancelled", "observedGeneration": generation, "lastTransitionTime": "<time>"}
    ])
}

/// The Event of a run entering phase Cancelled.
async fn expect_cancelled_event(handle: &mut Handle) {
    expect_event(handle, "Normal", "Cancelled", "run entered phase Cancelled").await;
}

/// Serves a status patch: answers with the run carrying the applied status.
fn answer_status(send: tower_test::mock::SendResponse<Response<Body>>, body: &Value) {
    let mut object = serde_json::to_value(run(None)).unwrap();
    object["status"] = body["status"].clone();
    send.send_response(ok(&object));
}

async fn expect_event(handle: &mut Handle, type_: &str, reason: &str, note: &str) {
    let (body, send) = expect(handle, Method::POST, &format!("{EVENTS}?")).await;
    assert_eq!(body["type"], type_);
    assert_eq!(body["reason"], reason);
    assert_eq!(body["note"], note);
    assert_eq!(body["reportingController"], "quarry-operator");
    assert_eq!(
        body["regarding"],
        json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "name": "r1", "namespace": "ns", "uid": "uid-1"})
    );
    send.send_response(
        Response::builder()
            .status(201)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap(),
    );
}

const PROFILE_MISSING: &str = "ResearchProfile \"default\" not found in namespace \"ns\" (spec.profileRef); create it and the run will start";

#[tokio::test]
async fn missing_profile_stalls_with_event_and_requeues() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let server = tokio::spawn(async move {
        serve(
            &mut handle,
            Method::GET,
            PROFILE,
            not_found("researchprofiles", "default"),
        )
        .await;
        expect_stall(&mut handle, "ProfileNotFound", PROFILE_MISSING).await;
    });
    let action = reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
    assert!(launcher.recorded.lock().unwrap().requests.is_empty());
}

#[tokio::test]
async fn missing_secret_stalls_with_secret_not_found() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let message = "Secret \"openai\" not found in namespace \"ns\" (ResearchProfile \"default\" models.primary.apiKeySecretRef); create it with key \"apiKey\"";
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(true))).await;
        serve(
            &mut handle,
            Method::GET,
            SECRET,
            not_found("secrets", "openai"),
        )
        .await;
        expect_stall(&mut handle, "SecretNotFound", message).await;
    });
    let action = reconcile(Arc::new(run(None)), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
}

/// The scenarios' profile with limits: $5.00, one hour, three rounds.
fn capped_profile(with_secret: bool) -> Value {
    let mut capped = profile(with_secret);
    capped["spec"]["limits"] = json!({"maxCostUSD": "5.00", "timeout": "1h", "maxRounds": 3});
    capped
}

#[tokio::test]
async fn a_run_asking_for_more_than_its_profile_allows_stalls_before_any_secret_is_read() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let message = "spec.limits.maxCostUSD \"999999999\" is above ResearchProfile \"default\" limits.maxCostUSD \"5.00\"; spec.limits.timeout \"24h\" is above ResearchProfile \"default\" limits.timeout \"1h\". A run may only lower its profile's limits: recreate the run with values at most the profile's (or without them, to use the profile's), or have whoever manages the ResearchProfile raise them";
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&capped_profile(true))).await;
        // No Secret is read for a refused run.
        expect_stall(&mut handle, "LimitsAboveProfile", message).await;
    });
    let mut greedy = run(None);
    // maxRounds 2 lowers the profile's 3: allowed, and not named.
    greedy.spec.limits = Some(
        serde_json::from_value(
            json!({"maxCostUSD": "999999999", "timeout": "24h", "maxRounds": 2}),
        )
        .unwrap(),
    );
    let action = reconcile(Arc::new(greedy), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
    assert!(launcher.recorded.lock().unwrap().requests.is_empty());
}

#[tokio::test]
async fn a_run_lowering_its_profiles_limits_starts_with_the_stricter_values() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let server = tokio::spawn(async move {
        serve(
            &mut handle,
            Method::GET,
            PROFILE,
            ok(&capped_profile(false)),
        )
        .await;
        let body = patch_status(&mut handle).await;
        assert_eq!(body["status"]["conditions"][0]["reason"], "Running");
        expect_silence(&mut handle).await;
    });
    let mut modest = run(None);
    modest.spec.limits =
        Some(serde_json::from_value(json!({"maxCostUSD": "0.50", "maxRounds": 2})).unwrap());
    reconcile(Arc::new(modest), ctx).await.unwrap();
    server.await.unwrap();
    let rec = launcher.recorded.lock().unwrap();
    let limits = &rec.requests[0].input.limits;
    // The run's own lower cost and rounds; the profile's timeout it did not set.
    assert_eq!(limits.max_cost_pico_usd, Some(500_000_000_000));
    assert_eq!(limits.max_rounds, 2);
    assert_eq!(limits.timeout_secs, Some(3600));
}

/// Reconciles run r1 whose profile names Secret `openai` answered with `secret`; checks the
/// stall it ends in, with its Event, and that nothing was launched.
async fn secret_stall(secret: Value, reason: &'static str, message: &'static str) {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(true))).await;
        // "c2stdGVzdA==" is base64 of "sk-test": never shown.
        serve(&mut handle, Method::GET, SECRET, ok(&secret)).await;
        let body = expect_stall(&mut handle, reason, message).await;
        assert!(!body.to_string().contains("sk-test"));
    });
    let action = reconcile(Arc::new(run(None)), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
    assert!(launcher.recorded.lock().unwrap().requests.is_empty());
}

#[tokio::test]
async fn a_secret_that_did_not_opt_in_is_not_used_and_the_message_says_how_to_opt_in() {
    let plain = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "openai", "namespace": "ns"}, "data": {"apiKey": "c2stdGVzdA=="}});
    secret_stall(
        plain,
        "SecretNotOptedIn",
        "Secret \"openai\" in namespace \"ns\" (ResearchProfile \"default\" models.primary.apiKeySecretRef) has not opted in to use by Quarry, so Quarry will not send it to 127.0.0.1. If that is what the Secret is for, opt it in: kubectl -n ns label secret openai quarry.dev/credential=true && kubectl -n ns annotate --overwrite secret openai quarry.dev/credential-hosts=127.0.0.1",
    )
    .await;
}

#[tokio::test]
async fn a_secret_made_for_another_host_is_not_sent_to_the_profiles_url() {
    // Opted in, for OpenAI: a profile pointing baseURL elsewhere does not get it.
    let openai_only = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "openai", "namespace": "ns", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "api.openai.com"}}, "data": {"apiKey": "c2stdGVzdA=="}});
    secret_stall(
        openai_only,
        "SecretNotOptedIn",
        "Secret \"openai\" in namespace \"ns\" (ResearchProfile \"default\" models.primary.apiKeySecretRef) is for api.openai.com (quarry.dev/credential-hosts), not 127.0.0.1, so Quarry will not send it to 127.0.0.1. If that is what the Secret is for, opt it in: kubectl -n ns annotate --overwrite secret openai quarry.dev/credential-hosts=api.openai.com,127.0.0.1",
    )
    .await;
    // The hosts annotation without the label: not opted in either.
    let unlabelled = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "openai", "namespace": "ns", "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "data": {"apiKey": "c2stdGVzdA=="}});
    secret_stall(
        unlabelled,
        "SecretNotOptedIn",
        "Secret \"openai\" in namespace \"ns\" (ResearchProfile \"default\" models.primary.apiKeySecretRef) has no label quarry.dev/credential=true, so Quarry will not send it to 127.0.0.1. If that is what the Secret is for, opt it in: kubectl -n ns label secret openai quarry.dev/credential=true",
    )
    .await;
}

#[test]
fn every_secret_use_names_the_host_its_key_is_sent_to() {
    let profile: quarry_api::ResearchProfileSpec = serde_yaml::from_str(
        r#"
models:
  primary: {baseURL: "https://API.openai.com/v1", model: m, apiKeySecretRef: {name: openai, key: k}}
  fallback: {baseURL: "http://[::1]:8000/v1", model: m, apiKeySecretRef: {name: local, key: k}}
search:
  url: "http://searx:8080"
  providers:
    - {kind: brave, apiKeySecretRef: {name: search, key: brave}}
    - {kind: tavily, apiKeySecretRef: {name: search, key: tavily}, baseURL: "http://proxy.internal:9000"}
  sources:
    security: {nvdApiKeySecretRef: {name: sec, key: nvd}, githubTokenSecretRef: {name: sec, key: gh}}
    stackExchange: {keySecretRef: {name: se, key: k}}
"#,
    )
    .unwrap();
    let uses: Vec<(String, String)> = quarry_operator::research_run::secret_uses(&profile)
        .into_iter()
        .map(|u| (u.field, u.host))
        .collect();
    let expected: Vec<(String, String)> = [
        ("models.primary.apiKeySecretRef", "api.openai.com"),
        ("models.fallback.apiKeySecretRef", "::1"),
        (
            "search.providers[0].apiKeySecretRef",
            "api.search.brave.com",
        ),
        ("search.providers[1].apiKeySecretRef", "proxy.internal"),
        (
            "search.sources.security.nvdApiKeySecretRef",
            "services.nvd.nist.gov",
        ),
        (
            "search.sources.security.githubTokenSecretRef",
            "api.github.com",
        ),
        (
            "search.sources.stackExchange.keySecretRef",
            "api.stackexchange.com",
        ),
    ]
    .iter()
    .map(|(f, h)| (f.to_string(), h.to_string()))
    .collect();
    assert_eq!(uses, expected);
}

#[test]
fn a_hosts_entry_covers_the_host_and_its_subdomains_only() {
    use quarry_operator::research_run::opted_in;
    let secret = |hosts: &str| -> k8s_openapi::api::core::v1::Secret {
        serde_json::from_value(json!({"metadata": {"name": "s", "namespace": "ns", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": hosts}}})).unwrap()
    };
    let ok_for = |hosts: &str, host: &str| opted_in(&secret(hosts), host, "p", "f").is_ok();
    assert!(ok_for("api.openai.com", "api.openai.com"));
    assert!(ok_for(" example.org , api.openai.com ", "api.openai.com"));
    assert!(ok_for("amazonaws.com", "s3.amazonaws.com"));
    assert!(ok_for("API.OpenAI.com.", "api.openai.com"));
    assert!(!ok_for("openai.com", "evilopenai.com"));
    assert!(!ok_for("api.openai.com", "api.openai.com.evil.example"));
    assert!(!ok_for("api.openai.com", "openai.com"));
    assert!(!ok_for("", "api.openai.com"));
    assert!(!ok_for(",", "api.openai.com"));
    let mut wrong_value = secret("api.openai.com");
    wrong_value
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("quarry.dev/credential".into(), "yes".into());
    assert!(opted_in(&wrong_value, "api.openai.com", "p", "f").is_err());
}

#[tokio::test]
async fn secret_without_key_stalls_without_leaking_values() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let message = "Secret \"openai\" in namespace \"ns\" has no key \"apiKey\" (ResearchProfile \"default\" models.primary.apiKeySecretRef.key); add the key to the Secret or fix the reference";
    let server = tokio::spawn(async move {
        // "c2VjcmV0LXZhbHVl" is base64 of "secret-value" under another key.
        serve_lookup(&mut handle, json!({"token": "c2VjcmV0LXZhbHVl"})).await;
        let body = patch_status(&mut handle).await;
        assert!(!body.to_string().contains("secret-value"));
        let scrubbed = scrubbed(&body);
        assert_eq!(scrubbed, stalled_status_body("SecretKeyMissing", message));
        expect_event(&mut handle, "Warning", "SecretKeyMissing", message).await;
    });
    reconcile(Arc::new(run(None)), ctx).await.unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn happy_path_starts_one_executor_and_reports_progress() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let (step_tx, mut step_rx) = mpsc::unbounded_channel::<()>();
    let (planned_tx, planned_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // base64 of "sk-test"
        serve_lookup(&mut handle, json!({"apiKey": "c2stdGVzdA=="})).await;
        let body = patch_status(&mut handle).await;
        let scrubbed = scrubbed(&body);
        let message = "research in progress: Pending";
        assert_eq!(
            scrubbed,
            json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
                "status": {
                    "phase": "Pending", "observedGeneration": 1,
                    "conditions": [
                        {"type": "Reconciling", "status": "True", "reason": "Running", "message": message, "observedGeneration": 1, "lastTransitionTime": "<time>"},
                        {"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": message, "observedGeneration": 1, "lastTransitionTime": "<time>"}
                    ],
                    "startTime": "<time>",
                    "message": message
                }
            })
        );
        // The second reconcile and the suspend signal cause no API call.
        expect_silence(&mut handle).await;
        step_tx.send(()).unwrap();
        // Progress from the executor: one patch now, then the burst coalesced into one more.
        let body = patch_status(&mut handle).await;
        assert_eq!(body["status"]["phase"], "Planning");
        // The suspend edit bumped the generation; the writer reports it.
        assert_eq!(body["status"]["observedGeneration"], 2);
        expect_event(
            &mut handle,
            "Normal",
            "Planning",
            "run entered phase Planning",
        )
        .await;
        planned_tx.send(()).unwrap();
        let body = patch_status(&mut handle).await;
        assert_eq!(body["status"]["phase"], "Researching");
        assert_eq!(
            body["status"]["usage"],
            json!({"inputTokens": 30, "outputTokens": 0, "costUSD": "0.000000", "llmCalls": 0, "searches": 2, "pagesFetched": 0})
        );
        expect_event(
            &mut handle,
            "Normal",
            "Researching",
            "run entered phase Researching",
        )
        .await;
        expect_silence(&mut handle).await;
    });
    let first = run(None);
    assert_eq!(
        reconcile(Arc::new(first.clone()), ctx.clone())
            .await
            .unwrap(),
        Action::requeue(Duration::from_secs(60))
    );
    {
        let rec = launcher.recorded.lock().unwrap();
        assert_eq!(rec.requests.len(), 1);
        let request = &rec.requests[0];
        assert_eq!(request.profile_name, "default");
        assert_eq!(request.api_keys.len(), 1);
        assert_eq!(request.api_keys[0].1.expose(), "sk-test");
        assert_eq!(format!("{:?}", request.api_keys[0].1), "ApiKey(<redacted>)");
        assert_eq!(request.input.query, "what is CEL?");
        assert_eq!(
            request.input.mode,
            quarry_engine::research::machine::state::Mode::Quick
        );
    }
    // A second reconcile (status now written) does not start a second executor.
    let mut again = run(None);
    again.status = Some(serde_json::from_value(json!({"phase": "Pending"})).unwrap());
    assert_eq!(
        reconcile(Arc::new(again.clone()), ctx.clone())
            .await
            .unwrap(),
        Action::requeue(Duration::from_secs(60))
    );
    again.spec.suspend = true;
    again.metadata.generation = Some(2);
    reconcile(Arc::new(again), ctx.clone()).await.unwrap();
    assert_eq!(launcher.starts.load(std::sync::atomic::Ordering::SeqCst), 1);
    let (mut control, progress) = {
        let rec = launcher.recorded.lock().unwrap();
        (rec.controls[0].clone(), rec.progress[0].clone())
    };
    assert_eq!(*control.borrow_and_update(), Signal::Suspend);
    step_rx.recv().await.unwrap();
    let mut state = RunState::new(launcher.recorded.lock().unwrap().requests[0].input.clone());
    state.phase = Phase::Planning;
    progress.send_replace(Some(state.clone()));
    // Once Planning is written, the writer waits out its interval: the burst below coalesces.
    planned_rx.await.unwrap();
    state.phase = Phase::Researching;
    state.usage.input_tokens = 10;
    progress.send_replace(Some(state.clone()));
    state.searches = 2;
    state.usage.input_tokens = 30;
    progress.send_replace(Some(state.clone()));
    server.await.unwrap();
    let metrics = ctx.metrics.encode().unwrap();
    // Three reconciles (start, repeat, suspend), counted under controller-runtime's names.
    assert!(
        metrics.contains(
            "controller_runtime_reconcile_total{controller=\"researchrun\",result=\"success\"} 3\n"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "controller_runtime_reconcile_time_seconds_count{controller=\"researchrun\"} 3\n"
        ),
        "{metrics}"
    );
    // Model and search metrics come from the engine's router and gatherer, never from status
    // deltas: the fake launcher made no call, so there are none (no double counting).
    assert!(!metrics.contains("quarry_llm_tokens_total{"), "{metrics}");
    assert!(!metrics.contains("quarry_searches_total{"), "{metrics}");
}

#[tokio::test]
async fn unchanged_stall_writes_nothing() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    // The run already carries exactly the status this reconcile would compute.
    let mut status = stalled_status_body("ProfileNotFound", PROFILE_MISSING)["status"].clone();
    for c in status["conditions"].as_array_mut().unwrap() {
        c["lastTransitionTime"] = json!("2026-01-01T00:00:00Z");
    }
    let server = tokio::spawn(async move {
        serve(
            &mut handle,
            Method::GET,
            PROFILE,
            not_found("researchprofiles", "default"),
        )
        .await;
        expect_silence(&mut handle).await;
    });
    let action = reconcile(Arc::new(run(Some(status))), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
}

#[tokio::test]
async fn finished_run_past_its_ttl_is_deleted() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let mut finished = run(Some(
        json!({"phase": "Completed", "completionTime": "2020-01-01T00:00:00Z"}),
    ));
    finished.spec.ttl_seconds_after_finished = Some(60);
    let server = tokio::spawn(async move {
        let (body, send) = expect(&mut handle, Method::DELETE, &format!("{RUNS}/r1?")).await;
        assert_eq!(body, json!({}));
        send.send_response(ok(
            &json!({"kind":"Status","apiVersion":"v1","status":"Success","metadata":{}}),
        ));
        expect_silence(&mut handle).await;
    });
    assert_eq!(
        reconcile(Arc::new(finished), ctx.clone()).await.unwrap(),
        Action::await_change()
    );
    server.await.unwrap();
    // Without a TTL a finished run is left alone, with no API call.
    let (ctx, mut handle) = context(FakeLauncher::default());
    let kept = run(Some(
        json!({"phase": "Failed", "completionTime": "2020-01-01T00:00:00Z"}),
    ));
    assert_eq!(
        reconcile(Arc::new(kept), ctx).await.unwrap(),
        Action::await_change()
    );
    expect_silence(&mut handle).await;
}

#[test]
fn spec_defaults_reach_the_engine_input() {
    let spec: ResearchRunSpec =
        serde_yaml::from_str("query: q?!\nlimits: {maxCostUSD: \"0.50\", timeout: 10m}").unwrap();
    let profile: quarry_api::ResearchProfileSpec = serde_yaml::from_str("models: {primary: {baseURL: 'http://127.0.0.1:1/v1', model: m}}\nlimits: {maxConcurrentResearchers: 2}").unwrap();
    let input = quarry_operator::research_run::run_input(&spec, &profile).unwrap();
    assert_eq!(input.limits.max_concurrent_researchers, 2);
    assert_eq!(input.limits.max_cost_pico_usd, Some(500_000_000_000));
    assert_eq!(input.limits.timeout_secs, Some(600));
    assert_eq!(input.top_k, 5);
}

#[tokio::test]
async fn in_progress_run_after_restart_is_handed_to_a_new_executor_without_status_churn() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let message = "research in progress: Researching";
    let status = json!({
        "phase": "Researching", "observedGeneration": 1, "startTime": "2026-01-01T00:00:00Z",
        "conditions": [
            {"type": "Reconciling", "status": "True", "reason": "Running", "message": message, "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Succeeded", "status": "Unknown", "reason": "Running", "message": message, "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ],
        "message": message
    });
    let server = tokio::spawn(async move {
        // A profile without API key (a local model): no Secret lookup.
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        // The status already says Researching: nothing to write before the executor reports.
        expect_silence(&mut handle).await;
    });
    let action = reconcile(Arc::new(run(Some(status))), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    server.await.unwrap();
    assert_eq!(launcher.starts.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(
        launcher.recorded.lock().unwrap().requests[0]
            .api_keys
            .is_empty()
    );
}

#[test]
fn a_profile_maps_to_the_unfinished_runs_that_use_it() {
    let mut waiting = run(None);
    waiting.metadata.name = Some("waiting".into());
    let done = run(Some(json!({"phase": "Completed"})));
    let mut elsewhere = run(None);
    elsewhere.metadata.namespace = Some("other".into());
    let mut other_profile = run(None);
    other_profile.metadata.name = Some("other-profile".into());
    other_profile.spec.profile_ref = "fast".into();
    let profile: quarry_api::ResearchProfile = serde_json::from_value(profile(false)).unwrap();
    let runs: Vec<Arc<ResearchRun>> = [waiting, done, elsewhere, other_profile]
        .into_iter()
        .map(Arc::new)
        .collect();
    let refs = quarry_operator::research_run::runs_using_profile(&runs, &profile);
    assert_eq!(
        refs.iter()
            .map(|r| (r.name.as_str(), r.namespace.as_deref()))
            .collect::<Vec<_>>(),
        vec![("waiting", Some("ns"))]
    );
}

/// Final-status patches the writer's fake API server refuses in a row: more than a writer that
/// gave up after a few attempts (leaving the status to the reconcile) would make.
const FINAL_PATCH_FAILURES: usize = 7;

#[tokio::test]
async fn a_final_status_the_writer_failed_to_write_is_retried_by_the_writer_alone_until_it_lands() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let (written_tx, written_rx) = tokio::sync::oneshot::channel::<Value>();
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<()>();
    let (final_tx, final_rx) = tokio::sync::oneshot::channel::<Value>();
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        let body = patch_status(&mut handle).await;
        written_tx.send(body).unwrap();
        // The writer's final patch fails, again and again.
        let mut failed_tx = Some(failed_tx);
        for _ in 0..FINAL_PATCH_FAILURES {
            let (body, send) = expect(
                &mut handle,
                Method::PATCH,
                &format!("{RUNS}/r1/status{APPLY_QUERY}"),
            )
            .await;
            assert_eq!(body["status"]["phase"], "Cancelled");
            send.send_response(failure(500, "InternalError", "etcd hiccup"));
            if let Some(tx) = failed_tx.take() {
                tx.send(()).unwrap();
            }
        }
        // The writer tries again one interval later, with its Event.
        let body = patch_status(&mut handle).await;
        let scrubbed = scrubbed(&body);
        assert_eq!(scrubbed["status"]["phase"], "Cancelled");
        assert_eq!(scrubbed["status"]["conditions"], cancelled_conditions(1));
        expect_cancelled_event(&mut handle).await;
        final_tx.send(body).unwrap();
        expect_silence(&mut handle).await;
    });
    reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    let _written = written_rx.await.unwrap();
    ctx.registry.signal("uid-1", Signal::Cancel);
    // The task ends and the writer's final patch fails.
    failed_rx.await.unwrap();
    assert_eq!(
        ctx.registry.presence("uid-1"),
        quarry_operator::research_run::registry::Presence::Finished
    );
    // The reconcile of the ended task leaves the status to the writer: no request, and it waits
    // for the write to come back as a change.
    let action = reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    assert_eq!(action, Action::await_change());
    // The writer leaves once its retry landed; the reconcile that follows (the watch shows the
    // final status) writes nothing.
    let final_body = final_rx.await.unwrap();
    assert_writer_exits(&ctx).await;
    let mut current = run(None);
    current.status = Some(serde_json::from_value(final_body["status"].clone()).unwrap());
    // A finished run waits for changes (or its TTL); nothing more is written.
    let action = reconcile(Arc::new(current), ctx).await.unwrap();
    assert_eq!(action, Action::await_change());
    server.await.unwrap();
}

/// Waits up to 2 s for r1's status writer to unregister.
async fn assert_writer_exits(ctx: &Context) {
    for _ in 0..200 {
        if !ctx.registry.has_writer("uid-1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!ctx.registry.has_writer("uid-1"), "the writer did not exit");
}

/// A `Status` failure answer of the API server.
fn failure(code: u16, reason: &str, message: &str) -> Response<Body> {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": message});
    Response::builder()
        .status(code)
        .body(Body::from(serde_json::to_vec(&status).unwrap()))
        .unwrap()
}

#[tokio::test]
async fn a_final_status_the_api_server_refuses_as_invalid_ends_the_writer_with_a_warning() {
    const REFUSAL: &str = "ResearchRun.quarry.dev \"r1\" is invalid: spec.query: Required value";
    let (ctx, mut handle) = context(FakeLauncher::default());
    let (written_tx, written_rx) = tokio::sync::oneshot::channel::<()>();
    let (warned_tx, warned_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        patch_status(&mut handle).await;
        written_tx.send(()).unwrap();
        let (body, send) = expect(
            &mut handle,
            Method::PATCH,
            &format!("{RUNS}/r1/status{APPLY_QUERY}"),
        )
        .await;
        assert_eq!(body["status"]["phase"], "Cancelled");
        send.send_response(failure(422, "Invalid", REFUSAL));
        // Said once, as a Warning that says what to do; no retry can land.
        expect_event(
            &mut handle,
            "Warning",
            "StoredSpecInvalid",
            &quarry_operator::research_run::stored_spec_invalid_note("r1", REFUSAL),
        )
        .await;
        warned_tx.send(()).unwrap();
        expect_silence(&mut handle).await;
    });
    reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    written_rx.await.unwrap();
    ctx.registry.signal("uid-1", Signal::Cancel);
    warned_rx.await.unwrap();
    assert_writer_exits(&ctx).await;
    server.await.unwrap();
}

/// A profile whose object store is an S3 endpoint that refuses connections (port 9).
fn profile_with_object_store() -> Value {
    let mut p = profile(false);
    p["spec"]["objectStore"] = json!({
        "url": "s3://reports/quarry", "endpoint": "http://127.0.0.1:9", "region": "us-east-1",
        "allowHttp": true, "credentialsSecretRef": {"name": "s3-creds"}
    });
    p
}

fn s3_secret(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3-creds", "namespace": "ns", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "data": data})
}

/// Serves the look-ups of a run whose profile has an object store: the profile, then its
/// credentials Secret holding `data`.
async fn serve_object_store_profile(handle: &mut Handle, data: Value) {
    serve(
        handle,
        Method::GET,
        PROFILE,
        ok(&profile_with_object_store()),
    )
    .await;
    serve(
        handle,
        Method::GET,
        "/api/v1/namespaces/ns/secrets/s3-creds",
        ok(&s3_secret(data)),
    )
    .await;
}

#[tokio::test]
async fn an_object_store_run_without_an_object_store_stalls_naming_the_option() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let message = "spec.report.kind is objectStore, but ResearchProfile \"default\" has no objectStore and the operator has no default (--object-store-url); add spec.objectStore to the profile";
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        expect_stall(&mut handle, "ObjectStoreNotConfigured", message).await;
    });
    let mut object_run = run(None);
    object_run.spec.report.kind = quarry_api::ReportKind::ObjectStore;
    let action = reconcile(Arc::new(object_run), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(15)));
    server.await.unwrap();
}

#[tokio::test]
async fn a_misspelt_credentials_key_stalls_naming_the_key_not_the_value() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let message = "Secret \"s3-creds\" key \"aws_secret_key\" (ResearchProfile \"default\" objectStore.credentialsSecretRef) is not an option of the s3 object store; rename it to one of its options, for example aws_access_key_id, aws_secret_access_key, aws_session_token";
    let server = tokio::spawn(async move {
        // "aHVudGVyMi1zZWNyZXQ=" is base64 of "hunter2-secret".
        serve_object_store_profile(
            &mut handle,
            json!({"aws_access_key_id": "QUtJREVYQU1QTEU=", "aws_secret_key": "aHVudGVyMi1zZWNyZXQ="}),
        )
        .await;
        let body = expect_stall(&mut handle, "ObjectStoreInvalid", message).await;
        assert!(!body.to_string().contains("hunter2"));
    });
    reconcile(Arc::new(run(None)), ctx).await.unwrap();
    server.await.unwrap();
    assert!(launcher.recorded.lock().unwrap().requests.is_empty());
}

#[tokio::test]
async fn status_report_points_where_the_store_put_the_report() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let url = "s3://reports/quarry/ns/r1/what-is-cel-k3.md";
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        patch_status(&mut handle).await;
        started_tx.send(()).unwrap();
        let body = patch_status(&mut handle).await;
        let message = format!("report stored at {url}");
        assert_eq!(body["status"]["phase"], "Completed");
        assert_eq!(body["status"]["message"], message.as_str());
        use sha2::Digest;
        let sha256 = hex::encode(sha2::Sha256::digest(b"# CEL\n\nDone."));
        assert_eq!(
            body["status"]["report"],
            json!({"objectUrl": url, "bytes": 12, "sha256": sha256, "sources": 0})
        );
        expect_event(&mut handle, "Normal", "Completed", &message).await;
    });
    reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    started_rx.await.unwrap();
    let (slot, progress, input) = {
        let rec = launcher.recorded.lock().unwrap();
        (
            rec.requests[0].artifacts.report.clone(),
            rec.progress[0].clone(),
            rec.requests[0].input.clone(),
        )
    };
    // The run's store put the report in the object store (a ConfigMap overflow, say).
    slot.set(quarry_operator::store::routed::ReportLocation::Object(
        url.into(),
    ));
    let mut state = RunState::new(input);
    state.phase = Phase::Completed;
    state.published = true;
    state.final_report = Some(quarry_engine::research::machine::state::FinalReport {
        markdown: "# CEL\n\nDone.".into(),
        findings_json: "{}".into(),
        sources: Vec::new(),
        partial: false,
        aborted: false,
        claims_checked: 0,
        claims_supported: 0,
        changes: None,
    });
    progress.send_replace(Some(state));
    server.await.unwrap();
}

/// A completed run being deleted (its deletion timestamp set), without finalizers.
fn deleted_completed_run() -> ResearchRun {
    let mut deleting = run(Some(json!({"phase": "Completed"})));
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            "2026-01-01T00:00:00Z".parse().unwrap(),
        ));
    deleting
}

#[tokio::test]
async fn a_failing_cleanup_keeps_the_run_stalled_with_a_warning_and_the_way_out() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let mut deleting = deleted_completed_run();
    deleting.metadata.finalizers = Some(vec!["quarry.dev/artifacts".into()]);
    let server = tokio::spawn(async move {
        // The object store at port 9 refuses: status says so, the phase stays.
        serve_object_store_profile(
            &mut handle,
            json!({"aws_access_key_id": "QUtJREVYQU1QTEU=", "aws_secret_access_key": "aHVudGVyMi1zZWNyZXQ="}),
        )
        .await;
        let body = patch_status(&mut handle).await;
        assert_eq!(body["status"]["phase"], "Completed");
        let condition = &body["status"]["conditions"][0];
        assert_eq!(condition["type"], "Stalled");
        assert_eq!(condition["status"], "True");
        assert_eq!(condition["reason"], "ArtifactCleanupFailed");
        let message = condition["message"].as_str().unwrap().to_string();
        assert!(
            message.starts_with("deleting the objects under s3://reports/quarry/ns/r1/ failed: ")
                && message.ends_with("the run is kept until its object-store artifacts are deleted (retried every 10s). Fix the object store or its credentials, or delete the run and keep the objects with: kubectl patch researchrun r1 -n ns --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'"),
            "{message}"
        );
        assert!(!message.contains("hunter2"));
        expect_event(&mut handle, "Warning", "ArtifactCleanupFailed", &message).await;
        // No finalizer removal: the run stays.
        expect_silence(&mut handle).await;
    });
    let err = reconcile(Arc::new(deleting), ctx).await.unwrap_err();
    assert_eq!(err.metric_reason(), "ArtifactCleanup");
    server.await.unwrap();
}

#[tokio::test]
async fn a_deleted_run_without_the_finalizer_is_let_go_without_any_request() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let deleting = deleted_completed_run();
    assert_eq!(
        reconcile(Arc::new(deleting), ctx).await.unwrap(),
        Action::await_change()
    );
    expect_silence(&mut handle).await;
}

#[tokio::test]
async fn a_finished_run_before_its_ttl_waits_without_any_request() {
    let (ctx, mut handle) = context(FakeLauncher::default());
    let completion = k8s_openapi::jiff::Timestamp::now();
    let mut finished = run(Some(
        json!({"phase": "Completed", "completionTime": completion.to_string()}),
    ));
    finished.spec.ttl_seconds_after_finished = Some(3600);
    let action = reconcile(Arc::new(finished.clone()), ctx).await.unwrap();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(completion);
    assert_eq!(
        quarry_operator::research_run::ttl_wait(&finished, &now),
        Some(Duration::from_secs(3600))
    );
    // Requeued for the rest of the hour (a second or two may have passed).
    assert!(
        action == Action::requeue(Duration::from_secs(3600))
            || action == Action::requeue(Duration::from_secs(3599))
            || action == Action::requeue(Duration::from_secs(3598)),
        "{action:?}"
    );
    expect_silence(&mut handle).await;
}

#[tokio::test]
async fn cancelled_run_that_never_started_ends_cancelled_without_research() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let mut cancelled = run(None);
    cancelled.spec.cancel = true;
    let server = tokio::spawn(async move {
        // No profile lookup, no Secret: straight to the terminal status.
        let body = patch_status(&mut handle).await;
        assert_eq!(
            scrubbed(&body),
            json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
                "status": {
                    "phase": "Cancelled", "observedGeneration": 1,
                    "conditions": cancelled_conditions(1),
                    "completionTime": "<time>",
                    "message": "the run was cancelled"
                }
            })
        );
        expect_cancelled_event(&mut handle).await;
        expect_silence(&mut handle).await;
    });
    let action = reconcile(Arc::new(cancelled), ctx).await.unwrap();
    assert_eq!(action, Action::await_change());
    server.await.unwrap();
    assert!(launcher.recorded.lock().unwrap().requests.is_empty());
    assert_eq!(launcher.starts.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn cancelling_a_running_run_stops_its_executor_and_ends_cancelled() {
    let launcher = FakeLauncher::default();
    let (ctx, mut handle) = context(launcher.clone());
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        // The cancel edit reaches the executor, which ends Cancelled; the writer reports it
        // for the new generation.
        serve(&mut handle, Method::GET, PROFILE, ok(&profile(false))).await;
        let body = patch_status(&mut handle).await;
        assert_eq!(body["status"]["phase"], "Pending");
        started_tx.send(()).unwrap();
        let body = patch_status(&mut handle).await;
        let scrubbed = scrubbed(&body);
        assert_eq!(scrubbed["status"]["phase"], "Cancelled");
        assert_eq!(scrubbed["status"]["observedGeneration"], 2);
        assert_eq!(scrubbed["status"]["completionTime"], "<time>");
        assert_eq!(scrubbed["status"]["conditions"], cancelled_conditions(2));
        expect_cancelled_event(&mut handle).await;
        expect_silence(&mut handle).await;
    });
    reconcile(Arc::new(run(None)), ctx.clone()).await.unwrap();
    started_rx.await.unwrap();
    let mut control = launcher.recorded.lock().unwrap().controls[0].clone();
    assert_eq!(*control.borrow_and_update(), Signal::Run);
    // `quarry cancel` sets spec.cancel (generation 2); suspend set too does not win over it.
    let mut cancelled = run(None);
    cancelled.spec.cancel = true;
    cancelled.spec.suspend = true;
    cancelled.metadata.generation = Some(2);
    let action = reconcile(Arc::new(cancelled), ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(60)));
    assert_eq!(*control.borrow_and_update(), Signal::Cancel);
    server.await.unwrap();
    assert_eq!(
        ctx.registry.presence("uid-1"),
        quarry_operator::research_run::registry::Presence::Finished
    );
    assert_eq!(launcher.starts.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn cancel_wins_over_suspend_in_the_control_signal() {
    let mut spec: ResearchRunSpec = serde_yaml::from_str("query: q?!").unwrap();
    assert_eq!(
        quarry_operator::research_run::control_signal(&spec),
        Signal::Run
    );
    spec.suspend = true;
    assert_eq!(
        quarry_operator::research_run::control_signal(&spec),
        Signal::Suspend
    );
    spec.cancel = true;
    assert_eq!(
        quarry_operator::research_run::control_signal(&spec),
        Signal::Cancel
    );
}
