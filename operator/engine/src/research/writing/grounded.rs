//! Grounded answers that small models can write: the passages that best match the
//! task are numbered, the model answers in a few sentences that each end with a passage number,
//! and the engine turns the numbers into citations. A model that cannot write a URL can still
//! write `[2]`; the links, titles and quotes come from the engine.
//!
//! A model with JSON mode answers in a JSON form instead (`{"points": [{"passages": [1],
//! "sentence": "..."}]}`, see [`answer_schema`]): a server that constrains decoding to the schema
//! keeps a 0.5B model on rails, and the engine checks each sentence against its passages the
//! same way.
//!
//! Pure functions; the researcher makes the call.

use serde_json::{Value, json};

use super::evidence::{check_support, sentences, subject, terms, unescape_markdown};
use super::links::LINK_RE;
use crate::llm::JsonSchema;
use crate::llm::json_extract::{close_truncated_json, extract_json, extract_json_object};
use crate::research::reading::passages::{Passage, PassageKind, focus, rank, subject_terms};
use crate::research::reading::queries;

/// One numbered passage.
#[derive(Debug, Clone, PartialEq)]
pub struct Numbered {
    /// Its number, from 1.
    pub number: usize,
    /// The page it is on.
    pub url: String,
    /// The page's title.
    pub title: String,
    /// Its heading breadcrumb on the page (may be empty).
    pub heading: String,
    /// The passage.
    pub text: String,
}

/// The passages as the model reads them.
pub fn render_passages(items: &[Numbered]) -> String {
    let mut out = String::new();
    for n in items {
        out.push_str(&format!(
            "[{}] ({})\n{}\n\n",
            n.number,
            place(n),
            n.text.trim()
        ));
    }
    out
}

/// How a numbered passage is labelled for the model (and recognised when a model copies it).
fn place(n: &Numbered) -> String {
    let title = n.title.trim();
    // A page whose first heading is its title ("20.3. Connections" › "20.3. Connections › ...")
    // is named once.
    let heading = n
        .heading
        .strip_prefix(title)
        .map_or(n.heading.as_str(), |rest| {
            rest.trim_start_matches([' ', '›'])
        });
    if heading.is_empty() {
        title.to_string()
    } else {
        format!("{title} › {heading}")
    }
}

/// The answer cut at its passage numbers: each piece of text with the passage it cites.
/// Both "sentence [2]." and the label form small models copy from the prompt ("[2] (place)
/// sentence") are understood; a number that names no passage cites nothing.
fn segments(answer: &str, items: &[Numbered]) -> Vec<(String, Option<usize>)> {
    let mut out: Vec<(String, Option<usize>)> = Vec::new();
    let mut current = String::new();
    let mut label: Option<usize> = None;
    let mut rest = answer.trim();
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let number = after.find(']').and_then(|c| {
            after[..c]
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=items.len()).contains(n))
                .map(|n| (n, c))
        });
        let Some((n, close)) = number else {
            current.push_str(&rest[..=open]);
            rest = after;
            continue;
        };
        current.push_str(&rest[..open]);
        rest = &after[close + 1..];
        if current.trim().is_empty() {
            // "[n] text": a label for what follows.
            label = Some(n);
        } else if let Some(l) = label {
            // Label form throughout: the text belongs to the previous label, `n` starts the next.
            out.push((std::mem::take(&mut current), Some(l)));
            label = Some(n);
        } else {
            out.push((std::mem::take(&mut current), Some(n)));
        }
    }
    current.push_str(rest);
    if !current.trim().is_empty() {
        out.push((current, label));
    }
    out
}

/// The report made from the model's numbered answer, or `None` when it cites no passage
/// shown (then the caller falls back). Each passage number becomes a link to the passage's
/// page; the cited passages are quoted under "Evidence", so a reader sees what each sentence
/// rests on. Passage labels a model copied from its prompt are removed.
pub fn assemble(answer: &str, items: &[Numbered]) -> Option<String> {
    assemble_for("", answer, items)
}

/// [`assemble`] for the task `asked`: a number the sentence only restates from the task's own
/// words ("PostgreSQL 15", "Python 3.11") need not be in the passage.
pub fn assemble_for(asked: &str, answer: &str, items: &[Numbered]) -> Option<String> {
    let labels: Vec<String> = items.iter().map(|n| format!("({})", place(n))).collect();
    let mut cited: Vec<usize> = Vec::new();
    // (text, stop): the stop after a citation may come in the next segment ("object [1].").
    let mut sentences: Vec<(String, String)> = Vec::new();
    // The sentences without their citations, to judge whether they answer.
    let mut plain: Vec<String> = Vec::new();
    for (text, cite) in segments(answer, items) {
        let mut text = text;
        for l in &labels {
            text = text.replace(l.as_str(), " ");
        }
        let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let lead: String = text.chars().take_while(|c| ".,;:!?".contains(*c)).collect();
        if !lead.is_empty() {
            if let Some(last) = sentences.last_mut() {
                last.1 = lead.clone();
            }
            text = text[lead.len()..].to_string();
        }
        let text = strip_signature(text.trim_start_matches(['*', '-', ' ']));
        if text.is_empty() || is_heading_copy(&text, items) {
            continue;
        }
        match cite {
            Some(n) => {
                let item = &items[n - 1];
                // A sentence its passage does not support (an invented number, other words
                // than the passage's) is dropped: the engine vouches for every citation it makes.
                if support_of(&text, item, asked).is_none() {
                    continue;
                }
                let (body, stop) = split_stop(&text);
                plain.push(body.to_string());
                sentences.push((format!("{body}{}", citation(item)), stop.to_string()));
                if !cited.contains(&n) {
                    cited.push(n);
                }
            }
            None => {
                plain.push(text.clone());
                sentences.push((text, String::new()));
            }
        }
    }
    let sentences: Vec<String> = sentences.into_iter().map(|(t, s)| t + &s).collect();
    if cited.is_empty() {
        return None;
    }
    Some(report(asked, &sentences, &plain, cited, items))
}

/// How well `item` supports `text` (the share of the sentence's terms it holds), or `None`
/// when it does not: too few shared terms, a number the passage does not have, a default
/// the passage states otherwise, or a "not" the passage does not say.
fn support_of(text: &str, item: &Numbered, asked: &str) -> Option<f64> {
    // The passage as the run's claim check reads its page: under its title and heading, which
    // name what the passage documents (`max_connections (integer)` heads a description that
    // never repeats the name).
    let evidence = format!("{}\n{}\n{}", item.title, item.heading, item.text);
    let verdict = check_support(text, &evidence, asked);
    (verdict.supported && !focus::contradicts_default(text, &item.text)).then_some(verdict.overlap)
}

/// Pure: the subjects `asked` names that none of the passages `items` names, under its page's
/// title and its heading or in its text ([`subject::unanswered`]). Empty when they answer.
pub fn unanswered(asked: &str, items: &[Numbered]) -> Vec<String> {
    if items.is_empty() {
        return vec![];
    }
    let texts: Vec<String> = items
        .iter()
        .map(|n| format!("{}\n{}\n{}", n.title, n.heading, n.text))
        .collect();
    subject::unanswered(asked, &texts)
}

/// Pure: the pages of `items`, best passage first, each once.
pub fn closest_pages(items: &[Numbered]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in items {
        if !out.contains(&n.url) {
            out.push(n.url.clone());
        }
    }
    out
}

/// A sentence without its final stop, and the stop (`.` when it had none).
fn split_stop(text: &str) -> (&str, &str) {
    match text.strip_suffix(['.', '!', '?']) {
        Some(body) => (body.trim_end(), &text[body.len()..]),
        None => (text, "."),
    }
}

/// The link a cited sentence ends with, before its stop.
fn citation(item: &Numbered) -> String {
    format!(" ([{}]({}))", link_text(&item.title), item.url)
}

/// The report: the cited sentences as a summary, then each cited passage quoted under its page,
/// then the best passages the summary left out (see [`uncited_best`]). When the sentences
/// leave out what the best passage answers ([`misses_the_answer`]), the summary leads with
/// that passage's statement, quoted and cited: the 0.5B model wrote about a sibling parameter
/// while the answer sat in the "Best-matching passage" below it (a held-out question).
fn report(
    asked: &str,
    sentences: &[String],
    plain: &[String],
    mut cited: Vec<usize>,
    items: &[Numbered],
) -> String {
    let mut summary: Vec<String> = Vec::new();
    for (best, statement) in leads(asked, plain, items).into_iter().rev() {
        summary.insert(0, format!("“{statement}”{}.", citation(best)));
        if !cited.contains(&best.number) {
            cited.insert(0, best.number);
        }
    }
    summary.extend(sentences.iter().cloned());
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

/// Passages, best first, among which the summary's lead is looked for.
const LEAD_CANDIDATES: usize = 3;

/// Pure: the passage the summary leads with when the model's sentences miss the answer: the
/// best one, or, when the task asks for a default, the best of the first
/// [`LEAD_CANDIDATES`] that states a default and names what the task asks about (under its
/// title and heading or in its text). For a default question the best-ranked passage is often
/// the entry's definition, and the sentence stating the default is a passage below it.
fn lead_passage<'a>(asked: &str, items: &'a [Numbered]) -> Option<&'a Numbered> {
    let best = items.first()?;
    if !asked.to_lowercase().contains("default") || focus::states_default(&best.text) {
        return Some(best);
    }
    let stating = items.iter().take(LEAD_CANDIDATES).find(|n| {
        focus::states_default(&n.text)
            && subject::unanswered(asked, &[format!("{}\n{}\n{}", n.title, n.heading, n.text)])
                .is_empty()
    });
    Some(stating.unwrap_or(best))
}

/// Most quoted statements a summary leads with.
const MAX_LEADS: usize = 3;

/// Pure: the passages the summary leads with, each with its statement for the task, in order:
/// the lead passage ([`lead_passage`]) when the model's sentences `plain` miss what it answers
/// ([`misses_the_answer`]), then, for each subject the task names that neither the sentences
/// nor an earlier lead name, the best passage whose text names it, when its statement does.
/// A question about two things ("How do `json.loads()` and `jsonb` each handle duplicate
/// keys?") was answered for one of them while the other's passage sat below the summary.
fn leads<'a>(asked: &str, plain: &[String], items: &'a [Numbered]) -> Vec<(&'a Numbered, String)> {
    let mut out: Vec<(&Numbered, String)> = Vec::new();
    if let Some(best) = lead_passage(asked, items)
        && misses_the_answer(asked, plain, best)
        && let Some(statement) = statement(asked, best)
    {
        out.push((best, statement));
    }
    let said = |out: &[(&Numbered, String)]| -> String {
        plain
            .iter()
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
        let lead = items.iter().find_map(|n| {
            if !names(&strip_signature(&n.text)) {
                return None;
            }
            statement_naming(asked, n, &subject)
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

/// Pure: `text` as quoted in a report: each Markdown link as its text and each bare URL as
/// code. A quote is the page's words; a link in it is no citation of the run's, and a URL the
/// run never read, left as a link, is cut by the evidence gate and counted as invented.
fn unlinked(text: &str) -> String {
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
const MAX_UNCITED_QUOTED: usize = 3;

/// Pure: the passages a reader should see that the summary did not cite: the one matching the
/// task best (a small model often answers from the second passage and leaves out the first,
/// which holds the answer: "The default is typically 128 megabytes"), and for a task
/// asking several things, the best passage for each ([`queries::question_parts`]): the 1.5B
/// model answered "What isolation levels does PostgreSQL support and how does Serializable
/// differ from Repeatable Read?" with one sentence about the second question, and the passage
/// listing the levels was shown to it but never to the reader.
fn uncited_best<'a>(asked: &str, cited: &[usize], items: &'a [Numbered]) -> Vec<&'a Numbered> {
    let mut chosen: Vec<usize> = Vec::new();
    if !cited.contains(&1) && !items.is_empty() {
        chosen.push(1);
    }
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
    for part in queries::question_parts(asked) {
        let scores = rank(&passages, &part);
        let best = (0..items.len())
            .filter(|i| scores[*i] > 0.0)
            .max_by(|a, b| scores[*a].total_cmp(&scores[*b]).then(b.cmp(a)));
        if let Some(i) = best {
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

/// Passages quoted under their page's link, in the given order; passages of one page and
/// heading share one link line. (Two identical link lines read as a repeat to the report's
/// repetition guard, which cut the report there: the second passage of an entry was lost.)
fn quoted_list(items: &[&Numbered]) -> String {
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

/// The extractive report made of the numbered passages when the model's answer is unusable:
/// the best passages for the task across every page read, best first, quoted unedited (issue
/// 14: the answer a page-by-page excerpt left out, `max_workers`' default, was passage 2 here).
/// The summary's first sentence is the best passage's statement for the task `asked`, quoted
/// and cited: the answer first, then the note that the model wrote none.
pub fn quoted_report(asked: &str, items: &[Numbered]) -> String {
    let lead = items
        .first()
        .and_then(|best| statement(asked, best).map(|s| format!("“{s}”{}. ", citation(best))))
        .unwrap_or_default();
    let items: Vec<&Numbered> = items.iter().collect();
    format!(
        "## Summary\n\n{lead}The model did not write a usable report, so this section quotes, unedited, the passages of the pages read that best match the task, best first.\n\n## Key findings\n{}",
        quoted_list(&items)
    )
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
const MIN_STATEMENT_WORDS: usize = 3;

/// Pure: whether `text` is a heading copied from the passages, not a statement: fewer than
/// three words, a lead-in ending in a colon, a breadcrumb, or the title or a heading of a shown passage ("Numeric Types", "8.1. Numeric
/// Types"). The 0.5B model's whole summary was once "Numeric Types".
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
    {
        return true;
    }
    items
        .iter()
        .any(|n| norm(&n.title) == t || n.heading.split('›').any(|h| norm(h) == t))
}

/// Pure: whether the summary's sentences `plain` leave out what the best passage answers: a
/// subject the task names that the passage's text names and no sentence does (the model wrote
/// about a sibling parameter; a subject only in the passage's heading, such as the class whose
/// parameter it is, need not be repeated), or, when the task asks for a default, a default the
/// passage states and no sentence does.
fn misses_the_answer(asked: &str, plain: &[String], best: &Numbered) -> bool {
    let passage = strip_signature(&best.text);
    let said = plain.join("\n");
    let unnamed_by_passage = subject::unanswered(asked, std::slice::from_ref(&passage));
    let leaves_out_subject = subject::unanswered(asked, std::slice::from_ref(&said))
        .iter()
        .any(|s| !unnamed_by_passage.contains(s));
    let asks_default = asked.to_lowercase().contains("default");
    let leaves_out_default = asks_default
        && focus::states_default(&best.text)
        && !plain.iter().any(|s| focus::claims_default(s));
    leaves_out_subject || leaves_out_default
}

/// Pure: the sentence of passage `best` that answers `asked` best, without its final stop: the
/// one naming most of the task's subjects, stating a default when the task asks for one, and
/// sharing most of its words. `None` for a passage without a sentence of three words.
fn statement(asked: &str, best: &Numbered) -> Option<String> {
    statement_for(asked, best, None)
}

/// Pure: [`statement`], preferring a sentence that names `subject` (one of `asked`'s).
fn statement_naming(asked: &str, best: &Numbered, subject: &str) -> Option<String> {
    statement_for(asked, best, Some(subject))
}

/// Pure: [`statement`], a sentence naming `prefer` first when given.
fn statement_for(asked: &str, best: &Numbered, prefer: Option<&str>) -> Option<String> {
    let asked_terms = terms(asked);
    let asks_default = asked.to_lowercase().contains("default");
    let keys = subject_terms(asked);
    let text = strip_signature(&best.text);
    let mut chosen: Option<(usize, String)> = None;
    // A short list item is a candidate whole: in "*   **timeout** (*float*) – How many seconds
    // the connection should wait ... Default five seconds." the last sentence states the
    // default and only the item names what it is the default of.
    let mut candidates = sentences(&text);
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
    for s in candidates {
        let words = s
            .split_whitespace()
            .filter(|w| w.chars().any(char::is_alphabetic))
            .count();
        // A lead-in ("... implied by the subscript key:") states nothing by itself.
        if words < MIN_STATEMENT_WORDS || s.trim_end().ends_with(':') {
            continue;
        }
        let named = subject::Named::new(&s);
        let names = keys
            .iter()
            .filter(|k| named.names(&subject::Subject::Name((*k).clone())))
            .count();
        let default = usize::from(asks_default && focus::states_default(&s));
        let shared = terms(&s).intersection(&asked_terms).count();
        let preferred = prefer.is_some_and(|p| {
            !subject::unanswered(asked, std::slice::from_ref(&s)).contains(&p.to_string())
        });
        let score = usize::from(preferred) * 1000 + names * 100 + default * 50 + shared;
        if chosen.as_ref().is_none_or(|(b, _)| score > *b) {
            chosen = Some((score, s));
        }
    }
    chosen.map(|(_, s)| {
        // A list item's marker ("*   Default five seconds") is no part of the quote.
        let s = unescape_markdown(&unlinked(without_list_marker(s.trim())));
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        let s = s.trim();
        s.strip_suffix(['.', '!', '?'])
            .unwrap_or(s)
            .replace(['“', '”'], "\"")
    })
}

/// Longest list item quoted whole as a statement, in characters.
const MAX_ITEM_CHARS: usize = 400;

/// Pure: `line` without a leading list marker ("*   ", "- ", "+ "); emphasis ("**Note**") is
/// kept.
fn without_list_marker(line: &str) -> &str {
    match line.strip_prefix(['*', '-', '+']) {
        Some(rest) if rest.starts_with(char::is_whitespace) => rest.trim_start(),
        _ => line,
    }
}

/// Most points a JSON answer makes (the schema's `maxItems`; more from an unconstrained model
/// are cut).
pub const MAX_POINTS: usize = 5;
/// Most passages one point cites.
const MAX_POINT_PASSAGES: usize = 3;
/// Longest sentence of a point in characters: the grammar stops a looping small model there.
const MAX_SENTENCE_CHARS: usize = 300;

/// One point of a JSON answer: a sentence and the passages it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Numbers of shown passages it cites, in the model's order, without repeats.
    pub passages: Vec<usize>,
    /// The sentence as the model wrote it.
    pub sentence: String,
}

/// The schema of the JSON answer form for `count` numbered passages. Passage ids are an enum of
/// the numbers shown, so a model held to the schema cannot cite a passage it was not shown.
/// Not strict: OpenAI's strict mode rejects `maxLength`, which keeps a small model from looping.
pub fn answer_schema(count: usize) -> JsonSchema {
    let ids: Vec<usize> = (1..=count.max(1)).collect();
    JsonSchema {
        name: "grounded_answer".to_string(),
        // Property order matters to grammar-based servers (they generate in schema order): the
        // passages are chosen before the sentence is written. serde_json's map keeps keys
        // sorted, and "passages" sorts before "sentence".
        schema: json!({
            "type": "object",
            "properties": {
                "points": {
                    "type": "array",
                    // Three points at least (one per passage when fewer are shown): held to
                    // one, the 0.5B model answered "use json.loads" and stopped, leaving out
                    // json.load and the error a reader meets next; on 12 questions that had
                    // failed, three points found 8 key facts where two found 2. A point its
                    // passage does not support is dropped and a repeat is said once, so an
                    // extra point costs a few output tokens when there is nothing more to say.
                    "minItems": count.clamp(1, 3),
                    "maxItems": MAX_POINTS,
                    "items": {
                        "type": "object",
                        "properties": {
                            "passages": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": MAX_POINT_PASSAGES,
                                "items": {"type": "integer", "enum": ids},
                            },
                            "sentence": {
                                "type": "string",
                                "minLength": 1,
                                "maxLength": MAX_SENTENCE_CHARS,
                            },
                        },
                        "required": ["passages", "sentence"],
                        "additionalProperties": false,
                    },
                },
            },
            "required": ["points"],
            "additionalProperties": false,
        }),
        strict: false,
    }
}

/// Pure: the points of a JSON answer for `count` shown passages, read tolerantly (code fences,
/// text around the JSON, a bare array of points, ids as strings, an answer cut off at its
/// output cap). Ids that name no shown passage are dropped. `None` when the answer holds no
/// JSON of that form; `Some` with no points when it does but cites nothing shown.
pub fn parse_points(answer: &str, count: usize) -> Option<Vec<Point>> {
    let shaped = |v: &Value| point_values(v).is_some();
    let value = extract_json(answer)
        .ok()
        .filter(shaped)
        .or_else(|| extract_json_object(answer).ok().filter(shaped))
        .or_else(|| {
            close_truncated_json(answer)
                .and_then(|closed| extract_json(&closed).ok())
                .filter(shaped)
        })?;
    let points = point_values(&value)?
        .iter()
        .filter_map(|p| point(p, count))
        .take(MAX_POINTS)
        .collect();
    Some(points)
}

/// The report made from JSON points, as [`assemble`] makes it from the `[n]` form: a sentence
/// none of its cited passages supports is dropped, and the citation goes to the cited passage
/// that supports it best. `None` when no sentence is left.
/// `asked` is the task (see [`assemble_for`]).
pub fn assemble_points(asked: &str, points: &[Point], items: &[Numbered]) -> Option<String> {
    let labels: Vec<String> = items.iter().map(|n| format!("({})", place(n))).collect();
    let mut cited: Vec<usize> = Vec::new();
    let mut sentences_out: Vec<String> = Vec::new();
    let mut said: Vec<String> = Vec::new();
    let mut plain: Vec<String> = Vec::new();
    for p in points {
        // A point of two sentences is judged sentence by sentence: the 0.5B model put a wrong
        // "does not set the timeout" before the right "If no timeout is supplied, the global
        // default ... is used", and the right half was lost with the wrong one.
        let mut kept: Vec<(String, Vec<usize>)> = Vec::new();
        for text in sentences(&clean_sentence(&p.sentence, &labels)) {
            let text = strip_signature(&text);
            // A small model repeats its point to fill the number the schema asks for: once is
            // enough.
            let key = text.to_lowercase();
            if text.is_empty() || said.contains(&key) || is_heading_copy(&text, items) {
                continue;
            }
            said.push(key);
            if let Some(cites) = supporting(&text, &p.passages, items, asked) {
                kept.push((text, cites));
            }
        }
        // Sentences of a point citing one passage in a row carry its link once, at the end.
        for (i, (text, cites)) in kept.iter().enumerate() {
            plain.push(text.clone());
            let same_next = kept.get(i + 1).is_some_and(|(_, next)| next[0] == cites[0]);
            if same_next {
                sentences_out.push(text.clone());
            } else {
                let (body, stop) = split_stop(text);
                sentences_out.push(format!("{body}{}{stop}", citation(&items[cites[0] - 1])));
            }
            for n in cites {
                if !cited.contains(n) {
                    cited.push(*n);
                }
            }
        }
    }
    if cited.is_empty() {
        return None;
    }
    Some(report(asked, &sentences_out, &plain, cited, items))
}

/// The passages a sentence cites that support it, the one its citation goes to first: the
/// cited passage supporting it best (strictly better only, so of equally good passages the
/// first cited keeps the citation), or else two or more passages of one page that support it
/// together (see [`supported_together`]); `None` when it is unsupported.
fn supporting(
    text: &str,
    passages: &[usize],
    items: &[Numbered],
    asked: &str,
) -> Option<Vec<usize>> {
    let mut best: Option<(f64, usize)> = None;
    for &n in passages {
        let Some(item) = items.get(n.wrapping_sub(1)) else {
            continue;
        };
        if let Some(score) = support_of(text, item, asked)
            && best.is_none_or(|(b, _)| score > b)
        {
            best = Some((score, n));
        }
    }
    match best {
        Some((_, n)) => Some(vec![n]),
        // A sentence joining what two passages of a page say ("max_connections defaults to 100
        // and superuser_reserved_connections to 3") is supported by them together: it cites
        // the page and quotes each passage.
        None => supported_together(text, passages, items, asked),
    }
}

/// The cited passages (valid numbers, in the model's order, without repeats), all of one page,
/// when together they support `text` though none does alone; `None` otherwise. The 1.5B
/// model answered a two-part question with one sentence over both settings' passages, and
/// each passage alone lacked the other's number, so the right answer was dropped.
fn supported_together(
    text: &str,
    passages: &[usize],
    items: &[Numbered],
    asked: &str,
) -> Option<Vec<usize>> {
    let mut valid: Vec<usize> = Vec::new();
    for &n in passages {
        if n >= 1 && n <= items.len() && !valid.contains(&n) {
            valid.push(n);
        }
    }
    // One page only: the run's citation check verifies a sentence against each page it cites,
    // and a sentence joining two pages' facts is supported by neither alone.
    if valid.len() < 2
        || valid
            .iter()
            .any(|n| items[n - 1].url != items[valid[0] - 1].url)
    {
        return None;
    }
    let joined = Numbered {
        text: valid
            .iter()
            .map(|n| items[n - 1].text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        ..items[valid[0] - 1].clone()
    };
    support_of(text, &joined, asked).map(|_| valid)
}

/// A point's sentence as it goes in the report: passage numbers and labels a model copied into
/// it removed (the engine makes the citations), list markers and extra spaces dropped.
fn clean_sentence(sentence: &str, labels: &[String]) -> String {
    let mut text = sentence.to_string();
    for l in labels {
        text = text.replace(l.as_str(), " ");
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(']') {
            Some(close)
                if !after[..close].trim().is_empty()
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_digit() || c == ',' || c == ' ') =>
            {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    let mut joined = out.split_whitespace().collect::<Vec<_>>().join(" ");
    // A marker removed before the final stop leaves "object ." behind.
    if let Some(stop) = joined.pop() {
        if ".!?".contains(stop) {
            joined = joined.trim_end().to_string();
        }
        joined.push(stop);
    }
    joined.trim_start_matches(['*', '-', ' ']).to_string()
}

/// The report from an answer asked for in JSON form: its points when the answer is JSON of that
/// form, else the answer read as the free-text `[n]` form (a model that ignored the request for
/// JSON). `None` when neither yields a supported sentence.
pub fn assemble_json(answer: &str, items: &[Numbered]) -> Option<String> {
    assemble_json_for("", answer, items)
}

/// [`assemble_json`] for the task `asked` (see [`assemble_for`]).
pub fn assemble_json_for(asked: &str, answer: &str, items: &[Numbered]) -> Option<String> {
    match parse_points(answer, items.len()) {
        // JSON read as prose would cut at its `[1]` id lists: never both.
        Some(points) => assemble_points(asked, &points, items),
        None => assemble_for(asked, answer, items),
    }
}

/// A title safe inside Markdown link text.
fn link_text(title: &str) -> String {
    let t = title.trim().replace(['[', ']'], "");
    if t.is_empty() {
        "source".to_string()
    } else {
        t
    }
}

mod each;
mod json_points;
use json_points::{point, point_values};
mod numbering;

pub use each::{EACH_PASSAGES, each_points, each_schema};
pub use numbering::number_passages;
#[cfg(test)]
use numbering::{breadcrumbs_as_headings, is_lead_in, looks_like_signature, prose_words};

#[cfg(test)]
mod tests;
