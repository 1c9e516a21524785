//! A claim saying what something does "by default" is backed by a sentence of its evidence
//! that states a default and holds what the claim says is done.

use std::collections::BTreeSet;

use super::{sentences, terms};
use crate::research::reading::passages::focus::{
    CLAIM_VERB_WITHIN, default_values, says_by_default,
};

/// Pure: whether `claim` says what is done "by default" (a form whose value
/// [`default_values`] does not read) and no sentence of `evidence` stating a default holds
/// its words, the question's (`asked`) and the evidence's titles and headings aside. Asked
/// which index type `CREATE INDEX` makes by default, the 0.5B model wrote one sentence per
/// passage: "PostgreSQL's CREATE INDEX creates Hash indexes by default", then GiST, then GIN,
/// each cited to a passage listing the index types; every word was the page's, and its one
/// default sentence says B-tree.
pub fn unstated_default(claim: &str, evidence: &str, asked: &str) -> bool {
    if !says_by_default(claim) || !default_values(claim, CLAIM_VERB_WITHIN).is_empty() {
        return false;
    }
    // Titles and headings name what every sentence under them is about.
    let mut given: BTreeSet<String> = terms(asked);
    for line in evidence.lines() {
        let line = line.trim();
        if line.starts_with('§') || line.starts_with('#') {
            given.extend(terms(line));
        }
    }
    if let Some(title) = evidence.lines().next() {
        given.extend(terms(title));
    }
    let said: BTreeSet<String> = terms(claim)
        .into_iter()
        .filter(|t| !given.contains(t))
        .collect();
    // A paragraph's lines are one text: a page wraps its lines anywhere ("By default, the
    // `CREATE\n   INDEX` command creates B-tree indexes").
    let joined: String = evidence
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n");
    !sentences(&joined)
        .iter()
        .filter(|s| s.to_lowercase().contains("default"))
        .any(|s| said.is_subset(&terms(s)))
}

#[cfg(test)]
mod tests;
