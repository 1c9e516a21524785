//! Support by one part of a page, not by the page as a whole.
//!
//! A page's passages name many settings and hold many numbers: checked against the whole page,
//! "The default value of maintenance_work_mem is 40MB" passed, its subject named in that
//! setting's entry and "40MB" in hash_mem_multiplier's. A claim is supported when one passage
//! of the page says it, or, for a sentence joining clauses, when each clause is said by one
//! passage. Pure.

use super::{Support, check_support};

/// The line that opens each passage of a page's stored text: its heading path.
pub(super) const PASSAGE_MARK: &str = "§ ";

/// Words that join two clauses after a comma (", and three slots are reserved").
const CLAUSE_JOINERS: [&str; 5] = ["and", "but", "while", "whereas", "so"];

/// Pure: the clauses of a sentence, split at a semicolon or at a comma followed by a joining
/// word ([`CLAUSE_JOINERS`]); the sentence itself when it has one clause.
pub fn clauses(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for part in text.split(';') {
        let mut current = String::new();
        let mut pieces = part.split(", ").peekable();
        while let Some(piece) = pieces.next() {
            current.push_str(piece);
            let joins = pieces.peek().is_some_and(|next| {
                let first = next.split_whitespace().next().unwrap_or("");
                CLAUSE_JOINERS.contains(&first.to_lowercase().as_str())
            });
            if joins {
                out.push(std::mem::take(&mut current));
            } else if pieces.peek().is_some() {
                current.push_str(", ");
            }
        }
        out.push(current);
    }
    out.into_iter()
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// Pure: the passages of a page's text, each under its heading path (a line opening with
/// [`PASSAGE_MARK`]), with the text before the first one (the title) kept on each; the whole
/// text when it has none.
pub fn passages(text: &str) -> Vec<String> {
    let mut head = String::new();
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if line.starts_with(PASSAGE_MARK) {
            out.push(format!("{head}{line}\n"));
        } else if let Some(current) = out.last_mut() {
            current.push_str(line);
            current.push('\n');
        } else {
            head.push_str(line);
            head.push('\n');
        }
    }
    if out.is_empty() {
        out.push(text.to_string());
    }
    out
}

/// Pure: [`check_support`] of `claim` by one passage of `page` ([`passages`]): the best
/// passage's verdict. A claim no passage supports alone is supported when each of its clauses
/// ([`clauses`]) is said by one passage and the page supports the whole.
pub fn check_by_passage(claim: &str, page: &str, asked: &str) -> Support {
    let parts = passages(page);
    let verdicts: Vec<Support> = parts
        .iter()
        .map(|p| check_support(claim, p, asked))
        .collect();
    if let Some(v) = verdicts.iter().find(|v| v.supported) {
        return v.clone();
    }
    let whole = check_support(claim, page, asked);
    let split = clauses(claim);
    let each_said = split.len() > 1
        && split
            .iter()
            .all(|c| parts.iter().any(|p| check_support(c, p, asked).supported));
    if whole.supported && each_said {
        return whole;
    }
    // Unsupported: the passage that came closest (fewest subjects and numbers missing, then
    // most words shared) says what is missing.
    verdicts
        .into_iter()
        .min_by(|a, b| {
            let missing = |v: &Support| v.missing_subjects.len() + v.missing_numbers.len();
            missing(a)
                .cmp(&missing(b))
                .then(b.overlap.total_cmp(&a.overlap))
        })
        .unwrap_or(whole)
}

#[cfg(test)]
mod tests;
