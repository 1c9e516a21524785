//! Unit tests of `truncate`.

use super::*;

#[test]
fn short_text_is_untouched() {
    let t = truncate_head("a\nb\n", 100, 10);
    assert_eq!(
        t,
        Truncated {
            text: "a\nb\n".into(),
            truncated: false,
            total_bytes: 4,
            total_lines: 2,
            kept_bytes: 4,
            kept_lines: 2
        }
    );
}

#[test]
fn line_limit_keeps_whole_lines_and_adds_a_notice() {
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    let t = truncate_head(&text, 10_000, 3);
    assert!(t.truncated);
    assert_eq!(t.kept_lines, 3);
    assert_eq!(t.total_lines, 10);
    assert_eq!(
        t.text,
        "line 1\nline 2\nline 3\n[Truncated: showing lines 1-3 of 10 (21 of 71 bytes); the rest of the page was cut.]"
    );
}

#[test]
fn byte_limit_cuts_at_a_line_boundary_and_fits_the_budget() {
    let text = "aaaa\n".repeat(100); // 500 bytes
    let t = truncate_head(&text, 200, 2000);
    assert!(t.truncated);
    assert!(t.text.len() <= 200, "{}", t.text.len());
    assert_eq!(t.kept_bytes % 5, 0, "whole lines only");
    assert!(t.text.starts_with("aaaa\naaaa\n"));
    assert!(t.text.ends_with("the rest of the page was cut.]"));
}

#[test]
fn an_overlong_first_line_is_cut_at_a_char_boundary() {
    let text = "é".repeat(200); // 400 bytes, one line
    let t = truncate_head(&text, 200, 10);
    assert!(t.truncated);
    assert_eq!(t.kept_lines, 1);
    assert_eq!(t.kept_bytes % 2, 0, "never splits the two-byte 'é'");
    assert!(t.text.len() <= 200);
    assert!(t.text.starts_with("éé"));
}

#[test]
fn page_char_cap_counts_chars_not_bytes() {
    let text = "ж".repeat(50) + "\n" + &"ж".repeat(10_000);
    let t = truncate_page(&text, 6000);
    assert!(t.truncated);
    assert_eq!(t.kept_lines, 1);
    assert_eq!(t.kept_bytes, 101, "50 two-byte chars and the newline");
    assert!(t.text.chars().count() <= 6000);
    let whole = "x".repeat(5999);
    assert!(!truncate_page(&whole, 6000).truncated);
}

#[test]
fn defaults_are_50k_and_2000_lines() {
    let text = "x\n".repeat(3000);
    let t = truncate_head(&text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES);
    assert_eq!(t.kept_lines, 2000);
    let big = "y".repeat(100) + "\n";
    let t = truncate_head(&big.repeat(1000), DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES);
    assert!(t.text.len() <= 50 * 1024);
    assert!(t.kept_lines < 1000 && t.kept_lines > 490);
}
