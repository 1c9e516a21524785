//! Unit tests of `worker`.

use super::*;
use quarry_api::ResearchProfileSpec;
use std::net::SocketAddr;

use crate::engine_builder::ApiKey;

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
        sealing_key_file: None,
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

#[test]
fn in_cluster_keys_are_opened_from_the_task_or_the_failure_says_what_to_set() {
    let operator = SealingKey::from_material(&[b'o'; 44], "/etc/quarry/sealing/key").unwrap();
    let keys = vec![(
        SecretKeyRef {
            name: "model-keys".into(),
            key: "openai".into(),
        },
        ApiKey::new("sk-live"),
    )];
    let raw = br#"{"v":1,"run":"r","namespace":"team-a"}"#;
    let sealed = operator.seal(&keys, raw).unwrap();
    let same = SealingKey::from_material(&[b'o'; 44], "/keys/k").unwrap();
    assert_eq!(
        sealed_keys(Some(&same), Some(&sealed), raw, "team-a", "w1").unwrap(),
        keys
    );

    let wrong = SealingKey::from_material(&[b'w'; 44], "/keys/wrong").unwrap();
    let failure = sealed_keys(Some(&wrong), Some(&sealed), raw, "team-a", "w1").unwrap_err();
    assert_eq!(failure.reason, SECRET_UNAVAILABLE);
    assert_eq!(
        failure.message,
        format!(
            "worker w1 cannot open the API keys the operator sealed for this task of namespace \"team-a\": they were sealed with sealing key {}, but this worker's key (QUARRY_SEALING_KEY_FILE=/keys/wrong) is {}; set QUARRY_SEALING_KEY_FILE to a file holding the operator's sealing key (with the chart, the operator and workers mount the same Secret, workers.sealingKey.existingSecret if set)",
            operator.id(),
            wrong.id()
        )
    );

    let failure = sealed_keys(None, Some(&sealed), raw, "team-a", "w1").unwrap_err();
    assert_eq!(failure.reason, SECRET_UNAVAILABLE);
    assert!(
        failure.message.ends_with(
            "it has no sealing key; set QUARRY_SEALING_KEY_FILE (or --sealing-key-file) to a file holding the operator's sealing key (the chart mounts its Secret in the operator and worker Pods with workers.enabled)"
        ),
        "{}",
        failure.message
    );
    let failure = sealed_keys(Some(&same), None, raw, "team-a", "w1").unwrap_err();
    assert!(
        failure.message.contains("got no sealed API keys"),
        "{}",
        failure.message
    );
    // A task changed in Redis (here: another namespace) does not get the keys.
    let changed = br#"{"v":1,"run":"r","namespace":"team-b"}"#;
    let failure = sealed_keys(Some(&same), Some(&sealed), changed, "team-b", "w1").unwrap_err();
    assert_eq!(failure.reason, SECRET_UNAVAILABLE);
    assert!(
        failure.message.ends_with(
            "the sealed keys do not match their task: the task or its keys were changed after the operator sealed them"
        ),
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
