//! Unit tests of `sources`.

use super::*;
use quarry_engine::sources::providers::build_providers;

#[test]
fn providers_are_built_in_order_and_missing_keys_name_the_secret() {
    let spec: Vec<SearchProvider> = serde_yaml::from_str(
            "- {kind: tavily, apiKeySecretRef: {name: search-keys, key: tavily}, requestsPerMinute: 30}\n\
             - {kind: brave, apiKeySecretRef: {name: search-keys, key: brave}, baseURL: 'http://127.0.0.1:9/'}\n\
             - {kind: serper, apiKeySecretRef: {name: search-keys, key: serper}}\n",
        )
        .unwrap();
    let all = |r: &SecretKeyRef| Some(format!("key-{}", r.key));
    let configs = provider_configs(&spec, &all).unwrap();
    assert_eq!(configs[0].1.requests_per_minute, Some(30));
    assert_eq!(
        configs[1].1.base_url.as_deref(),
        Some("http://127.0.0.1:9/")
    );
    let built = build_providers(configs).unwrap();
    assert_eq!(
        built.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["tavily", "brave", "serper"]
    );
    let none = |r: &SecretKeyRef| (r.key != "brave").then(|| "k".to_string());
    let msg = provider_configs(&spec, &none).unwrap_err().to_string();
    assert!(
        msg.contains("brave") && msg.contains("search-keys"),
        "{msg}"
    );
    assert!(provider_configs(&[], &none).unwrap().is_empty());
}

#[test]
fn specialised_sources_default_disable_and_check_keys() {
    let none = |_: &SecretKeyRef| None;
    let all = specialised_sources(None, &none).unwrap();
    assert_eq!(
        format!("{all:?}"),
        "SpecialisedSources { security: true, stackexchange: true }"
    );
    let spec: SourcesSpec = serde_yaml::from_str(
            "security: {enabled: false}\nstackExchange: {defaultSite: serverfault, keySecretRef: {name: se, key: key}}\n",
        )
        .unwrap();
    let err = specialised_sources(Some(&spec), &none).unwrap_err();
    assert!(err.to_string().contains("\"se\""), "{err}");
    let key = |_: &SecretKeyRef| Some("k".to_string());
    let built = specialised_sources(Some(&spec), &key).unwrap();
    assert_eq!(
        format!("{built:?}"),
        "SpecialisedSources { security: false, stackexchange: true }"
    );
}

#[test]
fn secret_env_vars_are_upper_case_with_underscores() {
    let r = SecretKeyRef {
        name: "search-keys".into(),
        key: "brave.key".into(),
    };
    assert_eq!(secret_env_var(&r), "QUARRY_SECRET_SEARCH_KEYS_BRAVE_KEY");
}
