//! A claim made from a sentence about the past ("Previously, this method only supported ...")
//! says what was, not what is.

use super::terms;
use crate::research::reading::queries::plain_words;

/// Openings of a sentence saying what held before a change.
const PAST_OPENINGS: [&str; 4] = ["previously", "formerly", "prior to", "before version"];

/// Words with which a claim says it speaks of the past.
const PAST_WORDS: [&str; 9] = [
    "previously",
    "formerly",
    "prior",
    "before",
    "earlier",
    "older",
    "used",
    "no longer",
    "until",
];

/// Pure: whether the sentence of `evidence` sharing most words with `claim` opens by saying
/// what held before a change ("Previously, ...") and the claim says nothing of the past. The
/// 0.5B model made "The `datetime.fromisoformat` method in Python 3.11 now supports formats
/// that can be emitted by `date.isoformat`" from "Changed in version 3.11: Previously, this
/// method only supported formats that could be emitted by `date.isoformat()` or
/// `datetime.isoformat()`", the opposite of the change.
pub fn from_the_past(claim: &str, evidence: &str) -> bool {
    // Whole words: "used" is not "focused".
    let words = format!(" {} ", plain_words(claim).join(" "));
    if PAST_WORDS.iter().any(|w| words.contains(&format!(" {w} "))) {
        return false;
    }
    let Some(source) = closest_sentence(claim, evidence) else {
        return false;
    };
    // "Changed in version 3.11: Previously, ..." opens after its label.
    let body = source.rsplit_once(": ").map_or(source, |(_, rest)| rest);
    let body = body.trim_start().to_lowercase();
    PAST_OPENINGS.iter().any(|o| body.starts_with(o))
}

/// Pure: the sentence of `evidence` sharing most words with `claim` (the first of equals), or
/// `None` when none shares any: the sentence a claim was made from.
pub(super) fn closest_sentence<'e>(claim: &str, evidence: &'e str) -> Option<&'e str> {
    let claimed = terms(claim);
    let mut best: Option<(usize, &str)> = None;
    // Sentences end at a stop before a space or a line's end: "date.isoformat()" is one word.
    for sentence in evidence.split(['\n', ';']).flat_map(|l| l.split(". ")) {
        let shared = terms(sentence).intersection(&claimed).count();
        if shared > 0 && best.is_none_or(|(b, _)| shared > b) {
            best = Some((shared, sentence));
        }
    }
    best.map(|(_, s)| s)
}

#[cfg(test)]
mod tests;
