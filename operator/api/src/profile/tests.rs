//! Unit tests of `profile`.

use super::*;

const LOCAL: &str = r#"
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: local
spec:
  models:
    primary:
      baseURL: http://127.0.0.1:8080/v1
      model: qwen2.5-coder-0.5b-instruct
      toolMode: jsonAction
      temperature: 0
  search:
    url: http://127.0.0.1:8888
  fetch:
    allowedHosts: ["127.0.0.1"]
"#;

#[test]
fn plain_yaml_profile_gets_defaults() {
    let p = ResearchProfile::from_yaml(LOCAL).unwrap();
    let t = &p.spec.models.primary;
    assert_eq!(t.provider, Provider::Openai);
    assert_eq!(t.tool_mode, ToolMode::JsonAction);
    assert_eq!(t.timeout_seconds, 120);
    assert_eq!(t.context_window, 8192);
    assert_eq!(t.temperature, Some(0.0));
    assert!(t.stream);
    assert!(!t.json_mode);
    assert_eq!(t.api_key_secret_ref, None);
    assert_eq!(
        p.spec.fetch,
        FetchPolicy {
            allowed_hosts: vec!["127.0.0.1".into()],
            allowed_domains: vec![],
            denied_domains: vec![],
            respect_robots: true,
            per_host_concurrency: 2,
            politeness_delay_millis: 500,
            max_page_bytes: 2 * 1024 * 1024,
            page_chars_for_model: 6000,
        }
    );
    assert_eq!(
        p.spec.search_target(),
        SearchTarget::Url("http://127.0.0.1:8888")
    );
    assert_eq!(
        p.spec.models.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        vec![TierName::Primary]
    );
}

#[test]
fn wrong_kind_is_rejected() {
    let text = LOCAL.replace("kind: ResearchProfile", "kind: ResearchRun");
    match ResearchProfile::from_yaml(&text) {
        Err(ApiError::WrongKind { expected, found }) => {
            assert_eq!(expected, "quarry.dev/v1alpha1/ResearchProfile");
            assert_eq!(found, "quarry.dev/v1alpha1/ResearchRun");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(matches!(
        ResearchProfile::from_yaml("spec: ["),
        Err(ApiError::Yaml(_))
    ));
}

#[test]
fn search_defaults_to_default_engine_and_prices_parse() {
    let spec: ResearchProfileSpec = serde_yaml::from_str(
            "models:\n  primary: {baseURL: 'https://api.openai.com/v1', model: gpt-4o-mini,\n    apiKeySecretRef: {name: openai, key: apiKey}}\n  budget: {baseURL: 'https://api.openai.com/v1', model: gpt-4.1-nano}\n\
             prices:\n- {model: gpt-4o-mini, inputUSDPerMillion: '0.15', outputUSDPerMillion: '0.60'}\n",
        )
        .unwrap();
    assert_eq!(spec.search_target(), SearchTarget::Engine("default"));
    assert_eq!(
        spec.price_for("gpt-4o-mini")
            .unwrap()
            .micro_usd_per_million()
            .unwrap(),
        (150_000, 600_000)
    );
    assert!(spec.price_for("gpt-4.1-nano").is_none());
    assert_eq!(
        spec.models
            .iter()
            .map(|(n, t)| (n.as_str(), t.model.as_str()))
            .collect::<Vec<_>>(),
        vec![("primary", "gpt-4o-mini"), ("budget", "gpt-4.1-nano")]
    );
    assert_eq!(
        spec.models.primary.api_key_secret_ref,
        Some(SecretKeyRef {
            name: "openai".into(),
            key: "apiKey".into()
        })
    );
}
