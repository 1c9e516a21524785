//! What a grounded report quotes: the statements its summary leads with when the model's
//! sentences miss the answer, the passages shown beside the cited ones, and the checks that
//! keep copied headings and signatures out of the summary.

use super::kind::{AnswerKind, answer_kind, holds_for};
use super::prose::{
    change_version, statement_before_colon, table_row_prose, with_alternative, with_following_value,
};
use super::relevance::entry_label;
use super::{Numbered, link_text};
use super::{entry_of, numbering};
use crate::research::reading::passages::{
    Passage, PassageKind, context_terms, focus, is_context, products_asked, rank, subject_terms,
};
use crate::research::reading::queries;
use crate::research::writing::evidence::subject::of_product;
use crate::research::writing::evidence::{sentences, subject, terms, unescape_markdown};
use crate::research::writing::links::LINK_RE;

/// Passages, best first, among which the summary's lead is looked for.
pub(super) const LEAD_CANDIDATES: usize = 3;

/// Pure: the passage the summary leads with when the model's sentences miss the answer: the
/// best one, or, when the task asks for a default or a kind of value ([`answer_kind`]: an
/// exception, a number, a version), the best of the first [`LEAD_CANDIDATES`] that states it
/// and names what the task asks about (under its title and heading or in its text). For a
/// default question the best-ranked passage is often the entry's definition, and the sentence
/// stating the default is a passage below it; for "What exception is raised when assigning to
/// a frozen dataclass?" the best passage said "will generate an exception" and the one below
/// named `FrozenInstanceError`.
pub(super) fn lead_passage<'a>(asked: &str, items: &'a [Numbered]) -> Option<&'a Numbered> {
    let best = items.first()?;
    let asks_default = asked.to_lowercase().contains("default");
    let kind = answer_kind(asked);
    let answers = |n: &Numbered| {
        (!asks_default || focus::states_default(&n.text))
            && kind.is_none_or(|k| holds_for(k, &with_entry(n), asked))
    };
    if answers(best) {
        return Some(best);
    }
    let stating = items.iter().take(LEAD_CANDIDATES).find(|n| {
        answers(n)
            && subject::unanswered(asked, &[format!("{}\n{}\n{}", n.title, n.heading, n.text)])
                .is_empty()
    });
    Some(stating.unwrap_or(best))
}

/// Most quoted statements a summary leads with.
pub(super) const MAX_LEADS: usize = 3;

/// Pure: the passages the summary leads with, each with its statement for the task (quoted, and
/// [`labelled`] with what it is said of when only the passage's heading names that), in order:
/// the lead passage ([`lead_passage`]) when the model's sentences `plain` miss what it answers
/// ([`misses_the_answer`]), then, for each subject the task names that neither the sentences,
/// the `headings` of the passages they cite, nor an earlier lead name, the best passage whose
/// text or heading names it. Every lead holds a value of the kind the task asks for
/// ([`of_kind`]).
/// A question about two things ("How do `json.loads()` and `jsonb` each handle duplicate
/// keys?") was answered for one of them while the other's passage sat below the summary.
pub(super) fn leads<'a>(
    asked: &str,
    plain: &[String],
    headings: &[String],
    items: &'a [Numbered],
) -> Vec<(&'a Numbered, String)> {
    let mut out: Vec<(&Numbered, String)> = Vec::new();
    // The lead states what the sentences left out: for "How do PostgreSQL's jsonb type each
    // handle duplicate keys?" the sentences named `json` and not `jsonb`, and the passage's
    // best sentence overall, on `json`'s exact copy, led the summary and was said twice.
    if let Some(best) = lead_passage(asked, items)
        && misses_the_answer(asked, plain, best)
        && let Some(statement) = lead_statement(asked, plain, best)
        && let Some(lead) = of_kind(asked, best, statement)
    {
        out.push((best, lead));
    }
    // The asked-for entry's own passage, wherever it ranks among those shown: an example that
    // names the option twice ranks above its one-line definition.
    if out.is_empty()
        && let Some(entry) = items
            .iter()
            .find(|n| focus::is_asked_entry(entry_of(&n.heading), asked))
        && writes_around_entry(asked, plain, headings, entry)
        && let Some(statement) = statement(asked, entry)
    {
        out.push((entry, labelled(asked, entry, statement)));
    }
    let said = |out: &[(&Numbered, String)]| -> String {
        plain
            .iter()
            .chain(headings)
            .cloned()
            .chain(out.iter().map(|(_, s)| s.clone()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    for subject in subject::unanswered(asked, &[said(&out)]) {
        if out.len() >= MAX_LEADS {
            break;
        }
        if !subject::unanswered(asked, &[said(&out)]).contains(&subject) {
            continue;
        }
        let names =
            |text: &str| !subject::unanswered(asked, &[text.to_string()]).contains(&subject);
        // The subject's own entry (a passage its heading names) first, then a passage whose
        // text names it: "... larger than `work_mem`" in another setting's entry is said in
        // passing, and work_mem's entry states its default.
        let by_heading = items.iter().filter(|n| names(&n.heading));
        let by_text = items
            .iter()
            .filter(|n| !names(&n.heading) && names(&strip_signature(&n.text)));
        let lead = by_heading.chain(by_text).find_map(|n| {
            statement_naming(asked, n, &subject)
                .and_then(|s| of_kind(asked, n, s))
                .filter(|s| names(s))
                .map(|s| (n, s))
        });
        if let Some((n, s)) = lead
            && !out.iter().any(|(_, o)| *o == s)
        {
            out.push((n, s));
        }
    }
    out
}

/// Pure: `statement` of `passage`, [`labelled`], as a lead for `asked`: `None` when the task asks
/// for a kind of value ([`answer_kind`]) and it holds none. For "What is the largest value that
/// Python's int and PostgreSQL's bigint type can hold?" the summary led with "PostgreSQL
/// `smallint`, `int`, `bigint` and `oid` are converted to Python `int`". A name counts in the
/// label too (`json.loads: “Deserialize ...”`); a number does not (`sqlite3: ...`).
fn of_kind(asked: &str, passage: &Numbered, statement: String) -> Option<String> {
    let kind = answer_kind(asked);
    let holds = kind.is_none_or(|k| holds_for(k, &statement, asked));
    let lead = labelled(asked, passage, statement);
    (holds || (kind == Some(AnswerKind::Name) && holds_for(AnswerKind::Name, &lead, asked)))
        .then_some(lead)
}

/// Pure: the task's subjects `keys` that `passage`'s heading names (the entry it is part of).
fn headed_keys<'k>(keys: &'k [String], passage: &Numbered) -> Vec<&'k String> {
    let heading = subject::Named::new(&passage.heading);
    keys.iter()
        .filter(|k| heading.names(&subject::Subject::Name((*k).clone())))
        .collect()
}

/// Pure: the quote of `statement` as the summary leads with it: “statement”, after the subjects
/// of `asked` that only the passage's heading names, when the statement names none of the
/// task's subjects ("maintenance_work_mem: “It defaults to 64 megabytes (64MB)”"), so the reader
/// sees what it is said of.
pub(super) fn labelled(asked: &str, passage: &Numbered, statement: String) -> String {
    // "How do I ...?" is answered by a name: a statement that does not name its entry is
    // labelled with it ("json.loads: “Deserialize s ... to a Python object”").
    if answer_kind(asked) == Some(AnswerKind::Name)
        && let Some(entry) = entry_label(&passage.heading)
        && !asked.to_lowercase().contains(&entry.to_lowercase())
        && !statement.to_lowercase().contains(&entry.to_lowercase())
    {
        return format!("{entry}: “{statement}”");
    }
    // Another entry's statement is labelled with that entry whatever is asked: "The default
    // value is 2.0, which makes hash-based operations use twice the usual `work_mem` base
    // amount" is `hash_mem_multiplier`'s default, and read unlabelled under a question on
    // `work_mem` it gave `work_mem` that value.
    if let Some(entry) = entry_label(&passage.heading)
        && !super::relevance::names_whole_or_by_last_part(asked, &entry)
        && !super::relevance::names_whole_or_by_last_part(&statement, &entry)
    {
        return format!("{entry}: “{statement}”");
    }
    let keys = subject_terms(asked);
    let named = subject::Named::new(&statement);
    if keys
        .iter()
        .any(|k| named.names(&subject::Subject::Name(k.clone())))
    {
        return format!("“{statement}”");
    }
    // The product asked in is no label: "python: “Read the pickled representation ...”" led
    // a report on Python 3.11's tomllib. Nor is the product whose docs the passage is of,
    // context or not ("postgresql, table: “...”" for "... columns a PostgreSQL table can have").
    let context = context_terms(asked);
    let all: Vec<&str> = headed_keys(&keys, passage)
        .into_iter()
        .filter(|k| !is_context(k, &context))
        .filter(|k| !subject::of_product(&passage.url, &passage.title, k))
        .map(String::as_str)
        .collect();
    // "logging.info", not "logging.info, logging": a module is named by its function's name.
    let headed: Vec<&str> = all
        .iter()
        .copied()
        .filter(|k| {
            !all.iter()
                .any(|o| o != k && o.strip_prefix(k).is_some_and(|r| r.starts_with('.')))
        })
        .collect();
    if headed.is_empty() {
        format!("“{statement}”")
    } else {
        format!("{}: “{statement}”", headed.join(", "))
    }
}

/// Pure: `text` as quoted in a report: each Markdown link as its text and each bare URL as
/// code. A quote is the page's words; a link in it is no citation of the run's, and a URL the
/// run never read, left as a link, is cut by the evidence gate and counted as invented.
pub(super) fn unlinked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let spans: Vec<std::ops::Range<usize>> = {
            let ticks: Vec<usize> = line.match_indices('`').map(|(i, _)| i).collect();
            ticks.chunks_exact(2).map(|p| p[0]..p[1]).collect()
        };
        let replaced = LINK_RE.replace_all(line, |caps: &regex::Captures<'_>| {
            let start = caps.get(0).map_or(0, |m| m.start());
            if spans.iter().any(|r| r.contains(&start)) {
                return caps[0].to_string();
            }
            match (caps.get(1), caps.get(3)) {
                (Some(t), _) => t.as_str().to_string(),
                (None, Some(u)) => {
                    // A sentence's stop after the URL stays outside the code.
                    let url = u.as_str().trim_end_matches(['.', ',', ';', ':', '!', '?']);
                    format!("`{url}`{}", &u.as_str()[url.len()..])
                }
                _ => caps[0].to_string(),
            }
        });
        out.push_str(&replaced);
    }
    out
}

/// Most passages quoted beside the cited ones.
pub(super) const MAX_UNCITED_QUOTED: usize = 3;

/// Pure: the passages a reader should see that the summary did not cite: the one matching the
/// task best (a small model often answers from the second passage and leaves out the first,
/// which holds the answer: "The default is typically 128 megabytes"), and for a task
/// asking several things, the best passage for each ([`queries::question_parts`]): the 1.5B
/// model answered "What isolation levels does PostgreSQL support and how does Serializable
/// differ from Repeatable Read?" with one sentence about the second question, and the passage
/// listing the levels was shown to it but never to the reader. For a task asking of two
/// products, each one's best passage when nothing cited is of its docs.
pub(super) fn uncited_best<'a>(
    asked: &str,
    cited: &[usize],
    items: &'a [Numbered],
) -> Vec<&'a Numbered> {
    let mut chosen: Vec<usize> = Vec::new();
    if !cited.contains(&1) && !items.is_empty() {
        chosen.push(1);
    }
    // A task asking of two products: the best passage of each one no cited passage is of (the
    // summary of "a Python datetime object and a PostgreSQL timestamp" cited Python's docs only).
    for product in products_asked(asked) {
        let of = |n: &Numbered| of_product(&n.url, &n.title, &product);
        if cited
            .iter()
            .any(|c| c.checked_sub(1).and_then(|i| items.get(i)).is_some_and(of))
        {
            continue;
        }
        if let Some(n) = items.iter().find(|n| of(n)).map(|n| n.number)
            && !chosen.contains(&n)
        {
            chosen.push(n);
        }
    }
    for part in queries::question_parts(asked) {
        if let Some(i) = best_for(&part, items) {
            let n = i + 1;
            if !cited.contains(&n) && !chosen.contains(&n) {
                chosen.push(n);
            }
        }
    }
    chosen.truncate(MAX_UNCITED_QUOTED);
    chosen.sort_unstable();
    chosen.iter().map(|n| &items[n - 1]).collect()
}

/// Pure: the index of the passage of `items` matching `part` best (BM25 over heading and text;
/// the earlier of equals), `None` when none shares a word with it.
fn best_for(part: &str, items: &[Numbered]) -> Option<usize> {
    let passages: Vec<Passage> = items
        .iter()
        .enumerate()
        .map(|(i, n)| Passage {
            index: i,
            heading_path: vec![n.heading.clone()],
            text: n.text.clone(),
            kind: PassageKind::Prose,
        })
        .collect();
    let scores = rank(&passages, part);
    (0..items.len())
        .filter(|i| scores[*i] > 0.0)
        .max_by(|a, b| scores[*a].total_cmp(&scores[*b]).then(b.cmp(a)))
}

/// Most statements added for the parts of a task asking several things.
const MAX_PART_LEADS: usize = 2;

/// Pure: for a task asking several things ([`queries::question_parts`]), the statement of the
/// best passage for each part ([`statement`] for that part, [`labelled`]), unless the summary
/// `said` it already (word for word, or, for a passage it cites, in words of its own). The 0.5B model answered "What is
/// the maximum length of an identifier in PostgreSQL, and what happens to longer names?" with
/// the length alone, while "longer names can be written in commands, but they will be
/// truncated" sat in a passage quoted below the summary.
pub(super) fn part_leads<'a>(
    asked: &str,
    cited: &[usize],
    said: &[String],
    items: &'a [Numbered],
) -> Vec<(&'a Numbered, String)> {
    let mut out: Vec<(&Numbered, String)> = Vec::new();
    for part in queries::question_parts(asked) {
        let Some(n) = best_for(&part, items).map(|i| &items[i]) else {
            continue;
        };
        if out.iter().any(|(o, _)| o.number == n.number) {
            continue;
        }
        let Some(statement) = statement(&part, n) else {
            continue;
        };
        // A cited passage is said when a sentence says what its statement for this part says:
        // "The default is 4.0", cited to `random_page_cost`'s entry, answered its default and
        // left out what it estimates, which the same passage states.
        let restated = |s: &String| {
            s.contains(&statement) || (cited.contains(&n.number) && restates(&part, s, &statement))
        };
        if said.iter().any(restated) {
            continue;
        }
        out.push((n, labelled(asked, n, statement)));
        if out.len() >= MAX_PART_LEADS {
            break;
        }
    }
    out
}

/// Passages quoted under their page's link, in the given order; passages of one page and
/// heading share one link line. (Two identical link lines read as a repeat to the report's
/// repetition guard, which cut the report there: the second passage of an entry was lost.)
pub(super) fn quoted_list(items: &[&Numbered]) -> String {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for item in items {
        let place = if item.heading.is_empty() {
            String::new()
        } else {
            format!(" › {}", item.heading)
        };
        let line = format!("- [{}]({}){place}:", link_text(&item.title), item.url);
        let quote = format!("> {}", unlinked(item.text.trim()).replace('\n', "\n> "));
        match groups.iter_mut().find(|(l, _)| *l == line) {
            Some((_, quotes)) => quotes.push(quote),
            None => groups.push((line, vec![quote])),
        }
    }
    let mut md = String::new();
    for (line, quotes) in groups {
        md.push_str(&format!("\n{line}\n"));
        for q in quotes {
            md.push_str(&format!("\n{q}\n"));
        }
    }
    md
}

/// Pure: `text` without a leading API signature a model copied from its passage
/// ("contextlib.chdir(path): Non parallel-safe context manager ..." → "Non parallel-safe context
/// manager ..."): the engine puts an entry's signature in front of its passage so the model
/// knows what the passage documents, and a sentence that begins with it is a copy, not an answer.
pub fn strip_signature(text: &str) -> String {
    let t = text.trim();
    let bare = t.trim_start_matches('`');
    let name_end = bare
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .unwrap_or(bare.len());
    if name_end == 0 || !bare[name_end..].starts_with('(') {
        return t.to_string();
    }
    // The call's closing parenthesis, then a colon.
    let mut depth = 0usize;
    let mut close = None;
    for (i, c) in bare[name_end..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    close = Some(name_end + i);
                    break;
                }
            }
            _ => {}
        }
    }
    let Some(close) = close else {
        return t.to_string();
    };
    let after = bare[close + 1..].trim_start_matches('`');
    match after.strip_prefix(':') {
        Some(rest) if rest.starts_with(char::is_whitespace) && !rest.trim().is_empty() => {
            let rest = rest.trim();
            let mut chars = rest.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect())
                .unwrap_or_default()
        }
        _ => t.to_string(),
    }
}

/// Fewest words with letters a sentence of a summary needs.
pub(super) const MIN_STATEMENT_WORDS: usize = 3;

/// Pure: whether `text` is a heading copied from the passages, not a statement: fewer than
/// three words, a lead-in ending in a colon, a breadcrumb, a code fence or unpaired backticks, or the title or a
/// heading of a shown passage ("Numeric Types", "8.1. Numeric Types"). The 0.5B model's whole
/// summary was once "Numeric Types".
pub fn is_heading_copy(text: &str, items: &[Numbered]) -> bool {
    let norm = |s: &str| -> String {
        s.split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().any(char::is_alphabetic))
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let t = norm(text);
    // A lead-in ("Other common use cases include:") introduces a list the sentence lacks.
    // A breadcrumb ("dropuser › Options › -p port--port=port") is a passage's label.
    if t.split(' ').filter(|w| !w.is_empty()).count() < MIN_STATEMENT_WORDS
        || text.trim_end().trim_end_matches('.').ends_with(':')
        || text.contains('›')
        // A code fence is a passage's markup: the sentence copied a lead-in and its code.
        || text.contains("```")
        // Backticks that do not pair: code copied in and cut inside a span ("To reset a
        // single file in the index, ``$ git reset -- frotz.c **<1>**").
        || has_unclosed_code(text)
    {
        return true;
    }
    items
        .iter()
        .any(|n| norm(&n.title) == t || n.heading.split('›').any(|h| norm(h) == t))
}

/// Pure: whether a code span of `text` is never closed: Markdown closes a run of backticks only
/// with a run of the same length, so each length must come an even number of times.
fn has_unclosed_code(text: &str) -> bool {
    let mut runs: std::collections::BTreeMap<usize, usize> = std::collections::BTreeMap::new();
    let mut run = 0;
    for c in text.chars().chain(std::iter::once(' ')) {
        if c == '`' {
            run += 1;
        } else if run > 0 {
            *runs.entry(run).or_default() += 1;
            run = 0;
        }
    }
    runs.values().any(|n| n % 2 == 1)
}

/// Pure: whether the summary's sentences `plain` leave out what the best passage answers: a
/// subject the task names that the passage's text names and no sentence does (the model wrote
/// about a sibling parameter; a subject only in the passage's heading, such as the class whose
/// parameter it is, need not be repeated), or, when the task asks for a default or a kind of
/// value ([`answer_kind`]), one the passage states and no sentence does.
pub(super) fn misses_the_answer(asked: &str, plain: &[String], best: &Numbered) -> bool {
    let leaves_out_subject = !left_out_subjects(asked, plain, best).is_empty();
    let asks_default = asked.to_lowercase().contains("default");
    let leaves_out_default =
        asks_default && focus::states_default(&best.text) && !answers_default(asked, plain);
    // The sentences hold no value of the kind asked for, and the passage does.
    let leaves_out_kind = answer_kind(asked).is_some_and(|k| {
        holds_for(k, &with_entry(best), asked) && !plain.iter().any(|s| holds_for(k, s, asked))
    });
    leaves_out_subject
        || leaves_out_default
        || leaves_out_kind
        || leaves_out_condition(asked, plain, best)
}

/// Pure: the subjects of the task that the best passage's text names and none of the
/// sentences `plain` does.
fn left_out_subjects(asked: &str, plain: &[String], best: &Numbered) -> Vec<String> {
    let passage = strip_signature(&best.text);
    let said = plain.join("\n");
    let unnamed_by_passage = subject::unanswered(asked, std::slice::from_ref(&passage));
    subject::unanswered(asked, std::slice::from_ref(&said))
        .into_iter()
        .filter(|s| !unnamed_by_passage.contains(s))
        .collect()
}

/// Pure: the statement the summary leads with from `best`: its [`statement`] when that names a
/// subject the sentences `plain` left out, or the passage's title or heading does (its
/// sentences are about it: "Furthermore, it reclaims disk space immediately" on `TRUNCATE`'s
/// page), or they left out none; else its statement naming the first they left out.
fn lead_statement(asked: &str, plain: &[String], best: &Numbered) -> Option<String> {
    let left_out = left_out_subjects(asked, plain, best);
    let overall = statement(asked, best);
    let names_one = |s: &String| {
        let text = format!("{}\n{}\n{s}", best.title, best.heading);
        let unnamed = subject::unanswered(asked, std::slice::from_ref(&text));
        left_out.iter().any(|k| !unnamed.contains(k))
    };
    match left_out.first() {
        Some(subject) if !overall.as_ref().is_some_and(names_one) => {
            statement_naming(asked, best, subject).or(overall)
        }
        _ => overall,
    }
}

/// Fewest of the task's own words a sentence of the passage must hold for
/// [`leaves_out_condition`].
const CONDITION_WORDS: usize = 2;

/// Pure: whether a sentence of the passage `best` holds at least [`CONDITION_WORDS`] of what
/// the task asks of its subjects ([`subject::asked_of_subjects`], less the words of the
/// passage's title and heading, which name what it is about: "fails with conflicts" of "What
/// happens to the stash entry when git stash pop fails with conflicts?") and no sentence of the
/// summary holds as many. The 0.5B model answered with `pop`'s first sentence while the same
/// passage went on "Applying the state can fail with conflicts; in this case, it is not removed
/// from the stash list".
fn leaves_out_condition(asked: &str, plain: &[String], best: &Numbered) -> bool {
    let about = terms(&format!("{}\n{}", best.title, best.heading));
    let condition: std::collections::BTreeSet<String> = subject::asked_of_subjects(asked)
        .into_iter()
        .filter(|w| !about.contains(w))
        .collect();
    let passage = strip_signature(&best.text);
    let held = |s: &str| terms(s).intersection(&condition).count();
    let most = sentences(&passage)
        .iter()
        .map(|s| held(s))
        .max()
        .unwrap_or(0);
    most >= CONDITION_WORDS && plain.iter().all(|s| held(s) < most)
}

/// Pure: whether the model wrote around the asked-for entry's definition: `best` is the entry
/// of what the task names (the function, setting or option: [`focus::is_asked_entry`]), no
/// sentence cites a passage under it (`headings` of the cited ones), and none says what its
/// statement says. The 0.5B model answered "What does git log --follow do, and what is its
/// limitation?" from the page's examples while `--follow`'s entry, shown first, said "works
/// only for a single file".
pub(super) fn writes_around_entry(
    asked: &str,
    plain: &[String],
    headings: &[String],
    best: &Numbered,
) -> bool {
    // A definition adds nothing to a default the sentences state: "CREATE INDEX — define a new
    // index" led the answer "creates B-tree indexes by default" (tuning set).
    let adds = |s: &str| {
        !answers_default(asked, plain) || focus::states_default(s) || focus::says_by_default(s)
    };
    focus::is_asked_entry(entry_of(&best.heading), asked)
        && !headings.contains(&best.heading)
        && statement(asked, best)
            .is_some_and(|s| adds(&s) && !plain.iter().any(|p| restates(asked, p, &s)))
}

/// Pure: whether the sentences `plain` state the default `asked` asks for: a default value, or,
/// asked what is done "by default" ("Which index type does CREATE INDEX create by default?"),
/// what is done by default, which names no value.
fn answers_default(asked: &str, plain: &[String]) -> bool {
    asked.to_lowercase().contains("default")
        && plain.iter().any(|s| {
            focus::claims_default(s) || (focus::says_by_default(asked) && focus::says_by_default(s))
        })
}

/// Share of a statement's words a sentence must hold to say what it says.
const RESTATES_SHARE: f64 = 0.5;

/// Pure: whether `sentence` says what `statement` says: it holds at least [`RESTATES_SHARE`]
/// of the statement's words beyond the task's own.
fn restates(asked: &str, sentence: &str, statement: &str) -> bool {
    let own = terms(asked);
    let words: Vec<String> = terms(statement)
        .into_iter()
        .filter(|w| !own.contains(w))
        .collect();
    if words.is_empty() {
        return true;
    }
    let said = terms(sentence);
    let held = words.iter().filter(|w| said.contains(*w)).count();
    held as f64 >= RESTATES_SHARE * words.len() as f64
}

/// Pure: the sentence of passage `best` that answers `asked` best, without its final stop: the
/// one naming most of the task's subjects, stating a default when the task asks for one, and
/// sharing most of its words. `None` for a passage without a sentence of three words.
pub(super) fn statement(asked: &str, best: &Numbered) -> Option<String> {
    statement_for(asked, best, None)
}

/// Pure: [`statement`], preferring a sentence that names `subject` (one of `asked`'s).
pub(super) fn statement_naming(asked: &str, best: &Numbered, subject: &str) -> Option<String> {
    statement_for(asked, best, Some(subject))
}

/// Pure: [`statement`], a sentence naming `prefer` first when given.
pub(super) fn statement_for(asked: &str, best: &Numbered, prefer: Option<&str>) -> Option<String> {
    let asked_terms = terms(asked);
    let asks_default = asked.to_lowercase().contains("default");
    let kind = answer_kind(asked);
    let keys = subject_terms(asked);
    let text = table_row_prose(&strip_signature(&best.text));
    // A code block states nothing: its comment "-- value must be of the jsonb type as well"
    // led a summary on how jsonb handles duplicate keys.
    if text.trim_start().starts_with("```") {
        return None;
    }
    // What the passage's heading names is what its sentences are about ("It defaults to 64
    // megabytes" under `maintenance_work_mem (integer)`), unless a sentence names another of
    // the task's subjects ("... larger than `work_mem`").
    let headed = headed_keys(&keys, best);
    let mut chosen: Option<(usize, String)> = None;
    // A short list item is a candidate whole: in "*   **timeout** (*float*) – How many seconds
    // the connection should wait ... Default five seconds." the last sentence states the
    // default and only the item names what it is the default of.
    let mut candidates = sentences(&text);
    // A FAQ's answer is said with its question ("Q: Is there a JIT compiler? A: No.").
    if let (Some(q), Some(a)) = (candidates.first(), candidates.get(1))
        && q.starts_with("Q:")
        && a.starts_with("A:")
    {
        candidates[0] = format!("{q} {a}");
    }
    candidates.extend(
        text.lines()
            .map(str::trim)
            .filter(|l| {
                without_list_marker(l) != *l
                    && l.chars().count() <= MAX_ITEM_CHARS
                    && sentences(l).len() > 1
            })
            .map(str::to_string),
    );
    // A note of a later version supersedes an earlier one that states the same kind of thing:
    // "Changed in version 3.5: ... it will default to the number of processors ... multiplied
    // by 5" led a ThreadPoolExecutor answer whose passage went on "Changed in version 3.8:
    // Default value of max_workers is changed to min(32, os.cpu_count() + 4)".
    let newest = |default: bool| {
        candidates
            .iter()
            .filter(|c| focus::states_default(c) == default)
            .filter_map(|c| change_version(c))
            .max()
    };
    let newest = [newest(false), newest(true)];
    for s in candidates {
        if change_version(&s)
            .is_some_and(|v| newest[usize::from(focus::states_default(&s))].is_some_and(|n| v < n))
        {
            continue;
        }
        // A lead-in ("... implied by the subscript key:") states nothing by itself; a sentence
        // before its example states what it says before the colon ([`statement_before_colon`]:
        // "..., leaving the *maxsize* at its default value of 128:").
        let s = if s.trim_end().ends_with(':') {
            match statement_before_colon(&s) {
                Some(body) => body,
                None => continue,
            }
        } else {
            s
        };
        let words = s
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count();
        // A bare version note says when, not what: "New in version 3.11" was quoted as the
        // answer to "what new limit on int/str conversion did it introduce?".
        let when_only = numbering::is_version_note(&s) && !numbering::asks_version(asked);
        if words < MIN_STATEMENT_WORDS || super::prose::is_credit(&s) || when_only {
            continue;
        }
        let named = subject::Named::new(&s);
        let own: Vec<&String> = keys
            .iter()
            .filter(|k| named.names(&subject::Subject::Name((*k).clone())))
            .collect();
        let about_heading = own.iter().all(|k| headed.contains(k));
        let names = if about_heading {
            own.len().max(headed.len())
        } else {
            own.len()
        };
        let default = usize::from(asks_default && focus::states_default(&s))
            + usize::from(kind.is_some_and(|k| holds_for(k, &s, asked)));
        let shared = terms(&s).intersection(&asked_terms).count();
        let preferred = prefer.is_some_and(|p| {
            !subject::unanswered(asked, std::slice::from_ref(&s)).contains(&p.to_string())
                || (about_heading && headed.iter().any(|k| k.as_str() == p))
        });
        let score = usize::from(preferred) * 1000 + names * 100 + default * 50 + shared;
        if chosen.as_ref().is_none_or(|(b, _)| score > *b) {
            chosen = Some((score, s));
        }
    }
    chosen.map(|(_, s)| {
        let all = sentences(&text);
        let s = with_alternative(&all, with_following_value(&all, s, kind, asked));
        quotable(&s)
    })
}

/// Pure: a passage's sentence as a summary quotes it: links as their text, Markdown escapes
/// undone, one space between words, no list marker ("*   Default five seconds"), no final
/// stop, and straight quotes inside the curly ones it is quoted in.
pub(super) fn quotable(s: &str) -> String {
    let s = unescape_markdown(&unlinked(without_list_marker(s.trim())));
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let s = s.trim();
    s.strip_suffix(['.', '!', '?'])
        .unwrap_or(s)
        .replace(['“', '”'], "\"")
}

/// Pure: a passage's text without its signature, after the entry it documents (`json.loads`
/// names the function its text "Deserialize *s* ..." describes).
fn with_entry(n: &Numbered) -> String {
    format!("{}\n{}", entry_of(&n.heading), strip_signature(&n.text))
}

/// Longest list item quoted whole as a statement, in characters.
pub(super) const MAX_ITEM_CHARS: usize = 400;

/// Pure: `line` without a leading list marker ("*   ", "- ", "+ "); emphasis ("**Note**") is
/// kept.
pub(super) fn without_list_marker(line: &str) -> &str {
    match line.strip_prefix(['*', '-', '+']) {
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
        _ => line,
    }
}
