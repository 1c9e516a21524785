//! The structured outputs: `<research_result>` with a study report or `<research_item>`s,
//! and their tolerant parser.
//!
//! Pure. Models truncate, fence and mangle tags; the parser keeps whatever is usable: a missing
//! closing tag means truncated output and the rest is still parsed, tags are matched without
//! regard to case or stray whitespace, and items without a source or content are dropped and
//! counted (never silently).

use serde::Serialize;

use crate::research::machine::state::OutputKind;

/// One idea or implementation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResearchItem {
    /// URL where this was found.
    pub source: String,
    /// Markdown with the sections the mode's prompt asks for (`config/prompts/`).
    pub content: String,
}

/// What one output call yielded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedOutput {
    /// Study mode: the report Markdown inside `<research_result>`.
    pub body: Option<String>,
    /// Idea and implementation modes: the items, in the model's order.
    pub items: Vec<ResearchItem>,
    /// Items dropped for lacking a source or content.
    pub dropped: u32,
    /// True when `</research_result>` (or the last item's closing tag) was missing.
    pub truncated: bool,
}

/// Finds `<tag>` (case-insensitive, tolerating spaces and attributes) from `from`; returns the
/// byte range of the whole opening tag.
fn find_open(text: &str, tag: &str, from: usize) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    let mut at = from;
    while let Some(rel) = lower.get(at..)?.find('<') {
        let start = at + rel;
        let rest = &lower[start + 1..];
        let name = rest.trim_start();
        if let Some(after) = name.strip_prefix(tag)
            && (after.starts_with('>') || after.starts_with(' ') || after.starts_with('\n'))
        {
            let end = start + 1 + rest.find('>')? + 1;
            return Some((start, end));
        }
        at = start + 1;
    }
    None
}

/// Finds `</tag>` (case-insensitive, tolerating spaces) from `from`.
fn find_close(text: &str, tag: &str, from: usize) -> Option<(usize, usize)> {
    let lower = text.to_ascii_lowercase();
    let mut at = from;
    while let Some(rel) = lower.get(at..)?.find("</") {
        let start = at + rel;
        let rest = &lower[start + 2..];
        if let Some(after) = rest.trim_start().strip_prefix(tag)
            && after.trim_start().starts_with('>')
        {
            let end = start + 2 + rest.find('>')? + 1;
            return Some((start, end));
        }
        at = start + 2;
    }
    None
}

/// The text inside the first `<tag>...</tag>`; without a closing tag, everything after the
/// opening one (`true` in the second field: truncated).
fn extract(text: &str, tag: &str) -> Option<(String, bool)> {
    let (_, open_end) = find_open(text, tag, 0)?;
    match find_close(text, tag, open_end) {
        Some((close_start, _)) => Some((text[open_end..close_start].to_string(), false)),
        None => Some((text[open_end..].to_string(), true)),
    }
}

/// Removes one wrapping code fence from a value (`<source>` sometimes arrives as ```url```).
fn unfence(s: &str) -> String {
    let t = s.trim();
    let t = t.strip_prefix("```").map_or(t, |rest| {
        rest.split_once('\n').map_or(rest, |(_, body)| body)
    });
    t.trim_end_matches("```").trim().to_string()
}

/// Normalizes a `<source>` value: Markdown links and angle brackets give their URL.
fn clean_source(s: &str) -> String {
    let s = unfence(s);
    let s = s.trim().trim_matches(['<', '>']).trim();
    if let (Some(open), Some(close)) = (s.find("]("), s.rfind(')'))
        && open < close
    {
        return s[open + 2..close].trim().to_string();
    }
    s.split_whitespace().next().unwrap_or_default().to_string()
}

/// Splits a `<research_result>` body into items; the last may be unclosed (truncated).
fn parse_items(body: &str) -> (Vec<ResearchItem>, u32, bool) {
    let mut items = Vec::new();
    let mut dropped = 0;
    let mut truncated = false;
    let mut at = 0;
    while let Some((_, open_end)) = find_open(body, "research_item", at) {
        let next_open = find_open(body, "research_item", open_end).map(|(s, _)| s);
        let (inner, next) = match find_close(body, "research_item", open_end) {
            Some((cs, ce)) if next_open.is_none_or(|n| cs < n) => (&body[open_end..cs], ce),
            _ => {
                // Unclosed: runs to the next item or the end.
                truncated = true;
                let end = next_open.unwrap_or(body.len());
                (&body[open_end..end], end)
            }
        };
        let source = extract(inner, "source").map(|(s, _)| clean_source(&s));
        let content = extract(inner, "content").map(|(c, _)| unfence_content(&c));
        match (source, content) {
            (Some(source), Some(content))
                if (source.starts_with("http://") || source.starts_with("https://"))
                    && !content.trim().is_empty() =>
            {
                items.push(ResearchItem { source, content });
            }
            _ => dropped += 1,
        }
        at = next;
    }
    (items, dropped, truncated)
}

/// Content keeps its inner code fences; only a stray trailing closing tag fragment is cut.
fn unfence_content(c: &str) -> String {
    let c = c.trim();
    let c = match c.rfind("</") {
        Some(i) if c[i..].len() < 20 && !c[i..].contains('\n') => &c[..i],
        _ => c,
    };
    c.trim().to_string()
}

/// Parses one model answer for one output kind, tolerating what models get wrong.
pub fn parse(raw: &str, kind: OutputKind, top_k: usize) -> ParsedOutput {
    let (inner, truncated) = match extract(raw, "research_result") {
        Some(found) => found,
        None => match kind {
            // A study written without the envelope is still a report.
            OutputKind::Study => (raw.to_string(), false),
            // Items without the envelope are still items.
            _ => (raw.to_string(), false),
        },
    };
    match kind {
        OutputKind::Study => {
            let body = inner.trim();
            ParsedOutput {
                body: (!body.is_empty()).then(|| body.to_string()),
                items: vec![],
                dropped: 0,
                truncated,
            }
        }
        OutputKind::Ideas | OutputKind::Implementations => {
            let (mut items, dropped, items_truncated) = parse_items(&inner);
            items.truncate(top_k.max(1));
            ParsedOutput {
                body: None,
                items,
                dropped,
                truncated: truncated || items_truncated,
            }
        }
    }
}

#[cfg(test)]
mod tests;
