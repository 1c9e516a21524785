//! A bound on how deeply a page's elements nest, applied before extraction.
//!
//! The HTML parser and the Markdown converters walk the element tree recursively, and the
//! parser checks its stack of open elements for each tag: a page of a few hundred kilobytes of
//! `<div>`s nested fifty thousand deep overflows a thread's stack (which aborts the whole
//! process) and takes many minutes before that. Real pages nest a few dozen levels, so the
//! markup of elements opened past [`MAX_DEPTH`] is dropped and their text kept. Pages that
//! never reach the bound are returned unchanged, without a copy.
//!
//! This is a scan over tags, not a parser: it follows the tokenizer closely enough to find
//! tags (comments, quoted attributes and raw-text elements are skipped), lets an end tag close
//! what was left open inside its element, and lets `<p>`, `<li>`, `<td>` and the other elements
//! with optional end tags close their open siblings, so sloppy markup is not mistaken for depth.

use std::borrow::Cow;

/// Elements nested deeper than this lose their markup (their text stays).
pub const MAX_DEPTH: usize = 256;

/// Elements without content: never open.
const VOID: [&str; 16] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "frame",
];
/// Elements the parser keeps one of, however often they are opened: never counted.
const MERGED: [&str; 3] = ["html", "head", "body"];
/// Elements whose end tag may be left out, with the open elements their start tag closes
/// (the parser's implied end tags, simplified), so that `<li>a<li>b` is two siblings.
const IMPLIED_END: [(&str, &[&str]); 18] = [
    ("p", &["p"]),
    ("li", &["li"]),
    ("dt", &["dt", "dd"]),
    ("dd", &["dt", "dd"]),
    ("tr", &["tr", "td", "th"]),
    ("td", &["td", "th"]),
    ("th", &["td", "th"]),
    ("thead", &TABLE_SECTION),
    ("tbody", &TABLE_SECTION),
    ("tfoot", &TABLE_SECTION),
    ("option", &["option"]),
    ("optgroup", &["option", "optgroup"]),
    ("rb", &RUBY),
    ("rt", &RUBY),
    ("rtc", &RUBY),
    ("rp", &RUBY),
    ("colgroup", &["colgroup"]),
    ("caption", &["caption"]),
];
/// What a table section's start tag closes.
const TABLE_SECTION: [&str; 6] = ["thead", "tbody", "tfoot", "tr", "td", "th"];
/// What a ruby annotation's start tag closes.
const RUBY: [&str; 4] = ["rb", "rt", "rtc", "rp"];
/// Elements whose content is text up to their end tag: tags inside them are not tags.
const RAW_TEXT: [&str; 9] = [
    "script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes", "noscript",
];

/// `html` with the markup of elements opened past `max` levels removed, or unchanged when no
/// element is that deep.
pub fn limit_depth(html: &str, max: usize) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    // Kept open elements (at most `max`), and elements opened past the bound still open.
    let mut open: Vec<String> = Vec::new();
    let mut dropped_open = 0usize;
    // Byte ranges of the tags to remove.
    let mut removed: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while let Some(off) = memchr(b'<', &bytes[i..]) {
        let start = i + off;
        let rest = &bytes[start..];
        if rest.starts_with(b"<!--") {
            i = find(bytes, start + 4, b"-->").map_or(bytes.len(), |e| e + 3);
            continue;
        }
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") {
            i = memchr(b'>', &bytes[start..]).map_or(bytes.len(), |e| start + e + 1);
            continue;
        }
        let closing = rest.get(1) == Some(&b'/');
        let name_start = start + 1 + usize::from(closing);
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-' || **b == b':')
            .count();
        if name_len == 0 || !bytes[name_start].is_ascii_alphabetic() {
            // Not a tag: a lone `<` is text.
            i = start + 1;
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let end = tag_end(bytes, name_start + name_len);
        let self_closing = end >= 2 && bytes[end - 2] == b'/';
        i = end;
        if closing {
            if VOID.contains(&name.as_str()) || MERGED.contains(&name.as_str()) {
                continue;
            }
            if dropped_open > 0 {
                // Closes an element whose start tag was removed (the innermost, by assumption).
                dropped_open -= 1;
                removed.push((start, end));
            } else if let Some(at) = open.iter().rposition(|n| *n == name) {
                // An end tag closes its element and whatever was left open inside it.
                open.truncate(at);
            }
            continue;
        }
        if RAW_TEXT.contains(&name.as_str()) {
            // Its text runs to the matching end tag, which is then read as a tag.
            i = find_end_tag(bytes, end, &name).unwrap_or(bytes.len());
            continue;
        }
        if name == "plaintext" {
            break;
        }
        if VOID.contains(&name.as_str()) || MERGED.contains(&name.as_str()) {
            continue;
        }
        // `<div/>` opens a div like `<div>` does: the slash only closes elements inside SVG
        // and MathML, so a page cannot hide its depth behind it.
        if self_closing && open.iter().any(|n| n == "svg" || n == "math") {
            continue;
        }
        close_implied(&mut open, &name);
        if dropped_open == 0 && open.len() < max {
            open.push(name);
        } else {
            dropped_open += 1;
            removed.push((start, end));
        }
    }
    if removed.is_empty() {
        return Cow::Borrowed(html);
    }
    let mut out = String::with_capacity(html.len());
    let mut from = 0;
    for (s, e) in removed {
        out.push_str(&html[from..s]);
        from = e;
    }
    out.push_str(&html[from..]);
    Cow::Owned(out)
}

/// Closes the open elements that the start tag of `name` implies the end of: the lowest match
/// among the elements with optional end tags on top of the stack.
fn close_implied(open: &mut Vec<String>, name: &str) {
    let Some((_, closes)) = IMPLIED_END.iter().find(|(n, _)| *n == name) else {
        return;
    };
    let mut lowest = None;
    for (i, el) in open.iter().enumerate().rev() {
        if !IMPLIED_END.iter().any(|(n, _)| n == el) {
            break;
        }
        if closes.contains(&el.as_str()) {
            lowest = Some(i);
        }
    }
    if let Some(i) = lowest {
        open.truncate(i);
    }
}

/// The index just past the `>` ending a tag whose name ends at `from`; quoted attribute values
/// may hold `>`. An unterminated tag runs to the end, as in the tokenizer.
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => {
                // Quotes open a value only after `=` (possibly with spaces between).
                let before = bytes[from..i]
                    .iter()
                    .rev()
                    .find(|c| !c.is_ascii_whitespace());
                if before == Some(&b'=') {
                    quote = Some(b);
                }
            }
            None if b == b'>' => return i + 1,
            None => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The start of the first `</name` (any case) at or after `from`.
fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let mut i = from;
    while let Some(off) = find(bytes, i, b"</") {
        let after = off + 2;
        let candidate = bytes.get(after..after + name.len())?;
        if candidate.eq_ignore_ascii_case(name.as_bytes()) {
            let next = bytes.get(after + name.len()).copied();
            if next.is_none_or(|c| c.is_ascii_whitespace() || c == b'>' || c == b'/') {
                return Some(off);
            }
        }
        i = after;
    }
    None
}

/// The index of the first occurrence of `needle` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| from + p)
}

/// The index of the first `b` in `hay`.
fn memchr(b: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|c| *c == b)
}

#[cfg(test)]
mod tests;
