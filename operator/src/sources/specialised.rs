//! The specialised sources a researcher may call besides web search (seed 000's
//! `security_search` and `stackexchange` tools), behind two small ports so the engine runs
//! against doubles in tests.

use std::sync::Arc;

use async_trait::async_trait;

use super::http::Secret;
use super::security::{SecurityConfig, SecurityQuery, SecuritySearch};
use super::stackexchange::{StackExchange, StackExchangeConfig};
use super::{SearchHit, SourceError};
use crate::api::{SecretKeyRef, SourcesSpec};

/// What a specialised tool call returns: hits for the researcher's URL pool (readable and
/// citable like search hits) and the text the model reads, already truncated (seed 002).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolAnswer {
    /// Results the researcher may read and cite.
    pub hits: Vec<SearchHit>,
    /// What the model reads, within 50 KB / 2000 lines.
    pub text: String,
}

/// The port behind the `security_search` tool.
#[async_trait]
pub trait SecurityLookup: Send + Sync {
    /// Looks a vulnerability, package or topic up in the advisory sources. Never fails as a
    /// whole: a source that fails is reported in the text while the others' results stand.
    async fn lookup(&self, query: &SecurityQuery) -> ToolAnswer;
}

/// The port behind the `stackexchange` tool.
#[async_trait]
pub trait QuestionSearch: Send + Sync {
    /// Searches questions on `site` (the configured default when `None`).
    async fn questions(&self, query: &str, site: Option<&str>) -> Result<ToolAnswer, SourceError>;
}

/// The specialised sources offered to researchers; a `None` source's tool is not offered.
#[derive(Clone, Default)]
pub struct SpecialisedSources {
    /// Behind `security_search`.
    pub security: Option<Arc<dyn SecurityLookup>>,
    /// Behind `stackexchange`.
    pub stackexchange: Option<Arc<dyn QuestionSearch>>,
}

impl std::fmt::Debug for SpecialisedSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpecialisedSources")
            .field("security", &self.security.is_some())
            .field("stackexchange", &self.stackexchange.is_some())
            .finish()
    }
}

impl SpecialisedSources {
    /// Builds the sources of a profile's `search.sources` block. An absent block or source
    /// means enabled with the public endpoints; `enabled: false` leaves it out. `key` resolves
    /// Secret references; a referenced key that is missing is an error naming the Secret.
    pub fn from_spec(
        spec: Option<&SourcesSpec>,
        key: &dyn Fn(&SecretKeyRef) -> Option<String>,
    ) -> Result<Self, SourceError> {
        let resolve =
            |what: &str, r: &Option<SecretKeyRef>| -> Result<Option<Secret>, SourceError> {
                match r {
                    None => Ok(None),
                    Some(r) => key(r)
                        .filter(|v| !v.trim().is_empty())
                        .map(|v| Some(Secret::new(v)))
                        .ok_or_else(|| {
                            SourceError::Config(format!(
                                "{what}: key {:?} of Secret {:?} is missing or empty",
                                r.key, r.name
                            ))
                        }),
                }
            };
        let security_spec = spec.and_then(|s| s.security.clone()).unwrap_or_default();
        let security: Option<Arc<dyn SecurityLookup>> = if security_spec.enabled {
            let config = SecurityConfig {
                osv_base_url: security_spec.osv_base_url.clone(),
                nvd_base_url: security_spec.nvd_base_url.clone(),
                nvd_api_key: resolve("NVD API key", &security_spec.nvd_api_key_secret_ref)?,
                kev_url: security_spec.kev_url.clone(),
                github_base_url: security_spec.github_base_url.clone(),
                github_token: resolve("GitHub token", &security_spec.github_token_secret_ref)?,
                ..SecurityConfig::default()
            };
            Some(Arc::new(SecuritySearch::new(config)?))
        } else {
            None
        };
        let se_spec = spec
            .and_then(|s| s.stack_exchange.clone())
            .unwrap_or_default();
        let stackexchange: Option<Arc<dyn QuestionSearch>> = if se_spec.enabled {
            let config = StackExchangeConfig {
                base_url: se_spec.base_url.clone(),
                default_site: se_spec.default_site.clone(),
                key: resolve("Stack Exchange key", &se_spec.key_secret_ref)?,
                ..StackExchangeConfig::default()
            };
            Some(Arc::new(StackExchange::new(config)?))
        } else {
            None
        };
        Ok(Self {
            security,
            stackexchange,
        })
    }

    /// Keeps only the sources a run asked for (its `spec.sources`).
    pub fn only(mut self, security: bool, stackexchange: bool) -> Self {
        if !security {
            self.security = None;
        }
        if !stackexchange {
            self.stackexchange = None;
        }
        self
    }

    /// True when no specialised tool would be offered.
    pub fn is_empty(&self) -> bool {
        self.security.is_none() && self.stackexchange.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_spec_defaults_disables_and_checks_keys() {
        let none = |_: &SecretKeyRef| None;
        let all = SpecialisedSources::from_spec(None, &none).unwrap();
        assert!(all.security.is_some() && all.stackexchange.is_some());
        assert!(all.clone().only(false, false).is_empty());
        assert!(all.only(true, false).stackexchange.is_none());

        let spec: SourcesSpec = serde_yaml::from_str(
            "security: {enabled: false}\nstackExchange: {defaultSite: serverfault, keySecretRef: {name: se, key: key}}\n",
        )
        .unwrap();
        let err = SpecialisedSources::from_spec(Some(&spec), &none).unwrap_err();
        assert!(err.to_string().contains("\"se\""), "{err}");
        let key = |_: &SecretKeyRef| Some("k".to_string());
        let built = SpecialisedSources::from_spec(Some(&spec), &key).unwrap();
        assert!(built.security.is_none() && built.stackexchange.is_some());
        assert_eq!(
            format!("{built:?}"),
            "SpecialisedSources { security: false, stackexchange: true }"
        );
    }
}
