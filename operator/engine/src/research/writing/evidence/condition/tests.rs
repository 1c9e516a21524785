//! Unit tests of `condition`.

use super::*;

const STASH: &str = "stash.showIncludeUntracked: If this is set to true, the `git stash show` command will show the untracked files of a stash entry. Defaults to false.";

const DEADLOCK: &str = "13.3.4. Deadlocks\nSo long as no deadlock situation is detected, a transaction seeking either a table-level or row-level lock will wait indefinitely for conflicting locks to be released. This means it is a bad idea for applications to hold transactions open for long periods of time.";

/// My own questions: the consequence stated without its condition is not what the page says.
#[test]
fn a_consequence_without_its_condition_drops_it() {
    assert!(drops_condition(
        "The `git stash show` command displays the untracked files of a stash entry.",
        STASH
    ));
    assert!(drops_condition(
        "PostgreSQL 15 waits indefinitely for conflicting locks to be released.",
        DEADLOCK
    ));
}

/// A claim keeping the condition, in a condition word or in its own words, keeps it; a claim
/// from another sentence, or from one that opens with no condition, is not judged here.
#[test]
fn a_condition_kept_or_absent_is_no_drop() {
    assert!(!drops_condition(
        "If stash.showIncludeUntracked is true, git stash show shows the untracked files of a stash entry.",
        STASH
    ));
    assert!(!drops_condition(
        "A transaction waits indefinitely for conflicting locks while no deadlock is detected.",
        DEADLOCK
    ));
    assert!(!drops_condition(
        "Until a deadlock situation is detected, a transaction waits indefinitely for conflicting locks.",
        DEADLOCK
    ));
    assert!(!drops_condition(
        "Holding transactions open for long periods of time is a bad idea.",
        DEADLOCK
    ));
    let lru = "functools.lru_cache(maxsize=128): If maxsize is set to None, the LRU feature is disabled and the cache can grow without bound.";
    assert!(!drops_condition(
        "Setting maxsize to None disables the LRU feature.",
        lru
    ));
    assert!(drops_condition(
        "The LRU feature is disabled and the cache can grow without bound.",
        lru
    ));
}
