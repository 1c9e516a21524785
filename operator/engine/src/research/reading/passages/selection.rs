//! What the model reads of a page: its best passages for the task within a size, in page
//! order under their breadcrumbs, with the page's lead and the asked-for definitions kept
//! whatever they score.

use super::{
    Passage, PassageKind, asked_entry_leads, entry, mentions_key_terms, rank_focused, split,
};

/// What the model reads of one page.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The text: the kept passages in page order, each under its breadcrumb when it changes.
    pub text: String,
    /// Indices of the kept passages.
    pub kept: Vec<usize>,
    /// The best passage score on the page (0 when nothing on it matches the query).
    pub best_score: f64,
}

/// Pure: whether a page bears on `task`: a passage of it matches the task (`matched`: its
/// [`Selection::best_score`] is above zero) and it names the task's key terms
/// ([`mentions_key_terms`]; `named` is its text with its address's words), or, for a task
/// asking several things, a passage of it (`markdown`) matches one part that it names the
/// key terms of. `git-stash(1)` was left out as off the task for "What happens when git stash
/// pop hits a conflict, and how long does PostgreSQL wait on a lock ...?": it never names
/// PostgreSQL, the one key term of the whole.
pub fn bears_on(matched: bool, markdown: &str, named: &str, task: &str) -> bool {
    if matched && mentions_key_terms(named, task) {
        return true;
    }
    // Each part with the names it refers back to: "what is its limitation" alone matched
    // gitk(1)'s "due to limitations in the command-line parser" for a `git log --follow` task.
    let parts = crate::research::reading::queries::question_parts(task);
    if parts.len() < 2 {
        return false;
    }
    let passages = split(markdown);
    parts.iter().any(|part| {
        mentions_key_terms(named, part) && rank_focused(&passages, part).iter().any(|s| *s > 0.0)
    })
}

/// The breadcrumb line of a passage.
fn breadcrumb(path: &[String]) -> String {
    format!("§ {}", path.join(" › "))
}

/// Chooses what the model reads of a page: the whole page when it fits in `max_chars`;
/// otherwise the best-scoring passages for `query` up to `max_chars`, in page order, each under
/// its heading breadcrumb. Code passages are kept whole or not at all; passages that match no
/// query term are only used when nothing does (then the page's opening).
/// `title` is the page's: on the page documenting what a question names
/// ([`entry::is_entry_page`]) that names no entry, the page's lead is its definition.
pub fn select(markdown: &str, query: &str, max_chars: usize, title: &str) -> Selection {
    let passages = split(markdown);
    let scores = rank_focused(&passages, query);
    let best_score = scores.iter().cloned().fold(0.0, f64::max);
    if markdown.chars().count() <= max_chars {
        return Selection {
            text: markdown.to_string(),
            kept: (0..passages.len()).collect(),
            best_score,
        };
    }
    let mut order: Vec<usize> = (0..passages.len()).collect();
    if best_score > 0.0 {
        order.retain(|i| scores[*i] > 0.0);
        order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    }
    let mut kept: Vec<usize> = Vec::new();
    let mut used = 0usize;
    let mut lead_kept = None;
    // The page's lead paragraph says what the page is about (a module's one-line purpose); it is
    // kept when short, so a reader of the passages knows their subject.
    if best_score > 0.0
        && let Some(lead) = passages.iter().take(4).position(is_lead)
    {
        let p = &passages[lead];
        let cost = p.text.chars().count() + breadcrumb(&p.heading_path).chars().count() + 3;
        if cost <= max_chars / 5 {
            kept.push(lead);
            lead_kept = Some(lead);
            used += cost;
            order.retain(|i| *i != lead);
        }
    }
    // The definition of what the question asks about (the first prose passage under an entry
    // documenting an asked-for name or option) is read whatever it scores: "Continue listing the
    // history of a file beyond renames" under `--follow` repeats no word of "What does git log
    // --follow do?", and git-log's description, full of "git log", filled the room.
    if best_score > 0.0 {
        let mut definitions = asked_definitions(&passages, query);
        // `git-describe(1)` opens with "The command finds the most recent tag that is
        // reachable from a commit ...", which no word of "What does git describe output?" ranks.
        if definitions.is_empty() && entry::is_entry_page(title, query) {
            definitions.extend(page_lead(&passages).filter(|l| Some(*l) != lead_kept));
        }
        for i in definitions {
            let p = &passages[i];
            let cost = p.text.chars().count() + breadcrumb(&p.heading_path).chars().count() + 3;
            if cost <= max_chars / 3 && used + cost <= max_chars {
                kept.push(i);
                used += cost;
                order.retain(|k| *k != i);
            }
        }
    }
    for i in order {
        let p = &passages[i];
        let cost = p.text.chars().count() + breadcrumb(&p.heading_path).chars().count() + 3;
        if used + cost > max_chars {
            if p.kind == PassageKind::Code || kept.iter().any(|k| Some(*k) != lead_kept) {
                continue;
            }
            // The single best passage is larger than the room: its first part, cut at a
            // character boundary (prose only: code is never cut), after the lead if it fits.
            let room =
                max_chars.saturating_sub(used + breadcrumb(&p.heading_path).chars().count() + 3);
            let cut: String = p.text.chars().take(room).collect();
            let mut chosen: Vec<(usize, String)> = lead_kept
                .map(|l| (l, passages[l].text.clone()))
                .into_iter()
                .collect();
            chosen.push((i, cut));
            chosen.sort_by_key(|(k, _)| *k);
            kept.push(i);
            kept.sort_unstable();
            return Selection {
                text: render(&passages, &chosen),
                kept,
                best_score,
            };
        }
        used += cost;
        kept.push(i);
    }
    kept.sort_unstable();
    let chosen: Vec<(usize, String)> = kept
        .iter()
        .map(|i| (*i, passages[*i].text.clone()))
        .collect();
    Selection {
        text: render(&passages, &chosen),
        kept,
        best_score,
    }
}

/// Most asked-for definitions [`select`] keeps whatever they score.
const MAX_ASKED_DEFINITIONS: usize = 2;

/// Pure: the indices of the definitions of what `query` asks about ([`asked_entry_leads`]), at
/// most [`MAX_ASKED_DEFINITIONS`].
pub fn asked_definitions(passages: &[Passage], query: &str) -> Vec<usize> {
    let mut out = asked_entry_leads(passages, query);
    out.truncate(MAX_ASKED_DEFINITIONS);
    out
}

/// Pure: the lead of a page's `passages`: the first of its first four that can stand as one
/// ([`is_lead`]). On the page documenting what a question names, it is the definition.
pub fn page_lead(passages: &[Passage]) -> Option<usize> {
    passages.iter().take(4).position(is_lead)
}

/// A passage that can stand as a page's lead: prose of a sentence or more, not a label
/// ("Author:", "**Source code:** Lib/pickle.py").
fn is_lead(p: &Passage) -> bool {
    let text = p.text.trim();
    p.kind == PassageKind::Prose
        && text.split_whitespace().count() >= 6
        && !text.ends_with(':')
        && !text.starts_with("**Source code")
}

fn render(passages: &[Passage], chosen: &[(usize, String)]) -> String {
    let mut out = String::new();
    let mut last_path: Option<&[String]> = None;
    for (i, text) in chosen {
        let path = passages[*i].heading_path.as_slice();
        if !path.is_empty() && last_path != Some(path) {
            out.push_str(&breadcrumb(path));
            out.push('\n');
        }
        last_path = Some(path);
        out.push_str(text);
        out.push_str("\n\n");
    }
    out.trim_end().to_string()
}
