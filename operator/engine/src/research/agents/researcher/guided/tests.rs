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

/// My own demo question: five Python pages were read for a question whose second half asks of
/// PostgreSQL, and that half names no subject of its own to search for.
#[test]
fn a_product_no_page_read_is_of_is_searched_with_its_part() {
    let task = "What does Python's functools.partial return, and how many arguments can a PostgreSQL function take at most?";
    let python = page(
        "http://docs/python3.11-doc/html/library/functools.html",
        "functools — Higher-order functions — Python 3.11.2 documentation",
        "functools.partial(func, /, *args, **keywords)\nReturn a new partial object.",
    );
    let searches = product_searches(task, std::slice::from_ref(&python), &[]);
    assert_eq!(searches.len(), 1, "{searches:?}");
    assert_eq!(searches[0].owner.as_deref(), Some("postgresql"));
    assert!(
        searches[0].subject.starts_with("how many arguments"),
        "{searches:?}"
    );
    let words = queries::plain_words(&searches[0].query);
    for w in ["arguments", "postgresql", "function"] {
        assert!(words.contains(&w.to_string()), "{searches:?}");
    }
    assert!(!words.contains(&"partial".to_string()), "{searches:?}");
    // Searched already: not again.
    let again = queries::normalise(&searches[0].query);
    assert!(product_searches(task, std::slice::from_ref(&python), &[again]).is_empty());
    // A PostgreSQL page read (its address names the product): nothing to search.
    let pg = page(
        "http://docs/postgresql-doc-15/html/xfunc.html",
        "38.3. User-Defined Functions",
        "Functions can take base types as arguments.",
    );
    assert!(product_searches(task, &[python, pg], &[]).is_empty());
    // One product asked: its pages were the first pass's to find.
    assert!(
        product_searches(
            "How many arguments can a PostgreSQL function take?",
            &[],
            &[]
        )
        .is_empty()
    );
}

/// My own demo question: a PostgreSQL page on JSON functions was read for its json half, so
/// the product counted as covered and the port half went unsearched and unsaid.
#[test]
fn a_page_of_the_product_that_does_not_speak_to_its_part_leaves_it_searched() {
    let task = "Which Python exception does json.loads raise on invalid input, and what is PostgreSQL's default port?";
    let python = page(
        "http://docs/python3.11-doc/html/library/json.html",
        "json — JSON encoder and decoder — Python 3.11.2 documentation",
        "json.loads(s): If the data being deserialized is not a valid JSON document, a JSONDecodeError will be raised.\nexception json.JSONDecodeError: Subclass of ValueError. This can be used to raise an exception if invalid JSON numbers are encountered in the input.",
    );
    let pg_json = page(
        "http://docs/postgresql-doc-15/html/functions-json.html",
        "9.16. JSON Functions and Operators",
        "The default is to return NULL when the path does not match.",
    );
    let searches = product_searches(task, &[python.clone(), pg_json.clone()], &[]);
    assert_eq!(searches.len(), 1, "{searches:?}");
    assert_eq!(searches[0].owner.as_deref(), Some("postgresql"));
    let words = queries::plain_words(&searches[0].query);
    assert!(words.contains(&"port".to_string()), "{searches:?}");
    // The page on connection settings speaks to it.
    let pg_port = page(
        "http://docs/postgresql-doc-15/html/runtime-config-connection.html",
        "20.3. Connections and Authentication",
        "port (integer): The TCP port the server listens on; 5432 by default.",
    );
    assert!(product_searches(task, &[python, pg_json, pg_port], &[]).is_empty());
}

/// My own demo question: a long page holding every word of the part, each in another passage,
/// does not speak to it.
#[test]
fn a_product_page_speaks_to_its_part_in_one_passage() {
    let task = "Which Python exception does tomllib.loads raise on invalid TOML, and how many columns can a PostgreSQL table have at most?";
    let toml = page(
        "http://docs/python3.11-doc/html/library/tomllib.html",
        "tomllib — Parse TOML files — Python 3.11.2 documentation",
        "tomllib.loads(s): Load TOML from a str object. A TOMLDecodeError will be raised on an invalid TOML document.\n\nexception tomllib.TOMLDecodeError: Subclass of ValueError.",
    );
    let codes = page(
        "http://docs/postgresql-doc-15/html/errcodes-appendix.html",
        "Appendix A. PostgreSQL Error Codes",
        "Table A.1 lists all the error codes.\n\nMany conditions have the same code.\n\n54011 | too_many_columns column limit",
    );
    assert_eq!(
        product_searches(task, &[toml.clone(), codes.clone()], &[]).len(),
        1
    );
    let basics = page(
        "http://docs/postgresql-doc-15/html/ddl-basics.html",
        "5.1. Table Basics",
        "There is a limit on how many columns a table can contain. It is between 250 and 1600.",
    );
    assert!(product_searches(task, &[toml, codes, basics], &[]).is_empty());
}

fn hit(url: &str, title: &str) -> SearchHit {
    SearchHit {
        url: url.into(),
        title: title.into(),
        snippet: String::new(),
        engine: "docs".into(),
    }
}

/// Tuning set, `multi-py311-tomllib` in deep mode with the 1.5B model: the second task's
/// sibling had taken `tomllib`'s page, the only result naming TOML, and the second task read
/// five other pages and was refused for want of it (the gate's label: `TOML`).
#[test]
fn a_page_a_sibling_took_is_read_for_what_keeps_the_pages_read_from_answering() {
    let read = [page(
        "http://docs/python3.11-doc/html/library/pickle.html",
        "pickle — Python object serialization",
        "§ pickle › pickle.load(file)\nRead the pickled representation of an object from the open file object file.",
    )];
    let tomllib = hit(
        "http://docs/python3.11-doc/html/library/tomllib.html",
        "tomllib — Parse TOML files — Python 3.11.2 documentation",
    );
    let formats = hit(
        "http://docs/python3.11-doc/html/library/fileformats.html",
        "File Formats — Python 3.11.2 documentation",
    );
    let hits = [&formats, &tomllib];
    let taken: std::collections::BTreeSet<String> =
        [tomllib.url.clone(), formats.url.clone()].into();
    let missing = ["TOML".to_string()];
    assert_eq!(
        shared_reads(&missing, &read, &hits, &taken),
        [tomllib.url.as_str()]
    );
    // Not taken by a sibling: the researcher's own reading picks it, not this.
    assert!(shared_reads(&missing, &read, &hits, &[formats.url.clone()].into()).is_empty());
    // Nothing missing, nothing read again.
    assert!(shared_reads(&[], &read, &hits, &taken).is_empty());
    // A label's joining words name nothing: "`tomllib` together with `pickle`" reads the page
    // titled by either name, not one titled "Working together".
    assert_eq!(
        label_words(&[
            "`tomllib` together with `pickle`".into(),
            "`lru_cache` other than in passing".into()
        ]),
        ["tomllib", "pickle", "lru_cache"]
    );
    // Tuning set, `multi-json-duplicate-keys` in deep mode: the jsonb task took Python's
    // `json.html`, and the json.loads task was refused on "`json.loads` other than in passing".
    assert_eq!(
        label_words(&["`json.loads` other than in passing".into()]),
        ["json.loads", "json"]
    );
}
