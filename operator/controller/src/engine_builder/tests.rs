//! Unit tests of `engine_builder`.

use super::*;
use quarry_api::ResearchProfile;

const PROFILE: &str = r#"
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata: {name: local}
spec:
  models:
    primary: {baseURL: "http://127.0.0.1:8080/v1/", model: qwen, toolMode: jsonAction, timeoutSeconds: 600, contextWindow: 8192, maxOutputTokens: 512}
  prices:
    - {model: qwen, inputUSDPerMillion: "0.10", outputUSDPerMillion: "0.40"}
  search: {url: "http://127.0.0.1:8888"}
  fetch: {allowedHosts: ["127.0.0.1"], pageCharsForModel: 3000, maxPageBytes: 1048576}
"#;

#[tokio::test]
async fn a_profiles_allowed_hosts_cannot_re_allow_what_the_guard_refuses() {
    let yaml = PROFILE.replace(
            r#"allowedHosts: ["127.0.0.1"]"#,
            r#"allowedHosts: ["169.254.169.254", "kubernetes.default.svc", "127.0.0.1", "10.0.0.1", "ollama.models.svc"]"#,
        );
    let p = ResearchProfile::from_yaml(&yaml).unwrap();
    // No exemption at operator level: the profile's list lifts nothing.
    let strict = fetch_policy_under(&p.spec, Some(&EgressPolicy::default()));
    assert!(
        strict.allowed_hosts.is_empty(),
        "{:?}",
        strict.allowed_hosts
    );
    let fetcher = HttpFetcher::new(strict).unwrap();
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "https://kubernetes.default.svc/api",
        "http://127.0.0.1:9/",
        "http://10.0.0.1/",
    ] {
        match fetcher.fetch_document(url).await {
            Err(quarry_engine::scrape::FetchError::Refused { reason, .. }) => {
                assert!(!reason.is_empty(), "{url}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    // The operator exempts an in-cluster model server: the profile may keep that exemption
    // for pages, and still not add the others.
    let operator = EgressPolicy::new(["ollama.models.svc"]);
    let narrowed = fetch_policy_under(&p.spec, Some(&operator));
    assert_eq!(
        narrowed.allowed_hosts,
        vec!["ollama.models.svc".to_string()]
    );
}

#[test]
fn profile_settings_reach_the_engine_parts() {
    let p = ResearchProfile::from_yaml(PROFILE).unwrap();
    let m = model_config(&p.spec, &p.spec.models.primary, Some("k".into())).unwrap();
    assert_eq!(m.base_url, "http://127.0.0.1:8080/v1");
    assert_eq!(m.tool_mode, ToolMode::JsonAction);
    assert_eq!(m.timeout, Duration::from_secs(600));
    assert_eq!(m.price, Price::parse("0.10", "0.40").unwrap());
    let f = fetch_policy(&p.spec);
    assert_eq!(f.allowed_hosts, vec!["127.0.0.1".to_string()]);
    assert_eq!(f.max_bytes, 1_048_576);
    assert!(f.respect_robots);
    assert_eq!(f.per_host_concurrency, 2);
    assert_eq!(f.politeness_delay, Duration::from_millis(500));
    let s = engine_settings(&p.spec);
    assert_eq!(s.researcher.page_chars, 3000);
    assert_eq!(s.researcher.max_output_tokens, 512);
    assert!(gatherer(&p.spec).is_ok());
}

#[test]
fn cost_limits_convert_exactly() {
    let eff = quarry_api::RunLimits {
        max_cost_usd: Some("0.25".into()),
        timeout: Some("2m".into()),
        ..Default::default()
    }
    .effective()
    .unwrap();
    let l = limits(&eff);
    assert_eq!(l.max_cost_pico_usd, Some(250_000_000_000));
    assert_eq!(l.timeout_secs, Some(120));
    assert_eq!(l.max_rounds, 3);
}
