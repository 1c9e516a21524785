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
                passages: vec![n],
                sentence: whole_sentences(sentence),
            })
        })
        .collect();
    points.sort_by_key(|p| p.passages[0]);
    Some(points)
}

/// Pure: `s` without a sentence the length limit cut off: up to its last full stop when it has
/// one, else marked as cut ("… showing *hits*, *misses*, *maxsize* and *cur" ends "…").
fn whole_sentences(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() + 2 < MAX_EACH_CHARS || s.ends_with(['.', '!', '?', ')', '`']) {
        return s.to_string();
    }
    // The sentences the limit left whole, split as the report splits them: at "i.e. " the
    // last ". " is no sentence's end ("... a `str` subclass (i.e" was a summary).
    let whole = sentences(s);
    match whole.split_last() {
        Some((last, done)) if !done.is_empty() && !last.ends_with(['.', '!', '?']) => {
            done.join(" ")
        }
        _ => format!("{}…", s.trim_end_matches(|c: char| c.is_alphanumeric())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_asks_one_sentence_per_passage_in_order() {
        let s = each_schema(8).schema;
        let keys: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["1", "2", "3", "4", "5", "6"]);
        assert_eq!(s["required"], json!(["1", "2", "3", "4", "5", "6"]));
        assert_eq!(each_schema(2).schema["required"], json!(["1", "2"]));
    }

    #[test]
    fn each_sentence_cites_its_passage_and_empty_ones_are_skipped() {
        let answer = r#"Here: {"2": "With BY DEFAULT the user value wins.", "1": "ALWAYS needs OVERRIDING SYSTEM VALUE.", "3": "", "9": "out of range"}"#;
        let points = each_points(answer, 4).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].passages, [1]);
        assert_eq!(points[0].sentence, "ALWAYS needs OVERRIDING SYSTEM VALUE.");
        assert_eq!(points[1].passages, [2]);
        assert!(each_points("no json here", 4).is_none());
        // A number copied from a table of contents is no sentence.
        assert!(
            each_points(r#"{"1": "8.1.4", "2": "Serial Types"}"#, 4)
                .unwrap()
                .is_empty()
        );
    }

    /// "... instead of a `str` subclass (i.e" was a summary: the last ". " was an
    /// abbreviation's.
    #[test]
    fn a_cut_sentence_is_not_ended_at_an_abbreviation() {
        let cut = "Members of a StrEnum are strings. There are places in the stdlib that check for an exact str instead of a str subclass (i.e. type(unknown) == str instead of isinstance(unknown, str)), and in those locations you will ne";
        assert!(cut.chars().count() + 2 >= MAX_EACH_CHARS);
        assert_eq!(whole_sentences(cut), "Members of a StrEnum are strings.");
    }

    #[test]
    fn a_sentence_the_limit_cut_ends_at_its_last_full_stop_or_is_marked() {
        let cut = format!(
            "{} Then more words that were cut in the midd",
            "A whole sentence.".repeat(12)
        );
        assert!(cut.chars().count() + 2 >= MAX_EACH_CHARS);
        assert!(whole_sentences(&cut).ends_with("A whole sentence."));
        let one = "word ".repeat(60);
        let out = whole_sentences(one.trim());
        assert!(out.ends_with('…') && !out.ends_with("word…"), "{out}");
        assert_eq!(whole_sentences("Short."), "Short.");
    }
}
