use super::*;

#[test]
fn letters_of_another_script_the_passage_lacks_are_found() {
    let passage = "the row version must not be deleted while it is still potentially visible to other transactions.";
    assert_eq!(
        foreign_letters(
            "The row version must not be deleted while it is still potentially visible to other事务.",
            passage
        ),
        ['事', '务']
    );
    assert!(foreign_letters("It is visible to other transactions.", passage).is_empty());
    // Latin letters with accents, and a name the passage writes in its own script, are kept.
    assert!(foreign_letters("Contributed by Łukasz Langa and Gödel.", passage).is_empty());
    assert!(
        foreign_letters("The locale ja_JP uses 日本語.", "Set the locale to 日本語.").is_empty()
    );
}
