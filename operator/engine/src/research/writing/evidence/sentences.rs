//! A text's sentences, as claims are checked and statements quoted: lines, then sentences not
//! inside brackets, a citation standing alone kept with its sentence.

use crate::research::writing::links::LINK_RE;

/// Splits Markdown into sentence-sized units: lines, then sentences (not inside brackets) within.
pub fn sentences(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in markdown.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("```") {
            continue;
        }
        let mut current = String::new();
        let mut depth = 0i32;
        let chars: Vec<char> = line.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            current.push(c);
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '…' => depth = 0, // A cut closes what it cut: "(i.e. which have …".
                _ => {}
            }
            // A sentence in brackets ends with them: "(The processing functions consider the
            // last value as the operative one.) By contrast, `jsonb` ..." are two.
            let closes = c == ')'
                && i > 0
                && matches!(chars[i - 1], '.' | '!' | '?')
                && chars.get(i + 2).is_some_and(|n| n.is_uppercase());
            let ends = (closes || matches!(c, '.' | '!' | '?'))
                && depth <= 0
                && chars.get(i + 1).is_none_or(|n| n.is_whitespace())
                && !(c == '.' && continues_after_dot(&current, &chars[i + 1..]));
            if ends {
                out.push(std::mem::take(&mut current).trim().to_string());
            }
        }
        if !current.trim().is_empty() {
            out.push(current.trim().to_string());
        }
    }
    // A citation standing alone after its sentence ("... objects. ([json](url))") belongs to it.
    let mut merged: Vec<String> = Vec::new();
    for s in out {
        let without_links = LINK_RE.replace_all(&s, "");
        let bare = without_links
            .trim_matches(|c: char| !c.is_alphanumeric())
            .is_empty();
        match merged.last_mut() {
            Some(prev) if bare && LINK_RE.is_match(&s) => {
                prev.push(' ');
                prev.push_str(&s);
            }
            _ => merged.push(s),
        }
    }
    merged
}

/// Abbreviations whose dot ends no sentence ("a `str` subclass (i.e. ..." was cut at "i.e").
const ABBREVIATIONS: &[&str] = &["e.g.", "i.e.", "cf.", "vs.", "viz.", "approx.", "resp."];

/// Pure: whether the dot ending `current` (the sentence so far) belongs to a word that does not
/// end a sentence, given the characters after it: an abbreviation ("e.g.", "i.e."; "etc." when
/// a lower-case word follows), or a section number standing first or after a breadcrumb's `›`
/// ("Resource Consumption › 20.4. Memory"). Cut there, the grounded report's label line
/// "- [page](url) › 20.4. Resource Consumption:" gave the claim "Resource Consumption › 20.4.",
/// which the run's check counted as supported.
fn continues_after_dot(current: &str, after: &[char]) -> bool {
    let before = current.trim_end();
    let word_start = before
        .rfind(|c: char| c.is_whitespace() || c == '(')
        .map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
    let word = before[word_start..]
        .trim_start_matches(['*', '_', '"', '“'])
        .to_lowercase();
    let next_lower = after
        .iter()
        .find(|c| !c.is_whitespace())
        .is_some_and(|c| c.is_lowercase());
    if ABBREVIATIONS.contains(&word.as_str()) || (word == "etc." && next_lower) {
        return true;
    }
    let section_number = word.len() > 1
        && word.ends_with('.')
        && word.chars().all(|c| c.is_ascii_digit() || c == '.')
        && word.starts_with(|c: char| c.is_ascii_digit());
    let lead = before[..word_start].trim_end();
    section_number && (lead.is_empty() || lead.ends_with('›') || lead.ends_with(['-', '*', '+']))
}
