//! What the question asks for, beyond its words: the names it asks about and whether it asks for
//! a default. BM25 sees `wal_level` and `default` as two terms among others; a reader knows the
//! answer sits in the `wal_level (enum)` entry, in the sentence that says "The default value is".
//! Measured on the eval set (issue 14): the `wal_compression` entry, whose page mentions WAL and
//! a default more often, outranked `wal_level`'s own, and the 0.5B model answered from it.

use super::Passage;

/// Score factor of a passage under the entry of a name the question asks about.
const NAMED_ENTRY_BOOST: f64 = 1.6;
/// Score factor of a passage that states a default, when the question asks for one.
const STATES_DEFAULT_BOOST: f64 = 1.3;

/// Score factor of a passage that is a version note ("Changed in version 3.8: Added `copy.copy()`
/// support to compression objects."), when the question does not ask what changed: such notes
/// name the asked-for API in passing, on pages about something else (issue 14: three of the six
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

/// Pure: whether `heading` is the entry of a name `query` asks about (`typing.Self` for "What
/// is typing.Self ...?", `wal_level (enum)` for "What is the default wal_level ...?").
pub fn is_asked_entry(heading: &str, query: &str) -> bool {
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
fn names_match(entry: &str, name: &str) -> bool {
    entry == name || entry.ends_with(&format!(".{name}")) || name.ends_with(&format!(".{entry}"))
}

/// Pure: whether `text` states a default: "default" followed closely by "is", "of" or "to", or
/// marked as one ("zero (the default)", "`DEFERRED` (default)", "Read Committed is the
/// default"). A bare "by default" is not: it qualifies behaviour ("By default, the pickle data
/// format uses ...") more often than it names a value.
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
        w.starts_with("default")
            && !(i > 0 && words[i - 1] == "by")
            && words
                .iter()
                .skip(i + 1)
                .take(DEFAULT_VERB_WITHIN)
                .any(|n| matches!(*n, "is" | "of" | "to"))
    })
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
const CLAIM_VERB_WITHIN: usize = 8;

/// Words that qualify a stated default rather than being it ("The default is *typically* 128
/// megabytes", "the default value *is* `replica`").
const DEFAULT_FILLERS: [&str; 14] = [
    "a",
    "an",
    "the",
    "typically",
    "usually",
    "normally",
    "currently",
    "set",
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
            let Some(mut j) = verb else { continue };
            // "the default maxsize of functools.lru_cache is 128": the value follows the "is".
            if words[j] == "of"
                && let Some(k) = (j + 1..words.len().min(j + 5)).find(|k| words[*k] == "is")
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
    !stated
        .iter()
        .any(|s| s == value || s.contains(value.as_str()) || value.contains(s.as_str()))
}

/// Pure: the factor each passage's score is multiplied by for `query`: more for a passage under
/// the entry of a name the question asks about, more for one stating a default when the
/// question asks for a default, less for a version note when the question does not ask what
/// changed; 1 otherwise.
pub fn focus(passages: &[Passage], query: &str) -> Vec<f64> {
    let names = asked_names(query);
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
                .any(|e| names.iter().any(|n| names_match(&e, n)));
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
mod tests {
    use super::*;
    use crate::research::passages::{PassageKind, rank, rank_focused};

    fn passage(heading: &[&str], text: &str) -> Passage {
        Passage {
            index: 0,
            heading_path: heading.iter().map(|h| h.to_string()).collect(),
            text: text.to_string(),
            kind: PassageKind::Prose,
        }
    }

    #[test]
    fn a_note_under_another_names_entry_weighs_a_quarter() {
        let q = "What is the difference between copy.copy() and copy.deepcopy()?";
        let ps = [
            passage(
                &["zlib", "Compress.copy()"],
                "Changed in version 3.8: Added `copy.copy()` support.",
            ),
            passage(
                &["copy", "copy.copy(x)"],
                "Changed in version 3.2: Added copy support.",
            ),
            passage(
                &["zlib"],
                "Changed in version 3.8: Added `copy.copy()` support.",
            ),
        ];
        let f = focus(&ps, q);
        assert_eq!(f[0], VERSION_NOTE_FACTOR * VERSION_NOTE_FACTOR);
        assert_eq!(f[1], NAMED_ENTRY_BOOST);
        assert_eq!(f[2], VERSION_NOTE_FACTOR);
    }

    #[test]
    fn asked_names_are_code_identifiers_only() {
        assert_eq!(
            asked_names("What is the default wal_level in PostgreSQL 15?"),
            ["wal_level"]
        );
        assert_eq!(
            asked_names("In Python 3.11, what is the default maxsize of functools.lru_cache?"),
            ["functools.lru_cache"]
        );
        assert_eq!(
            asked_names("In Python's subprocess.run(), what happens when the timeout expires?"),
            ["subprocess.run"]
        );
        assert_eq!(
            asked_names("What do `work_mem` and maintenance_work_mem default to, e.g. in 15.2?"),
            ["work_mem", "maintenance_work_mem"]
        );
        assert!(asked_names("How do I decode JSON with the json module in Python?").is_empty());
    }

    #[test]
    fn entry_names_come_from_signatures_settings_and_classes() {
        assert_eq!(entry_name("wal_level (enum)").as_deref(), Some("wal_level"));
        assert_eq!(
            entry_name("@functools.lru_cache(user_function)").as_deref(),
            Some("functools.lru_cache")
        );
        assert_eq!(
            entry_name("class asyncio.TaskGroup").as_deref(),
            Some("asyncio.taskgroup")
        );
        assert_eq!(
            entry_name("`json.loads(s, *, cls=None)`").as_deref(),
            Some("json.loads")
        );
        assert_eq!(entry_name("20.5.1. Settings"), None);
        assert_eq!(entry_name("Basic Usage"), None);
    }

    #[test]
    fn a_default_is_stated_by_its_value_not_by_a_bare_by_default() {
        assert!(states_default(
            "The default value is `replica`, which writes enough data"
        ));
        assert!(states_default("It defaults to 64 megabytes (`64MB`)."));
        assert!(states_default(
            "Currently the default protocol is 4, first introduced in Python 3.4"
        ));
        assert!(states_default(
            "A value of zero (the default) disables the timeout."
        ));
        assert!(states_default(
            "Read Committed is the default isolation level in PostgreSQL."
        ));
        assert!(!states_default(
            "By default, the pickle data format uses a relatively compact binary representation."
        ));
        assert!(!states_default(
            "Be careful not to set the default too high."
        ));
        // socket.create_connection's paragraph on errors outranked its timeout paragraph for
        // "what is the timeout's default" (issue 14).
        assert!(!states_default(
            "When a connection cannot be created, an exception is raised. By default, it is the exception from the last address in the list."
        ));
    }

    #[test]
    fn version_notes_weigh_less_unless_the_question_asks_what_changed() {
        let note = passage(
            &["zlib", "Compress.copy()"],
            "Changed in version 3.8: Added `copy.copy()` and `copy.deepcopy()` support to compression objects.",
        );
        let entry = passage(&["copy", "copy.copy(x)"], "Return a shallow copy of *x*.");
        let passages = vec![note, entry];
        assert_eq!(
            focus(
                &passages,
                "What is the difference between copy.copy() and copy.deepcopy()?"
            ),
            // Under another name's entry (`Compress.copy()`): a quarter.
            [VERSION_NOTE_FACTOR * VERSION_NOTE_FACTOR, NAMED_ENTRY_BOOST]
        );
        assert_eq!(
            focus(
                &passages,
                "Which version added copy.copy() support to zlib?"
            ),
            [1.0, NAMED_ENTRY_BOOST]
        );
        // Under the asked-for entry, or stating the asked-for default, a note is the answer.
        let changed_default = passage(
            &[
                "concurrent.futures",
                "class concurrent.futures.ThreadPoolExecutor(max_workers=None)",
            ],
            "Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4).",
        );
        let q = "What is the default max_workers of concurrent.futures.ThreadPoolExecutor?";
        assert_eq!(
            focus(&[changed_default], q),
            [NAMED_ENTRY_BOOST * STATES_DEFAULT_BOOST]
        );
        assert!(is_version_note("*New in version 3.11.*"));
        assert!(!is_version_note("Return a shallow copy of x."));
    }

    #[test]
    fn stated_defaults_are_read_from_their_sentence() {
        assert_eq!(
            default_values(
                "The default value is `replica`, which writes enough data.",
                3
            ),
            [["replica"]]
        );
        assert_eq!(
            default_values("It defaults to 64 megabytes (`64MB`). Since only one", 3),
            [["64", "megabytes", "64mb"]]
        );
        assert_eq!(
            default_values("leaving the maxsize at its default value of 128:", 3),
            [["128"]]
        );
        assert_eq!(
            default_values("A value of zero (the default) disables the timeout.", 3),
            [["zero"]]
        );
        assert_eq!(
            default_values("The default maxsize of functools.lru_cache is 128.", 6),
            [["128"]]
        );
        assert!(default_values("By default, the data format is compact.", 3).is_empty());
    }

    /// Sentences the 0.5B model wrote in the eval, each against the passage it cited.
    #[test]
    fn a_claimed_default_the_passage_states_otherwise_is_caught() {
        let wal_compression = "The supported methods are `pglz`, `lz4` and `zstd`. The value `on` \
            is a historical spelling of `pglz`. The default value is `off`.";
        assert!(contradicts_default(
            "The default wal_compression parameter is `lz4`.",
            wal_compression
        ));
        let wal_level = "`wal_level` determines how much information is written to the WAL. \
            The default value is `replica`, which writes enough data. `minimal` removes all \
            logging except the information required to recover from a crash.";
        assert!(contradicts_default(
            "The default wal_level in PostgreSQL 15 is `minimal`.",
            wal_level
        ));
        assert!(!contradicts_default(
            "The default wal_level in PostgreSQL 15 is `replica`.",
            wal_level
        ));
        let work_mem = "The default value is four megabytes (`4MB`). Note that a complex query";
        assert!(!contradicts_default(
            "The default value of work_mem is 4MB.",
            work_mem
        ));
        assert!(!contradicts_default("work_mem defaults to 4 MB.", work_mem));
        // No default claimed: not judged here.
        assert!(!contradicts_default(
            "wal_level determines how much information is written to the WAL.",
            wal_level
        ));
        // A default claimed from a passage that states none is not supported by it.
        assert!(contradicts_default(
            "The default logging level in Python's logging module is `INFO`.",
            "logging.info(msg, *args, **kwargs): Logs a message with level INFO on the root logger."
        ));
        assert!(!contradicts_default(
            "The default max_workers is min(32, os.cpu_count() + 4).",
            "Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4)."
        ));
    }

    /// The eval's wal_level question: the page's other settings mention WAL and defaults too,
    /// and plain BM25 put `wal_compression` first; the asked-for entry must come first.
    #[test]
    fn the_asked_for_entry_stating_its_default_ranks_first() {
        let heading = |e: &'static str| ["20.5. Write Ahead Log", "20.5.1. Settings", e];
        let passages = vec![
            passage(
                &heading("wal_compression (enum)"),
                "This parameter enables compression of WAL. The default value is `off`. \
                 Compression of WAL written when wal_level is replica saves WAL volume.",
            ),
            passage(
                &heading("wal_level (enum)"),
                "`wal_level` determines how much information is written to the WAL. The default \
                 value is `replica`, which writes enough data to support WAL archiving.",
            ),
            passage(
                &heading("wal_level (enum)"),
                "In releases prior to 9.6, this parameter also allowed the values `archive` and \
                 `hot_standby`.",
            ),
        ];
        let query = "What is the default wal_level in PostgreSQL 15?";
        let best = |scores: &[f64]| {
            (0..scores.len())
                .max_by(|a, b| scores[*a].total_cmp(&scores[*b]))
                .unwrap_or(0)
        };
        let focused = rank_focused(&passages, query);
        assert_eq!(best(&focused), 1, "{focused:?}");
        assert!(focused[2] > 0.0);
        // Without the focus the same passages tie or favour the other entry; the factors
        // are what decides, so this test fails if they are dropped.
        let plain = rank(&passages, query);
        assert!(
            plain[0] / plain[1] > focused[0] / focused[1],
            "{plain:?} {focused:?}"
        );
        assert_eq!(focus(&passages, query), [1.3, 1.6 * 1.3, 1.6]);
    }
}
