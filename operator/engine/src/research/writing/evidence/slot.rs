//! Template slots: a small model copies the blank of a form it has seen ("released on [insert
//! date]") where the passage states the value.

/// Longest slot text looked at, in characters and in words: a bracketed clause is prose, not a
/// blank.
const MAX_SLOT_CHARS: usize = 40;
const MAX_SLOT_WORDS: usize = 3;

/// Pure: the bracketed blanks of `claim` (`[insert date]`, `<version>`) that `evidence` does
/// not write itself, as written in the claim. The 1.5B model wrote "PostgreSQL 15.16 was
/// released on [insert date]" from a release note stating the date (tuning set, deep mode),
/// and every other word of the sentence was on the page. A Markdown link's text (`[title](`)
/// and a footnote mark (`[1]`) are no blank; a placeholder the docs themselves write
/// (`git clone <repository>`) is the page's own.
pub(super) fn unheld_slots(claim: &str, evidence: &str) -> Vec<String> {
    let lower = evidence.to_lowercase();
    // Code is written as it is: `x[i]`, `a < b`.
    let mut prose = claim.to_string();
    for span in super::code_spans(claim).into_iter().rev() {
        prose.replace_range(span.start..=span.end, " ");
    }
    let mut out = Vec::new();
    for (open, close) in [('[', ']'), ('<', '>')] {
        let mut rest = prose.as_str();
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            let inner = &after[..end];
            let next = after[end + close.len_utf8()..].chars().next();
            let blank = inner.chars().any(char::is_alphabetic)
                && inner.chars().count() <= MAX_SLOT_CHARS
                && inner.split_whitespace().count() <= MAX_SLOT_WORDS
                && inner.trim() == inner
                && !inner.contains([open, '\n', '`'])
                && !(open == '[' && next == Some('('))
                && inner
                    .chars()
                    .all(|c| c.is_alphanumeric() || " _-/.".contains(c));
            let written = format!("{open}{inner}{close}");
            if blank && !lower.contains(&written.to_lowercase()) && !out.contains(&written) {
                out.push(written);
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    out
}

#[cfg(test)]
mod tests;
