use super::*;

const TITLES: [&str; 6] = [
    "What’s New In Python 3.11 — Python 3.11.2 documentation",
    "What’s New In Python 3.7 — Python 3.11.2 documentation",
    "Coroutines and Tasks — Python 3.11.2 documentation",
    "E.5. Release 15.16",
    "E.21. Release 15",
    "Chapter 15. Parallel Query",
];

#[test]
fn a_page_of_another_release_does_not_answer_for_the_asked_one() {
    assert_eq!(
        of_asked_release(
            "What did Python 3.11 add to asyncio for structured concurrency?",
            &TITLES
        ),
        [true, false, true, false, false, true]
    );
    // A major release's minor releases are its own; a chapter's number is no release.
    assert_eq!(
        of_asked_release("When was PostgreSQL 15 released?", &TITLES),
        [true, true, true, true, true, true]
    );
    assert_eq!(
        of_asked_release("What changed in PostgreSQL 14?", &TITLES[3..]),
        [false, false, true]
    );
}

#[test]
fn a_task_naming_no_release_or_left_with_no_page_keeps_every_page() {
    assert_eq!(
        of_asked_release("What does asyncio.TaskGroup do?", &TITLES),
        [true; 6]
    );
    assert_eq!(
        of_asked_release("What did Python 3.12 add?", &TITLES[1..2]),
        [true]
    );
    // A release compared with the named one is asked as well.
    assert_eq!(
        of_asked_release("How much faster is Python 3.11 than 3.7?", &TITLES[..3]),
        [true, true, true]
    );
    assert_eq!(version("3.11?"), Some("3.11"));
    assert_eq!(version("E.21."), None);
}
