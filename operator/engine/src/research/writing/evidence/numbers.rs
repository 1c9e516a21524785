//! Numbers in claims and passages: a number as a value, held as a whole numeral, spelled out as
//! a word, or only restating the question's version.

use std::sync::LazyLock;

use regex::Regex;

use crate::research::reading::passages::holds_word;

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static NUMERAL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d+(?:[.,]\d+)*").expect("valid regex"));

/// Pure: a number as a value: without thousands separators and without a zero fraction
/// ("1,600" and "1600"; "5.0" and "5").
fn number_value(n: &str) -> String {
    let plain: String = n.chars().filter(|c| *c != ',').collect();
    match plain.split_once('.') {
        Some((whole, fraction))
            if !fraction.contains('.') && fraction.chars().all(|c| c == '0') =>
        {
            whole.to_string()
        }
        _ => plain,
    }
}

/// Pure: whether `evidence` states the number `n` as a whole numeral, not as part of a longer
/// one: a claim's "37" is not held by the section number "37.17", nor its "5" by "15" or
/// "5432" (the 0.5B model's "tables can have up to 37 columns" passed on a breadcrumb's
/// "37.17."). Numerals glued to units ("128MB") count.
pub(super) fn holds_number(evidence: &str, n: &str) -> bool {
    number_at(evidence, n).is_some()
}

/// Pure: the byte offset in `text` of its first whole numeral whose value is `n`
/// ([`holds_number`]).
pub(super) fn number_at(text: &str, n: &str) -> Option<usize> {
    let wanted = number_value(n);
    NUMERAL_RE
        .find_iter(text)
        .find(|m| number_value(m.as_str().trim_end_matches(['.', ','])) == wanted)
        .map(|m| m.start())
}

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static VERSIONED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z][A-Za-z0-9_+-]*)\s+v?(\d+(?:\.\d+)*)\b").expect("valid regex")
});

/// Pure: the numbers of `claim` that restate a versioned name of the question `asked`:
/// "PostgreSQL 15" and "Python 3.11" when the question says so too. A model answering "What is
/// the default of max_connections in PostgreSQL 15?" writes "In PostgreSQL 15, the default is
/// 100", and the passage (the version's own manual) never says "15": that number is the
/// question's context, not a claim the passage must back (the 1.5B model's right
/// answer was dropped for it). Empty when `asked` is.
pub(super) fn restated_versions(claim: &str, asked: &str) -> Vec<String> {
    let pairs = |text: &str| -> Vec<(String, String)> {
        VERSIONED_RE
            .captures_iter(text)
            .map(|c| (c[1].to_lowercase(), c[2].to_string()))
            .collect()
    };
    let asked_pairs = pairs(asked);
    pairs(claim)
        .into_iter()
        .filter(|p| asked_pairs.contains(p))
        .map(|(_, n)| n)
        .collect()
}

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static VERSION_NOTE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)\bversions?\s+(\d+(?:\.\d+)*)").expect("valid regex"));

/// Pure: whether `text` speaks of a version other than `n` ("Changed in version 3.5: ... the
/// number of processors multiplied by 5"). Such a passage does not back a sentence about the
/// asked-for version: the 1.5B model gave that 3.5 default as Python 3.11's, and only the
/// missing "3.11" had kept it out (see [`restated_versions`]).
pub(super) fn speaks_of_other_version(text: &str, n: &str) -> bool {
    VERSION_NOTE_RE.captures_iter(text).any(|c| &c[1] != n)
}

/// Numbers documentation spells out ("The default value is three connections").
const NUMBER_WORDS: [&str; 13] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
];

/// Pure: whether the number `n` (digits) is written as a word in `evidence`: a claim's "3" is
/// supported by "three connections".
pub(super) fn spelled_out_in(n: &str, evidence: &str) -> bool {
    let Some(word) = n.parse::<usize>().ok().and_then(|i| NUMBER_WORDS.get(i)) else {
        return false;
    };
    evidence
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case(word))
}

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static DOCS_VERSION_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bv?\d+(?:\.\d+)+(\s+documentation\b)").expect("valid regex")
});

/// Pure: `evidence` without the version of the documentation its first line (the page's title)
/// names ("tomllib — Parse TOML files — Python 3.11.2 documentation"): the build of the docs is
/// no fact of what they document. The 0.5B model wrote "`tomllib` ... was added in Python
/// 3.11.2", and the title held the number. A version the title gives its subject ("What's New
/// In Python 3.11") stays.
pub(super) fn without_docs_version(evidence: &str) -> std::borrow::Cow<'_, str> {
    let (first, rest) = evidence.split_once('\n').unwrap_or((evidence, ""));
    if !DOCS_VERSION_RE.is_match(first) {
        return std::borrow::Cow::Borrowed(evidence);
    }
    let title = DOCS_VERSION_RE.replace_all(first, "$1");
    std::borrow::Cow::Owned(format!("{title}\n{rest}"))
}

/// Question words a claim stating no number may carry that its evidence lacks
/// ([`unread_premise`]).
const PREMISE_WORDS: usize = 3;

/// Pure: whether `claim` says what it states with words of the question `asked` that `evidence`
/// lacks, its subjects and products aside (those are checked as such): two or more when it
/// states a number (a version restated from the question aside), else [`PREMISE_WORDS`]. "The
/// default compression level of Python's pickle module is 3", citing pickle's passage on
/// protocol 3, said of a compression level, which pickle does not have, what the passage says
/// of a protocol; "PostgreSQL 15 automatically scales shared_buffers when memory is added by
/// setting the amount of memory ..." (probe set) restated a premise its passage never made.
pub fn unread_premise(claim: &str, evidence: &str, asked: &str) -> bool {
    use crate::research::reading::passages::{context_terms, subject_terms};
    let restated = restated_versions(claim, asked);
    let states_number = super::NUMBER_RE
        .captures_iter(claim)
        .filter_map(|c| c.get(1))
        .any(|m| !restated.contains(&m.as_str().to_string()));
    let question = super::terms(asked);
    let held = super::terms(evidence);
    let context: Vec<String> = context_terms(asked).into_iter().collect();
    let named = super::terms(&format!(
        "{} {}",
        subject_terms(asked).join(" "),
        context.join(" ")
    ));
    super::terms(claim)
        .iter()
        .filter(|t| question.contains(*t) && !held.contains(*t) && !named.contains(*t))
        .count()
        >= if states_number { 2 } else { PREMISE_WORDS }
}

/// Units of time and size, each by its words and the abbreviations a number is glued to or
/// followed by ("5min", "64MB", "200 ms").
const UNITS: [(&[&str], &[&str]); 10] = [
    (&["microsecond", "microseconds"], &["us"]),
    (&["millisecond", "milliseconds"], &["ms"]),
    (&["second", "seconds"], &["s", "sec"]),
    (&["minute", "minutes"], &["min"]),
    (&["hour", "hours"], &["h"]),
    (&["day", "days"], &["d"]),
    (&["byte", "bytes"], &["b"]),
    (&["kilobyte", "kilobytes"], &["kb"]),
    (&["megabyte", "megabytes"], &["mb"]),
    (&["gigabyte", "gigabytes"], &["gb"]),
];

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static GLUED_UNIT_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\d\s?([A-Za-z]{1,3})\b").expect("valid regex"));

/// Pure: the units of time or size `claim` writes as words ("seconds") that `evidence` holds in
/// none of that unit's forms, as the claim writes them. A unit is a value as a number is: the
/// 0.5B model answered in what unit `statement_timeout` takes a bare value with "it is taken as
/// seconds", copied from another setting's entry, and the asked entry's "it is taken as
/// milliseconds" held every other word of it.
pub(super) fn missing_units(claim: &str, evidence: &str) -> Vec<String> {
    let words = |text: &str| -> std::collections::BTreeSet<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let claimed = words(claim);
    let held = words(evidence);
    let glued: std::collections::BTreeSet<String> = GLUED_UNIT_RE
        .captures_iter(evidence)
        .map(|c| c[1].to_lowercase())
        .collect();
    let mut out = Vec::new();
    for (names, short) in UNITS {
        // "second" alone is as often the ordinal ("the second argument"): only its plural
        // counts as the unit in a claim.
        let Some(said) = names
            .iter()
            .find(|n| **n != "second" && claimed.contains(**n))
        else {
            continue;
        };
        let holds =
            names.iter().any(|n| held.contains(*n)) || short.iter().any(|s| glued.contains(*s));
        if !holds {
            out.push((*said).to_string());
        }
    }
    out
}

/// A number's qualifier naming whose it is: "15 (for `float8`)", "6 (for float4)".
#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static QUALIFIED_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s*(?:[A-Za-z]+\s+)?\((?:for|on|with) `?([A-Za-z_][\w.]*)`?\)")
        .expect("valid regex")
});

/// Pure: whether a number of `claim` is held by `evidence` only with a qualifier naming whose
/// it is ("6 (for `float4`) or 15 (for `float8`) significant decimal digits") and the claim
/// names none of those: the 0.5B model answered "How many digits can PostgreSQL's numeric type
/// hold?" with "PostgreSQL's numeric type can hold up to 15 digits" from that passage (tuning
/// set's question part, asked on its own).
pub(super) fn qualified_for_another(claim: &str, evidence: &str) -> bool {
    let said = claim.to_lowercase();
    let names = |name: &str| holds_word(&said, &name.to_lowercase());
    NUMERAL_RE.find_iter(claim).any(|m| {
        let n = number_value(m.as_str());
        let mut owners = Vec::new();
        for at in NUMERAL_RE.find_iter(evidence) {
            if number_value(at.as_str()) != n {
                continue;
            }
            match QUALIFIED_RE
                .captures(&evidence[at.end()..])
                .and_then(|c| c.get(1))
            {
                Some(owner) => owners.push(owner.as_str().to_string()),
                None => return false,
            }
        }
        !owners.is_empty() && !owners.iter().any(|o| names(o))
    })
}
