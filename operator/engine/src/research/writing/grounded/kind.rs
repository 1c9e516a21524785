//! The kind of value a question asks for, when its wording names one: an exception ("What
//! exception is raised ..."), a number ("How many ...", "the maximum ..."), or a version or date
//! ("In which version ...", "When was ... released"), or a name to use ("How do I ...",
//! "Which function ..."). A summary whose sentences hold no value of
//! that kind has not answered, whatever it says about the subject; a passage that holds one is
//! what it leads with.

use std::sync::LazyLock;

use regex::Regex;

use crate::research::reading::passages::{context_terms, is_stop, terms};

/// A kind of value a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// An exception class: `FrozenInstanceError`, `JSONDecodeError`.
    Exception,
    /// A number or amount: "63 bytes", "1,600 columns", "five seconds".
    Number,
    /// A version or a date: "3.11", "2022-10-13", "October 13, 2022".
    Version,
    /// A name to use: a function, class, option or setting (`json.loads`, `--soft`), one the
    /// question does not give ([`holds_for`]).
    Name,
}

/// Phrases that ask for each kind, matched on the lower-cased question.
const ASKS: &[(AnswerKind, &[&str])] = &[
    (
        AnswerKind::Exception,
        &[
            "what exception",
            "which exception",
            "what error",
            "which error",
            "what is raised",
            "exception is raised",
            "error is raised",
        ],
    ),
    (
        AnswerKind::Version,
        &[
            "which version",
            "what version",
            "which python version",
            "which postgresql version",
            "when was",
            "when were",
            "release date",
            "released on",
        ],
    ),
    (
        AnswerKind::Number,
        &[
            "how many",
            "how much",
            "how large",
            "how long",
            "how big",
            "how far",
            "maximum",
            "minimum",
            "max length",
            "maximum length",
            "at most",
            "at least",
            "largest",
            "smallest",
            // A port is a number: "Which TCP port does a PostgreSQL server listen on by
            // default?" was led by "Specifies the TCP/IP port ... on which postgres is to
            // listen", which says none (tuning set).
            "which port",
            "what port",
            "which tcp port",
            "what tcp port",
            "default port",
            "port number",
        ],
    ),
    (
        AnswerKind::Name,
        &[
            "how do i ",
            "how can i ",
            "how should i ",
            "how to ",
            "which function",
            "what function",
            "which method",
            "what method",
            "which option",
            "what option",
            "which command",
            "what command",
        ],
    ),
];

/// Patterns that ask for a kind with a word between the question word and the kind's noun:
/// "Which Python exception does json.loads raise ...?" matched no phrase of [`ASKS`], so the
/// summary led with json.loads' definition and quoted `JSONDecodeError` only further down.
/// The word between must be a name ([`asks_by_pattern`]): "what happens on error" asks what
/// happens.
#[allow(clippy::expect_used)] // constant patterns, checked by the tests
static ASK_PATTERNS: LazyLock<[(AnswerKind, Regex); 4]> = LazyLock::new(|| {
    let re = |p: &str| Regex::new(p).expect("valid regex");
    [
        (
            AnswerKind::Exception,
            re(
                r"\b(?:what|which) (?:(kind|type|class|sort) of (?:[\w.'’-]+ )?|([\w.'’-]+) )(?:exceptions?|errors?)\b",
            ),
        ),
        (
            AnswerKind::Exception,
            re(r"\bwhat (?:does|do|will|would|can) [^?,;]{1,60}? (raise)s?\b"),
        ),
        (
            AnswerKind::Version,
            re(r"\b(?:what|which) ()([\w.'’-]+) versions?\b"),
        ),
        // A whole word: "what is its limitation" (`probe-git-log-follow`) asks for no number.
        (AnswerKind::Number, re(r"\b(limits?)\b")),
    ]
});

/// Verbs a question puts between its question word and "error" ("what happens on error").
const NOT_A_NAME: [&str; 8] = [
    "happens", "happen", "occurs", "occur", "causes", "cause", "returns", "return",
];

/// Pure: whether `pattern` of [`ASK_PATTERNS`] matches `lower`: its group 1, when it takes
/// part ("kind of", "raise"), decides alone; else its group 2 must be a name, not a verb or
/// stop word.
fn asks_by_pattern(pattern: &Regex, lower: &str) -> bool {
    pattern.captures_iter(lower).any(|c| {
        if c.get(1).is_some_and(|m| !m.as_str().is_empty()) {
            return true;
        }
        c.get(2).is_some_and(|w| {
            let w = w.as_str();
            !(is_stop(w) || AUXILIARIES.contains(&w) || NOT_A_NAME.contains(&w))
        })
    })
}

/// Pure: the kind of value `asked` asks for, if its wording names one (the first that does, in
/// the order exception, version, number, name).
pub fn answer_kind(asked: &str) -> Option<AnswerKind> {
    let q = asked.to_lowercase();
    ASKS.iter()
        .find(|(kind, phrases)| {
            phrases.iter().any(|p| q.contains(p))
                || ASK_PATTERNS
                    .iter()
                    .any(|(k, re)| k == kind && asks_by_pattern(re, &q))
        })
        .map(|(kind, _)| *kind)
}

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static EXCEPTION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Warning|Exit|Interrupt)\b|\bSQLSTATE\b")
        .expect("valid regex")
});

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static NUMBER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand|million|billion|unlimited|unbounded|no limit)\b",
    )
    .expect("valid regex")
});

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static VERSION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b\d+\.\d+\b|\b(?:19|20)\d\d\b|\bversion \d+\b|\b(?:january|february|march|april|may|june|july|august|september|october|november|december) \d",
    )
    .expect("valid regex")
});

/// Code names: a code span, a dotted name, a call, an option, a snake_case word.
#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static NAME_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"`[^`\n]+`|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|\b[A-Za-z_]\w*\(|(?:^|\s)--?[a-z][\w-]*|\b[a-z]+_[a-z_]+\b",
    )
    .expect("valid regex")
});

/// Pure: whether `text` holds a value of `kind`.
pub fn holds(kind: AnswerKind, text: &str) -> bool {
    match kind {
        AnswerKind::Exception => EXCEPTION_RE.is_match(text),
        AnswerKind::Number => NUMBER_RE.find_iter(text).any(|m| is_amount(text, m)),
        AnswerKind::Version => VERSION_RE.is_match(text),
        AnswerKind::Name => NAME_RE.is_match(text),
    }
}

/// Pure: whether the number `m` found in `text` states an amount: a digit does; a number word
/// followed by "of" picks out a thing ("aborting one of the transactions"), and was taken for
/// the answer to how long PostgreSQL waits on a lock, so the passage stating "one second" was
/// never led with.
fn is_amount(text: &str, m: regex::Match<'_>) -> bool {
    if m.as_str().starts_with(|c: char| c.is_ascii_digit()) {
        // A footnote's "[1]" marks a note, not an amount ([`is_footnote_mark`]).
        let before = text[..m.start()].trim_end_matches(|c: char| c.is_ascii_digit());
        let after = text[m.start()..].trim_start_matches(|c: char| c.is_ascii_digit());
        return !(before.ends_with('[') && after.starts_with(']'));
    }
    let next = text[m.end()..].split_whitespace().next().map(|w| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    });
    next.as_deref() != Some("of")
}

/// Pure: [`holds`] for the question `asked`: a number counts for "How many X" only as a count
/// of X ([`counts`]), and a name only when the question does not give it. "The `json` module is used to parse and serialize JSON data" names no function for
/// "How do I decode JSON with the json module?"; `json.loads` does.
pub fn holds_for(kind: AnswerKind, text: &str, asked: &str) -> bool {
    if kind == AnswerKind::Number
        && let Some(noun) = counted(asked)
    {
        return counts(text, &noun) && of_count_subject(text, asked);
    }
    if kind != AnswerKind::Name {
        return holds(kind, text);
    }
    let given = asked.to_lowercase();
    NAME_RE.find_iter(text).any(|m| {
        let name = m
            .as_str()
            .trim()
            .trim_matches('`')
            .trim_end_matches('(')
            .to_lowercase();
        !name.is_empty() && !given.contains(&name)
    })
}

/// Pure: what a value of `kind` is called in a sentence.
pub fn kind_name(kind: AnswerKind) -> &'static str {
    match kind {
        AnswerKind::Exception => "exception",
        AnswerKind::Number => "number",
        AnswerKind::Version => "version or date",
        AnswerKind::Name => "name",
    }
}

/// Pure: the questions `asked` asks (itself, when it asks one) that ask for an exception, a
/// number or a version ([`answer_kind`]) no sentence of `said` holds ([`holds_for`] that
/// question), each with its kind. "What does Python's functools.partial return, and how many
/// arguments can a PostgreSQL function take at most?" was answered on `partial` alone, and the
/// report never said the count was missing; "What is the maximum number of entries git stash
/// keeps ...?", asked alone, was answered with the stash's reflog names. A name is left out: a
/// summary names many things.
pub fn parts_without_value(asked: &str, said: &[String]) -> Vec<(String, AnswerKind)> {
    let mut parts = crate::research::reading::queries::split_questions(asked);
    if parts.is_empty() {
        parts.push(asked.trim().trim_end_matches('?').to_string());
    }
    parts
        .into_iter()
        .filter_map(|part| {
            let kind = answer_kind(&part).filter(|k| *k != AnswerKind::Name)?;
            (!said.iter().any(|s| holds_for(kind, s, &part))).then_some((part, kind))
        })
        .collect()
}

/// Pure: whether a sentence states a value: a number, or a default.
pub fn states_value(sentence: &str) -> bool {
    holds(AnswerKind::Number, sentence)
        || crate::research::reading::passages::focus::claims_default(sentence)
}

/// What a summary says when a part of the question goes unanswered ([`parts_without_value`]).
pub const NOT_ANSWERED: &str = "The passages read do not answer";

/// Pure: the sentence saying that no passage read states the `what` (a [`kind_name`], or
/// "answer") that `part` of the question asks for.
pub fn none_states(part: &str, what: &str) -> String {
    format!(
        "{NOT_ANSWERED} “{}”: none states the {what} asked for.",
        part.trim().trim_end_matches('?')
    )
}

/// Pure: why the report `md` answers no part of `asked`, or `None` when it answers one: every
/// part asks for a value of a kind (names aside, [`parts_without_value`]) and no sentence of
/// the report's summary holds one. Such a report is the passages read with a note that they do
/// not answer: "What is the maximum number of entries git stash keeps ...?" ended `Completed`
/// with three sentences on the stash's reflog names before that note.
pub fn answers_no_part(asked: &str, md: &str) -> Option<String> {
    let summary = md
        .split_once("## Summary\n")
        .map(|(_, rest)| rest.split("\n## ").next().unwrap_or(rest))?;
    let said: Vec<String> = crate::research::writing::evidence::sentences(summary)
        .iter()
        .filter(|s| !s.starts_with(NOT_ANSWERED))
        .map(|s| {
            crate::research::writing::links::LINK_RE
                .replace_all(s, "")
                .into_owned()
        })
        .collect();
    let parts = crate::research::reading::queries::split_questions(asked)
        .len()
        .max(1);
    let missing = parts_without_value(asked, &said);
    if missing.len() < parts {
        return None;
    }
    let mut kinds: Vec<&str> = missing.iter().map(|(_, k)| kind_name(*k)).collect();
    kinds.dedup();
    Some(format!(
        "no passage read states the {} asked for",
        kinds.join(" or the ")
    ))
}

/// Verbs that open the clause saying what a "How many X" question counts X of ("can", "does").
const AUXILIARIES: [&str; 16] = [
    "are", "can", "could", "did", "do", "does", "has", "have", "is", "may", "might", "must",
    "should", "was", "were", "will",
];

/// Pure: the terms of what "How many X <verb> ..." counts X of (`identifier` of "How many
/// bytes can a PostgreSQL identifier be at most?"), or the subject of the clause of "the number
/// of X a Y <verb> ..." (`dict` of "the maximum number of keys a Python dict can hold by
/// default"), less the products the question is asked in; empty for a question of another
/// form. Read only as "How many", the dict question was answered with pprint's "*width*
/// (default 80) specifies the desired maximum number of characters".
fn count_subject(asked: &str) -> std::collections::BTreeSet<String> {
    let Some(after) = after_count_phrase(asked) else {
        return Default::default();
    };
    let after = after.as_str();
    let clause = after.split(['?', ',', ';']).next().unwrap_or(after);
    let words: Vec<&str> = clause.split_whitespace().collect();
    let context = context_terms(asked);
    // The verb comes right after the counted noun ("connection slots are reserved").
    if let Some(verb) = words.iter().take(4).position(|w| AUXILIARIES.contains(w)) {
        let counted_noun = terms(&words[..verb].join(" "));
        return terms(&words[verb + 1..].join(" "))
            .into_iter()
            .filter(|t| !context.contains(t) && !counted_noun.contains(t))
            .collect();
    }
    // Or the counted noun opens a clause of its own ("keys a Python dict can hold"): what is
    // counted is of that clause's subject.
    let Some(article) = words
        .iter()
        .take(4)
        .position(|w| matches!(*w, "a" | "an" | "the"))
        .filter(|a| *a > 0)
    else {
        return Default::default();
    };
    let Some(verb) = words
        .iter()
        .skip(article + 1)
        .take(4)
        .position(|w| AUXILIARIES.contains(w))
    else {
        return Default::default();
    };
    let counted_noun = terms(&words[..article].join(" "));
    terms(&words[article + 1..article + 1 + verb].join(" "))
        .into_iter()
        .filter(|t| !context.contains(t) && !counted_noun.contains(t))
        .collect()
}

/// Pure: whether `text` speaks of what the question counts ([`count_subject`]): a count of the
/// right unit about another thing answers nothing. For "How many bytes can a PostgreSQL
/// identifier be at most?" the summary led with `temp_buffers`' "about 64 bytes, per
/// increment".
fn of_count_subject(text: &str, asked: &str) -> bool {
    let subject = count_subject(asked);
    subject.is_empty() || terms(text).iter().any(|t| subject.contains(t))
}

/// Pure: whether the word `w` is a footnote marker ("[1]", "[2]."): the 0.5B model's "all keys
/// in sections are accessible in a case-insensitive manner [1]" was taken for a count of keys.
fn is_footnote_mark(w: &str) -> bool {
    let w = w.trim_end_matches(|c: char| !c.is_alphanumeric() && c != ']');
    w.strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
}

/// Number words a count may be written in.
const NUMBER_WORDS: [&str; 16] = [
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "hundred", "thousand", "million", "billion",
];

/// Pure: what follows "how many " or "number of " in `asked`, lower-cased; `None` for any
/// other question. "What is the maximum number of entries git stash keeps" asks a count of
/// entries as "How many" does: `stash@{0}` in a sentence on the stash's reflog is none.
fn after_count_phrase(asked: &str) -> Option<String> {
    let lower = asked.to_lowercase();
    lower
        .split_once("how many ")
        .or_else(|| lower.split_once("number of "))
        .map(|(_, after)| after.to_string())
}

/// Pure: the noun "How many" asks a count of, lower-cased and without its plural ending
/// ("connection" of "How many connections does ...?"); `None` for any other question.
fn counted(asked: &str) -> Option<String> {
    let after = after_count_phrase(asked)?;
    let noun: String = after
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let stem = noun
        .strip_suffix("ies")
        .or_else(|| noun.strip_suffix('s'))
        .unwrap_or(&noun);
    (stem.chars().count() > 1).then(|| stem.to_string())
}

/// Pure: whether `text` states a count of `noun` (a [`counted`] stem): a number followed by the
/// noun ("100 connections", "three connections"), or a numeral followed by no noun at all ("The
/// default is 100.").
/// "Default five seconds" counts seconds: it was the lead of a report on how many connections
/// Python's sqlite3 module keeps in a pool it does not have.
fn counts(text: &str, noun: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let bare = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    // A numeral starts with a digit ("128", "1,600"; not `sqlite3`, nor a footnote's "[1]").
    let is_numeral =
        |w: &str| bare(w).starts_with(|c: char| c.is_ascii_digit()) && !is_footnote_mark(w);
    let is_number = |w: &str| is_numeral(w) || NUMBER_WORDS.contains(&bare(w).as_str());
    words.iter().enumerate().any(|(i, w)| {
        if !is_number(w) {
            return false;
        }
        // A numeral may end its clause ("is 100."); a number word must count the noun: "the
        // one that created it" is no count.
        let numeral = is_numeral(w);
        if numeral && w.ends_with(['.', ',', ';', ':', ')']) {
            return true;
        }
        match words[i + 1..].iter().find(|n| !is_number(n)) {
            None => numeral,
            Some(next) => {
                let unit = bare(next);
                unit.starts_with(noun) || (numeral && (unit.is_empty() || is_stop(&unit)))
            }
        }
    })
}

#[cfg(test)]
mod tests;
