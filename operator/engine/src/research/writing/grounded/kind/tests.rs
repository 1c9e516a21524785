//! Unit tests of `kind`.

use super::*;

#[test]
fn the_kind_a_question_asks_for_is_read_from_its_wording() {
    let kind = |q| answer_kind(q);
    assert_eq!(
        kind("What exception is raised when assigning to a field of a frozen dataclass?"),
        Some(AnswerKind::Exception)
    );
    assert_eq!(
        kind("What is the maximum length of an identifier in PostgreSQL?"),
        Some(AnswerKind::Number)
    );
    assert_eq!(
        kind("In which Python version was typing.Self added?"),
        Some(AnswerKind::Version)
    );
    assert_eq!(
        kind("When was PostgreSQL 15 released?"),
        Some(AnswerKind::Version)
    );
    assert_eq!(kind("How does VACUUM FULL differ from plain VACUUM?"), None);
    assert_eq!(kind("What is the default isolation level?"), None);
    // A port is a number (tuning set, `multi-pg-port-pgport`).
    assert_eq!(
        kind("Which TCP port does a PostgreSQL server listen on by default?"),
        Some(AnswerKind::Number)
    );
    assert_eq!(
        kind("Which environment variable sets the port for libpq clients?"),
        None
    );
}

#[test]
fn a_text_holds_a_value_of_the_kind_or_not() {
    use AnswerKind::*;
    assert!(holds(Exception, "raises dataclasses.FrozenInstanceError."));
    assert!(holds(Exception, "a JSONDecodeError will be raised"));
    assert!(!holds(
        Exception,
        "assigning to fields will generate an exception"
    ));
    assert!(holds(Number, "The system uses no more than 63 bytes"));
    assert!(holds(Number, "Default five seconds."));
    assert!(!holds(
        Number,
        "Longer names can be written in commands, but they will be truncated."
    ));
    assert!(holds(Version, "New in version 3.11."));
    assert!(holds(Version, "Release date: 2022-10-13"));
    assert!(!holds(
        Version,
        "The MERGE command conditionally inserts, updates or deletes rows."
    ));
}

#[test]
fn a_name_to_use_counts_only_when_the_question_does_not_give_it() {
    let asked = "How do I decode JSON with the json module in Python?";
    assert_eq!(answer_kind(asked), Some(AnswerKind::Name));
    assert!(!holds_for(
        AnswerKind::Name,
        "The `json` module is used to parse and serialize JSON data.",
        asked
    ));
    assert!(holds_for(
        AnswerKind::Name,
        "Use json.loads() on the string.",
        asked
    ));
    let asked = "How do I undo the last commit but keep its changes staged in git?";
    assert!(holds_for(
        AnswerKind::Name,
        "Run git reset --soft HEAD~1.",
        asked
    ));
    assert!(!holds_for(
        AnswerKind::Name,
        "Undo the commit and keep the changes.",
        asked
    ));
    // Other kinds read the text alone.
    assert!(holds_for(
        AnswerKind::Number,
        "63 bytes",
        "How long can a name be?"
    ));
}

#[test]
fn how_many_asks_a_count_of_its_noun() {
    let asked =
        "How many connections does Python's sqlite3 module keep in its connection pool by default?";
    assert!(!holds_for(
        AnswerKind::Number,
        "Default five seconds",
        asked
    ));
    assert!(!holds_for(
        AnswerKind::Number,
        "How many seconds the connection should wait before raising an exception. Default five seconds",
        asked
    ));
    assert!(!holds_for(
        AnswerKind::Number,
        "If True (default), ProgrammingError will be raised if the database connection is used by a thread other than the one that created it",
        asked
    ));
    assert!(!holds_for(
        AnswerKind::Number,
        "The number of statements that `sqlite3` should cache for this connection. By default, 128 statements",
        asked
    ));
    let asked = "How many connections does PostgreSQL allow by default?";
    assert!(holds_for(
        AnswerKind::Number,
        "The default is typically 100 connections",
        asked
    ));
    assert!(holds_for(AnswerKind::Number, "The default is 100.", asked));
    assert!(holds_for(
        AnswerKind::Number,
        "It allows three connections by default",
        asked
    ));
    assert!(holds_for(
        AnswerKind::Number,
        "The default is 100 (but might be less)",
        asked
    ));
    let asked = "How many entries does the cache hold?";
    assert!(holds_for(
        AnswerKind::Number,
        "It holds up to 128 entries",
        asked
    ));
    // Other number questions are unchanged.
    assert!(holds_for(
        AnswerKind::Number,
        "Default five seconds",
        "How long does it wait?"
    ));
}

/// My own question (the demo): a count of bytes about another setting led its summary.
#[test]
fn a_count_of_the_asked_unit_must_be_about_the_asked_thing() {
    let asked = "How many bytes can a PostgreSQL identifier be at most, and which setting limits Python's recursion depth?";
    assert!(!holds_for(
        AnswerKind::Number,
        "temp_buffers (integer): The cost is about 64 bytes, per increment in temp_buffers.",
        asked
    ));
    assert!(holds_for(
        AnswerKind::Number,
        "The system uses no more than NAMEDATALEN-1 bytes of an identifier; NAMEDATALEN is 64, so the maximum identifier length is 63 bytes.",
        asked
    ));
    let subject = count_subject(asked);
    assert!(
        subject.iter().any(|t| t.starts_with("identif")),
        "{subject:?}"
    );
    assert!(
        !subject
            .iter()
            .any(|t| t.starts_with("postgres") || t.starts_with("byte")),
        "{subject:?}"
    );
    // A question without the verb right after its noun is left to the count alone.
    assert!(count_subject("How many loose objects trigger git gc --auto by default?").is_empty());
}

/// The probe set's `probe-none-py-dict-maxsize`: "the number of X a Y can <verb>" counts X of
/// Y. Its quoted report led with pprint's width, a maximum number of characters.
#[test]
fn a_count_asked_in_a_clause_is_about_the_clause_subject() {
    let asked = "What is the maximum number of keys a Python dict can hold by default?";
    let subject = count_subject(asked);
    assert!(subject.iter().any(|t| t == "dict"), "{subject:?}");
    assert!(
        !subject
            .iter()
            .any(|t| t.starts_with("key") || t.starts_with("hold") || t == "python"),
        "{subject:?}"
    );
    assert!(!holds_for(
        AnswerKind::Number,
        "*width* (default 80) specifies the desired maximum number of characters per line in the output.",
        asked
    ));
    let asked = "What is the maximum number of columns a PostgreSQL table can have?";
    assert!(holds_for(
        AnswerKind::Number,
        "The maximum number of columns for a table is 1600.",
        asked
    ));
    assert!(answers_no_part(
        "What is the maximum number of keys a Python dict can hold by default?",
        "## Summary\n\npprint.PrettyPrinter: “*width* (default 80) specifies the desired maximum number of characters per line in the output” ([pprint](http://docs/pprint.html)).\n"
    )
    .is_some());
}

/// Own hostile question: "the maximum number of entries" asks a count of entries as "how many
/// entries" does; a reflog name's digit is none.
#[test]
fn the_number_of_a_thing_is_a_count_of_it() {
    let asked = "What is the maximum number of entries git stash keeps before dropping old ones?";
    assert_eq!(answer_kind(asked), Some(AnswerKind::Number));
    assert!(!holds_for(
        AnswerKind::Number,
        "Older stashes are found in the reflog of this reference (e.g. `stash@{0}` is the most recently created stash, `stash@{1}` is the one before it).",
        asked
    ));
    assert!(holds_for(
        AnswerKind::Number,
        "The stash keeps at most 100 entries.",
        asked
    ));
    // Asked alone, the question is its own part: the report says it is not answered.
    let reflog = "Older stashes are found in the reflog (e.g. `stash@{0}` is the most recently created stash).".to_string();
    assert_eq!(
        parts_without_value(asked, &[reflog]),
        [(
            "What is the maximum number of entries git stash keeps before dropping old ones"
                .to_string(),
            AnswerKind::Number
        )]
    );
    assert!(
        parts_without_value(asked, &["The stash keeps at most 100 entries.".to_string()])
            .is_empty()
    );
}

/// My own hostile question: a footnote's "[1]" is no count of keys, nor any amount.
#[test]
fn a_footnote_mark_is_no_amount() {
    let asked = "What is the maximum number of keys a Python dict can hold by default?";
    let said = "By default, all keys in sections are accessible in a case-insensitive manner [1].";
    assert!(!holds_for(AnswerKind::Number, said, asked));
    assert!(!holds(AnswerKind::Number, said));
    assert_eq!(parts_without_value(asked, &[said.to_string()]).len(), 1);
    assert!(holds_for(
        AnswerKind::Number,
        "A dict holds up to 100 keys [1].",
        asked
    ));
    assert!(holds(AnswerKind::Number, "Lists [a, b] hold 2 items."));
    assert!(holds(AnswerKind::Number, "The array [10, 20] is read."));
}

/// My own demo question, deep mode: "aborting one of the transactions" is no amount for "how
/// long does PostgreSQL wait on a lock ...?"; "one second" is.
#[test]
fn a_number_word_picking_out_a_thing_is_no_amount() {
    assert!(!holds(
        AnswerKind::Number,
        "PostgreSQL resolves them by aborting one of the transactions involved."
    ));
    assert!(holds(
        AnswerKind::Number,
        "The default is one second (`1s`)."
    ));
    assert!(holds(AnswerKind::Number, "One of 3 slots is reserved."));
    assert!(holds(AnswerKind::Number, "It waits five seconds."));
}

#[test]
fn a_name_between_the_question_word_and_the_kind_still_asks_for_it() {
    let kind = |q| answer_kind(q);
    assert_eq!(
        kind("Which Python exception does json.loads raise on invalid input?"),
        Some(AnswerKind::Exception)
    );
    assert_eq!(
        kind("What kind of error does tomllib.loads raise?"),
        Some(AnswerKind::Exception)
    );
    assert_eq!(
        kind("What does json.loads raise on invalid input?"),
        Some(AnswerKind::Exception)
    );
    assert_eq!(
        kind("What PostgreSQL version added MERGE?"),
        Some(AnswerKind::Version)
    );
    // A verb or a stop word between them asks something else.
    assert_eq!(kind("What happens on error in a COPY?"), None);
    assert_eq!(kind("What is the error message format of psql?"), None);
    // "limit" as a word only (probe set: `probe-git-log-follow`).
    assert_eq!(
        kind("What is the limit on digits of an int?"),
        Some(AnswerKind::Number)
    );
    assert_eq!(
        kind("What does git log --follow do, and what is its limitation?"),
        None
    );
}

/// Probe set: the stash question's report was three sentences on reflog names and a note that
/// none states the number; a report answering no part of a value question is no answer.
#[test]
fn a_report_answering_no_part_of_a_value_question_is_refused() {
    let asked = "What is the maximum number of entries git stash keeps before dropping old ones?";
    let report = |summary: &str| {
        format!(
            "## Summary\n\n{summary}\n\n## Evidence\n\n- [git-stash(1)](http://d/git-stash.html) › DESCRIPTION:\n\n> Keeps at most 50 entries.\n"
        )
    };
    let unanswered = report(
        "The latest stash you created is stored in `refs/stash` ([git-stash(1)](http://d/git-stash.html)). The passages read do not answer “What is the maximum number of entries git stash keeps before dropping old ones”: none states the number asked for.",
    );
    assert_eq!(
        answers_no_part(asked, &unanswered).as_deref(),
        Some("no passage read states the number asked for")
    );
    // A count in the summary answers; the evidence's quotes below it do not count.
    let answered =
        report("The stash keeps at most 100 entries ([git-stash(1)](http://d/git-stash.html)).");
    assert_eq!(answers_no_part(asked, &answered), None);
    // Citations state no value: the page's "(1)" is no count.
    assert!(
        answers_no_part(
            asked,
            &report("Stashes are reflog entries ([git-stash(1)](http://d/git-stash.html)).")
        )
        .is_some()
    );
}

/// A question with a part answered, or one asking for no kind of value, is answered.
#[test]
fn a_report_answering_one_part_or_asked_no_value_is_kept() {
    let two = "What is the default precision of Python's decimal module, and how many digits can PostgreSQL's numeric type hold?";
    let md = "## Summary\n\nThe default precision is 28 places. The passages read do not answer “how many digits can PostgreSQL's numeric type hold”: none states the number asked for.\n";
    assert_eq!(answers_no_part(two, md), None);
    let both_missing =
        "## Summary\n\nDecimal numbers are exact. Numeric values are stored exactly.\n";
    assert!(answers_no_part("What is the maximum precision of Python's decimal module, and how many digits can PostgreSQL's numeric type hold?", both_missing).is_some());
    let explain = "How does VACUUM FULL differ from plain VACUUM?";
    assert_eq!(
        answers_no_part(explain, "## Summary\n\nIt rewrites the table.\n"),
        None
    );
    // No summary: nothing to judge.
    assert_eq!(
        answers_no_part("How many columns can a table have?", "no report"),
        None
    );
}
