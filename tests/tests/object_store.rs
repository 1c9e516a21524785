//! Object storage against a real S3-compatible server (moto's server mode, started by the tests on
//! 127.0.0.1 with signature checking on): the run store's write, read, list and delete; a report
//! too large for its ConfigMap routed to S3 with status and `quarry report` pointing there; the
//! finalizer's cleanup (the bucket is listed to prove it); credentials read from the Secret, a
//! wrong one stalling the run with an actionable condition.
//!
//! The Kubernetes side is the real kube-apiserver (`quarry_e2e::control_plane`, one per test:
//! nextest runs each test in a process of its own): the runs, profiles, Secrets, ConfigMaps and
//! Events are real objects, and what the code asked of the server is read from its audit log.

use std::sync::Arc;

use base64::Engine as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource};
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::{ControlPlane, apply_object};
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

fn layout_of(namespace: &str, run: &str) -> RunLayout {
    RunLayout {
        prefix: None,
        namespace: namespace.into(),
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

/// Starts a control plane with a fresh namespace for one test.
async fn kube(label: &str) -> (ControlPlane, kube::Client, String) {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let namespace = plane.namespace(label).await.unwrap();
    (plane, client, namespace)
}

/// Applies `object` into `namespace` and returns it as the server stored it.
async fn apply(client: &kube::Client, namespace: &str, object: Value) -> Value {
    apply_object(client, namespace, object).await.unwrap()
}

/// The run as stored, typed.
async fn stored_run(client: &kube::Client, namespace: &str, name: &str) -> ResearchRun {
    Api::<ResearchRun>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap()
}

/// The Events about run `name` (events.k8s.io/v1, what the operator's recorder writes).
async fn events_of(client: &kube::Client, namespace: &str, name: &str) -> Vec<Value> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(client.clone(), namespace);
    events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .filter(|e| e["regarding"]["name"] == name)
        .collect()
}

#[tokio::test]
#[ignore = "needs moto's S3 server (scripts/install-test-deps.sh)"]
async fn a_runs_artifacts_are_written_read_listed_and_deleted_in_s3() {
    let s3 = s3().await;
    let bucket = Bucket::connect(&config(&s3, &s3.secret_access_key)).unwrap();
    let store = bucket.for_run(&layout_of("ns", "vacuum"));
    let neighbour = bucket.for_run(&layout_of("ns", "other"));
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
    let name = layout_of("ns", "vacuum").report_name();
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
#[ignore = "needs moto's S3 server and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_report_too_large_for_its_configmap_goes_to_s3_and_status_and_the_cli_point_there() {
    let s3 = s3().await;
    let (_plane, client, ns) = kube("big-report").await;
    apply(&client, &ns, run("big", json!({}), json!({}))).await;
    // For the second half: a run whose profile has no object store.
    apply(&client, &ns, run("plain", json!({}), json!({}))).await;
    let run = stored_run(&client, &ns, "big").await;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cfg = config(&s3, &s3.secret_access_key);
    let object = Bucket::connect(&cfg)
        .unwrap()
        .for_run(&layout(&run).unwrap());
    let slot = ReportSlot::default();
    let store = RoutedStore::configmap_first(
        ConfigMapStore::new(
            client.clone(),
            &ns,
            "big",
            run.controller_owner_ref(&()).unwrap(),
        ),
        Some(object.clone()),
        Some(FinalizerGuard::new(client.clone(), &ns, "big", None).into_hook()),
        slot.clone(),
    );
    let markdown = incompressible_markdown();
    store
        .put("findings.json", b"{\"sources\":[]}")
        .await
        .unwrap();
    // Small artifacts stay in ConfigMaps and need no finalizer.
    assert!(runs.get("big").await.unwrap().metadata.finalizers.is_none());
    store.put("report.md", markdown.as_bytes()).await.unwrap();
    let url = object.url_of("report.md");
    assert_eq!(slot.get(), Some(ReportLocation::Object(url.clone())));
    let cm = serde_json::to_value(configmaps.get("big-report").await.unwrap()).unwrap();
    assert_eq!(cm["data"], json!({"findings.json": "{\"sources\":[]}"}));
    // An empty map is not stored by the server: no binary data at all.
    assert!(
        cm["binaryData"].as_object().is_none_or(|m| m.is_empty()),
        "{}",
        cm["binaryData"]
    );
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
        runs.get("big").await.unwrap().metadata.finalizers,
        Some(vec!["quarry.dev/artifacts".to_string()])
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
    runs.patch_status(
        "big",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
    apply(&client, &ns, profile(&s3)).await;
    apply(
        &client,
        &ns,
        secret(&s3.access_key_id, &s3.secret_access_key),
    )
    .await;
    let printed = quarry::report_cli::cluster_report(&client, Some(&ns), "big")
        .await
        .unwrap();
    assert_eq!(printed, markdown);

    // Without an object store the same write is refused, naming the option.
    let plain = stored_run(&client, &ns, "plain").await;
    let store = RoutedStore::configmap_first(
        ConfigMapStore::new(
            client.clone(),
            &ns,
            "plain",
            plain.controller_owner_ref(&()).unwrap(),
        ),
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
#[ignore = "needs moto's S3 server and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn deleting_a_run_deletes_its_objects_then_releases_it() {
    let s3 = s3().await;
    let (plane, client, ns) = kube("delete-objects").await;
    let cfg = config(&s3, &s3.secret_access_key);
    let bucket = Bucket::connect(&cfg).unwrap();
    let doomed = bucket.for_run(&layout_of(&ns, "r1"));
    let kept = bucket.for_run(&layout_of(&ns, "r2"));
    doomed.put("report.md", b"# r1").await.unwrap();
    doomed.put("checkpoint.json", b"{}").await.unwrap();
    kept.put("report.md", b"# r2").await.unwrap();

    apply(&client, &ns, profile(&s3)).await;
    apply(
        &client,
        &ns,
        secret(&s3.access_key_id, &s3.secret_access_key),
    )
    .await;
    // A second finalizer, first in the list, keeps the run readable after ours is gone and
    // shows that exactly ours is removed, wherever it stands.
    apply(
        &client,
        &ns,
        run(
            "r1",
            json!({}),
            json!({"finalizers": ["example.com/keep", "quarry.dev/artifacts"]}),
        ),
    )
    .await;
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    runs.delete("r1", &Default::default()).await.unwrap();
    let deleting = runs.get("r1").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());

    let ctx = Arc::new(Context::new(
        client.clone(),
        Arc::new(EngineLauncher::new(client.clone())),
        Metrics::new(),
    ));
    let action = quarry_operator::research_run::reconcile(Arc::new(deleting), ctx)
        .await
        .unwrap();
    assert_eq!(action, Action::await_change());
    let events = events_of(&client, &ns, "r1").await;
    let [event] = events.as_slice() else {
        panic!("one Event expected: {events:?}")
    };
    assert_eq!(event["type"], "Normal");
    assert_eq!(event["reason"], "ArtifactsDeleted");
    assert_eq!(
        event["note"],
        format!("deleted 2 objects under {}", doomed.dir_url())
    );
    // Only this finalizer was removed; the other one still holds the run.
    assert_eq!(
        runs.get("r1").await.unwrap().metadata.finalizers,
        Some(vec!["example.com/keep".to_string()])
    );
    // The helper removed it with one JSON patch (test-and-remove by index, see kube's finalizer).
    let patches: Vec<Value> = plane
        .audit_entries()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                && e["verb"] == "patch"
                && e["objectRef"]["resource"] == "researchruns"
                && e["objectRef"]["namespace"] == ns.as_str()
                && e["objectRef"]["name"] == "r1"
                && e["objectRef"]["subresource"].is_null()
        })
        .collect();
    // The fixture's apply is one patch, the finalizer's removal the other.
    assert_eq!(patches.len(), 2, "{patches:#?}");
    // The bucket proves it: the run's objects are gone, its neighbour's are not.
    assert!(doomed.list().await.unwrap().is_empty());
    assert_eq!(kept.list().await.unwrap().len(), 1);
}

#[tokio::test]
#[ignore = "needs moto's S3 server and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn credentials_come_from_the_secret_and_a_wrong_one_stalls_the_run() {
    let s3 = s3().await;
    let (_plane, client, ns) = kube("wrong-key").await;
    let wrong = "wrong-secret-value-0123456789";
    apply(&client, &ns, profile(&s3)).await;
    apply(&client, &ns, secret(&s3.access_key_id, wrong)).await;
    apply(
        &client,
        &ns,
        run("r1", json!({"report": {"kind": "objectStore"}}), json!({})),
    )
    .await;
    let object_run = stored_run(&client, &ns, "r1").await;
    let ctx = Arc::new(Context::new(
        client.clone(),
        Arc::new(EngineLauncher::new(client.clone())),
        Metrics::new(),
    ));
    let action = quarry_operator::research_run::reconcile(Arc::new(object_run), ctx)
        .await
        .unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(15)));
    let dir = format!("s3://{BUCKET}/quarry/{ns}/r1/");
    let stored = serde_json::to_value(stored_run(&client, &ns, "r1").await).unwrap();
    assert!(
        !stored["status"].to_string().contains(wrong),
        "the secret leaked into status"
    );
    let stalled = stored["status"]["conditions"]
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
    let events = events_of(&client, &ns, "r1").await;
    let [event] = events.as_slice() else {
        panic!("one Event expected: {events:?}")
    };
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "ObjectStoreAccessDenied");
    assert_eq!(event["note"], message.as_str());
    // With the right key from the Secret the same store answers.
    let right = Bucket::connect(&config(&s3, &s3.secret_access_key))
        .unwrap()
        .for_run(&layout_of(&ns, "r1"));
    right.probe().await.unwrap();
}

#[tokio::test]
#[ignore = "needs moto's S3 server and a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_scheduled_run_is_compared_with_an_earlier_report_kept_in_s3() {
    use quarry_operator::research_run::earlier_run::earlier_findings;
    let s3 = s3().await;
    let (plane, client, ns) = kube("earlier").await;
    let bucket = Bucket::connect(&config(&s3, &s3.secret_access_key)).unwrap();
    // The earlier run of the schedule stored its report and findings in the bucket only.
    let store = bucket.for_run(&layout_of(&ns, "weekly-1"));
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
    apply(&client, &ns, earlier).await;
    let found = earlier_findings(&client, &ns, "weekly-1", Some(&bucket))
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
    let entries = plane.audit_entries();
    assert!(
        entries.iter().any(|e| e["verb"] == "get"
            && e["objectRef"]["resource"] == "configmaps"
            && e["objectRef"]["namespace"] == ns.as_str()
            && e["objectRef"]["name"] == "weekly-1-report"),
        "no GET of the report ConfigMap in the audit log"
    );
    // Without the bucket (a run whose profile has no object store) there is nothing to compare.
    assert!(
        earlier_findings(&client, &ns, "weekly-1", None)
            .await
            .is_none()
    );
}
