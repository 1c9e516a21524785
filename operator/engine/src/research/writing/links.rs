//! Links in Markdown: the pattern that finds them and the form URLs are compared in, shared by
//! the evidence gate and report assembly.

use std::sync::LazyLock;

use regex::Regex;

// Markdown links and bare URLs; the character classes stop at the delimiters Markdown uses.
#[allow(clippy::expect_used)] // constant pattern, checked by the tests
pub(crate) static LINK_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\[([^\]\n]*)\]\((https?://[^\s)]+)\)|<?(https?://[^\s<>()\]"'`]+)>?"#)
        .expect("valid regex")
});

/// Normalises a URL for comparison: no fragment, no trailing slash, no trailing punctuation.
pub fn normalize_url(url: &str) -> String {
    let url = url
        .trim()
        .trim_end_matches(['.', ',', ';', ':', '!', '?', '*', '_']);
    let url = url.split('#').next().unwrap_or(url);
    url.trim_end_matches('/').to_string()
}
