use super::*;
use http::{Request, Response};
use kube::client::Body;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "quarry.dev/v1alpha1".into(),
        kind: "ResearchRun".into(),
        name: "r1".into(),
        uid: "uid-1".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn store() -> (ConfigMapStore, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "ns");
    (ConfigMapStore::new(client, "ns", "r1", owner()), handle)
}

fn not_found() -> Response<Body> {
    let body = serde_json::json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"});
    Response::builder()
        .status(404)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
}

/// Metadata of a ConfigMap this store made for run r1 (uid-1).
fn ours(name: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "namespace": "ns",
        "labels": {"app.kubernetes.io/managed-by": "quarry", "quarry.dev/run": "r1"},
        "ownerReferences": [{"apiVersion":"quarry.dev/v1alpha1","kind":"ResearchRun","name":"r1","uid":"uid-1","controller":true,"blockOwnerDeletion":true}]
    })
}

fn ok_json(value: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .status(200)
        .body(Body::from(serde_json::to_vec(value).unwrap()))
        .unwrap()
}

#[tokio::test]
async fn put_merges_keys_and_applies_with_owner() {
    let (store, mut handle) = store();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/r1-report"
        );
        send.send_response(ok_json(&serde_json::json!({
            "apiVersion":"v1","kind":"ConfigMap","metadata": ours("r1-report"),
            "data":{"report.md":"# old"}
        })));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::PATCH);
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/r1-report?&force=true&fieldManager=quarry-operator"
        );
        assert_eq!(
            req.headers().get("content-type").unwrap(),
            "application/apply-patch+yaml"
        );
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "r1-report",
                    "labels": {"app.kubernetes.io/managed-by": "quarry", "quarry.dev/run": "r1"},
                    "ownerReferences": [{"apiVersion":"quarry.dev/v1alpha1","kind":"ResearchRun","name":"r1","uid":"uid-1","controller":true,"blockOwnerDeletion":true}]
                },
                "data": {"report.md": "# old", "findings.json": "{\"a\":1}"},
                "binaryData": {}
            })
        );
        send.send_response(ok_json(&body));
    });
    store.put("findings.json", b"{\"a\":1}").await.unwrap();
    server.await.unwrap();
}

/// A checkpoint in slot A, its pointer and the progress report share `r1-state`: one read
/// and one apply. Slot B lives in `r1-state-b`: two of each, slot before pointer.
#[tokio::test]
async fn put_many_writes_neighbours_of_one_configmap_in_one_apply() {
    let (store, mut handle) = store();
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        for _ in 0..6 {
            let (req, send) = handle.next_request().await.unwrap();
            let (method, uri) = (req.method().clone(), req.uri().path().to_string());
            if method == http::Method::GET {
                send.send_response(not_found());
            } else {
                // Absent ConfigMaps are server-side applied after the read found none.
                assert_eq!(method, http::Method::PATCH);
                assert!(
                    uri.starts_with("/api/v1/namespaces/ns/configmaps/r1-"),
                    "{uri}"
                );
                let body: serde_json::Value =
                    serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap())
                        .unwrap();
                let mut keys: Vec<String> =
                    body["data"].as_object().unwrap().keys().cloned().collect();
                keys.sort();
                seen.push(format!(
                    "{} {}",
                    body["metadata"]["name"].as_str().unwrap(),
                    keys.join(",")
                ));
                send.send_response(ok_json(&body));
            }
        }
        seen
    });
    store
        .put_many(&[
            ("checkpoint-a.json", b"A"),
            ("checkpoint.json", b"P"),
            ("progress.md", b"# progress"),
        ])
        .await
        .unwrap();
    store
        .put_many(&[("checkpoint-b.json", b"B"), ("checkpoint.json", b"P2")])
        .await
        .unwrap();
    let seen = server.await.unwrap();
    assert_eq!(
        seen,
        [
            "r1-state checkpoint-a.json,checkpoint.json,progress.md",
            "r1-state-b checkpoint-b.json",
            "r1-state checkpoint.json",
        ]
    );
}

#[tokio::test]
async fn each_artifact_goes_to_its_configmap() {
    let (store, _handle) = store();
    let at = |key: &str| store.locate(key).unwrap().0;
    assert_eq!(at("report.md"), "r1-report");
    assert_eq!(at("findings.json"), "r1-report");
    assert_eq!(at("checkpoint.json"), "r1-state");
    assert_eq!(at("checkpoint-a.json"), "r1-state");
    assert_eq!(at("checkpoint-b.json"), "r1-state-b");
    // The provenance log has its own ConfigMap: it can never crowd out a checkpoint.
    assert_eq!(at("events.jsonl"), "r1-events");
}

#[tokio::test]
async fn large_values_are_gzipped_and_read_back() {
    let (store, mut handle) = store();
    let big: Vec<u8> = (0..(GZIP_THRESHOLD + 10))
        .map(|i| b'a' + (i % 7) as u8)
        .collect();
    let expected = big.clone();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/r1-state"
        );
        send.send_response(not_found());
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::PATCH);
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        assert_eq!(body["data"], serde_json::json!({}));
        let packed = body["binaryData"]["checkpoint.json.gz"]
            .as_str()
            .unwrap()
            .to_string();
        send.send_response(ok_json(&body));
        // The following get sees what was applied.
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/r1-state"
        );
        send.send_response(ok_json(&serde_json::json!({
            "apiVersion":"v1","kind":"ConfigMap","metadata": ours("r1-state"),
            "binaryData":{"checkpoint.json.gz": packed}
        })));
    });
    store.put("checkpoint.json", &big).await.unwrap();
    assert_eq!(store.get("checkpoint.json").await.unwrap(), Some(expected));
    server.await.unwrap();
}

#[tokio::test]
async fn missing_configmap_reads_as_none_and_oversize_is_refused() {
    let (store, mut handle) = store();
    let server = tokio::spawn(async move {
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(not_found());
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        send.send_response(not_found());
        // No PATCH follows: the oversize value is refused locally.
    });
    assert_eq!(store.get("checkpoint.json").await.unwrap(), None);
    // Random bytes do not compress: over the limit even after gzip.
    let mut state = 0x1234_5678_u64;
    let noise: Vec<u8> = (0..CONFIGMAP_LIMIT + 1000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    let err = store.put("events/log.jsonl", &noise).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("r1-state")
            && text.contains("over the 1000000-byte ConfigMap limit")
            && text.contains("spec.objectStore in the run's ResearchProfile")
            && text.contains("--object-store-url"),
        "{text}"
    );
    server.await.unwrap();
}

#[tokio::test]
async fn delete_removes_one_key_and_skips_absent_ones() {
    let (store, mut handle) = store();
    let server = tokio::spawn(async move {
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        assert_eq!(
            req.uri().to_string(),
            "/api/v1/namespaces/ns/configmaps/r1-report"
        );
        send.send_response(ok_json(&serde_json::json!({
            "apiVersion":"v1","kind":"ConfigMap","metadata": ours("r1-report"),
            "data":{"findings.json":"{}"},"binaryData":{"report.md.gz":"H4sIAAAAAAAA/wMAAAAAAAAAAAA="}
        })));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::PATCH);
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        // Applied without the deleted key, every other one kept.
        assert_eq!(body["data"], serde_json::json!({"findings.json": "{}"}));
        assert_eq!(body["binaryData"], serde_json::json!({}));
        send.send_response(ok_json(&body));
        // Deleting a key that is not there reads and writes nothing more.
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        send.send_response(ok_json(&body));
    });
    store.delete("report.md").await.unwrap();
    store.delete("report.md").await.unwrap();
    server.await.unwrap();
}

#[test]
fn only_a_configmap_labelled_and_controlled_by_this_run_is_its_own() {
    let cm = |meta: serde_json::Value| -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": meta})).unwrap()
    };
    assert!(is_runs_configmap(&cm(ours("r1-report")), "r1", "uid-1"));
    // A run of the same name before this one: another UID.
    assert!(!is_runs_configmap(&cm(ours("r1-report")), "r1", "uid-2"));
    let mut unlabelled = ours("r1-report");
    unlabelled["labels"] = serde_json::json!({});
    assert!(!is_runs_configmap(&cm(unlabelled), "r1", "uid-1"));
    // The label alone is anyone's to set.
    let mut labelled_only = ours("r1-report");
    labelled_only["ownerReferences"] = serde_json::json!([]);
    assert!(!is_runs_configmap(&cm(labelled_only), "r1", "uid-1"));
    // An owner that is not the controller does not make it the run's.
    let mut not_controller = ours("r1-report");
    not_controller["ownerReferences"][0]["controller"] = serde_json::json!(false);
    assert!(!is_runs_configmap(&cm(not_controller), "r1", "uid-1"));
    assert!(!is_runs_configmap(
        &cm(serde_json::json!({"name": "r1-report"})),
        "r1",
        "uid-1"
    ));
}

/// Someone's ConfigMap named like the run's report: never written, never read as the run's.
#[tokio::test]
async fn a_foreign_configmap_is_neither_written_nor_read() {
    let (store, mut handle) = store();
    let server = tokio::spawn(async move {
        let foreign = serde_json::json!({
            "apiVersion":"v1","kind":"ConfigMap",
            "metadata":{"name":"r1-report","namespace":"ns","labels":{"quarry.dev/run":"r1"}},
            "data":{"report.md":"someone else's"}
        });
        for _ in 0..3 {
            let (req, send) = handle.next_request().await.unwrap();
            assert_eq!(req.method(), http::Method::GET);
            send.send_response(ok_json(&foreign));
        }
        // Nothing but the reads.
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(200), handle.next_request())
                .await
                .is_err()
        );
    });
    let expected = not_owned_message("r1-report", "r1");
    let err = store.put("report.md", b"# mine").await.unwrap_err();
    assert!(err.to_string().contains(&expected), "{err}");
    let err = store.get("report.md").await.unwrap_err();
    assert!(err.to_string().contains(&expected), "{err}");
    assert_eq!(
        store.foreign_configmap().await.unwrap(),
        Some(expected.clone())
    );
    server.await.unwrap();
    assert!(
        expected.contains("ConfigMap \"r1-report\" already exists and is not this run's"),
        "{expected}"
    );
}

/// A ConfigMap that appears between the read and the create is not adopted: the create
/// fails and the write is refused with the same message.
#[test]
fn keys_are_sanitized() {
    assert_eq!(
        sanitize_key("researchers/0.md").unwrap(),
        "researchers__0.md"
    );
    assert!(sanitize_key("a b").is_err());
    assert!(sanitize_key("").is_err());
}
