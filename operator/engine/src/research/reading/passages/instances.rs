//! The things a page names as instances of what a question asks about: "elements of
//! structured concurrency like Task Groups" tells a reader that a question on structured
//! concurrency is answered under "Task Groups", a heading that shares no word with it.

use std::collections::BTreeSet;

use super::{Passage, context_terms, is_stop, terms};

/// Words after which a text names instances of the phrase before them.
const MARKERS: [&[&str]; 5] = [
    &["like"],
    &["such", "as"],
    &["including"],
    &["e.g"],
    &["for", "example"],
];

/// Most words of an instance list read after its marker.
const MAX_INSTANCE_WORDS: usize = 8;

/// Fewest words of the question a phrase before a marker must repeat, in a row: one word
/// ("functions like") names too broad a kind.
const PHRASE_WORDS: usize = 2;

/// Pure: the terms of the things `passages` name as instances of a phrase of `query` ("Task
/// Groups" and `asyncio.timeout()` of "elements of structured concurrency like Task Groups and
/// `asyncio.timeout()` ..."): after at least [`PHRASE_WORDS`] of the query's words in a row
/// (its products aside) and a marker ("like", "such as", "including", "e.g.", "for example"),
/// the words up to the next clause, a stop word other than "and" and "or", or
/// [`MAX_INSTANCE_WORDS`]. Terms the query has are left out.
pub(super) fn instance_terms(passages: &[Passage], query: &str) -> BTreeSet<String> {
    let context = context_terms(query);
    let asked: BTreeSet<String> = terms(query)
        .into_iter()
        .filter(|t| !context.contains(t))
        .collect();
    let mut out = BTreeSet::new();
    if asked.len() < PHRASE_WORDS {
        return out;
    }
    for p in passages {
        let words: Vec<&str> = p.text.split_whitespace().collect();
        let clean: Vec<String> = words
            .iter()
            .map(|w| {
                w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
                    .trim_end_matches('.')
                    .to_lowercase()
            })
            .collect();
        let mut run = 0usize;
        for i in 0..words.len() {
            let t = terms(&clean[i]);
            let is_asked = !t.is_empty() && t.iter().all(|x| asked.contains(x));
            if !is_asked {
                // A run is reset where a clause ends, so it ends right before `i`.
                if run >= PHRASE_WORDS {
                    out.extend(instances_after(&words, &clean, i));
                }
                run = 0;
                continue;
            }
            run += 1;
            if ends_clause(words[i]) {
                run = 0;
            }
        }
    }
    out.retain(|t| !asked.contains(t) && !context.contains(t));
    out
}

/// Pure: the terms of the instance list starting with a marker at `at`, if one is there.
fn instances_after(words: &[&str], clean: &[String], at: usize) -> Vec<String> {
    let Some(marker) = MARKERS.iter().find(|m| {
        m.iter()
            .enumerate()
            .all(|(k, w)| clean.get(at + k).is_some_and(|c| c == w))
    }) else {
        return vec![];
    };
    let mut out = Vec::new();
    for k in at + marker.len()..(at + marker.len() + MAX_INSTANCE_WORDS).min(words.len()) {
        let w = clean[k].as_str();
        if w.is_empty() || (is_stop(w) && w != "and" && w != "or") {
            break;
        }
        out.extend(terms(words[k]));
        if ends_clause(words[k]) {
            break;
        }
    }
    out
}

/// Pure: whether a word as written ends its clause.
fn ends_clause(raw: &str) -> bool {
    raw.ends_with([',', ';', ':', '.', '?', '!', ')'])
}
