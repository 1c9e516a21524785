//! Entry pages: whether a search result's title names what the question asks about (`MERGE`,
//! `git-describe(1)`, the module of `typing.Self`), and the names a question asks about.
//!
//! Pure functions; the researcher reads such a page first, and its lead is the definition the
//! passage selection keeps.

use super::{context_terms, is_context, key_terms, subject_terms};

/// Pure: whether a search result titled `title` is the entry page of a name the question asks
/// about: its title, before any " — " and without a section number, is that name (`MERGE`,
/// `TRUNCATE`, `CREATE INDEX` of "How does CREATE INDEX CONCURRENTLY differ ...") or the module
/// of an asked-for dotted name (`typing — Support for type hints` for `typing.Self`). Such a
/// page documents the name itself; read first, it is not crowded out by pages that merely share
/// the question's words (release notes of 15.13 for "MERGE ... in PostgreSQL 15").
pub fn is_entry_page(title: &str, question: &str) -> bool {
    if let Some(command) = manual_command(title) {
        return asks_command(question, &command);
    }
    let head = title
        .split([' ', '\u{a0}'])
        .take_while(|w| !matches!(*w, "—" | "–" | "-" | "|"))
        .collect::<Vec<_>>()
        .join(" ");
    let head = head.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.' || c == ' ');
    let head = head.replace('`', "").to_lowercase();
    let words: Vec<&str> = head.split_whitespace().collect();
    if words.is_empty() || words.len() > 3 {
        return false;
    }
    let subjects = named_subjects(question);
    if words.len() == 1 && modules_of(question).iter().any(|m| m == words[0]) {
        return true;
    }
    words.iter().all(|w| subjects.iter().any(|s| s == w))
}

/// Pure: the command a manual page's title names: `git-describe(1)` → `["git", "describe"]`
/// (a man page's name and section; its hyphens part the command's words). `None` for other
/// titles, and for a one-word name (`git(1)` is every Git question's product, not its subject).
fn manual_command(title: &str) -> Option<Vec<String>> {
    let t = title.trim();
    let (name, section) = t.strip_suffix(')')?.rsplit_once('(')?;
    let section_ok = !section.is_empty()
        && section.len() <= 3
        && section.starts_with(|c: char| c.is_ascii_digit())
        && section.chars().all(|c| c.is_ascii_alphanumeric());
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    let words: Vec<String> = name.split('-').map(str::to_string).collect();
    (section_ok && name_ok && words.len() >= 2 && words.iter().all(|w| !w.is_empty()))
        .then_some(words)
}

/// Pure: whether `question` names `command`, its words in order as words (`git describe` in
/// "What does git describe output?", not in "git describe-ish").
fn asks_command(question: &str, command: &[String]) -> bool {
    let words: Vec<String> = question
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    words.windows(command.len()).any(|w| w == command)
}

/// Pure: the [`subject_terms`] of a question that are not the product it is asked in.
pub fn named_subjects(question: &str) -> Vec<String> {
    let context = context_terms(question);
    subject_terms(question)
        .into_iter()
        .filter(|k| !is_context(k, &context))
        .collect()
}

/// Pure: the modules of the dotted names a question asks about (`typing` of `typing.Self`,
/// `concurrent.futures` of `concurrent.futures.ThreadPoolExecutor`), each once, in order.
pub fn modules_of(question: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for k in key_terms(question) {
        let k = k.trim_end_matches("()");
        if let Some((module, name)) = k.rsplit_once('.')
            && module.len() > 2
            && !name.is_empty()
            && module.chars().next().is_some_and(char::is_alphabetic)
            && !module.chars().all(|c| c.is_ascii_digit() || c == '.')
            && !out.iter().any(|m| m == module)
        {
            out.push(module.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests;
