//! How a key fact is found in a report: normalised string match ([`normalise`], [`match_facts`]),
//! and whether the report said it in its own words ([`own_words`], [`mark_stated`]).

use super::{Expect, FactResult, Question, QuestionResult, n};

/// Pure: lowercase with every run of whitespace collapsed to one space, trimmed; Markdown's
/// inline-code backticks read as spaces and its backslash escapes dropped, so "`BaseExceptionGroup`
/// extends `BaseException`" states "extends baseexception" and `rel\_tol` is `rel_tol`.
pub fn normalise(s: &str) -> String {
    plain(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Pure: `s` without Markdown's inline-code backticks (a space each) and backslash escapes.
fn plain(s: &str) -> String {
    s.replace('\\', "").replace('`', " ")
}

/// Pure: a match string as it is looked for in a [`normalise`]d text: normalised, but a space it
/// starts or ends with kept (from a backtick: "json.load`" is `json.load` as a whole name, not
/// the start of `json.loads`). Empty when it has no text.
fn pattern(m: &str) -> String {
    let p = plain(m).to_lowercase();
    let core = p.split_whitespace().collect::<Vec<_>>().join(" ");
    if core.is_empty() {
        return core;
    }
    let lead = if p.starts_with(char::is_whitespace) {
        " "
    } else {
        ""
    };
    let trail = if p.ends_with(char::is_whitespace) {
        " "
    } else {
        ""
    };
    format!("{lead}{core}{trail}")
}

/// Pure: whether the [`normalise`]d `text` holds the match string `m` (see [`pattern`]).
pub(crate) fn holds(text: &str, m: &str) -> bool {
    let p = pattern(m);
    // Padded, so a name at the very start or end of the text is still a whole name.
    !p.is_empty() && format!(" {text} ").contains(p.as_str())
}

/// Pure: the key facts of `q` matched by normalised string against a normalised body (empty for
/// no-answer questions).
pub fn match_facts(q: &Question, normalised_body: &str) -> Vec<FactResult> {
    if q.expects() != Expect::Answer {
        return Vec::new();
    }
    q.key_facts
        .iter()
        .map(|f| {
            let matched = f
                .matches
                .iter()
                .find(|m| holds(normalised_body, m))
                .map(|m| normalise(m));
            FactResult {
                fact: f.fact.clone(),
                found: matched.is_some(),
                matched,
                judge: None,
                stated: false,
            }
        })
        .collect()
}

/// Pure: the part of a report body written in the report's own words: its `## Summary` section
/// when it has one (Quarry's: the model's cited sentences, or the note that it wrote none),
/// otherwise the body without quoted lines (`> ...`). A fact found only in a quoted passage was
/// shown to the reader but not said; the eval counts the two apart so neither hides the other.
pub fn own_words(body: &str) -> String {
    if let Some(start) = body.find("## Summary\n") {
        let rest = &body[start + "## Summary\n".len()..];
        let end = rest.find("\n## ").unwrap_or(rest.len());
        return rest[..end].to_string();
    }
    body.lines()
        .filter(|l| !l.trim_start().starts_with('>'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Pure: marks the found facts whose match string is in the normalised own words too.
pub fn mark_stated(q: &Question, facts: &mut [FactResult], normalised_own: &str) {
    for (f, key) in facts.iter_mut().zip(&q.key_facts) {
        f.stated = f.found && key.matches.iter().any(|m| holds(normalised_own, m));
    }
}

/// Pure: matches the key facts of a result on disk again against `answer`, its report body
/// ([`answer_body`]; `None` when it has none), and recounts them; the judge's verdicts stay, and
/// its agreement is recounted. `quarry eval --rescore` runs this after a change to the matching
/// rules, so earlier runs (another system's too) are compared by the same rules without running
/// anything again.
pub fn rematch(q: &Question, answer: Option<&str>, r: &mut QuestionResult) {
    let raw = answer.unwrap_or_default();
    let mut facts = match_facts(q, &normalise(raw));
    mark_stated(q, &mut facts, &normalise(&own_words(raw)));
    for (new, old) in facts.iter_mut().zip(&r.facts) {
        new.judge = old.judge;
    }
    r.key_facts_found = n(facts.iter().filter(|f| f.found).count());
    r.key_facts_stated = n(facts.iter().filter(|f| f.stated).count());
    r.facts = facts;
    if r.key_facts_judged.is_some() {
        crate::eval::judge::recount_verdicts(r);
    }
}
