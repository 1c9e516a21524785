//! Unit tests of `object`.

use super::*;

fn layout(prefix: Option<&str>) -> RunLayout {
    RunLayout {
        prefix: prefix.map(str::to_string),
        namespace: "team-a".into(),
        run: "vacuum".into(),
        uid: "0f1e2d3c-uid".into(),
        query: "What does VACUUM FULL lock?".into(),
    }
}

#[test]
fn urls_name_the_kind_of_store_and_the_prefix() {
    let (kind, _, root) = parse_url("s3://reports/quarry/runs").unwrap();
    assert_eq!((kind, root.as_ref()), (StoreKind::S3, "quarry/runs"));
    let (kind, _, root) = parse_url("gs://bucket").unwrap();
    assert_eq!((kind, root.as_ref()), (StoreKind::Gcs, ""));
    let (kind, _, root) = parse_url("az://container/p").unwrap();
    assert_eq!((kind, root.as_ref()), (StoreKind::Azure, "p"));
    assert!(parse_url("file:///tmp/x").is_err());
    assert!(parse_url("ftp://host/x").is_err());
    assert!(parse_url("not a url").is_err());
}

#[test]
fn layout_follows_prefix_namespace_run_and_seed_000_naming() {
    let root = Path::from("quarry");
    let l = layout(Some("team/reports/"));
    assert_eq!(l.dir(&root).as_ref(), "quarry/team/reports/team-a/vacuum");
    assert_eq!(layout(None).dir(&Path::ROOT).as_ref(), "team-a/vacuum");
    let name = l.report_name();
    assert!(
        regex::Regex::new(r"^what-does-vacuum-full-lock-[a-z][0-9]\.md$")
            .unwrap()
            .is_match(&name),
        "{name}"
    );
    // Derived from the UID: the same run always gets the same name, another run another one
    // (for these two UIDs).
    assert_eq!(name, layout(None).report_name());
    let other = RunLayout {
        uid: "another-uid".into(),
        ..layout(None)
    };
    assert_ne!(other.report_name(), name);
    assert_eq!(object_name("report.md", &name), name);
    assert_eq!(object_name("researchers/0.md", &name), "researchers__0.md");
    assert_eq!(object_name("checkpoint.json", &name), "checkpoint.json");
}

#[test]
fn a_run_prefix_cannot_climb_out_of_the_bucket_prefix() {
    let dir = layout(Some("../../other")).dir(&Path::from("quarry"));
    assert!(dir.as_ref().starts_with("quarry/"), "{dir}");
    assert!(!dir.parts().any(|p| p.as_ref() == ".."), "{dir}");
}

#[test]
fn unknown_secret_keys_are_named() {
    assert_eq!(
        check_options(
            StoreKind::S3,
            ["aws_access_key_id", "AWS_SECRET_ACCESS_KEY"]
        ),
        Ok(())
    );
    assert_eq!(
        check_options(StoreKind::S3, ["aws_access_key_id", "aws_secret_key"]),
        Err("aws_secret_key".to_string())
    );
    assert_eq!(
        check_options(StoreKind::Gcs, ["google_service_account_key"]),
        Ok(())
    );
    assert!(check_options(StoreKind::Azure, ["aws_access_key_id"]).is_err());
}

fn config(url: &str, options: &[(&str, &str)]) -> ObjectStoreConfig {
    ObjectStoreConfig {
        url: url.into(),
        endpoint: Some("http://127.0.0.1:9".into()),
        region: Some("us-east-1".into()),
        allow_http: true,
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), SecretValue::new(*v)))
            .collect(),
        from_env: false,
        origin: "ResearchProfile \"p\" spec.objectStore".into(),
    }
}

#[test]
fn connect_validates_url_and_keys_and_never_prints_values() {
    let err =
        Bucket::connect(&config("s3://b/p", &[("aws_secret_key", "hunter2-secret")])).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(
            "credentials Secret key \"aws_secret_key\" is not an option of the s3 object store"
        ) && text.contains("aws_secret_access_key")
            && !text.contains("hunter2"),
        "{text}"
    );
    let err = Bucket::connect(&config("http://example.com/x", &[])).unwrap_err();
    assert!(matches!(err, ObjectStoreError::InvalidUrl { .. }), "{err}");
    let bucket = Bucket::connect(&config(
        "s3://reports/quarry",
        &[
            ("aws_access_key_id", "AKIDEXAMPLE"),
            ("aws_secret_access_key", "hunter2-secret"),
        ],
    ))
    .unwrap();
    assert!(!format!("{bucket:?}").contains("hunter2"));
    assert!(!format!("{:?}", config("s3://b", &[("k", "hunter2-secret")])).contains("hunter2"));
    let store = bucket.for_run(&layout(None));
    assert_eq!(store.dir_url(), "s3://reports/quarry/team-a/vacuum/");
    assert_eq!(
        store.url_of("checkpoint.json"),
        "s3://reports/quarry/team-a/vacuum/checkpoint.json"
    );
}

#[test]
fn errors_are_reduced_to_code_and_message_without_secrets() {
    let e = object_store::Error::PermissionDenied {
            path: "x".into(),
            source: "Error performing GET http://127.0.0.1:1/b?list-type=2 in 12.5ms - Server returned non-2xx status code: 403 Forbidden: <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code><Message>The signature does not match</Message><AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><RequestId>abc</RequestId></Error>".into(),
        };
    assert_eq!(
        describe_error(&e, &[]),
        "access denied: SignatureDoesNotMatch: The signature does not match"
    );
    let e = object_store::Error::Generic {
            store: "S3",
            source: "Error performing PUT http://127.0.0.1:1/b/k in 3.2ms - connection refused with hunter2-secret".into(),
        };
    let text = describe_error(&e, &["hunter2-secret".to_string()]);
    assert!(
        !text.contains("hunter2") && !text.contains("3.2ms"),
        "{text}"
    );
    assert!(text.contains("connection refused"), "{text}");
}
