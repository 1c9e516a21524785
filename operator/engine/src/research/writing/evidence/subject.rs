//! What a claim is about, and whether a text names it.
//!
//! A share of shared words cannot tell "The default value of `wal_writer_delay` is 1" from the
//! passage about `commit_delay` it cites: "default", "value" and the number are on both. A
//! claim is about its names (identifiers, code, quoted and capitalised terms, multi-word terms
//! it shares with the question), and a passage that never names them does not say it, however
//! many other words it shares. Pure.

use std::collections::BTreeSet;

use super::{STOPWORDS, stem, terms};
use crate::research::reading::passages::focus::option_commands;
use crate::research::reading::passages::holds_word;
use crate::research::reading::passages::{
    FRAME_WORDS, context_terms, is_context, products_asked, sole_product, subject_terms,
};

mod gate;
mod release;
use gate::{
    answer_kind_phrase, keywords, named_apart, names_asked, names_option, scattered_phrases,
    unheld_heads, unheld_parts, unheld_predicates, unnamed_keywords, unspoken_attributes,
    unwritten_versions,
};
pub use release::of_asked_release;

/// How a subject is looked for in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A name (`json.loads`, `max_connections`, `TaskGroup`, `VACUUM`): one token, a dotted
    /// name also by its last part where the text writes that part as code.
    Name(String),
    /// Words that must stand together (a quoted term).
    Phrase(Vec<String>),
    /// A run of capitalised words ("Repeatable Read") or a multi-word term shared with the
    /// question ("logical replication"): each of its words must be in the text.
    Words(Vec<String>),
    /// Words written in capitals (`UPDATE`, `EXPLAIN ANALYZE`, `NULL`): each must be written in
    /// capitals in the text too. In lower case the same word is the English word: "update the
    /// index" on a Git page does not name SQL's `UPDATE`.
    Keywords(Vec<String>),
}

impl Subject {
    /// The subject as a reader would write it.
    pub fn label(&self) -> String {
        match self {
            Subject::Name(n) => n.clone(),
            Subject::Phrase(w) | Subject::Words(w) | Subject::Keywords(w) => w.join(" "),
        }
    }
}

/// Words that end a run of words as the attribute asked about, not the subject: in "the
/// default value of max_connections", "default value" is what is asked of the subject.
const ATTRIBUTE_MARKERS: [&str; 6] = ["of", "for", "on", "in", "to", "about"];

/// Pure: whether a word is one of the evidence check's stopwords, in any case.
fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word.to_lowercase().as_str())
}

/// One word of a claim as written, with what surrounds it.
#[derive(Debug)]
struct Token {
    /// The word without the punctuation around it (a call's `(...)` cut off).
    text: String,
    /// It was written as a call (`name(`).
    call: bool,
    /// Punctuation after it ends a run of words (`,`, `:`, `.`, `;`, a bracket).
    breaks: bool,
    /// It opens a sentence or a clause after a colon.
    opens: bool,
}

/// Pure: the words of `text`, outside code spans and quotes.
fn tokens(text: &str) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::new();
    let mut opens = true;
    for raw in text.split_whitespace() {
        let call_at = raw.find('(');
        let head = call_at.map_or(raw, |i| &raw[..i]);
        let word = head
            .trim_start_matches(|c: char| !(c.is_alphanumeric() || c == '_'))
            .trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        let word = word.strip_suffix("'s").unwrap_or(word);
        let word = word.strip_suffix("’s").unwrap_or(word);
        let breaks = call_at.is_some()
            || raw
                .trim_end_matches(['"', '\'', '’', '”', '*', '_'])
                .ends_with([',', ':', '.', ';', '!', '?', ')', ']']);
        if !word.is_empty() {
            out.push(Token {
                text: word.to_string(),
                call: call_at.is_some_and(|i| i > 0) && word.len() == head.len(),
                breaks,
                opens,
            });
        }
        opens = raw.ends_with([':', '.', '!', '?']) || (opens && word.is_empty());
    }
    out
}

/// Pure: whether a word is written as an identifier: `snake_case`, `dotted.name`, `CamelCase`.
fn is_identifier(word: &str) -> bool {
    let inner_upper = word.chars().skip(1).any(char::is_uppercase)
        && word.chars().filter(|c| c.is_lowercase()).count() >= 2;
    let dotted = word.contains('.')
        && word.chars().next().is_some_and(char::is_alphabetic)
        && word
            .split('.')
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_alphanumeric() || c == '_'));
    (word.contains('_') && word.chars().any(char::is_alphabetic)) || dotted || inner_upper
}

/// Pure: whether a word is all capitals (`VACUUM`, `NULL`, `JSON`).
fn is_all_caps(word: &str) -> bool {
    word.chars().filter(|c| c.is_alphabetic()).count() >= 2 && !word.chars().any(char::is_lowercase)
}

/// Pure: the spans of `text` between a pair of `open`/`close` marks, and the text without them.
fn take_spans(text: &str, open: char, close: char) -> (Vec<String>, String) {
    let mut spans = Vec::new();
    let mut rest = String::with_capacity(text.len());
    let mut current: Option<String> = None;
    for c in text.chars() {
        match current.as_mut() {
            None if c == open => current = Some(String::new()),
            None => rest.push(c),
            Some(s) if c == close => {
                spans.push(std::mem::take(s));
                current = None;
                // The span stands for a word: the words around it do not run together.
                rest.push_str(" , ");
            }
            Some(s) => s.push(c),
        }
    }
    if let Some(s) = current {
        // An unclosed mark is no span.
        rest.push(open);
        rest.push_str(&s);
    }
    (spans, rest)
}

/// Pure: the subjects of `claim`, a sentence answering `asked`: its names (identifiers, code
/// spans, words written as calls, capitalised and all-capitals terms and runs of them), its
/// quoted terms, the question's own subjects it repeats, and the multi-word terms it shares
/// with the question ("logical replication"). The product the question is asked in
/// (`PostgreSQL` of "in PostgreSQL 15") is context, not subject; not so each of the products
/// a question asks of together ([`products_asked`]): "PostgreSQL's `/` operator does floor
/// division", cited to Python's tutorial, said of one what the other's docs say.
pub fn subjects(claim: &str, asked: &str) -> Vec<Subject> {
    let mut context = context_terms(asked);
    for product in products_asked(asked) {
        context.remove(&product);
    }
    let mut out: Vec<Subject> = Vec::new();
    let push = |s: Subject, out: &mut Vec<Subject>| {
        let words: Vec<String> = match &s {
            Subject::Name(n) => vec![n.clone()],
            Subject::Phrase(w) | Subject::Words(w) | Subject::Keywords(w) => w.clone(),
        };
        let context_only = words
            .iter()
            .all(|w| is_context(w, &context) || w.is_empty());
        if !context_only && !out.contains(&s) {
            out.push(s);
        }
    };
    let (code, text) = take_spans(claim, '`', '`');
    for span in code {
        // `check=True`, `json.loads(s)`: each name in the span.
        for part in span.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
            let part = part.trim_matches('.');
            if part.chars().filter(|c| c.is_alphabetic()).count() >= 2 {
                push(Subject::Name(part.to_lowercase()), &mut out);
            }
        }
    }
    let (straight, text) = take_spans(&text, '"', '"');
    let (curly, mut text) = take_spans(&text, '“', '”');
    for quoted in straight.into_iter().chain(curly) {
        let words: Vec<String> = quoted
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
            .map(|w| w.trim_matches('.').to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        // A quote that held code (its spans, taken above, left " , " behind) is a quoted
        // statement, not a term: “Added `cancelling` and `uncancel` methods to `Task`” was
        // looked for as the phrase "added and methods to", which no page says.
        if (1..=6).contains(&words.len()) && !quoted.contains(" , ") {
            push(Subject::Phrase(words), &mut out);
        } else {
            // A quoted sentence is a claim like any other: its names are looked for.
            text.push_str(" . ");
            text.push_str(&quoted);
        }
    }
    let toks = tokens(&text);
    let mut run: Vec<String> = Vec::new();
    let mut run_opens = false;
    let flush = |run: &mut Vec<String>, run_opens: bool, out: &mut Vec<Subject>| {
        // A sentence's first word is capitalised by grammar: alone it names nothing, unless
        // it is all capitals (`NULL values ...`).
        let alone_at_start = run.len() == 1 && run_opens && !is_all_caps(&run[0]);
        if !run.is_empty() && !alone_at_start {
            let words: Vec<String> = run.iter().map(|w| w.to_lowercase()).collect();
            // Each word of a run, not the run as written: "CREATE INDEX CONCURRENTLY" is
            // documented under CREATE INDEX's `CONCURRENTLY` parameter.
            let s = if run.iter().all(|w| is_all_caps(w) && is_plain_word(w)) {
                Subject::Keywords(words)
            } else if words.len() == 1 {
                Subject::Name(words[0].clone())
            } else {
                Subject::Words(words)
            };
            push(s, out);
        }
        run.clear();
    };
    for t in &toks {
        let word = t.text.as_str();
        if is_identifier(word) || t.call {
            flush(&mut run, run_opens, &mut out);
            push(Subject::Name(word.to_lowercase()), &mut out);
            continue;
        }
        let capital = word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().filter(|c| c.is_alphabetic()).count() >= 2;
        if capital && !(run.is_empty() && is_stopword(word)) {
            if run.is_empty() {
                run_opens = t.opens;
            }
            run.push(word.to_string());
            if t.breaks {
                flush(&mut run, run_opens, &mut out);
            }
        } else {
            flush(&mut run, run_opens, &mut out);
        }
    }
    flush(&mut run, run_opens, &mut out);
    // The question's subjects the claim repeats ("the secrets module", "jsonb").
    let claim_words: BTreeSet<String> = toks.iter().map(|t| t.text.to_lowercase()).collect();
    for key in subject_terms(asked) {
        if claim_words.contains(&key) && !is_context(&key, &context) {
            push(Subject::Name(key), &mut out);
        }
    }
    for words in shared_terms(&toks, asked) {
        push(Subject::Words(words), &mut out);
    }
    out
}

/// Pure: whether a word is letters and digits only (`UPDATE`, not `UTF-8` or `TRUE/FALSE`).
fn is_plain_word(word: &str) -> bool {
    word.chars().all(char::is_alphanumeric)
}

/// A content word of a run: lower case, three letters or more, no stopword, no number.
fn content(word: &str) -> Option<String> {
    let lower = word.to_lowercase();
    (lower.chars().count() >= 3 && lower.chars().all(char::is_alphabetic) && !is_stopword(&lower))
        .then_some(lower)
}

/// Pure: the stemmed pairs of adjacent content words of `text` that are part of its terms:
/// a pair in a run the text follows with "of", "for", "on", ... is the attribute asked
/// about ("default value of"), not a term.
fn term_pairs(toks: &[Token]) -> BTreeSet<(String, String)> {
    let mut pairs = BTreeSet::new();
    let mut run: Vec<String> = Vec::new();
    let mut close = |run: &mut Vec<String>, next: Option<&str>| {
        let attribute = next.is_some_and(|n| ATTRIBUTE_MARKERS.contains(&n));
        if !attribute {
            for w in run.windows(2) {
                pairs.insert((stem(&w[0]), stem(&w[1])));
            }
        }
        run.clear();
    };
    for (i, t) in toks.iter().enumerate() {
        match content(&t.text) {
            Some(w) => {
                run.push(w);
                if t.breaks {
                    close(&mut run, None);
                }
            }
            None => {
                let next = t.text.to_lowercase();
                close(&mut run, Some(next.as_str()));
            }
        }
        if i + 1 == toks.len() {
            close(&mut run, None);
        }
    }
    pairs
}

/// Pure: the multi-word terms of a claim that the question uses too, as runs of words.
fn shared_terms(toks: &[Token], asked: &str) -> Vec<Vec<String>> {
    let (_, asked_text) = take_spans(asked, '`', '`');
    let asked_pairs = term_pairs(&tokens(&asked_text));
    let claim_pairs = term_pairs(toks);
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let mut prev: Option<String> = None;
    for t in toks {
        let word = content(&t.text);
        let joined = match (&prev, &word) {
            (Some(p), Some(w)) => {
                let pair = (stem(p), stem(w));
                asked_pairs.contains(&pair) && claim_pairs.contains(&pair)
            }
            _ => false,
        };
        if joined {
            if run.is_empty()
                && let Some(p) = &prev
            {
                run.push(p.clone());
            }
            if let Some(w) = &word {
                run.push(w.clone());
            }
        } else if !run.is_empty() {
            out.push(std::mem::take(&mut run));
        }
        prev = if t.breaks { None } else { word };
    }
    if !run.is_empty() {
        out.push(run);
    }
    out
}

/// A text made ready for [`names`]: its tokens, lower-cased, and its stemmed terms.
pub struct Named {
    /// Words (letters, digits, `_`, inner `.`), lower-cased, with whether a `(` follows.
    tokens: Vec<(String, bool)>,
    /// The words whose last part is written in capitals (`UPDATE`, `pickle.HIGHEST_PROTOCOL`),
    /// lower-cased as in `tokens`.
    capitals: Vec<String>,
    /// [`terms`] of the text.
    terms: BTreeSet<String>,
}

impl Named {
    /// Prepares `text`.
    pub fn new(text: &str) -> Self {
        let mut tokens = Vec::new();
        let mut capitals = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let start = rest
                .find(|c: char| c.is_alphanumeric() || c == '_')
                .unwrap_or(rest.len());
            rest = &rest[start..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let word = rest[..end].trim_end_matches('.');
            if !word.is_empty() {
                let call = rest[end..].starts_with('(');
                let lower = word.to_lowercase();
                if is_all_caps(word.rsplit('.').next().unwrap_or(word)) {
                    capitals.push(lower.clone());
                }
                tokens.push((lower, call));
            }
            rest = &rest[end..];
        }
        Self {
            tokens,
            capitals,
            terms: terms(text),
        }
    }

    /// Whether the text names `subject`.
    pub fn names(&self, subject: &Subject) -> bool {
        match subject {
            // "TCP/IP", "Unix-domain": the tokens split at the `/` or `-`, so the name is
            // looked for as the phrase of its parts (a verbatim quote failed for want of it).
            Subject::Name(n)
                if n.contains(|c: char| !(c.is_alphanumeric() || "_.".contains(c))) =>
            {
                let parts: Vec<String> = n
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                    .map(|p| p.trim_end_matches('.').to_string())
                    .filter(|p| !p.is_empty())
                    .collect();
                !parts.is_empty() && self.names(&Subject::Phrase(parts))
            }
            Subject::Name(n) => self
                .tokens
                .iter()
                .any(|(t, call)| name_matches(n, t, *call)),
            Subject::Phrase(words) => {
                words.is_empty()
                    || self.tokens.windows(words.len()).any(|w| {
                        w.iter().zip(words).all(|((t, _), want)| {
                            same_word(t, want) || name_matches(want, t, false)
                        })
                    })
            }
            Subject::Words(words) => words
                .iter()
                .filter(|w| w.chars().count() >= 3 && !is_stopword(w))
                .all(|w| self.terms.contains(&stem(w))),
            // A word in capitals ending in a capital S is another acronym, no plural: "HTTPS"
            // is not "HTTP" (a plural in capitals is written "CTEs"). The text's plural of the
            // asked word still names it.
            Subject::Keywords(words) => words.iter().filter(|w| !is_stopword(w)).all(|w| {
                self.capitals
                    .iter()
                    .any(|t| name_matches(w, t, false) && w.strip_suffix('s') != Some(t.as_str()))
            }),
        }
    }
}

/// Pure: one word and its plural are the same word ("transaction", "transactions").
fn same_word(a: &str, b: &str) -> bool {
    a == b || a.strip_suffix('s') == Some(b) || b.strip_suffix('s') == Some(a)
}

/// Pure: whether the token `t` of a text names `n`: the same word, `json.loads` for `loads`,
/// and `lru_cache` for `functools.lru_cache` when that last part is written as code (it has
/// `_`, inner capitals, or a call's `(` follows it).
fn name_matches(n: &str, t: &str, call: bool) -> bool {
    if same_word(t, n) || t.strip_suffix(n).is_some_and(|p| p.ends_with('.')) {
        return true;
    }
    // The last part of a dotted name, written alone.
    let last = n.rsplit('.').next().unwrap_or(n);
    last != n && last.len() > 2 && t == last && (call || last.contains('_'))
}

/// Pure: the subjects of `claim` (see [`subjects`]) that `evidence` does not name.
pub fn unnamed(claim: &str, evidence: &Named, asked: &str) -> Vec<String> {
    subjects(claim, asked)
        .into_iter()
        .filter(|s| !evidence.names(s))
        .map(|s| s.label())
        .collect()
}

/// Pure: the subjects `question` names ([`subject_terms`]: its identifiers, else its
/// capitalised names, and the words a product owns, less the products it is asked in) that
/// none of `texts` names. Passages that leave one out do not answer the question: a page
/// about another library's pool answers nothing about `create_engine()`'s `pool_size`.
pub fn unanswered(question: &str, texts: &[String]) -> Vec<String> {
    let named: Vec<Named> = texts.iter().map(|t| Named::new(t)).collect();
    let keywords = keywords(question);
    asked_subjects(question)
        .into_iter()
        .filter(|k| !(0..texts.len()).any(|i| names_asked(&texts[i], &named[i], k, &keywords)))
        .map(|k| {
            if keywords.contains(&k) {
                k.to_uppercase()
            } else {
                k
            }
        })
        .collect()
}

/// Pure: the words of a page's address (`https://www.postgresql.org/docs/15/functions-math.html`
/// gives "www postgresql org docs functions math html"), to be read with its text: the pages
/// of a product's docs name it in their address and seldom in their passages, and a question
/// comparing two products is answered from passages that never name either. Numbers are left
/// out: a version in a path (`/docs/15/`) is no number the page states.
pub fn address_words(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().any(char::is_alphabetic))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Pure: whether the page at `url` titled `title` is of `product`'s docs: its address or its
/// title names the product (`www.postgresql.org`, "Built-in Types — Python 3.11.2
/// documentation").
pub fn of_product(url: &str, title: &str, product: &str) -> bool {
    let words = format!("{} {title}", address_words(url)).to_lowercase();
    words
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| w == product)
}

/// Pure: which of `pages` (address, title) may answer `question` for the product it is asked
/// in. That product is the one it names ([`sole_product`]), or the one word of it naming the
/// docs of a page read ([`docs_products`]: "git" of "Which git subcommand ..."). When a page of
/// its docs was read, only its pages count; when none was, every page but those of another
/// product's docs. "How do I enable Python's built-in JIT compiler?" was answered with
/// PostgreSQL's JIT chapter, the one page naming JIT; a git question with Python's release
/// notes on Mercurial. A question of several products, or of none, keeps every page.
/// `also_read` are the addresses of the other pages fetched (judged off the task): their docs
/// tell the product too.
pub fn of_asked_product(question: &str, pages: &[(&str, &str)], also_read: &[&str]) -> Vec<bool> {
    let read: Vec<&str> = pages
        .iter()
        .map(|(url, _)| *url)
        .chain(also_read.iter().copied())
        .collect();
    let Some(product) = asked_product(question, &read) else {
        return vec![true; pages.len()];
    };
    let mask: Vec<bool> = pages
        .iter()
        .map(|(url, title)| of_product(url, title, &product))
        .collect();
    if mask.contains(&true) {
        return mask;
    }
    // No page of its docs read: a page of another product's docs answers nothing for it. Any
    // other page (a blog, a forum) may; "Postgres" is PostgreSQL, realpython.com is Python's.
    let related = |p: &String| p.contains(&product) || product.contains(p.as_str());
    pages
        .iter()
        .map(|(url, _)| !is_docs_page(url) || docs_products(url).iter().any(related))
        .collect()
}

/// Pure: the product `question` is asked of ([`of_asked_product`]), given the addresses of
/// the pages `read`; `None` for a question of several products or of none.
pub fn asked_product(question: &str, read: &[&str]) -> Option<String> {
    let words: BTreeSet<String> = question
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let read: BTreeSet<String> = read.iter().flat_map(|url| docs_products(url)).collect();
    let documented: Vec<&String> = read.iter().filter(|p| words.contains(*p)).collect();
    match (sole_product(question), documented.as_slice()) {
        // A question naming another product whose docs were read asks of it too, as a subject
        // ("git" of "... a Git repository's directory and PostgreSQL's PGDATA").
        (_, [_, _, ..]) => None,
        (Some(named), [one]) if named != **one && read.contains(&named) => None,
        (_, [one]) => Some((*one).clone()),
        (named, []) => named,
    }
}

/// Pure: whether the page at `url` is a product's documentation by its address: a `docs.`
/// host, a `doc`/`docs` path segment, or a docs tree (`/postgresql-doc-15/`).
fn is_docs_page(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    host.starts_with("docs.")
        || path
            .split('/')
            .any(|seg| seg.split(['-', '_']).any(|p| p == "doc" || p == "docs"))
}

/// Labels of an address that name no product.
const GENERIC_LABELS: [&str; 9] = ["www", "docs", "doc", "org", "com", "net", "io", "dev", "en"];

/// Pure: the products whose docs the page at `url` is of, by its address: the host's naming
/// label (`python` of `docs.python.org`, `git` of `git-scm.com`) and the letters a first
/// path segment naming a docs tree opens with (`postgresql` of `/postgresql-doc-15/`, `python`
/// of `/python3.11-doc/`). Words of the rest of the address (`jit` of `jit-reason.html`,
/// `questions` of `/questions/`) are the page's topic, not its product: a page of "another
/// product's docs" answers nothing for the asked one ([`of_asked_product`]).
pub fn docs_products(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let host = host.split(':').next().unwrap_or(host);
    let letters = |s: &str| -> String {
        s.chars()
            .take_while(char::is_ascii_alphabetic)
            .collect::<String>()
            .to_lowercase()
    };
    let mut out: Vec<String> = Vec::new();
    let label = host
        .split('.')
        .filter(|l| !GENERIC_LABELS.contains(&l.to_lowercase().as_str()))
        .map(letters)
        .rfind(|l| l.len() > 1);
    out.extend(label);
    let (segment, below) = path.split_once('/').unwrap_or((path, ""));
    let is_tree = !below.is_empty() && segment.split(['-', '_']).any(|p| p == "doc" || p == "docs");
    let first = letters(segment);
    if is_tree
        && first.len() > 1
        && !GENERIC_LABELS.contains(&first.as_str())
        && !out.contains(&first)
    {
        out.push(first);
    }
    out
}

/// Pure: what keeps `texts` from answering `question`, as a reader would name it: the
/// subjects none of them names ([`unanswered`]), else a word in capitals none writes so
/// ([`unnamed_keywords`]), else a name with a version after a slash none writes
/// ([`unwritten_versions`]), else an option asked of a command that only
/// other commands' passages name ([`option_of_another`]), else subjects written as one phrase
/// that no text names together ([`named_apart`]), else the attribute a "What is the X of Y"
/// question asks for, which none speaks of ([`unspoken_attributes`]), else a thing a phrase
/// names that no text holds ([`unheld_heads`]) or whose words no sentence holds together
/// ([`scattered_phrases`]), else a subject they name only in passing ([`named_in_passing`]),
/// else the verb asked about, when no sentence holds it with the thing it acts on
/// ([`unheld_predicates`]), else the part "the X of Y" asks of a thing, when no sentence holds
/// it with that thing ([`unheld_parts`]). Empty when they may answer it. The answerability
/// gate's test: it decides whether a model is shown the passages at all.
/// `heads` are the texts' titles and headings (what each is about), `texts` the whole of each,
/// heads included.
pub fn unanswerable(question: &str, heads: &[String], texts: &[String]) -> Vec<String> {
    let missing = unanswered(question, texts);
    if !missing.is_empty() {
        return missing;
    }
    let keywords = unnamed_keywords(question, texts);
    if !keywords.is_empty() {
        return keywords;
    }
    let versions = unwritten_versions(question, texts);
    if !versions.is_empty() {
        return versions;
    }
    let options = option_of_another(question, texts);
    if !options.is_empty() {
        return options;
    }
    let apart = named_apart(question, &asked_subjects(question), texts);
    if !apart.is_empty() {
        return apart;
    }
    let attributes = unspoken_attributes(question, texts);
    if !attributes.is_empty() {
        return attributes;
    }
    let unheld = unheld_heads(question, texts);
    if !unheld.is_empty() {
        return unheld;
    }
    let scattered = scattered_phrases(question, texts);
    if !scattered.is_empty() {
        return scattered;
    }
    let passing = named_in_passing(question, &asked_subjects(question), heads, texts);
    if !passing.is_empty() {
        return passing;
    }
    let predicates = unheld_predicates(question, texts);
    if !predicates.is_empty() {
        return predicates;
    }
    unheld_parts(question, texts)
}

/// Pure: a label of [`unanswerable`] as code: a bare name is wrapped, a phrase that marks its
/// own names or is quoted as asked is kept.
pub fn as_code(label: &str) -> String {
    // A phrase quoted as asked (`unspoken_attributes`) is kept.
    if label.starts_with('“') {
        return label.to_string();
    }
    // A phrase subject (`query-result-cache`, see `names_term`) reads as the words it is.
    let parts: Vec<&str> = label.split('-').collect();
    if parts.len() > 2
        && parts
            .iter()
            .all(|p| p.len() > 2 && p.chars().all(|c| c.is_ascii_lowercase()))
    {
        return format!("“{}”", parts.join(" "));
    }
    if label.contains('`') {
        label.to_string()
    } else {
        format!("`{label}`")
    }
}

/// Pure: the subjects of a question less the products it is asked in.
fn asked_subjects(question: &str) -> Vec<String> {
    let context = context_terms(question);
    subject_terms(question)
        .into_iter()
        .filter(|k| !is_context(k, &context))
        .collect()
}

/// Pure: whether a text names a subject term of a question.
fn names_term(text: &str, named: &Named, term: &str) -> bool {
    // An option is named only whole: `--autosquash-all` is not `--autosquash` and "all".
    if term.starts_with("--") {
        return names_option(text, term);
    }
    // `check=True` is two names, each looked for alone.
    let parts: Vec<String> = term
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    // A hyphenated term (`query-result-cache`, `built-in`) is one phrase: its words apart
    // are named by any planner passage.
    let s = match parts.as_slice() {
        // A method written bare (`sort()`) names `dict.sort` only where its owner is named
        // too: `list.sort`'s `sort()` answered what `dict.sort()`, which Python lacks, returns.
        [one] if one.contains('.') => {
            let (lower, dotted) = (text.to_lowercase(), one.to_lowercase());
            if !holds_word(&lower, &dotted) {
                let owner = dotted.rsplit('.').nth(1).unwrap_or_default();
                let owned = !owner.is_empty()
                    && (holds_word(&lower, owner) || holds_word(&lower, &format!("{owner}s")));
                return owned && named.names(&Subject::Name(one.clone()));
            }
            Subject::Name(one.clone())
        }
        [one] => Subject::Name(one.clone()),
        _ if term.contains('-') && !term.contains(' ') => Subject::Phrase(parts),
        _ => Subject::Words(parts),
    };
    named.names(&s)
}

/// Pure: the options the question asks of a command (`git stash --dry-run`) that no text
/// names together with that command, as "`--dry-run` for `git stash`". Passages on
/// `git pull --dry-run` answer nothing about `git stash`, which has no such option.
fn option_of_another(question: &str, texts: &[String]) -> Vec<String> {
    option_commands(question)
        .into_iter()
        .filter(|(option, command)| {
            !texts.iter().any(|t| {
                let words: BTreeSet<String> = t
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map(str::to_lowercase)
                    .collect();
                names_option(t, option)
                    && command.iter().all(|w| {
                        w.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .all(|p| p.is_empty() || words.contains(p))
                    })
            })
        })
        .map(|(option, command)| format!("`{option}` for `{}`", command.join(" ")))
        .collect()
}

/// Pure: the content words of `question` (stemmed, as [`terms`]) beside its `subjects`, the
/// product it is asked in and the words framing it ([`FRAME_WORDS`]): what it asks of its
/// subjects ("port", "listen", "default"; "fail", "conflict").
fn other_words(question: &str, subjects: &[String]) -> BTreeSet<String> {
    let mut own: BTreeSet<String> = terms(&subjects.join(" "));
    own.extend(terms(
        &context_terms(question)
            .into_iter()
            .collect::<Vec<_>>()
            .join(" "),
    ));
    own.extend(terms(&FRAME_WORDS.join(" ")));
    terms(question).difference(&own).cloned().collect()
}

/// Pure: what `question` asks of its subjects ([`other_words`], its subjects being
/// [`subject_terms`] less its product).
pub fn asked_of_subjects(question: &str) -> BTreeSet<String> {
    other_words(question, &asked_subjects(question))
}

/// Pure: the subjects named only in passing: no title or heading among `heads` names any
/// subject (no page or entry is about one), and every text that names the subject shares none
/// of the question's other words with it (a word's first five letters suffice). A release note saying a bug "has
/// only been seen to occur when the server connection runs through pgbouncer" names the subject
/// of "What port does PgBouncer listen on by default?" and says nothing of a port. A question
/// with no words beside its subjects and its frame asks nothing this can check.
fn named_in_passing(
    question: &str,
    subjects: &[String],
    heads: &[String],
    texts: &[String],
) -> Vec<String> {
    let prefix = |w: &str| w.chars().take(5).collect::<String>();
    let kind: BTreeSet<String> = terms(&answer_kind_phrase(question))
        .iter()
        .map(|w| prefix(w))
        .collect();
    let others: BTreeSet<String> = other_words(question, subjects)
        .iter()
        .map(|w| prefix(w))
        .filter(|w| !kind.contains(w))
        .collect();
    if others.is_empty() {
        return vec![];
    }
    let head_names: Vec<Named> = heads.iter().map(|h| Named::new(h)).collect();
    let headed = |k: &String| {
        heads
            .iter()
            .zip(&head_names)
            .any(|(h, n)| names_term(h, n, k))
    };
    // A passage about one of the subjects bears on the others it names: `functools.cache`'s
    // entry answers what it is "in terms of" `lru_cache`.
    if subjects.iter().any(headed) {
        return vec![];
    }
    let named: Vec<Named> = texts.iter().map(|t| Named::new(t)).collect();
    subjects
        .iter()
        .filter(|k| {
            !(0..texts.len()).any(|i| {
                names_term(&texts[i], &named[i], k)
                    && named[i].terms.iter().any(|t| others.contains(&prefix(t)))
            })
        })
        .map(|k| format!("`{k}` other than in passing"))
        .collect()
}
