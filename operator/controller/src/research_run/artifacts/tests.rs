//! Unit tests of `artifacts`.

use super::*;
use http::{Request, Response};
use kube::client::Body;
use serde_json::json;

fn respond(value: &serde_json::Value) -> Response<Body> {
    Response::builder()
        .body(Body::from(serde_json::to_vec(value).unwrap()))
        .unwrap()
}

fn run(metadata: serde_json::Value) -> serde_json::Value {
    let mut meta = json!({"name": "r1", "namespace": "ns", "uid": "u1", "resourceVersion": "3"});
    for (k, v) in metadata.as_object().cloned().unwrap_or_default() {
        meta[k] = v;
    }
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": meta,
               "spec": {"query": "what is CEL?"}})
}

#[tokio::test]
async fn the_guard_adds_the_finalizer_once_with_a_tested_json_patch() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let guard = FinalizerGuard::new(
        Client::new(service, "ns"),
        "ns",
        "r1",
        Some("s3://b/quarry/ns/r1/".into()),
    );
    let server = tokio::spawn(async move {
        let path = "/apis/quarry.dev/v1alpha1/namespaces/ns/researchruns/r1";
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!((req.method().as_str(), req.uri().path()), ("GET", path));
        send.send_response(respond(&run(json!({"finalizers": ["other.io/keep"]}))));
        // Where the objects go is recorded first, so a cleanup that cannot reach them can
        // still name them.
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!((req.method().as_str(), req.uri().path()), ("PATCH", path));
        assert_eq!(
            req.headers().get("content-type").unwrap(),
            "application/merge-patch+json"
        );
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"metadata": {"annotations": {"quarry.dev/artifacts-location": "s3://b/quarry/ns/r1/"}}})
        );
        send.send_response(respond(&run(json!({"finalizers": ["other.io/keep"]}))));
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::PATCH);
        assert_eq!(req.uri().to_string(), format!("{path}?"));
        assert_eq!(
            req.headers().get("content-type").unwrap(),
            "application/json-patch+json"
        );
        let body: serde_json::Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        // Another controller's finalizer is kept: the list is tested, ours appended.
        assert_eq!(
            body,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["other.io/keep"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "quarry.dev/artifacts"}
            ])
        );
        send.send_response(respond(&run(
            json!({"finalizers": ["other.io/keep", "quarry.dev/artifacts"]}),
        )));
        // A run that already carries it: one read, no patch.
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        send.send_response(respond(&run(
            json!({"finalizers": ["quarry.dev/artifacts"]}),
        )));
        // A run being deleted: no object may be written any more.
        let (req, send) = handle.next_request().await.unwrap();
        assert_eq!(req.method(), http::Method::GET);
        send.send_response(respond(&run(
            json!({"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["other.io/keep"]}),
        )));
    });
    guard.ensure().await.unwrap();
    guard.ensure().await.unwrap();
    let err = guard.ensure().await.unwrap_err();
    assert!(err.to_string().contains("is being deleted"), "{err}");
    server.await.unwrap();
}

#[test]
fn objects_left_behind_are_named_by_what_the_run_recorded() {
    let mut value = run(json!({}));
    value["spec"]["profileRef"] = json!("s3");
    value["spec"]["report"] = json!({"kind": "objectStore", "prefix": "/teams/"});
    let bare: ResearchRun = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(
        recorded_location(&bare),
        "teams/ns/r1/ in the object store of ResearchProfile \"s3\""
    );
    value["status"] = json!({"report": {"objectUrl": "s3://b/teams/ns/r1/report-u1.md"}});
    let reported: ResearchRun = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(recorded_location(&reported), "s3://b/teams/ns/r1/");
    value["metadata"]["annotations"] =
        json!({"quarry.dev/artifacts-location": "s3://b/teams/ns/r1/"});
    let annotated: ResearchRun = serde_json::from_value(value).unwrap();
    assert_eq!(
        left_message(&annotated, "Secret \"s3-creds\" not found"),
        "the objects of ResearchRun ns/r1 under s3://b/teams/ns/r1/ were left in place: its namespace is being deleted and Secret \"s3-creds\" not found; the finalizer quarry.dev/artifacts was removed so the namespace can go. Delete them with the object store's own tools"
    );
}

#[test]
fn a_profile_object_store_becomes_a_config_with_secret_options() {
    let spec: ObjectStoreSpec = serde_json::from_value(json!({
        "url": "s3://reports/quarry", "endpoint": "http://minio:9000", "allowHttp": true,
        "credentialsSecretRef": {"name": "s3"}
    }))
    .unwrap();
    let mut data = BTreeMap::new();
    data.insert(
        "AWS_ACCESS_KEY_ID".to_string(),
        ByteString(b"AKID".to_vec()),
    );
    data.insert(
        "aws_secret_access_key".to_string(),
        ByteString(b"hunter2\n".to_vec()),
    );
    let config = object_store_config(&spec, Some(&data), "p").unwrap();
    assert_eq!(config.url, "s3://reports/quarry");
    assert_eq!(config.endpoint.as_deref(), Some("http://minio:9000"));
    assert!(config.allow_http && !config.from_env);
    assert_eq!(
        config
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.expose()))
            .collect::<Vec<_>>(),
        vec![
            ("aws_access_key_id", "AKID"),
            ("aws_secret_access_key", "hunter2")
        ]
    );
    assert_eq!(config.origin, "ResearchProfile \"p\" objectStore");
    data.insert("token".to_string(), ByteString(b"x".to_vec()));
    data.insert("aws_secret_key".to_string(), ByteString(b"x".to_vec()));
    let stall = object_store_config(&spec, Some(&data), "p").unwrap_err();
    assert_eq!(stall.reason, reasons::OBJECT_STORE_INVALID);
    assert!(
        stall.message.contains("key \"aws_secret_key\""),
        "{}",
        stall.message
    );
    let bad_url: ObjectStoreSpec = serde_json::from_value(json!({"url": "s3://"})).unwrap();
    assert_eq!(
        object_store_config(&bad_url, None, "p").unwrap_err().reason,
        reasons::OBJECT_STORE_INVALID
    );
}

#[test]
fn probe_failures_map_to_reasons_that_say_what_to_fix() {
    let config = ObjectStoreConfig::from_env("s3://b", "the operator's --object-store-url");
    let denied = probe_stall(
        &config,
        &ObjectStoreError::AccessDenied {
            url: "s3://b/ns/r/".into(),
            message: "access denied: InvalidAccessKeyId".into(),
        },
    );
    assert_eq!(denied.reason, reasons::OBJECT_STORE_ACCESS_DENIED);
    assert_eq!(
        denied.message,
        "the object store at s3://b/ns/r/ refused the credentials of the operator's --object-store-url: access denied: InvalidAccessKeyId; fix the credentials in the operator's environment (AWS_*, GOOGLE_*, AZURE_*) and the run starts"
    );
    let missing = probe_stall(
        &config,
        &ObjectStoreError::BucketNotFound {
            url: "s3://b/ns/r/".into(),
            message: "not found: NoSuchBucket".into(),
        },
    );
    assert_eq!(missing.reason, reasons::OBJECT_STORE_UNAVAILABLE);
    assert!(missing.message.contains("does not exist"));
}
