//! Truncation of page text before it reaches a model (keep the head, 50 KB / 2000
//! lines, whichever comes first, and say that it was cut).

/// Default byte budget of text handed to a model.
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Default line budget of text handed to a model.
pub const DEFAULT_MAX_LINES: usize = 2000;

/// Result of a truncation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncated {
    /// The kept text, followed by a notice line when something was cut.
    pub text: String,
    /// Whether anything was cut.
    pub truncated: bool,
    /// Bytes of the input.
    pub total_bytes: usize,
    /// Lines of the input.
    pub total_lines: usize,
    /// Bytes of the input that were kept (without the notice).
    pub kept_bytes: usize,
    /// Lines of the input that were kept, a partially kept line counting as one.
    pub kept_lines: usize,
}

/// Keeps the head of `text` within `max_bytes` and `max_lines`.
///
/// Whole lines are kept while they fit; if even the first line does not fit it is cut at a char
/// boundary. When anything is cut, a notice line is appended and the result including the
/// notice stays within `max_bytes` (unless `max_bytes` is smaller than the notice itself).
pub fn truncate_head(text: &str, max_bytes: usize, max_lines: usize) -> Truncated {
    truncate_with(text, max_bytes, max_lines, usize::MAX)
}

/// Caps one page for a model: at most `max_chars` characters (small local models need about
/// 6000 per page), and within the default byte and line budgets.
pub fn truncate_page(text: &str, max_chars: usize) -> Truncated {
    truncate_with(text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, max_chars)
}

/// Counts lines the way an editor does: a trailing newline does not start a new line.
fn count_lines(text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        text.strip_suffix('\n').unwrap_or(text).split('\n').count()
    }
}

/// The notice line appended to cut text.
fn notice(kept_lines: usize, total_lines: usize, kept_bytes: usize, total_bytes: usize) -> String {
    format!(
        "\n[Truncated: showing lines 1-{kept_lines} of {total_lines} ({kept_bytes} of {total_bytes} bytes); the rest of the page was cut.]"
    )
}

/// Shared implementation: `max_chars` counts Unicode scalar values, `max_bytes` UTF-8 bytes.
pub fn truncate_with(
    text: &str,
    max_bytes: usize,
    max_lines: usize,
    max_chars: usize,
) -> Truncated {
    let total_bytes = text.len();
    let total_lines = count_lines(text);
    let fits_chars = max_chars == usize::MAX || text.chars().count() <= max_chars;
    if total_bytes <= max_bytes && total_lines <= max_lines && fits_chars {
        return Truncated {
            text: text.to_string(),
            truncated: false,
            total_bytes,
            total_lines,
            kept_bytes: total_bytes,
            kept_lines: total_lines,
        };
    }
    // Reserve room for the notice, sized with the largest numbers it can show.
    let reserve = notice(total_lines, total_lines, total_bytes, total_bytes).len();
    let byte_budget = max_bytes.saturating_sub(reserve);
    let char_budget = max_chars.saturating_sub(if max_chars == usize::MAX { 0 } else { reserve });

    let mut end = 0usize; // byte end of kept whole lines
    let mut chars = 0usize;
    let mut lines = 0usize;
    for line in text.split_inclusive('\n') {
        let line_chars = line.chars().count();
        if lines + 1 > max_lines
            || end + line.len() > byte_budget
            || chars + line_chars > char_budget
        {
            break;
        }
        end += line.len();
        chars += line_chars;
        lines += 1;
    }
    if lines == 0 && max_lines > 0 {
        // Even the first line is too long: cut it at the last char boundary that fits.
        for (i, c) in text.char_indices() {
            let next = i + c.len_utf8();
            if next > byte_budget || chars + 1 > char_budget || c == '\n' {
                break;
            }
            end = next;
            chars += 1;
        }
        lines = usize::from(end > 0);
    }
    let kept = text[..end].trim_end_matches('\n');
    let mut out = String::with_capacity(kept.len() + reserve);
    out.push_str(kept);
    out.push_str(&notice(lines, total_lines, end, total_bytes));
    Truncated {
        text: out,
        truncated: true,
        total_bytes,
        total_lines,
        kept_bytes: end,
        kept_lines: lines,
    }
}

#[cfg(test)]
mod tests;
