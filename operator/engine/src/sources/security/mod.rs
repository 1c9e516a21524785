//! Security advisory sources (the researcher's `security_search` tool): OSV, NVD, CISA KEV and GitHub
//! Security Advisories, and [`SecuritySearch`], which asks the applicable ones concurrently.
//!
//! Hits point at the public advisory pages (NVD detail, osv.dev, GitHub advisory, CISA
//! catalog), whatever base URL the API was reached at, so reports cite pages people can open.

pub mod ghsa;
pub mod kev;
pub mod nvd;
pub mod osv;

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::{BoxFuture, join_all};
use regex::Regex;

use super::http::{self, Secret, clip};
pub use super::specialised::SecurityQuery;
use super::specialised::{SecurityLookup, ToolAnswer};
use super::{SearchHit, SourceError, normalize_and_dedup};
use crate::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head};

pub use ghsa::GhsaClient;
pub use kev::KevCatalog;
pub use nvd::NvdClient;
pub use osv::OsvClient;

/// Advisories kept per source and call.
pub const DEFAULT_PER_SOURCE_LIMIT: usize = 10;
/// Characters of an advisory's description shown to the model.
const DETAILS_CHARS: usize = 800;
/// Characters of an advisory's description kept as the hit's snippet.
const SNIPPET_CHARS: usize = 400;
/// References listed per advisory.
const REFERENCES_SHOWN: usize = 5;

static CVE_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bCVE-\d{4}-\d{4,}\b").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// One advisory, whatever its source, in the shape the model reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Advisory {
    /// `NVD`, `OSV`, `CISA KEV` or `GitHub`.
    pub source: &'static str,
    /// CVE, GHSA or OSV id.
    pub id: String,
    /// The public page of the advisory.
    pub url: String,
    /// One-line summary.
    pub title: String,
    /// Description (plain text).
    pub details: String,
    /// Severity as the source states it (`CVSS 3.1 9.8 CRITICAL`, `high`).
    pub severity: Option<String>,
    /// Publication date as the source writes it.
    pub published: Option<String>,
    /// Last modification date as the source writes it.
    pub modified: Option<String>,
    /// Other ids of the same vulnerability.
    pub aliases: Vec<String>,
    /// Reference URLs.
    pub references: Vec<String>,
    /// Source-specific facts worth a line each (affected ranges, fixed versions, KEV due date).
    pub facts: Vec<(String, String)>,
}

impl Advisory {
    /// The advisory as a search hit the researcher can read and cite.
    pub fn hit(&self) -> SearchHit {
        let title = if self.title.is_empty() || self.title == self.id {
            self.id.clone()
        } else {
            format!("{}: {}", self.id, self.title)
        };
        SearchHit {
            url: self.url.clone(),
            title,
            snippet: clip(&self.details, SNIPPET_CHARS),
            engine: engine_of(self.source).to_string(),
        }
    }

    fn render(&self, out: &mut String) {
        out.push_str(&format!("- {} — {}", self.id, self.url));
        if let Some(s) = &self.severity {
            out.push_str(&format!(" — severity {s}"));
        }
        if let Some(p) = &self.published {
            out.push_str(&format!(" — published {p}"));
        }
        if let Some(m) = &self.modified {
            out.push_str(&format!(", modified {m}"));
        }
        out.push('\n');
        if !self.title.is_empty() && self.title != self.id {
            out.push_str(&format!("  {}\n", self.title));
        }
        if !self.details.is_empty() && self.details != self.title {
            out.push_str(&format!("  {}\n", clip(&self.details, DETAILS_CHARS)));
        }
        if !self.aliases.is_empty() {
            out.push_str(&format!("  Aliases: {}\n", self.aliases.join(", ")));
        }
        for (k, v) in &self.facts {
            out.push_str(&format!("  {k}: {v}\n"));
        }
        if !self.references.is_empty() {
            let shown: Vec<&str> = self
                .references
                .iter()
                .take(REFERENCES_SHOWN)
                .map(String::as_str)
                .collect();
            out.push_str(&format!("  References: {}\n", shown.join(" ")));
        }
    }
}

/// The `engine` of a source's hits.
fn engine_of(source: &str) -> &'static str {
    match source {
        "NVD" => "nvd",
        "OSV" => "osv",
        "CISA KEV" => "cisa-kev",
        _ => "github-advisories",
    }
}

/// The first CVE id in `text`, upper-cased.
pub fn find_cve(text: &str) -> Option<String> {
    CVE_ID.find(text).map(|m| m.as_str().to_ascii_uppercase())
}

/// An ecosystem in OSV's and GitHub's spelling (GitHub knows fewer; `None` there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ecosystem {
    /// OSV's name (`PyPI`, `crates.io`).
    pub osv: String,
    /// GitHub's name (`pip`, `rust`), when GitHub knows the ecosystem.
    pub github: Option<&'static str>,
}

/// Maps what a model may call an ecosystem onto OSV's and GitHub's names; unknown names pass
/// through to OSV unchanged (it knows many more, e.g. `Debian`, `Alpine`).
pub fn ecosystem(name: &str) -> Ecosystem {
    const TABLE: [(&[&str], &str, &str); 12] = [
        (&["pypi", "pip", "python"], "PyPI", "pip"),
        (&["npm", "node", "nodejs", "javascript"], "npm", "npm"),
        (&["maven", "java"], "Maven", "maven"),
        (&["go", "golang"], "Go", "go"),
        (
            &["crates.io", "cargo", "rust", "crates"],
            "crates.io",
            "rust",
        ),
        (&["rubygems", "gem", "ruby"], "RubyGems", "rubygems"),
        (&["nuget", "dotnet", ".net"], "NuGet", "nuget"),
        (&["packagist", "composer", "php"], "Packagist", "composer"),
        (&["hex", "erlang", "elixir"], "Hex", "erlang"),
        (&["pub", "dart"], "Pub", "pub"),
        (&["swifturl", "swift"], "SwiftURL", "swift"),
        (&["github actions", "actions"], "GitHub Actions", "actions"),
    ];
    let key = name.trim().to_ascii_lowercase();
    TABLE
        .iter()
        .find(|(names, _, _)| names.contains(&key.as_str()))
        .map(|(_, osv, github)| Ecosystem {
            osv: (*osv).to_string(),
            github: Some(*github),
        })
        .unwrap_or_else(|| Ecosystem {
            osv: name.trim().to_string(),
            github: None,
        })
}

/// Endpoints, keys and limits of the four sources; `None` URLs mean the public ones.
#[derive(Debug, Clone)]
pub struct SecurityConfig {
    /// OSV API base.
    pub osv_base_url: Option<String>,
    /// NVD API base.
    pub nvd_base_url: Option<String>,
    /// NVD API key (50 instead of 5 requests per 30 s).
    pub nvd_api_key: Option<Secret>,
    /// CISA KEV feed URL.
    pub kev_url: Option<String>,
    /// GitHub API base.
    pub github_base_url: Option<String>,
    /// GitHub token (5000 instead of 60 requests per hour).
    pub github_token: Option<Secret>,
    /// Bound on one call of any source.
    pub timeout: Duration,
    /// How long the KEV catalog is kept before it is downloaded again.
    pub kev_ttl: Duration,
    /// Advisories kept per source and call.
    pub per_source_limit: usize,
}

impl Default for SecurityConfig {
    fn default() -> Self {
        Self {
            osv_base_url: None,
            nvd_base_url: None,
            nvd_api_key: None,
            kev_url: None,
            github_base_url: None,
            github_token: None,
            timeout: http::DEFAULT_TIMEOUT,
            kev_ttl: kev::DEFAULT_TTL,
            per_source_limit: DEFAULT_PER_SOURCE_LIMIT,
        }
    }
}

/// Asks the advisory sources that fit a query, concurrently, and merges what they say.
#[derive(Debug)]
pub struct SecuritySearch {
    /// OSV, for packages.
    pub osv: OsvClient,
    /// NVD, for CVE ids and keywords.
    pub nvd: NvdClient,
    /// CISA KEV, for CVE ids and keywords.
    pub kev: KevCatalog,
    /// GitHub advisories, for CVE ids and packages.
    pub ghsa: GhsaClient,
    per_source_limit: usize,
}

/// What one source said.
type SourceResult = (&'static str, Result<Vec<Advisory>, SourceError>);

impl SecuritySearch {
    /// Builds the four clients; fails on an invalid base URL.
    pub fn new(config: SecurityConfig) -> Result<Self, SourceError> {
        Ok(Self {
            osv: OsvClient::new(config.osv_base_url.as_deref(), config.timeout)?,
            nvd: NvdClient::new(
                config.nvd_base_url.as_deref(),
                config.nvd_api_key.clone(),
                config.timeout,
            )?,
            kev: KevCatalog::new(config.kev_url.as_deref(), config.timeout, config.kev_ttl)?,
            ghsa: GhsaClient::new(
                config.github_base_url.as_deref(),
                config.github_token.clone(),
                config.timeout,
            )?,
            per_source_limit: config.per_source_limit.max(1),
        })
    }

    /// The calls that fit a query: a CVE id goes to NVD, KEV and GitHub by id; a package with
    /// an ecosystem to OSV and GitHub; free text to NVD's keyword search and KEV.
    fn plan<'a>(&'a self, q: &'a SecurityQuery) -> Vec<BoxFuture<'a, SourceResult>> {
        let limit = self.per_source_limit;
        let mut calls: Vec<BoxFuture<'a, SourceResult>> = Vec::new();
        let package = q
            .package
            .as_deref()
            .map(str::trim)
            .filter(|p| !p.is_empty());
        let version = q
            .version
            .as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty());
        let eco = q
            .ecosystem
            .as_deref()
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(ecosystem);
        let cve = find_cve(&q.query);
        if let Some(cve) = cve.clone() {
            let c1 = cve.clone();
            let c2 = cve.clone();
            calls.push(Box::pin(async move { ("NVD", self.nvd.by_cve(&c1).await) }));
            calls.push(Box::pin(
                async move { ("CISA KEV", self.kev.by_cve(&c2).await) },
            ));
            calls.push(Box::pin(async move {
                ("GitHub", self.ghsa.by_cve(&cve, limit).await)
            }));
        }
        if let Some(package) = package {
            if let Some(eco) = &eco {
                let osv_eco = eco.osv.clone();
                calls.push(Box::pin(async move {
                    (
                        "OSV",
                        self.osv.query(package, &osv_eco, version, limit).await,
                    )
                }));
            }
            let gh_eco = eco.as_ref().and_then(|e| e.github);
            calls.push(Box::pin(async move {
                (
                    "GitHub",
                    self.ghsa.affecting(package, version, gh_eco, limit).await,
                )
            }));
        }
        let text = q.query.trim();
        if cve.is_none() && eco.is_none() && !text.is_empty() {
            calls.push(Box::pin(async move {
                ("NVD", self.nvd.keyword(text, limit).await)
            }));
            calls.push(Box::pin(async move {
                ("CISA KEV", self.kev.keyword(text, limit).await)
            }));
        }
        calls
    }
}

#[async_trait]
impl SecurityLookup for SecuritySearch {
    async fn lookup(&self, query: &SecurityQuery) -> ToolAnswer {
        let calls = self.plan(query);
        if calls.is_empty() {
            return ToolAnswer {
                hits: vec![],
                text: "No advisory source applies: give a CVE id, a package with its ecosystem, or keywords.".into(),
            };
        }
        let results = join_all(calls).await;
        render(query, &results)
    }
}

/// Merges what the sources said into hits and the model's text (truncated like every tool output).
pub fn render(query: &SecurityQuery, results: &[SourceResult]) -> ToolAnswer {
    let mut text = format!("Security advisories for \"{}\"", query.query.trim());
    if let Some(p) = &query.package {
        text.push_str(&format!(" (package {p}"));
        if let Some(e) = &query.ecosystem {
            text.push_str(&format!(", ecosystem {e}"));
        }
        if let Some(v) = &query.version {
            text.push_str(&format!(", version {v}"));
        }
        text.push(')');
    }
    text.push_str(". Each advisory URL can be read with `scrape` and cited.\n");
    // The status of every source comes first, so a failure is never lost to truncation.
    text.push_str("Sources:\n");
    for (source, result) in results {
        match result {
            Ok(advisories) => {
                text.push_str(&format!("- {source}: {} advisories\n", advisories.len()));
            }
            // One failing source must not hide the others, and the model should know.
            Err(e) => text.push_str(&format!("- {source}: failed: {e}\n")),
        }
    }
    let mut hits = Vec::new();
    for (source, result) in results {
        let Ok(advisories) = result else { continue };
        if advisories.is_empty() {
            continue;
        }
        text.push_str(&format!("\n## {source}\n"));
        for a in advisories {
            a.render(&mut text);
            hits.push(a.hit());
        }
    }
    ToolAnswer {
        hits: normalize_and_dedup(hits),
        text: truncate_head(&text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES).text,
    }
}

#[cfg(test)]
mod tests;
