//! Source scoring, adaptive threshold and query reformulation, as pure functions.
//!
//! The three dimensions could be asked of a model; Quarry scores search results without a model
//! call (a call per result would cost more than the researcher itself on a small model):
//! relevance is the share of the query's content words in the title, snippet and URL path,
//! quality a prior by source type and domain, usefulness how much checkable substance the snippet
//! shows. The weights (50/30/20) put relevance first; the extractability multipliers and
//! thresholds are tuned so a niche question still passes a few results.

use serde::Serialize;

use crate::research::writing::evidence::terms;
use crate::sources::SearchHit;

/// Sources that must pass the threshold before a search stops reformulating.
pub const MIN_PASSING_SOURCES: usize = 3;

/// What kind of site a result is on: how much readable content its pages tend to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SourceType {
    Video,
    SocialMedia,
    Wiki,
    Academic,
    News,
    Documentation,
    Forum,
    Other,
}

impl SourceType {
    /// The extractability multiplier (penalizes low-content sources).
    pub fn multiplier(self) -> f64 {
        match self {
            SourceType::Video => 0.20,
            SourceType::SocialMedia => 0.50,
            SourceType::Wiki => 1.10,
            SourceType::Academic => 1.08,
            SourceType::News => 0.85,
            SourceType::Documentation | SourceType::Forum | SourceType::Other => 1.0,
        }
    }

    /// Prior credibility of the class (the quality dimension before domain adjustments).
    fn quality_prior(self) -> f64 {
        match self {
            SourceType::Documentation | SourceType::Academic => 0.9,
            SourceType::Wiki => 0.8,
            SourceType::Forum => 0.65,
            SourceType::News => 0.6,
            SourceType::Other => 0.55,
            SourceType::Video => 0.4,
            SourceType::SocialMedia => 0.3,
        }
    }
}

fn host_and_path(url: &str) -> (String, String) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host).to_ascii_lowercase();
    (host, format!("/{}", path.to_ascii_lowercase()))
}

fn host_is(host: &str, domains: &[&str]) -> bool {
    domains
        .iter()
        .any(|d| host == *d || host.ends_with(&format!(".{d}")))
}

/// Classifies a result by its URL.
pub fn source_type(url: &str) -> SourceType {
    let (host, path) = host_and_path(url);
    if host_is(
        &host,
        &[
            "youtube.com",
            "youtu.be",
            "vimeo.com",
            "tiktok.com",
            "twitch.tv",
            "dailymotion.com",
        ],
    ) {
        SourceType::Video
    } else if host_is(
        &host,
        &[
            "twitter.com",
            "x.com",
            "facebook.com",
            "instagram.com",
            "linkedin.com",
            "pinterest.com",
            "threads.net",
            "mastodon.social",
            "bsky.app",
        ],
    ) {
        SourceType::SocialMedia
    } else if host_is(&host, &["wikipedia.org", "wikibooks.org", "fandom.com"])
        || path.starts_with("/wiki/")
        || host.starts_with("wiki.")
    {
        SourceType::Wiki
    } else if host_is(
        &host,
        &[
            "arxiv.org",
            "doi.org",
            "acm.org",
            "ieee.org",
            "springer.com",
            "sciencedirect.com",
            "nature.com",
            "semanticscholar.org",
            "ncbi.nlm.nih.gov",
            "openreview.net",
            "aclanthology.org",
        ],
    ) || host.ends_with(".edu")
    {
        SourceType::Academic
    } else if host_is(
        &host,
        &[
            "stackoverflow.com",
            "stackexchange.com",
            "superuser.com",
            "serverfault.com",
            "askubuntu.com",
            "reddit.com",
            "news.ycombinator.com",
            "discourse.org",
        ],
    ) || path.contains("/issues/")
        || path.contains("/discussions/")
        || host.starts_with("forum.")
        || host.starts_with("discuss.")
    {
        SourceType::Forum
    } else if host_is(
        &host,
        &[
            "nytimes.com",
            "bbc.co.uk",
            "bbc.com",
            "cnn.com",
            "reuters.com",
            "theguardian.com",
            "bloomberg.com",
            "wsj.com",
            "forbes.com",
            "techcrunch.com",
            "theverge.com",
            "arstechnica.com",
        ],
    ) || host.starts_with("news.")
    {
        SourceType::News
    } else if host_is(
        &host,
        &["readthedocs.io", "docs.rs", "man7.org", "devdocs.io"],
    ) || ["docs.", "doc.", "developer.", "developers.", "manpages."]
        .iter()
        .any(|p| host.starts_with(p))
        || [
            "/doc/",
            "/docs/",
            "/documentation/",
            "/manual/",
            "/reference/",
            "/library/",
            "-doc/",
            "/html/",
        ]
        .iter()
        .any(|p| path.contains(p))
    {
        SourceType::Documentation
    } else {
        SourceType::Other
    }
}

/// The three dimensions and the final score of one result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceScore {
    pub relevance: f64,
    pub quality: f64,
    pub usefulness: f64,
    pub source_type: SourceType,
    /// `(0.5 relevance + 0.3 quality + 0.2 usefulness) × multiplier`, capped at 1.
    pub score: f64,
}

fn share(
    of: &std::collections::BTreeSet<String>,
    within: &std::collections::BTreeSet<String>,
) -> f64 {
    if of.is_empty() {
        return 0.5;
    }
    of.intersection(within).count() as f64 / of.len() as f64
}

/// Scores one search result for a query.
pub fn score(query: &str, hit: &SearchHit) -> SourceScore {
    let q = terms(query);
    let (host, path) = host_and_path(&hit.url);
    let title_terms = terms(&format!(
        "{} {}",
        hit.title,
        path.replace(['/', '-', '_', '.'], " ")
    ));
    let mut all_terms = title_terms.clone();
    all_terms.extend(terms(&hit.snippet));
    let relevance = 0.7 * share(&q, &all_terms) + 0.3 * share(&q, &title_terms);
    let kind = source_type(&hit.url);
    let mut quality = kind.quality_prior();
    if host.ends_with(".gov") || host.ends_with(".edu") || host.ends_with(".org") {
        quality += 0.05;
    }
    if ["top-10", "top10", "best-", "-vs-", "/tag/", "/amp/"]
        .iter()
        .any(|p| path.contains(p))
    {
        quality -= 0.15;
    }
    let quality = quality.clamp(0.0, 1.0);
    let snippet = hit.snippet.trim();
    let mut usefulness = (snippet.chars().count() as f64 / 200.0).min(1.0) * 0.6;
    if snippet.chars().any(|c| c.is_ascii_digit())
        || ["(", "_", "::", "()", "`"]
            .iter()
            .any(|p| snippet.contains(p))
    {
        usefulness += 0.2;
    }
    if !hit.title.trim().is_empty() {
        usefulness += 0.2;
    }
    let composite = 0.5 * relevance + 0.3 * quality + 0.2 * usefulness;
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    SourceScore {
        relevance: round(relevance),
        quality: round(quality),
        usefulness: round(usefulness.min(1.0)),
        source_type: kind,
        score: round((composite * kind.multiplier()).min(1.0)),
    }
}

/// The adaptive threshold: niche queries and social-heavy results get 0.45, well-covered
/// topics 0.65, everything else 0.60.
pub fn adaptive_threshold(result_count: usize, social_ratio: f64) -> f64 {
    if result_count < 15 || social_ratio > 0.5 {
        0.45
    } else if result_count > 40 && social_ratio < 0.2 {
        0.65
    } else {
        0.60
    }
}

/// Share of results on social media or video sites.
pub fn social_ratio(hits: &[SearchHit]) -> f64 {
    if hits.is_empty() {
        return 0.0;
    }
    let social = hits
        .iter()
        .filter(|h| {
            matches!(
                source_type(&h.url),
                SourceType::SocialMedia | SourceType::Video
            )
        })
        .count();
    social as f64 / hits.len() as f64
}

/// The reformulation strategies, in the order they are tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Reformulation {
    /// Drop operators, quotes and the less significant words.
    Broaden,
    /// Quote the most significant phrase.
    Narrow,
    /// Alternative phrasings of the key words.
    Synonyms,
}

impl Reformulation {
    /// The strategy of the `attempt`-th reformulation (0-based); synonyms from the third on.
    pub fn nth(attempt: u32) -> Self {
        match attempt {
            0 => Reformulation::Broaden,
            1 => Reformulation::Narrow,
            _ => Reformulation::Synonyms,
        }
    }
}

const SYNONYMS: &[(&str, &str)] = &[
    ("decode", "parse"),
    ("parse", "read"),
    ("encode", "serialize"),
    ("serialize", "encode"),
    ("error", "exception"),
    ("errors", "exceptions"),
    ("exception", "error"),
    ("fast", "performance"),
    ("speed", "performance"),
    ("slow", "performance"),
    ("compare", "comparison"),
    ("best", "recommended"),
    ("install", "setup"),
    ("setup", "installation"),
    ("configure", "configuration"),
    ("config", "configuration"),
    ("example", "tutorial"),
    ("examples", "tutorial"),
    ("use", "usage"),
    ("how", "guide"),
    ("create", "make"),
    ("delete", "remove"),
    ("remove", "delete"),
    ("list", "enumerate"),
    ("start", "launch"),
    ("stop", "terminate"),
    ("run", "execute"),
    ("bug", "issue"),
    ("issue", "problem"),
    ("secure", "security"),
    ("vulnerability", "CVE"),
    ("database", "DB"),
    ("function", "method"),
    ("method", "function"),
];

/// Significant words of a query, in order: no operators, no stopwords.
fn significant_words(query: &str) -> Vec<String> {
    query
        .split_whitespace()
        .filter(|w| !w.starts_with('-') && !w.contains(':'))
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.' && c != '_'))
        .filter(|w| !w.is_empty() && !terms(w).is_empty())
        .map(str::to_string)
        .collect()
}

/// Rewrites a query with one strategy; `None` when it would not change the query.
pub fn reformulate(query: &str, strategy: Reformulation) -> Option<String> {
    let words = significant_words(query);
    let out = match strategy {
        Reformulation::Broaden => {
            let mut ranked: Vec<(usize, &String)> = words.iter().enumerate().collect();
            ranked.sort_by_key(|(i, w)| (std::cmp::Reverse(w.len()), *i));
            let mut keep: Vec<(usize, &String)> = ranked.into_iter().take(3).collect();
            keep.sort_by_key(|(i, _)| *i);
            keep.into_iter()
                .map(|(_, w)| w.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        }
        Reformulation::Narrow => {
            if words.len() < 2 {
                return None;
            }
            // The adjacent pair with the most letters is the likeliest key phrase.
            let best = (0..words.len() - 1)
                .max_by_key(|&i| (words[i].len() + words[i + 1].len(), std::cmp::Reverse(i)))
                .unwrap_or(0);
            let mut parts = Vec::new();
            for (i, w) in words.iter().enumerate() {
                if i == best {
                    parts.push(format!("\"{} {}\"", w, words[i + 1]));
                } else if i != best + 1 {
                    parts.push(w.clone());
                }
            }
            parts.join(" ")
        }
        Reformulation::Synonyms => {
            let mut changed = false;
            let mut parts: Vec<String> = words
                .iter()
                .map(|w| {
                    let lower = w.to_lowercase();
                    match SYNONYMS.iter().find(|(k, _)| *k == lower) {
                        Some((_, s)) => {
                            changed = true;
                            (*s).to_string()
                        }
                        None => w.clone(),
                    }
                })
                .collect();
            if !changed {
                parts.push("guide".to_string());
            }
            parts.join(" ")
        }
    };
    let out = out.trim().to_string();
    (!out.is_empty() && out != query.trim()).then_some(out)
}

#[cfg(test)]
mod tests;
