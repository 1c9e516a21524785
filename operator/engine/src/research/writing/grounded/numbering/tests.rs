use super::*;

fn numbered(url: &str) -> Numbered {
    Numbered {
        number: 0,
        url: url.to_string(),
        title: String::new(),
        heading: String::new(),
        text: String::new(),
    }
}

#[test]
fn a_passage_is_cut_after_its_last_whole_sentence() {
    let text = "Sets the base maximum amount of memory. Note that a complex query might perform several sort operations";
    assert_eq!(
        cut_at_sentence(text, 70),
        "Sets the base maximum amount of memory."
    );
    assert_eq!(cut_at_sentence(text, 500), text);
    // No sentence end in the first half: cut at a word, marked.
    let long = "One sentence. Then a very long clause without any stop that goes on and on";
    assert_eq!(
        cut_at_sentence(long, 60),
        "One sentence. Then a very long clause without any stop that…"
    );
    // A version number's dot is no sentence end.
    assert_eq!(
        cut_at_sentence("Added in version 3.11 of Python and kept", 25),
        "Added in version 3.11 of…"
    );
}

#[test]
fn the_head_the_model_answers_from_holds_a_second_page() {
    let items = vec![
        numbered("a"),
        numbered("a"),
        numbered("a"),
        numbered("b"),
        numbered("a"),
    ];
    let out = with_another_page_early(items, 3);
    let urls: Vec<&str> = out.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(urls, ["a", "a", "b", "a", "a"]);
    let numbers: Vec<usize> = out.iter().map(|n| n.number).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
    // A head holding two pages already is left as it is.
    let mixed = vec![numbered("a"), numbered("b"), numbered("a"), numbered("c")];
    let out = with_another_page_early(mixed, 3);
    let urls: Vec<&str> = out.iter().map(|n| n.url.as_str()).collect();
    assert_eq!(urls, ["a", "b", "a", "c"]);
}
