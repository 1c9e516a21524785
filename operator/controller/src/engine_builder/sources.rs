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
mod tests;
