//! Unit tests of `repetition`.

use super::*;

const PROSE: &str = "Rust's ownership model guarantees memory safety without a garbage collector. \
        Each value has a single owner, and when the owner goes out of scope the value is dropped. \
        Borrowing lets code use a value without taking ownership: shared borrows allow reading from \
        many places at once, while a mutable borrow is exclusive. The borrow checker enforces these \
        rules at compile time, so data races are impossible in safe code. Lifetimes describe how long \
        references are valid; most are inferred, but function signatures sometimes need them spelled \
        out. Smart pointers such as Box, Rc and Arc extend the model to heap allocation, shared \
        ownership and thread-safe sharing respectively. Interior mutability through Cell and RefCell \
        moves some checks to run time. Together these features let systems programmers write fast \
        code with confidence, and the compiler's error messages explain most mistakes clearly.";

#[test]
fn snippet_loop_triggers() {
    let text = "the snippet. ".repeat(100);
    let r = detect(&text).expect("repetition");
    assert_eq!(r.period, 13);
    assert_eq!(r.span, 1300);
    assert_eq!(r.repeats(), 100);
}

#[test]
fn loop_after_prose_triggers_with_span_of_loop_only() {
    let text = format!(
        "{PROSE} {}",
        "See the docs at https://example.org/page. ".repeat(30)
    );
    let r = detect(&text).expect("repetition");
    assert_eq!(r.period, 42);
    // The span may include a few preceding characters that happen to match the unit's end.
    assert!(r.span >= 42 * 30 && r.span < 42 * 30 + 42, "{r:?}");
}

#[test]
fn real_prose_does_not_trigger() {
    assert_eq!(detect(PROSE), None);
    let doubled = format!("{PROSE}\n\n{PROSE}");
    // A paragraph quoted twice is a repeat of period > 200: not degenerate by this rule.
    assert_eq!(detect(&doubled), None);
}

#[test]
fn markdown_table_and_list_do_not_trigger() {
    let mut table = String::from("| Name | Value |\n|---|---|\n");
    for i in 0..60 {
        table.push_str(&format!("| item {i} | {} |\n", i * 7));
    }
    assert_eq!(detect(&table), None);
    let list: String = (0..80).map(|i| format!("- point number {i}\n")).collect();
    assert_eq!(detect(&list), None);
}

#[test]
fn short_repetition_below_span_does_not_trigger() {
    // 7 copies of a 13-char unit: 91 chars, far below the span threshold.
    let text = format!("{PROSE}{}", "the snippet. ".repeat(7));
    assert_eq!(detect(&text), None);
    // 45 copies = 585 chars < 600.
    let text = format!("{PROSE}{}", "the snippet. ".repeat(45));
    assert_eq!(detect(&text), None);
    // 47 copies = 611 chars >= 600.
    let text = format!("{PROSE}{}", "the snippet. ".repeat(47));
    assert!(detect(&text).is_some());
}

#[test]
fn long_unit_needs_eight_copies() {
    let unit: String = PROSE.chars().take(150).collect();
    assert_eq!(
        detect(&unit.repeat(7)),
        None,
        "7 x 150 = 1050 chars but only 7 copies"
    );
    let r = detect(&unit.repeat(8)).expect("8 copies");
    assert_eq!(r.period, 150);
}

#[test]
fn single_char_run_triggers() {
    let text = format!("{PROSE}{}", "!".repeat(700));
    let r = detect(&text).expect("repetition");
    assert_eq!(r.period, 1);
    assert_eq!(r.span, 700);
}

#[test]
fn multibyte_characters() {
    let text = "日本語のテキスト。".repeat(80);
    let r = detect(&text).expect("repetition");
    assert_eq!(r.period, 9);
}

#[test]
fn stream_guard_checks_periodically() {
    let mut guard = StreamGuard::new();
    let mut text = String::new();
    let mut stopped_at = None;
    for i in 0..100 {
        text.push_str("the snippet. ");
        if guard.observe(&text, 13).is_some() {
            stopped_at = Some(i + 1);
            break;
        }
    }
    let n = stopped_at.expect("guard fired");
    // Needs 600 chars (47 copies); the guard checks every >= 32 chars (3 copies).
    assert!((47..=50).contains(&n), "stopped after {n} copies");
}
