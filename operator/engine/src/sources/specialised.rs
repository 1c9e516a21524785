//! The specialised sources a researcher may call besides web search (the
//! `security_search` and `stackexchange` tools), behind two small ports so the engine runs
//! against doubles in tests.

use std::sync::Arc;

use async_trait::async_trait;

use super::{SearchHit, SourceError};

/// The arguments of one `security_search` call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityQuery {
    /// A CVE id or free text (product, vulnerability class).
    pub query: String,
    /// Package name, for OSV and GitHub's `affects`.
    pub package: Option<String>,
    /// Package ecosystem in OSV (`PyPI`, `crates.io`) or GitHub (`pip`, `rust`) spelling.
    pub ecosystem: Option<String>,
    /// Package version, or a commit hash (40 hex digits) for OSV.
    pub version: Option<String>,
}

impl SecurityQuery {
    /// A free-text or CVE query without package details.
    pub fn text(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }
}

/// What a specialised tool call returns: hits for the researcher's URL pool (readable and
/// citable like search hits) and the text the model reads, already truncated.
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
    /// The sources given; `None` leaves a source out.
    pub fn new(
        security: Option<Arc<dyn SecurityLookup>>,
        stackexchange: Option<Arc<dyn QuestionSearch>>,
    ) -> Self {
        Self {
            security,
            stackexchange,
        }
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
mod tests;
