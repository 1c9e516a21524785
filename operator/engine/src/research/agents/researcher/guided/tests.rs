//! Unit tests of `guided`.

use super::*;

fn page(url: &str, title: &str, text: &str) -> PageExtract {
    PageExtract {
        url: url.into(),
        title: title.into(),
        text: text.into(),
    }
}

/// `multi-datetime-timestamp-resolution`: every page read was Python's; `datetime.html`
/// names `datetime.timestamp()`, which is no page about "a PostgreSQL timestamp".
#[test]
fn a_subject_no_page_read_is_about_is_searched_in_its_product() {
    let task = "What is the finest time resolution of a Python datetime object and of a PostgreSQL timestamp?";
    assert_eq!(owner_of(task, "timestamp").as_deref(), Some("postgresql"));
    let python = page(
        "http://docs/python3.11-doc/html/library/datetime.html",
        "datetime — Basic date and time types",
        "§ datetime › datetime Objects › datetime.timestamp()\nReturn POSIX timestamp corresponding to the datetime instance.",
    );
    let searches = subject_searches(task, std::slice::from_ref(&python), &[]);
    assert_eq!(
        searches,
        [SubjectSearch {
            subject: "timestamp".into(),
            owner: Some("postgresql".into()),
            query: "postgresql timestamp".into(),
        }]
    );
    // Already searched: not again.
    assert!(
        subject_searches(
            task,
            std::slice::from_ref(&python),
            &["postgresql timestamp".into()]
        )
        .is_empty()
    );
    // A page naming `copy.copy` in its text covers it (no product asked).
    let copy = page(
        "http://docs/python3.11-doc/html/library/copy.html",
        "copy — Shallow and deep copy operations",
        "§ copy — Shallow and deep copy operations\nThe difference between shallow and deep copying: copy.copy(x) returns a shallow copy, copy.deepcopy(x) a deep one.",
    );
    assert!(
        subject_searches(
            "How does copy.copy() differ from copy.deepcopy()?",
            &[copy],
            &[]
        )
        .is_empty()
    );
    // A PostgreSQL page naming it covers it.
    let pg = page(
        "http://docs/postgresql-doc-15/html/datatype-datetime.html",
        "8.5. Date/Time Types",
        "§ 8.5. Date/Time Types › timestamp resolution\nPostgreSQL timestamp values have a resolution of 1 microsecond.",
    );
    assert!(subject_searches(task, &[python, pg], &[]).is_empty());
}

/// A task naming one subject searched it by name already.
#[test]
fn a_single_subject_task_gets_no_second_search() {
    let task = "What is the default maxsize of functools.lru_cache?";
    assert!(subject_searches(task, &[], &[]).is_empty());
}
