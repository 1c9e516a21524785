//! Unit tests of `searx`.

use super::*;

#[test]
fn query_str_builds_urls_from_the_docs_base_and_escapes_quotes() {
    let sql = query_str("http://127.0.0.1:4321/");
    assert!(sql.starts_with("SELECT 'http://127.0.0.1:4321/' || path AS url, title, "));
    assert!(sql.contains("WHERE docs MATCH"));
    assert!(sql.ends_with("ORDER BY bm25(docs, 0.0, 10.0, 1.0)"));
    assert!(!sql.contains("LIMIT"), "searx appends LIMIT/OFFSET itself");
    let odd = query_str("http://h/it's");
    assert!(odd.starts_with("SELECT 'http://h/it''s/' || path"));
}

#[test]
fn settings_hold_one_offline_sqlite_engine_on_loopback() {
    let s = settings(
        4242,
        "secret",
        Path::new("/tmp/i.sqlite"),
        "http://127.0.0.1:9",
    );
    assert_eq!(s["server"]["bind_address"], "127.0.0.1");
    assert_eq!(s["server"]["port"], 4242);
    assert_eq!(s["server"]["secret_key"], "secret");
    assert_eq!(s["search"]["autocomplete"], "");
    let engines = s["engines"].as_array().unwrap();
    assert_eq!(engines.len(), 1);
    assert_eq!(engines[0]["engine"], "sqlite");
    assert_eq!(engines[0]["result_template"], "default.html");
    assert_eq!(engines[0]["database"], "/tmp/i.sqlite");
    assert_eq!(engines[0]["query_str"], query_str("http://127.0.0.1:9"));
}

#[tokio::test]
async fn a_missing_index_is_reported_with_the_install_hint() {
    let err = SearxInstance::start(Path::new("/nonexistent/docs-index.sqlite"), "http://x")
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, SearxError::Missing { .. }), "{err:?}");
    assert!(
        message.contains("docs index /nonexistent/docs-index.sqlite"),
        "{message}"
    );
    assert!(
        message.ends_with("run scripts/install-test-deps.sh"),
        "{message}"
    );
}

#[test]
fn default_index_is_under_the_repo_work_dir() {
    // Only meaningful when the environment does not override it.
    if std::env::var_os("QUARRY_DOCS_INDEX").is_none()
        && std::env::var_os("QUARRY_WORK_DIR").is_none()
    {
        let expected = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .join(".work/docs-index.sqlite");
        assert_eq!(default_index_path(), expected);
    }
}
