//! Unit tests of `each`.

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
    assert_eq!(points[0].passages, [1, 2, 3, 4]);
    assert_eq!(points[0].sentence, "ALWAYS needs OVERRIDING SYSTEM VALUE.");
    assert_eq!(points[1].passages, [2, 1, 3, 4]);
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
    assert_eq!(
        whole_sentences(cut, MAX_EACH_CHARS),
        "Members of a StrEnum are strings."
    );
}

#[test]
fn a_sentence_the_limit_cut_ends_at_its_last_full_stop_or_is_marked() {
    let cut = format!(
        "{} Then more words that were cut in the midd",
        "A whole sentence.".repeat(12)
    );
    assert!(cut.chars().count() + 2 >= MAX_EACH_CHARS);
    assert!(whole_sentences(&cut, MAX_EACH_CHARS).ends_with("A whole sentence."));
    let one = "word ".repeat(60);
    let out = whole_sentences(one.trim(), MAX_EACH_CHARS);
    assert!(out.ends_with('…') && !out.ends_with("word…"), "{out}");
    assert_eq!(whole_sentences("Short.", MAX_EACH_CHARS), "Short.");
    // At the limit, a code span at the end is where the limit cut (my own question on
    // `textwrap.shorten`): the sentence before it is kept.
    let cut = "Python's textwrap.shorten() method optional keyword arguments correspond to the instance attributes of `TextWrapper`, documented below. Note that the whitespace is collapsed before the text is passed to the `TextWrapper`";
    assert!(cut.chars().count() + 2 >= MAX_EACH_CHARS);
    assert_eq!(
        whole_sentences(cut, MAX_EACH_CHARS),
        "Python's textwrap.shorten() method optional keyword arguments correspond to the instance attributes of `TextWrapper`, documented below."
    );
    // A last sentence stopped inside its parenthesis is whole, and so is a lone sentence
    // ending in a code span (tuning set: `py-functools-cache-vs-lru`, `py-except-star-semantics`).
    let whole = format!(
        "{} (Some types such as *str* and *int* may be cached separately even when *typed* is false.)",
        "A whole sentence.".repeat(12)
    );
    assert_eq!(whole_sentences(&whole, MAX_EACH_CHARS), whole);
    let lone = format!(
        "{} can only wrap subclasses of `Exception`",
        "word ".repeat(40)
    );
    assert_eq!(whole_sentences(&lone, MAX_EACH_CHARS), lone);
    // A copy of a cut passage is marked once.
    let copied = format!("{} transactions are implicitly…", "word ".repeat(40));
    assert_eq!(whole_sentences(&copied, MAX_EACH_CHARS), copied);
}

/// A sentence copied from its passage until the model stopped mid-word, short of the length
/// limit, loses its torn end; a lone sentence without a stop stays.
#[test]
fn a_torn_last_sentence_is_dropped() {
    let answer = r#"{"1": "It might be longer. In particular, `pg_sleep_until` is notguarant", "2": "Resolution is one microsecond"}"#;
    let points = each_points(answer, 2).unwrap();
    let sentences: Vec<&str> = points.iter().map(|p| p.sentence.as_str()).collect();
    assert_eq!(
        sentences,
        ["It might be longer.", "Resolution is one microsecond"]
    );
}
