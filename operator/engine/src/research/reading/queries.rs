//! Search queries that cannot go wrong: the task is always searched first, in its own
//! words and as keywords; what the model writes is added to that, and a query that is empty, a
//! placeholder copied from an example, or a repeat is refused before it spends the budget.
//!
//! Pure functions; the researcher applies them.

use super::passages::entry::{modules_of, named_subjects};
use super::passages::{context_terms, key_terms, keyword_query, subject_terms};

/// Why a model-written query was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing but whitespace and punctuation.
    Empty,
    /// A prompt's example or a template placeholder (`example1`, `<query>`, `...`).
    Placeholder,
    /// The same query (after normalisation) already ran in this conversation.
    Repeat,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Empty => "empty",
            Refusal::Placeholder => "a placeholder, not a search",
            Refusal::Repeat => "already searched",
        })
    }
}

/// Lower-case, words separated by one space, surrounding punctuation and quotes dropped: two
/// queries that a search engine answers alike compare equal.
pub fn normalise(query: &str) -> String {
    query
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && !"._-+#".contains(c))
                .trim_end_matches('.')
        })
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words small models copy from tool schemas and examples instead of writing a query.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "examples",
    "query",
    "queries",
    "search",
    "string",
    "keyword",
    "keywords",
    "text",
    "placeholder",
    "foo",
    "bar",
    "baz",
    "test",
    "todo",
    "term",
    "terms",
    "your",
    "here",
    "insert",
    "topic",
    "question",
    "sample",
    "xxx",
    "q",
    "none",
    "null",
    "undefined",
];

/// True when a query is a template placeholder rather than a search: `example1`, `query 2`,
/// `<search terms>`, `{query}`, `...`, `string`.
pub fn is_placeholder(query: &str) -> bool {
    let q = query.trim();
    if q.contains("...") || q.contains('…') {
        let rest = q.replace("...", "").replace('…', "");
        if normalise(&rest).split(' ').filter(|w| w.len() > 2).count() < 2 {
            return true;
        }
    }
    if (q.starts_with('<') && q.ends_with('>')) || (q.starts_with('{') && q.ends_with('}')) {
        return true;
    }
    let n = normalise(q);
    !n.is_empty()
        && n.split(' ').all(|w| {
            let stem = w.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_' || c == '-');
            stem.is_empty() || PLACEHOLDER_WORDS.contains(&stem)
        })
}

/// Screens one model-written query against those already run (normalised).
pub fn screen(query: &str, already: &[String]) -> Result<String, Refusal> {
    let n = normalise(query);
    if n.is_empty() {
        return Err(Refusal::Empty);
    }
    if is_placeholder(query) {
        return Err(Refusal::Placeholder);
    }
    if already.contains(&n) {
        return Err(Refusal::Repeat);
    }
    Ok(query.trim().to_string())
}

/// The queries the engine runs itself before any the model writes: the task as written and its
/// keyword form (stop words dropped), each once.
pub fn seed_queries(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let whole = task.trim();
    if normalise(whole).is_empty() {
        return out;
    }
    out.push(whole.to_string());
    let keywords = keyword_query(whole);
    if !keywords.is_empty() && normalise(&keywords) != normalise(whole) {
        out.push(keywords);
    }
    // The names a page must mention (`asyncio.TaskGroup`), alone: full-text engines rank the
    // page that documents an API first for its bare name, not for a sentence around it. The
    // product a question is asked in is no such name ("MERGE" is, in "What does the MERGE
    // command introduced in PostgreSQL 15 do?": `sql-merge.html` was never found for it).
    let subjects = named_subjects(whole);
    let named_subject = !subjects.is_empty();
    let keys = if named_subject {
        subjects
    } else {
        key_terms(whole)
    };
    // One plain capitalised word ("Python" in "... in Python 3.11?") names the product, not
    // the subject: searched alone it returns the product's most generic pages.
    let plain_name = |k: &String| {
        whole.split_whitespace().any(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            w.to_lowercase() == *k && w.chars().skip(1).all(|c| !c.is_uppercase())
        })
    };
    let useful = named_subject || keys.len() > 1 || keys.iter().any(|k| !plain_name(k));
    let keys = keys.join(" ");
    if useful && !out.iter().any(|q| normalise(q) == normalise(&keys)) {
        out.push(keys);
    }
    // Each subject with its product ("a Python datetime object and a PostgreSQL timestamp"):
    // searched together, one product's pages took every result; searched alone, another
    // product's pages did.
    for query in subjects_by_product(whole, &named_subjects(whole)) {
        if !out.iter().any(|q| normalise(q) == normalise(&query)) {
            out.push(query);
        }
    }
    // The module of a dotted name (`typing` of `typing.Self`): its page documents the name, and
    // a full-text engine ranks that page by its title, which names the module alone.
    for module in modules_of(whole).into_iter().take(2) {
        if !out.iter().any(|q| normalise(q) == module) {
            out.push(module);
        }
    }
    out
}

/// Pure: each of `subjects` with its product: the one product the question names ("PostgreSQL
/// MERGE": searched alone, "merge" found Git's pages and never `sql-merge.html`), or of several
/// the one it names last before the subject ("Python datetime", "PostgreSQL timestamp").
fn subjects_by_product(question: &str, subjects: &[String]) -> Vec<String> {
    let context = context_terms(question);
    let words: Vec<&str> = question
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_')))
        .map(|w| w.trim_end_matches("'s").trim_end_matches('.'))
        .collect();
    let is_product = |w: &str| {
        w.chars().next().is_some_and(char::is_uppercase)
            && !w.chars().all(|c| c.is_ascii_digit() || c == '.')
            && context.contains(&w.to_lowercase())
    };
    let mut named: Vec<&str> = words.iter().copied().filter(|w| is_product(w)).collect();
    named.sort_unstable_by_key(|w| w.to_lowercase());
    named.dedup_by_key(|w| w.to_lowercase());
    let mut out: Vec<(String, String)> = Vec::new();
    for subject in subjects {
        let Some(at) = words.iter().position(|w| w.to_lowercase() == *subject) else {
            continue;
        };
        // The one product the question names, wherever it stands ("What does the MERGE
        // command introduced in PostgreSQL 15 do?"); of several, the last before the subject.
        let product = match named.as_slice() {
            [one] => Some(*one),
            _ => words[..at].iter().rev().find(|w| is_product(w)).copied(),
        };
        if let Some(product) = product.filter(|p| p.to_lowercase() != *subject) {
            out.push((product.to_string(), subject.clone()));
        }
    }
    out.into_iter().map(|(p, s)| format!("{p} {s}")).collect()
}

/// Words that open a question of their own after "and" ("..., and which environment variable
/// sets the port?"); "in which" and "on what" open one too.
const PART_OPENERS: &[&str] = &[
    "what", "which", "when", "where", "why", "how", "who", "whose", "is", "are", "does", "do",
    "did", "can", "should",
];

/// Pure: the questions a task asks, when it asks more than one: "What does MERGE do, and when
/// was PostgreSQL 15 released?" → `["What does MERGE do", "when was PostgreSQL 15 released"]`.
/// A part that refers back ("in which Python version was it added") gets the task's names it
/// lacks appended ("... typing.self"), so it can be ranked on its own; one naming none of them
/// gets the identifiers among them. Empty for a task
/// asking one thing. A passage answering the second part of a two-part question matches half
/// the task's words at most: the report quotes the best passage for each part (searching and
/// ranking part by part was measured and reverted: a part referring back, "what kind of file
/// object does *its* load() need", matched `pickle.load` best).
pub fn question_parts(task: &str) -> Vec<String> {
    let parts = split_questions(task);
    if parts.is_empty() {
        return parts;
    }
    let mut names: Vec<String> = key_terms(task);
    names.dedup();
    parts
        .into_iter()
        .map(|p| {
            let lower = p.to_lowercase();
            // A part naming a subject of its own stands alone, unless it refers back ("what
            // kind of file object does its load() need" is tomllib's). A plain word (a product:
            // "PostgreSQL") of another part is no name of one that does not refer back: "What
            // happens when git stash pop hits a conflict, and how long does PostgreSQL wait on
            // a lock ...?" ranked PostgreSQL's lock passages best for the Git part.
            let refers_back = plain_words(&p)
                .iter()
                .any(|w| REFERRING.contains(&w.as_str()));
            if !refers_back && names.iter().any(|n| lower.contains(n.as_str())) {
                return p;
            }
            let code = |n: &str| n.contains(|c: char| !c.is_alphanumeric());
            let missing: Vec<&str> = names
                .iter()
                .filter(|n| !lower.contains(n.as_str()) && (refers_back || code(n)))
                .map(String::as_str)
                .collect();
            if missing.is_empty() {
                p
            } else {
                format!("{p} {}", missing.join(" "))
            }
        })
        .collect()
}

/// Pure: the questions `task` asks, as written, when it asks more than one; empty otherwise.
pub(crate) fn split_questions(task: &str) -> Vec<String> {
    let words: Vec<&str> = task.split_whitespace().collect();
    let mut parts: Vec<Vec<&str>> = vec![vec![]];
    for (i, w) in words.iter().enumerate() {
        let bare = |k: usize| {
            words.get(k).map(|w| {
                w.trim_matches(|c: char| !c.is_alphanumeric())
                    .to_lowercase()
            })
        };
        let opens = |k: usize| {
            bare(k).is_some_and(|n| PART_OPENERS.contains(&n.as_str()))
                || (matches!(bare(k).as_deref(), Some("in" | "on" | "at" | "for"))
                    && matches!(bare(k + 1).as_deref(), Some("which" | "what")))
        };
        let current = parts.last_mut();
        if bare(i).as_deref() == Some("and") && i > 0 && opens(i + 1) {
            parts.push(vec![]);
            continue;
        }
        if let Some(current) = current {
            current.push(w);
        }
        // A question mark inside the task ends a question.
        if w.ends_with('?') && i + 1 < words.len() {
            parts.push(vec![]);
        }
    }
    let parts: Vec<String> = parts
        .into_iter()
        .map(|p| {
            p.join(" ")
                .trim_end_matches([',', ';', '?', ' '])
                .to_string()
        })
        .filter(|p| normalise(p).split(' ').filter(|w| w.len() > 2).count() >= 2)
        .collect();
    if parts.len() < 2 {
        return vec![];
    }
    parts
}

/// Most words of a task that only names a subject of the question ("TRUNCATE", "plain VACUUM").
const BARE_TASK_WORDS: usize = 3;

/// Pure: the words of `text`, lower-cased, letters and digits only.
pub(crate) fn plain_words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Pure: the agenda with each bare task (at most [`BARE_TASK_WORDS`] words, all of them the
/// question's: a subject it names, not what it asks of it) given the question's ask: the
/// question without the bare tasks' names. The 0.5B planner split "In PostgreSQL, which
/// reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?" into "TRUNCATE",
/// "plain VACUUM" and "DELETE", and the researcher of "TRUNCATE" read about truncating large
/// objects; its task is now "TRUNCATE: In PostgreSQL, which reclaims disk space immediately?".
pub fn anchored_tasks(question: &str, tasks: &[String]) -> Vec<String> {
    let asked = plain_words(question);
    let bare = |task: &str| {
        let words = plain_words(task);
        !words.is_empty()
            && words.len() <= BARE_TASK_WORDS
            && words.iter().all(|w| asked.contains(w))
    };
    let tasks = with_referents(tasks);
    let names: Vec<&String> = tasks.iter().filter(|t| bare(t)).collect();
    if names.is_empty() {
        return tasks;
    }
    let mut ask = question.trim().to_string();
    for name in &names {
        let lower = ask.to_lowercase();
        if let Some(at) = lower.find(&name.trim().to_lowercase()) {
            ask.replace_range(at..at + name.trim().len(), "");
        }
    }
    let ask = tidy_ask(&ask);
    if plain_words(&ask).len() < 2 {
        return tasks;
    }
    tasks
        .iter()
        .map(|t| {
            if bare(t) {
                format!("{}: {ask}", t.trim())
            } else {
                t.clone()
            }
        })
        .collect()
}

/// Words that refer back to a thing named before them.
pub(crate) const REFERRING: [&str; 5] = ["it", "its", "they", "them", "their"];

/// Pure: the agenda with each task that refers back ("How do you use it in asyncio?", "Is it
/// safe to run on an UPDATE?": a pronoun before any subject of its own) written after the task
/// before it, which names what the pronoun stands for. The 0.5B planner split "What does
/// EXPLAIN ANALYZE do differently from plain EXPLAIN, and is it safe to run on an UPDATE?" into
/// two tasks, and the researcher of the second, knowing no "it", read Git's pages on updates.
fn with_referents(tasks: &[String]) -> Vec<String> {
    tasks
        .iter()
        .enumerate()
        .map(|(i, task)| {
            let lower = task.to_lowercase();
            let words = plain_words(task);
            let Some(pronoun) = words.iter().position(|w| REFERRING.contains(&w.as_str())) else {
                return task.clone();
            };
            // Where the pronoun stands in the text, to see whether a subject comes before it.
            let at = lower
                .match_indices(words[pronoun].as_str())
                .find(|(at, _)| {
                    let before = lower[..*at].chars().next_back();
                    let after = lower[at + words[pronoun].len()..].chars().next();
                    !before.is_some_and(char::is_alphanumeric)
                        && !after.is_some_and(char::is_alphanumeric)
                })
                .map_or(0, |(at, _)| at);
            let named_before = subject_terms(task)
                .iter()
                .any(|k| lower.find(k.as_str()).is_some_and(|k_at| k_at < at));
            match i.checked_sub(1).and_then(|p| tasks.get(p)) {
                Some(previous) if !named_before => format!("{} {}", previous.trim(), task.trim()),
                _ => task.clone(),
            }
        })
        .collect()
}

/// Pure: a question whose list items were cut out, without the commas, colons and "or"/"and"
/// they leave behind ("..., immediately: , , or ?" → "... immediately?").
fn tidy_ask(text: &str) -> String {
    let mut words: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    loop {
        let before = words.len();
        // A word that is only punctuation, or a connective the cut left at the end.
        words.retain(|w| w.chars().any(char::is_alphanumeric) || w.contains('?'));
        while words
            .last()
            .is_some_and(|w| matches!(w.trim_end_matches('?'), "or" | "and" | ""))
            && words.len() > 1
        {
            let last = words.pop().unwrap_or_default();
            if last.ends_with('?')
                && let Some(prev) = words.last_mut()
            {
                prev.push('?');
            }
        }
        if words.len() == before {
            break;
        }
    }
    let joined = words.join(" ");
    let trimmed = joined
        .trim_end_matches('?')
        .trim_end_matches([',', ':', ';', ' ', '?']);
    if joined.ends_with('?') {
        format!("{trimmed}?")
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests;
