//! The article-extraction quality metric of the public Article Extraction Benchmark
//! (scrapinghub/article-extraction-benchmark), which the extraction bench scores with.
//!
//! Texts are compared as multisets of 4-token shingles of `\w+` tokens; every page weighs the
//! same because its tp/fp/fn are normalised by their sum before averaging.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

/// Unicode-aware `\w+`, the token definition of the metric.
static WORD: LazyLock<Regex> = LazyLock::new(|| {
    // A constant pattern that is known to compile.
    Regex::new(r"\w+").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// Shingle width fixed by the metric.
const SHINGLE: usize = 4;

/// Splits a text into its `\w+` tokens, case kept.
pub fn tokens(text: &str) -> Vec<&str> {
    WORD.find_iter(text).map(|m| m.as_str()).collect()
}

/// Multiset of consecutive `SHINGLE`-token windows; a shorter non-empty text gives one shingle.
fn shingles<'a>(toks: &[&'a str]) -> HashMap<Vec<&'a str>, u64> {
    let mut out: HashMap<Vec<&'a str>, u64> = HashMap::new();
    if toks.is_empty() {
        return out;
    }
    if toks.len() < SHINGLE {
        out.insert(toks.to_vec(), 1);
        return out;
    }
    for w in toks.windows(SHINGLE) {
        *out.entry(w.to_vec()).or_insert(0) += 1;
    }
    out
}

/// Normalised counts of one page (tp + fp + fn = 1 unless all are zero).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PageScore {
    /// Share of shingles found in both texts.
    pub tp: f64,
    /// Share of predicted shingles not in the truth.
    pub fp: f64,
    /// Share of true shingles not predicted.
    pub fn_: f64,
    /// Whether the predicted token list equals the true one exactly.
    pub exact: bool,
}

/// Scores one predicted text against the ground truth.
pub fn score_page(truth: &str, predicted: &str) -> PageScore {
    let t_toks = tokens(truth);
    let p_toks = tokens(predicted);
    let exact = t_toks == p_toks;
    let t = shingles(&t_toks);
    let p = shingles(&p_toks);
    let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
    for (k, &tc) in &t {
        let pc = p.get(k).copied().unwrap_or(0);
        tp += tc.min(pc);
        fn_ += tc.saturating_sub(pc);
    }
    for (k, &pc) in &p {
        let tc = t.get(k).copied().unwrap_or(0);
        fp += pc.saturating_sub(tc);
    }
    let sum = (tp + fp + fn_) as f64;
    if sum == 0.0 {
        return PageScore {
            tp: 0.0,
            fp: 0.0,
            fn_: 0.0,
            exact,
        };
    }
    PageScore {
        tp: tp as f64 / sum,
        fp: fp as f64 / sum,
        fn_: fn_ as f64 / sum,
        exact,
    }
}

/// Precision of one page; `None` when the page does not count for the precision average.
fn page_precision(s: &PageScore) -> Option<f64> {
    if s.fp == 0.0 && s.fn_ == 0.0 && s.tp > 0.0 {
        return Some(1.0);
    }
    (s.tp + s.fp > 0.0).then(|| s.tp / (s.tp + s.fp))
}

/// Recall of one page; `None` when the page does not count for the recall average.
fn page_recall(s: &PageScore) -> Option<f64> {
    if s.fp == 0.0 && s.fn_ == 0.0 && s.tp > 0.0 {
        return Some(1.0);
    }
    (s.tp + s.fn_ > 0.0).then(|| s.tp / (s.tp + s.fn_))
}

/// Aggregate result over a set of pages.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Harmonic mean of the averaged precision and recall.
    pub f1: f64,
    /// Precision averaged over pages with tp + fp > 0.
    pub precision: f64,
    /// Recall averaged over pages with tp + fn > 0.
    pub recall: f64,
    /// Share of pages whose token lists match exactly.
    pub accuracy: f64,
    /// Number of pages scored.
    pub pages: usize,
}

/// Aggregates page scores as the README defines.
pub fn summarize(scores: &[PageScore]) -> Summary {
    let mean = |xs: Vec<f64>| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let precision = mean(scores.iter().filter_map(page_precision).collect());
    let recall = mean(scores.iter().filter_map(page_recall).collect());
    let f1 = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    let accuracy = if scores.is_empty() {
        0.0
    } else {
        scores.iter().filter(|s| s.exact).count() as f64 / scores.len() as f64
    };
    Summary {
        f1,
        precision,
        recall,
        accuracy,
        pages: scores.len(),
    }
}

#[cfg(test)]
mod tests;
