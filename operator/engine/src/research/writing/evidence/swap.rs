//! Names swapped between the clauses of a source: a claim that says of one name what its
//! source says, in the same words, of another. Every word of "ExceptionGroup extends
//! BaseException and it can wrap any exception" is on the page that says "BaseExceptionGroup
//! extends BaseException and it can wrap any exception, while ExceptionGroup extends Exception
//! ...", so shared words and named subjects pass it; only the clause the words come from shows
//! whose they are.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use regex::Regex;

use super::local::clauses;
use super::{STOPWORDS, sentences, stem};

/// Share of a claim clause's other words (its names aside) a source clause must hold to be the
/// clause it restates.
const SAME_WORDS: f64 = 0.8;
/// Fewest other words a claim clause needs before it is compared: "X is Y" says too little to
/// tell whose it is.
const MIN_WORDS: usize = 3;

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static NAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*").expect("valid regex")
});

/// Pure: the code-shaped names of `text` in order, lower-cased: dotted or snake_case names,
/// CamelCase words (`json.loads`, `work_mem`, `ExceptionGroup`), and a lone word written as
/// code (`` `jsonb` ``): markup says it is a name as surely as its shape would.
pub(super) fn names(text: &str) -> Vec<String> {
    let spans = code_words(text);
    let mut out: Vec<String> = Vec::new();
    for m in NAME_RE.find_iter(text) {
        let w = m.as_str();
        let camel = w.chars().skip(1).any(char::is_uppercase)
            && w.chars().filter(|c| c.is_lowercase()).count() >= 2;
        let name = w.to_lowercase();
        let shaped = w.contains(['_', '.']) || camel || spans.contains(&(m.start()..m.end()));
        if shaped && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Pure: where `text` writes one word alone as a code span (`` `jsonb` ``), as byte ranges of
/// the word ([`super::code_spans`] less their opening backtick). A type of the model's summary
/// ("The `jsonb` type stores an exact copy") was the other type's clause of its passage ("the
/// `json` type stores an exact copy"), and two plain words had no shape to tell them apart by.
fn code_words(text: &str) -> Vec<std::ops::Range<usize>> {
    super::code_spans(text)
        .into_iter()
        .map(|r| r.start + 1..r.end)
        .filter(|r| {
            !r.is_empty()
                && text[r.clone()]
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_')
        })
        .collect()
}

/// Pure: a clause's words (lower-cased and stemmed, stopwords and the parts of its names left
/// out). Parts are left out before stemming, which cuts "exceptiongroup" to "exception"'s stem.
fn other_words(clause: &str, names: &[String]) -> BTreeSet<String> {
    let parts: BTreeSet<&str> = names
        .iter()
        .flat_map(|n| n.split(|c: char| !c.is_alphanumeric()))
        .collect();
    clause
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.len() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .filter(|w| !parts.contains(w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// Pure: whether some clause of `claim` says, in the words of a clause of `evidence`, what that
/// clause says of another name. The source clause closest to the claim clause (holding at least
/// [`SAME_WORDS`] of its other words, then sharing the most of both) leads with a name the
/// claim clause lacks, while the claim clause leads with a name the source clause lacks, and
/// the same word follows each name ([`follower`]).
pub fn swaps_names(claim: &str, evidence: &str) -> bool {
    let source: Vec<(Vec<String>, BTreeSet<String>, String)> = sentences(evidence)
        .iter()
        .flat_map(|s| clauses(s))
        .map(|c| {
            let n = names(&c);
            let words = other_words(&c, &n);
            (n, words, c)
        })
        .collect();
    sentences(claim).iter().flat_map(|s| clauses(s)).any(|c| {
        let claimed = names(&c);
        let Some(first) = claimed.first() else {
            return false;
        };
        let words = other_words(&c, &claimed);
        if words.len() < MIN_WORDS {
            return false;
        }
        let score = |w: &BTreeSet<String>| {
            let shared = words.intersection(w).count() as f64;
            (
                shared / words.len() as f64,
                shared / words.union(w).count() as f64,
            )
        };
        let closest = source
            .iter()
            .map(|(n, w, clause)| (n, score(w), clause))
            .filter(|(_, (share, _), _)| *share >= SAME_WORDS)
            .max_by(|a, b| a.1.0.total_cmp(&b.1.0).then(a.1.1.total_cmp(&b.1.1)))
            .map(|(n, _, clause)| (n, clause));
        closest.is_some_and(|(n, clause)| {
            n.first().is_some_and(|lead| {
                !claimed.contains(lead)
                    && !n.contains(first)
                    && follower(&c, first).is_some()
                    && follower(&c, first) == follower(clause, lead)
            })
        })
    })
}

/// Pure: the first content word after `name` in `clause` (stemmed), past a parenthesised
/// argument list: the slot's verb, so a name put in another's slot ("ExceptionGroup extends"
/// for "BaseExceptionGroup extends") is told from one said in passing ("Unlike
/// statement_timeout, this timeout ...").
fn follower(clause: &str, name: &str) -> Option<String> {
    let lower = clause.to_lowercase();
    let at = lower.find(name)?;
    let mut rest = clause.get(at + name.len()..)?.trim_start();
    if rest.starts_with('(') {
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, ch) in rest.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    rest.split(|ch: char| !ch.is_alphanumeric())
        .map(str::to_lowercase)
        .find(|w| w.len() >= 3 && !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
}

#[cfg(test)]
mod tests;
