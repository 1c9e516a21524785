//! What a question names: its keyword form, the names a page answering it must mention, and
//! which of them are only the product it is asked in.

use std::collections::BTreeSet;

use super::{
    context_terms, is_product_name, is_stop, modifies_as_product, possessive_owner, terms,
};

/// The keyword form of a question: its terms in order, each once, unstemmed words kept as
/// written (what a search engine should be given).
pub fn keyword_query(question: &str) -> String {
    let lower = question.to_lowercase();
    let mut seen = BTreeSet::new();
    let mut words = Vec::new();
    for token in lower.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        let token = token.trim_matches('.');
        if token.len() > 1 && !is_stop(token) && seen.insert(token.to_string()) {
            words.push(token.to_string());
        }
    }
    words.join(" ")
}

/// The words of a question that a page answering it must contain: identifiers
/// (`create_engine`, `functools.lru_cache`, `TaskGroup`, `--soft`) when it names any, otherwise the
/// names it capitalises (`PostgreSQL`, `Serializable`). Lower-cased; empty when it has neither.
pub fn key_terms(question: &str) -> Vec<String> {
    let words = question_words(question);
    let identifiers: Vec<String> = words
        .iter()
        .filter(|w| {
            // CamelCase (TaskGroup, SQLAlchemy), not an acronym's plural (CRDs, APIs).
            let inner_upper = w.chars().skip(1).any(|c| c.is_uppercase())
                && w.chars().filter(|c| c.is_lowercase()).count() >= 2;
            // A command-line option (`--autosquash`) names what it documents as much as
            // `work_mem` does: a question about one git does not have must not be answered
            // from the page of another.
            let option = w.starts_with("--") && super::focus::is_option(w);
            w.contains('_')
                || (w.contains('.') && w.chars().next().is_some_and(char::is_alphabetic))
                || inner_upper
                || option
        })
        .map(|w| w.to_lowercase())
        .collect();
    if !identifiers.is_empty() {
        return identifiers;
    }
    capitalised_names(&words)
}

/// The lower-cased words of a question, after its first, that start with a capital.
fn capitalised_names(words: &[&str]) -> Vec<String> {
    words
        .iter()
        .enumerate()
        .filter(|(i, w)| {
            *i > 0
                && w.chars().next().is_some_and(char::is_uppercase)
                && !is_stop(&w.to_lowercase())
        })
        .map(|(_, w)| w.to_lowercase())
        .collect()
}

/// The words of a question, possessives cut (`PostgreSQL's` → `PostgreSQL`).
fn question_words(question: &str) -> Vec<&str> {
    question
        .split(|c: char| c.is_whitespace() || "\"'`?!,;:()[]{}".contains(c))
        .map(|w| w.trim_end_matches(['.', '\'']).trim_end_matches("'s"))
        .filter(|w| w.len() > 1)
        .collect()
}

/// Pure: the key terms a page must name to bear on the question: [`key_terms`], and besides
/// them what the question asks of each product it names. `PostgreSQL` is CamelCase, so in "In
/// PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?" it was
/// the only key term, and `sql-truncate.html`, which never says "PostgreSQL", was judged off the
/// task; "Python's secrets module" made `secrets.html` answer for "Python". So the subject of an
/// owner or a modifier counts (`secrets` of "Python's secrets module", `timestamp` of "a
/// PostgreSQL timestamp"), and when the product was the only key term, so do the question's
/// other capitalised names (`TRUNCATE`, `VACUUM`, `DELETE`). A name joined by "and"/"or" to
/// a key term counts as one too ([`paired_names`]).
pub fn subject_terms(question: &str) -> Vec<String> {
    let context = context_terms(question);
    let mut keys = key_terms(question);
    let partners = paired_names(question, &keys);
    keys.extend(partners);
    let only_products = keys.iter().all(|k| is_context(k, &context));
    if !keys.is_empty() && only_products {
        keys.extend(
            capitalised_names(&question_words(question))
                .into_iter()
                .filter(|k| !is_context(k, &context)),
        );
    }
    keys.extend(owned_words(question, only_products));
    let mut seen = BTreeSet::new();
    keys.retain(|k| seen.insert(k.clone()));
    keys
}

/// Pure: the capitalised names `question` joins by "and" or "or" to one of its `keys` and
/// that are not keys themselves: in "How does integer division differ between Python and
/// PostgreSQL?" `PostgreSQL` is a key by its inner capital and `Python` is its partner. Two
/// names joined so play one part; holding only one of them to the question dropped every page
/// of the other's docs as off the task.
fn paired_names(question: &str, keys: &[String]) -> Vec<String> {
    let words = question_words(question);
    let is_key = |w: &str| keys.iter().any(|k| w.eq_ignore_ascii_case(k));
    let mut out: Vec<String> = Vec::new();
    for w in words.windows(3) {
        if !matches!(w[1], "and" | "or") {
            continue;
        }
        for (key, other) in [(w[0], w[2]), (w[2], w[0])] {
            let lower = other.to_lowercase();
            if is_key(key) && !is_key(other) && is_product_name(other) && !out.contains(&lower) {
                out.push(lower);
            }
        }
    }
    out
}

/// Pure: the products `query` asks of when it names more than one (`python` and `postgresql`
/// of "Python's json.loads() and PostgreSQL's jsonb type", of "a Python datetime object and a
/// PostgreSQL timestamp", of "differ between Python and PostgreSQL"), lower-cased, each once:
/// the product names (not all capitals) among its [`context_terms`]. Empty with one or none.
/// Such a question is answered from each one's docs.
pub fn products_asked(query: &str) -> Vec<String> {
    let mut out = product_names(query);
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// Pure: the one product `query` is asked in ("Python" of "How do I enable Python's
/// built-in JIT compiler?"), lower-cased; `None` when it names none or several.
pub fn sole_product(query: &str) -> Option<String> {
    match product_names(query).as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Pure: the product names (not all capitals) among `query`'s [`context_terms`], lower-cased,
/// each once.
fn product_names(query: &str) -> Vec<String> {
    let context = context_terms(query);
    let mut out: Vec<String> = Vec::new();
    for w in question_words(query) {
        let w = w.strip_suffix("’s").unwrap_or(w);
        let lower = w.to_lowercase();
        if is_product_name(w)
            && w.chars().any(char::is_lowercase)
            && is_context(&lower, &context)
            && !out.contains(&lower)
        {
            out.push(lower);
        }
    }
    out
}

/// Pure: whether `text` speaks to `part` of a question asking of `products`
/// ([`products_asked`]): it holds the part's terms, the products' names aside, all but one in
/// four (of "many", "columns" and "table", all three: with one in three missing, "table" and
/// "column" together were enough).
pub fn speaks_to(part: &str, products: &[String], text: &str) -> bool {
    let asked = part_terms(part, products);
    let missing = asked.len() - held_terms(&asked, text);
    missing <= asked.len() / 4
}

/// Pure: how many of the terms of `part` (the products' names aside) `text` holds: what a
/// product's search ranks its results by. For "how many columns can a PostgreSQL table have
/// at most" the first result of PostgreSQL's docs was its error codes appendix; the fourth,
/// "There is a limit on how many columns a table can contain", holds them all.
pub fn held_part_terms(part: &str, products: &[String], text: &str) -> usize {
    held_terms(&part_terms(part, products), text)
}

/// Pure: the terms of `part`, less the products' names as the part spells them ("PostgreSQL"
/// gives `postgr` and `sql` as well).
fn part_terms(part: &str, products: &[String]) -> BTreeSet<String> {
    let spelled: Vec<&str> = part
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| products.contains(&w.to_lowercase()))
        .collect();
    let names = terms(&spelled.join(" "));
    terms(part)
        .into_iter()
        .filter(|t| !names.contains(t))
        .collect()
}

/// Pure: how many of `asked` the terms of `text` hold.
fn held_terms(asked: &BTreeSet<String>, text: &str) -> usize {
    let held: BTreeSet<String> = terms(text).into_iter().collect();
    asked.iter().filter(|t| held.contains(*t)).count()
}

/// Pure: whether a key term is one of the question's [`context_terms`] (the product it is
/// asked in), not its subject.
pub fn is_context(key: &str, context: &BTreeSet<String>) -> bool {
    let t = terms(key);
    !t.is_empty() && t.iter().all(|t| context.contains(t))
}

/// Pure: the word a product owns or modifies in a question (`secrets` in "Python's secrets
/// module", `jsonb` in "PostgreSQL's jsonb type", `datetime` in "a Python datetime object").
/// A modified word counts only when the question `names_no_other` subject: in "the default
/// terminationGracePeriodSeconds of a Kubernetes pod" the pod is not what is asked about, and
/// "pod" let a C++ page ("plain old data structures (POD)") stand as an answer.
fn owned_words(question: &str, names_no_other: bool) -> Vec<String> {
    let raw: Vec<&str> = question.split_whitespace().collect();
    let clean = |w: &str| {
        w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
            .trim_end_matches('.')
            .trim_end_matches("()")
            .to_lowercase()
    };
    let mut out = Vec::new();
    for (i, w) in raw.iter().enumerate() {
        let Some(next) = raw.get(i + 1) else { break };
        let possessive = possessive_owner(w).is_some();
        let modifier = i > 0 && modifies_as_product(raw[i - 1], w);
        let word = clean(next);
        if (possessive || (modifier && names_no_other))
            && next.chars().next().is_some_and(char::is_lowercase)
            && word.len() > 1
            && !is_stop(&word)
        {
            // An adjective owned ("PostgreSQL's automatic sharding", "built-in") modifies the
            // noun after it, and that noun is what is asked about: "automatic" alone let the
            // autovacuum settings' "Automatic Vacuuming" answer a question on sharding, which
            // the docs never name.
            if is_adjective(&word) || word.contains('-') {
                let noun = noun_after(&raw[(i + 2).min(raw.len())..]);
                if noun.len() > 2 {
                    out.push(noun);
                }
            }
            out.push(word);
        }
    }
    out
}

/// Most words of the noun an owned adjective modifies.
const MAX_NOUN_WORDS: usize = 3;

/// Pure: the noun `words` open with, lower-cased: its first word, or, when a run of at most
/// [`MAX_NOUN_WORDS`] lower-case words ends the clause ("... query result cache?"), the run
/// joined by `-`, looked for as one phrase. A kind of thing ("function", "module") ends it. A
/// run the clause goes on after may hold a verb ("automatic sharding create ..."): its first
/// word alone. "PostgreSQL's built-in query result cache" asks of `query-result-cache`:
/// `query` alone was named by every planner passage, and the `enable_memoize` entry
/// ("caching results") stood as the answer.
fn noun_after(words: &[&str]) -> String {
    let mut noun: Vec<String> = Vec::new();
    let mut ends_clause = false;
    for w in words.iter().take(MAX_NOUN_WORDS) {
        let word: String = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase();
        if !w.starts_with(|c: char| c.is_lowercase())
            || is_stop(&word)
            || super::is_category_noun(&word)
            || !word.chars().all(|c| c.is_alphanumeric())
        {
            break;
        }
        noun.push(word);
        if w.ends_with(|c: char| !c.is_alphanumeric()) {
            ends_clause = true;
            break;
        }
    }
    if !ends_clause {
        noun.truncate(1);
    }
    noun.join("-")
}

/// Pure: whether a plain word reads as an adjective by its ending ("automatic", "logical",
/// "recursive", "continuous", "readable"); code names and short words do not.
fn is_adjective(word: &str) -> bool {
    word.len() > 4
        && word.chars().all(|c| c.is_ascii_lowercase())
        && ["ic", "al", "ive", "ous", "ful", "able", "ible", "ary"]
            .iter()
            .any(|end| word.ends_with(end))
}

/// True when `text` names at least one of the question's key terms (see [`subject_terms`]); a
/// dotted name also counts by its last part (`lru_cache` for `functools.lru_cache`). A page
/// that names none of them does not answer the question, however many common words it shares.
pub fn mentions_key_terms(text: &str, question: &str) -> bool {
    let keys = subject_terms(question);
    if keys.is_empty() {
        return true;
    }
    let lower = text.to_lowercase();
    let has_word = |needle: &str| holds_word(&lower, needle);
    keys.iter().any(|k| {
        let singular = k.strip_suffix('s').filter(|s| s.len() > 2);
        has_word(k)
            || singular.is_some_and(has_word)
            || (k.contains('-') && has_word(&k.replace('-', " ")))
            || k.rsplit('.')
                .next()
                .is_some_and(|last| last != k && last.len() > 2 && has_word(last))
    })
}

/// Pure: whether `text` holds `word` whole: not inside a longer word or identifier (`_` joins).
/// Both are compared as given; callers lower-case them.
pub fn holds_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        boundary(before) && boundary(after)
    })
}
