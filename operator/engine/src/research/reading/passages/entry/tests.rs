//! Unit tests of `entry`.

use super::*;

#[test]
fn the_entry_page_of_an_asked_for_name_is_recognised_by_its_title() {
    let q = "What does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15 released?";
    assert!(is_entry_page("MERGE", q));
    assert!(!is_entry_page("E.8. Release 15.13", q));
    let q = "What is typing.Self and in which Python version was it added?";
    assert!(is_entry_page(
        "typing — Support for type hints — Python 3.11.2 documentation",
        q
    ));
    assert!(!is_entry_page("types — Dynamic type creation", q));
    let q =
        "In PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?";
    assert!(is_entry_page("TRUNCATE", q) && is_entry_page("VACUUM", q));
    assert!(!is_entry_page("CREATE TABLE", q));
    // A section number is not part of the name; several words must all be asked about.
    let q = "How does CREATE INDEX CONCURRENTLY differ from a standard CREATE INDEX in PostgreSQL?";
    assert!(is_entry_page("CREATE INDEX", q));
    assert!(!is_entry_page("11.2. Index Types", q));
}

/// Probe set (`git describe`): a manual page's title is its command, hyphens parting the words.
#[test]
fn a_manual_pages_title_names_its_command() {
    let q = "What does git describe output, and which tags does it consider by default?";
    assert!(is_entry_page("git-describe(1)", q));
    assert!(!is_entry_page("git-tag(1)", q));
    // One word is the product of every Git question, not its subject.
    assert!(!is_entry_page("git(1)", q));
    // The words in order, as words.
    assert!(!is_entry_page(
        "git-describe(1)",
        "Can git use describe-ish names?"
    ));
    assert!(is_entry_page(
        "git-stash(1)",
        "What happens to the stash entry when git stash pop fails?"
    ));
    // Not a manual page's title: the usual rule.
    assert!(!is_entry_page("git describe (notes)", q));
}
