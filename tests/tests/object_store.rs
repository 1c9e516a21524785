//! Object storage against a real S3-compatible server (moto's server mode, started by the tests on
//! 127.0.0.1 with signature checking on): the run store's write, read, list and delete; a report
//! too large for its ConfigMap routed to S3 with status and `quarry report` pointing there; the
//! finalizer's cleanup (the bucket is listed to prove it); credentials read from the Secret, a
//! wrong one stalling the run with an actionable condition.

use std::sync::Arc;

use base64::Engine as _;
use http::Method;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::runtime::controller::Action;
use quarry_api::ResearchRun;
use quarry_e2e::fake_kube::{FakeKube, expect_request, mock_client, ok};
use quarry_e2e::s3_server::{BUCKET, S3Server, moto_available};
use quarry_engine::research::machine::state::{FinalReport, Mode, Phase, RunInput, RunState};
use quarry_engine::store::ArtifactStore;
use quarry_engine::telemetry::Metrics;
use quarry_operator::research_run::Context;
use quarry_operator::research_run::artifacts::{FinalizerGuard, layout};
use quarry_operator::research_run::launcher::EngineLauncher;
use quarry_operator::research_run::status::{RunView, desired_status_at};
use quarry_operator::store::configmap::ConfigMapStore;
use quarry_operator::store::object::{Bucket, ObjectStoreConfig, RunLayout, SecretValue};
use quarry_operator::store::routed::{ReportLocation, ReportSlot, RoutedStore};
use serde_json::{Value, json};

const RUNS: &str = "/apis/quarry.dev/v1alpha1/namespaces/ns/researchruns";
const PROFILE: &str = "/apis/quarry.dev/v1alpha1/namespaces/ns/researchprofiles/default";
const SECRET: &str = "/api/v1/namespaces/ns/secrets/s3-creds";
const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ns/events?";

/// Starts moto, or panics saying how to install it (these tests run only when asked for).
async fn s3() -> S3Server {
    assert!(
        moto_available(),
        "moto's server is not installed (scripts/install-test-deps.sh installs it into .work/moto)"
    );
    S3Server::start().await.expect("moto starts")
}

fn config(s3: &S3Server, secret_access_key: &str) -> ObjectStoreConfig {
    ObjectStoreConfig {
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
                SecretValue::new(secret_access_key),
            ),
        ],
        from_env: false,
        origin: "test".into(),
    }
}

fn layout_of(run: &str) -> RunLayout {
    RunLayout {
        prefix: None,
        namespace: "ns".into(),
        run: run.into(),
        uid: format!("uid-{run}"),
        query: "What does VACUUM FULL lock?".into(),
    }
}

fn run(name: &str, extra_spec: Value, metadata: Value) -> Value {
    let mut spec =
        json!({"query": "What does VACUUM FULL lock?", "mode": "quick", "profileRef": "default"});
    for (k, v) in extra_spec.as_object().cloned().unwrap_or_default() {
        spec[k] = v;
    }
    let mut meta = json!({"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "generation": 1, "resourceVersion": "7"});
    for (k, v) in metadata.as_object().cloned().unwrap_or_default() {
        meta[k] = v;
    }
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": meta, "spec": spec})
}

/// A profile whose object store is the moto server, credentials in Secret `s3-creds`.
fn profile(s3: &S3Server) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": "default", "namespace": "ns", "uid": "p-1"},
        "spec": {
            "models": {"primary": {"baseURL": "http://127.0.0.1:9/v1", "model": "scripted"}},
            "search": {"url": "http://127.0.0.1:8888"},
            "objectStore": {
                "url": format!("s3://{BUCKET}/quarry"), "endpoint": s3.endpoint(),
                "region": "us-east-1", "allowHttp": true,
                "credentialsSecretRef": {"name": "s3-creds"}
            }
        }
    })
}

fn secret(access_key_id: &str, secret_access_key: &str) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s3-creds", "namespace": "ns", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}},
        "data": {"aws_access_key_id": b64(access_key_id), "aws_secret_access_key": b64(secret_access_key)}
    })
}

/// Text that gzip cannot shrink below the ConfigMap limit: 1.6 MB of pseudo-random base64 letters.
fn incompressible_markdown() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut out = String::from("# Report\n\n");
    for i in 0..1_600_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.push(ALPHABET[(state >> 32) as usize % 64] as char);
        if i % 100 == 99 {
            out.push('\n');
        }
    }
    out
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn a_runs_artifacts_are_written_read_listed_and_deleted_in_s3() {
    let s3 = s3().await;
    let bucket = Bucket::connect(&config(&s3, &s3.secret_access_key)).unwrap();
    let store = bucket.for_run(&layout_of("vacuum"));
    let neighbour = bucket.for_run(&layout_of("other"));
    store.probe().await.expect("the credentials work");
    assert_eq!(store.get("report.md").await.unwrap(), None);
    store.put("report.md", b"# VACUUM FULL\n").await.unwrap();
    store.put("checkpoint.json", b"{\"a\":1}").await.unwrap();
    store.put("researchers/0.md", b"notes").await.unwrap();
    neighbour.put("report.md", b"# other").await.unwrap();
    assert_eq!(
        store.get("report.md").await.unwrap().as_deref(),
        Some(&b"# VACUUM FULL\n"[..])
    );
    // The standalone report naming under <prefix>/<namespace>/<run>/, the suffix from the run's UID.
    let name = layout_of("vacuum").report_name();
    assert!(name.starts_with("what-does-vacuum-full-lock-") && name.ends_with(".md"));
    assert_eq!(
        store.list().await.unwrap(),
        vec![
            "checkpoint.json".to_string(),
            "researchers__0.md".to_string(),
            name.clone()
        ]
    );
    let url = store.url_of("report.md");
    assert_eq!(url, format!("s3://{BUCKET}/quarry/ns/vacuum/{name}"));
    assert_eq!(
        bucket.read_url(&url).await.unwrap().as_deref(),
        Some(&b"# VACUUM FULL\n"[..])
    );
    store.delete("checkpoint.json").await.unwrap();
    store.delete("checkpoint.json").await.unwrap();
    assert_eq!(store.get("checkpoint.json").await.unwrap(), None);
    assert_eq!(store.delete_all().await.unwrap(), 2);
    assert!(store.list().await.unwrap().is_empty());
    // Another run's objects are untouched.
    assert_eq!(neighbour.list().await.unwrap().len(), 1);
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn a_report_too_large_for_its_configmap_goes_to_s3_and_status_and_the_cli_point_there() {
    let s3 = s3().await;
    let (client, fake) = FakeKube::start("ns");
    let run_value = run("big", json!({}), json!({}));
    fake.insert(&format!("{RUNS}/big"), run_value.clone());
    let run: ResearchRun = serde_json::from_value(run_value).unwrap();
    let cfg = config(&s3, &s3.secret_access_key);
    let object = Bucket::connect(&cfg)
        .unwrap()
        .for_run(&layout(&run).unwrap());
    let slot = ReportSlot::default();
    let store = RoutedStore::configmap_first(
        ConfigMapStore::new(
            client.clone(),
            "ns",
            "big",
            run.controller_owner_ref(&()).unwrap(),
        ),
        Some(object.clone()),
        Some(FinalizerGuard::new(client.clone(), "ns", "big", None).into_hook()),
        slot.clone(),
    );
    let markdown = incompressible_markdown();
    store
        .put("findings.json", b"{\"sources\":[]}")
        .await
        .unwrap();
    // Small artifacts stay in ConfigMaps and need no finalizer.
    assert_eq!(
        fake.get(&format!("{RUNS}/big")).unwrap()["metadata"]["finalizers"],
        Value::Null
    );
    store.put("report.md", markdown.as_bytes()).await.unwrap();
    let url = object.url_of("report.md");
    assert_eq!(slot.get(), Some(ReportLocation::Object(url.clone())));
    let cm = fake.configmap("ns", "big-report").unwrap();
    assert_eq!(cm["data"], json!({"findings.json": "{\"sources\":[]}"}));
    assert_eq!(cm["binaryData"], json!({}));
    assert_eq!(
        object.list().await.unwrap(),
        vec![layout(&run).unwrap().report_name()]
    );
    assert_eq!(
        store.get("report.md").await.unwrap().as_deref(),
        Some(markdown.as_bytes())
    );
    // The finalizer was added before the object was written.
    assert_eq!(
        fake.get(&format!("{RUNS}/big")).unwrap()["metadata"]["finalizers"],
        json!(["quarry.dev/artifacts"])
    );
    // status.report points at the object, with its size and digest.
    let mut state = RunState::new(RunInput::new(run.spec.query.clone(), Mode::Quick));
    state.phase = Phase::Completed;
    state.published = true;
    state.final_report = Some(FinalReport {
        markdown: markdown.clone(),
        findings_json: "{}".into(),
        sources: Vec::new(),
        partial: false,
        aborted: false,
        claims_checked: 0,
        claims_supported: 0,
        changes: None,
    });
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let status = desired_status_at(&run, RunView::Progress(&state), &slot.get().unwrap(), &now);
    let report = status.report.clone().unwrap();
    assert_eq!(report.object_url.as_deref(), Some(url.as_str()));
    assert_eq!(report.config_map, None);
    assert_eq!(report.bytes, markdown.len() as u64);
    use sha2::Digest;
    assert_eq!(
        report.sha256.as_deref(),
        Some(hex::encode(sha2::Sha256::digest(markdown.as_bytes())).as_str())
    );
    assert_eq!(
        status.message.as_deref(),
        Some(format!("report stored at {url}").as_str())
    );
    // `quarry report` follows status.report to the object, with the profile's Secret.
    let mut stored = fake.get(&format!("{RUNS}/big")).unwrap();
    stored["status"] = serde_json::to_value(&status).unwrap();
    fake.insert(&format!("{RUNS}/big"), stored);
    fake.insert(PROFILE, profile(&s3));
    fake.insert(SECRET, secret(&s3.access_key_id, &s3.secret_access_key));
    let printed = quarry::report_cli::cluster_report(&client, Some("ns"), "big")
        .await
        .unwrap();
    assert_eq!(printed, markdown);

    // Without an object store the same write is refused, naming the option.
    let (client, fake) = FakeKube::start("ns");
    fake.insert(&format!("{RUNS}/big"), serde_json::to_value(&run).unwrap());
    let store = RoutedStore::configmap_first(
        ConfigMapStore::new(client, "ns", "big", run.controller_owner_ref(&()).unwrap()),
        None,
        None,
        ReportSlot::default(),
    );
    let err = store
        .put("report.md", markdown.as_bytes())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("configure object storage (spec.objectStore in the run's ResearchProfile"),
        "{err}"
    );
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn deleting_a_run_deletes_its_objects_then_releases_it() {
    let s3 = s3().await;
    let cfg = config(&s3, &s3.secret_access_key);
    let bucket = Bucket::connect(&cfg).unwrap();
    let doomed = bucket.for_run(&layout_of("r1"));
    let kept = bucket.for_run(&layout_of("r2"));
    doomed.put("report.md", b"# r1").await.unwrap();
    doomed.put("checkpoint.json", b"{}").await.unwrap();
    kept.put("report.md", b"# r2").await.unwrap();

    let (client, mut handle) = mock_client("ns");
    let ctx = Arc::new(Context::new(
        client.clone(),
        Arc::new(EngineLauncher::new(client)),
        Metrics::new(),
    ));
    let deleting: ResearchRun = serde_json::from_value(run(
        "r1",
        json!({}),
        json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["quarry.dev/artifacts"]}),
    ))
    .unwrap();
    let (profile_body, secret_body) = (
        profile(&s3),
        secret(&s3.access_key_id, &s3.secret_access_key),
    );
    let dir = doomed.dir_url();
    let server = tokio::spawn(async move {
        let (_, send) = expect_request(&mut handle, Method::GET, PROFILE).await;
        send.send_response(ok(&profile_body));
        let (_, send) = expect_request(&mut handle, Method::GET, SECRET).await;
        send.send_response(ok(&secret_body));
        let (event, send) = expect_request(&mut handle, Method::POST, EVENTS).await;
        assert_eq!(event["type"], "Normal");
        assert_eq!(event["reason"], "ArtifactsDeleted");
        assert_eq!(event["note"], format!("deleted 2 objects under {dir}"));
        send.send_response(ok(&event));
        // The helper removes exactly this finalizer, by index, after checking it is ours.
        let (patch, send) =
            expect_request(&mut handle, Method::PATCH, &format!("{RUNS}/r1?")).await;
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "quarry.dev/artifacts"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ])
        );
        send.send_response(ok(&run("r1", json!({}), json!({}))));
    });
    let action = quarry_operator::research_run::reconcile(Arc::new(deleting), ctx)
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    server.await.unwrap();
    // The bucket proves it: the run's objects are gone, its neighbour's are not.
    assert!(doomed.list().await.unwrap().is_empty());
    assert_eq!(kept.list().await.unwrap().len(), 1);
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn credentials_come_from_the_secret_and_a_wrong_one_stalls_the_run() {
    let s3 = s3().await;
    let (client, mut handle) = mock_client("ns");
    let ctx = Arc::new(Context::new(
        client.clone(),
        Arc::new(EngineLauncher::new(client)),
        Metrics::new(),
    ));
    let object_run: ResearchRun = serde_json::from_value(run(
        "r1",
        json!({"report": {"kind": "objectStore"}}),
        json!({}),
    ))
    .unwrap();
    let wrong = "wrong-secret-value-0123456789";
    let (profile_body, secret_body) = (profile(&s3), secret(&s3.access_key_id, wrong));
    let dir = format!("s3://{BUCKET}/quarry/ns/r1/");
    let server = tokio::spawn(async move {
        let (_, send) = expect_request(&mut handle, Method::GET, PROFILE).await;
        send.send_response(ok(&profile_body));
        let (_, send) = expect_request(&mut handle, Method::GET, SECRET).await;
        send.send_response(ok(&secret_body));
        let (body, send) = expect_request(
            &mut handle,
            Method::PATCH,
            &format!("{RUNS}/r1/status?&force=true&fieldManager=quarry-operator"),
        )
        .await;
        let text = body.to_string();
        assert!(!text.contains(wrong), "the secret leaked into status");
        let stalled = body["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Stalled")
            .cloned()
            .unwrap();
        assert_eq!(stalled["status"], "True");
        assert_eq!(stalled["reason"], "ObjectStoreAccessDenied", "{stalled}");
        let message = stalled["message"].as_str().unwrap().to_string();
        assert!(
            message.starts_with(&format!(
                "the object store at {dir} refused the credentials of ResearchProfile \"default\" objectStore: access denied: SignatureDoesNotMatch"
            )) && message.ends_with("fix the keys of the credentials Secret and the run starts"),
            "{message}"
        );
        let mut answered = run("r1", json!({"report": {"kind": "objectStore"}}), json!({}));
        answered["status"] = body["status"].clone();
        send.send_response(ok(&answered));
        let (event, send) = expect_request(&mut handle, Method::POST, EVENTS).await;
        assert_eq!(event["type"], "Warning");
        assert_eq!(event["reason"], "ObjectStoreAccessDenied");
        assert_eq!(event["note"], message.as_str());
        send.send_response(ok(&event));
        message
    });
    let action = quarry_operator::research_run::reconcile(Arc::new(object_run), ctx)
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(15)));
    server.await.unwrap();
    // With the right key from the Secret the same store answers.
    let right = Bucket::connect(&config(&s3, &s3.secret_access_key))
        .unwrap()
        .for_run(&layout_of("r1"));
    right.probe().await.unwrap();
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn a_scheduled_run_is_compared_with_an_earlier_report_kept_in_s3() {
    use quarry_e2e::fake_kube::FakeKube;
    use quarry_operator::research_run::earlier_run::earlier_findings;
    let s3 = s3().await;
    let bucket = Bucket::connect(&config(&s3, &s3.secret_access_key)).unwrap();
    // The earlier run of the schedule stored its report and findings in the bucket only.
    let store = bucket.for_run(&layout_of("weekly-1"));
    let findings = json!({
        "claims": [
            {"claim": "VACUUM FULL takes an ACCESS EXCLUSIVE lock.", "supported": true},
            {"claim": "VACUUM FULL runs without locks.", "supported": false}
        ],
        "sources": [{"url": "https://www.postgresql.org/docs/current/sql-vacuum.html"}]
    });
    store.put("report.md", b"# VACUUM FULL\n").await.unwrap();
    store
        .put("findings.json", findings.to_string().as_bytes())
        .await
        .unwrap();
    let (client, kube) = FakeKube::start("ns");
    let mut earlier = run(
        "weekly-1",
        json!({"report": {"kind": "objectStore"}}),
        json!({}),
    );
    earlier["status"] = json!({
        "phase": "Completed",
        "completionTime": "2026-11-18T07:00:00Z",
        "report": {"objectUrl": store.url_of("report.md"), "bytes": 14, "sources": 1}
    });
    kube.insert(&format!("{RUNS}/weekly-1"), earlier);
    let found = earlier_findings(&client, "ns", "weekly-1", Some(&bucket))
        .await
        .expect("the findings are read from the object store");
    assert_eq!(
        found.claims,
        vec!["VACUUM FULL takes an ACCESS EXCLUSIVE lock.".to_string()]
    );
    assert_eq!(
        found.sources,
        vec!["https://www.postgresql.org/docs/current/sql-vacuum.html".to_string()]
    );
    assert!(
        found.date.starts_with("2026-11-18T07:00:00"),
        "{}",
        found.date
    );
    // Its report ConfigMap was looked for first (a report may be in either place).
    assert!(
        kube.requests()
            .iter()
            .any(|(m, p)| m == "GET" && p.ends_with("/configmaps/weekly-1-report")),
        "{:?}",
        kube.requests()
    );
    // Without the bucket (a run whose profile has no object store) there is nothing to compare.
    assert!(
        earlier_findings(&client, "ns", "weekly-1", None)
            .await
            .is_none()
    );
}
