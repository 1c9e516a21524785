//! CISA Known Exploited Vulnerabilities: one JSON feed
//! (`{title, catalogVersion, dateReleased, count, vulnerabilities[]}`), downloaded once, kept in
//! memory for a TTL and searched locally by CVE id or keywords.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;
use url::Url;

use super::Advisory;
use crate::sources::SourceError;
use crate::sources::http::{self, HttpSource, text_field};

/// CISA's public feed.
pub const DEFAULT_URL: &str =
    "https://www.cisa.gov/sites/default/files/feeds/known_exploited_vulnerabilities.json";
/// The catalog page, searched by CVE id (the feed has no page per entry).
pub const PAGE_URL: &str = "https://www.cisa.gov/known-exploited-vulnerabilities-catalog";
/// Provider name in errors.
pub const NAME: &str = "cisa-kev";
/// CISA adds entries a few times a week; six hours keeps a long-running operator current.
pub const DEFAULT_TTL: Duration = Duration::from_secs(6 * 3600);
/// The real feed is about 1.5 MB; 16 MiB leaves room for growth and refuses anything absurd.
pub const MAX_FEED_BYTES: usize = 16 * 1024 * 1024;

/// One catalog entry (field names as in the feed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KevEntry {
    /// `cveID`, upper-cased.
    pub cve_id: String,
    /// `vendorProject`.
    pub vendor_project: String,
    /// `product`.
    pub product: String,
    /// `vulnerabilityName`.
    pub vulnerability_name: String,
    /// `dateAdded` (YYYY-MM-DD).
    pub date_added: String,
    /// `shortDescription`.
    pub short_description: String,
    /// `requiredAction`.
    pub required_action: String,
    /// `dueDate` for US federal agencies.
    pub due_date: String,
    /// `knownRansomwareCampaignUse` (`Known` or `Unknown`).
    pub known_ransomware_campaign_use: String,
    /// `notes` (often reference URLs).
    pub notes: String,
    /// Lowercased text searched by keywords.
    haystack: String,
}

impl KevEntry {
    fn from_json(v: &Value) -> Option<Self> {
        let field = |k: &str| text_field(v, k).unwrap_or_default();
        let cve_id = text_field(v, "cveID")?.to_ascii_uppercase();
        let mut e = Self {
            cve_id,
            vendor_project: field("vendorProject"),
            product: field("product"),
            vulnerability_name: field("vulnerabilityName"),
            date_added: field("dateAdded"),
            short_description: field("shortDescription"),
            required_action: field("requiredAction"),
            due_date: field("dueDate"),
            known_ransomware_campaign_use: field("knownRansomwareCampaignUse"),
            notes: field("notes"),
            haystack: String::new(),
        };
        e.haystack = [
            e.cve_id.as_str(),
            &e.vendor_project,
            &e.product,
            &e.vulnerability_name,
            &e.short_description,
            &e.notes,
        ]
        .join(" ")
        .to_lowercase();
        Some(e)
    }

    /// The entry as an advisory.
    pub fn advisory(&self) -> Advisory {
        let mut facts = vec![
            (
                "Product".to_string(),
                format!("{} {}", self.vendor_project, self.product),
            ),
            ("Added to KEV".to_string(), self.date_added.clone()),
        ];
        if !self.due_date.is_empty() {
            facts.push((
                "Remediation due (US agencies)".into(),
                self.due_date.clone(),
            ));
        }
        if !self.required_action.is_empty() {
            facts.push(("Required action".into(), self.required_action.clone()));
        }
        if !self.known_ransomware_campaign_use.is_empty() {
            facts.push((
                "Known ransomware use".into(),
                self.known_ransomware_campaign_use.clone(),
            ));
        }
        Advisory {
            source: "CISA KEV",
            id: self.cve_id.clone(),
            url: format!("{PAGE_URL}?search_api_fulltext={}", self.cve_id),
            title: format!("{} (known exploited)", self.vulnerability_name),
            details: self.short_description.clone(),
            severity: None,
            published: None,
            modified: None,
            aliases: vec![],
            references: self
                .notes
                .split_whitespace()
                .filter(|w| http::is_http_url(w.trim_end_matches(';')))
                .map(|w| w.trim_end_matches(';').to_string())
                .collect(),
            facts,
        }
    }
}

/// The parsed catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// `catalogVersion`.
    pub catalog_version: String,
    /// `dateReleased`.
    pub date_released: String,
    /// Every entry with a CVE id.
    pub entries: Vec<KevEntry>,
}

/// Parses the feed; an object without a `vulnerabilities` array is not the feed.
pub fn parse(feed: &Value) -> Result<Catalog, SourceError> {
    let vulns = feed
        .get("vulnerabilities")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            SourceError::Malformed(format!("{NAME}: feed has no `vulnerabilities` array"))
        })?;
    Ok(Catalog {
        catalog_version: text_field(feed, "catalogVersion").unwrap_or_default(),
        date_released: text_field(feed, "dateReleased").unwrap_or_default(),
        entries: vulns.iter().filter_map(KevEntry::from_json).collect(),
    })
}

impl Catalog {
    /// The entry of a CVE.
    pub fn by_cve(&self, cve_id: &str) -> Option<&KevEntry> {
        self.entries
            .iter()
            .find(|e| e.cve_id.eq_ignore_ascii_case(cve_id.trim()))
    }

    /// Entries holding every keyword (case-insensitive), most recently added first.
    pub fn search(&self, keywords: &str, limit: usize) -> Vec<&KevEntry> {
        let words: Vec<String> = keywords
            .split(|c: char| !c.is_alphanumeric() && c != '-' && c != '.')
            .filter(|w| w.chars().count() >= 2)
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            return vec![];
        }
        let mut found: Vec<&KevEntry> = self
            .entries
            .iter()
            .filter(|e| words.iter().all(|w| e.haystack.contains(w.as_str())))
            .collect();
        found.sort_by(|a, b| b.date_added.cmp(&a.date_added));
        found.truncate(limit);
        found
    }
}

/// The KEV feed, cached in memory.
#[derive(Debug)]
pub struct KevCatalog {
    http: HttpSource,
    url: Url,
    timeout: Duration,
    ttl: Duration,
    // A tokio mutex: concurrent lookups during a download wait for it instead of downloading
    // the feed again.
    cache: Mutex<Option<(Instant, Arc<Catalog>)>>,
}

impl KevCatalog {
    /// Builds the catalog client for `url` (default [`DEFAULT_URL`]), refreshed after `ttl`.
    pub fn new(url: Option<&str>, timeout: Duration, ttl: Duration) -> Result<Self, SourceError> {
        let raw = url.unwrap_or(DEFAULT_URL).trim();
        let url = Url::parse(raw)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| SourceError::Config(format!("{NAME}: feed URL {raw:?} is invalid")))?;
        Ok(Self {
            http: HttpSource::new(NAME, timeout, MAX_FEED_BYTES, vec![])?,
            url,
            timeout,
            ttl,
            cache: Mutex::new(None),
        })
    }

    /// Overrides the feed size cap.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Result<Self, SourceError> {
        self.http = HttpSource::new(NAME, self.timeout, max_bytes, vec![])?;
        Ok(self)
    }

    /// The catalog, downloaded when absent or older than the TTL. A failed refresh serves the
    /// stale copy (an old list of exploited CVEs beats none); with no copy it is an error.
    pub async fn catalog(&self) -> Result<Arc<Catalog>, SourceError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, catalog)) = cache.as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(catalog.clone());
        }
        match self.download().await {
            Ok(catalog) => {
                let catalog = Arc::new(catalog);
                *cache = Some((Instant::now(), catalog.clone()));
                Ok(catalog)
            }
            Err(e) => match cache.as_ref() {
                Some((_, stale)) => {
                    tracing::warn!(error = %e, "KEV refresh failed; serving the cached catalog");
                    Ok(stale.clone())
                }
                None => Err(e),
            },
        }
    }

    async fn download(&self) -> Result<Catalog, SourceError> {
        let request = self
            .http
            .client()
            .get(self.url.clone())
            .header(reqwest::header::ACCEPT, "application/json");
        let answer = self.http.send(request, &self.url).await?;
        self.http.check_status(&answer)?;
        parse(&self.http.json(&answer.body)?)
    }

    /// The KEV entry of a CVE (empty when it is not known to be exploited).
    pub async fn by_cve(&self, cve_id: &str) -> Result<Vec<Advisory>, SourceError> {
        let catalog = self.catalog().await?;
        Ok(catalog
            .by_cve(cve_id)
            .map(KevEntry::advisory)
            .into_iter()
            .collect())
    }

    /// KEV entries matching every keyword.
    pub async fn keyword(
        &self,
        keywords: &str,
        limit: usize,
    ) -> Result<Vec<Advisory>, SourceError> {
        let catalog = self.catalog().await?;
        Ok(catalog
            .search(keywords, limit)
            .into_iter()
            .map(KevEntry::advisory)
            .collect())
    }
}

#[cfg(test)]
mod tests;
