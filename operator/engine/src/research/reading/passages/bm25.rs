//! BM25 over a page set's passages.

use std::collections::{BTreeSet, HashMap};

use super::instances::instance_terms;
use super::{
    CONTEXT_WEIGHT, DEFINITION_WEIGHT, Passage, context_terms, definition_terms, query_terms, terms,
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
    // What the page names as an instance of the asked phrase is what the question asks about,
    // in the page's words: it weighs as the question's own.
    query_terms.extend(instance_terms(passages, query));
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
    docs.iter()
        .map(|doc| {
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
                .sum()
        })
        .collect()
}
