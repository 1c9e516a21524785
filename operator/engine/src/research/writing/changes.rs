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
mod tests;
