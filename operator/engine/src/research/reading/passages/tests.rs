use super::*;

const PAGE: &str = "# `json` — JSON encoder and decoder\n\nJSON is a lightweight data interchange format.\n\n```\n>>> import json\n>>> json.dumps(['foo'])\n'[\"foo\"]'\n```\n\n## Basic Usage\n\n### json.dump(obj, fp, *, skipkeys=False)\n\nSerialize *obj* as a JSON formatted stream to *fp*.\n\n### json.loads(s, *, cls=None, object_hook=None)\n\nDeserialize *s* (a `str`, `bytes` or `bytearray` instance containing a JSON document) to a Python object using this conversion table.\n\n| JSON | Python |\n|---|---|\n| object | dict |\n| array | list |\n\n- first item\n- second item\n";

#[test]
fn split_follows_headings_code_tables_and_lists() {
    let p = split(PAGE);
    let kinds: Vec<PassageKind> = p.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            PassageKind::Prose,
            PassageKind::Code,
            PassageKind::Prose,
            PassageKind::Prose,
            PassageKind::TableRow,
            PassageKind::TableRow,
            PassageKind::List,
        ]
    );
    // A table's header row ("| JSON | Python |", above its separator) is no passage.
    assert_eq!(p[4].text, "| object | dict |");
    assert!(p[1].text.starts_with("```") && p[1].text.ends_with("```"));
    assert_eq!(
        p[3].heading_path,
        [
            "`json` — JSON encoder and decoder",
            "Basic Usage",
            "json.loads(s, *, cls=None, object_hook=None)"
        ]
    );
    assert_eq!(p[6].text, "- first item\n- second item");
    assert!(p.iter().enumerate().all(|(i, p)| p.index == i));
}

#[test]
fn long_paragraphs_are_cut_at_sentences() {
    let para = "This sentence is about twenty-five chars. ".repeat(60);
    let p = split(&para);
    assert!(p.len() > 1);
    assert!(
        p.iter()
            .all(|p| p.text.chars().count() <= MAX_PROSE_CHARS + 50)
    );
    assert!(p.iter().all(|p| p.text.ends_with('.')));
}

#[test]
fn a_product_and_its_version_are_context_not_subject() {
    let c = context_terms(
        "What is the default value of max_connections in PostgreSQL 15, and how many are reserved?",
    );
    assert!(c.contains("postgresql") && c.contains("15"), "{c:?}");
    assert!(
        !c.contains("max_connections") && !c.contains("default"),
        "{c:?}"
    );
    let c = context_terms("How do I decode JSON with the json module in Python?");
    assert_eq!(
        c,
        BTreeSet::from(["python".to_string(), "modul".to_string()])
    );
    assert!(context_terms("Which pickle protocol does Python 3.11 use?").contains("python"));
    // The subject of the question stays a full term.
    assert!(context_terms("What isolation levels does PostgreSQL support?").is_empty());
    assert!(context_terms("What is new in 3.11?").is_empty());
    // A parenthesis after the product is an aside: the product still ends its clause.
    let c = context_terms("What does round(2.5) give in Python (round) and in PostgreSQL (round)?");
    assert!(c.contains("python") && c.contains("postgresql"), "{c:?}");
}

#[test]
fn the_kind_of_a_named_thing_is_context() {
    let c = context_terms("What does the MERGE command introduced in PostgreSQL 15 do?");
    assert!(c.contains("command"), "{c:?}");
    assert!(context_terms("What does json.loads() function return?").contains("function"));
    // "type" is what is asked here, not the kind of a name.
    let c = context_terms("Is serial a real data type in PostgreSQL?");
    assert!(!c.contains("type"), "{c:?}");
    // The shape of sql-merge.html: short passages naming "command" outranked the definition.
    let mut page = "## MERGE\n\nMERGE — conditionally insert, update, or delete rows of a table\n\n## Description\n\n`MERGE` provides a single SQL statement that can conditionally `INSERT`, `UPDATE` or `DELETE` rows, a task that would otherwise require multiple procedural language statements.\n\n## Outputs\n\nOn successful completion, a `MERGE` command returns a command tag of the form\n\n## Compatibility\n\nThis command conforms to the SQL standard.\n\n## Notes\n\n".to_string();
    // The page's many other paragraphs, most naming MERGE and many the command, as the real
    // one's do.
    for n in 0..30 {
        let kind = if n % 2 == 0 { "command" } else { "action" };
        page.push_str(&format!(
            "The `MERGE` {kind} number {n} on the target table runs after the join with the data source.\n\n"
        ));
    }
    let p = split(&page);
    let scores = rank(
        &p,
        "What does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15 released?",
    );
    let tag = p
        .iter()
        .position(|p| p.text.contains("command tag"))
        .unwrap_or(0);
    let definition = p
        .iter()
        .position(|p| p.text.contains("single SQL"))
        .unwrap_or(0);
    assert!(scores[definition] > scores[tag], "{scores:?}");
}

#[test]
fn a_passage_that_only_names_the_product_does_not_outrank_the_entry() {
    let page = "# 20.3. Connections\n\n### max_connections (integer)\n\nDetermines the maximum number of concurrent connections. The default is typically 100 connections.\n\n### ssl_prefer_server_ciphers (boolean)\n\nPostgreSQL versions before 9.4 do not have this setting and always use the client's preferences.\n\n### port (integer)\n\nThe TCP port the server listens on; 5432 by default.\n";
    let p = split(page);
    let scores = rank(
        &p,
        "What is the default value of max_connections in PostgreSQL 15?",
    );
    let best = (0..p.len()).max_by(|a, b| scores[*a].total_cmp(&scores[*b]));
    assert!(
        p[best.unwrap_or(0)].text.contains("typically 100"),
        "{scores:?}"
    );
}

#[test]
fn stop_words_are_sorted_for_binary_search() {
    assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn camel_case_names_and_long_forms_meet_what_programmers_write() {
    assert_eq!(terms("DictReader"), ["dictread", "dict", "read"]);
    assert_eq!(terms("dictionaries"), ["dict"]);
    assert_eq!(terms("parameters"), terms("params"));
    assert_eq!(
        terms("csv.DictReader"),
        ["csv.dictreader", "csv", "dictread", "dict", "read"]
    );
    // Not CamelCase: nothing extra.
    assert_eq!(terms("JSON"), ["json"]);
}

#[test]
fn terms_drop_stop_words_stem_and_split_dotted_names() {
    assert_eq!(
        terms("How do I decode JSON with json.loads?"),
        ["decod", "json", "json.loads", "json", "load"]
    );
    assert_eq!(
        keyword_query("How do I decode JSON with the json module in Python?"),
        "decode json module python"
    );
}

#[test]
fn the_passage_documenting_the_asked_api_ranks_first() {
    let p = split(PAGE);
    let scores = rank(&p, "How do I decode JSON with the json module in Python?");
    let best = (0..p.len())
        .max_by(|a, b| scores[*a].total_cmp(&scores[*b]))
        .unwrap();
    assert!(p[best].text.starts_with("Deserialize *s*"), "{:?}", p[best]);
}

#[test]
fn selection_keeps_page_order_breadcrumbs_and_whole_code() {
    let filler = "Unrelated text about encoders and streams. ".repeat(40);
    let page = format!("{PAGE}\n\n## Other\n\n{filler}\n");
    let s = select(&page, "How do I decode JSON with json.loads?", 600, "");
    assert!(s.text.contains("Deserialize *s*"), "{}", s.text);
    assert!(
        s.text
            .contains("§ `json` — JSON encoder and decoder › Basic Usage › json.loads("),
        "{}",
        s.text
    );
    assert!(s.text.chars().count() <= 600, "{}", s.text.len());
    assert!(s.best_score > 0.0);
    // Page order.
    let mut sorted = s.kept.clone();
    sorted.sort_unstable();
    assert_eq!(s.kept, sorted);
    // A code block is all there or not at all.
    if s.text.contains(">>> import json") {
        assert!(s.text.contains("'[\"foo\"]'\n```"));
    }
}

#[test]
fn a_short_lead_paragraph_is_kept_with_the_best_passages() {
    let filler = "Unrelated text about encoders and streams. ".repeat(40);
    let page = format!("{PAGE}\n\n## Other\n\n{filler}\n");
    let s = select(&page, "json.loads deserialize", 600, "");
    assert!(
        s.text
            .contains("JSON is a lightweight data interchange format."),
        "{}",
        s.text
    );
    assert!(s.text.contains("Deserialize *s*"), "{}", s.text);
    assert!(s.text.chars().count() <= 600, "{}", s.text.len());
    // Not when the lead would take more than a fifth of the room.
    let long_lead = format!(
        "# T\n\n{}\n\n## loads\n\njson.loads deserializes.\n\n{filler}",
        "Lead. ".repeat(30)
    );
    let s = select(&long_lead, "json.loads deserialize", 300, "");
    assert!(!s.text.contains("Lead. Lead."), "{}", s.text);
    assert!(s.text.contains("json.loads deserializes."), "{}", s.text);
}

/// Probe set, "What does git log --follow do, and what is its limitation?": the option's
/// one-line definition repeats no word of the question, and git-log's description, full of
/// "git log", filled the room before it.
#[test]
fn the_asked_for_entrys_definition_is_read_whatever_it_scores() {
    let description = "The limitation of git log: git log lists commits, and every limitation of git log is noted here. ".repeat(2);
    let others: String = (0..6)
        .map(|i| format!("### --other{i}\n\nPrint another kind of output number {i} for each commit that follows.\n\n"))
        .collect();
    let page = format!(
        "# Manual\n\n## DESCRIPTION\n\n{description}\n\nA second limitation: git log shows what git log was given, a limitation of git log by design.\n\n## EXAMPLES\n\n### git log -3\n\nShows the last three commits of git log, and the limitation of git log output.\n\n## OPTIONS\n\n### --follow\n\nContinue listing the history of a file beyond renames (works only for a single file).\n\n{others}"
    );
    let task = "What does git log --follow do, and what is its limitation?";
    let passages = split(&page);
    let defined = asked_definitions(&passages, task);
    assert_eq!(defined.len(), 1, "{passages:#?}");
    assert!(passages[defined[0]].text.starts_with("Continue listing"));
    // It ranks last of the passages naming the option ...
    let scores = rank_focused(&passages, task);
    assert!(
        scores.iter().filter(|s| **s > scores[defined[0]]).count() >= 2,
        "{scores:?}"
    );
    // ... and in room for three passages it is read all the same.
    let s = select(&page, task, 500, "Manual");
    assert!(
        s.text
            .contains("§ Manual › OPTIONS › --follow\nContinue listing"),
        "{}",
        s.text
    );
    assert!(s.text.chars().count() <= 500);
    // Nothing asked by name: no definition is set apart.
    assert!(asked_definitions(&passages, "How do I list commits?").is_empty());
}

/// Probe set (`git describe`): on the command's own page, a question naming no entry is
/// answered by the page's lead, read though its words are not the question's; with the demo's
/// 1500 characters a page, it takes more than a quarter of the room.
#[test]
fn the_lead_of_the_asked_commands_page_is_read_whatever_it_scores() {
    let lead = "The command finds the most recent tag that is reachable from a commit. If the tag points to the commit, then only the tag is shown. Otherwise, it suffixes the tag name with the number of additional commits on top of the tagged object and the abbreviated object name of the most recent commit. The result is a human-readable object name which can also be used to identify the commit to other git commands.";
    let options: String = (0..14)
        .map(|i| format!("### --opt{i}\n\nBy default git describe output uses annotated tags; option {i} changes which tags git describe considers.\n\n"))
        .collect();
    let page = format!("## DESCRIPTION\n\n{lead}\n\n## OPTIONS\n\n{options}");
    let task = "What does git describe output, and which tags does it consider by default?";
    assert!(lead.len() + 20 > 1500 / 4);
    let s = select(&page, task, 1500, "git-describe(1)");
    assert!(s.text.contains("The command finds"), "{}", s.text);
    // Another command's page: its lead is no definition of this one.
    let s = select(&page, task, 1500, "git-tag(1)");
    assert!(!s.text.contains("The command finds"), "{}", s.text);
}

#[test]
fn key_terms_are_identifiers_first_then_capitalised_names() {
    assert_eq!(
        key_terms(
            "What is the default pool_size of the connection pool created by SQLAlchemy's create_engine()?"
        ),
        ["pool_size", "sqlalchemy", "create_engine"]
    );
    assert_eq!(
        key_terms("In Python 3.11, what is the default maxsize of functools.lru_cache?"),
        ["functools.lru_cache"]
    );
    assert_eq!(
        key_terms("How does asyncio.TaskGroup handle exceptions raised by its child tasks?"),
        ["asyncio.taskgroup"]
    );
    assert_eq!(
        key_terms(
            "What isolation levels does PostgreSQL support and how does Serializable differ from Repeatable Read?"
        ),
        ["postgresql"]
    );
    assert_eq!(
        key_terms("How does Serializable differ from Repeatable Read?"),
        ["serializable", "repeatable", "read"]
    );
    // A command-line option is an identifier; a dash or a bare `--` is not.
    assert_eq!(
        key_terms("What does the --autosquash-all option of git commit do?"),
        ["--autosquash-all"]
    );
    assert!(key_terms("What does git checkout -- file do?").is_empty());
    assert_eq!(
        key_terms("How do I decode JSON with the json module in Python?"),
        ["json", "python"]
    );
    assert!(key_terms("how do i decode json").is_empty());
    // An acronym's plural is a name, not an identifier, and matches its singular.
    assert_eq!(
        key_terms("How do CEL validation rules work in CRDs?"),
        ["cel", "crds"]
    );
    assert!(mentions_key_terms(
        "CEL declares validation rules of a CRD",
        "How do validation rules work in CRDs?"
    ));
}

#[test]
fn a_page_naming_none_of_the_key_terms_does_not_answer() {
    let q = "What is the default pool_size of the connection pool created by SQLAlchemy's create_engine()?";
    assert!(!mentions_key_terms(
        "The default executor creates a pool of threads; connections are created lazily.",
        q
    ));
    // Word boundaries: geqo_pool_size is not pool_size.
    assert!(!mentions_key_terms("geqo_pool_size (integer)", q));
    assert!(mentions_key_terms(
        "engine = create_engine(url, pool_size=5)",
        q
    ));
    let q = "In Python 3.11, what is the default maxsize of functools.lru_cache?";
    assert!(mentions_key_terms("@lru_cache(maxsize=128)", q));
    assert!(mentions_key_terms("anything", "how do i decode json"));
}

#[test]
fn an_owner_and_a_modifying_product_are_context() {
    let c = context_terms("How does PostgreSQL's jsonb type differ from the json type?");
    assert!(c.contains("postgresql") && !c.contains("jsonb"), "{c:?}");
    let c = context_terms(
        "What is the finest resolution of a Python datetime object and of a PostgreSQL timestamp?",
    );
    assert!(c.contains("python") && c.contains("postgresql"), "{c:?}");
    // A name the question is about, not a modifier: "the Serializable level" has none after it.
    assert!(context_terms("How does Serializable differ from Repeatable Read?").is_empty());
}

#[test]
fn differ_difference_and_different_are_one_term() {
    let t = |w: &str| terms(w);
    assert_eq!(t("differ"), t("difference"));
    assert_eq!(t("differs"), t("different"));
    // The paragraph that states the difference outranks one that only names the product.
    let page = "# JSON Types\n\nPostgreSQL offers two types for storing JSON data: json and jsonb.\n\nThe json and jsonb data types accept almost identical sets of values. The major practical difference is one of efficiency.\n\nThe json type keeps white space.\n\nThe jsonb type does not.\n";
    let p = split(page);
    let s = rank(
        &p,
        "How does PostgreSQL's jsonb type differ from the json type?",
    );
    assert!(p[1].text.contains("difference") && s[1] > s[0], "{s:?}");
}

#[test]
fn subject_terms_name_what_a_product_owns_and_not_only_the_product() {
    let q =
        "In PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?";
    assert_eq!(key_terms(q), ["postgresql"]);
    assert_eq!(
        subject_terms(q),
        ["postgresql", "truncate", "vacuum", "delete"]
    );
    assert!(mentions_key_terms(
        "TRUNCATE quickly removes all rows from a set of tables.",
        q
    ));
    let q = "Why should Python's secrets module be used instead of the random module?";
    assert_eq!(subject_terms(q), ["python", "secrets"]);
    assert!(mentions_key_terms(
        "The secrets module is used for generating tokens.",
        q
    ));
    let q = "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys?";
    assert_eq!(subject_terms(q), ["json.loads", "postgresql", "jsonb"]);
    let q =
        "What is the finest resolution of a Python datetime object and of a PostgreSQL timestamp?";
    assert!(subject_terms(q).contains(&"timestamp".to_string()));
    // A word a product only modifies is no subject when another is named: "POD" on a C++
    // page does not answer a question about a pod's terminationGracePeriodSeconds.
    let q = "What is the default terminationGracePeriodSeconds of a Kubernetes pod?";
    assert_eq!(subject_terms(q), ["terminationgraceperiodseconds"]);
    assert!(!mentions_key_terms("plain old data structures (POD)", q));
    // Still nothing that names none of them.
    assert!(!mentions_key_terms(
        "The default executor creates a pool of threads.",
        q
    ));
}

/// A question of my own (`scripts/demo.sh`): it ended NoEvidence because `PostgreSQL`, by its
/// inner capital, was its only key term, and every Python page was left out as off the task.
#[test]
fn a_name_paired_with_a_key_term_is_a_key_term() {
    let q = "How does integer division of negative numbers differ between Python and PostgreSQL?";
    assert_eq!(subject_terms(q), ["postgresql", "python"]);
    assert!(mentions_key_terms(
        "The / (division) and // (floor division) operators yield the quotient. Python rounds down.",
        q
    ));
    let q = "Do TaskGroup or Semaphore limit how many tasks run at once?";
    assert_eq!(subject_terms(q), ["taskgroup", "semaphore"]);
    // Not a name: a lower-case word, a stop word, a key already.
    assert_eq!(
        subject_terms("Do TaskGroup and gather differ?"),
        ["taskgroup"]
    );
    assert_eq!(
        subject_terms("What port do PgBouncer and PostgreSQL listen on?"),
        ["pgbouncer", "postgresql"]
    );
}

/// The same question: PL/Python's passages, which name both products on every line, were
/// the summary's only source. The products compared are context, as "in Python" is.
#[test]
fn products_compared_in_a_question_asking_more_are_context() {
    let q = "How does integer division of negative numbers differ between Python and PostgreSQL?";
    let c = context_terms(q);
    assert!(c.contains("python") && c.contains("postgresql"), "{c:?}");
    let c = context_terms("Does integer division round down in PostgreSQL or Python?");
    assert!(c.contains("python") && c.contains("postgresql"), "{c:?}");
    // Nothing asked beside them and the frame: they are the subjects.
    assert!(context_terms("What is the difference between Enum and IntEnum?").is_empty());
    // All capitals name commands, not products; no preposition, no products compared.
    assert!(context_terms("How fast are they in TRUNCATE and DELETE?").is_empty());
    assert!(context_terms("How do Enum and IntEnum compare members?").is_empty());
    // Not closing its clause: the pair is a subject's modifier.
    assert!(context_terms("How is rounding in Python and PostgreSQL code tested?").is_empty());
    let p = split(
        "# PL/Python\n\nPostgreSQL integer is converted to Python int by PL/Python.\n\n\
         # Operators\n\n/ division (integer division truncates the result towards zero)\n",
    );
    let s = rank(&p, q);
    assert!(s[1] > s[0], "{s:?}");
}

#[test]
fn the_products_a_question_asks_of_together() {
    let both = ["python", "postgresql"];
    for q in [
        "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys?",
        "What is the finest time resolution of a Python datetime object and of a PostgreSQL timestamp?",
        "How does integer division of negative numbers differ between Python and PostgreSQL?",
        // A product after the question word (my own demo question).
        "Which Python exception does json.loads raise on invalid input, and what is PostgreSQL's default port?",
    ] {
        assert_eq!(products_asked(q), both, "{q}");
    }
    // One product, or names that are the subjects: none.
    for q in [
        "What is the default of max_connections in PostgreSQL 15?",
        "What is the difference between Enum and IntEnum?",
        "In PostgreSQL, which reclaims disk space immediately: TRUNCATE, plain VACUUM, or DELETE?",
    ] {
        assert!(products_asked(q).is_empty(), "{q}");
    }
}

#[test]
fn a_page_that_fits_is_read_whole_and_a_page_with_no_match_scores_zero() {
    let s = select(PAGE, "decode json", 10_000, "");
    assert_eq!(s.text, PAGE);
    let s = select(PAGE, "vacuum autovacuum postgres", 200, "");
    assert_eq!(s.best_score, 0.0);
    assert!(
        s.text.starts_with("§ `json`") || s.text.starts_with("JSON is"),
        "{}",
        s.text
    );
}

#[test]
fn an_asked_for_data_entry_is_recognised_without_a_call_shape() {
    let q = "What is typing.Self and in which Python version was it added?";
    assert!(focus::is_asked_entry("typing.Self", q));
    assert!(focus::is_asked_entry("`typing.Self`", q));
    assert!(!focus::is_asked_entry("typing.Never", q));
    assert!(!focus::is_asked_entry("Special types", q));
    assert!(focus::is_asked_entry(
        "wal_level (enum)",
        "What is the default wal_level in PostgreSQL 15?"
    ));
}

#[test]
fn a_lead_in_and_its_list_are_one_passage() {
    let page = "# copy\n\nThe difference between shallow and deep copying is only relevant for compound objects:\n\n*   A *shallow copy* constructs a new compound object and inserts *references* into it.\n\n*   A *deep copy* constructs a new compound object and, recursively, inserts *copies* into it.\n\nTwo problems often exist with deep copy operations.\n\n- a list after a full stop stays apart\n";
    let p = split(page);
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(p[0].text.starts_with("The difference") && p[0].text.contains("*deep copy*"));
    assert_eq!(p[2].kind, PassageKind::List);
    assert_eq!(p.iter().map(|p| p.index).collect::<Vec<_>>(), [0, 1, 2]);
    // Together they match a question about the difference, and are shown.
    let s = rank(
        &p,
        "What is the difference between a shallow and a deep copy?",
    );
    assert!(s[0] > s[1], "{s:?}");
}

#[test]
fn a_question_about_names_themselves_borrows_their_definitions_words() {
    let page = "# copy\n\n## copy.copy(x)\n\nReturn a shallow copy of x.\n\n## copy.deepcopy(x)\n\nReturn a deep copy of x.\n\n## Notes\n\nA shallow copy inserts references; a deep copy inserts copies, recursively.\n\nThe module is written in Python.\n";
    let p = split(page);
    let q = "What is the difference between copy.copy() and copy.deepcopy() in Python?";
    let d = definition_terms(&p, q);
    assert!(d.contains("shallow") && d.contains("deep"), "{d:?}");
    let s = rank(&p, q);
    assert!(s[2] > s[3], "{s:?}");
    // A question about an aspect of the names keeps to its own words.
    let q = "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys?";
    let page = "## json.loads(s)\n\nDeserialize s to a Python object.\n";
    assert!(definition_terms(&split(page), q).is_empty());
}

#[test]
fn terms_listed_together_name_one_entry_as_the_page_shows_them() {
    // git-stash.html's shape once its `<dt class="hdlist1">` terms are bold lines.
    let md = "## OPTIONS\n\n**-a**\n\n**--all**\n\nAll ignored and untracked files are also stashed.\n\n**pop \\[--index\\] \\[\\<stash>\\]**\n\nApplying the state can fail with conflicts.\n\n**--index**\n\nTries to reinstate the index.\n";
    let p = split(md);
    let heading_of = |needle: &str| {
        p.iter()
            .find(|p| p.text.contains(needle))
            .map(|p| p.heading_path.join(" › "))
            .unwrap_or_default()
    };
    assert_eq!(heading_of("untracked files"), "OPTIONS › -a, --all");
    assert_eq!(
        heading_of("fail with conflicts"),
        "OPTIONS › pop [--index] [<stash>]"
    );
    // A term after a description starts a new entry rather than joining the last one.
    assert_eq!(heading_of("reinstate"), "OPTIONS › --index");
}

#[test]
fn a_short_code_block_completes_the_sentence_introducing_it() {
    // git-switch.html: the two commands `-c` stands for follow "a convenient shortcut for:".
    let md = "## OPTIONS\n\n**-c \\<new-branch>**\n\nCreate a new branch. This is a convenient shortcut for:\n\n```\n$ git branch <new-branch>\n$ git switch <new-branch>\n```\n\nThe following command switches to the branch:\n\n```\n$ git switch master\n```\n";
    let p = split(md);
    // The bare lead-in and its code stay apart.
    assert_eq!(p.len(), 3, "{p:#?}");
    assert!(
        p[0].text.starts_with("Create a new branch.")
            && p[0].text.contains("$ git switch <new-branch>")
    );
    assert_eq!(p[0].kind, PassageKind::Prose);
    // A bare lead-in does not take its code with it.
    let bare =
        "Or by calculating the timestamp directly:\n\n```\ntimestamp = dt.timestamp()\n```\n";
    assert_eq!(split(bare).len(), 2);
    // A long block stands alone.
    let long = format!(
        "Run this:\n\n```\n{}\n```\n",
        "$ git log --oneline\n".repeat(20)
    );
    assert_eq!(split(&long).len(), 2);
}

/// My own demo question: a page answering one part of a two-part question bears on it,
/// though it never names the other part's product; a page matching no part does not.
#[test]
fn a_page_bears_on_a_task_of_several_parts_through_any_part() {
    let task = "What happens when git stash pop hits a conflict, and how long does PostgreSQL wait on a lock before checking for deadlock?";
    let stash = "# git-stash(1)\n\npop [--index] [<stash>]\n\nRemove a single stashed state from the stash list and apply it on top of the current working tree state. Applying the state can fail with conflicts; in this case, it is not removed from the stash list.";
    let named = format!("127.0.0.1 git doc git stash html\n{stash}");
    assert!(!mentions_key_terms(&named, task));
    assert!(bears_on(true, stash, &named, task));
    let unrelated =
        "# zipfile\n\nThe ZIP file format is a common archive and compression standard.";
    assert!(!bears_on(false, unrelated, unrelated, task));
    // A part that refers back is judged with what it refers to (probe set,
    // `probe-git-log-follow`: gitk(1) was shown for "what is its limitation").
    let task = "What does git log --follow do, and what is its limitation?";
    let gitk = "# gitk(1)\n\ngitk understands options with arguments in the sticked form due to limitations in the command-line parser.";
    assert!(!bears_on(false, gitk, gitk, task));
    // One question: the whole task's test alone.
    let one = "How long does PostgreSQL wait on a lock before checking for deadlock?";
    assert!(!bears_on(true, stash, &named, one));
}

/// My own hostile question: an adjective a product owns modifies the noun after it, and that
/// noun is asked about too.
#[test]
fn the_noun_an_owned_adjective_modifies_is_a_subject() {
    let keys =
        subject_terms("How many replicas does PostgreSQL's automatic sharding create by default?");
    assert!(keys.contains(&"sharding".to_string()), "{keys:?}");
    assert!(keys.contains(&"automatic".to_string()), "{keys:?}");
    let keys = subject_terms("How does PostgreSQL's logical replication handle DDL?");
    assert!(keys.contains(&"replication".to_string()), "{keys:?}");
    // A name owned is no adjective: nothing after it is added.
    let keys = subject_terms("What does Python's secrets module offer?");
    assert!(!keys.contains(&"module".to_string()), "{keys:?}");
    assert!(!keys.contains(&"offer".to_string()), "{keys:?}");
}

/// Probe set (`probe-none-pg-query-cache`): the noun a hyphenated owned adjective modifies is
/// the subject, as one phrase; a kind of thing ends it.
#[test]
fn the_noun_after_an_owned_built_in_is_asked_as_one_phrase() {
    let terms = subject_terms("How do I enable PostgreSQL's built-in query result cache?");
    assert!(
        terms.contains(&"query-result-cache".to_string()),
        "{terms:?}"
    );
    let terms = subject_terms("What does Python's built-in round function do with halves?");
    assert!(terms.contains(&"round".to_string()), "{terms:?}");
    assert!(!terms.iter().any(|t| t.contains("function")), "{terms:?}");
}

/// Own hostile question (Python's JIT): a FAQ's answer is one passage with its question.
#[test]
fn a_faq_answer_is_one_passage_with_its_question() {
    let p = split(
        "## FAQ\n\nQ: Is there a JIT compiler?\n\nA: No. We're still exploring other optimizations.\n\nQ: Why?\n",
    );
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(
        p[0].text,
        "Q: Is there a JIT compiler? A: No. We're still exploring other optimizations."
    );
}

/// My own demo question: a product's search reads the result whose snippet holds its part.
#[test]
fn a_products_results_are_ranked_by_the_terms_of_its_part_they_hold() {
    let part = "how many columns can a PostgreSQL table have at most";
    let products = vec!["python".to_string(), "postgresql".to_string()];
    let codes = held_part_terms(
        part,
        &products,
        "Appendix A. PostgreSQL Error Codes\nTable A.1 lists all the error codes defined in PostgreSQL 15.",
    );
    let basics = held_part_terms(
        part,
        &products,
        "5.1. Table Basics\nThere is a limit on how many columns a table can contain.",
    );
    assert!(basics > codes, "{basics} vs {codes}");
    // The product's name is no term of its part.
    assert_eq!(held_part_terms("PostgreSQL", &products, "PostgreSQL"), 0);
}

#[test]
fn words_naming_the_documentation_are_no_topic() {
    // Every page of the tree is titled "... documentation"; the task's word for where to look
    // ranked the page on downloading the docs above the asked module's own.
    let p = split(
        "# Download Python 3.11 Documentation\n\nThe documentation of Python 3.11 can be downloaded as a documentation archive.\n\n\
         # tomllib\n\nThis module provides an interface for parsing TOML. It does not support writing TOML.\n",
    );
    let s = rank(&p, "toml in Python 3.11 documentation");
    assert!(s[1] > s[0], "{s:?}");
    assert_eq!(keyword_query("toml in the Python docs"), "toml python");
}

/// Tuning set, `multi-py311-taskgroup-whatsnew` in deep mode: "How do you use asyncio for
/// structured concurrency?" was answered from `uncancel()` and `run_coroutine_threadsafe()`,
/// while the page's "Task Groups" section, which shares no word with the task, went unread. The
/// page itself names Task Groups as an element of structured concurrency.
#[test]
fn instances_a_page_names_of_the_asked_phrase_rank_with_it() {
    let page = "# Coroutines and Tasks\n\n## Task Groups\n\nAn asyncio task group combines a task creation API with a convenient and reliable way to wait for all tasks in the group to finish.\n\n## Scheduling From Other Threads\n\nSubmit a coroutine to the given asyncio event loop. Thread-safe.\n\n## Task Object\n\nThere should be no need to call uncancel() in asyncio code: in particular, if a Task gets successfully uncancelled, this allows for elements of structured concurrency like Task Groups and `asyncio.timeout()` to continue running.\n";
    let passages = split(page);
    let query = "How do you use asyncio for structured concurrency?";
    let scores = rank(&passages, query);
    let at = |h: &str| {
        passages
            .iter()
            .position(|p| p.heading_path.last().is_some_and(|l| l == h))
            .unwrap()
    };
    assert!(
        scores[at("Task Groups")] > scores[at("Scheduling From Other Threads")],
        "{scores:?}"
    );
    // One asked word before the marker names too broad a kind.
    let broad = "# Tasks\n\n## Task Groups\n\nTask groups wait for all tasks.\n\n## Threads\n\nUse asyncio for a callback from another thread.\n\n## Notes\n\nSome concurrency like Task Groups is structured.\n";
    let passages = split(broad);
    let scores = rank(&passages, "How do you use asyncio concurrency?");
    let groups = passages
        .iter()
        .position(|p| p.heading_path.last().is_some_and(|l| l == "Task Groups"))
        .unwrap();
    assert_eq!(scores[groups], 0.0, "{scores:?}");
}
