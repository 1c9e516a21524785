//! Which passages the model is shown: every page's passages ranked together for the task, what
//! the task asks for steering the order, and the best within a budget numbered.

use super::Numbered;
use crate::research::machine::state::PageExtract;
use crate::research::reading::passages::{
    PassageKind, asked_definitions, entry, focus, page_lead, products_asked, rank, rank_focused,
    split,
};
use crate::research::writing::evidence::subject::{self, of_product};

/// Longest passage shown (longer ones are cut at a character boundary): the splitter's longest
/// prose piece, so a paragraph is shown whole (cut at 700, sql-vacuum's paragraph on plain VACUUM
/// lost its last sentence, on what VACUUM FULL does; retrieval 70 -> 72 quotes of 113).
const PASSAGE_CHARS: usize = 900;
/// Most passages numbered. Measured with `examples/retrieval` on the eval set: with 6, the
/// passages shown held a match string for 83 of 113 key facts; with 8, 88 (10: 91, but the
/// 6000-character budget mostly stops it first).
const MAX_PASSAGES: usize = 8;
/// Passages scoring below this share of the best one are not shown (they add noise a small
/// model copies). Not higher: the passage answering the second half of a two-part question
/// ("... and how many are reserved for superusers?") scores a quarter of the first's.
const MIN_SHARE_OF_BEST: f64 = 0.2;
/// Score factor of an entry's first passage (see [`number_passages`]).
const ENTRY_LEAD_BOOST: f64 = 1.25;

/// Most leads of pages documenting what the task names shown below the noise floor.
const MAX_PAGE_LEADS: usize = 2;

/// Score factor of the passages of a page documenting a name the task asks about.
const ENTRY_PAGE_BOOST: f64 = 1.5;
/// Score factor of the first prose passage of the entry of a name the task asks about.
const ASKED_ENTRY_LEAD_BOOST: f64 = 2.0;

/// The best passages for `task` across `pages`, best first, within `budget` characters. All
/// pages' passages are ranked together, so scores compare across pages. A task asked of one
/// product is answered from that product's pages when any was read
/// ([`subject::of_asked_product`]): "How do I enable Python's built-in JIT compiler?" was
/// answered with PostgreSQL's JIT chapter.
pub fn number_passages(pages: &[PageExtract], task: &str, budget: usize) -> Vec<Numbered> {
    let addresses: Vec<(&str, &str)> = pages
        .iter()
        .map(|p| (p.url.as_str(), p.title.as_str()))
        .collect();
    let asked_product = subject::of_asked_product(task, &addresses, &[]);
    let pages: Vec<PageExtract> = pages
        .iter()
        .zip(asked_product)
        .filter(|(_, keep)| *keep)
        .map(|(p, _)| p.clone())
        .collect();
    let pages = pages.as_slice();
    let mut all = Vec::new();
    let mut owner = Vec::new();
    for (p, page) in pages.iter().enumerate() {
        for passage in split(&breadcrumbs_as_headings(&page.text)) {
            all.push(passage);
            owner.push(p);
        }
    }
    let mut scores = rank_focused(&all, task);
    // The floor below counts what lowers a passage (a version note weighs half) and nothing
    // that raises one: boosts order passages, they do not make the rest noise (stacked on the
    // asked-for entry, they left "A shallow copy constructs a new compound object ..." below a
    // fifth of `copy.copy`'s one-line entry, and it was not shown; zlib's version notes naming
    // `copy.copy()` set that bar at full weight).
    let floor: Vec<f64> = rank(&all, task)
        .into_iter()
        .zip(&scores)
        .map(|(plain, focused)| plain.min(*focused))
        .collect();
    // The first paragraph of an API or setting entry says what the entry is ("Deserialize s
    // ... to a Python object"); its later paragraphs qualify it. Among passages matching alike,
    // the definition wins (three `parse_int` details crowded out json.loads' own).
    // The entry of the very name asked about says what it is in its first prose paragraph
    // ("Special type to represent the current enclosed class."), which names nothing of the
    // question: the entry's code samples, full of `self`, outranked it (typing.Self).
    // A page documenting an asked-for name (`copy` for `copy.copy()`, `MERGE`) explains it;
    // other pages name it in passing (zlib's and re's "Added `copy.copy()` support" notes
    // outranked copy's own "A shallow copy constructs a new compound object ...").
    let entry_pages: Vec<bool> = pages
        .iter()
        .map(|p| entry::is_entry_page(&p.title, task))
        .collect();
    for i in 0..all.len() {
        if entry_pages[owner[i]] {
            scores[i] *= ENTRY_PAGE_BOOST;
        }
    }
    let asks_default = task.to_lowercase().contains("default");
    let mut lead_seen = std::collections::BTreeSet::new();
    for i in 0..all.len() {
        let Some(h) = all[i].heading_path.last() else {
            continue;
        };
        let first_under_entry = is_entry_heading(h)
            && (i == 0
                || owner[i - 1] != owner[i]
                || all[i - 1].heading_path != all[i].heading_path);
        // Not when the task asks for a default: the entry's sentence stating it is the answer,
        // and a doubled definition ("Decorator to wrap a function with a memoizing callable")
        // outranked lru_cache's "leaving the maxsize at its default value of 128".
        let asked = !asks_default && focus::is_asked_entry(h, task);
        if asked
            && all[i].kind == PassageKind::Prose
            && lead_seen.insert((owner[i], all[i].heading_path.clone()))
        {
            scores[i] *= ASKED_ENTRY_LEAD_BOOST;
        } else if first_under_entry {
            scores[i] *= ENTRY_LEAD_BOOST;
        }
    }
    let best = floor.iter().cloned().fold(0.0, f64::max);
    let asks_version = asks_version(task);
    // An asked-for entry's definition is no noise, however few of the task's words it repeats
    // (`--follow`'s "Continue listing the history of a file beyond renames").
    let mut definitions = asked_definitions(&all, task);
    // A task naming no entry is answered by the lead of the page documenting what it names
    // (`git-describe(1)`'s "The command finds the most recent tag that is reachable from a
    // commit ...", below a fifth of the best passage's score for "What does git describe
    // output?").
    if definitions.is_empty() {
        let mut start = 0;
        for (p, entry) in entry_pages.iter().enumerate() {
            let end = start + owner[start..].iter().take_while(|o| **o == p).count();
            if *entry && definitions.len() < MAX_PAGE_LEADS {
                definitions.extend(page_lead(&all[start..end]).map(|l| start + l));
            }
            start = end;
        }
    }
    // A question asking of two products is answered from both's docs: the best passage of
    // each keeps a slot. Python's pages on division filled all eight, and PostgreSQL's
    // operator table, whose row states how its `/` rounds, was left out. Ranked among that
    // product's own passages: across both, the words the two docs share weigh little, and a
    // note on shifting by "a negative value" outranked the `/` row.
    for product in products_asked(task) {
        let own: Vec<usize> = (0..all.len())
            .filter(|i| of_product(&pages[owner[*i]].url, &pages[owner[*i]].title, &product))
            .filter(|i| prose_words(&all[*i].text) >= MIN_PROSE_WORDS && !is_lead_in(&all[*i].text))
            .collect();
        let passages: Vec<_> = own.iter().map(|i| all[*i].clone()).collect();
        let own_scores = rank_focused(&passages, task);
        let best_of = (0..own.len())
            .filter(|j| own_scores[*j] > 0.0)
            .max_by(|a, b| own_scores[*a].total_cmp(&own_scores[*b]).then(b.cmp(a)));
        if let Some(i) = best_of.map(|j| own[j]).filter(|i| !definitions.contains(i)) {
            definitions.push(i);
        }
    }
    let mut order: Vec<usize> = (0..all.len())
        .filter(|i| {
            scores[*i] > 0.0 && (floor[*i] >= best * MIN_SHARE_OF_BEST || definitions.contains(i))
        })
        .filter(|i| prose_words(&all[*i].text) >= MIN_PROSE_WORDS)
        .filter(|i| {
            let t = &all[*i].text;
            !is_lead_in(t) || (asks_version && is_version_note(t))
        })
        .collect();
    order.sort_by(|a, b| scores[*b].total_cmp(&scores[*a]).then(a.cmp(b)));
    let mut out: Vec<Numbered> = Vec::new();
    let mut used = 0;
    let mut shown: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    // The definitions keep a slot each: ranked low, they came after eight others (git-describe's
    // lead, "The command finds the most recent tag ...").
    let mut definitions_left: Vec<usize> = definitions
        .iter()
        .copied()
        .filter(|d| order.contains(d))
        .collect();
    for i in order {
        if out.len() >= MAX_PASSAGES {
            break;
        }
        let definition = definitions_left.contains(&i);
        if !definition && out.len() + definitions_left.len() >= MAX_PASSAGES {
            continue;
        }
        definitions_left.retain(|d| *d != i);
        // The same paragraph on two pages (git-config(1) includes every `gc.*` entry of
        // git-gc(1)) is one passage: shown twice it took a second slot, and quoted twice the
        // report's repetition guard cut the evidence after it, `gc.auto`'s default with it.
        if !shown.insert(same_text_key(&all[i].text)) {
            continue;
        }
        let page = &pages[owner[i]];
        let heading = all[i].heading_path.join(" › ");
        // An API entry's description ("Deserialize s ...") names its function only in its
        // heading: the signature goes in front, so an answer copied from it says what to call.
        let text = match all[i].heading_path.last() {
            Some(sig) if looks_like_signature(sig) => format!("{}: {}", sig.trim(), all[i].text),
            _ => all[i].text.clone(),
        };
        let text = cut_at_sentence(&text, PASSAGE_CHARS);
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
    with_another_page_early(out, super::EACH_PASSAGES)
}

/// Pure: `items` renumbered so that the first `head` are not all one page's when a later one
/// is another page's: that page's best passage takes the last place of the head. A JSON-mode
/// model answers from the head first, and the page whose title names the asked command filled
/// it: "By default, the CREATE INDEX command creates B-tree indexes" on the index-types page
/// came seventh, and the answer spoke of the index's tablespace.
fn with_another_page_early(mut items: Vec<Numbered>, head: usize) -> Vec<Numbered> {
    if items.len() > head && head > 0 {
        let first = items[0].url.clone();
        let one_page = items[..head].iter().all(|n| n.url == first);
        if let Some(other) = items[head..].iter().position(|n| n.url != first)
            && one_page
        {
            let moved = items.remove(head + other);
            items.insert(head - 1, moved);
        }
    }
    for (i, n) in items.iter_mut().enumerate() {
        n.number = i + 1;
    }
    items
}

/// Pure: `text` cut to at most `max` characters at the end of its last whole sentence there,
/// or, when that would keep less than half, at a word, marked "…". Cut at a character, a
/// passage ended "Note that a complex query might perform several sort and hash operations
/// and many", and the 0.5B model copied it to its end: "Note that a complex query might
/// perform many," stood in the summary as a claim.
fn cut_at_sentence(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    let sentence_end = head
        .rmatch_indices(['.', '!', '?'])
        .map(|(i, _)| i + 1)
        .find(|end| head[*end..].starts_with(char::is_whitespace));
    match sentence_end {
        Some(end) if head[..end].chars().count() * 2 >= max => head[..end].to_string(),
        _ => {
            let word = head.rfind(char::is_whitespace).unwrap_or(head.len());
            format!("{}…", head[..word].trim_end())
        }
    }
}

/// Pure: a passage's text as compared for repeats: its words, lower-cased, one space apart.
fn same_text_key(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fewest words of prose (links removed) a passage needs to be evidence: a page's navigation
/// ("[Next](plpython-envar.html ...)") is not, however well it matches.
const MIN_PROSE_WORDS: usize = 2;

/// Most words of a lead-in: "The csv module defines the following functions:" introduces a
/// list and says nothing itself; a small model quoting it answers nothing.
const LEAD_IN_WORDS: usize = 14;

/// Pure: whether `task` asks in which version something came: then a bare version note under
/// the asked-for entry ("str.removeprefix(prefix, /): New in version 3.9.") is the answer, and
/// "What does str.removeprefix() do, and in which version was it added?" had it filtered out.
/// Words are matched whole: "int/str conversion" holds no "version".
pub(super) fn asks_version(task: &str) -> bool {
    let words: Vec<String> = task
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let t = format!(" {} ", words.join(" "));
    [
        " version ",
        " versions ",
        " when was ",
        " when were ",
        " added ",
        " introduced ",
        " new in ",
    ]
    .iter()
    .any(|w| t.contains(w))
}

/// Pure: whether `text` only introduces what follows it (short, ending in a colon).
pub(super) fn is_lead_in(text: &str) -> bool {
    let t = text.trim();
    // "Special type to represent the current enclosed class. For example:" states something
    // before its colon: a whole sentence makes it evidence (it was typing.Self's definition).
    let states = t.trim_end_matches(':').contains(". ");
    (t.ends_with(':') && !states && t.split_whitespace().count() <= LEAD_IN_WORDS)
        || is_version_note(t)
}

/// Pure: whether `text` is only a version note ("New in version 3.11.", "Changed in version
/// 3.8."): it says when, not what, and a small model answered a question about TaskGroup's
/// exceptions with nothing but "New in version 3.11".
pub(super) fn is_version_note(text: &str) -> bool {
    let t = text.trim().trim_matches(['*', '_']).trim_end_matches('.');
    focus::is_version_note(t)
        && t.rsplit_once("version ")
            .is_some_and(|(_, v)| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Words of `text` outside Markdown links and URLs.
pub(super) fn prose_words(text: &str) -> usize {
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

/// True for the heading of one documented item: an API signature (`json.loads(s, *, cls=None)`)
/// or a setting with its type (`max_connections (integer)`).
pub(super) fn is_entry_heading(heading: &str) -> bool {
    let h = heading.trim().trim_matches('`');
    let name = h.split([' ', '(']).next().unwrap_or_default();
    looks_like_signature(h)
        || (h.contains('(')
            && name.len() > 1
            && name.contains(['_', '.'])
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '.'))
}

/// True for a heading that is an API signature: `json.loads(s, *, cls=None)`, `len(s)`.
pub(super) fn looks_like_signature(heading: &str) -> bool {
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
pub(super) fn breadcrumbs_as_headings(text: &str) -> String {
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

#[cfg(test)]
mod tests;
