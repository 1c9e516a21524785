//! The grounded report's Markdown: its summary (leads, the model's sentences, the parts left
//! unanswered), the quoted evidence and the best passages left out.

use super::prose::{alternative_after, table_row_prose};
use super::statements::{
    LEAD_CANDIDATES, labelled, leads, part_leads, quotable, quoted_list, statement,
    strip_signature, uncited_best,
};
use super::{Numbered, citation, kind};
use crate::research::reading::passages::focus;
use crate::research::reading::queries;
use crate::research::writing::evidence::{sentences as split_sentences, terms};
use crate::research::writing::links::LINK_RE;

/// The report: the cited sentences as a summary, then each cited passage quoted under its page,
/// then the best passages the summary left out (see [`uncited_best`]). When the sentences
/// leave out what the best passage answers (`statements::misses_the_answer`), the summary leads with
/// that passage's statement, quoted and cited: the 0.5B model wrote about a sibling parameter
/// while the answer sat in the "Best-matching passage" below it.
/// `shifted` are the passages the model wrote another passage's sentence for (see
/// [`passed_over`]).
pub(super) fn report(
    asked: &str,
    sentences: &[String],
    plain: &[String],
    mut cited: Vec<usize>,
    valued: &[usize],
    shifted: &[usize],
    items: &[Numbered],
) -> String {
    let mut summary: Vec<String> = Vec::new();
    // What the cited passages' headings name, the summary speaks of: a sentence under
    // `ThreadPoolExecutor(max_workers=None, ...)` is about that class. Asked for a value, it
    // has spoken of it only with a value (`valued`): a warning cited to
    // `maintenance_work_mem`'s entry did not say its default, which was then never led with.
    let headings: Vec<String> = cited
        .iter()
        .filter(|n| !asks_value(asked) || valued.contains(n))
        .filter_map(|n| items.get(n.wrapping_sub(1)))
        .map(|n| n.heading.clone())
        .collect();
    let leading = leads(asked, plain, &headings, items);
    let led = !leading.is_empty();
    for (best, statement) in leading.into_iter().rev() {
        summary.insert(0, format!("{statement}{}.", citation(best)));
        if !cited.contains(&best.number) {
            cited.insert(0, best.number);
        }
    }
    if led {
        summary.extend(sentences.iter().cloned());
    } else {
        summary.extend(answer_first(asked, sentences, plain));
    }
    for (at, n, alternative) in alternatives(&summary, &cited, items).into_iter().rev() {
        summary.insert(at + 1, format!("“{alternative}”{}.", citation(n)));
    }
    for (n, statement) in passed_over(asked, shifted, &cited, &summary, items) {
        summary.push(format!("{statement}{}.", citation(n)));
        cited.push(n.number);
    }
    for (n, statement) in part_leads(asked, &cited, &summary, items) {
        summary.push(format!("{statement}{}.", citation(n)));
        cited.push(n.number);
    }
    // A part no sentence answers is said to be unanswered, not left out in silence. Citations
    // are no statements: a title's "3.11.2" is no version the summary states.
    let said: Vec<String> = summary
        .iter()
        .map(|s| {
            crate::research::writing::links::LINK_RE
                .replace_all(s, "")
                .into_owned()
        })
        .collect();
    for (part, kind) in kind::parts_without_value(asked, &said) {
        summary.push(kind::none_states(&part, kind::kind_name(kind)));
    }
    let cited = cited.as_slice();
    let quoted: Vec<&Numbered> = cited.iter().map(|n| &items[n - 1]).collect();
    let mut md = format!(
        "## Summary\n\n{}\n\n## Evidence\n{}",
        summary.join(" "),
        quoted_list(&quoted)
    );
    let extra = uncited_best(asked, cited, items);
    if !extra.is_empty() {
        // Their link lines differ from the evidence's ("Also from ..."): the same line twice
        // reads as a repeat to the report's repetition guard, which cut this section whenever
        // the best passage was another paragraph of a cited entry (shared_buffers'
        // "The default is typically 128 megabytes" never reached the reader).
        let also = quoted_list(&extra).replace("\n- [", "\n- Also from [");
        let heading = if extra.len() == 1 {
            "Best-matching passage (not cited above)"
        } else {
            "Best-matching passages (not cited above)"
        };
        md.push_str(&format!("\n## {heading}\n{also}"));
    }
    md
}

/// Pure: whether `asked` asks for a value: a number ([`kind::AnswerKind::Number`]) or a default.
fn asks_value(asked: &str) -> bool {
    kind::answer_kind(asked) == Some(kind::AnswerKind::Number)
        || asked.to_lowercase().contains("default")
}

/// Pure: the model's `sentences` (and their text without citations, `plain`) with the first one
/// stating the value a one-part question asks for (a default, a number, a version, an
/// exception) moved to the front, when the first does not state it. Answer first: the 1.5B
/// model's sentences on "What is the default transaction isolation level of a PostgreSQL
/// session?" spoke of the isolation levels and idle timeouts for five sentences, and only the
/// sixth said "Read Committed is the default" (tuning set, deep mode). A sentence sharing the
/// citation of the run after it carries none of its own and stays where it is.
pub(super) fn answer_first(asked: &str, sentences: &[String], plain: &[String]) -> Vec<String> {
    let mut out = sentences.to_vec();
    if sentences.len() != plain.len() || queries::split_questions(asked).len() > 1 {
        return out;
    }
    let asks_default = asked.to_lowercase().contains("default");
    let kind = kind::answer_kind(asked).filter(|k| *k != kind::AnswerKind::Name);
    let answers = |s: &str| {
        if asks_default {
            focus::claims_default(s)
        } else {
            kind.is_some_and(|k| kind::holds_for(k, s, asked))
        }
    };
    // Asked for no value, nothing moves: a sentence naming the question's subject is no better
    // an opening than one describing it under its entry's heading ("If the string starts with
    // the *prefix* string, return ..."), and "See `str.removeprefix()` for ..." came first
    // when it was tried (probe set).
    if !asks_default && kind.is_none() || plain.first().is_none_or(|s| answers(s)) {
        return out;
    }
    let own_citation = |i: usize| sentences[i].contains("](") && sentences[i - 1].contains("](");
    // A copied quote or list item ("> * `FIRST = auto()` will work") is no sentence to open with.
    let prose = |i: usize| {
        plain[i]
            .trim_start()
            .starts_with(|c: char| c.is_alphanumeric() || "`\"“".contains(c))
    };
    if let Some(i) = (1..plain.len()).find(|i| answers(&plain[*i]) && own_citation(*i) && prose(*i))
    {
        let moved = out.remove(i);
        out.insert(0, moved);
    }
    out
}

/// Pure: the statements ([`statement`], [`labelled`]) of the best passages ([`LEAD_CANDIDATES`])
/// at whose number the model wrote another passage's sentence (`shifted`), when no sentence of
/// the summary cites them or `said` the statement already, and it is an answer by the checks a
/// model's sentence passes. Asked how `asyncio.TaskGroup` handles its tasks' exceptions, the
/// 0.5B model wrote passage 1's sentence at number 2, and passage 2, "those exceptions are
/// combined in an `ExceptionGroup` ... which is then raised", reached no reader's summary.
pub(super) fn passed_over<'a>(
    asked: &str,
    shifted: &[usize],
    cited: &[usize],
    said: &[String],
    items: &'a [Numbered],
) -> Vec<(&'a Numbered, String)> {
    let mut out = Vec::new();
    for n in items.iter().take(LEAD_CANDIDATES) {
        if !shifted.contains(&n.number) || cited.contains(&n.number) {
            continue;
        }
        let Some(s) = statement(asked, n) else {
            continue;
        };
        if super::support_of(&s, n, asked).is_some() && !said.iter().any(|d| d.contains(&s)) {
            out.push((n, labelled(asked, n, s)));
        }
    }
    out
}

/// Share of a passage sentence's words a summary sentence holds when it states that sentence.
const STATES_SHARE: f64 = 0.8;

/// Fewest words (beside stopwords) of a condition a summary sentence is taken to state: "If
/// not, it fails" is said by many a sentence.
const MIN_CONDITION_TERMS: usize = 3;

/// Share of an alternative's words the summary holds when it has said it already.
const SAID_SHARE: f64 = 0.5;

/// Pure: the share of `statement`'s words that `sentence` holds (0 for a statement of none).
fn share_held(sentence: &str, statement: &str) -> f64 {
    let want = terms(statement);
    if want.is_empty() {
        return 0.0;
    }
    let have = terms(sentence);
    want.iter().filter(|w| have.contains(*w)).count() as f64 / want.len() as f64
}

/// Pure: for each sentence of `summary` that states a condition of a cited passage whose next
/// sentence says what happens otherwise ([`alternative_after`]), the index of that summary
/// sentence, the passage and the alternative, quotable, when the summary does not say it yet.
/// Asked what `textwrap.shorten()` does with a text longer than the width, the 0.5B model
/// copied "If the result fits in the *width*, it is returned" and stopped; the answer,
/// "Otherwise, enough words are dropped from the end ...", was only in the quoted evidence.
pub(super) fn alternatives<'a>(
    summary: &[String],
    cited: &[usize],
    items: &'a [Numbered],
) -> Vec<(usize, &'a Numbered, String)> {
    let plain: Vec<String> = summary
        .iter()
        .map(|s| LINK_RE.replace_all(s, "").into_owned())
        .collect();
    let mut out: Vec<(usize, &Numbered, String)> = Vec::new();
    for n in cited.iter().filter_map(|k| items.get(k.wrapping_sub(1))) {
        let own = split_sentences(&table_row_prose(&strip_signature(&n.text)));
        for i in 0..own.len() {
            let Some(alternative) = alternative_after(&own, i) else {
                continue;
            };
            if terms(&own[i]).len() < MIN_CONDITION_TERMS {
                continue;
            }
            let Some(at) = plain
                .iter()
                .position(|p| share_held(p, &own[i]) >= STATES_SHARE)
            else {
                continue;
            };
            let quoted = quotable(&alternative);
            let said = plain
                .iter()
                .any(|p| share_held(p, &alternative) >= SAID_SHARE)
                || out.iter().any(|(_, _, a)| *a == quoted);
            if !said {
                out.push((at, n, quoted));
            }
        }
    }
    // In the summary's order: the caller inserts from the last back, each after the sentence
    // it completes.
    out.sort_by_key(|(at, _, _)| *at);
    out
}
