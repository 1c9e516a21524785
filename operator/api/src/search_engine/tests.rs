//! Unit tests of `search_engine`.

use super::*;

#[test]
fn a_bare_manifest_gets_the_defaults() {
    let spec: SearchEngineSpec = serde_yaml::from_str("{}").unwrap();
    assert_eq!(spec.image, DEFAULT_SEARXNG_IMAGE);
    assert_eq!(spec.replicas, 1);
    assert_eq!(spec.idle_timeout, "10m");
    assert!(spec.engines.is_empty());
    assert_eq!(
        SearchEngine::service_url("default", "research"),
        "http://default-searxng.research.svc:8080"
    );
}
