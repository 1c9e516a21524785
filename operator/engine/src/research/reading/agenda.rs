//! The agenda a deep run researches: the planner's tasks, made to cover every part of the
//! question, each part by a task of its own, and without a task that repeats another.
//!
//! Pure functions; the lead applies them to the planner's answer.

use super::passages::{is_stop, modifies_as_product, possessive_owner, products_asked};
use super::queries::{REFERRING, plain_words, split_questions};

/// Most aspects a question is split into.
const MAX_ASPECTS: usize = 4;

/// Pure: the parts of `question` a researcher can take on alone: the questions it asks when it
/// asks more than one ("What is the default isolation level of a PostgreSQL session, and what
/// does Python's sqlite3 module use?"), else, when it asks of two products or more
/// ([`products_asked`]), the question as asked of each one ([`asked_of`]). Empty when it is
/// one question of one product.
pub fn aspects(question: &str) -> Vec<String> {
    let mut out = split_questions(question);
    if out.len() < 2 {
        let products = products_asked(question);
        out = products
            .iter()
            .map(|p| asked_of(question, p, &products))
            .collect();
    }
    out.retain(|a| !content_words(a).is_empty());
    if out.len() < 2 {
        return Vec::new();
    }
    out.truncate(MAX_ASPECTS);
    let asks = question.trim_end().ends_with('?');
    out.iter().map(|a| as_question(a, asks)).collect()
}

/// Pure: two questions asked as one: "How much faster is Python 3.11 ...?" and "What new limit
/// ... did it introduce?" → "How much faster is Python 3.11 ..., and what new limit ... did it
/// introduce?".
fn joined(first: &str, then: &str) -> String {
    let first = first.trim().trim_end_matches(['?', '.', '!']);
    let opener = then.split_whitespace().next().unwrap_or_default();
    let then = if QUESTION_OPENERS.contains(&opener.to_lowercase().as_str()) {
        format!("{}{}", opener.to_lowercase(), &then.trim()[opener.len()..])
    } else {
        then.trim().to_string()
    };
    format!("{first}, and {then}")
}

/// Words a question opens with (lower-cased where two are joined into one).
const QUESTION_OPENERS: [&str; 14] = [
    "what", "which", "when", "where", "why", "how", "who", "is", "are", "does", "do", "did", "can",
    "should",
];

/// Pure: `part` written as a question of its own: capitalised, and ending in a question mark
/// when `asks` ("what does json.dumps return" → "What does json.dumps return?").
fn as_question(part: &str, asks: bool) -> String {
    let part = part.trim().trim_end_matches([',', ';', ':']);
    let mut chars = part.chars();
    let mut out: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if asks && !out.ends_with(['?', '.', '!']) {
        out.push('?');
    }
    out
}

/// Pure: the part of `question` asked of `product`, one of `products`: the one part of it
/// ([`queries::split_questions`]) that names the product, else the question asked of it
/// alone ([`asked_of`]).
pub fn part_of(question: &str, product: &str, products: &[String]) -> String {
    let parts = super::queries::split_questions(question);
    let naming: Vec<&String> = parts
        .iter()
        .filter(|part| {
            super::queries::plain_words(part)
                .iter()
                .any(|w| w == product)
        })
        .collect();
    match naming.as_slice() {
        [one] => one.to_string(),
        _ => asked_of(question, product, products),
    }
}

/// Pure: `question` asked of `product` alone: each other product of `products` left out, with
/// the word it owns or modifies ("PostgreSQL's bigint", "a PostgreSQL timestamp") and the
/// "and"/"or" that joined it. Of "What is the largest value that Python's int and PostgreSQL's
/// bigint type can hold?", asked of PostgreSQL: "What is the largest value that PostgreSQL's
/// bigint type can hold?"; of "... differ between Python and PostgreSQL?", asked of Python:
/// "... differ in Python?".
pub fn asked_of(question: &str, product: &str, products: &[String]) -> String {
    let words: Vec<&str> = question.split_whitespace().collect();
    let bare = |w: &str| -> String { w.trim_matches(|c: char| !c.is_alphanumeric()).to_string() };
    let connective = |w: &str| matches!(bare(w).to_lowercase().as_str(), "and" | "or");
    let linking = |w: &str| {
        matches!(
            bare(w).to_lowercase().as_str(),
            "of" | "in" | "for" | "with" | "on" | "to" | "from" | "by"
        )
    };
    let mut dropped = vec![false; words.len()];
    for (i, w) in words.iter().enumerate() {
        let core = bare(w);
        let owner = possessive_owner(&core);
        let name = owner.unwrap_or(&core).to_lowercase();
        if name == product || !products.contains(&name) {
            continue;
        }
        dropped[i] = true;
        let modifier = i > 0 && modifies_as_product(words[i - 1], &core);
        if modifier {
            dropped[i - 1] = true;
        }
        if (owner.is_some() || modifier)
            && let Some(next) = words.get(i + 1)
            && next.chars().next().is_some_and(char::is_lowercase)
        {
            dropped[i + 1] = true;
            // The rest of its noun phrase when a connective closes it ("a Python datetime
            // object and ..."), or "each"/"both", which go too ("PostgreSQL's jsonb type each
            // handle"); otherwise what follows is said of both ("... bigint type").
            let distributive = |w: &str| matches!(bare(w).as_str(), "each" | "both");
            if let Some(end) = (i + 2..words.len().min(i + 4))
                .find(|&k| connective(words[k]) || distributive(words[k]))
            {
                let last = if distributive(words[end]) {
                    end + 1
                } else {
                    end
                };
                dropped[i + 2..last].iter_mut().for_each(|d| *d = true);
            }
        }
    }
    // The connective that joined each dropped span: the one before it, else the one after.
    let mut i = 0;
    while i < words.len() {
        if !dropped[i] {
            i += 1;
            continue;
        }
        let end = (i..words.len())
            .find(|&k| !dropped[k])
            .unwrap_or(words.len());
        // "... object and of a PostgreSQL timestamp?": the preposition goes with the connective.
        let preposition = (i > 1 && connective(words[i - 2]) && linking(words[i - 1])).then(|| {
            dropped[i - 1] = true;
            1
        });
        let start = i - preposition.unwrap_or(0);
        if start > 0 && connective(words[start - 1]) {
            dropped[start - 1] = true;
        } else if end < words.len() && connective(words[end]) {
            dropped[end] = true;
            // "of a Python datetime object and of ...": the repeated preposition goes too.
            if end + 1 < words.len()
                && i > 0
                && linking(words[end + 1])
                && bare(words[end + 1]).eq_ignore_ascii_case(&bare(words[i - 1]))
            {
                dropped[end + 1] = true;
            }
        }
        i = end;
    }
    let mut kept: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if !dropped[i] {
            kept.push((*w).to_string());
        } else if w.ends_with('?')
            && let Some(last) = kept.last_mut()
            && !last.ends_with('?')
        {
            // "... and PostgreSQL?": the question mark stays.
            *last = format!("{}?", last.trim_end_matches([',', ';', ':']));
        }
    }
    // "between Python" compares nothing: it is "in Python".
    for k in 1..kept.len() {
        let here = bare(&kept[k]).to_lowercase();
        let owner = possessive_owner(&bare(&kept[k])).map(str::to_lowercase);
        if (here == product || owner.as_deref() == Some(product))
            && matches!(
                bare(&kept[k - 1]).to_lowercase().as_str(),
                "between" | "across"
            )
            && !kept.get(k + 1).is_some_and(|n| connective(n))
        {
            kept[k - 1] = "in".to_string();
        }
    }
    kept.join(" ")
}

/// Pure: the words of `text` that carry its topic (no stop word, no single letter), each once.
fn content_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in plain_words(text) {
        if w.len() > 1 && !is_stop(&w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Pure: the agenda for `question` from the planner's `tasks` ([`plain_task`]s, without
/// repeats: [`without_repeats`]). A question of one aspect keeps the planner's tasks, even those
/// sharing no word with it: a planner that knows the field splits "Python's serialization
/// modules" into json, pickle and csv. A question with aspects ([`aspects`]) is researched as
/// its aspects, each in the question's words (one that refers back, "and how do you use it?",
/// by the planner's own task for it, or after the part it refers to), then, up to as many tasks as the planner gave, the planner's
/// tasks that are one aspect's own and say more than it: a task is an aspect's own when it
/// names a word only that aspect has ("sqlite3" of the sqlite3 part) and none only another has
/// (besides the part an aspect refers to). The 1.5B planner answered "How do Python's
/// json.loads() and PostgreSQL's jsonb type each handle duplicate keys?" with one task, "What is
/// the difference between json.loads() and jsonb type in Python? ...", and its researcher read
/// only Python's pages; it added "explain the relationship between these two concepts" to a
/// question on Python's decimal precision and PostgreSQL's numeric type (the researcher read
/// Git's object walk into the summary), and it turned "How much faster is Python 3.11 than
/// 3.10 according to its release notes, and what new limit on int/str conversion did it
/// introduce?" into "search for Python 3.11 release notes" and "... 3.10 release notes".
pub fn covering(question: &str, tasks: &[String]) -> Vec<String> {
    let tasks: Vec<String> = tasks.iter().map(|t| plain_task(t)).collect();
    let tasks = without_repeats(&tasks);
    let aspects = aspects(question);
    if aspects.is_empty() {
        return tasks;
    }
    let words: Vec<Vec<String>> = aspects.iter().map(|a| content_words(a)).collect();
    let marks: Vec<Vec<&String>> = words
        .iter()
        .enumerate()
        .map(|(i, own)| {
            own.iter()
                .filter(|w| {
                    words
                        .iter()
                        .enumerate()
                        .all(|(j, other)| j == i || !other.contains(w))
                })
                .collect()
        })
        .collect();
    let of_aspects = |task: &str| -> Vec<usize> {
        let named = plain_words(task);
        marks
            .iter()
            .enumerate()
            .filter(|(_, m)| m.iter().any(|w| named.contains(w)))
            .map(|(i, _)| i)
            .collect()
    };
    // An aspect that refers back ("and how do you use it?") is about what the one before it
    // names: its task names both ("How do you use asyncio for structured concurrency?").
    // A task that says "it" ("Can it write TOML, and what kind of file object does its load()
    // function need?") names what it is about in another.
    let refers_back = |task: &str| {
        plain_words(task)
            .iter()
            .any(|w| REFERRING.contains(&w.as_str()))
    };
    let refers: Vec<bool> = aspects.iter().map(|a| refers_back(a)).collect();
    let own = |i: usize, task: &str| {
        let of = of_aspects(task);
        of == [i] || (i > 0 && refers[i] && of == [i - 1, i])
    };
    // Researched on its own, "what new limit on int/str conversion did it introduce" knows no
    // "it": the planner's own task for it says what "it" is (one that says "it" too does not),
    // or else it goes after the part it refers to.
    let mut out: Vec<String> = aspects
        .iter()
        .enumerate()
        .map(
            |(i, a)| match tasks.iter().find(|t| own(i, t) && !refers_back(t)) {
                Some(task) if i > 0 && refers[i] => task.clone(),
                _ if i > 0 && refers[i] => joined(&aspects[i - 1], a),
                _ => a.clone(),
            },
        )
        .collect();
    let budget = tasks.len().max(aspects.len());
    let within = |a: &[String], b: &[String]| a.iter().all(|w| b.contains(w));
    let mut said: Vec<Vec<String>> = out.iter().map(|t| content_words(t)).collect();
    for task in &tasks {
        if out.len() >= budget {
            break;
        }
        let mine = content_words(task);
        if (0..aspects.len()).any(|i| own(i, task))
            && !refers_back(task)
            && !said.iter().any(|s| within(&mine, s))
        {
            out.push(task.clone());
            said.push(mine);
        }
    }
    out
}

/// Pure: `tasks` without a task whose topic words another task holds all of (the same words: the
/// later one goes). The 1.5B planner gave "What is the default transaction isolation level of a
/// PostgreSQL session?" and, two tasks later, "What is the default isolation level of a
/// PostgreSQL session?": two researchers for one answer.
pub fn without_repeats(tasks: &[String]) -> Vec<String> {
    let words: Vec<Vec<String>> = tasks.iter().map(|t| content_words(t)).collect();
    let within = |a: &[String], b: &[String]| a.iter().all(|w| b.contains(w));
    tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            !words.iter().enumerate().any(|(j, other)| {
                j != *i && within(&words[*i], other) && (other.len() > words[*i].len() || j < *i)
            })
        })
        .map(|(_, t)| t.clone())
        .collect()
}

/// Instructions a planner writes before what a task is about ("search for 'python 3.11 toml
/// module'"), longest first.
const INSTRUCTIONS: [&str; 13] = [
    "search for",
    "look up",
    "look for",
    "find out",
    "investigate",
    "determine",
    "research",
    "identify",
    "describe",
    "explain",
    "search",
    "check",
    "find",
];

/// Pure: `task` without the instruction it opens with and without quotes around its words:
/// "search for 'python 3.11 toml module'" is "python 3.11 toml module". The researcher ranks a
/// page's passages by the task's words, and "search" ranked `PyConfig.verbose`'s "print a
/// message for each file that is checked for when searching for a module" first.
pub fn plain_task(task: &str) -> String {
    let mut rest = task.trim();
    loop {
        let lower = rest.to_lowercase();
        let Some(cut) = INSTRUCTIONS.iter().find_map(|i| {
            lower
                .strip_prefix(i)
                .filter(|after| after.starts_with(' '))
                .map(|_| i.len())
        }) else {
            break;
        };
        rest = rest[cut..].trim_start();
    }
    let quotes = ['\'', '"', '‘', '’', '“', '”'];
    let words: Vec<String> = rest
        .split_whitespace()
        .map(|w| w.trim_start_matches(quotes))
        .map(|w| {
            // A closing quote, before any final punctuation: "module'?" → "module?".
            let end = w.trim_end_matches(['?', '.', ',', ';', ':']);
            format!("{}{}", end.trim_end_matches(quotes), &w[end.len()..])
        })
        .filter(|w| !w.is_empty())
        .collect();
    if content_words(&words.join(" ")).is_empty() {
        return task.trim().to_string();
    }
    words.join(" ")
}

/// Pure: the evaluator's follow-up `queries` worth a researcher: each a [`plain_task`] with a
/// topic word no task already `done` had, and not the title of a page already read (`titles`),
/// without repeats. The 1.5B evaluator delegated "What's New In Python 3.11 — Python 3.11.2
/// documentation" three times, twice: six researchers re-reading a page the run had; and after
/// the json.loads and the jsonb task it delegated the whole question, both tasks' words.
pub fn follow_ups(queries: &[String], done: &[String], titles: &[String]) -> Vec<String> {
    let done: Vec<String> = done.iter().flat_map(|t| content_words(t)).collect();
    let titles: Vec<Vec<String>> = titles.iter().map(|t| content_words(t)).collect();
    let kept: Vec<String> = queries
        .iter()
        .map(|q| plain_task(q))
        .filter(|q| {
            let words = content_words(q);
            words.iter().any(|w| !done.contains(w)) && !titles.contains(&words)
        })
        .collect();
    without_repeats(&kept)
}

#[cfg(test)]
mod tests;
