use super::*;

fn prose(heading: &str, text: &str) -> Passage {
    Passage {
        index: 0,
        heading_path: vec![heading.to_string()],
        text: text.to_string(),
        kind: super::super::PassageKind::Prose,
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    (terms(a).remove(0), terms(b).remove(0))
}

#[test]
fn pairs_are_content_words_side_by_side_in_a_noun_phrase() {
    let pairs =
        query_pairs("What happens to the data of an unlogged table in PostgreSQL after a crash?");
    assert_eq!(pairs, [pair("unlogged", "table")]);
    let pairs =
        query_pairs("What is the default transaction isolation level of a PostgreSQL session?");
    assert!(pairs.contains(&pair("isolation", "level")), "{pairs:?}");
    // A verb and its object are no phrase; a product and a frame word pair with nothing.
    let pairs = query_pairs("How do I decode JSON documents in Python?");
    assert!(!pairs.contains(&pair("decode", "json")), "{pairs:?}");
    assert!(pairs.is_empty(), "{pairs:?}");
    assert!(query_pairs("How does the plain VACUUM differ?").len() == 1);
    // A comma parts two things.
    let pairs = query_pairs("Which is faster: the plain VACUUM, TRUNCATE or DELETE?");
    assert_eq!(pairs, [pair("plain", "vacuum")]);
}

#[test]
fn a_passage_writing_the_asked_pair_outranks_one_holding_its_words_apart() {
    let passages = vec![
        prose(
            "Tables",
            "A table can be unlogged; then a crash loses its recent changes.",
        ),
        prose("Storage", "An unlogged table is truncated after a crash."),
        prose("Sequences", "A sequence can be logged or not."),
    ];
    let asked = "What happens to the data of an unlogged table after a crash?";
    assert_eq!(pair_share(&passages[1], &query_pairs(asked)), 1.0);
    assert_eq!(pair_share(&passages[0], &query_pairs(asked)), 0.0);
    let scores = rank(&passages, asked);
    assert!(scores[1] > scores[0], "{scores:?}");
}

#[test]
fn a_code_block_writing_the_pair_in_a_comment_is_not_boosted() {
    let asked = "How does PostgreSQL's jsonb type handle duplicate keys?";
    let mut code = prose(
        "jsonb Subscripting",
        "```\n-- the assigned value must be of the jsonb type as well\n```",
    );
    assert!(pair_share(&code, &query_pairs(asked)) > 0.0);
    code.kind = super::super::PassageKind::Code;
    assert_eq!(pair_share(&code, &query_pairs(asked)), 0.0);
}
