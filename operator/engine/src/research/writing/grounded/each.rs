//! The grounded answer of a model with JSON mode: one sentence per passage. Asked for a few
//! points over eight passages, the 1.5B model cited side passages (lru_cache's `cache_info`, not
//! "leaving the maxsize at its default value of 128", which was passage 1) or said the task back
//! three times ("... differ in how they handle default values and updates.", citing [1, 2, 3],
//! [4, 5, 6] and [7, 8]) and every point was dropped. Asked what each of the best six passages
//! says, it has one passage in view per sentence, and the checks are the same. Measured on the 16
//! questions where it had lost facts: 27 → 30 of 37 key facts, 13 → 22 in the report's own words.

use serde_json::{Value, json};

use super::{Point, extract_json, extract_json_object};
use crate::llm::JsonSchema;
use crate::research::writing::evidence::sentences;

/// Passages the form asks about: the best ones (six sentences of at most [`MAX_EACH_CHARS`] fit
/// the 400-token output budget of the small models' profile; with four, answers in passages 5
/// and 6 were lost: 25 of 37 key facts against 30).
pub const EACH_PASSAGES: usize = 6;
/// Longest sentence per passage in characters.
const MAX_EACH_CHARS: usize = 220;
/// Fewest words with letters a sentence needs: "8.1.4" (a table of contents' line, copied) is
/// no answer, though its passage holds it.
const MIN_SENTENCE_WORDS: usize = 3;

/// The schema of the per-passage form for `count` passages: an object with one string per
/// passage number, in order (grammar-based servers generate properties in schema order, and
/// serde_json's map keeps "1" < "2" < ... for up to nine).
pub fn each_schema(count: usize) -> JsonSchema {
    let count = count.clamp(1, EACH_PASSAGES);
    let mut properties = serde_json::Map::new();
    for n in 1..=count {
        properties.insert(
            n.to_string(),
            json!({"type": "string", "maxLength": MAX_EACH_CHARS}),
        );
    }
    let required: Vec<String> = (1..=count).map(|n| n.to_string()).collect();
    JsonSchema {
        name: "grounded_each".to_string(),
        schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        }),
        strict: false,
    }
}

/// Pure: the points of a per-passage answer (`{"1": "...", "2": ""}`): one per non-empty
/// sentence, citing its passage; numbers outside `1..=count` are ignored. `None` when the answer
/// is no such object.
pub fn each_points(answer: &str, count: usize) -> Option<Vec<Point>> {
    let value = extract_json(answer)
        .ok()
        .filter(Value::is_object)
        .or_else(|| extract_json_object(answer).ok())?;
    let object = value.as_object()?;
    let mut points: Vec<Point> = object
        .iter()
        .filter_map(|(k, v)| {
            let n: usize = k.trim().trim_matches(['[', ']']).parse().ok()?;
            let sentence = v.as_str()?.trim();
            let words = sentence
                .split_whitespace()
                .filter(|w| w.chars().any(char::is_alphabetic))
                .count();
            ((1..=count).contains(&n) && words >= MIN_SENTENCE_WORDS).then(|| Point {
                passages: own_then_others(n, count),
                sentence: without_torn_tail(&whole_sentences(sentence, MAX_EACH_CHARS)),
                written_for: Some(n),
            })
        })
        .collect();
    points.sort_by_key(|p| p.passages[0]);
    Some(points)
}

/// Pure: the passages a sentence written for passage `n` is checked against: its own first,
/// then its neighbours, then the rest of the `count` shown. The 0.5B model skipped a key with
/// "" and wrote every later passage's sentence one key too far ("4": passage 3's "Plain VACUUM
/// ... reclaims space"), so each was checked against the wrong passage and dropped; a
/// sentence is now cited to the shown passage that supports it, as in the points form.
fn own_then_others(n: usize, count: usize) -> Vec<usize> {
    let mut order = vec![n];
    for m in [n.wrapping_sub(1), n + 1].into_iter().chain(1..=count) {
        if (1..=count).contains(&m) && !order.contains(&m) {
            order.push(m);
        }
    }
    order
}

/// Pure: `s` without a sentence the length limit `limit` (in characters) cut off: up to its
/// last full stop when it has one, else marked as cut ("… showing *hits*, *misses*, *maxsize*
/// and *cur" ends "…"). A limit of 0 judges any sentence without a stop as cut.
pub(super) fn whole_sentences(s: &str, limit: usize) -> String {
    let s = s.trim();
    if s.chars().count() + 2 < limit || ends_stopped(s) {
        return s.to_string();
    }
    // The sentences the limit left whole, split as the report splits them: at "i.e. " the
    // last ". " is no sentence's end ("... a `str` subclass (i.e" was a summary). At the
    // limit, a last sentence ending in a code span or a parenthesis without a stop was cut
    // there ("... Note that the whitespace is collapsed before the text is passed to the
    // `TextWrapper`", my own question on `textwrap.shorten`); a lone one is kept whole.
    let whole = sentences(s);
    match whole.split_last() {
        Some((last, done)) if !done.is_empty() && !ends_stopped(last) => done.join(" "),
        // A copy of a passage cut short already ends "…" (the 1.5B model's deep reports on
        // the tuning set ended "... implicitly……").
        _ if s.ends_with([')', '`', '…']) => s.to_string(),
        _ => format!("{}…", s.trim_end_matches(|c: char| c.is_alphanumeric())),
    }
}

/// Pure: whether `s` ends in a stop, closing marks after it aside ("… even when *typed* is
/// false.)").
fn ends_stopped(s: &str) -> bool {
    s.trim_end()
        .trim_end_matches([')', '"', '”', '’', '*', '`'])
        .ends_with(['.', '!', '?'])
}

/// Pure: `sentence` without a last sentence that ends in no stop after whole ones: a passage
/// copied until the model stopped mid-word ("... server load. In particular, `pg_sleep_until`
/// is notguarant", tuning set, cut short of the schema's length limit). One sentence without a
/// stop is kept: small models often leave the stop out.
pub(super) fn without_torn_tail(sentence: &str) -> String {
    let parts = sentences(sentence);
    match parts.split_last() {
        Some((last, done))
            if !done.is_empty()
                && !last
                    .trim_end()
                    .ends_with(['.', '!', '?', ')', '`', '"', '”']) =>
        {
            done.join(" ")
        }
        _ => sentence.to_string(),
    }
}

#[cfg(test)]
mod tests;
