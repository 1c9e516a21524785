//! Query-focused reading: a page's Markdown split into passages along its structure, ranked
//! against the researcher's task with BM25, and the best of them, in page order with their
//! heading breadcrumbs, are what the model reads (instead of the page's first N characters).
//!
//! Pure: no I/O. BM25 is computed over the page's own passages (document frequencies from the
//! page), which is what "which part of this page answers the question" needs.

use std::collections::BTreeSet;

/// What a passage is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassageKind {
    /// A paragraph (or a piece of a long one).
    Prose,
    /// A fenced code block or a run of interpreter lines (`>>>`), kept whole or not at all.
    Code,
    /// One row of a table.
    TableRow,
    /// A run of list items.
    List,
}

/// A unit of a page the model may be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passage {
    /// Position in the page (0-based), so selections keep page order.
    pub index: usize,
    /// The headings above it, outermost first (API entries such as `json.loads(s, ...)` are
    /// headings too: see `scrape::extract`).
    pub heading_path: Vec<String>,
    /// The passage's Markdown.
    pub text: String,
    /// What it is.
    pub kind: PassageKind,
}

/// Longest prose passage; longer paragraphs are cut at sentence ends.
const MAX_PROSE_CHARS: usize = 900;

/// Splits a page's Markdown into passages: headings set the breadcrumb, fenced code blocks and
/// interpreter sessions are one passage each, table rows one each, list runs and paragraphs one
/// each (long paragraphs cut at sentence boundaries).
pub fn split(markdown: &str) -> Vec<Passage> {
    let mut out = Vec::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let mut block_kind = PassageKind::Prose;
    let mut in_fence = false;
    // A definition term's heading with nothing under it yet: the next term joins it.
    let mut term_open = false;
    // The line above was a table row (the header, when a separator follows).
    let mut row_above = false;
    let path = |headings: &[(usize, String)]| headings.iter().map(|(_, h)| h.clone()).collect();

    fn flush(
        out: &mut Vec<Passage>,
        block: &mut Vec<&str>,
        kind: PassageKind,
        heading_path: Vec<String>,
    ) {
        let text = block.join("\n").trim().to_string();
        block.clear();
        if text.is_empty() {
            return;
        }
        let pieces = if kind == PassageKind::Prose && text.chars().count() > MAX_PROSE_CHARS {
            cut_sentences(&text, MAX_PROSE_CHARS)
        } else {
            vec![text]
        };
        for text in pieces {
            out.push(Passage {
                index: out.len(),
                heading_path: heading_path.clone(),
                text,
                kind,
            });
        }
    }

    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if in_fence {
            block.push(line);
            if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                in_fence = false;
                flush(&mut out, &mut block, PassageKind::Code, path(&headings));
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            flush(&mut out, &mut block, block_kind, path(&headings));
            in_fence = true;
            term_open = false;
            block.push(line);
            continue;
        }
        // Only an unindented `#` starts a heading: indented ones are comments in code.
        if let Some((level, title)) = heading(line) {
            flush(&mut out, &mut block, block_kind, path(&headings));
            // Terms listed together share one description (`-p` and `--prune`): the entry is
            // named by all of them, not by the last alone.
            if level == TERM_LEVEL
                && term_open
                && let Some((TERM_LEVEL, last)) = headings.last_mut()
            {
                last.push_str(", ");
                last.push_str(&title);
                continue;
            }
            headings.retain(|(l, _)| *l < level);
            headings.push((level, title));
            term_open = level == TERM_LEVEL;
            continue;
        }
        if !trimmed.is_empty() {
            term_open = false;
        }
        let kind = if trimmed.starts_with('|') {
            PassageKind::TableRow
        } else if trimmed.starts_with(">>>")
            || trimmed.starts_with("...") && block_kind == PassageKind::Code
        {
            PassageKind::Code
        } else if is_list_item(trimmed)
            || (block_kind == PassageKind::List && line.starts_with("  ") && !trimmed.is_empty())
        {
            PassageKind::List
        } else {
            PassageKind::Prose
        };
        if trimmed.is_empty() {
            flush(&mut out, &mut block, block_kind, path(&headings));
            block_kind = PassageKind::Prose;
            row_above = false;
            continue;
        }
        if kind == PassageKind::TableRow {
            flush(&mut out, &mut block, block_kind, path(&headings));
            // Separator rows (|---|---|) carry no text.
            if trimmed.chars().any(|c| c.is_alphanumeric()) {
                block.push(line);
                flush(&mut out, &mut block, PassageKind::TableRow, path(&headings));
                row_above = true;
            } else {
                // The row above a separator is the table's header: column names, no statement.
                // "| Attribute | Value |" was the one passage the 1.5B model cited for a
                // datetime's resolution.
                if row_above && out.last().is_some_and(|p| p.kind == PassageKind::TableRow) {
                    out.pop();
                }
                row_above = false;
            }
            block_kind = PassageKind::Prose;
            continue;
        }
        row_above = false;
        // Interpreter output lines follow `>>>` lines inside the same Code passage.
        let kind = if block_kind == PassageKind::Code && !block.is_empty() {
            PassageKind::Code
        } else {
            kind
        };
        if kind != block_kind && !block.is_empty() {
            flush(&mut out, &mut block, block_kind, path(&headings));
        }
        block_kind = kind;
        block.push(line);
    }
    let kind = if in_fence {
        PassageKind::Code
    } else {
        block_kind
    };
    flush(&mut out, &mut block, kind, path(&headings));
    join_lead_ins(out)
}

/// Longest passage made of a lead-in and the list it introduces.
const MAX_LEAD_IN_GROUP_CHARS: usize = 1200;

/// Longest code block joined to the sentence introducing it.
const MAX_COMPLETING_CODE_CHARS: usize = 240;

/// Pure: a short paragraph ending in a colon and the list items after it become one passage,
/// as does a short code block after it.
/// Apart, neither says anything: "The difference between shallow and deep copying is only
/// relevant for compound objects:" names the subject and no fact, and "A *shallow copy*
/// constructs a new compound object ..." matches nothing of a question about `copy.copy()`
/// versus `copy.deepcopy()`; together they are the answer.
fn join_lead_ins(passages: Vec<Passage>) -> Vec<Passage> {
    let mut out: Vec<Passage> = Vec::with_capacity(passages.len());
    let mut open = false;
    for p in passages {
        // A short code block a sentence introduces ("This is a convenient shortcut for:" and
        // `git branch <new-branch>`, `git switch <new-branch>`) completes that sentence, when
        // the paragraph states something before it: a bare "For example:" stays a lead-in,
        // which is no passage of its own, and the code stays code.
        if let Some(last) = out.last_mut()
            && p.kind == PassageKind::Code
            && !open
            && last.kind == PassageKind::Prose
            && last.heading_path == p.heading_path
            && last.text.trim_end().ends_with(':')
            && last.text.trim_end().trim_end_matches(':').contains(". ")
            && p.text.chars().count() <= MAX_COMPLETING_CODE_CHARS
        {
            last.text.push('\n');
            last.text.push_str(&p.text);
            continue;
        }
        // A FAQ's answer completes its question: "Q: Is there a JIT compiler?" alone was the
        // best passage for a question on Python's JIT, and its "A: No." another.
        if let Some(last) = out.last_mut()
            && last.kind == PassageKind::Prose
            && p.kind == PassageKind::Prose
            && last.heading_path == p.heading_path
            && last.text.starts_with("Q:")
            && last.text.ends_with('?')
            && p.text.starts_with("A:")
        {
            last.text = format!("{} {}", last.text, p.text);
            continue;
        }
        if let Some(last) = out.last_mut()
            && p.kind == PassageKind::List
            && last.heading_path == p.heading_path
            && (open || (last.kind == PassageKind::Prose && last.text.trim_end().ends_with(':')))
            && last.text.chars().count() + p.text.chars().count() < MAX_LEAD_IN_GROUP_CHARS
        {
            last.text.push('\n');
            last.text.push_str(&p.text);
            open = true;
            continue;
        }
        open = false;
        out.push(Passage {
            index: out.len(),
            ..p
        });
    }
    out
}

/// The heading level of a definition term, below every Markdown heading.
const TERM_LEVEL: usize = 7;

/// `## Title` as (2, "Title"); a line that is all bold (`**json.loads(s, ...)**`, how the
/// extractor renders a definition term such as an API signature) as a heading below level 6.
fn heading(line: &str) -> Option<(usize, String)> {
    let t = line.trim_end();
    if t.len() > 4 && t.starts_with("**") && t.ends_with("**") && !t[2..t.len() - 2].contains("**")
    {
        let title = unescape_markdown(&t[2..t.len() - 2]);
        return (!title.trim().is_empty()).then(|| (TERM_LEVEL, title.trim().to_string()));
    }
    let level = line.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if !rest.starts_with(' ') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim();
    (!title.is_empty()).then(|| (level, title.to_string()))
}

/// Pure: `text` without Markdown's backslash escapes (`\[-p\]` is `[-p]`, `\_` is `_`): a heading
/// names an entry as the page shows it.
pub fn unescape_markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&next) = chars.peek()
            && next.is_ascii_punctuation()
        {
            out.push(next);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}

fn is_list_item(line: &str) -> bool {
    if line.starts_with("- ") || line.starts_with("* ") || line.starts_with("+ ") {
        return true;
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && line[digits..].starts_with(". ")
}

/// Cuts `text` into pieces of at most about `max` characters at sentence ends.
fn cut_sentences(text: &str, max: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for sentence in text.split_inclusive(['.', '!', '?']) {
        if !current.is_empty() && current.chars().count() + sentence.chars().count() > max {
            pieces.push(current.trim().to_string());
            current.clear();
        }
        current.push_str(sentence);
    }
    if !current.trim().is_empty() {
        pieces.push(current.trim().to_string());
    }
    pieces
}

/// Words that carry no topic (English function words and question words).
const STOP_WORDS: [&str; 96] = [
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "between", "both", "but", "by", "can", "could", "did", "do", "does",
    "doing", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her",
    "here", "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "more", "most",
    "my", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "out",
    "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "them", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
];

/// More question words (kept apart so the table above stays a round, sorted list).
const QUESTION_WORDS: [&str; 8] = [
    "while", "who", "whom", "why", "will", "with", "would", "you",
];

/// Words naming the documentation itself: where to look, not what is asked. Every page of a
/// Sphinx tree is titled "... — Python 3.11.2 documentation", so the 1.5B planner's task "toml in
/// Python 3.11 documentation" was answered from the page on downloading the documentation
/// while `tomllib`'s own page had been read for it (tuning set, deep mode).
const DOCS_WORDS: [&str; 2] = ["docs", "documentation"];

pub(crate) fn is_stop(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
        || QUESTION_WORDS.contains(&word)
        || DOCS_WORDS.contains(&word)
}

/// A light stemmer: plural, verb and agent endings, then a final `e`, so "decode", "decodes",
/// "decoding", "decoded" and "decoder" all become "decod".
fn stem(word: &str) -> String {
    let mut w = word.to_string();
    for (suffix, keep) in [
        ("ies", "y"),
        ("ing", ""),
        ("ers", ""),
        ("er", ""),
        ("ed", ""),
        ("es", ""),
        ("s", ""),
    ] {
        if w.len() > suffix.len() + 2 && w.ends_with(suffix) && !w.ends_with("ss") {
            w = format!("{}{keep}", &w[..w.len() - suffix.len()]);
            break;
        }
    }
    if w.len() > 4 && w.ends_with('e') {
        w.pop();
    }
    w
}

/// Query words and the words documentation uses for the same act: a question asks how to
/// "decode" JSON, the reference says `loads` "deserializes" it. Expanding the query (never the
/// page) closes that gap for the verbs technical questions use most.
const SYNONYMS: [(&str, &[&str]); 8] = [
    ("decod", &["deserializ", "pars", "load"]),
    ("encod", &["serializ", "dump"]),
    ("pars", &["decod", "load"]),
    ("deserializ", &["decod", "load"]),
    ("serializ", &["encod", "dump"]),
    ("default", &["defaults"]),
    ("remov", &["delet", "drop"]),
    ("delet", &["remov", "drop"]),
];

/// Pure: the words documentation uses for the same act as the stemmed `term` ([`SYNONYMS`]).
pub(crate) fn synonyms(term: &str) -> impl Iterator<Item = &'static str> + '_ {
    SYNONYMS
        .iter()
        .filter(move |(w, _)| *w == term)
        .flat_map(|(_, s)| s.iter().copied())
}

/// The query's terms with their synonyms.
fn query_terms(query: &str) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = terms(query).into_iter().collect();
    let extra: Vec<String> = out
        .iter()
        .flat_map(|t| synonyms(t).map(str::to_string))
        .collect();
    out.extend(extra);
    out
}

/// Weight of a context term in [`rank`] (a full query term weighs 1).
const CONTEXT_WEIGHT: f64 = 0.2;

/// Pure: whether a word can name a product: capitalised, letters and digits only, no stop word.
fn is_product_name(w: &str) -> bool {
    w.chars().next().is_some_and(char::is_uppercase)
        && w.chars().all(char::is_alphanumeric)
        && !is_stop(&w.to_lowercase())
}

/// Pure: the product a possessive names ("PostgreSQL's jsonb type", "Python's secrets module":
/// the owner of the subject).
pub(crate) fn possessive_owner(w: &str) -> Option<&str> {
    w.strip_suffix("'s")
        .or_else(|| w.strip_suffix("’s"))
        .filter(|o| is_product_name(o))
}

/// Pure: whether `w`, after the word `prev`, is a product used as a modifier ("a PostgreSQL
/// table", "the Python datetime object"). Not an all-capitals word: "the MERGE command", "the
/// JSON module" name the subject.
pub(crate) fn modifies_as_product(prev: &str, w: &str) -> bool {
    matches!(prev.to_lowercase().as_str(), "a" | "an" | "the")
        && is_product_name(w)
        && w.chars().any(char::is_lowercase)
}

/// Pure: whether `w`, after the question word `prev`, is the product a question asks in
/// ("Which Python exception", "what PostgreSQL setting"): with "Python" taken for a subject,
/// "Which Python exception does json.loads raise ..., and what is PostgreSQL's default port?"
/// asked of one product, and its port half was never searched.
fn asks_in_product(prev: &str, w: &str) -> bool {
    matches!(prev.to_lowercase().as_str(), "which" | "what")
        && is_product_name(w)
        && w.chars().any(char::is_lowercase)
}

/// Nouns that say what kind of thing a name is: "the MERGE command", "the json module".
const CATEGORY_NOUNS: [&str; 14] = [
    "command",
    "statement",
    "function",
    "method",
    "class",
    "module",
    "type",
    "decorator",
    "keyword",
    "clause",
    "package",
    "object",
    "setting",
    "parameter",
];

/// Pure: whether `word` (lower-case) is a noun saying what kind of thing a name is.
pub(crate) fn is_category_noun(word: &str) -> bool {
    CATEGORY_NOUNS.contains(&word)
}

/// Pure: whether `w`, after `before` and `prev`, says what kind of thing `prev` names ("the
/// MERGE command", "json.loads() function", "the json module"): the name is the subject, the
/// noun only its kind. As a full term, "command" made "This command conforms to the SQL
/// standard." and "a `MERGE` command returns a command tag" outrank MERGE's own "conditionally
/// insert, update, or delete rows".
fn names_a_kind(before: &str, prev: &str, w: &str) -> bool {
    let code_like = prev.contains(['_', '.', '('])
        || (prev.len() > 1
            && prev
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
    let after_article = matches!(before.to_lowercase().as_str(), "the" | "a" | "an")
        && !is_stop(&prev.to_lowercase());
    CATEGORY_NOUNS.contains(&w.to_lowercase().as_str())
        && !prev.is_empty()
        && (code_like || after_article)
}

/// Pure: the query's context terms: a product and its version (`PostgreSQL 15`, `Python 3.11`)
/// a product named in passing at the end of a clause (`... module in Python?`), an owner
/// (`PostgreSQL's jsonb type`), a product used as a modifier (`a PostgreSQL table`) or the kind of
/// thing a name is (`the MERGE command`, see [`names_a_kind`]). They say
/// which documentation to look in, not which passage answers; on a page of that product's
/// docs they match by accident ("PostgreSQL versions before 9.4 ..." outranked the
/// `max_connections` entry for "the default of max_connections in PostgreSQL 15").
pub fn context_terms(query: &str) -> BTreeSet<String> {
    let (words, raw) = query_words(query);
    let mut out: BTreeSet<String> = compared_pair(query, &words, &raw)
        .iter()
        .flat_map(|p| terms(p))
        .collect();
    let is_version = |w: &str| {
        !w.is_empty()
            && w.chars().next().is_some_and(|c| c.is_ascii_digit())
            && w.chars().all(|c| c.is_ascii_digit() || c == '.')
    };
    let is_name = is_product_name;
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        // A parenthesis after the product is an aside on it ("in Python (`//`) and in
        // PostgreSQL (integer `/`)"): the clause naming the product ends there.
        let ends_clause = raw
            .get(i)
            .is_some_and(|r| r.ends_with(['?', ',', ';', '.', ':', '!']))
            || raw.get(i + 1).is_some_and(|r| r.starts_with('('));
        let after_in =
            i > 0 && matches!(words[i - 1].to_lowercase().as_str(), "in" | "for" | "with");
        let modifies = next.chars().next().is_some_and(char::is_lowercase) && !is_stop(next);
        let prev = if i > 0 { words[i - 1] } else { "" };
        let before = if i > 1 { words[i - 2] } else { "" };
        if let Some(owner) = possessive_owner(w) {
            out.extend(terms(owner));
        } else if names_a_kind(before, prev, w) {
            out.extend(terms(w));
        } else if is_name(w) && is_version(next) {
            out.extend(terms(w));
            out.extend(terms(next));
        } else if is_name(w)
            && ((after_in && (ends_clause || i + 1 == words.len()))
                || (i > 0
                    && (modifies_as_product(words[i - 1], w) || asks_in_product(words[i - 1], w))
                    && modifies
                    && !ends_clause))
        {
            out.extend(terms(w));
        }
    }
    out
}

/// Words that frame a question rather than say what it asks: a passage answering "How does
/// X differ from Y?" says what X does, not that it differs.
pub const FRAME_WORDS: [&str; 9] = [
    "differ",
    "difference",
    "compare",
    "versus",
    "work",
    "happen",
    "mean",
    "explain",
    "purpose",
];

/// Pure: a query's words, stripped of punctuation (`PostgreSQL?` → `PostgreSQL`), beside its
/// words as written, which keep the punctuation that closes a clause.
fn query_words(query: &str) -> (Vec<&str>, Vec<&str>) {
    let words = query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_')))
        .map(|w| w.trim_end_matches('.'))
        .collect();
    (words, query.split_whitespace().collect())
}

/// Pure: the products a query compares: two product names (not all capitals) joined by "and"
/// or "or" after in, for, with, between or across, closing their clause ("How does integer
/// division differ between Python and PostgreSQL?"), when the query asks something of them
/// beside its frame ([`FRAME_WORDS`]). There the pair says whose docs to read, and passages on
/// PL/Python, which name both on every line, outranked the two operators' own entries. "What
/// is the difference between Enum and IntEnum?" asks nothing else: they are its subjects.
fn compared_pair<'a>(query: &str, words: &[&'a str], raw: &[&str]) -> Vec<&'a str> {
    let product = |w: &str| is_product_name(w) && w.chars().any(char::is_lowercase);
    let closes = |i: usize| {
        i + 1 == words.len()
            || raw
                .get(i)
                .is_some_and(|r| r.ends_with(['?', ',', ';', '.', ':', '!']))
            || raw.get(i + 1).is_some_and(|r| r.starts_with('('))
    };
    let mut out = Vec::new();
    for i in 1..words.len().saturating_sub(2) {
        let before = words[i - 1].to_lowercase();
        if matches!(
            before.as_str(),
            "in" | "for" | "with" | "between" | "across"
        ) && product(words[i])
            && matches!(words[i + 1], "and" | "or")
            && product(words[i + 2])
            && closes(i + 2)
        {
            out.extend([words[i], words[i + 2]]);
        }
    }
    if out.is_empty() {
        return out;
    }
    let mut own: BTreeSet<String> = terms(&out.join(" ")).into_iter().collect();
    own.extend(terms(&FRAME_WORDS.join(" ")));
    let asks_more = terms(query).iter().any(|t| !own.contains(t));
    if asks_more { out } else { vec![] }
}

/// Terms of a text: lower-cased words (letters, digits, `_`), stop words dropped, stemmed; a
/// dotted name such as `json.loads` gives `json`, `loads` and `json.loads`.
pub fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for original in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        let original = original.trim_matches('.');
        if original.is_empty() {
            continue;
        }
        let token = original.to_lowercase();
        if token.contains('.') {
            out.push(token.clone());
        }
        for part in token.split('.') {
            if part.len() > 1 && !is_stop(part) {
                out.push(canonical(stem(part)));
            }
        }
        // `DictReader`, `TaskGroup`: the words of a CamelCase name count too, so a question
        // about reading into dictionaries finds the class that does it.
        for word in original.split('.').flat_map(camel_words) {
            let word = word.to_lowercase();
            if word.len() > 1 && !is_stop(&word) {
                out.push(canonical(stem(&word)));
            }
        }
    }
    out
}

/// Pure: the words of a CamelCase identifier (`DictReader` → `Dict`, `Reader`); nothing for a
/// word without an inner capital.
fn camel_words(token: &str) -> Vec<&str> {
    let bounds: Vec<usize> = token
        .char_indices()
        .zip(token.chars().skip(1))
        .filter(|((_, a), b)| a.is_lowercase() && b.is_uppercase())
        .map(|((i, a), _)| i + a.len_utf8())
        .collect();
    if bounds.is_empty() {
        return Vec::new();
    }
    let mut words = Vec::new();
    let mut start = 0;
    for b in bounds {
        words.push(&token[start..b]);
        start = b;
    }
    words.push(&token[start..]);
    words
}

/// Pure: the short form programmers write for a (stemmed) word, so "dictionary" meets `dict`
/// and "parameters" meets `params`; and one form for a word the stemmer leaves apart.
fn canonical(stemmed: String) -> String {
    const SHORT: [(&str, &str); 11] = [
        ("argument", "arg"),
        ("boolean", "bool"),
        ("charact", "char"),
        ("configuration", "config"),
        // "How does X differ from Y?" is answered by "the difference is ..." and "X is
        // different": the light stemmer leaves the three apart.
        ("diff", "differ"),
        ("differenc", "differ"),
        ("dictionary", "dict"),
        ("different", "differ"),
        ("directory", "dir"),
        ("integ", "int"),
        ("paramet", "param"),
    ];
    SHORT
        .iter()
        .find(|(long, _)| *long == stemmed)
        .map(|(_, short)| (*short).to_string())
        .unwrap_or(stemmed)
}

/// [`rank`] times what the question asks for ([`focus::focus`]): passages under the entry of a
/// name it asks about, and passages stating a default when it asks for one, come first. What the
/// model reads of a page and which passages it is shown are chosen by this.
pub fn rank_focused(passages: &[Passage], query: &str) -> Vec<f64> {
    rank(passages, query)
        .into_iter()
        .zip(focus::focus(passages, query))
        .map(|(s, f)| s * f)
        .collect()
}

/// Most words of a question besides the names it asks about for it to be about the names
/// themselves (see [`definition_terms`]).
const MAX_ASPECT_TERMS: usize = 2;

/// Weight of a term of an asked-for entry's definition in [`rank`] (a query term weighs 1).
const DEFINITION_WEIGHT: f64 = 0.5;

/// Pure: the terms of the definitions of the names `query` asks about: the first prose passage
/// under each asked-for entry ("Return a *shallow* copy of x" under `copy.copy(x)`). They are
/// the words the documentation explains the name in, which the question does not use: "What
/// is the difference between copy.copy() and copy.deepcopy()?" is answered by "A shallow copy
/// constructs ...; a deep copy ..., recursively, ...", which names neither function.
/// Only a question about the names themselves is expanded ("What is typing.Self?", "the
/// difference between copy.copy() and copy.deepcopy()"): one asking about an aspect of them
/// ("how do json.loads() and jsonb each handle duplicate keys") has its own words for it, and
/// json.loads' definition then pushed PostgreSQL's duplicate-key passages out.
fn definition_terms(passages: &[Passage], query: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let names = focus::asked_names(query);
    let name_terms: BTreeSet<String> = names.iter().flat_map(|n| terms(n)).collect();
    let context = context_terms(query);
    let comparing = terms("differ difference compare versus vs mean");
    let aspect = query_terms(query)
        .into_iter()
        .filter(|t| !name_terms.contains(t) && !context.contains(t) && !comparing.contains(t))
        .count();
    if names.is_empty() || aspect > MAX_ASPECT_TERMS {
        return out;
    }
    for i in asked_entry_leads(passages, query) {
        out.extend(
            terms(&passages[i].text)
                .into_iter()
                .filter(|t| !t.contains('.')),
        );
    }
    out
}

/// Pure: the indices of the first prose passage under each entry heading that documents an
/// asked-for name, option or phrase ([`focus::is_asked_entry`]), in page order.
fn asked_entry_leads(passages: &[Passage], query: &str) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    let mut seen: Vec<&[String]> = Vec::new();
    for (i, p) in passages.iter().enumerate() {
        let Some(h) = p.heading_path.last() else {
            continue;
        };
        if p.kind != PassageKind::Prose
            || seen.contains(&p.heading_path.as_slice())
            || !focus::is_asked_entry(h, query)
        {
            continue;
        }
        seen.push(&p.heading_path);
        out.push(i);
    }
    out
}

mod bm25;
pub mod entry;
pub mod focus;
mod instances;
mod question;
mod selection;

pub use bm25::rank;
pub use question::{
    held_part_terms, holds_word, is_context, key_terms, keyword_query, mentions_key_terms,
    products_asked, sole_product, speaks_to, subject_terms,
};
pub use selection::{Selection, asked_definitions, bears_on, page_lead, select};

#[cfg(test)]
mod tests;
