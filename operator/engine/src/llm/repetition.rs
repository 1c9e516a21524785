//! Detection of degenerate repetition at the end of a model's output.
//!
//! Small local models without an output cap were seen looping on one snippet for 12,000 tokens.
//! The detector looks only at the tail of the text: it reports when the tail is one chunk of
//! `1..=MAX_PERIOD` characters repeated back to back so that the repeated span covers at least
//! `MIN_SPAN` characters and at least `MIN_REPEATS` copies. Real prose never repeats a chunk
//! verbatim that long; list markup and tables repeat only short spans.

/// Longest repeated unit considered, in characters.
pub const MAX_PERIOD: usize = 200;
/// Minimum length of the repeated span, in characters.
pub const MIN_SPAN: usize = 600;
/// Minimum number of back-to-back copies of the unit.
pub const MIN_REPEATS: usize = 8;

/// A repetition found at the end of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repetition {
    /// Length of the repeated unit in characters.
    pub period: usize,
    /// Length in characters of the tail made of back-to-back copies of the unit.
    pub span: usize,
}

impl Repetition {
    /// Number of whole copies of the unit in the span.
    pub fn repeats(&self) -> usize {
        self.span / self.period
    }
}

/// Returns the shortest-period repetition at the end of `text` that meets the thresholds.
pub fn detect(text: &str) -> Option<Repetition> {
    detect_with(text, MAX_PERIOD, MIN_SPAN, MIN_REPEATS)
}

/// [`detect`] with explicit thresholds.
pub fn detect_with(
    text: &str,
    max_period: usize,
    min_span: usize,
    min_repeats: usize,
) -> Option<Repetition> {
    // Enough of the tail to confirm any period: a span of max(min_span, period * min_repeats).
    let window = min_span.max(max_period.saturating_mul(min_repeats));
    let tail: Vec<char> = text.chars().rev().take(window).collect();
    if tail.len() < min_span {
        return None;
    }
    for period in 1..=max_period.min(tail.len() / 2) {
        let needed = min_span.max(period.saturating_mul(min_repeats));
        if needed > tail.len() {
            // Longer periods need even more text.
            break;
        }
        // tail is reversed: the text ends in repetition iff tail[k] == tail[k + period] for
        // every k < needed - period. Prose fails within a few characters for almost every period.
        if (0..needed - period).all(|k| tail[k] == tail[k + period]) {
            let mut span = needed;
            while span < tail.len() && tail[span] == tail[span - period] {
                span += 1;
            }
            return Some(Repetition { period, span });
        }
    }
    None
}

/// Incremental wrapper for streams: re-checks only after enough new text arrived.
#[derive(Debug, Default)]
pub struct StreamGuard {
    chars_since_check: usize,
}

/// Characters of new text between two checks; keeps the cost per token negligible.
const CHECK_EVERY: usize = 32;

impl StreamGuard {
    /// A guard with nothing seen yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Call after appending `new_chars` characters to `text`; returns a repetition if one is found.
    pub fn observe(&mut self, text: &str, new_chars: usize) -> Option<Repetition> {
        self.chars_since_check += new_chars;
        if self.chars_since_check < CHECK_EVERY {
            return None;
        }
        self.chars_since_check = 0;
        detect(text)
    }
}

#[cfg(test)]
mod tests;
