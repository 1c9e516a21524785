//! Unit tests of `swap`.

use super::*;

const GROUPS: &str = "The nesting structure of the current exception is preserved. BaseExceptionGroup extends BaseException and it can wrap any exception, while ExceptionGroup extends Exception and it can only wrap subclasses of Exception.";

#[test]
fn a_clause_said_of_the_other_name_is_a_swap() {
    assert!(swaps_names(
        "ExceptionGroup extends BaseException and it can wrap any exception, while BaseExceptionGroup extends Exception and it can only wrap subclasses of Exception.",
        GROUPS
    ));
    assert!(!swaps_names(
        "BaseExceptionGroup extends BaseException and it can wrap any exception.",
        GROUPS
    ));
    assert!(swaps_names(
        "json.loads() serializes obj to a JSON formatted str.",
        "json.dumps(obj, *, skipkeys=False): Serialize obj to a JSON formatted str using this conversion table."
    ));
}

#[test]
fn a_clause_naming_the_source_clause_own_name_or_none_is_no_swap() {
    // The entry's name for "It": the source clause names no one else.
    assert!(!swaps_names(
        "maintenance_work_mem defaults to 64 megabytes of memory.",
        "It defaults to 64 megabytes of memory (64MB)."
    ));
    // The source's name is in the claim, in another place.
    assert!(!swaps_names(
        "functools.cache returns the same as lru_cache(maxsize=None), a thin wrapper.",
        "Returns the same as lru_cache(maxsize=None), creating a thin wrapper around a dictionary lookup."
    ));
    // A name the source says in passing is not the slot's.
    assert!(!swaps_names(
        "The lock_timeout can only occur while waiting for locks.",
        "Unlike statement_timeout, this timeout can only occur while waiting for locks."
    ));
    // Too few words to tell whose they are.
    assert!(!swaps_names(
        "work_mem is memory.",
        "shared_buffers is memory."
    ));
}

#[test]
fn a_word_written_as_code_is_a_name_that_can_be_swapped() {
    let json = "Because the `json` type stores an exact copy of the input text, it will preserve semantically-insignificant white space between tokens. By contrast, `jsonb` does not preserve white space.";
    assert!(swaps_names(
        "The `jsonb` type stores an exact copy of the input text, preserving white space.",
        json
    ));
    assert!(!swaps_names(
        "The `json` type stores an exact copy of the input text.",
        json
    ));
    // Written plainly, the words have no name's shape: nothing to compare.
    assert!(!swaps_names(
        "The jsonb type stores an exact copy of the input text.",
        "Because the json type stores an exact copy of the input text."
    ));
    assert_eq!(
        names("a `jsonb` value, not `a b`"),
        vec!["jsonb".to_string()]
    );
}
