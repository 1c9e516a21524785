//! Grounded answers that small models can write (issue 14): the passages that best match the
//! task are numbered, the model answers in a few sentences that each end with a passage number,
//! and the engine turns the numbers into citations. A model that cannot write a URL can still
//! write `[2]`; the links, titles and quotes come from the engine.
//!
//! Pure functions; the researcher makes the call.

use super::evidence::{SUPPORT_THRESHOLD, support};
use super::passages::{rank, split};
use super::state::PageExtract;

/// Longest passage shown (longer ones are cut at a character boundary).
const PASSAGE_CHARS: usize = 700;
/// Most passages numbered.
const MAX_PASSAGES: usize = 6;
/// Passages scoring below this share of the best one are not shown (they add noise a small
/// model copies).
const MIN_SHARE_OF_BEST: f64 = 0.5;

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

/// The best passages for `task` across `pages`, best first, within `budget` characters. All
/// pages' passages are ranked together, so scores compare across pages.
pub fn number_passages(pages: &[PageExtract], task: &str, budget: usize) -> Vec<Numbered> {
    let mut all = Vec::new();
    let mut owner = Vec::new();
    for (p, page) in pages.iter().enumerate() {
        for passage in split(&breadcrumbs_as_headings(&page.text)) {
            all.push(passage);
            owner.push(p);
        }
    }
    let scores = rank(&all, task);
    let best = scores.iter().cloned().fold(0.0, f64::max);
    let mut order: Vec<usize> = (0..all.len())
        .filter(|i| scores[*i] > 0.0 && scores[*i] >= best * MIN_SHARE_OF_BEST)
        .filter(|i| prose_words(&all[*i].text) >= MIN_PROSE_WORDS)
        .filter(|i| !is_lead_in(&all[*i].text))
        .collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    let mut out = Vec::new();
    let mut used = 0;
    for i in order {
        if out.len() >= MAX_PASSAGES {
            break;
        }
        let page = &pages[owner[i]];
        let heading = all[i].heading_path.join(" › ");
        // An API entry's description ("Deserialize s ...") names its function only in its
        // heading: the signature goes in front, so an answer copied from it says what to call.
        let text = match all[i].heading_path.last() {
            Some(sig) if looks_like_signature(sig) => format!("{}: {}", sig.trim(), all[i].text),
            _ => all[i].text.clone(),
        };
        let text: String = text.chars().take(PASSAGE_CHARS).collect();
        let cost = text.chars().count() + heading.chars().count() + 16;
        if used + cost > budget && !out.is_empty() {
            continue;
        }
        used += cost;
        out.push(Numbered {
            number: out.len() + 1,
            url: page.url.clone(),
            title: page.title.clone(),
            heading,
            text,
        });
    }
    out
}

/// Fewest words of prose (links removed) a passage needs to be evidence: a page's navigation
/// ("[Next](plpython-envar.html ...)") is not, however well it matches.
const MIN_PROSE_WORDS: usize = 2;

/// Most words of a lead-in: "The csv module defines the following functions:" introduces a
/// list and says nothing itself; a small model quoting it answers nothing.
const LEAD_IN_WORDS: usize = 14;

/// Pure: whether `text` only introduces what follows it (short, ending in a colon).
fn is_lead_in(text: &str) -> bool {
    let t = text.trim();
    t.ends_with(':') && t.split_whitespace().count() <= LEAD_IN_WORDS
}

/// Words of `text` outside Markdown links and URLs.
fn prose_words(text: &str) -> usize {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        match after
            .find("](")
            .and_then(|m| after[m..].find(')').map(|c| m + c))
        {
            Some(end) => rest = &after[end + 1..],
            None => {
                out.push_str(after);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out.split_whitespace()
        .filter(|w| !w.contains("://") && w.chars().any(char::is_alphabetic))
        .count()
}

/// True for a heading that is an API signature: `json.loads(s, *, cls=None)`, `len(s)`.
fn looks_like_signature(heading: &str) -> bool {
    let h = heading.trim().trim_matches('`');
    let name_end = h.find('(').unwrap_or(0);
    // One call shape: "search() vs. match()" is a heading about two functions, not a signature.
    name_end > 0
        && h.matches('(').count() == 1
        && h.len() < 160
        && h[..name_end]
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

/// A selection's breadcrumb lines (`§ a › b`) as the Markdown headings they stand for, so the
/// passages under them get their heading path back.
fn breadcrumbs_as_headings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_prefix("§ ") {
            Some(path) => {
                for (depth, part) in path.split(" › ").enumerate() {
                    out.push_str(&format!(
                        "\n{} {}\n\n",
                        "#".repeat((depth + 1).min(6)),
                        part
                    ));
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
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
    if n.heading.is_empty() {
        n.title.trim().to_string()
    } else {
        format!("{} › {}", n.title.trim(), n.heading)
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
    let labels: Vec<String> = items.iter().map(|n| format!("({})", place(n))).collect();
    let mut cited: Vec<usize> = Vec::new();
    // (text, stop): the stop after a citation may come in the next segment ("object [1].").
    let mut sentences: Vec<(String, String)> = Vec::new();
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
        let text = text.trim_start_matches(['*', '-', ' ']).to_string();
        if text.is_empty() {
            continue;
        }
        match cite {
            Some(n) => {
                let item = &items[n - 1];
                // A sentence its passage does not support (an invented number, other words
                // than the passage's) is dropped: the engine vouches for every citation it makes.
                let (overlap, missing_numbers) = support(&text, &item.text);
                if overlap < SUPPORT_THRESHOLD || !missing_numbers.is_empty() {
                    continue;
                }
                let (body, stop) = match text.strip_suffix(['.', '!', '?']) {
                    Some(body) => (body.trim_end(), &text[body.len()..]),
                    None => (text.as_str(), "."),
                };
                sentences.push((
                    format!("{body} ([{}]({}))", link_text(&item.title), item.url),
                    stop.to_string(),
                ));
                if !cited.contains(&n) {
                    cited.push(n);
                }
            }
            None => sentences.push((text, String::new())),
        }
    }
    let sentences: Vec<String> = sentences.into_iter().map(|(t, s)| t + &s).collect();
    if cited.is_empty() {
        return None;
    }
    let mut md = format!("## Summary\n\n{}\n\n## Evidence\n", sentences.join(" "));
    for n in &cited {
        let item = &items[n - 1];
        let place = if item.heading.is_empty() {
            String::new()
        } else {
            format!(" › {}", item.heading)
        };
        let quote = item.text.trim().replace('\n', "\n> ");
        md.push_str(&format!(
            "\n- [{}]({}){place}:\n\n> {quote}\n",
            link_text(&item.title),
            item.url
        ));
    }
    Some(md)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lead_ins_that_only_introduce_a_list_are_not_passages() {
        assert!(is_lead_in(
            "The csv module defines the following functions:"
        ));
        assert!(is_lead_in(
            "has_header(sample): The csv module defines the following constants:"
        ));
        assert!(!is_lead_in(
            "Create an object that operates like a regular reader but maps the information in each row to a dict."
        ));
        let long = "A long sentence that explains quite a lot about the reader and the writer objects before it ends with a colon:";
        assert!(!is_lead_in(long));
    }

    fn pages() -> Vec<PageExtract> {
        vec![
            PageExtract {
                url: "http://docs/json.html".into(),
                title: "json — JSON encoder and decoder".into(),
                text: "§ json › Basic Usage › json.loads(s)\nDeserialize s (a str instance containing a JSON document) to a Python object.\n\n§ json › Basic Usage › json.load(fp)\nDeserialize fp (a text file containing a JSON document) to a Python object.".into(),
            },
            PageExtract {
                url: "http://docs/pickle.html".into(),
                title: "pickle".into(),
                text: "The pickle module implements binary protocols for serializing Python objects.".into(),
            },
        ]
    }

    #[test]
    fn the_best_passages_are_numbered_best_first_with_their_page() {
        let items = number_passages(&pages(), "How do I decode a JSON document in Python?", 4000);
        assert!(items.len() >= 2, "{items:#?}");
        assert_eq!(items[0].number, 1);
        assert_eq!(items[0].url, "http://docs/json.html");
        assert!(
            items[0].text.starts_with("json.loads(s): Deserialize"),
            "{items:#?}"
        );
        assert!(items.iter().all(|i| !i.text.starts_with('§')));
        let shown = render_passages(&items);
        assert!(
            shown.starts_with("[1] (json — JSON encoder and decoder › "),
            "{shown}"
        );
    }

    #[test]
    fn numbers_become_links_and_the_cited_passages_are_quoted() {
        let items = number_passages(&pages(), "decode a JSON document", 4000);
        let md = assemble(
            "Use json.loads to decode a JSON string into a Python object [1]. For files, use json.load [2]. See [the docs](x) [9].",
            &items,
        )
        .unwrap();
        assert!(
            md.contains(
                "into a Python object ([json — JSON encoder and decoder](http://docs/json.html))."
            ),
            "{md}"
        );
        // [9] names no passage: no citation is made of it.
        assert!(!md.contains("[9]("), "{md}");
        assert!(md.contains("## Evidence"), "{md}");
        assert!(md.contains("> json.loads(s): Deserialize s"), "{md}");
    }

    #[test]
    fn a_copied_passage_list_becomes_cited_sentences_without_its_labels() {
        let items = number_passages(&pages(), "decode a JSON document", 4000);
        let copied = render_passages(&items);
        let md = assemble(&copied, &items).unwrap();
        let summary = md.split("## Evidence").next().unwrap();
        assert!(!summary.contains("› json.loads(s))"), "{md}");
        assert!(!summary.contains("[1]") && !summary.contains("[2]"), "{md}");
        assert!(
            summary.contains(
                "to a Python object ([json — JSON encoder and decoder](http://docs/json.html))."
            ),
            "{md}"
        );
    }

    #[test]
    fn navigation_links_are_not_evidence() {
        assert_eq!(
            prose_words("[Next](plpython-envar.html \"46.11. Environment Variables\")"),
            0
        );
        assert_eq!(prose_words("See [json](x.html) for how loads works."), 5);
        let pages = vec![PageExtract {
            url: "http://docs/plpython.html".into(),
            title: "Python 2 vs. Python 3".into(),
            text: "[Next](plpython-envar.html \"Python Environment Variables\")\n\n[Prev](a.html \"Python\")".into(),
        }];
        assert!(number_passages(&pages, "Which pickle protocol does Python use?", 4000).is_empty());
    }

    #[test]
    fn only_a_call_shape_is_a_signature() {
        assert!(looks_like_signature("json.loads(s, *, cls=None)"));
        assert!(looks_like_signature("`len(s)`"));
        assert!(!looks_like_signature("search() vs. match()"));
        assert!(!looks_like_signature("Basic Usage"));
        assert!(!looks_like_signature("What (not) to do"));
    }

    #[test]
    fn a_sentence_its_passage_does_not_support_is_dropped() {
        let items = number_passages(&pages(), "decode a JSON document", 4000);
        let md = assemble(
            "json.loads deserializes a str containing a JSON document to a Python object [1]. SQLAlchemy's create_engine has a default pool_size of 10 [1].",
            &items,
        )
        .unwrap();
        assert!(!md.contains("pool_size"), "{md}");
        assert!(md.contains("json.loads deserializes"), "{md}");
        assert_eq!(
            assemble("The default pool_size of create_engine is 10 [1].", &items),
            None
        );
    }

    #[test]
    fn an_answer_citing_no_passage_is_not_a_grounded_report() {
        let items = number_passages(&pages(), "decode a JSON document", 4000);
        assert_eq!(assemble("JSON is decoded with json.loads.", &items), None);
        assert_eq!(assemble("See [0] and [x].", &items), None);
    }
}
