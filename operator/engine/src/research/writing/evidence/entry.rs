//! Whose number a passage states: a reference entry's passage ("§ … › hash_mem_multiplier
//! (floating point)") says "The default value is 2.0" of its entry, whatever other names its
//! sentences mention. The 0.5B model wrote "The default value of PostgreSQL's work_mem is 2.0,
//! which makes hash-based operations use twice the usual `work_mem` base amount", citing
//! `hash_mem_multiplier`'s entry: the passage names `work_mem` and holds "2.0", so named
//! subjects and numbers passed it, and a reader was given two defaults for `work_mem`.

use super::local::PASSAGE_MARK;
use super::numbers::{holds_number, number_at};
use super::swap::names;
use super::{NUMBER_RE, sentences};
use crate::research::reading::passages::focus;

/// Pure: the name the passage `evidence` documents: the entry ([`focus::entry_name`]) its
/// heading path ends in ("hash_mem_multiplier (floating point)", "class
/// concurrent.futures.ThreadPoolExecutor(max_workers=None)"). None for a passage whose heading
/// names a section, or for a text holding several passages (a whole page).
fn entry(evidence: &str) -> Option<String> {
    let mut headings = evidence
        .lines()
        .filter_map(|l| l.strip_prefix(PASSAGE_MARK));
    let heading = headings.next()?;
    if headings.next().is_some() {
        return None;
    }
    focus::entry_name(heading.rsplit(" › ").next().unwrap_or(heading))
}

/// Pure: whether the code-shaped name `name` is the entry `documented`, whole or by its last
/// parts ([`focus::names_match`]: "ThreadPoolExecutor" for
/// `concurrent.futures.ThreadPoolExecutor`), or is the module holding it (`concurrent.futures`).
fn is_entry(name: &str, documented: &str) -> bool {
    focus::names_match(documented, name) || documented.starts_with(&format!("{name}."))
}

/// Pure: whether `claim` gives a number of its passage `evidence` to a name other than the
/// entry the passage documents ([`entry`]). It does when the claim names no entry, names
/// another code-shaped name before that number, and no sentence of the passage holding the
/// number names one of the claim's names before it: "work_mem … 2.0" is not said by "The
/// default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base
/// amount", while that sentence copied (naming `work_mem` only after the number) says what the
/// passage says. Numbers the passage does not hold are the number check's to report.
pub fn number_of_another_entry(claim: &str, evidence: &str, restated: &[String]) -> bool {
    let Some(documented) = entry(evidence) else {
        return false;
    };
    // Markdown's escapes ("max\_workers") are no part of a name.
    let unescaped = |text: &str| text.replace('\\', "").to_lowercase();
    let all = names(&unescaped(claim));
    if all.iter().any(|n| is_entry(n, &documented)) {
        return false;
    }
    // Other names are identifiers only: a CamelCase word may be a product ("PostgreSQL allows
    // 100 connections by default" is said of the product, whose entry it cites).
    let claimed: Vec<String> = all.into_iter().filter(|n| n.contains(['_', '.'])).collect();
    if claimed.is_empty() {
        return false;
    }
    // Whether `text` names one of the claim's names before its first numeral of value `n`.
    let named_before = |text: &str, n: &str| {
        let lower = unescaped(text);
        number_at(&lower, n).is_some_and(|at| {
            claimed
                .iter()
                .any(|c| lower.find(c.as_str()).is_some_and(|i| i < at))
        })
    };
    let said = sentences(evidence);
    NUMBER_RE
        .captures_iter(claim)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str())
        .filter(|n| !restated.iter().any(|r| r == n) && holds_number(evidence, n))
        .any(|n| named_before(claim, n) && !said.iter().any(|s| named_before(s, n)))
}

#[cfg(test)]
mod tests;
