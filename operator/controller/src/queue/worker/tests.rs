//! Unit tests of `worker`.

use super::*;
use quarry_api::ResearchProfileSpec;
use std::net::SocketAddr;

fn profile() -> ResearchProfileSpec {
    protocol::test_profile()
}

#[test]
fn standalone_tasks_name_the_first_missing_environment_variable() {
    let p = profile();
    let none = |_: &str| None;
    assert_eq!(
        missing_env_key(&p, &none),
        Some(("OPENAI_KEY".into(), "models.primary.apiKeyEnv".into()))
    );
    let model_only = |k: &str| (k == "OPENAI_KEY").then(|| "sk".to_string());
    assert_eq!(
        missing_env_key(&p, &model_only),
        Some((
            "QUARRY_SECRET_SEARCH_KEYS_BRAVE".into(),
            "search.providers[0].apiKeySecretRef".into()
        ))
    );
    let all = |_: &str| Some("v".to_string());
    assert_eq!(missing_env_key(&p, &all), None);
}

#[test]
fn the_consumer_is_the_pod_name_else_host_and_pid() {
    let pod = |k: &str| (k == "POD_NAME").then(|| "quarry-worker-7d9f-abc".to_string());
    assert_eq!(default_consumer(pod), "quarry-worker-7d9f-abc");
    let host = |k: &str| (k == "HOSTNAME").then(|| "box".to_string());
    assert_eq!(
        default_consumer(host),
        format!("box-{}", std::process::id())
    );
}

#[test]
fn flags_are_validated_with_the_setting_named() {
    let args = WorkerArgs {
        redis_url: None,
        concurrency: 2,
        visibility_timeout: "5m".into(),
        consumer: Some("w1".into()),
        listen: None,
        drain_timeout: "20s".into(),
    };
    let bind: SocketAddr = "127.0.0.1:9000".parse().unwrap();
    let err = WorkerConfig::from_args(&args, None, bind).unwrap_err();
    assert!(err.contains("--redis-url"), "{err}");
    let c = WorkerConfig::from_args(&args, Some("redis://r:6379/0".into()), bind).unwrap();
    assert_eq!(c.visibility_timeout, Duration::from_secs(300));
    assert_eq!(c.drain_timeout, Duration::from_secs(20));
    assert_eq!(c.listen, "127.0.0.1:9000");
    assert_eq!(c.consumer, "w1");
    let bad = WorkerArgs {
        visibility_timeout: "soon".into(),
        ..args
    };
    let err = WorkerConfig::from_args(&bad, Some("redis://r".into()), bind).unwrap_err();
    assert!(err.starts_with("--visibility-timeout:"), "{err}");
}

#[test]
fn a_silent_worker_is_taken_over_after_thirty_seconds_by_default() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        worker: WorkerArgs,
    }
    let args = Cli::parse_from(["worker"]).worker;
    let bind: SocketAddr = "127.0.0.1:9000".parse().unwrap();
    let c = WorkerConfig::from_args(&args, Some("redis://r:6379/0".into()), bind).unwrap();
    assert_eq!(c.visibility_timeout, Duration::from_secs(30));
    assert_eq!(
        protocol::heartbeat_interval(c.visibility_timeout),
        Duration::from_secs(10)
    );
}

/// Answers the worker's Secret reads from `secrets` (name -> data or HTTP status), checking
/// each request reads one Secret of namespace team-a.
fn secrets_api(secrets: Vec<(&'static str, Result<serde_json::Value, u16>)>) -> kube::Client {
    use http::{Request, Response};
    use kube::client::Body;
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    tokio::spawn(async move {
        while let Some((req, send)) = handle.next_request().await {
            assert_eq!(req.method(), http::Method::GET);
            let path = req.uri().path().to_string();
            let name = path
                .strip_prefix("/api/v1/namespaces/team-a/secrets/")
                .unwrap_or_else(|| panic!("unexpected request {path}"));
            let (status, body) = match secrets.iter().find(|(n, _)| *n == name) {
                // A whole Secret is served as it is (one that did not opt in).
                Some((_, Ok(secret))) if secret.get("metadata").is_some() => (200, secret.clone()),
                Some((_, Ok(data))) => (
                    200,
                    serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "team-a", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "api.example.com,api.search.brave.com"}}, "data": data}),
                ),
                Some((_, Err(code))) => (
                    *code,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": format!("secrets \"{name}\" is forbidden"), "reason": "Forbidden", "code": code}),
                ),
                None => (
                    404,
                    serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "not found", "reason": "NotFound", "code": 404}),
                ),
            };
            send.send_response(
                Response::builder()
                    .status(status)
                    .body(Body::from(serde_json::to_vec(&body).unwrap()))
                    .unwrap(),
            );
        }
    });
    kube::Client::new(service, "default")
}

#[tokio::test]
async fn in_cluster_keys_come_from_the_task_namespace_or_the_failure_says_what_to_grant() {
    let p = profile();
    // "sk-live" and "brv" in base64.
    let client = secrets_api(vec![
        (
            "model-keys",
            Ok(serde_json::json!({"openai": "c2stbGl2ZQ=="})),
        ),
        ("search-keys", Ok(serde_json::json!({"brave": "YnJ2"}))),
    ]);
    let keys = cluster_keys(&client, "team-a", "p", &p, "w1")
        .await
        .unwrap();
    let values: Vec<(&str, &str)> = keys
        .iter()
        .map(|(r, k)| (r.name.as_str(), k.expose()))
        .collect();
    assert_eq!(
        values,
        vec![("model-keys", "sk-live"), ("search-keys", "brv")]
    );

    let client = secrets_api(vec![
        (
            "model-keys",
            Ok(serde_json::json!({"openai": "c2stbGl2ZQ=="})),
        ),
        ("search-keys", Err(403)),
    ]);
    let failure = cluster_keys(&client, "team-a", "p", &p, "w1")
        .await
        .unwrap_err();
    assert_eq!(failure.reason, SECRET_UNAVAILABLE);
    assert_eq!(
        failure.message,
        "worker w1 may not read Secret \"search-keys\" in namespace \"team-a\" (ResearchProfile \"p\" search.providers[0].apiKeySecretRef): grant the worker's ServiceAccount `get` on secrets in namespace \"team-a\" (chart values workers.enabled and rbac.create; the chart grants it in each namespace of watchNamespaces, or in all when that is empty)"
    );

    let client = secrets_api(vec![(
        "model-keys",
        Ok(serde_json::json!({"other": "eA=="})),
    )]);
    let failure = cluster_keys(&client, "team-a", "p", &p, "w1")
        .await
        .unwrap_err();
    assert!(
        failure
            .message
            .starts_with("Secret \"model-keys\" in namespace \"team-a\" has no key \"openai\""),
        "{}",
        failure.message
    );
    // A worker sends no Secret that did not opt in, as the operator does not.
    let client = secrets_api(vec![(
        "model-keys",
        Ok(
            serde_json::json!({"metadata": {"name": "model-keys", "namespace": "team-a"}, "data": {"openai": "c2stbGl2ZQ=="}}),
        ),
    )]);
    let failure = cluster_keys(&client, "team-a", "p", &p, "w1")
        .await
        .unwrap_err();
    assert_eq!(failure.reason, SECRET_UNAVAILABLE);
    assert!(
        failure.message.starts_with(
            "Secret \"model-keys\" in namespace \"team-a\" (ResearchProfile \"p\" models.primary.apiKeySecretRef) has not opted in to use by Quarry, so Quarry will not send it to api.example.com."
        ),
        "{}",
        failure.message
    );
    let client = secrets_api(vec![]);
    let failure = cluster_keys(&client, "team-a", "p", &p, "w1")
        .await
        .unwrap_err();
    assert!(
        failure
            .message
            .starts_with("worker w1 found no Secret \"model-keys\""),
        "{}",
        failure.message
    );
}

#[test]
fn an_unreadable_task_still_names_its_run_when_it_can() {
    let bytes = br#"{"v": 9, "run": "abc", "taskId": 4, "round": 2, "attempt": "x1", "new": true}"#;
    let (keys, origin) = origin_hint(bytes).unwrap();
    assert_eq!(keys.results, "quarry:run:abc:results");
    assert_eq!((origin.task_id, origin.round), (4, 2));
    assert_eq!(origin.attempt, "x1");
    assert!(origin_hint(br#"{"run": "a b", "taskId": 1, "round": 1, "attempt": "x"}"#).is_none());
    assert!(origin_hint(b"garbage").is_none());
}
