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

use super::evidence::{self, check_support, local::clauses, sentences, subject};
use crate::llm::JsonSchema;
use crate::llm::json_extract::{close_truncated_json, extract_json, extract_json_object};
use crate::research::reading::passages::{focus, subject_terms};

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
    let mut valued: Vec<usize> = Vec::new();
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
        let text = statement_before_colon(&text).unwrap_or(text);
        let Some(text) = pointers::without_pointers(&text) else {
            continue;
        };
        if text.is_empty()
            || is_heading_copy(&text, items)
            || prose::is_question(&text)
            || prose::is_credit(&text)
        {
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
                if kind::states_value(body) {
                    valued.push(n);
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
    Some(report(
        asked,
        &sentences,
        &plain,
        cited,
        &valued,
        &[],
        items,
    ))
}

/// Pure: whether a sentence of a JSON point is a piece of one: it opens with a lower-case
/// function word ("for long periods of time ...", "is blocked on transaction one: a deadlock
/// condition") or ends in one with no stop ("... to hold transactions open for"). The 0.5B
/// model filled its per-passage strings with windows of the passage cut at both ends, and the
/// summary read as torn text. (In the `[n]` form a piece after a citation may go on a sentence,
/// so only points are judged so.)
fn is_fragment(text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let stop_word = |w: &str| {
        let bare = w.trim_matches(|c: char| !c.is_alphanumeric());
        !bare.is_empty()
            && bare.chars().all(|c| c.is_ascii_lowercase())
            && crate::research::reading::passages::is_stop(bare)
    };
    let opens = words
        .first()
        .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_lowercase()) && stop_word(w));
    let ends = words.last().is_some_and(|w| {
        !w.ends_with(['.', '!', '?', ')', '`', '"', '”', '…', ':']) && stop_word(w)
    });
    opens || ends
}

/// Pure: the clauses of a sentence cut short at its end ([`is_fragment`]) before its last
/// comma or semicolon, closed with a stop, when they make a whole sentence of four words or more;
/// `None` for any other sentence. The 0.5B model copied "... it will default to the number of
/// processors on the machine, multiplied by 5, assuming that `ThreadPoolExecutor` is often used
/// to overlap I/O instead of" for `max_workers`' default, and the whole point was dropped with
/// its torn tail.
fn before_cut_tail(text: &str) -> Option<String> {
    if !is_fragment(text) {
        return None;
    }
    let cut = text.rfind([',', ';'])?;
    let head = text[..cut].trim_end();
    let whole = format!("{head}.");
    (head.split_whitespace().count() >= 4 && !is_fragment(&whole)).then_some(whole)
}

/// How well `item` supports `text` (the share of the sentence's terms it holds), or `None`
/// when it does not: too few shared terms, a number the passage does not have, a default
/// the passage states otherwise, or a "not" the passage does not say.
fn support_of(text: &str, item: &Numbered, asked: &str) -> Option<f64> {
    // The passage as the run's claim check reads its page: under its title and heading, which
    // name what the passage documents (`max_connections (integer)` heads a description that
    // never repeats the name).
    // Its address names the product whose docs it is in (`www.postgresql.org`). The heading is
    // marked as the page's passages are, so the entry it documents is known.
    let evidence = format!(
        "{}\n{}\n§ {}\n{}",
        item.title,
        subject::address_words(&item.url),
        item.heading,
        item.text
    );
    let verdict = check_support(text, &evidence, asked);
    // The question's words and the documented entry's signature are no answer: the 0.5B model
    // answered "What is functools.cache equivalent to in terms of functools.lru_cache?" with
    // "functools.cache(user_function) is equivalent to functools.cache(user_function)" under
    // `@functools.cache(user_function)`, while the passage said "Returns the same as
    // `lru_cache(maxsize=None)`".
    let restates = !asked.trim().is_empty()
        && evidence::only_restates(text, &format!("{asked}\n{}", entry_of(&item.heading)));
    // A name put in another's slot ("ExceptionGroup extends BaseException" from
    // "BaseExceptionGroup extends BaseException"): judged against the one passage shown, where
    // its clauses are the passage's own.
    let swapped = evidence::swap::swaps_names(text, &item.text);
    (verdict.supported
        && !swapped
        && !restates
        && !about_another_entry(text, item, asked)
        && !relevance::off_the_asked_names(text, item, asked)
        && !focus::contradicts_default(text, &item.text))
    .then_some(verdict.overlap)
}

/// Pure: whether `text` speaks of its passage's entry while the task asks about something else:
/// a sentence naming no subject of the task `asked`, cited to a passage under the entry of a
/// name the task does not ask about, that names nothing or (when the task names subjects)
/// names that entry. What such a sentence says
/// is said of that entry: the 0.5B model answered "What is the default statement_timeout?"
/// with "The default value is 10 seconds", cited to `wal_receiver_status_interval (integer)`,
/// and a question on a table's columns with "The default value is 5000" from
/// `pg_stat_statements.max`. An entry whose name, or a part of it, is a word of the task
/// (`max_connections` for "How many connections ...", `dataclasses.dataclass` for "a frozen
/// dataclass") is asked about.
fn about_another_entry(text: &str, item: &Numbered, asked: &str) -> bool {
    if asked.trim().is_empty() {
        return false;
    }
    let Some(entry) = focus::entry_name(entry_of(&item.heading)) else {
        return false;
    };
    // Dotted names count whole and by their parts: the module of `copy.copy()` is asked about
    // too, and Sphinx files a module page's closing paragraphs under its last entry
    // (`exception copy.Error`), where "The difference between shallow and deep copying is only
    // relevant for compound objects" answered "copy.copy() versus copy.deepcopy()".
    let action = action_verb(asked);
    let words: Vec<String> = asked
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| !w.is_empty() && Some(w) != action.as_ref())
        .flat_map(|w| {
            let parts: Vec<String> = w.split('.').map(str::to_string).collect();
            std::iter::once(w).chain(parts)
        })
        .collect();
    // A plural ("dataclasses" for "dataclass") is the same word.
    let plural =
        |a: &str, b: &str| a.strip_suffix('s') == Some(b) || a.strip_suffix("es") == Some(b);
    let same = |a: &str, b: &str| a == b || plural(a, b) || plural(b, a);
    let asked_entry = words.iter().any(|w| focus::names_match(&entry, w))
        || entry
            .split(['.', '_'])
            .filter(|part| part.len() >= 3)
            .any(|part| words.iter().any(|w| same(part, w)));
    if asked_entry {
        return false;
    }
    let named = subject::Named::new(text);
    let names = |k: &str| named.names(&subject::Subject::Name(k.to_string()));
    if subject_terms(asked).iter().any(|k| names(k)) {
        return false;
    }
    let last = entry.rsplit('.').next().unwrap_or(&entry);
    // A sentence naming nothing is said of its passage's entry. One naming that unasked entry
    // is said of it too, a side remark when the question asks about names of its own: the
    // 0.5B model followed "The default timeout for a SQLite connection is 5 seconds" with
    // sentences on `setlimit`, `serialize` and `getlimit` for "How long does a Python sqlite3
    // connection wait by default ...?".
    (!names(&entry) && !names(last)) || !subject::unanswered(asked, &[String::new()]).is_empty()
}

/// Pure: the verb of a "How do I ..." question, lower-cased (`enable` of "How do I enable
/// PostgreSQL's built-in query result cache?"): what is done, not what it is done to. An entry
/// sharing only that word is not asked about: `enable_partitionwise_aggregate`'s "This allows
/// grouping or aggregation on partitioned tables" was kept in that question's summary.
fn action_verb(asked: &str) -> Option<String> {
    let words: Vec<String> = asked
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect();
    words
        .windows(4)
        .find_map(|w| {
            let opener = matches!(
                (w[0].as_str(), w[1].as_str(), w[2].as_str()),
                (
                    "how",
                    "do" | "can" | "should" | "would",
                    "i" | "you" | "we" | "one"
                )
            );
            opener.then(|| w[3].clone())
        })
        .or_else(|| {
            words
                .windows(3)
                .find_map(|w| (w[0] == "how" && w[1] == "to").then(|| w[2].clone()))
        })
}

/// Pure: the entry a passage's heading breadcrumb ends in (`@functools.cache(user_function)` of
/// "`functools` — ... › @functools.cache(user_function)"): what the passage documents.
pub(super) fn entry_of(heading: &str) -> &str {
    heading.rsplit('›').next().unwrap_or(heading).trim()
}

/// Pure: what keeps the passages `items` (each under its page's title and its heading, with its
/// address's words: [`subject::address_words`]) from answering `asked`
/// ([`subject::unanswerable`]): a subject none names, an option only other commands document, a
/// subject named only in passing. Only the asked product's pages count
/// ([`subject::of_asked_product`]). Empty when they may answer.
pub fn unanswered(asked: &str, items: &[Numbered]) -> Vec<String> {
    if items.is_empty() {
        return vec![];
    }
    // Only the asked product's pages answer for it.
    let pages: Vec<(&str, &str)> = items
        .iter()
        .map(|n| (n.url.as_str(), n.title.as_str()))
        .collect();
    let mask = subject::of_asked_product(asked, &pages, &[]);
    let items: Vec<&Numbered> = items
        .iter()
        .zip(mask)
        .filter_map(|(n, keep)| keep.then_some(n))
        .collect();
    let heads: Vec<String> = items
        .iter()
        .map(|n| format!("{}\n{}", n.title, n.heading))
        .collect();
    let texts: Vec<String> = items
        .iter()
        .map(|n| {
            let address = subject::address_words(&n.url);
            format!("{}\n{}\n{}\n{address}", n.title, n.heading, n.text)
        })
        .collect();
    subject::unanswerable(asked, &heads, &texts)
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

/// Most points a JSON answer makes (the schema's `maxItems`; more from an unconstrained model
/// are cut).
pub const MAX_POINTS: usize = 5;
/// Most passages one point cites.
const MAX_POINT_PASSAGES: usize = 3;
/// Longest sentence of a point in characters: the grammar stops a looping small model there.
const MAX_SENTENCE_CHARS: usize = 300;
/// Words of a completed piece's opening that, said already, make it a repeat.
const OPENING_WORDS: usize = 6;

/// One point of a JSON answer: a sentence and the passages it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Numbers of shown passages it cites, in the model's order, without repeats.
    pub passages: Vec<usize>,
    /// The sentence as the model wrote it.
    pub sentence: String,
    /// The passage the model was asked to write it for, in the per-passage form.
    pub written_for: Option<usize>,
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
    // An answer the output limit cut short is closed before any object inside it is taken:
    // read first, its first point stood for the whole answer.
    let value = close_truncated_json(answer)
        .and_then(|closed| extract_json(&closed).ok())
        .filter(shaped)
        .or_else(|| extract_json(answer).ok().filter(shaped))
        .or_else(|| extract_json_object(answer).ok().filter(shaped))?;
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
    let mut valued: Vec<usize> = Vec::new();
    let mut sentences_out: Vec<String> = Vec::new();
    let mut said: Vec<String> = Vec::new();
    let mut plain: Vec<String> = Vec::new();
    // Passages whose sentence (the first a point cites) the model took from another passage.
    let mut shifted: Vec<usize> = Vec::new();
    let own: Vec<String> = items.iter().map(|n| strip_signature(&n.text)).collect();
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    for p in points {
        // A point of two sentences is judged sentence by sentence: the 0.5B model put a wrong
        // "does not set the timeout" before the right "If no timeout is supplied, the global
        // default ... is used", and the right half was lost with the wrong one.
        // Each sentence as the report writes it (its entry's label before it), as the model
        // wrote it, and its passages; the label is no answer of the model's.
        let mut kept: Vec<(String, String, Vec<usize>)> = Vec::new();
        let parts = sentences(&clean_sentence(&p.sentence, &labels));
        let reworded = parts.iter().all(|t| prose::rewords(t, &plain));
        for text in parts {
            let text = strip_signature(&text);
            let text = statement_before_colon(&text).unwrap_or(text);
            let Some(text) = pointers::without_pointers(&text) else {
                continue;
            };
            let text = before_cut_tail(&text).unwrap_or(text);
            // A window opening with a function word is dropped below, not completed.
            let completed = (!is_fragment(&text))
                .then(|| prose::completed_tail(&text, &own))
                .flatten();
            let text = completed.clone().unwrap_or(text);
            // A small model repeats its point to fill the number the schema asks for: once is
            // enough. A repeat may be cut short or spelled apart ("git-log" / "git log"): a
            // sentence whose words run inside one said already is that one again.
            let key = format!(
                " {} ",
                crate::research::reading::queries::plain_words(&text).join(" ")
            );
            // Completed, it may be a sentence said already, cut short there ("... on …"): its
            // first words (after the key's leading space) run inside that one.
            let opening: Vec<&str> = key.split(' ').take(1 + OPENING_WORDS).collect();
            let opening = opening.join(" ");
            if text.is_empty()
                || said.iter().any(|s| s.contains(&key))
                || (completed.is_some() && said.iter().any(|s| s.contains(&opening)))
                || reworded
                || is_heading_copy(&text, items)
                || prose::is_question(&text)
                || prose::is_credit(&text)
                || is_fragment(&text)
            {
                continue;
            }
            said.push(key);
            if let Some(cites) = supporting(&text, &p.passages, items, asked) {
                // After its entry's name when that is another's, once for a run of sentences
                // citing the same passage.
                let written = match kept.last() {
                    Some((_, _, last)) if last[0] == cites[0] => text.clone(),
                    _ => relevance::with_entry_label(asked, text.clone(), &items[cites[0] - 1]),
                };
                kept.push((written, text, cites));
            }
        }
        if let Some(own) = p.written_for
            && !kept.is_empty()
            && kept.iter().all(|(_, _, cites)| cites[0] != own)
        {
            shifted.push(own);
        }
        // Sentences of a point citing one passage in a row carry its link once, at the end.
        for (i, (written, model_wrote, cites)) in kept.iter().enumerate() {
            plain.push(model_wrote.clone());
            let same_next = kept
                .get(i + 1)
                .is_some_and(|(_, _, next)| next[0] == cites[0]);
            if same_next {
                sentences_out.push(written.clone());
            } else {
                let (body, stop) = split_stop(written);
                sentences_out.push(format!("{body}{}{stop}", citation(&items[cites[0] - 1])));
            }
            for n in cites {
                if !cited.contains(n) {
                    cited.push(*n);
                }
            }
            if kind::states_value(model_wrote) {
                valued.push(cites[0]);
            }
        }
    }
    if cited.is_empty() {
        return None;
    }
    Some(report(
        asked,
        &sentences_out,
        &plain,
        cited,
        &valued,
        &shifted,
        items,
    ))
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
        None => supported_together(text, passages, items, asked)
            .or_else(|| supported_elsewhere(text, passages, items, asked)),
    }
}

/// The one passage shown, other than those cited, that supports `text` best, when the
/// model's number was another's: asked which index type `CREATE INDEX` makes by default, the
/// 0.5B model wrote "PostgreSQL's CREATE INDEX creates B-tree indexes by default" under the
/// number of `tablespace_name`'s passage, while the index-types passage says it.
fn supported_elsewhere(
    text: &str,
    passages: &[usize],
    items: &[Numbered],
    asked: &str,
) -> Option<Vec<usize>> {
    items
        .iter()
        .filter(|n| !passages.contains(&n.number))
        .filter_map(|n| support_of(text, n, asked).map(|score| (score, n.number)))
        .fold(None, |best: Option<(f64, usize)>, (score, n)| match best {
            Some((b, _)) if b >= score => best,
            _ => Some((score, n)),
        })
        .map(|(_, n)| vec![n])
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
    // Each clause is said by one passage: joined, a page's passages let a subject from one
    // take a number from another. "The default value of maintenance_work_mem is 40MB" took
    // its subject from that setting's entry and "40MB" from hash_mem_multiplier's.
    let mut used: Vec<usize> = Vec::new();
    for clause in clauses(text) {
        let by = valid
            .iter()
            .copied()
            .find(|&n| support_of(&clause, &items[n - 1], asked).is_some())?;
        if !used.contains(&by) {
            used.push(by);
        }
    }
    if used.len() < 2 {
        return None;
    }
    let joined = Numbered {
        text: used
            .iter()
            .map(|n| items[n - 1].text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n"),
        ..items[used[0] - 1].clone()
    };
    support_of(text, &joined, asked).map(|_| used)
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
mod summary;
use summary::report;
mod extractive;
pub mod kind;
mod statements;
pub use extractive::{QUOTED_NOTE, quoted_report};
pub use prose::statement_before_colon;
pub use statements::{is_heading_copy, strip_signature};
mod json_points;
mod pointers;
mod prose;
use json_points::{point, point_values};
mod numbering;
mod relevance;

pub use each::{EACH_PASSAGES, each_points, each_schema};
pub use numbering::number_passages;
#[cfg(test)]
use numbering::{breadcrumbs_as_headings, is_lead_in, looks_like_signature, prose_words};

#[cfg(test)]
mod tests;
