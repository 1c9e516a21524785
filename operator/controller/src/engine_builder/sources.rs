//! A profile's search providers and specialised sources as engine configurations: Secret
//! references resolved to keys, a missing key an error that names the Secret.

use quarry_api::{SearchProvider, SearchProviderKind, SecretKeyRef, SourcesSpec};
use quarry_engine::sources::SourceError;
use quarry_engine::sources::http::Secret;
use quarry_engine::sources::providers::{ProviderConfig, ProviderKind};
use std::sync::Arc;

use quarry_engine::sources::security::{SecurityConfig, SecuritySearch};
use quarry_engine::sources::specialised::{QuestionSearch, SecurityLookup, SpecialisedSources};
use quarry_engine::sources::stackexchange::{StackExchange, StackExchangeConfig};

/// Resolves a Secret reference to its value (the caller reads Secrets or the environment).
pub type SecretResolver<'a> = &'a dyn Fn(&SecretKeyRef) -> Option<String>;

/// The environment variable standing in for a Secret key outside a cluster (search provider and
/// source keys): `QUARRY_SECRET_<NAME>_<KEY>`, upper-cased, other characters as `_`.
pub fn secret_env_var(r: &SecretKeyRef) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("QUARRY_SECRET_{}_{}", clean(&r.name), clean(&r.key))
}

fn kind(kind: SearchProviderKind) -> ProviderKind {
    match kind {
        SearchProviderKind::Brave => ProviderKind::Brave,
        SearchProviderKind::Tavily => ProviderKind::Tavily,
        SearchProviderKind::Serper => ProviderKind::Serper,
    }
}

/// The value of a referenced key, or an error naming `what` and the Secret.
fn resolve(what: &str, r: &SecretKeyRef, key: SecretResolver<'_>) -> Result<Secret, SourceError> {
    key(r)
        .filter(|v| !v.trim().is_empty())
        .map(Secret::new)
        .ok_or_else(|| {
            SourceError::Config(format!(
                "{what}: key {:?} of Secret {:?} is missing or empty",
                r.key, r.name
            ))
        })
}

/// The provider clients' configurations of a profile, in its order.
pub fn provider_configs(
    spec: &[SearchProvider],
    key: SecretResolver<'_>,
) -> Result<Vec<(ProviderKind, ProviderConfig)>, SourceError> {
    spec.iter()
        .map(|p| {
            let what = format!("search provider {}", p.kind.as_str());
            let mut config = ProviderConfig::new(resolve(&what, &p.api_key_secret_ref, key)?);
            config.base_url = p.base_url.clone();
            config.requests_per_minute = p.requests_per_minute;
            Ok((kind(p.kind), config))
        })
        .collect()
}

/// Builds the sources of a profile's `search.sources` block. An absent block or source means
/// enabled with the public endpoints; `enabled: false` leaves it out.
pub fn specialised_sources(
    spec: Option<&SourcesSpec>,
    key: SecretResolver<'_>,
) -> Result<SpecialisedSources, SourceError> {
    let optional = |what: &str, r: &Option<SecretKeyRef>| -> Result<Option<Secret>, SourceError> {
        r.as_ref().map(|r| resolve(what, r, key)).transpose()
    };
    let security_spec = spec.and_then(|s| s.security.clone()).unwrap_or_default();
    let security: Option<Arc<dyn SecurityLookup>> = if security_spec.enabled {
        Some(Arc::new(SecuritySearch::new(SecurityConfig {
            osv_base_url: security_spec.osv_base_url.clone(),
            nvd_base_url: security_spec.nvd_base_url.clone(),
            nvd_api_key: optional("NVD API key", &security_spec.nvd_api_key_secret_ref)?,
            kev_url: security_spec.kev_url.clone(),
            github_base_url: security_spec.github_base_url.clone(),
            github_token: optional("GitHub token", &security_spec.github_token_secret_ref)?,
            ..SecurityConfig::default()
        })?))
    } else {
        None
    };
    let se_spec = spec
        .and_then(|s| s.stack_exchange.clone())
        .unwrap_or_default();
    let stackexchange: Option<Arc<dyn QuestionSearch>> = if se_spec.enabled {
        Some(Arc::new(StackExchange::new(StackExchangeConfig {
            base_url: se_spec.base_url.clone(),
            default_site: se_spec.default_site.clone(),
            key: optional("Stack Exchange key", &se_spec.key_secret_ref)?,
            ..StackExchangeConfig::default()
        })?))
    } else {
        None
    };
    Ok(SpecialisedSources::new(security, stackexchange))
}

#[cfg(test)]
mod tests {
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
}
