//! Pure text helpers for statements: a table row as prose, a version note's version, a
//! sentence completed by the one after it (its value, or what happens otherwise) or to the
//! whole a piece was copied from, and a lead-in told from a statement before its colon.

use super::kind::{AnswerKind, holds, holds_for};

/// Pure: a passage made of table rows as prose: each row's wordiest cell (the extractor
/// writes a row as `| cell   cell   cell |`). PostgreSQL's operator table put "| *`numeric_type`*
/// `/` *`numeric_type`* → … |", pipes and all, in a summary; its description cell, "Division
/// (for integral types, division truncates the result towards zero)", is the statement. Any
/// other text is returned as it is.
pub(super) fn table_row_prose(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() || !lines.iter().all(|l| l.trim_start().starts_with('|')) {
        return text.to_string();
    }
    let wordy = |cell: &str| {
        cell.split_whitespace()
            .filter(|w| w.chars().filter(|c| c.is_alphabetic()).count() >= 3)
            .count()
    };
    lines
        .iter()
        .filter_map(|l| {
            l.trim()
                .trim_matches('|')
                .split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .max_by_key(|c| wordy(c))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Pure: the version of a "Changed in version 3.8: ..." note, as (major, minor, patch).
pub(super) fn change_version(sentence: &str) -> Option<(u32, u32, u32)> {
    let rest = sentence
        .trim_start()
        .trim_start_matches(['*', '_'])
        .strip_prefix("Changed in version ")?;
    let number: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = number
        .trim_end_matches('.')
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    let major = parts.next()??;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

/// Pure: `chosen`, one of `sentences`, joined with the sentence after it when `chosen` holds no
/// value of the `kind` asked for and the next one, referring back ("it", "this", "they" among
/// its first words), holds one: "There is a limit on how many columns a table can contain."
/// was quoted without its "Depending on the column types, it is between 250 and 1600."
pub(super) fn with_following_value(
    sentences: &[String],
    chosen: String,
    kind: Option<AnswerKind>,
    asked: &str,
) -> String {
    let Some(k) = kind.filter(|k| *k != AnswerKind::Name) else {
        return chosen;
    };
    if holds_for(k, &chosen, asked) {
        return chosen;
    }
    let next = sentences
        .iter()
        .position(|s| *s == chosen)
        .and_then(|i| sentences.get(i + 1));
    let Some(next) = next else {
        return chosen;
    };
    let refers = next.split_whitespace().take(6).any(|w| {
        matches!(
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
                .as_str(),
            "it" | "this" | "they" | "these"
        )
    });
    if refers && holds(k, next) {
        format!("{} {}", chosen.trim_end(), next.trim())
    } else {
        chosen
    }
}

/// Pure: the sentence after `sentences[i]` when it says what happens when that sentence's
/// condition does not hold: it opens with "Otherwise" ("If the result fits in the *width*, it
/// is returned. Otherwise, enough words are dropped from the end ..."). A lead-in to an example
/// ends with its full stop instead of its colon; one that only introduces the example is none.
/// A condition said without its alternative answers half of a question asking what happens.
pub(super) fn alternative_after(sentences: &[String], i: usize) -> Option<String> {
    let next = sentences.get(i + 1)?.trim();
    let opener = next.split_whitespace().next()?;
    if !opener
        .trim_matches(|c: char| !c.is_alphanumeric())
        .eq_ignore_ascii_case("otherwise")
    {
        return None;
    }
    if next.ends_with(':') {
        statement_before_colon(next)
    } else {
        Some(next.to_string())
    }
}

/// Pure: `chosen`, one of `sentences` (or one ended at its colon), joined with the sentence
/// after it when that one says what happens otherwise ([`alternative_after`]).
pub(super) fn with_alternative(sentences: &[String], chosen: String) -> String {
    let at = sentences.iter().position(|s| {
        s.trim() == chosen.trim() || statement_before_colon(s).as_deref() == Some(chosen.trim())
    });
    match at.and_then(|i| alternative_after(sentences, i)) {
        Some(alt) => format!("{} {alt}", chosen.trim_end()),
        None => chosen,
    }
}

/// Fewest words of a piece the model copied from inside a passage's sentence that is
/// completed to that sentence ([`completed_tail`]).
const MIN_TAIL_WORDS: usize = 4;

/// Pure: the sentence of `passages` that `text` is the end of, when `text` opens inside it
/// with a lower-case word (no code name) and is at least [`MIN_TAIL_WORDS`] long. The 0.5B
/// model copied "contains the same key more than once, all the key/value pairs are kept" from
/// "Also, if a JSON object within the value contains the same key more than once, ..." into
/// a summary (tuning set, deep mode).
pub(super) fn completed_tail(text: &str, passages: &[&str]) -> Option<String> {
    let first = text.split_whitespace().next()?;
    if !first.starts_with(|c: char| c.is_ascii_lowercase())
        || !first
            .trim_end_matches([',', ';', ':'])
            .chars()
            .all(|c| c.is_ascii_lowercase())
        || text.split_whitespace().count() < MIN_TAIL_WORDS
    {
        return None;
    }
    let norm = |s: &str| {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        s.trim_end_matches(['.', '!', '?']).to_string()
    };
    let tail = norm(text);
    passages
        .iter()
        .flat_map(|p| crate::research::writing::evidence::sentences(p))
        .find(|s| {
            let whole = norm(s);
            whole.len() > tail.len() && whole.ends_with(&format!(" {tail}"))
        })
}

/// How a credit line opens: who wrote a change, not what it does.
const CREDIT_OPENERS: [&str; 7] = [
    "contributed by",
    "patch by",
    "original patch by",
    "written by",
    "implemented by",
    "reported by",
    "initial patch by",
];

/// Pure: whether `text` is only a credit line ("(Contributed by Raymond Hettinger in
/// bpo-38200.)"): it says who, and nothing of the subject. It led the summary of my own question
/// on `itertools.pairwise` as the statement of the release notes' passage, whose first sentence
/// ("Add itertools.pairwise().") was too short to be one, and the 1.5B model copied one into a
/// deep report (tuning set).
pub(super) fn is_credit(text: &str) -> bool {
    let t = text
        .trim()
        .trim_start_matches(['(', '*', '_', '“', '"'])
        .to_lowercase();
    CREDIT_OPENERS.iter().any(|o| t.starts_with(o))
}

/// Words a sentence that only introduces what follows its colon ends with ("... include:",
/// "... avoids these problems by:", "... are as follows:").
const INTRODUCING: &[&str] = &[
    "include",
    "includes",
    "including",
    "following",
    "follows",
    "by",
    "as",
    "are",
    "is",
    "be",
    "to",
    "of",
    "with",
    "for",
    "from",
    "these",
    "those",
    "below",
    "example",
    "examples",
    "such",
    "like",
    "namely",
    "using",
    "via",
    "and",
    "or",
    "the",
    "a",
    "an",
    "its",
    "their",
    "how",
    "when",
    "where",
    "which",
    "that",
    "this",
    "was",
    "were",
    "has",
    "have",
    "called",
    "e.g",
    "i.e",
    "here",
    "options",
    "values",
];

/// Fewest words of a colon-ended sentence that states something.
const MIN_COLON_STATEMENT_WORDS: usize = 6;

/// Pure: `text` ended with a full stop instead of its colon when it states something before
/// the colon ("The difference between shallow and deep copying is only relevant for compound
/// objects (objects that contain other objects, like lists or class instances):" is the
/// answer, and was dropped as a lead-in); `None` when it does not end in a colon or only
/// introduces what follows ("Other common use cases include:", "... the following
/// constants:").
pub fn statement_before_colon(text: &str) -> Option<String> {
    let t = text.trim_end();
    let body = t.trim_end_matches('.').strip_suffix(':')?.trim_end();
    let words: Vec<String> = body
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '.')
                .trim_end_matches('.')
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    let last = words.last()?;
    let introduces = INTRODUCING.contains(&last.as_str())
        || words.iter().any(|w| w == "following" || w == "follows");
    (words.len() >= MIN_COLON_STATEMENT_WORDS && !introduces).then(|| format!("{body}."))
}

/// Share of a sentence's content words that one sentence said already must hold for it to be
/// that sentence again in other words.
const REWORDED_SHARE: f64 = 0.8;

/// Fewest content words a sentence needs before [`rewords`] judges it: short sentences share
/// most of their few words with each other and still say different things.
const REWORDED_MIN_WORDS: usize = 6;

/// Pure: whether `text` says again, in other words, one of `said` (sentences kept already):
/// one of them holds at least [`REWORDED_SHARE`] of its content words (stemmed). The 1.5B
/// model answered what `MERGE` does with "The MERGE command introduced in PostgreSQL 15
/// performs actions that modify rows ..." and then "The MERGE command is described as
/// performing actions that modify rows ...", citing other passages; both reached the summary.
/// A point is dropped only when every sentence of it rewords: "PostgreSQL supports building
/// indexes without locking out writes. This method is invoked by ..." lost its first
/// sentence alone, and "This method" then named nothing.
pub(super) fn rewords(text: &str, said: &[String]) -> bool {
    let words = crate::research::writing::evidence::terms(text);
    if words.len() < REWORDED_MIN_WORDS {
        return false;
    }
    said.iter().any(|s| {
        let before = crate::research::writing::evidence::terms(s);
        let held = words.iter().filter(|w| before.contains(*w)).count();
        held as f64 >= REWORDED_SHARE * words.len() as f64
    })
}

/// Pure: whether `text` is a question, no statement: a FAQ's heading the model copied ("How
/// does the `OrderedDict` work?") answers nothing in a summary.
pub(super) fn is_question(text: &str) -> bool {
    text.trim_end().ends_with('?')
}
