//! What the question asks for, beyond its words: the names it asks about and whether it asks for
//! a default. BM25 sees `wal_level` and `default` as two terms among others; a reader knows the
//! answer sits in the `wal_level (enum)` entry, in the sentence that says "The default value is".
//! Measured on the eval set: the `wal_compression` entry, whose page mentions WAL and
//! a default more often, outranked `wal_level`'s own, and the 0.5B model answered from it.

use super::Passage;

/// Score factor of a passage under the entry of a name the question asks about.
const NAMED_ENTRY_BOOST: f64 = 1.6;
/// Score factor of a passage that states a default, when the question asks for one.
const STATES_DEFAULT_BOOST: f64 = 1.3;

/// Score factor of a passage that is a version note ("Changed in version 3.8: Added `copy.copy()`
/// support to compression objects."), when the question does not ask what changed: such notes
/// name the asked-for API in passing, on pages about something else (three of the six
/// passages shown for "copy.copy() versus copy.deepcopy()" were zlib's and re's version notes).
const VERSION_NOTE_FACTOR: f64 = 0.5;

/// Score factor of a code block when the question does not ask how to do something: a sample
/// repeats the names it uses (`logging.info('Started')`, `logging.info('Finished')`), and BM25
/// counts every repeat. Three samples from the Logging HOWTO outranked its "The default level is
/// `WARNING`" for "What is the default logging level ...?".
const CODE_FACTOR: f64 = 0.5;

/// Words by which a question asks how to do something, so code samples answer it.
const ASKS_HOW: [&str; 7] = ["how", "example", "use ", "usage", "write", "code", "syntax"];

/// Words by which a question asks what changed, so version notes answer it.
const ASKS_CHANGE: [&str; 9] = [
    "new in",
    "what's new",
    "added",
    "changed",
    "introduced",
    "since",
    "deprecated",
    "removed",
    "release",
];

/// Words after "default" within which "is", "of" or "to" says what the default is ("The default
/// value is `replica`", "the default protocol is 4", "defaults to 64 megabytes").
const DEFAULT_VERB_WITHIN: usize = 3;

/// Pure: the names a question asks about: code identifiers with an underscore, a dot or call
/// parentheses (`wal_level`, `functools.lru_cache`, `subprocess.run()`), lower-cased and without
/// the parentheses. Versions (`3.11`) and abbreviations (`e.g.`) are not names.
pub fn asked_names(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in query.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'')) {
        let w = word.trim_end_matches(['?', ',', ';', ':', '!', '.']);
        let called = w.ends_with("()");
        let w = w
            .trim_end_matches("()")
            .trim_start_matches(['@', '('])
            .trim_end_matches(')');
        let shaped = w.contains('_') || w.contains('.') || called;
        let parts_ok = w.split('.').all(|p| {
            p.len() >= 2
                && p.chars().all(|c| c.is_alphanumeric() || c == '_')
                && p.chars().any(char::is_alphabetic)
        });
        let name = w.to_lowercase();
        if shaped && parts_ok && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Pure: the name an entry heading documents (`wal_level (enum)` → `wal_level`,
/// `@functools.lru_cache(user_function)` → `functools.lru_cache`, `class asyncio.TaskGroup` →
/// `asyncio.taskgroup`), lower-cased; `None` for a heading that is not an entry.
pub fn entry_name(heading: &str) -> Option<String> {
    let mut h = heading.trim().trim_matches('`').trim();
    for prefix in [
        "class ",
        "exception ",
        "async ",
        "coroutine ",
        "awaitable ",
        "abstractmethod ",
        "classmethod ",
        "staticmethod ",
        "property ",
        "@",
    ] {
        h = h.strip_prefix(prefix).unwrap_or(h).trim_start();
    }
    // A C function's entry starts with its return type ("int PyList_Sort(PyObject *list)",
    // "PyObject *PyList_New(Py_ssize_t len)"): the name is the word before the `(`.
    if let Some(open) = h.find('(')
        && let Some(space) = h[..open].rfind([' ', '*'])
        && h[..open].split_whitespace().count() > 1
        && h[..space].split_whitespace().all(|w| {
            w.trim_end_matches('*')
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_')
        })
    {
        h = &h[space + 1..];
    }
    let end = h.find([' ', '(']).unwrap_or(h.len());
    let name = &h[..end];
    let shaped = name.contains(['_', '.']) || h[end..].trim_start().starts_with('(');
    let word_like = name.len() >= 2
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    (shaped && word_like).then(|| name.to_lowercase())
}

/// Pure: the command-line options a question names (`--prune`, `-D`, `--no-verify`), as
/// written: a short option's case is its meaning (`git branch -d` deletes, `-D` forces).
pub fn asked_options(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in
        query.split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | '(' | ')'))
    {
        let w = word.trim_end_matches(['?', ',', ';', ':', '!', '.']);
        let w = w.split('=').next().unwrap_or(w);
        if is_option(w) && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// Words that name an option as such ("the `--dry-run` option of git stash").
const OPTION_NOUNS: [&str; 4] = ["option", "options", "flag", "switch"];

/// Pure: each long option a question names with the command it names it of: the plain
/// lower-case words right before it (`git stash --dry-run`) or after "option of"
/// ("the `--dry-run` option of git stash"), up to a stopword: two words, or one written as a
/// program's name. Options named without a command are left out. An option another command documents is no answer about
/// this one: asked about `git stash --dry-run`, the 0.5B model answered with `git pull`'s.
pub fn option_commands(query: &str) -> Vec<(String, Vec<String>)> {
    let words: Vec<&str> = query
        .split(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect();
    let plain = |w: &str| {
        let w = w.trim_end_matches('\'').trim_end_matches("'s");
        let ends = w.ends_with(['?', ',', ';', ':', '!', '.']);
        let w = w.trim_end_matches(['?', ',', ';', ':', '!', '.']);
        let ok = !w.is_empty()
            && w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_".contains(c))
            && !super::is_stop(w)
            && !OPTION_NOUNS.contains(&w);
        (ok.then(|| w.to_string()), ends)
    };
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let option = word.trim_end_matches(['?', ',', ';', ':', '!', '.']);
        let option = option.split('=').next().unwrap_or(option);
        if !option.starts_with("--") || !is_option(option) {
            continue;
        }
        let mut command: Vec<String> = Vec::new();
        for w in words[..i].iter().rev().take(2) {
            match plain(w) {
                (Some(w), false) if !is_option(&w) => command.insert(0, w),
                _ => break,
            }
        }
        if command.is_empty() {
            let rest = &words[i + 1..];
            let noun = rest.first().is_some_and(|w| OPTION_NOUNS.contains(w));
            if noun
                && rest
                    .get(1)
                    .is_some_and(|w| matches!(*w, "of" | "for" | "to" | "in"))
            {
                for w in rest[2..].iter().take(2) {
                    match plain(w) {
                        (Some(w), ends) => {
                            command.push(w);
                            if ends {
                                break;
                            }
                        }
                        _ => break,
                    }
                }
            }
        }
        // One plain word is as likely a verb ("pass `--force`") as a command; a program's
        // name alone counts when written as one (`pg_dump`, `pg_ctl`).
        let named = command.len() == 2
            || command
                .first()
                .is_some_and(|w| w.contains(|c: char| c == '_' || c.is_ascii_digit()));
        if named && !out.iter().any(|(o, _)| o == option) {
            out.push((option.to_lowercase(), command));
        }
    }
    out
}

/// Pure: whether `w` has an option's shape: `-D`, or `--` and a word (`--force-with-lease`).
pub fn is_option(w: &str) -> bool {
    match w.strip_prefix("--") {
        Some(long) => {
            long.len() >= 2
                && long.starts_with(|c: char| c.is_ascii_alphabetic())
                && long.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        }
        None => {
            let mut chars = w.chars();
            chars.next() == Some('-')
                && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.next().is_none()
        }
    }
}

/// Pure: the options an entry heading documents: each of its comma-separated terms cut before
/// its argument (`-c <new-branch>, --create <new-branch>` → `-c`, `--create`;
/// `--track[=(direct|inherit)]` → `--track`); `--[no-]keep-index` documents both
/// `--keep-index` and `--no-keep-index`.
pub fn entry_options(heading: &str) -> Vec<String> {
    let mut out = Vec::new();
    for term in heading.split(", ") {
        let term = term.trim().trim_matches('`');
        for form in [
            term.replacen("[no-]", "", 1),
            term.replacen("[no-]", "no-", 1),
        ] {
            let end = form.find([' ', '=', '[', '<']).unwrap_or(form.len());
            let option = &form[..end];
            if is_option(option) && !out.iter().any(|o| o == option) {
                out.push(option.to_string());
            }
        }
    }
    out
}

/// Pure: whether `heading` documents one of the options `query` names ([`asked_options`]).
fn documents_asked_option(heading: &str, options: &[String]) -> bool {
    !options.is_empty()
        && entry_options(heading)
            .iter()
            .any(|o| options.iter().any(|a| a == o))
}

/// Pure: the SQL phrases a question asks about: runs of two or more keywords in capitals
/// ("GENERATED ALWAYS AS IDENTITY", "GENERATED BY DEFAULT AS IDENTITY"), each as its words.
pub fn asked_phrases(query: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut run: Vec<String> = Vec::new();
    let mut flush = |run: &mut Vec<String>| {
        if run.len() >= 2 && !out.contains(run) {
            out.push(std::mem::take(run));
        }
        run.clear();
    };
    for word in query.split_whitespace() {
        let w = word.trim_matches(|c: char| !c.is_alphanumeric());
        let keyword = w.len() >= 2 && w.chars().all(|c| c.is_ascii_uppercase());
        if keyword {
            run.push(w.to_string());
        } else {
            flush(&mut run);
        }
        // A clause ends a phrase: "ALWAYS, BY DEFAULT" are two.
        if keyword && word.ends_with([',', ';', '?', '.', ':']) {
            flush(&mut run);
        }
    }
    flush(&mut run);
    out
}

/// Pure: whether `heading` documents one of `phrases` (see [`asked_phrases`]): its words in
/// capitals hold all of a phrase's ("GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY" documents
/// both "GENERATED ALWAYS AS IDENTITY" and "GENERATED BY DEFAULT AS IDENTITY").
fn documents_phrase(heading: &str, phrases: &[Vec<String>]) -> bool {
    let words: Vec<&str> = heading
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 2 && w.chars().all(|c| c.is_ascii_uppercase()))
        .collect();
    phrases
        .iter()
        .any(|p| p.iter().all(|w| words.contains(&w.as_str())))
}

/// Pure: whether `heading` is the entry of a name `query` asks about (`typing.Self` for "What
/// is typing.Self ...?", `wal_level (enum)` for "What is the default wal_level ...?"), of a
/// SQL phrase it asks about ([`asked_phrases`]), or of an option it names ([`asked_options`]).
pub fn is_asked_entry(heading: &str, query: &str) -> bool {
    if documents_phrase(heading, &asked_phrases(query))
        || documents_asked_option(heading, &asked_options(query))
    {
        return true;
    }
    let h = heading.trim().trim_matches('`').trim();
    let Some(entry) = entry_name(h).or_else(|| {
        // A data entry has no call shape: `typing.Self`, `sys.maxsize`.
        (h.contains('.') && !h.contains(' ')).then(|| h.to_lowercase())
    }) else {
        return false;
    };
    asked_names(query).iter().any(|n| names_match(&entry, n))
}

/// Pure: whether an entry named `entry` documents the asked-for `name` (either may be qualified
/// by its module: `lru_cache` asks about `functools.lru_cache`).
pub fn names_match(entry: &str, name: &str) -> bool {
    entry == name || entry.ends_with(&format!(".{name}")) || name.ends_with(&format!(".{entry}"))
}

/// Pure: whether `text` states a default: "default" followed closely by "is", "of" or "to", or
/// marked as one ("zero (the default)", "`DEFERRED` (default)", "Read Committed is the
/// default"). A bare "by default" is not: it qualifies behaviour ("By default, the pickle data
/// format uses ...") more often than it names a value. Nor is a name that begins with the
/// word (`default_tablespace`).
pub fn states_default(text: &str) -> bool {
    let t = text.to_lowercase();
    if ["(default)", "the default)", "is the default"]
        .iter()
        .any(|p| t.contains(p))
    {
        return true;
    }
    let words: Vec<&str> = t
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        // `default_tablespace is consulted` names a setting, not a default.
        w.starts_with("default")
            && !w.contains(['_', '.'])
            && !(i > 0 && words[i - 1] == "by")
            && (words
                .iter()
                .enumerate()
                .skip(i + 1)
                .take(DEFAULT_VERB_WITHIN)
                .any(|(j, n)| match *n {
                    "is" | "to" => true,
                    "of" => of_states_value(&words, j),
                    _ => false,
                })
                || words.get(i + 1).is_some_and(|n| is_value_word(n)))
    })
}

/// Words after "the default X of <thing>" within which its verb says what the default is.
const OF_THING_VERB_WITHIN: usize = 5;

/// Pure: whether the "of" at `words[at]`, after "default", says the value: "a default of 128",
/// "the default value of `replica`" (the word right after it is the value), or "the default
/// value of this parameter is 100" (a verb follows the thing). "This parameter controls the
/// default isolation level of each new transaction" names the default and states none, and it
/// was quoted as the answer while the passage's next sentence said "The default is “read
/// committed”" (tuning set, deep and quick mode).
fn of_states_value(words: &[&str], at: usize) -> bool {
    let Some(next) = words.get(at + 1) else {
        return false;
    };
    let after_default = at > 0 && words[at - 1].starts_with("default");
    after_default
        || is_value_word(next)
        || !next.chars().all(char::is_alphabetic)
        || words
            .iter()
            .skip(at + 2)
            .take(OF_THING_VERB_WITHIN)
            .any(|n| matches!(*n, "is" | "are" | "was"))
}

/// Number words a default may be written in ("Default five seconds.").
const NUMBER_WORDS: [&str; 13] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve",
];

/// Pure: whether a (lower-cased, trimmed) word is a value standing right after "default"
/// ("Default five seconds.", "default 128", "Default: `None`"): a number, a number word or
/// a literal.
fn is_value_word(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit())
        || NUMBER_WORDS.contains(&word)
        || matches!(word, "none" | "true" | "false" | "null" | "off")
}

/// Pure: a value word with a number word written as digits ("five" → "5"), so "5 seconds" and
/// "five seconds" state one default.
fn as_digits(word: &str) -> String {
    NUMBER_WORDS
        .iter()
        .position(|w| *w == word)
        .map_or_else(|| word.to_string(), |i| i.to_string())
}

/// Pure: whether `text` is a version note ("Changed in version 3.8: ...", "New in version 3.11.").
pub fn is_version_note(text: &str) -> bool {
    let t = text.trim_start().trim_start_matches(['*', '_']);
    [
        "Changed in version ",
        "New in version ",
        "Deprecated since version ",
        "Added in version ",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Words between "default" and its verb in a model's claim ("The default logging level in
/// Python's logging module is ...").
pub const CLAIM_VERB_WITHIN: usize = 8;

/// Words that qualify a stated default rather than being it ("The default is *typically* 128
/// megabytes", "the default value *is* `replica`").
const DEFAULT_FILLERS: [&str; 15] = [
    "a",
    "an",
    "the",
    "typically",
    "usually",
    "normally",
    "currently",
    "set",
    // "The default max_workers is set to the number of processors ...": the value follows.
    "to",
    "value",
    "its",
    "it",
    "be",
    "parameter",
    "setting",
];

/// Pure: the values `text` states as defaults, one list per statement, each of its first words
/// (lower-cased, up to the clause's end): "The default value is `replica`, which ..." →
/// `[["replica"]]`; "It defaults to 64 megabytes (`64MB`)." → `[["64", "megabytes", "64mb"]]`;
/// "A value of zero (the default) ..." → `[["zero"]]`. `within` is how many words may
/// stand between "default" and its verb (a model's sentence says "The default wal_level in
/// PostgreSQL 15 is ...").
pub fn default_values(text: &str, within: usize) -> Vec<Vec<String>> {
    let raw: Vec<&str> = text.split_whitespace().collect();
    let clean = |w: &str| {
        w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'))
            .to_lowercase()
    };
    let words: Vec<String> = raw.iter().map(|w| clean(w)).collect();
    let ends_clause = |i: usize| {
        raw[i]
            .trim_end_matches(['`', '*', ')', '"'])
            .ends_with(['.', ',', ';', ':'])
    };
    let value_after = |start: usize| -> Vec<String> {
        let mut out = Vec::new();
        for (i, w) in words.iter().enumerate().skip(start).take(6) {
            if !w.is_empty() && !DEFAULT_FILLERS.contains(&w.as_str()) {
                out.push(w.clone());
            }
            if ends_clause(i) {
                break;
            }
        }
        out
    };
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        if w == "default" && raw[i].ends_with(')') && i >= 2 {
            // "zero (the default)", "DEFERRED (default)": the value stands before it.
            let before = if words[i - 1] == "the" { i - 1 } else { i };
            let v: Vec<String> = words[before.saturating_sub(2)..before]
                .iter()
                .filter(|w| !w.is_empty() && *w != "of" && !DEFAULT_FILLERS.contains(&w.as_str()))
                .cloned()
                .collect();
            if !v.is_empty() {
                out.push(v);
            }
        } else if w.starts_with("default") && !(i > 0 && words[i - 1] == "by") {
            let verb = (i + 1..words.len().min(i + 1 + within))
                .find(|j| matches!(words[*j].as_str(), "is" | "of" | "to" | "are"));
            let Some(mut j) = verb else {
                // "Default five seconds.": the value follows the word itself.
                if words.get(i + 1).is_some_and(|n| is_value_word(n)) {
                    out.push(value_after(i + 1));
                }
                continue;
            };
            // "the default maxsize of functools.lru_cache is 128": the value follows the "is",
            // as far off as a claim's reach ("The default value of effective_cache_size in
            // PostgreSQL 15 is 4 gigabytes" read `effective_cache_size` as the value).
            let reach = within.max(4);
            if words[j] == "of"
                && let Some(k) = (j + 1..words.len().min(j + 1 + reach)).find(|k| words[*k] == "is")
            {
                j = k;
            }
            let v = value_after(j + 1);
            if !v.is_empty() {
                out.push(v);
            }
        }
    }
    out
}

/// Pure: whether `text` says what is done "by default" (which names no value: see
/// [`states_default`]).
pub fn says_by_default(text: &str) -> bool {
    text.to_lowercase().contains("by default")
}

/// Pure: whether a model's sentence states a default, read with a claim's reach ("The default
/// timeout for a SQLite connection is 5 seconds": its verb is further from "default" than a
/// page's).
pub fn claims_default(sentence: &str) -> bool {
    states_default(sentence) || !default_values(sentence, CLAIM_VERB_WITHIN).is_empty()
}

/// Pure: whether `claim` names a default that `passage` does not state: the claim's value (its
/// first word after "default ... is") is none of the passage's stated default values, or the
/// passage states no default at all. A small model reads "The default value is `off`" and writes
/// "The default wal_compression parameter is `lz4`" (a supported method the passage lists), or
/// reads "Logs a message with level INFO" and writes "The default logging level is INFO": every
/// word of such a sentence is the passage's, so only this check catches it. A claim naming no
/// default is not judged here.
pub fn contradicts_default(claim: &str, passage: &str) -> bool {
    let Some(claimed) = default_values(claim, CLAIM_VERB_WITHIN).into_iter().next() else {
        return false;
    };
    let Some(value) = claimed.first() else {
        return false;
    };
    // Read with the claim's own reach too: a claim copied from the passage ("the global default
    // timeout setting returned by getdefaulttimeout() is used") finds the same value there.
    let stated: Vec<String> = default_values(passage, DEFAULT_VERB_WITHIN)
        .into_iter()
        .chain(default_values(passage, CLAIM_VERB_WITHIN))
        .flatten()
        .collect();
    let value = as_digits(value);
    !stated
        .iter()
        .map(|s| as_digits(s))
        .any(|s| s == value || s.contains(value.as_str()) || value.contains(s.as_str()))
}

/// Pure: the factor each passage's score is multiplied by for `query`: more for a passage under
/// the entry of a name the question asks about, more for one stating a default when the
/// question asks for a default, less for a version note when the question does not ask what
/// changed; 1 otherwise.
pub fn focus(passages: &[Passage], query: &str) -> Vec<f64> {
    let names = asked_names(query);
    let phrases = asked_phrases(query);
    let options = asked_options(query);
    let lower = query.to_lowercase();
    let asks_default = lower.contains("default");
    let asks_change = ASKS_CHANGE.iter().any(|w| lower.contains(w));
    let asks_how = ASKS_HOW.iter().any(|w| lower.contains(w));
    passages
        .iter()
        .map(|p| {
            let mut f = 1.0;
            if p.kind == super::PassageKind::Code && !asks_how {
                f *= CODE_FACTOR;
            }
            let under_named_entry = p
                .heading_path
                .iter()
                .filter_map(|h| entry_name(h))
                .any(|e| names.iter().any(|n| names_match(&e, n)))
                || p.heading_path.iter().any(|h| documents_phrase(h, &phrases))
                || p.heading_path
                    .iter()
                    .any(|h| documents_asked_option(h, &options));
            if under_named_entry {
                f *= NAMED_ENTRY_BOOST;
            }
            if asks_default && states_default(&p.text) {
                f *= STATES_DEFAULT_BOOST;
            }
            // A note under the asked-for entry, or one stating the asked-for default, is the
            // answer more often than not: Python documents a changed default in one ("Changed
            // in version 3.8: Default value of max_workers is changed to ...").
            let note_answers = under_named_entry || (asks_default && states_default(&p.text));
            if !asks_change && !note_answers && is_version_note(&p.text) {
                f *= VERSION_NOTE_FACTOR;
                // Under the entry of another name, a note naming the asked-for one is about
                // that other name ("Compress.copy(): Added `copy.copy()` support"): it crowded
                // copy's own explanation out of the passages shown.
                let under_other_entry = !names.is_empty()
                    && p.heading_path.last().and_then(|h| entry_name(h)).is_some();
                if under_other_entry {
                    f *= VERSION_NOTE_FACTOR;
                }
            }
            f
        })
        .collect()
}

#[cfg(test)]
mod tests;
