//! Tolerant extraction of one JSON value from a model's answer.
//!
//! Models wrap JSON in prose, Markdown fences and `<think>` preambles, and leave trailing commas.
//! The extractor tries, in order: the whole answer, each fenced block, then every balanced
//! top-level `{...}` / `[...]` found in the prose; each candidate is parsed as is and then again
//! with trailing commas removed. The error quotes what was wrong so a repair prompt can show it
//! to the model.

use serde_json::Value;

/// Longest excerpt of the answer quoted in an error message.
const SNIPPET_CHARS: usize = 160;

/// Why no JSON value could be extracted from an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonExtractError {
    /// The answer was empty (or only a `<think>` block).
    #[error("the answer is empty; expected a JSON value")]
    Empty,
    /// No `{` or `[` at all.
    #[error("no JSON object or array found in the answer, which starts with `{snippet}`")]
    NotFound { snippet: String },
    /// An object or array was opened but never closed (usually a truncated answer).
    #[error("the JSON starting with `{snippet}` is never closed (truncated answer?)")]
    Unbalanced { snippet: String },
    /// A balanced candidate was found but is not valid JSON.
    #[error("invalid JSON ({message}) in `{snippet}`")]
    Invalid { message: String, snippet: String },
    /// A value was found but it is not an object (see [`extract_json_object`]).
    #[error("expected a JSON object but found `{snippet}`")]
    NotAnObject { snippet: String },
}

/// Extracts the first JSON value (object or array; a bare scalar only if it is the whole answer).
pub fn extract_json(text: &str) -> Result<Value, JsonExtractError> {
    extract_matching(text, |_| true)
}

/// Like [`extract_json`] but only accepts an object: `[1]` citations in prose are skipped.
pub fn extract_json_object(text: &str) -> Result<Value, JsonExtractError> {
    match extract_matching(text, Value::is_object) {
        Err(JsonExtractError::NotFound { snippet }) => {
            // Distinguish "found JSON, but not an object" for a better repair message.
            match extract_json(text) {
                Ok(v) => Err(JsonExtractError::NotAnObject {
                    snippet: snippet_of(&v.to_string()),
                }),
                Err(_) => Err(JsonExtractError::NotFound { snippet }),
            }
        }
        other => other,
    }
}

/// Closes a JSON value the model was cut off in the middle of (it hit its output cap): keeps
/// every element complete before the last comma and closes what is still open. `None` when the
/// text holds no open JSON value, or a complete one.
pub fn close_truncated_json(text: &str) -> Option<String> {
    let start = text.find(['{', '['])?;
    let body = &text[start..];
    let mut open: Vec<char> = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    // Byte offset of the last comma, with what was open there.
    let mut last_comma: Option<(usize, Vec<char>)> = None;
    for (i, c) in body.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => open.push(c),
            '}' | ']' => {
                open.pop();
                if open.is_empty() {
                    return None;
                }
            }
            ',' => last_comma = Some((i, open.clone())),
            _ => {}
        }
    }
    let (cut, still_open) = last_comma?;
    let mut closed = body[..cut].to_string();
    for c in still_open.iter().rev() {
        closed.push(if *c == '{' { '}' } else { ']' });
    }
    Some(closed)
}

/// Removes `<think>...</think>` blocks (reasoning preambles of some models). The text of an
/// unclosed `<think>` is kept (the model may have written its answer inside before running out
/// of tokens), and text before a stray `</think>` is dropped (templates that open the block in
/// the prompt).
pub fn strip_think(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        match find_ci(rest, "<think>") {
            Some(start) => {
                out.push_str(&rest[..start]);
                let after = &rest[start + "<think>".len()..];
                match find_ci(after, "</think>") {
                    Some(end) => rest = &after[end + "</think>".len()..],
                    None => {
                        // Unclosed: the model ran out of tokens while thinking; keep the text so
                        // a JSON value written inside is still found.
                        out.push_str(after);
                        break;
                    }
                }
            }
            None => {
                out.push_str(rest);
                break;
            }
        }
    }
    // A stray closing tag without an opening one (some templates open it in the prompt).
    if let Some(end) = find_ci(&out, "</think>") {
        return out[end + "</think>".len()..].to_string();
    }
    out
}

/// Removes trailing commas before `}` or `]`, outside of strings.
pub fn remove_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (i, &c) in chars.iter().enumerate() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}') | Some(']')) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn extract_matching(
    text: &str,
    accept: impl Fn(&Value) -> bool,
) -> Result<Value, JsonExtractError> {
    let cleaned = strip_think(text);
    let trimmed = cleaned.trim();
    if trimmed.is_empty() {
        return Err(JsonExtractError::Empty);
    }
    let mut first_error: Option<JsonExtractError> = None;

    // 1. The whole answer.
    if let Some(v) = parse_lenient(trimmed, &mut first_error)
        && accept(&v)
    {
        return Ok(v);
    }
    // 2. Fenced blocks, in order.
    for block in fenced_blocks(trimmed) {
        if let Some(v) = parse_lenient(block.trim(), &mut first_error)
            && accept(&v)
        {
            return Ok(v);
        }
    }
    // 3. Balanced candidates in the prose (fence markers are not braces, so they need no removal).
    let mut saw_opening = false;
    let mut unbalanced: Option<JsonExtractError> = None;
    for (start, c) in trimmed.char_indices() {
        if c != '{' && c != '[' {
            continue;
        }
        saw_opening = true;
        match balanced_end(&trimmed[start..]) {
            Some(len) => {
                let candidate = &trimmed[start..start + len];
                if let Some(v) = parse_lenient(candidate, &mut first_error)
                    && accept(&v)
                {
                    return Ok(v);
                }
            }
            None => {
                if unbalanced.is_none() {
                    unbalanced = Some(JsonExtractError::Unbalanced {
                        snippet: snippet_of(&trimmed[start..]),
                    });
                }
            }
        }
    }
    if !saw_opening {
        return Err(JsonExtractError::NotFound {
            snippet: snippet_of(trimmed),
        });
    }
    // Prefer the parse error of a real candidate: it says exactly what to repair.
    match (first_error, unbalanced) {
        (Some(e @ JsonExtractError::Invalid { .. }), _) => Err(e),
        (_, Some(u)) => Err(u),
        _ => Err(JsonExtractError::NotFound {
            snippet: snippet_of(trimmed),
        }),
    }
}

/// Parses `s` as JSON, then with trailing commas removed. Records the first structural
/// parse error (only for texts that look like JSON) in `first_error`.
fn parse_lenient(s: &str, first_error: &mut Option<JsonExtractError>) -> Option<Value> {
    match serde_json::from_str::<Value>(s) {
        Ok(v) => return Some(v),
        Err(e) => {
            let looks_like_json = s.starts_with('{') || s.starts_with('[');
            let fixed = remove_trailing_commas(s);
            if fixed != s
                && let Ok(v) = serde_json::from_str::<Value>(&fixed)
            {
                return Some(v);
            }
            if looks_like_json && first_error.is_none() {
                *first_error = Some(JsonExtractError::Invalid {
                    message: e.to_string(),
                    snippet: snippet_of(s),
                });
            }
        }
    }
    None
}

/// Contents of Markdown code fences (```` ``` ```` or ```` ```json ````), in order. An unclosed
/// final fence yields its remaining text (truncated answers).
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after_ticks = &rest[open + 3..];
        // Skip the info string (e.g. `json`) up to the end of the line.
        let body_start = after_ticks
            .find('\n')
            .map(|i| i + 1)
            .unwrap_or(after_ticks.len());
        let info = after_ticks[..body_start].trim();
        // Inline fence like ```{"a":1}``` has no newline-separated info string.
        let (body, consumed) = if info.starts_with('{') || info.starts_with('[') {
            match after_ticks.find("```") {
                Some(close) => (&after_ticks[..close], close + 3),
                None => (after_ticks, after_ticks.len()),
            }
        } else {
            let body = &after_ticks[body_start..];
            match body.find("```") {
                Some(close) => (&body[..close], body_start + close + 3),
                None => (body, after_ticks.len()),
            }
        };
        blocks.push(body);
        rest = &after_ticks[consumed..];
    }
    blocks
}

/// Byte length of the balanced object/array starting at `s[0]`, respecting strings.
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth: usize = 0;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + c.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

fn find_ci(haystack: &str, needle: &str) -> Option<usize> {
    // ASCII-only lowercase keeps byte offsets identical to the original.
    haystack.to_ascii_lowercase().find(needle)
}

fn snippet_of(s: &str) -> String {
    let mut out: String = s.chars().take(SNIPPET_CHARS).collect();
    if s.chars().nth(SNIPPET_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests;
