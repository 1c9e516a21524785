//! A claim made from a sentence that opens with its condition ("If this is set to true, the
//! `git stash show` command will show the untracked files ...") says what holds only then.

use super::terms;
use crate::research::reading::queries::plain_words;

/// Openings of a sentence whose statement holds only under a condition.
const CONDITIONS: [&str; 8] = [
    "if ",
    "unless ",
    "so long as ",
    "as long as ",
    "only if ",
    "when ",
    "whenever ",
    "provided ",
];

/// Words with which a claim says it states something under a condition.
const CONDITION_WORDS: [&str; 7] = [
    "if", "unless", "when", "whenever", "only", "while", "provided",
];

/// Pure: whether the sentence of `evidence` sharing most words with `claim` opens with a
/// condition ("If ..., ", "So long as ..., ") and the claim states its consequence without it:
/// no word of condition and none of the condition's own words. The 0.5B model made "The `git
/// stash show` command displays the untracked files of a stash entry" from "If this is set to
/// true, the `git stash show` command will show the untracked files of a stash entry", and
/// "PostgreSQL 15 waits indefinitely for conflicting locks to be released" from "So long as no
/// deadlock situation is detected, a transaction ... will wait indefinitely ..." (my own
/// questions).
pub fn drops_condition(claim: &str, evidence: &str) -> bool {
    let words = format!(" {} ", plain_words(claim).join(" "));
    if CONDITION_WORDS
        .iter()
        .any(|w| words.contains(&format!(" {w} ")))
    {
        return false;
    }
    let claimed = terms(claim);
    let Some(source) = super::previously::closest_sentence(claim, evidence) else {
        return false;
    };
    // An entry's passage opens with its name or signature ("stash.showIncludeUntracked: If
    // ...", "shutil.rmtree(path, ...): If ...").
    let body = source.rsplit_once(": ").map_or(source, |(_, rest)| rest);
    let body = body.trim_start().to_lowercase();
    let Some(opening) = CONDITIONS.iter().find(|o| body.starts_with(*o)) else {
        return false;
    };
    let Some((condition, _)) = body[opening.len()..].split_once(", ") else {
        return false;
    };
    // The condition told in the claim's own words keeps some of them ("Setting maxsize to
    // None disables the LRU feature").
    let own = terms(condition);
    !own.is_empty() && !own.iter().any(|t| claimed.contains(t))
}

#[cfg(test)]
mod tests;
