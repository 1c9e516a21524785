//! Grounded answers that small models can write (issue 14): the passages that best match the
//! task are numbered, the model answers in a few sentences that each end with a passage number,
//! and the engine turns the numbers into citations. A model that cannot write a URL can still
//! write `[2]`; the links, titles and quotes come from the engine.
//!
//! Pure functions; the researcher makes the call.

use super::passages::{rank, split};
use super::state::PageExtract;

/// Longest passage shown (longer ones are cut at a character boundary).
const PASSAGE_CHARS: usize = 700;
/// Most passages numbered.
const MAX_PASSAGES: usize = 8;

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
    let mut order: Vec<usize> = (0..all.len()).filter(|i| scores[*i] > 0.0).collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    let mut out = Vec::new();
    let mut used = 0;
    for i in order {
        if out.len() >= MAX_PASSAGES {
            break;
        }
        let page = &pages[owner[i]];
        let heading = all[i].heading_path.join(" › ");
        let text: String = all[i].text.chars().take(PASSAGE_CHARS).collect();
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
        let place = if n.heading.is_empty() {
            n.title.trim().to_string()
        } else {
            format!("{} › {}", n.title.trim(), n.heading)
        };
        out.push_str(&format!("[{}] ({place})\n{}\n\n", n.number, n.text.trim()));
    }
    out
}

/// The report made from the model's numbered answer, or `None` when it cites no passage
/// shown (then the caller falls back). Each `[n]` becomes a link to the passage's page; the
/// cited passages are quoted under "Evidence", so a reader sees what each sentence rests on.
pub fn assemble(answer: &str, items: &[Numbered]) -> Option<String> {
    let mut cited: Vec<usize> = Vec::new();
    let mut text = String::new();
    let mut rest = answer.trim();
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find(']');
        let number = close
            .and_then(|c| after[..c].trim().parse::<usize>().ok())
            .filter(|n| (1..=items.len()).contains(n));
        match (number, close) {
            (Some(n), Some(c)) => {
                let item = &items[n - 1];
                let title = link_text(&item.title);
                // "sentence [2]." reads as "sentence ([title](url))."
                let trimmed = text.trim_end().len();
                text.truncate(trimmed);
                text.push_str(&format!(" ([{title}]({}))", item.url));
                if !cited.contains(&n) {
                    cited.push(n);
                }
                rest = &after[c + 1..];
            }
            // Not a passage number (a Markdown link, an index that does not exist): kept as
            // written minus the bracket, which cannot be a citation.
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    if cited.is_empty() {
        return None;
    }
    let mut md = format!("## Summary\n\n{}\n\n## Evidence\n", text.trim());
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
        assert!(items[0].text.starts_with("Deserialize"), "{items:#?}");
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
        assert!(md.contains("> Deserialize s"), "{md}");
    }

    #[test]
    fn an_answer_citing_no_passage_is_not_a_grounded_report() {
        let items = number_passages(&pages(), "decode a JSON document", 4000);
        assert_eq!(assemble("JSON is decoded with json.loads.", &items), None);
        assert_eq!(assemble("See [0] and [x].", &items), None);
    }
}
