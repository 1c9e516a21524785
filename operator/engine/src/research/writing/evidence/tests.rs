use super::*;

#[test]
fn a_claim_negating_what_its_passage_affirms_or_never_says_is_unsupported() {
    let passage = "Connect to a TCP service. If supplied, timeout sets the timeout on the \
        socket instance before attempting to connect. If no timeout is supplied, the global \
        default timeout setting returned by getdefaulttimeout() is used.";
    // The 0.5B model's sentence.
    assert!(negation_unsupported(
        "The timeout parameter does not set the timeout on the socket instance before attempting to connect.",
        passage
    ));
    assert!(negation_unsupported(
        "The timeout parameter doesn't set the timeout on the socket.",
        passage
    ));
    // The passage's own negation supports the claim's.
    assert!(!negation_unsupported(
        "If no timeout is supplied, the global default timeout is used.",
        passage
    ));
    // No negation, or a negated word the passage does not hold: not judged here.
    assert!(!negation_unsupported(
        "The timeout parameter sets the timeout on the socket instance.",
        passage
    ));
    // A truncated signature's "Non…" (of `None`) is no negation (the demo's passage).
    assert!(negation_unsupported(
        "The timeout parameter does not set the timeout on the socket instance.",
        "socket.create_connection(address, timeout=GLOBAL_DEFAULT, source_address=Non…): \
         Passing the optional *timeout* parameter will set the timeout on the socket instance."
    ));
    // A "not" about something the passage never says is not backed either.
    assert!(negation_unsupported("It does not retry.", passage));
    assert_eq!(root("sets"), "set");
    assert_eq!(root("setting"), "set");
    assert_eq!(root("blocking"), "block");
    assert_eq!(root("uses"), "use");
    // A restriction in the passage ("non-blocking", "unless") may back a "not".
    assert!(!negation_unsupported(
        "The socket does not block.",
        "The socket is put in non-blocking mode."
    ));
    assert!(!negation_unsupported(
        "The call does not always wait.",
        "The call waits unless a timeout was given."
    ));
}

#[test]
fn a_version_the_question_names_is_restated_not_claimed() {
    let asked =
        "What is the default value of max_connections in PostgreSQL 15, and in Python 3.11?";
    assert_eq!(
        restated_versions(
            "The default value of max_connections in PostgreSQL 15 is typically 100 connections.",
            asked
        ),
        ["15"]
    );
    assert_eq!(
        restated_versions("Since Python 3.11 it is 4.", asked),
        ["3.11"]
    );
    // Another product's or another version's number is a claim.
    assert!(restated_versions("PostgreSQL 14 allowed 100.", asked).is_empty());
    assert!(restated_versions("It uses 15 connections.", asked).is_empty());
    assert!(restated_versions("In PostgreSQL 15 it is 100.", "").is_empty());
    // The run's claim check exempts them too. (The question asks of two products, so the page
    // must be of PostgreSQL's docs: its address says so.)
    let mut base = EvidenceBase::default();
    let url = "https://www.postgresql.org/docs/15/runtime-config-connection.html";
    base.add_page(
        url,
        "Connections",
        "max_connections: the default is typically 100 connections.",
    );
    let md =
        format!("The default of max_connections in PostgreSQL 15 is 100 connections ([c]({url})).");
    let md = md.as_str();
    assert!(check_claims(md, &base, asked)[0].supported);
    assert_eq!(check_claims(md, &base, "")[0].missing_numbers, ["15"]);
    // A text on another version backs no claim about the asked-for one.
    assert!(speaks_of_other_version(
        "Changed in version 3.5: If max_workers is None or not given, it will default to the number of processors on the machine, multiplied by 5.",
        "3.11"
    ));
    assert!(!speaks_of_other_version("New in version 3.11.", "3.11"));
    assert!(!speaks_of_other_version(
        "The default is typically 100 connections.",
        "15"
    ));
}

#[test]
fn a_number_the_evidence_spells_out_is_supported() {
    let evidence = "The default value is three connections.";
    assert!(
        support("The default is 3 connections.", evidence)
            .1
            .is_empty()
    );
    assert_eq!(support("The default is 4 connections.", evidence).1, ["4"]);
    // A word inside another word is not the number.
    assert_eq!(support("It uses 1 slot.", "Someone reserved it.").1, ["1"]);
}

fn base() -> EvidenceBase {
    let mut b = EvidenceBase::default();
    b.add_page(
        "http://h/json.html",
        "json — JSON encoder and decoder",
        "json.loads(s) deserializes s (a str, bytes or bytearray instance containing a JSON document) to a Python object. Added in version 3.6.",
    );
    b.add_seen(
        "http://h/pickle.html",
        "pickle — Python object serialization",
        "The pickle module implements binary protocols for serializing a Python object structure.",
    );
    b
}

#[test]
fn stemming_and_stopwords() {
    let t = terms("The objects are parsed by json.loads, which parses strings");
    assert!(
        t.contains("object") && t.contains("pars") && t.contains("json"),
        "{t:?}"
    );
    assert!(t.contains("load") && t.contains("string"), "{t:?}");
    assert!(!t.contains("the") && !t.contains("are") && !t.contains("which"));
}

#[test]
fn links_resolve_to_fetched_pages_and_seen_results_only() {
    let g = gate_links(
        "A [json](http://h/json.html#loads) B [pickle](http://h/pickle.html/) C [x](http://made.up/x) http://bare.example/y.",
        &base(),
    );
    assert_eq!(
        g.markdown,
        "A [json](http://h/json.html#loads) B [pickle](http://h/pickle.html/) C x ."
    );
    assert_eq!(g.cited, vec!["http://h/json.html", "http://h/pickle.html"]);
    assert_eq!(
        g.unverified,
        vec!["http://made.up/x", "http://bare.example/y"]
    );
}

/// Tuning set, deep mode (`multi-py311-tomllib`): a refused task's closest pages, merged into
/// the report under its section, were listed under "Sources" among the cited pages.
#[test]
fn a_list_of_pages_read_cites_none_of_them() {
    let md = "## Can it write TOML?\n\nIt cannot ([json](http://h/json.html)).\n\n### Closest pages read\n- pickle — http://h/pickle.html\n\n### Also read\n- json — http://h/json.html\n- x — http://made.up/x\n\n## When?\n\nSee http://h/pickle.html.\n";
    let g = gate_links(md, &base());
    assert!(
        g.markdown.contains("- pickle — http://h/pickle.html\n"),
        "{}",
        g.markdown
    );
    // Still gated: a page never seen is dropped from a list too.
    assert!(!g.markdown.contains("made.up"), "{}", g.markdown);
    assert_eq!(g.unverified, vec!["http://made.up/x"]);
    // Cited: the prose link, and the bare URL of the section after the lists.
    assert_eq!(g.cited, vec!["http://h/json.html", "http://h/pickle.html"]);
    let only_lists = "### Closest pages read\n- pickle — http://h/pickle.html\n";
    assert!(gate_links(only_lists, &base()).cited.is_empty());
}

/// Tuning set, deep mode (`multi-py311-tomllib`): "(Tom’s Obvious Minimal Language, )" after
/// the unread `https://toml.io` was dropped from it.
#[test]
fn a_dropped_url_leaves_no_empty_brackets() {
    let g = gate_links(
        "It parses TOML (Tom’s Obvious Minimal Language, https://toml.io). See also (http://made.up/x) and `f()` ([json](http://h/json.html)).",
        &base(),
    );
    assert_eq!(
        g.markdown,
        "It parses TOML (Tom’s Obvious Minimal Language). See also and `f()` ([json](http://h/json.html))."
    );
}

#[test]
fn urls_in_quoted_code_are_code_not_citations() {
    let md = "Use a cache ([json](http://h/json.html)).\n\n> ```\n> resource = 'https://peps.python.org/pep-%04d' % num\n> ```\n\n> Call `urlopen('http://made.up/x')` or read [`json.loads`](http://h/json.html) and [y](http://made.up/y).\n";
    let g = gate_links(md, &base());
    assert!(
        g.markdown
            .contains("'https://peps.python.org/pep-%04d' % num"),
        "{}",
        g.markdown
    );
    assert!(
        g.markdown.contains("`urlopen('http://made.up/x')`"),
        "{}",
        g.markdown
    );
    // A link whose text is code is still a citation; a prose link is still gated.
    assert!(
        g.markdown.contains("[`json.loads`](http://h/json.html)"),
        "{}",
        g.markdown
    );
    assert!(g.markdown.contains(" and y."), "{}", g.markdown);
    assert_eq!(g.cited, vec!["http://h/json.html"]);
    assert_eq!(g.unverified, vec!["http://made.up/y"]);
}

#[test]
fn claims_are_checked_against_the_cited_text() {
    let md = "## Key findings\n- `json.loads` deserializes a str into a Python object ([json](http://h/json.html)).\n- It is the fastest parser on earth and was added in version 2.1 ([json](http://h/json.html)).\n- See [json](http://h/json.html).\n- Pickle serializes Python object structures in binary protocols ([pickle](http://h/pickle.html)).";
    let checks = check_claims(md, &base(), "");
    let verdicts: Vec<(bool, &str)> = checks
        .iter()
        .map(|c| (c.supported, c.url.as_str()))
        .collect();
    assert_eq!(
        verdicts,
        vec![
            (true, "http://h/json.html"),
            (false, "http://h/json.html"),
            (true, "http://h/pickle.html"),
        ],
        "{checks:#?}"
    );
    assert_eq!(checks[1].missing_numbers, vec!["2.1"]);
    assert!(
        checks[0].claim.starts_with("`json.loads` deserializes"),
        "{}",
        checks[0].claim
    );
    assert!(!checks[0].claim.contains("http"));
}

#[test]
fn a_trailing_citation_on_its_own_belongs_to_the_sentence_before() {
    let s =
        sentences("JSON text is decoded by json.loads into objects. ([json](http://h/json.html))");
    assert_eq!(s.len(), 1, "{s:?}");
    let s = sentences("First claim here. Second claim (see [a](http://h/a.b)) ends. Third.");
    assert_eq!(s.len(), 3, "{s:?}");
}

#[test]
fn a_numbers_mismatch_is_unsupported_even_with_word_overlap() {
    let (overlap, missing) = support(
        "JSON documents added in version 3.9 to a Python object",
        "Added in version 3.6. JSON documents become a Python object.",
    );
    assert!(overlap > 0.8);
    assert_eq!(missing, vec!["3.9"]);
}

#[test]
fn a_sentence_made_only_of_the_questions_words_is_no_answer() {
    let asked = "Does PostgreSQL's CLUSTER command keep the table ordered when new rows are inserted later?";
    let passage = "When a table is clustered, it is physically reordered based on the index information. Clustering is a one-time operation: when the table is subsequently updated, the changes are not clustered. That is, no attempt is made to store new or updated rows according to their index order. The CLUSTER command keeps nothing ordered later.";
    let restated =
        "PostgreSQL's CLUSTER command keeps the table ordered when new rows are inserted later.";
    assert!(!check_support(restated, passage, asked).supported);
    // The same words with the passage's answer are a claim.
    let answer = "Clustering is a one-time operation: changes made when the table is later updated are not clustered.";
    assert!(check_support(answer, passage, asked).supported);
    // Without the question, nothing is a restatement (on a page that names the product).
    let page = format!("PostgreSQL 15 Documentation: CLUSTER\n{passage}");
    assert!(check_support(restated, &page, "").supported);
}

/// PostgreSQL 15's `commit_delay` entry, as the run stores it (breadcrumb and description).
const COMMIT_DELAY: &str = "§ 20.5. Write Ahead Log › 20.5.1. Settings › commit_delay (integer)\n\
    Setting commit_delay adds a time delay before a WAL flush is initiated. This can improve \
    group commit throughput by allowing a larger number of transactions to commit via a single \
    WAL flush. If this value is specified without units, it is taken as microseconds. The \
    default commit_delay is zero (no delay).";

#[test]
fn a_claim_whose_subject_its_passage_never_names_is_unsupported() {
    let asked = "What is the default value of wal_writer_flush_after in PostgreSQL 15?";
    // Every word but the setting's name is on the passage, and the shared-word floor passes it.
    let invented =
        "The default value of wal_writer_flush_after is 1 and it is specified in microseconds.";
    let (overlap, _) = support(invented, COMMIT_DELAY);
    assert!(overlap >= SUPPORT_THRESHOLD, "{overlap}");
    let verdict = check_support(invented, COMMIT_DELAY, asked);
    assert!(!verdict.supported, "{verdict:?}");
    assert_eq!(verdict.missing_subjects, ["wal_writer_flush_after"]);
    // The same sentence about the setting the passage documents is supported: the name is in
    // its heading, the unit in its text (a number it lacks would still sink it).
    let asked = "What is the default value of commit_delay in PostgreSQL 15?";
    let right =
        "If the commit_delay value is specified without units, it is taken as microseconds.";
    assert!(check_support(right, COMMIT_DELAY, asked).supported);
    assert!(
        !check_support(
            "The default commit_delay is 10 microseconds.",
            COMMIT_DELAY,
            asked
        )
        .supported
    );
}

#[test]
fn a_subject_the_claim_shares_with_the_question_is_checked_too() {
    // Streaming replication's paragraph, cited for a sentence about logical replication.
    let passage = "§ 27.2. Log-Shipping Standby Servers › 27.2.8. Synchronous Replication\n\
        By default, streaming replication is asynchronous: the primary does not wait for the \
        standby to confirm that a transaction's WAL has been written before the commit returns.";
    let asked = "Is logical replication asynchronous by default in PostgreSQL?";
    let claim = "Logical replication is asynchronous by default: the primary does not wait for the standby.";
    let verdict = check_support(claim, passage, asked);
    assert!(!verdict.supported, "{verdict:?}");
    assert_eq!(verdict.missing_subjects, ["logical replication"]);
    let asked = "Is streaming replication asynchronous by default in PostgreSQL?";
    let claim = "Streaming replication is asynchronous by default: the primary does not wait for the standby.";
    assert!(check_support(claim, passage, asked).supported);
    // "default value of" is what the question asks of its subject, not a subject.
    let asked = "What is the default value of commit_delay in PostgreSQL 15?";
    let claim = "The default value of commit_delay is zero, so there is no delay.";
    let verdict = check_support(claim, COMMIT_DELAY, asked);
    assert!(verdict.supported, "{verdict:?}");
}

#[test]
fn the_subjects_of_a_claim_are_its_names_quoted_and_capitalised_terms() {
    use subject::{Subject, subjects};
    let asked =
        "How does CREATE INDEX CONCURRENTLY differ from a standard CREATE INDEX in PostgreSQL 15?";
    let found = subjects(
        "In PostgreSQL 15, `CREATE INDEX CONCURRENTLY` builds the index without the \"exclusive lock\" that json.loads() and TaskGroup never take; Repeatable Read is not involved.",
        asked,
    );
    let labels: Vec<String> = found.iter().map(Subject::label).collect();
    // The product the question is asked in is context; a sentence's capitalised first word is
    // grammar ("In").
    assert_eq!(
        labels,
        [
            "create",
            "index",
            "concurrently",
            "exclusive lock",
            "json.loads",
            "taskgroup",
            "repeatable read"
        ],
        "{found:?}"
    );
    // An all-capitals first word names something.
    let labels: Vec<String> = subjects("NULL values are not equal.", "")
        .iter()
        .map(Subject::label)
        .collect();
    assert_eq!(labels, ["null"]);
}

/// Tuning set (`multi-py311-taskgroup-whatsnew`): a quote holding code is a quoted statement;
/// its code names are subjects, the words between them are not a phrase to find.
#[test]
fn a_quote_holding_code_is_no_phrase() {
    use subject::{Subject, subjects};
    let asked = "What does TaskGroup add in Python 3.11?";
    let claim = "“Added `cancelling` and `uncancel` methods to `Task`”.";
    let labels: Vec<String> = subjects(claim, asked).iter().map(Subject::label).collect();
    assert!(
        !labels.iter().any(|l| l.contains("methods to")),
        "{labels:?}"
    );
    assert!(labels.contains(&"uncancel".to_string()), "{labels:?}");
    let page = "asyncio: Added cancelling() and uncancel() methods to Task.";
    let verdict = check_support(claim, page, asked);
    assert!(verdict.supported, "{verdict:?}");
    // A quoted term without code stays a phrase to find.
    let labels: Vec<String> = subjects("It takes the “exclusive lock”.", asked)
        .iter()
        .map(Subject::label)
        .collect();
    assert_eq!(labels, ["exclusive lock"]);
}

/// Tuning set (`pg-max-connections-default`): a page stored as Markdown escapes the
/// underscores of a setting's name in its entry heading; the claim naming it is supported.
#[test]
fn a_name_is_found_through_markdown_escapes() {
    let page = "§ Lock Management\n**max\\_pred\\_locks\\_per\\_relation (integer)**\n\nThe default is -2, which keeps the behavior from previous versions of PostgreSQL.";
    let claim = "The default value of max_pred_locks_per_relation is -2, which keeps the behavior from previous versions of PostgreSQL.";
    let verdict = check_support(claim, page, "What is the default value of max_connections?");
    assert!(verdict.supported, "{verdict:?}");
    assert!(verdict.missing_subjects.is_empty(), "{verdict:?}");
}

#[test]
fn a_name_is_found_as_written_or_by_its_code_form() {
    use subject::{Named, Subject};
    let page = Named::new(
        "§ functools › @functools.lru_cache(user_function)\nIf maxsize is set to None, the LRU \
         feature is disabled. Use json.loads() or call cache_info().",
    );
    assert!(page.names(&Subject::Name("functools.lru_cache".into())));
    assert!(page.names(&Subject::Name("lru_cache".into())));
    assert!(page.names(&Subject::Name("loads".into())));
    assert!(page.names(&Subject::Name("functools.cache_info".into())));
    assert!(page.names(&Subject::Name("maxsize".into())));
    assert!(!page.names(&Subject::Name("functools.cache".into())));
    assert!(!page.names(&Subject::Name("copy.deepcopy".into())));
    assert!(page.names(&Subject::Phrase(vec!["lru".into(), "feature".into()])));
    assert!(!page.names(&Subject::Phrase(vec!["feature".into(), "lru".into()])));
    assert!(page.names(&Subject::Words(vec!["feature".into(), "lru".into()])));
}

#[test]
fn the_run_check_ignores_the_cited_pages_titles() {
    let mut base = EvidenceBase::default();
    base.add_page(
        "http://docs/wal.html",
        "20.5. Write Ahead Log",
        COMMIT_DELAY,
    );
    base.add_page(
        "http://docs/json.html",
        "json — JSON encoder and decoder",
        "Deserialize s to a Python object.",
    );
    // The second page's title is no subject the first must name.
    let md = "Setting commit_delay adds a time delay before a WAL flush is initiated ([20.5. Write Ahead Log](http://docs/wal.html)) ([json — JSON encoder and decoder](http://docs/json.html)).";
    let checks = check_claims(md, &base, "What does commit_delay do?");
    assert_eq!(checks.len(), 2, "{checks:?}");
    assert!(checks[0].supported, "{checks:?}");
    assert_eq!(
        checks[0].claim,
        "Setting commit_delay adds a time delay before a WAL flush is initiated."
    );
    assert!(!checks[1].supported);
    assert_eq!(checks[1].missing_subjects, ["commit_delay", "wal"]);
}

#[test]
fn a_label_over_a_quoted_passage_is_no_claim() {
    let mut base = EvidenceBase::default();
    base.add_page(
        "http://docs/json.html",
        "json — JSON encoder and decoder",
        "§ json › Basic Usage › json.loads(s, *, cls=None)\nDeserialize s to a Python object.",
    );
    let md = "- [json — JSON encoder and decoder](http://docs/json.html) › `json` › Basic Usage › json.loads(s, *, cls=None, object_hook=None, parse_int=Non…):\n\n> Deserialize s to a Python object.\n";
    assert!(check_claims(md, &base, "How do I decode JSON?").is_empty());
}

/// Deep mode's study keeps a researcher's closest pages, one "- title — URL" line each; tuning
/// set, deep 0.5B (`multi-py311-tomllib`): ten such lines were counted as unsupported claims.
#[test]
fn a_list_of_pages_read_is_no_claim() {
    let mut base = EvidenceBase::default();
    base.add_page(
        "http://docs/sqlite3.html",
        "sqlite3 — DB-API 2.0 interface for SQLite databases",
        "The sqlite3 module provides an SQL interface.",
    );
    let md = "## Closest pages read\n- sqlite3 — DB-API 2.0 interface for SQLite databases — http://docs/sqlite3.html\n- [sqlite3 — DB-API 2.0 interface for SQLite databases](http://docs/sqlite3.html)\n";
    assert!(check_claims(md, &base, "What can tomllib write?").is_empty());
    // A claim in a list item is still one.
    let md = "- The json module writes TOML files quickly — http://docs/sqlite3.html\n";
    let checks = check_claims(md, &base, "What can tomllib write?");
    assert_eq!(checks.len(), 1);
    assert!(!checks[0].supported);
}

/// The grounded report's link lines over quoted passages, cut at a section number's dot, were
/// counted as supported claims ("Resource Consumption › 20.4.", "Also from 13.2. Transaction
/// Isolation › 13.2."): a tuning-set finding of the independent judge.
#[test]
fn link_labels_and_lead_ins_are_no_claims() {
    let mut b = base();
    b.add_page(
        "http://h/runtime-config-resource.html",
        "20.4. Resource Consumption",
        "20.4. Resource Consumption 20.4.1. Memory shared_buffers (integer) Sets the amount of memory the database server uses for shared memory buffers. The default is typically 128 megabytes.",
    );
    let md = "## Evidence\n\n- [20.4. Resource Consumption](http://h/runtime-config-resource.html) › 20.4. Resource Consumption › 20.4.1. Memory › shared_buffers (integer):\n\n> The default is typically 128 megabytes.\n\n- Also from [20.4. Resource Consumption](http://h/runtime-config-resource.html) › 20.4. Resource Consumption › 20.4.1. Memory:\n\n> Sets the amount of memory.\n\nOther common memory settings include the following ones: ([20.4. Resource Consumption](http://h/runtime-config-resource.html)).\n\nThe default of shared_buffers is typically 128 megabytes ([20.4. Resource Consumption](http://h/runtime-config-resource.html)).";
    let checks = check_claims(md, &b, "What is the default of shared_buffers?");
    let claims: Vec<&str> = checks.iter().map(|c| c.claim.as_str()).collect();
    assert_eq!(claims.len(), 1, "{checks:#?}");
    assert!(
        claims[0].starts_with("The default of shared_buffers is typically 128"),
        "{checks:#?}"
    );
    assert!(is_link_label(
        "- Also from [13.2. Transaction Isolation](http://h/x.html) › 13.2. Transaction Isolation:"
    ));
    assert!(!is_link_label(
        "- [`json.loads`](http://h/json.html) deserializes a str into a Python object."
    ));
}

/// "a `str` subclass (i.e" was a summary cut at an abbreviation; a section number after a
/// breadcrumb's `›` ends no sentence either; a version number ending a sentence still does.
#[test]
fn sentences_do_not_end_at_abbreviations_or_section_numbers() {
    assert_eq!(
        sentences("Members are strings, e.g. the value of auto() is the name. Second one here."),
        [
            "Members are strings, e.g. the value of auto() is the name.",
            "Second one here."
        ]
    );
    assert_eq!(
        sentences("Memory › 20.4. Resource Consumption holds it. Next."),
        ["Memory › 20.4. Resource Consumption holds it.", "Next."]
    );
    assert_eq!(
        sentences("1. First item of a list is here."),
        ["1. First item of a list is here."]
    );
    // A sentence in brackets ends with them; a stop in brackets inside one does not.
    assert_eq!(
        sentences("It is kept. (The last value is the operative one.) By contrast, it is not."),
        [
            "It is kept.",
            "(The last value is the operative one.)",
            "By contrast, it is not."
        ]
    );
    assert_eq!(
        sentences("See the notes (in Section 8.1.) for more."),
        ["See the notes (in Section 8.1.) for more."]
    );
    assert_eq!(
        sentences("New in version 3.11. The next sentence."),
        ["New in version 3.11.", "The next sentence."]
    );
    assert_eq!(
        sentences("Tools, formats etc. Then another sentence."),
        ["Tools, formats etc.", "Then another sentence."]
    );
}

/// A quoted statement kept the page's Markdown escapes ("*isolation\_level*"), and the claim
/// check took `isolation\_level` for a subject the page (`isolation_level`) does not name.
#[test]
fn markdown_escapes_are_no_part_of_a_claim() {
    let mut b = EvidenceBase::default();
    b.add_page(
        "http://h/sqlite3.html",
        "sqlite3",
        "If not overridden by the isolation_level parameter of connect(), the default is \"\", which is an alias for \"DEFERRED\".",
    );
    let md = r#"“If not overridden by the *isolation\_level* parameter of `connect()`, the default is `""`, which is an alias for `"DEFERRED"`” ([sqlite3](http://h/sqlite3.html))."#;
    let checks = check_claims(md, &b, "");
    assert!(checks[0].supported, "{checks:#?}");
    assert_eq!(unescape_markdown(r"a\_b \* c \d"), r"a_b * c \d");
}

/// "TCP/IP" and "Unix-domain" were subjects no text could name (its words split at `/` and
/// `-`): a verbatim quote of `app-postgres.html` was judged unsupported.
#[test]
fn names_with_slashes_or_hyphens_are_named_by_their_words() {
    let page = "Specifies the TCP/IP port or local Unix domain socket file extension on which postgres is to listen. Only Unix-domain sockets can be used then.";
    let claim = "Specifies the TCP/IP port or local Unix domain socket file extension on which postgres is to listen";
    assert!(check_support(claim, page, "").supported);
    let named = subject::Named::new(page);
    assert!(named.names(&subject::Subject::Name("tcp/ip".into())));
    assert!(named.names(&subject::Subject::Name("unix-domain".into())));
    assert!(!named.names(&subject::Subject::Name("udp/ip".into())));
}

#[test]
fn a_number_is_held_only_as_a_whole_numeral() {
    // Part of a longer numeral is another number (tuning set: "up to 37 columns" passed on a
    // breadcrumb's "37.17.").
    let passage = "Appendix K. PostgreSQL Limits › 37.17. Columns: a table holds up to 1,600 columns; port 5432.";
    assert_eq!(
        support("A table can have up to 37 columns.", passage).1,
        ["37"]
    );
    assert_eq!(support("The port is 543.", passage).1, ["543"]);
    assert_eq!(
        support("The default is 5.", "It waits 15 seconds.").1,
        ["5"]
    );
    // The same value written another way is held.
    assert!(
        support("A table holds up to 1600 columns.", passage)
            .1
            .is_empty()
    );
    assert!(support("The port is 5432.", passage).1.is_empty());
    assert!(support("The section is 37.17.", passage).1.is_empty());
    assert!(
        support("The timeout is 5 seconds.", "timeout=5.0 by default")
            .1
            .is_empty()
    );
    assert!(
        support("It uses 128 MB.", "The default is 128MB.")
            .1
            .is_empty()
    );
}

#[test]
fn a_word_in_capitals_is_named_only_by_the_same_word_in_capitals() {
    use subject::{Named, Subject, subjects};
    let asked = "Is EXPLAIN ANALYZE safe to run on an UPDATE?";
    let found = subjects("The UPDATE command is safe to run on an UPDATE.", asked);
    assert!(
        found.contains(&Subject::Keywords(vec!["update".into()])),
        "{found:?}"
    );
    // A Git page's "update" is the English word, not SQL's UPDATE.
    let git = "git mv: this command is safe to run; after it the index is updated, and an \
               update of the work tree follows.";
    let verdict = check_support(
        "The UPDATE command is safe to run on an UPDATE.",
        git,
        asked,
    );
    assert!(!verdict.supported, "{verdict:?}");
    let pg = "EXPLAIN ANALYZE on an UPDATE statement changes the table; the UPDATE command is \
              run for real, so run it inside a transaction you roll back.";
    let verdict = check_support(
        "The UPDATE command is run for real by EXPLAIN ANALYZE.",
        pg,
        asked,
    );
    assert!(verdict.supported, "{verdict:?}");
    // Runs of capitals are keywords word by word; the last part of a dotted constant counts.
    let page = Named::new("Use CREATE INDEX with CONCURRENTLY, or pickle.HIGHEST_PROTOCOL.");
    assert!(page.names(&Subject::Keywords(vec![
        "create".into(),
        "index".into(),
        "concurrently".into()
    ])));
    assert!(page.names(&Subject::Keywords(vec!["highest_protocol".into()])));
    assert!(
        !Named::new("create an index concurrently").names(&Subject::Keywords(vec!["index".into()]))
    );
}

#[test]
fn a_number_with_its_unit_glued_on_is_checked() {
    let (_, missing) = support(
        "The default value of maintenance_work_mem is 40MB.",
        "maintenance_work_mem defaults to 64 megabytes (64MB).",
    );
    assert_eq!(missing, ["40"]);
    let (_, missing) = support(
        "It defaults to 64MB.",
        "It defaults to 64 megabytes (64MB).",
    );
    assert!(missing.is_empty(), "{missing:?}");
    // Letters before the digits make a name, not a number: utf8, sha256.
    let (_, missing) = support("Use utf8 or sha256 hashes.", "Use utf8 or sha256 hashes.");
    assert!(missing.is_empty(), "{missing:?}");
}

/// A tuning question's report: "added in Python 3.11.2", the version of the docs' build in the
/// page's title.
#[test]
fn the_docs_version_in_a_title_backs_no_claim() {
    let page = "tomllib — Parse TOML files — Python 3.11.2 documentation\nNew in version 3.11. This module provides an interface for parsing TOML.";
    let wrong = check_support(
        "The tomllib module was added in Python 3.11.2 for parsing TOML.",
        page,
        "",
    );
    assert_eq!(wrong.missing_numbers, ["3.11.2"]);
    assert!(!wrong.supported);
    let right = check_support(
        "The tomllib module, new in version 3.11, provides an interface for parsing TOML.",
        page,
        "",
    );
    assert!(right.supported, "{right:?}");
    // A version the title gives its subject stays.
    let whats_new = "What's New In Python 3.11 — Python 3.11.2 documentation\nAdded the tomllib module for parsing TOML.";
    assert!(
        check_support(
            "Python 3.11 added the tomllib module for parsing TOML.",
            whats_new,
            ""
        )
        .supported
    );
}

/// A question of my own (`scripts/demo.sh`): the model said of PostgreSQL what Python's
/// tutorial says, and the check passed it because the products compared were context.
#[test]
fn a_claim_naming_a_compared_product_needs_a_page_of_its_docs() {
    let q = "How does integer division of negative numbers differ between Python and PostgreSQL?";
    let claim = "PostgreSQL's `/` operator does floor division and gets an integer result.";
    let tutorial = format!(
        "3. An Informal Introduction to Python\n{}\nDivision (`/`) always returns a float. To do \
         floor division and get an integer result you can use the `//` operator.",
        subject::address_words("https://docs.python.org/3.11/tutorial/introduction.html")
    );
    let verdict = check_support(claim, &tutorial, q);
    assert!(!verdict.supported, "{verdict:?}");
    assert_eq!(verdict.missing_subjects, ["postgresql"]);
    // The same words at PostgreSQL's address name it.
    let operators = format!(
        "9.3. Mathematical Functions and Operators\n{}\n`/` division (for integral types, \
         division truncates the result towards zero); integer operands give an integer result.",
        subject::address_words("https://www.postgresql.org/docs/15/functions-math.html")
    );
    let claim = "PostgreSQL's `/` operator truncates an integer division result towards zero.";
    assert!(check_support(claim, &operators, q).supported);
    // Asked in one product, it stays context: its docs need not name it.
    let q = "How does integer division of negative numbers round in PostgreSQL?";
    let claim = "In PostgreSQL, `/` truncates an integer division result towards zero.";
    assert!(
        check_support(
            claim,
            "`/` division truncates the integer division result towards zero",
            q
        )
        .supported
    );
    // A version in a path is no number the page states.
    assert_eq!(
        subject::address_words("https://www.postgresql.org/docs/15/functions-math.html"),
        "www postgresql org docs functions math html"
    );
}

/// Probe set (`probe-none-pg-query-cache`): `enable_memoize`'s "caching results" does not
/// name a query result cache; the phrase's words apart are in every planner passage.
#[test]
fn a_hyphenated_subject_is_named_only_as_a_phrase() {
    use super::subject::unanswered;
    let q = "How do I enable PostgreSQL's built-in query result cache?";
    let memoize = "enable_memoize (boolean): Enables or disables the query planner's use of memoize plans for caching results from parameterized scans inside nested-loop joins.".to_string();
    assert!(unanswered(q, &[memoize]).contains(&"query-result-cache".to_string()));
    let named = "The built-in query result cache keeps the results of recent queries.".to_string();
    assert!(unanswered(q, &[named]).is_empty());
    // Said as the words it is.
    assert_eq!(
        super::subject::as_code("query-result-cache"),
        "“query result cache”"
    );
    assert_eq!(super::subject::as_code("built-in"), "`built-in`");
}

/// The product of a page's docs by its address, not its topic.
#[test]
fn a_pages_docs_product_is_read_from_its_address() {
    use super::subject::docs_products;
    assert_eq!(
        docs_products("https://docs.python.org/3/library/json.html"),
        ["python"]
    );
    assert_eq!(
        docs_products("https://www.postgresql.org/docs/15/jit-reason.html"),
        ["postgresql"]
    );
    assert_eq!(docs_products("https://git-scm.com/docs/git-log"), ["git"]);
    assert_eq!(
        docs_products("http://127.0.0.1:35509/postgresql-doc-15/html/jit-reason.html"),
        ["postgresql"]
    );
    assert_eq!(
        docs_products("http://127.0.0.1:35509/python3.11-doc/html/library/json.html"),
        ["python"]
    );
    // A first segment that is no docs tree is a topic.
    assert_eq!(
        docs_products("https://stackoverflow.com/questions/1/git-encrypt"),
        ["stackoverflow"]
    );
    assert!(docs_products("http://docs/routine-vacuuming.html").is_empty());
    assert!(docs_products("http://docs/library/json.html").is_empty());
}

/// A question asked in one product that names another whose pages were read keeps them.
#[test]
fn a_question_naming_another_products_docs_keeps_their_pages() {
    use super::subject::of_asked_product;
    let pages = [
        ("http://d/git-doc/git-init.html", "git-init(1)"),
        (
            "http://d/postgresql-doc-15/html/storage-file-layout.html",
            "73.1. Database File Layout",
        ),
    ];
    assert_eq!(
        of_asked_product(
            "Where does a git repository keep its objects, and what is PostgreSQL's PGDATA?",
            &pages,
            &[]
        ),
        [true, true]
    );
    assert_eq!(
        of_asked_product("What is PostgreSQL's PGDATA?", &pages, &[]),
        [false, true]
    );
}

/// Own hostile question: a git question, written in lower case, was answered from Python's
/// release notes on Mercurial. The product is also the word naming a docs tree read.
#[test]
fn a_lower_case_product_is_read_from_the_docs_read_and_other_docs_answer_nothing_for_it() {
    use super::subject::of_asked_product;
    let git = (
        "http://d/git-doc/git-fast-export.html",
        "git-fast-export(1)",
    );
    let python = (
        "http://d/python3.11-doc/html/whatsnew/3.2.html",
        "What’s New In Python 3.2 — Python 3.11.2 documentation",
    );
    let forum = ("https://stackoverflow.com/questions/1/git-to-hg", "Convert");
    let asked = "Which git subcommand converts a repository to Mercurial?";
    assert_eq!(of_asked_product(asked, &[git, python], &[]), [true, false]);
    // Named as a product and none of its pages read: another product's docs answer nothing
    // for it, a forum page may.
    assert_eq!(
        of_asked_product(
            "Which Git subcommand converts a repository to Mercurial?",
            &[python, forum],
            &[]
        ),
        [false, true]
    );
    // Its pages fetched and judged off the task still tell the product: the release notes
    // answer nothing for it.
    assert_eq!(of_asked_product(asked, &[python], &[]), [true]);
    assert_eq!(of_asked_product(asked, &[python], &[git.0]), [false]);
    // Named nowhere, no product: every page counts.
    assert_eq!(
        of_asked_product("How do I convert a repository?", &[git, python], &[]),
        [true, true]
    );
}

/// Own hostile question: a number said of the question's words that its passage lacks is not
/// supported; pickle has no compression level, and its passage's protocol 3 stood for one.
#[test]
fn a_number_said_of_words_the_passage_lacks_is_unsupported() {
    use super::check_support;
    let asked = "What is the default compression level of Python's pickle module?";
    let protocol = "pickle — Python object serialization. pickle.DEFAULT_PROTOCOL: the default protocol version of the pickle module is 3.";
    let verdict = check_support(
        "The default compression level of Python's pickle module is 3.",
        protocol,
        asked,
    );
    assert!(!verdict.supported, "{verdict:?}");
    // Said of what the passage speaks of, the number stands; one missing word of the
    // question ("value") is a paraphrase.
    let verdict = check_support(
        "The default value of max_connections is 100.",
        "max_connections (integer): Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections.",
        "What is the default value of max_connections in PostgreSQL 15?",
    );
    assert!(verdict.supported, "{verdict:?}");
}

/// Probe set: a claim stating no number that restates three words of the question its passage
/// never says made up the premise; two are a paraphrase.
#[test]
fn a_premise_restated_from_the_question_is_unsupported() {
    use super::check_support;
    let asked = "How does PostgreSQL 15 automatically scale shared_buffers when memory is added?";
    let passage = "shared_buffers (integer): Sets the amount of memory the database server uses for shared memory buffers. The default is typically 128 megabytes.";
    let verdict = check_support(
        "PostgreSQL 15 automatically scales shared_buffers when memory is added by setting the amount of memory the database server uses for shared memory buffers.",
        passage,
        asked,
    );
    assert!(!verdict.supported, "{verdict:?}");
    let verdict = check_support(
        "PostgreSQL 15 scales shared_buffers by setting the amount of memory the database server uses for shared memory buffers when memory is added.",
        passage,
        asked,
    );
    assert!(verdict.supported, "{verdict:?}");
}

/// Tuning set (`pg-statement-timeout-default`, judged unsupported): a unit is a value. The
/// asked entry's "taken as milliseconds" does not back "taken as seconds", copied from another
/// setting's entry; a unit held in any of its forms does.
#[test]
fn a_unit_the_passage_does_not_hold_is_unsupported() {
    let passage = "statement_timeout (integer)\nAbort any statement that takes more than the specified amount of time. If this value is specified without units, it is taken as milliseconds. A value of zero (the default) disables the timeout.";
    let asked = "What is the default statement_timeout in PostgreSQL, and in what unit is a value without units interpreted?";
    assert!(
        !check_support(
            "If this value is specified without units, it is taken as seconds.",
            passage,
            asked
        )
        .supported
    );
    assert!(
        check_support(
            "If this value is specified without units, it is taken as milliseconds.",
            passage,
            asked
        )
        .supported
    );
    // The unit's abbreviation glued to a number holds it; the ordinal "second" is no unit.
    let timeout = "checkpoint_timeout (integer)\nMaximum time between automatic WAL checkpoints. The default is five minutes (5min).";
    assert!(check_support("The default checkpoint_timeout is 5 minutes.", timeout, "").supported);
    let args = "shutil.copy(src, dst)\nCopies the file src to the file or directory dst. The second argument may be a directory.";
    assert!(
        check_support(
            "The second argument of shutil.copy may be a directory.",
            args,
            ""
        )
        .supported
    );
}

#[test]
fn a_number_the_passage_qualifies_as_another_names_is_unsupported() {
    let passage = "Setting a value of 0 restores the previous default of rounding the value to 6 (for `float4`) or 15 (for `float8`) significant decimal digits.";
    assert!(
        !check_support(
            "PostgreSQL's numeric type can hold up to 15 digits.",
            passage,
            "How many digits can PostgreSQL's numeric type hold?"
        )
        .supported
    );
    assert!(numbers::qualified_for_another(
        "The numeric type can hold up to 15 digits.",
        passage
    ));
    // Said of its own name, or of a number also written without a qualifier, it stands.
    assert!(!numbers::qualified_for_another(
        "The previous default rounded float8 values to 15 significant decimal digits.",
        passage
    ));
    assert!(!numbers::qualified_for_another(
        "Rounding is to 15 digits.",
        &format!("{passage} Output is rounded to 15 digits.")
    ));
}

/// Probe set, probe-multi-git-restore-reset: a model's sentence cut inside a parenthesis took
/// the quote after it into its claim, which no one passage supported.
#[test]
fn a_cut_sentence_ends_what_it_left_open() {
    let summary = "Keeps those (i.e. which have … ([git-reset(1)](http://d/git-reset.html)). “After running it, use restore” ([git-reset(1)](http://d/git-reset.html)).";
    assert_eq!(sentences(summary).len(), 2, "{:?}", sentences(summary));
}
