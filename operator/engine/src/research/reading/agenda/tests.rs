use super::*;

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_question_of_two_products_is_asked_of_each_alone() {
    let q = "What is the largest value that Python's int and PostgreSQL's bigint type can hold?";
    assert_eq!(
        aspects(q),
        strings(&[
            "What is the largest value that Python's int type can hold?",
            "What is the largest value that PostgreSQL's bigint type can hold?",
        ])
    );
    let q = "How does integer division of negative numbers differ between Python and PostgreSQL?";
    assert_eq!(
        aspects(q),
        strings(&[
            "How does integer division of negative numbers differ in Python?",
            "How does integer division of negative numbers differ in PostgreSQL?",
        ])
    );
    let q =
        "How do the resolutions of a Python datetime object and a PostgreSQL timestamp compare?";
    assert_eq!(
        aspects(q),
        strings(&[
            "How do the resolutions of a Python datetime object compare?",
            "How do the resolutions of a PostgreSQL timestamp compare?",
        ])
    );
    // Tuning set, deep 0.5B: "type" was left to Python's json.loads().
    let q = "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys in a JSON object?";
    assert_eq!(
        aspects(q),
        strings(&[
            "How do Python's json.loads() handle duplicate keys in a JSON object?",
            "How do PostgreSQL's jsonb type each handle duplicate keys in a JSON object?",
        ])
    );
}

#[test]
fn a_question_asking_two_things_has_its_parts_as_written_and_one_thing_has_none() {
    let q = "What is the default transaction isolation level of a PostgreSQL session, and what does Python's sqlite3 module use as the default isolation_level of a connection?";
    assert_eq!(
        aspects(q),
        strings(&[
            "What is the default transaction isolation level of a PostgreSQL session?",
            "What does Python's sqlite3 module use as the default isolation_level of a connection?",
        ])
    );
    assert!(aspects("What does the MERGE command introduced in PostgreSQL 15 do?").is_empty());
    assert!(aspects("What is the default value of shared_buffers?").is_empty());
}

#[test]
fn a_planner_task_that_rewords_the_whole_question_gives_way_to_its_aspects() {
    let q = "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys in a JSON object?";
    let planned = strings(&[
        "What is the difference between json.loads() and jsonb type in Python? How do they handle duplicate keys in a JSON object?",
    ]);
    let agenda = covering(q, &planned);
    assert_eq!(agenda.len(), 2, "{agenda:?}");
    assert!(agenda[0].contains("Python's json.loads()") && !agenda[0].contains("jsonb"));
    assert!(agenda[1].contains("PostgreSQL's jsonb") && !agenda[1].contains("json.loads"));
}

#[test]
fn a_question_with_aspects_is_researched_as_them_then_planned_tasks_saying_more() {
    let q = "What is the largest value that Python's int and PostgreSQL's bigint type can hold?";
    let planned = strings(&[
        "What value can integers hold in general?",
        "What is the range of PostgreSQL's bigint type?",
        "How big can a Python int be?",
    ]);
    // Up to the planner's three tasks: the two aspects, then the first planned task that is one
    // aspect's own and says more than it; a task of no aspect never.
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "What is the largest value that Python's int type can hold?",
            "What is the largest value that PostgreSQL's bigint type can hold?",
            "What is the range of PostgreSQL's bigint type?",
        ])
    );
    let q = "What is the finest time resolution of a Python datetime object and of a PostgreSQL timestamp?";
    let planned = strings(&[
        "research finest time resolution of Python datetime object",
        "research finest time resolution of PostgreSQL timestamp",
        "research finest time resolution of other relevant data types",
    ]);
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "What is the finest time resolution of a Python datetime object?",
            "What is the finest time resolution of a PostgreSQL timestamp?",
        ])
    );
}

#[test]
fn a_task_whose_words_another_holds_is_a_repeat() {
    let planned = strings(&[
        "What is the default transaction isolation level of a PostgreSQL session?",
        "What does Python's sqlite3 module use as the default isolation_level of a connection?",
        "What is the default isolation level of a PostgreSQL session?",
    ]);
    assert_eq!(without_repeats(&planned), planned[..2].to_vec());
    let same = strings(&["TRUNCATE space", "Truncate: space?", "VACUUM"]);
    assert_eq!(
        without_repeats(&same),
        strings(&["TRUNCATE space", "VACUUM"])
    );
    // A question with one aspect only loses its repeats.
    let q = "What is the default value of shared_buffers?";
    assert_eq!(
        covering(
            q,
            &strings(&[
                "shared_buffers default",
                "default shared_buffers value",
                "shared_buffers"
            ])
        ),
        strings(&["default shared_buffers value"])
    );
}

#[test]
fn a_task_of_no_aspect_goes_and_one_aspect_keeps_every_task() {
    let q = "What is the default precision of Python's decimal module, and how many digits can PostgreSQL's numeric type hold?";
    let planned = strings(&[
        "find the default precision of Python's decimal module",
        "determine the maximum number of digits PostgreSQL's numeric type can hold",
        "explain the relationship between these two concepts",
    ]);
    // The question's parts first; the planner's task saying more of one of them fills the
    // third place.
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "What is the default precision of Python's decimal module?",
            "How many digits can PostgreSQL's numeric type hold?",
            "the maximum number of digits PostgreSQL's numeric type can hold",
        ])
    );
    // One aspect: the planner's split stands, words of its own and all.
    let planned = strings(&[
        "json decoding in Python",
        "pickle protocols",
        "csv reader dialects",
    ]);
    assert_eq!(
        covering("How do Python's serialization modules compare?", &planned),
        planned
    );
}

#[test]
fn a_task_is_what_it_is_about_without_the_instruction_and_quotes() {
    assert_eq!(
        plain_task("search for 'python 3.11 toml module'"),
        "python 3.11 toml module"
    );
    assert_eq!(
        plain_task("Research finest time resolution of Python datetime object"),
        "finest time resolution of Python datetime object"
    );
    assert_eq!(
        plain_task("find out if \"tomllib\" can write TOML?"),
        "if tomllib can write TOML?"
    );
    // Nothing but an instruction, or no instruction at all: as written.
    assert_eq!(plain_task("search"), "search");
    assert_eq!(
        plain_task("What does Python's json.loads() do?"),
        "What does Python's json.loads() do?"
    );
    assert_eq!(plain_task("Searching the archive"), "Searching the archive");
}

#[test]
fn follow_ups_are_new_tasks_and_no_page_titles() {
    let title = "What’s New In Python 3.11 — Python 3.11.2 documentation".to_string();
    let asked = strings(&[&title, &title, &title]);
    assert!(follow_ups(&asked, &[], std::slice::from_ref(&title)).is_empty());
    let asked = strings(&[
        "search for 'tomllib write support'",
        "tomllib write support",
        "python 3.11 toml module",
        "marshal internal format",
    ]);
    assert_eq!(
        follow_ups(
            &asked,
            &strings(&["search for 'python 3.11 toml module'"]),
            &[title]
        ),
        strings(&["tomllib write support", "marshal internal format"])
    );
}

#[test]
fn a_task_of_an_aspect_referring_back_may_name_what_it_refers_to() {
    let q =
        "What did Python 3.11 add to asyncio for structured concurrency, and how do you use it?";
    let planned = strings(&[
        "What did Python 3.11 add to asyncio for structured concurrency?",
        "How do you use asyncio for structured concurrency?",
    ]);
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "What did Python 3.11 add to asyncio for structured concurrency?",
            "How do you use asyncio for structured concurrency?",
        ])
    );
}

#[test]
fn an_aspect_referring_back_is_researched_after_what_it_refers_to() {
    let q = "How much faster is Python 3.11 than 3.10 according to its release notes, and what new limit on int/str conversion did it introduce?";
    let planned = strings(&[
        "search for Python 3.11 release notes",
        "compare the release notes for speed improvements",
    ]);
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "How much faster is Python 3.11 than 3.10 according to its release notes?",
            "How much faster is Python 3.11 than 3.10 according to its release notes, and what new limit on int/str conversion did it introduce?",
        ])
    );
}

#[test]
fn a_follow_up_made_of_the_done_tasks_words_is_no_new_task() {
    let done = strings(&[
        "How do Python's json.loads() handle duplicate keys in a JSON object?",
        "How do PostgreSQL's jsonb type each handle duplicate keys in a JSON object?",
    ]);
    let asked = strings(&[
        "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys in a JSON object?",
        "jsonb duplicate keys ordering",
    ]);
    assert_eq!(
        follow_ups(&asked, &done, &[]),
        strings(&["jsonb duplicate keys ordering"])
    );
}

/// Tuning set, deep 0.5B (`multi-py311-tomllib`): the planner's task for the part that refers
/// back said "it" too, and was written after the whole first part, "can it write TOML" twice.
#[test]
fn a_planner_task_that_refers_back_too_does_not_stand_for_a_part_that_refers_back() {
    let q = "Which standard library module for TOML was added in Python 3.11, can it write TOML, and what kind of file object does its load() function need?";
    let planned = strings(&[
        "Which standard library module for TOML was added in Python 3.11?",
        "Can it write TOML, and what kind of file object does its load() function need?",
    ]);
    assert_eq!(
        covering(q, &planned),
        strings(&[
            "Which standard library module for TOML was added in Python 3.11, can it write TOML?",
            "Which standard library module for TOML was added in Python 3.11, can it write TOML, and what kind of file object does its load() function need?",
        ])
    );
}
