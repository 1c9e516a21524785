//! The evidence gate: every citation of a report is checked against what the run actually saw.
//!
//! Pure. A cited URL must be a page the run fetched (its text is stored) or a search result it
//! saw (its snippet is stored); anything else is removed. Each sentence that cites a source is then
//! checked for lexical support in the cited text: the share of its content words (crudely stemmed)
//! that occur there, with every number it states required verbatim and no "not" the text does
//! not say ([`negation_unsupported`]), and every subject it names (its identifiers, code,
//! quoted and capitalised terms, multi-word terms it shares with the question) named by the cited
//! text ([`subject::subjects`]). An optional model judge
//! (`lead::judge_claims`) can overrule the lexical verdicts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use numbers::{
    holds_number, restated_versions, speaks_of_other_version, spelled_out_in, without_docs_version,
};

use super::links::{LINK_RE, normalize_url};
use crate::research::machine::state::RunState;
pub use sentences::sentences;

/// Share of a claim's content words that must occur in the cited text.
pub const SUPPORT_THRESHOLD: f64 = 0.5;
/// Sentences with fewer content words are references ("see [the docs](...)"), not claims.
pub const MIN_CLAIM_TERMS: usize = 3;

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static CITATION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\s*\(\s*\[[^\]]*\]\([^)\s]*\)\s*\)").expect("valid regex"));

#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static NUMBER_RE: LazyLock<Regex> =
    // A unit glued on ("40MB", "200ms") is part of the word, not of the number: without it in
    // the pattern, "maintenance_work_mem is 40MB" had no number to check.
    LazyLock::new(|| Regex::new(r"\b(\d+(?:[.,]\d+)*)[A-Za-z]*\b").expect("valid regex"));

const STOPWORDS: &[&str] = &[
    "the",
    "and",
    "for",
    "are",
    "but",
    "not",
    "you",
    "all",
    "any",
    "can",
    "had",
    "her",
    "was",
    "one",
    "our",
    "out",
    "has",
    "have",
    "him",
    "his",
    "how",
    "its",
    "may",
    "new",
    "now",
    "old",
    "see",
    "two",
    "way",
    "who",
    "did",
    "get",
    "let",
    "say",
    "she",
    "too",
    "use",
    "used",
    "uses",
    "using",
    "with",
    "this",
    "that",
    "from",
    "they",
    "will",
    "would",
    "there",
    "their",
    "what",
    "about",
    "which",
    "when",
    "where",
    "your",
    "into",
    "than",
    "then",
    "them",
    "these",
    "those",
    "some",
    "such",
    "also",
    "each",
    "other",
    "more",
    "most",
    "only",
    "over",
    "very",
    "just",
    "like",
    "been",
    "being",
    "were",
    "does",
    "doing",
    "should",
    "could",
    "while",
    "because",
    "both",
    "between",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "under",
    "again",
    "further",
    "once",
    "here",
    "why",
    "own",
    "same",
    "so",
    "than",
    "is",
    "it",
    "in",
    "on",
    "of",
    "to",
    "a",
    "an",
    "as",
    "at",
    "be",
    "by",
    "or",
    "if",
    "no",
    "do",
    "we",
    "he",
    "via",
    "per",
    "etc",
    "according",
    "page",
    "source",
    "sources",
    "docs",
    "documentation",
];

/// Crude English stemming: enough to match "parses" with "parse" and "objects" with "object".
fn stem(word: &str) -> String {
    let mut w = word.trim_end_matches("'s").to_string();
    for (suffix, replacement) in [
        ("ies", "y"),
        ("ing", ""),
        ("ed", ""),
        ("es", ""),
        ("ly", ""),
        ("s", ""),
    ] {
        if w.len() > suffix.len() + 3 && w.ends_with(suffix) {
            w.truncate(w.len() - suffix.len());
            w.push_str(replacement);
            break;
        }
    }
    // "scale" and "scales" (stemmed "scal") are one word.
    if w.len() > 4 && w.ends_with('e') {
        w.pop();
    }
    w.chars().take(7).collect()
}

/// Content words of a text: lowercase, stemmed, without stopwords and one- or two-letter words.
pub fn terms(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 3 || w.chars().all(|c| c.is_ascii_digit()) && !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// What the run can cite: fetched pages with their text, seen search results with their snippet.
#[derive(Debug, Clone, Default)]
pub struct EvidenceBase {
    /// Normalized URL → (URL, title, text).
    pages: BTreeMap<String, (String, String, String)>,
    /// Normalized URL → (URL, title, snippet), for results that were seen but not read.
    seen: BTreeMap<String, (String, String, String)>,
}

impl EvidenceBase {
    /// Everything the run's researchers read or saw.
    pub fn from_state(state: &RunState) -> Self {
        let mut base = Self::default();
        for r in &state.reports {
            for p in &r.pages {
                base.add_page(&p.url, &p.title, &p.text);
            }
            // Pages read before page texts were recorded still count as fetched.
            for s in &r.fetched {
                base.add_page(&s.url, &s.title, "");
            }
        }
        for r in &state.reports {
            for s in &r.seen {
                base.add_seen(&s.url, &s.title, &s.snippet);
            }
        }
        base
    }

    /// Records a fetched page (the first text recorded for a URL wins).
    pub fn add_page(&mut self, url: &str, title: &str, text: &str) {
        let entry = self
            .pages
            .entry(normalize_url(url))
            .or_insert_with(|| (url.to_string(), title.to_string(), String::new()));
        if entry.2.is_empty() {
            entry.2 = text.to_string();
        }
        self.seen.remove(&normalize_url(url));
    }

    /// Records a search result, unless the page was fetched.
    pub fn add_seen(&mut self, url: &str, title: &str, snippet: &str) {
        let key = normalize_url(url);
        if !self.pages.contains_key(&key) {
            self.seen
                .entry(key)
                .or_insert_with(|| (url.to_string(), title.to_string(), snippet.to_string()));
        }
    }

    /// The original URL a citation resolves to, if the run fetched or saw it.
    pub fn resolve(&self, url: &str) -> Option<&str> {
        let key = normalize_url(url);
        self.pages
            .get(&key)
            .or_else(|| self.seen.get(&key))
            .map(|(u, _, _)| u.as_str())
    }

    /// True when the URL was fetched (not merely seen in search results).
    pub fn was_fetched(&self, url: &str) -> bool {
        self.pages.contains_key(&normalize_url(url))
    }

    /// Title of a fetched or seen URL.
    pub fn title(&self, url: &str) -> Option<&str> {
        let key = normalize_url(url);
        self.pages
            .get(&key)
            .or_else(|| self.seen.get(&key))
            .map(|(_, t, _)| t.as_str())
    }

    /// The text a claim citing `url` is checked against: the page text, or title and snippet.
    pub fn evidence_text(&self, url: &str) -> Option<String> {
        let key = normalize_url(url);
        // The address's words go with the title, on every passage's head: they name the
        // product whose docs the page is in ([`subject::address_words`]).
        if let Some((_, title, text)) = self.pages.get(&key) {
            let address = subject::address_words(url);
            return Some(format!("{title}\n{address}\n{text}"));
        }
        self.seen
            .get(&key)
            .map(|(_, title, snippet)| format!("{title}\n{snippet}"))
    }
}

/// The verdict on one cited claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimCheck {
    /// The sentence, with link targets removed.
    pub claim: String,
    /// The cited URL.
    pub url: String,
    /// Share of the claim's content words found in the cited text (0..=1).
    pub overlap: f64,
    /// Numbers the claim states that the cited text does not contain.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_numbers: Vec<String>,
    /// Subjects the claim names that the cited text does not ([`subject::subjects`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_subjects: Vec<String>,
    /// The verdict.
    pub supported: bool,
    /// Who decided: `lexical` or `model`.
    pub judged_by: &'static str,
}

/// Result of gating one Markdown text.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatedText {
    /// The Markdown with every unverifiable link removed (link text kept).
    pub markdown: String,
    /// Verified URLs the text cites, in order of first citation.
    pub cited: Vec<String>,
    /// Cited URLs the run neither fetched nor saw, removed from the text (normalized).
    pub unverified: Vec<String>,
}

/// A section under one of these headings lists pages read, citing none ([`gate_links`]).
pub const LISTING_HEADINGS: [&str; 2] = ["Closest pages read", "Also read"];

/// Removes citations of URLs the run neither fetched nor saw; bare unverifiable URLs are dropped,
/// links keep their text. Code is not prose: a URL in a fenced block or an inline code span
/// (a quoted sample's `resource = 'https://peps.python.org/pep-%04d' % num`) cites nothing and
/// is left as written (it was cut out of functools' quoted example and counted as invented).
/// Nor does a list of pages read ([`LISTING_HEADINGS`]): a refused task's closest pages, merged
/// into a deep report, were listed under "Sources" as cited.
pub fn gate_links(markdown: &str, base: &EvidenceBase) -> GatedText {
    let mut cited: Vec<String> = Vec::new();
    let mut unverified: Vec<String> = Vec::new();
    let mut out = String::with_capacity(markdown.len());
    let mut in_fence = false;
    let mut listing = false;
    for line in markdown.split_inclusive('\n') {
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#').trim();
            listing = LISTING_HEADINGS.iter().any(|h| heading.starts_with(h));
        }
        let bare = line.trim_start().trim_start_matches(['>', ' ']);
        let fence = bare.starts_with("```") || bare.starts_with("~~~");
        if in_fence || fence {
            out.push_str(line);
            if fence {
                in_fence = !in_fence;
            }
            continue;
        }
        let mut listed = Vec::new();
        let sink = if listing { &mut listed } else { &mut cited };
        out.push_str(&gate_prose(line, base, sink, &mut unverified));
    }
    GatedText {
        markdown: out,
        cited,
        unverified,
    }
}

/// Byte ranges of a line's inline code spans (between pairs of backticks).
pub(super) fn code_spans(line: &str) -> Vec<std::ops::Range<usize>> {
    let ticks: Vec<usize> = line.match_indices('`').map(|(i, _)| i).collect();
    ticks.chunks_exact(2).map(|p| p[0]..p[1]).collect()
}

/// [`gate_links`] on one line outside fenced code: a link or URL starting inside an inline code
/// span is left alone (a link whose text is code, "[`json.loads`](url)", starts outside it).
fn gate_prose(
    text: &str,
    base: &EvidenceBase,
    cited: &mut Vec<String>,
    unverified: &mut Vec<String>,
) -> String {
    let spans = code_spans(text);
    let mut dropped = false;
    let out = LINK_RE.replace_all(text, |caps: &regex::Captures<'_>| {
        let start = caps.get(0).map_or(0, |m| m.start());
        if spans.iter().any(|r| r.contains(&start)) {
            return caps[0].to_string();
        }
        let (text, raw) = match (caps.get(1), caps.get(2), caps.get(3)) {
            (Some(t), Some(u), _) => (Some(t.as_str()), u.as_str()),
            (_, _, Some(u)) => (None, u.as_str()),
            _ => return caps[0].to_string(),
        };
        let trailing: String = {
            let trimmed = raw.trim_end_matches(['.', ',', ';', ':', '!', '?']);
            raw[trimmed.len()..].to_string()
        };
        match base.resolve(raw) {
            Some(original) => {
                if !cited.iter().any(|c| c == original) {
                    cited.push(original.to_string());
                }
                caps[0].to_string()
            }
            None => {
                let key = normalize_url(raw);
                if !unverified.contains(&key) {
                    unverified.push(key);
                }
                match text {
                    Some(t) => t.to_string(),
                    None => {
                        dropped = true;
                        trailing
                    }
                }
            }
        }
    });
    if dropped {
        // A bare URL dropped from brackets leaves them behind: "(Tom’s Obvious Minimal
        // Language, )" was written for a `https://toml.io` the run never read.
        return out
            .replace(", )", ")")
            .replace(" ( )", "")
            .replace(" ()", "");
    }
    out.into_owned()
}

/// The claim a sentence makes: link targets and list markers removed, link texts kept.
fn claim_text(sentence: &str) -> String {
    let text = LINK_RE.replace_all(sentence, |caps: &regex::Captures<'_>| {
        caps.get(1)
            .map(|t| t.as_str().to_string())
            .unwrap_or_default()
    });
    let text = text.trim_start_matches(['-', '*', '+', ' ']);
    let text = text.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ' ');
    // Markdown escapes are no part of the words: a quoted "isolation\_level" was a subject its
    // page ("isolation_level") did not name.
    unescape_markdown(text)
        .replace("()", "")
        .replace("( )", "")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` without Markdown's backslash escapes (`\_` → `_`, `\*` → `*`).
pub use crate::research::reading::passages::unescape_markdown;

/// Checks one claim against one text: term overlap and verbatim numbers.
pub fn support(claim: &str, evidence: &str) -> (f64, Vec<String>) {
    let claim_terms = terms(claim);
    if claim_terms.is_empty() {
        return (0.0, vec![]);
    }
    let evidence_terms = terms(evidence);
    let found = claim_terms.intersection(&evidence_terms).count();
    let evidence = without_docs_version(evidence);
    let missing_numbers: Vec<String> = NUMBER_RE
        .captures_iter(claim)
        .filter_map(|c| c.get(1))
        .map(|m| m.as_str().to_string())
        .filter(|n| !holds_number(&evidence, n) && !spelled_out_in(n, &evidence))
        .collect();
    (found as f64 / claim_terms.len() as f64, missing_numbers)
}

/// Words that negate in a claim: "not", "no", "never", "cannot" and any "...n't".
fn negates(word: &str) -> bool {
    matches!(word, "not" | "no" | "never" | "cannot") || word.ends_with("n't")
}

/// Words that negate or restrict in documentation: a passage saying "non-blocking", "without a
/// timeout" or "unless" may support a claim's "not".
fn negates_in_passage(word: &str) -> bool {
    negates(word)
        || word.starts_with("non-")
        || matches!(
            word,
            "without" | "neither" | "nor" | "none" | "nothing" | "unless" | "unable"
        )
}

/// Pure: a word without its inflection, for matching a claim's verb with the passage's: "set",
/// "sets" and "setting" are one (the shared stemmer keeps words of four letters whole).
fn root(word: &str) -> String {
    for suffix in ["ing", "ies", "es", "ed", "s"] {
        if let Some(r) = word.strip_suffix(suffix)
            && r.chars().count() >= 3
        {
            let r = if suffix == "ing" || suffix == "ed" {
                // "setting" → "sett" → "set"
                let mut c = r.chars().rev();
                match (c.next(), c.next()) {
                    (Some(a), Some(b)) if a == b && !"aeiou".contains(a) => &r[..r.len() - 1],
                    _ => r,
                }
            } else {
                r
            };
            return r.to_string();
        }
    }
    word.to_string()
}

/// Verbs and adverbs a negation passes over to the word it negates ("does not always set").
const NEGATION_SKIPS: &[&str] = &[
    "always",
    "necessarily",
    "actually",
    "really",
    "currently",
    "yet",
    "ever",
    "even",
];

/// Pure: whether a "not" of `claim` lacks the passage's backing. For each negation of the
/// claim, the first content word after it ("does not **set** the timeout") is looked up in the
/// passage: the claim is unsupported when the passage never says that word, or when the
/// sentence holding it that shares most of the claim's words does not negate. The 0.5B model
/// copied "will set the timeout on the socket instance" as "does not set the timeout ...", and
/// cited the paragraph beside it; every other word was on the page, so the share of shared words
/// could not see it. A negative claim is the easiest to get backwards and the hardest
/// for a reader to check, so it needs its own negative sentence.
fn negation_unsupported(claim: &str, passage: &str) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || "'’_-".contains(c)))
            .map(|w| {
                w.trim_matches(['\'', '’', '-'])
                    .replace('’', "'")
                    .to_lowercase()
            })
            .filter(|w| !w.is_empty())
            .collect()
    };
    let claim_words = words(claim);
    let negated: Vec<String> = claim_words
        .iter()
        .enumerate()
        .filter(|(_, w)| negates(w))
        .filter_map(|(i, _)| {
            claim_words[i + 1..]
                .iter()
                .take(4)
                .filter(|w| !NEGATION_SKIPS.contains(&w.as_str()))
                .find(|w| !terms(w).is_empty())
                .map(|w| root(w))
        })
        .collect();
    if negated.is_empty() {
        return false;
    }
    let passage_sentences: Vec<Vec<String>> = passage
        .split(['.', ';', '\n', '!', '?'])
        .map(words)
        .filter(|w| !w.is_empty())
        .collect();
    let claim_terms = terms(claim);
    negated.iter().any(|term| {
        // The sentence the claim was made from: of those holding the negated word, the one
        // sharing most of the claim's words.
        let source = passage_sentences
            .iter()
            .filter(|s| {
                s.iter()
                    .flat_map(|w| w.split('-'))
                    .any(|w| root(w) == *term)
            })
            .max_by_key(|s| terms(&s.join(" ")).intersection(&claim_terms).count());
        source.is_none_or(|s| !s.iter().any(|w| negates_in_passage(w)))
    })
}

/// The lexical verdict on one claim against one text.
#[derive(Debug, Clone, PartialEq)]
pub struct Support {
    /// Share of the claim's content words the text holds.
    pub overlap: f64,
    /// Numbers of the claim the text lacks (a version restated from the question excepted).
    pub missing_numbers: Vec<String>,
    /// Subjects of the claim the text does not name ([`subject::subjects`]).
    pub missing_subjects: Vec<String>,
    /// The text names every subject of the claim and holds its numbers, enough words are
    /// shared, and every "not" is backed.
    pub supported: bool,
}

/// Pure: checks `claim` against `evidence` for the question `asked`. Support means the text
/// says it: the text names each subject of the claim ([`subject::subjects`], the ones it
/// shares with the question included) and holds each of its numbers ([`support`]; a version
/// only restated from the question, [`restated_versions`], is exempt unless the text speaks of
/// another version), backs each "not" ([`negation_unsupported`]), holds the words of the
/// question a number is said of ([`numbers::unread_premise`]), gives no number of a reference
/// entry or of a qualified name ("15 (for `float8`)") to another name
/// ([`entry::number_of_another_entry`], [`numbers::qualified_for_another`]), writes no letter
/// of another script the text lacks ([`script::foreign_letters`]) nor a template's blank
/// ([`slot::unheld_slots`]), and shares at least [`SUPPORT_THRESHOLD`] of its words (a floor).
/// Shared words alone passed "The default value of `wal_writer_delay` is 1 ..." citing a
/// passage that never names `wal_writer_delay` (precision reported 1.00). The grounded
/// answer's check and the run's claim check both judge by this.
pub fn check_support(claim: &str, evidence: &str, asked: &str) -> Support {
    // Pages are stored as Markdown: `max\_pred\_locks\_per\_relation` names the setting a claim
    // writes `max_pred_locks_per_relation`, and was not found by it.
    let evidence = &unescape_markdown(evidence);
    let (overlap, mut missing_numbers) = support(claim, evidence);
    let restated = restated_versions(claim, asked);
    missing_numbers.retain(|n| !restated.contains(n) || speaks_of_other_version(evidence, n));
    let missing_subjects = subject::unnamed(claim, &subject::Named::new(evidence), asked);
    let supported = overlap >= SUPPORT_THRESHOLD
        && missing_numbers.is_empty()
        && missing_subjects.is_empty()
        && !negation_unsupported(claim, evidence)
        && !only_restates(claim, asked)
        && !numbers::unread_premise(claim, evidence, asked)
        && numbers::missing_units(claim, evidence).is_empty()
        && !by_default::unstated_default(claim, evidence, asked)
        && !previously::from_the_past(claim, evidence)
        && !condition::drops_condition(claim, evidence)
        && !entry::number_of_another_entry(claim, evidence, &restated)
        && !numbers::qualified_for_another(claim, evidence)
        && script::foreign_letters(claim, evidence).is_empty()
        && slot::unheld_slots(claim, evidence).is_empty();
    Support {
        overlap,
        missing_numbers,
        missing_subjects,
        supported,
    }
}

/// Pure: whether `claim` is made only of the words of `given` (the question, and where the
/// caller knows it the entry its passage documents): it states nothing its passage was needed for, and on a yes/no question it asserts "yes" whatever the passage says. The 0.5B
/// model answered "Does PostgreSQL's CLUSTER command keep the table ordered when new rows are
/// inserted later?" with "PostgreSQL's CLUSTER command keeps the table ordered when new rows are
/// inserted later", citing the paragraph that says the changes are not clustered; every word
/// was on the page, so the share of shared words passed it.
pub fn only_restates(claim: &str, given: &str) -> bool {
    let question = terms(given);
    let claimed = terms(claim);
    !question.is_empty() && !claimed.is_empty() && claimed.is_subset(&question)
}

/// Pure: whether `line` is a list item labelling what follows with a link: the grounded
/// report's "- [page](url) › 20.4. Resource Consumption:" and "- Also from [page](url) › ...:"
/// over each quoted passage. Its words are a page's title and headings, not a claim, whatever
/// its section numbers do to the sentence splitter.
fn is_link_label(line: &str) -> bool {
    let t = line.trim();
    let Some(item) = t.strip_prefix(['-', '*', '+']) else {
        return false;
    };
    let item = item.trim_start();
    let item = item.strip_prefix("Also from ").unwrap_or(item);
    item.starts_with('[') && t.ends_with(':') && LINK_RE.find(item).is_some_and(|m| m.start() == 0)
}

/// Pure: whether `line` is a list item naming one page and nothing more, as a researcher's
/// closest pages are listed ("- sqlite3 — DB-API 2.0 interface ... — http://.../sqlite3.html"):
/// its words are the page's title, no claim. Deep mode's study keeps such lists; counted as
/// claims the page did not support, ten of them gave one deep report precision 0.27.
fn lists_a_page(line: &str, base: &EvidenceBase) -> bool {
    let Some(item) = line.trim().strip_prefix(['-', '*', '+']) else {
        return false;
    };
    let urls: Vec<&str> = LINK_RE
        .captures_iter(item)
        .filter_map(|c| c.get(2).or_else(|| c.get(3)))
        .map(|m| m.as_str())
        .collect();
    let [url] = urls.as_slice() else {
        return false;
    };
    let Some(title) = base.title(url) else {
        return false;
    };
    let words = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    words(&LINK_RE.replace_all(item, "")).is_subset(&words(title))
}

/// Checks every sentence of a (gated) text that cites a source the run holds; `asked` is the
/// question, whose versioned names a sentence may restate ([`restated_versions`]).
pub fn check_claims(markdown: &str, base: &EvidenceBase, asked: &str) -> Vec<ClaimCheck> {
    let mut checks = Vec::new();
    let mut cache: BTreeMap<String, String> = BTreeMap::new();
    let prose: String = markdown
        .lines()
        .filter(|l| !is_link_label(l) && !lists_a_page(l, base))
        .collect::<Vec<_>>()
        .join("\n");
    for sentence in sentences(&prose) {
        let urls: Vec<String> = LINK_RE
            .captures_iter(&sentence)
            .filter_map(|c| c.get(2).or_else(|| c.get(3)))
            .filter_map(|m| base.resolve(m.as_str()).map(str::to_string))
            .collect();
        if urls.is_empty() {
            continue;
        }
        // The citations themselves ("([json — JSON encoder and decoder](url))") are no part of
        // the claim: a page's title would be a subject every other page it is checked against
        // must name, and its words would count as shared with the page it names.
        let claim = claim_text(&CITATION_RE.replace_all(&sentence, ""));
        // A line ending in a colon introduces what follows (the grounded report's "- [page](url)
        // › heading:" over each quoted passage): a label, not a claim. Its heading's names
        // (`parse_int=Non…` of a cut signature) were judged as subjects and failed.
        // "Other common use cases include:." (a lead-in given a stop) introduces too.
        if terms(&claim).len() < MIN_CLAIM_TERMS
            || claim.trim_end_matches(['.', ' ']).ends_with(':')
        {
            continue;
        }
        let mut seen_urls = BTreeSet::new();
        for url in urls {
            if !seen_urls.insert(url.clone()) {
                continue;
            }
            let evidence = cache
                .entry(url.clone())
                .or_insert_with(|| base.evidence_text(&url).unwrap_or_default());
            let Support {
                overlap,
                missing_numbers,
                missing_subjects,
                supported,
            } = local::check_by_passage(&claim, evidence, asked);
            checks.push(ClaimCheck {
                supported,
                claim: claim.clone(),
                url,
                overlap: (overlap * 1000.0).round() / 1000.0,
                missing_numbers,
                missing_subjects,
                judged_by: "lexical",
            });
        }
    }
    checks
}

mod by_default;
mod condition;
mod entry;
pub mod local;
mod numbers;
mod previously;
mod script;
mod sentences;
mod slot;
pub mod subject;
pub mod swap;

#[cfg(test)]
mod tests;
