use super::*;

const NOTE: &str = "datetime.fromisoformat(date_string)\nReturn a datetime corresponding to a date_string in any valid ISO 8601 format.\nChanged in version 3.11: Previously, this method only supported formats that could be emitted by `date.isoformat()` or `datetime.isoformat()`.";

#[test]
fn a_claim_made_from_what_held_before_a_change_is_unsupported() {
    assert!(from_the_past(
        "The `datetime.fromisoformat` method in Python 3.11 now supports formats that can be emitted by `date.isoformat` or `datetime.isoformat`.",
        NOTE
    ));
    // Said of the past, it is what the note says.
    assert!(!from_the_past(
        "Before Python 3.11, `datetime.fromisoformat` only supported formats that could be emitted by `date.isoformat()`.",
        NOTE
    ));
    // A claim made from another sentence is not judged here.
    assert!(!from_the_past(
        "`datetime.fromisoformat` returns a datetime corresponding to a date_string in any valid ISO 8601 format.",
        NOTE
    ));
}
