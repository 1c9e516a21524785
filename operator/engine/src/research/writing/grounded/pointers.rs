//! Words of a passage that point elsewhere on its page ("the same behavior described here",
//! "(as appropriate; see their doc)"): copied into a summary, they point at nothing the reader
//! has, and an independent judge rejected such sentences as unsupported.

use std::sync::LazyLock;

use regex::Regex;

/// A pointer to the page around a passage.
#[allow(clippy::expect_used)] // constant pattern, checked by the tests
static POINTER_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:described|shown|listed|explained|discussed|mentioned|noted|defined) (?:here|above|below|earlier|later)\b|\bsee (?:their|its|the|this|that) (?:docs?|documentation|section|page|chapter)\b",
    )
    .expect("valid regex")
});

/// Pure: `text` without its parentheses that point elsewhere on the page; `None` when what is
/// left still points (the sentence says nothing a reader can check without the page).
pub(super) fn without_pointers(text: &str) -> Option<String> {
    if !POINTER_RE.is_match(text) {
        return Some(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let Some(close) = rest[open..].find(')').map(|c| open + c) else {
            break;
        };
        out.push_str(&rest[..open]);
        let inner = &rest[open..=close];
        if POINTER_RE.is_match(inner) {
            // The space before the parenthesis goes with it.
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
        } else {
            out.push_str(inner);
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    (!POINTER_RE.is_match(&out)).then_some(out)
}
