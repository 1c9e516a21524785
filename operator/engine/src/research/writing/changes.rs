//! What changed since an earlier run of the same question: the earlier run's findings
//! in, a "Changes since <date>" section and a structured diff out.
//!
//! Pure. Claims are compared by their content words (a reworded sentence is the same claim when
//! most of its words are), sources by their normalised URL. Only the current run's claims carry
//! links, and those already passed the evidence gate; an earlier claim the run no longer supports
//! is quoted without its link, since nothing in this run verified it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::evidence::ClaimCheck;
use super::links::normalize_url;
use crate::research::machine::state::Earlier;

/// Share of content words two claims must share to be the same claim.
const SAME_CLAIM: f64 = 0.6;
/// Items listed per kind of change in the report (findings.json keeps them all).
const LISTED: usize = 12;

/// The structured diff (`findings.json`'s `changes`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// The earlier report's date.
    pub since: String,
    /// Supported claims of this run that the earlier one did not make, with their citation.
    pub new_claims: Vec<CitedClaim>,
    /// Earlier supported claims this run did not support again.
    pub unsupported_claims: Vec<String>,
    /// Sources this run read that the earlier one did not.
    pub new_sources: Vec<String>,
    /// Sources the earlier run read that this one did not.
    pub vanished_sources: Vec<String>,
}

/// A claim with the source that supports it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CitedClaim {
    /// The sentence.
    pub claim: String,
    /// The verified citation.
    pub url: String,
}

impl Changes {
    /// How many things changed.
    pub fn count(&self) -> usize {
        self.new_claims.len()
            + self.unsupported_claims.len()
            + self.new_sources.len()
            + self.vanished_sources.len()
    }
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    items.filter(|i| seen.insert(i.clone())).collect()
}

/// Lower-cased words of three letters or more: what two wordings of a claim share.
fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '.' && c != '_')
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| w.chars().count() >= 3)
        .collect()
}

/// True when two claims say the same thing: most of the shorter one's words are in the other.
fn same_claim(a: &BTreeSet<String>, b: &BTreeSet<String>) -> bool {
    let shorter = a.len().min(b.len());
    shorter > 0 && a.intersection(b).count() as f64 >= SAME_CLAIM * shorter as f64
}

/// The diff between an earlier run and this one's checked claims and sources.
pub fn diff(earlier: &Earlier, claims: &[ClaimCheck], sources: &[String]) -> Changes {
    let now: Vec<(&ClaimCheck, BTreeSet<String>)> = claims
        .iter()
        .filter(|c| c.supported)
        .map(|c| (c, content_words(&c.claim)))
        .collect();
    let before: Vec<(&String, BTreeSet<String>)> = earlier
        .claims
        .iter()
        .map(|c| (c, content_words(c)))
        .collect();
    let mut new_claims: Vec<CitedClaim> = Vec::new();
    for (claim, words) in &now {
        let known = before.iter().any(|(_, b)| same_claim(words, b));
        if !known && !new_claims.iter().any(|n| n.claim == claim.claim) {
            new_claims.push(CitedClaim {
                claim: claim.claim.clone(),
                url: claim.url.clone(),
            });
        }
    }
    let unsupported_claims = before
        .iter()
        .filter(|(_, b)| !now.iter().any(|(_, w)| same_claim(w, b)))
        .map(|(c, _)| (*c).clone())
        .collect();
    let normal =
        |urls: &[String]| -> BTreeSet<String> { urls.iter().map(|u| normalize_url(u)).collect() };
    let (was, is) = (normal(&earlier.sources), normal(sources));
    let new_sources = dedup(
        sources
            .iter()
            .filter(|u| !was.contains(&normalize_url(u)))
            .cloned(),
    );
    let vanished_sources = dedup(
        earlier
            .sources
            .iter()
            .filter(|u| !is.contains(&normalize_url(u)))
            .cloned(),
    );
    Changes {
        since: earlier.date.clone(),
        new_claims,
        unsupported_claims,
        new_sources,
        vanished_sources,
    }
}

/// The report's closing section. New claims keep their verified link; everything the earlier
/// run said is quoted as text.
pub fn section(changes: &Changes) -> String {
    let mut out = format!("\n## Changes since {}\n\n", changes.since);
    if changes.count() == 0 {
        out.push_str("Nothing changed: the same claims are supported by the same sources.\n");
        return out;
    }
    let list = |out: &mut String, title: &str, items: Vec<String>| {
        if items.is_empty() {
            return;
        }
        out.push_str(&format!("**{title}**\n\n"));
        let more = items.len().saturating_sub(LISTED);
        for item in items.into_iter().take(LISTED) {
            out.push_str(&format!("- {item}\n"));
        }
        if more > 0 {
            out.push_str(&format!("- … and {more} more (see findings.json)\n"));
        }
        out.push('\n');
    };
    list(
        &mut out,
        "New claims",
        changes
            .new_claims
            .iter()
            .map(|c| format!("{} ([source]({}))", c.claim.trim_end_matches('.'), c.url))
            .collect(),
    );
    list(
        &mut out,
        "No longer supported by what this run read",
        changes.unsupported_claims.clone(),
    );
    list(
        &mut out,
        "New sources",
        changes
            .new_sources
            .iter()
            .map(|u| format!("<{u}>"))
            .collect(),
    );
    list(
        &mut out,
        "Sources not read this time",
        changes
            .vanished_sources
            .iter()
            .map(|u| format!("`{u}`"))
            .collect(),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(claim: &str, url: &str, supported: bool) -> ClaimCheck {
        ClaimCheck {
            claim: claim.into(),
            url: url.into(),
            overlap: 1.0,
            missing_numbers: vec![],
            missing_subjects: vec![],
            supported,
            judged_by: "lexical",
        }
    }

    fn earlier() -> Earlier {
        Earlier::from_findings(
            &json!({
                "claims": [
                    {"claim": "json.loads parses a str into Python objects.", "supported": true},
                    {"claim": "The json module is implemented in C only.", "supported": true},
                    {"claim": "An unsupported sentence.", "supported": false},
                ],
                "sources": [
                    {"url": "http://docs/json.html", "title": "json"},
                    {"url": "http://docs/pickle.html", "title": "pickle"},
                ],
            }),
            "2026-11-24T08:00:00Z",
        )
    }

    #[test]
    fn findings_are_read_supported_claims_and_sources_only() {
        let e = earlier();
        assert_eq!(e.claims.len(), 2);
        assert_eq!(
            e.sources,
            vec!["http://docs/json.html", "http://docs/pickle.html"]
        );
        assert!(e.as_context().contains("(2026-11-24T08:00:00Z)"));
        assert!(e.as_context().contains("- json.loads parses a str"));
    }

    #[test]
    fn reworded_claims_are_the_same_and_real_changes_are_listed() {
        let claims = [
            // The first earlier claim, reworded: not new.
            check(
                "The json.loads function parses a str into Python objects",
                "http://docs/json.html/",
                true,
            ),
            check(
                "json.dump writes to a file-like object.",
                "http://docs/json.html",
                true,
            ),
            check("A claim the gate refused.", "http://docs/json.html", false),
        ];
        let sources = vec![
            "http://docs/json.html/".to_string(),
            "http://docs/io.html".to_string(),
        ];
        let c = diff(&earlier(), &claims, &sources);
        assert_eq!(c.since, "2026-11-24T08:00:00Z");
        assert_eq!(
            c.new_claims,
            vec![CitedClaim {
                claim: "json.dump writes to a file-like object.".into(),
                url: "http://docs/json.html".into()
            }]
        );
        assert_eq!(
            c.unsupported_claims,
            vec!["The json module is implemented in C only."]
        );
        assert_eq!(c.new_sources, vec!["http://docs/io.html"]);
        assert_eq!(c.vanished_sources, vec!["http://docs/pickle.html"]);
        assert_eq!(c.count(), 4);
        let text = section(&c);
        assert!(
            text.starts_with("\n## Changes since 2026-11-24T08:00:00Z\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "- json.dump writes to a file-like object ([source](http://docs/json.html))"
            ),
            "{text}"
        );
        assert!(
            text.contains("- The json module is implemented in C only.\n"),
            "{text}"
        );
        assert!(text.contains("- <http://docs/io.html>"), "{text}");
        // An earlier source is named, not linked: this run did not read it.
        assert!(text.contains("- `http://docs/pickle.html`"), "{text}");
    }

    #[test]
    fn no_change_says_so() {
        let e = earlier();
        let claims = [
            check(
                "json.loads parses a str into Python objects.",
                "http://docs/json.html",
                true,
            ),
            check(
                "The json module is implemented in C only.",
                "http://docs/json.html",
                true,
            ),
        ];
        let sources = e.sources.clone();
        let c = diff(&e, &claims, &sources);
        assert_eq!(c.count(), 0);
        assert!(section(&c).contains("Nothing changed"));
    }
}
