//! Unit tests of `queries`.

use super::*;

#[test]
fn placeholders_small_models_copy_are_recognised() {
    for q in [
        "example1",
        "example 2",
        "Example3",
        "query",
        "search query",
        "<search terms>",
        "{query}",
        "...",
        "your query here",
        "string",
        "keyword1 keyword2",
    ] {
        assert!(is_placeholder(q), "{q}");
    }
    for q in [
        "json.loads example",
        "asyncio TaskGroup exceptions",
        "python json decode",
        "PostgreSQL serializable isolation",
        "query planner postgres",
        "test discovery unittest",
    ] {
        assert!(!is_placeholder(q), "{q}");
    }
}

#[test]
fn screen_refuses_empty_placeholder_and_repeated_queries() {
    let already = vec![normalise("Python json decode")];
    assert_eq!(screen("   ", &already), Err(Refusal::Empty));
    assert_eq!(screen("\"\"", &already), Err(Refusal::Empty));
    assert_eq!(screen("example1", &already), Err(Refusal::Placeholder));
    assert_eq!(
        screen("python JSON  decode.", &already),
        Err(Refusal::Repeat)
    );
    assert_eq!(
        screen(" json.loads object_hook ", &already),
        Ok("json.loads object_hook".to_string())
    );
}

#[test]
fn the_subject_is_searched_by_name_and_a_dotted_name_by_its_module() {
    // The product is not the name searched: MERGE is, alone and with its product (alone,
    // "merge" found Git's pages).
    let q = "What does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15 released?";
    let s = seed_queries(q);
    assert!(s.contains(&"merge".to_string()), "{s:?}");
    assert_eq!(s.last().map(String::as_str), Some("PostgreSQL merge"));
    let q = "What is typing.Self and in which Python version was it added?";
    let s = seed_queries(q);
    assert!(s.contains(&"typing.self".to_string()), "{s:?}");
    assert!(s.contains(&"typing".to_string()), "{s:?}");
    assert_eq!(
        modules_of(
            "Is concurrent.futures.ThreadPoolExecutor faster than asyncio.gather() in 3.11?"
        ),
        ["concurrent.futures", "asyncio"]
    );
}

#[test]
fn a_task_asking_two_things_has_two_parts_each_naming_its_subject() {
    assert_eq!(
        question_parts(
            "What does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15 released?"
        ),
        vec![
            "What does the MERGE command introduced in PostgreSQL 15 do",
            "when was PostgreSQL 15 released"
        ]
    );
    assert_eq!(
        question_parts("What is typing.Self and in which Python version was it added?"),
        vec![
            "What is typing.Self",
            "in which Python version was it added typing.self"
        ]
    );
    assert_eq!(
        question_parts("Is Python's list.sort() stable, and what does it return?"),
        vec![
            "Is Python's list.sort() stable",
            "what does it return list.sort"
        ]
    );
    assert_eq!(
        question_parts("What is json? How do I decode it?"),
        vec!["What is json", "How do I decode it"]
    );
    // One question: no parts. "and" joining two things asked about is not a second question.
    assert!(question_parts("How do I decode JSON with the json module in Python?").is_empty());
    assert!(question_parts("What is the difference between VACUUM and VACUUM FULL?").is_empty());
    assert!(
        question_parts("What is the finest resolution of a datetime and of a timestamp?")
            .is_empty()
    );
}

#[test]
fn the_task_is_searched_as_written_and_as_keywords() {
    assert_eq!(
        seed_queries("How do I decode JSON with the json module in Python?"),
        vec![
            "How do I decode JSON with the json module in Python?".to_string(),
            "decode json module python".to_string(),
            "json".to_string(),
            "Python json".to_string()
        ]
    );
    assert_eq!(
        seed_queries("How does asyncio.TaskGroup handle exceptions?")[2],
        "asyncio.taskgroup"
    );
    // A product named in passing is no subject: "python" alone returns Python's most
    // generic pages, which then crowded out `pickle.html`.
    assert_eq!(
        seed_queries("Which pickle protocol does Python 3.11 use by default?"),
        vec![
            "Which pickle protocol does Python 3.11 use by default?".to_string(),
            "pickle protocol python 3.11 use default".to_string(),
        ]
    );
    // A task that is already keywords is searched once.
    assert_eq!(
        seed_queries("json decoder"),
        vec!["json decoder".to_string()]
    );
    assert!(seed_queries("  ").is_empty());
}

#[test]
fn a_task_that_only_names_a_subject_is_given_the_questions_ask() {
    let question =
        "In PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?";
    let tasks: Vec<String> = ["TRUNCATE", "plain VACUUM", "DELETE"]
        .map(String::from)
        .to_vec();
    assert_eq!(
        anchored_tasks(question, &tasks),
        [
            "TRUNCATE: In PostgreSQL, which reclaims disk space immediately?",
            "plain VACUUM: In PostgreSQL, which reclaims disk space immediately?",
            "DELETE: In PostgreSQL, which reclaims disk space immediately?",
        ]
    );
    // Tasks that ask something stay as they are.
    let asked: Vec<String> = [
        "How does PostgreSQL's jsonb type handle duplicate keys?",
        "How does Python's json.loads() handle duplicate keys?",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(
        anchored_tasks(
            "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys?",
            &asked
        ),
        asked
    );
    // A bare task beside an asking one: only the bare one is anchored.
    let mixed: Vec<String> = ["jsonb", "How does json.loads() treat duplicate keys?"]
        .map(String::from)
        .to_vec();
    let anchored = anchored_tasks(
        "How do json.loads() and jsonb handle duplicate keys?",
        &mixed,
    );
    assert!(
        anchored[0].starts_with("jsonb: ") && anchored[0].ends_with("handle duplicate keys?"),
        "{anchored:?}"
    );
    assert_eq!(anchored[1], mixed[1]);
}

#[test]
fn a_task_that_refers_back_is_written_after_the_task_it_refers_to() {
    let tasks: Vec<String> = [
        "What does PostgreSQL's EXPLAIN ANALYZE do differently from plain EXPLAIN?",
        "Is it safe to run on an UPDATE?",
    ]
    .map(String::from)
    .to_vec();
    let question = "What does PostgreSQL's EXPLAIN ANALYZE do differently from plain EXPLAIN, and is it safe to run on an UPDATE?";
    assert_eq!(
        anchored_tasks(question, &tasks)[1],
        "What does PostgreSQL's EXPLAIN ANALYZE do differently from plain EXPLAIN? Is it safe to run on an UPDATE?"
    );
    let asyncio: Vec<String> = [
        "What did Python 3.11 add to asyncio for structured concurrency?",
        "How do you use it in asyncio?",
    ]
    .map(String::from)
    .to_vec();
    assert!(anchored_tasks("q", &asyncio)[1].starts_with("What did Python 3.11 add"));
    // A pronoun after the task's own subject, or in the first task, refers to nothing before it.
    let own: Vec<String> = [
        "What is tomllib?",
        "Is json.loads strict, and does it accept NaN?",
        "Can it write TOML?",
    ]
    .map(String::from)
    .to_vec();
    let anchored = anchored_tasks("q", &own);
    assert_eq!(anchored[1], own[1]);
    assert_eq!(
        anchored[2],
        "Is json.loads strict, and does it accept NaN? Can it write TOML?"
    );
    let first: Vec<String> = vec!["Is it fast?".to_string()];
    assert_eq!(anchored_tasks("q", &first), first);
}

#[test]
fn subjects_of_two_products_are_each_searched_with_their_product() {
    // Tuning set, multi-datetime-timestamp-resolution: every result was a Python page.
    let q = "What is the finest time resolution of a Python datetime object and of a PostgreSQL timestamp?";
    let s = seed_queries(q);
    assert!(s.iter().any(|x| x == "Python datetime"), "{s:?}");
    assert!(s.iter().any(|x| x == "PostgreSQL timestamp"), "{s:?}");
    // One product's subjects are searched together, and each with the product.
    let one = seed_queries("How do PostgreSQL's varchar and text types differ?");
    assert!(one.iter().any(|x| x == "varchar"), "{one:?}");
    assert!(one.iter().any(|x| x == "PostgreSQL varchar"), "{one:?}");
}

/// My own demo questions: a part with a subject of its own gets no name of another part, and
/// the product another part asks of is appended only to a part that refers back.
#[test]
fn a_part_gets_the_tasks_names_only_when_it_names_none_and_products_only_when_it_refers_back() {
    let t = "What happens when git stash pop hits a conflict, and how long does PostgreSQL wait on a lock before checking for deadlock?";
    assert_eq!(
        question_parts(t),
        [
            "What happens when git stash pop hits a conflict",
            "how long does PostgreSQL wait on a lock before checking for deadlock"
        ]
    );
    let t = "What does Python's functools.partial return, and how many arguments can a PostgreSQL function take at most?";
    assert_eq!(
        question_parts(t),
        [
            "What does Python's functools.partial return",
            "how many arguments can a PostgreSQL function take at most"
        ]
    );
    let t = "What is the default port of PostgreSQL, and which environment variable sets it?";
    assert_eq!(
        question_parts(t)[1],
        "which environment variable sets it postgresql"
    );
}
