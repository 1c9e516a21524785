//! BM25 over a page set's passages, with the question's side-by-side words as phrases.

use std::collections::{BTreeSet, HashMap};

use super::{
    CONTEXT_WEIGHT, DEFINITION_WEIGHT, FRAME_WORDS, Passage, PassageKind, context_terms,
    definition_terms, query_terms, terms,
};

/// BM25 (k1 = 1.2, b = 0.75) of every passage for `query`, with document frequencies from the
/// passages themselves. A passage's headings count as part of it, twice: a heading that names
/// the asked-for API marks the passage that documents it.
pub fn rank(passages: &[Passage], query: &str) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let mut query_terms = query_terms(query);
    let context = context_terms(query);
    let expansion: BTreeSet<String> = definition_terms(passages, query)
        .into_iter()
        .filter(|t| !query_terms.contains(t))
        .collect();
    query_terms.extend(expansion.iter().cloned());
    let weight = |t: &str| {
        if context.contains(t) {
            CONTEXT_WEIGHT
        } else if expansion.contains(t) {
            DEFINITION_WEIGHT
        } else {
            1.0
        }
    };
    let docs: Vec<Vec<String>> = passages
        .iter()
        .map(|p| {
            let headings = p.heading_path.join(" ");
            let mut t = terms(&p.text);
            let h = terms(&headings);
            t.extend(h.iter().cloned());
            t.extend(h);
            t
        })
        .collect();
    let n = docs.len() as f64;
    if docs.is_empty() || query_terms.is_empty() {
        return vec![0.0; docs.len()];
    }
    let avg_len = docs.iter().map(Vec::len).sum::<usize>() as f64 / n;
    // Lengths below half the average count as half the average: a table cell or a one-line
    // item must not outrank the paragraph that explains the matter just for being short.
    let floor = avg_len / 2.0;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for doc in &docs {
        let unique: BTreeSet<&str> = doc.iter().map(String::as_str).collect();
        for term in unique {
            if query_terms.contains(term) {
                *df.entry(term).or_insert(0) += 1;
            }
        }
    }
    let pairs = query_pairs(query);
    docs.iter()
        .zip(passages)
        .map(|(doc, passage)| {
            let len = (doc.len() as f64).max(floor);
            query_terms
                .iter()
                .map(|q| {
                    let tf = doc.iter().filter(|t| *t == q).count() as f64;
                    if tf == 0.0 {
                        return 0.0;
                    }
                    let df = *df.get(q.as_str()).unwrap_or(&0) as f64;
                    let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                    weight(q) * idf * tf * (K1 + 1.0)
                        / (tf + K1 * (1.0 - B + B * len / avg_len.max(1.0)))
                })
                .sum::<f64>()
                * (1.0 + PHRASE_BOOST * pair_share(passage, &pairs))
        })
        .collect()
}

/// Score factor, less one, of a passage writing every pair of words the question writes side
/// by side ([`query_pairs`]).
const PHRASE_BOOST: f64 = 0.5;

/// Words after which a noun phrase begins: determiners and prepositions.
const PHRASE_OPENERS: [&str; 22] = [
    "the", "a", "an", "its", "their", "this", "that", "of", "for", "in", "on", "with", "to", "by",
    "from", "between", "after", "before", "about", "into", "under", "during",
];

/// Pure: the pairs of terms `query` writes side by side in a noun phrase (one opened by a
/// determiner, a preposition or a possessive), each a content word ("an unlogged table", "for
/// structured concurrency"), less its products and frame words: two words written together
/// name one thing. Each word apart, "happens" and "data" put a glossary's entry on concurrency
/// ("operations happen within the database") above the page on unlogged tables' crash
/// recovery, and "structured" the C API's "structure members" above the passage on structured
/// concurrency. A verb and its object are no phrase: "decode JSON" of "How do I decode JSON
/// ...?" put "called to decode every JSON int" above `json.load`'s definition.
pub(super) fn query_pairs(query: &str) -> Vec<(String, String)> {
    let context = context_terms(query);
    let frame: BTreeSet<String> = terms(&FRAME_WORDS.join(" ")).into_iter().collect();
    let mut out = Vec::new();
    let mut previous: Option<String> = None;
    let mut opened = false;
    for raw in query.split_whitespace() {
        let bare = raw
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        let possessive = bare.ends_with("'s") || bare.ends_with("’s");
        let t = terms(raw);
        let term = match t.as_slice() {
            [one] if !context.contains(one) && !frame.contains(one) && !one.contains('.') => {
                Some(one.clone())
            }
            _ => None,
        };
        if opened
            && let (Some(a), Some(b)) = (&previous, &term)
            && a != b
            && !out.contains(&(a.clone(), b.clone()))
        {
            out.push((a.clone(), b.clone()));
        }
        let ends = raw.ends_with([',', ';', ':', '?', '!', '.']);
        if term.is_none() || ends {
            opened = !ends && (PHRASE_OPENERS.contains(&bare.as_str()) || possessive);
        }
        // A comma or a stop parts two things ("TRUNCATE, plain VACUUM").
        previous = term.filter(|_| !ends);
    }
    out
}

/// Pure: the share of `pairs` that `passage` writes side by side, in its text or its headings;
/// none for code, whose comments are no prose ("the assigned -- value must be of the jsonb type
/// as well" outranked jsonb's duplicate keys for "PostgreSQL's jsonb type").
pub(super) fn pair_share(passage: &Passage, pairs: &[(String, String)]) -> f64 {
    if pairs.is_empty() || passage.kind == PassageKind::Code {
        return 0.0;
    }
    let text = terms(&passage.text);
    let headings = terms(&passage.heading_path.join(" \n "));
    let writes = |a: &str, b: &str| {
        [&text, &headings]
            .iter()
            .any(|seq| seq.windows(2).any(|w| w[0] == a && w[1] == b))
    };
    let held = pairs.iter().filter(|(a, b)| writes(a, b)).count();
    held as f64 / pairs.len() as f64
}

#[cfg(test)]
mod tests;
