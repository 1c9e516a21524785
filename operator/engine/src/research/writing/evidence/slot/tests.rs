use super::*;

#[test]
fn a_blank_the_passage_does_not_write_is_found() {
    let note = "E.5. Release 15.16 Release date: 2026-02-12 This release contains a variety of fixes from 15.15.";
    assert_eq!(
        unheld_slots("PostgreSQL 15.16 was released on [insert date].", note),
        ["[insert date]"]
    );
    assert_eq!(
        unheld_slots(
            "The default is <value> seconds.",
            "The default is five seconds."
        ),
        ["<value>"]
    );
    assert!(unheld_slots("PostgreSQL 15.16 was released on 2026-02-12.", note).is_empty());
}

#[test]
fn links_footnotes_comparisons_and_the_pages_own_placeholders_are_no_blank() {
    let page = "Usage: git clone <repository> [<directory>]. Clones a repository.";
    assert!(
        unheld_slots(
            "Run git clone <repository> to clone ([git-clone](http://x/git-clone.html)).",
            page
        )
        .is_empty()
    );
    assert!(unheld_slots("It holds 28 digits [1].", "28 digits").is_empty());
    assert!(unheld_slots("Use `x[i]` when a < b and c > d.", "x").is_empty());
    assert!(unheld_slots("It returns a list [of items like this one].", "list").is_empty());
}
