//! Unit tests of `metric`.

use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn tokens_are_unicode_words_with_case_kept() {
    assert_eq!(
        tokens("Héllo, wörld! foo_bar 42 — ß"),
        vec!["Héllo", "wörld", "foo_bar", "42", "ß"]
    );
    assert!(tokens(" ,.- ").is_empty());
}

#[test]
fn identical_texts_are_perfect_and_exact() {
    let s = score_page("one two three four five", "one, two three. four five");
    assert_eq!(
        s,
        PageScore {
            tp: 1.0,
            fp: 0.0,
            fn_: 0.0,
            exact: true
        }
    );
    let sum = summarize(&[s]);
    assert!(close(sum.f1, 1.0) && close(sum.precision, 1.0) && close(sum.recall, 1.0));
    assert!(close(sum.accuracy, 1.0));
}

#[test]
fn extra_predicted_text_counts_as_false_positives() {
    // truth: 5 tokens -> 2 shingles; predicted adds one token -> 3 shingles, 2 shared.
    let s = score_page("a b c d e", "a b c d e f");
    assert!(close(s.tp, 2.0 / 3.0) && close(s.fp, 1.0 / 3.0) && close(s.fn_, 0.0));
    assert!(!s.exact);
    let sum = summarize(&[s]);
    assert!(close(sum.precision, 2.0 / 3.0));
    assert!(close(sum.recall, 1.0));
    assert!(close(sum.f1, 2.0 * (2.0 / 3.0) / (2.0 / 3.0 + 1.0)));
    assert!(close(sum.accuracy, 0.0));
}

#[test]
fn repeated_shingles_are_a_multiset() {
    // truth has "x x x x" twice (5 x's), prediction once (4 x's).
    let s = score_page("x x x x x", "x x x x");
    assert!(close(s.tp, 0.5) && close(s.fn_, 0.5) && close(s.fp, 0.0));
}

#[test]
fn short_texts_give_one_shingle() {
    let s = score_page("hello world", "hello world");
    assert_eq!(
        s,
        PageScore {
            tp: 1.0,
            fp: 0.0,
            fn_: 0.0,
            exact: true
        }
    );
    let s = score_page("hello world", "hello there");
    assert!(close(s.tp, 0.0) && close(s.fp, 0.5) && close(s.fn_, 0.5));
}

#[test]
fn empty_prediction_counts_for_recall_only() {
    let s = score_page("a b c d", "");
    assert!(close(s.fn_, 1.0));
    let sum = summarize(&[s, score_page("a b c d", "a b c d")]);
    // precision is averaged over the one page with tp+fp > 0, recall over both.
    assert!(close(sum.precision, 1.0));
    assert!(close(sum.recall, 0.5));
    assert!(close(sum.accuracy, 0.5));
}

#[test]
fn both_empty_counts_nowhere_but_is_exact() {
    let s = score_page("", "");
    assert_eq!(
        s,
        PageScore {
            tp: 0.0,
            fp: 0.0,
            fn_: 0.0,
            exact: true
        }
    );
    let sum = summarize(&[s]);
    assert!(close(sum.precision, 0.0) && close(sum.recall, 0.0) && close(sum.f1, 0.0));
    assert!(close(sum.accuracy, 1.0));
}
