use super::*;
use crate::research::machine::state::PageExtract;
use crate::research::reading::passages::{rank, split};
use statements::{labelled, leads, quoted_list, uncited_best};

#[test]
fn lead_ins_that_only_introduce_a_list_are_not_passages() {
    assert!(is_lead_in(
        "The csv module defines the following functions:"
    ));
    assert!(is_lead_in(
        "has_header(sample): The csv module defines the following constants:"
    ));
    assert!(!is_lead_in(
        "Create an object that operates like a regular reader but maps the information in each row to a dict."
    ));
    let long = "A long sentence that explains quite a lot about the reader and the writer objects before it ends with a colon:";
    assert!(!is_lead_in(long));
    assert!(is_lead_in("New in version 3.11."));
    assert!(is_lead_in("*Changed in version 3.8.*"));
    assert!(!is_lead_in(
        "Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4)."
    ));
    // A definition before "For example:" is evidence (typing.Self's was filtered out).
    assert!(!is_lead_in(
        "Special type to represent the current enclosed class. For example:"
    ));
}

#[test]
fn the_asked_for_entrys_definition_outranks_its_code_samples() {
    let page = PageExtract {
        url: "http://docs/typing.html".into(),
        title: "typing".into(),
        text: "§ typing › Special types › typing.Self\nSpecial type to represent the current enclosed class. For example:\n\n```\nclass Foo:\n   def return_self(self) -> Self:\n      return self\n```\n\nThis annotation is semantically equivalent to a TypeVar bound to the class of self.".into(),
    };
    let items = number_passages(
        &[page],
        "What is typing.Self and in which Python version was it added?",
        4000,
    );
    assert!(
        items[0].text.contains("Special type to represent"),
        "{items:#?}"
    );
}

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
    assert!(
        items[0].text.starts_with("json.loads(s): Deserialize"),
        "{items:#?}"
    );
    assert!(items.iter().all(|i| !i.text.starts_with('§')));
    let shown = render_passages(&items);
    assert!(
        shown.starts_with("[1] (json — JSON encoder and decoder › "),
        "{shown}"
    );
}

#[test]
fn an_entrys_definition_outranks_its_details_and_the_title_is_named_once() {
    let page = PageExtract {
        url: "http://docs/json.html".into(),
        title: "json".into(),
        text: "§ json › json.load(fp, *, parse_int=None)\nDeserialize fp (a file containing a JSON document) to a Python object.\n\nparse_int, if specified, is called to decode every JSON int of the decoded JSON document.".into(),
    };
    let task = "How do I decode JSON with the json module?";
    // Unboosted, the detail matches better than the definition ...
    let passages = split(&breadcrumbs_as_headings(&page.text));
    let scores = rank(&passages, task);
    assert!(scores[1] > scores[0], "{scores:?}");
    // ... and the definition is still numbered first.
    let items = number_passages(&[page], task, 4000);
    assert!(items[0].text.contains("Deserialize fp"), "{items:#?}");
    let shown = render_passages(&items);
    assert!(
        shown.starts_with("[1] (json › json.load(fp, *, parse_int=None))"),
        "{shown}"
    );
}

/// Probe set (`git log --follow`): the asked-for option's definition scored under a fifth of
/// the best passage, which repeats the question's words, and was dropped as noise.
#[test]
fn the_asked_for_entrys_definition_is_shown_below_the_noise_floor() {
    let description = "The limitation of git log: git log lists commits, and every limitation of git log is noted here. ".repeat(2);
    let others: String = (0..8)
        .map(|i| format!("§ git-log(1) › OPTIONS › --other{i}\nPrint another kind of output number {i} for each commit that follows.\n\n"))
        .collect();
    let page = PageExtract {
        url: "http://docs/git-log.html".into(),
        title: "git-log(1)".into(),
        text: format!(
            "§ git-log(1) › DESCRIPTION\n{description}\n\n§ git-log(1) › OPTIONS › --follow\nContinue listing the history of a file beyond renames (works only for a single file).\n\n{others}"
        ),
    };
    let task = "What does git log --follow do, and what is its limitation?";
    let passages = split(&breadcrumbs_as_headings(&page.text));
    let plain = rank(&passages, task);
    let best = plain.iter().cloned().fold(0.0, f64::max);
    let low = passages
        .iter()
        .position(|p| p.text.starts_with("Continue listing"))
        .expect("the definition is a passage");
    assert!(plain[low] < best * 0.2, "{plain:?}");
    let items = number_passages(&[page], task, 4000);
    assert!(
        items.iter().any(|n| n.text.starts_with("Continue listing")),
        "{items:#?}"
    );
}

/// Probe set (`git gc --auto`): git-config(1) holds git-gc(1)'s `gc.*` entries word for word;
/// the same paragraph is numbered once, from the page ranked first.
#[test]
fn the_same_paragraph_on_two_pages_is_one_passage() {
    let entry = "When there are more than this many packs in the repository, `git gc --auto` consolidates them into one larger pack. The default value is 50.";
    let gc = PageExtract {
        url: "http://docs/git-gc.html".into(),
        title: "git-gc(1)".into(),
        text: format!("§ git-gc(1) › CONFIGURATION › gc.autoPackLimit\n{entry}"),
    };
    let config = PageExtract {
        url: "http://docs/git-config.html".into(),
        title: "git-config(1)".into(),
        // Wrapped differently: the same words all the same.
        text: format!(
            "§ git-config(1) › Variables › gc.autoPackLimit\n{}",
            entry.replace(" into ", "\n        into ")
        ),
    };
    let items = number_passages(&[gc, config], "How many packs trigger git gc --auto?", 4000);
    assert_eq!(items.len(), 1, "{items:#?}");
    assert_eq!(items[0].url, "http://docs/git-gc.html");
}

/// Probe set (`git describe`): the command's page opens with what it outputs, in words the
/// question does not use; that lead is shown though it scores under the noise floor.
#[test]
fn the_lead_of_the_asked_commands_page_is_shown_below_the_noise_floor() {
    let strategy = "By default git describe only shows annotated tags: git describe tags, git describe output, and the default tags git describe considers. ".repeat(4);
    let page = |title: &str| PageExtract {
        url: format!("http://docs/{title}.html"),
        title: title.into(),
        text: format!(
            "§ {title} › DESCRIPTION\nThe command finds the most recent tag that is reachable from a commit.\n\n§ {title} › SEARCH STRATEGY\n{strategy}"
        ),
    };
    let task = "What does git describe output, and which tags does it consider by default?";
    let passages = split(&breadcrumbs_as_headings(&page("git-describe(1)").text));
    let plain = rank(&passages, task);
    let best = plain.iter().cloned().fold(0.0, f64::max);
    assert!(plain[0] < best * 0.2, "{plain:?}");
    let items = number_passages(&[page("git-describe(1)")], task, 4000);
    assert!(
        items
            .iter()
            .any(|n| n.text.starts_with("The command finds")),
        "{items:#?}"
    );
    // Below eight passages that outrank it, it keeps a slot.
    let crowded = PageExtract {
        url: "http://docs/git-describe.html".into(),
        title: "git-describe(1)".into(),
        text: std::iter::once(
            "§ git-describe(1) › DESCRIPTION\nThe command finds the most recent tag that is reachable from a commit.".to_string(),
        )
        .chain((0..10).map(|i| {
            format!("§ git-describe(1) › OPTIONS › --opt{i}\nBy default git describe output uses tags, and option {i} changes which tags git describe considers by default.")
        }))
        .collect::<Vec<_>>()
        .join("\n\n"),
    };
    let items = number_passages(&[crowded], task, 40_000);
    assert_eq!(items.len(), 8);
    assert!(
        items
            .iter()
            .any(|n| n.text.starts_with("The command finds")),
        "{items:#?}"
    );
    // On a page that does not document the asked-for command, a lead is no definition.
    let items = number_passages(&[page("git-tag(1)")], task, 4000);
    assert!(
        !items
            .iter()
            .any(|n| n.text.starts_with("The command finds")),
        "{items:#?}"
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
    assert!(md.contains("> json.loads(s): Deserialize s"), "{md}");
}

#[test]
fn a_copied_passage_list_becomes_cited_sentences_without_its_labels() {
    let items = number_passages(&pages(), "decode a JSON document", 4000);
    let copied = render_passages(&items);
    let md = assemble(&copied, &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("› json.loads(s))"), "{md}");
    assert!(!summary.contains("[1]") && !summary.contains("[2]"), "{md}");
    assert!(
        summary.contains(
            "to a Python object ([json — JSON encoder and decoder](http://docs/json.html))."
        ),
        "{md}"
    );
}

#[test]
fn navigation_links_are_not_evidence() {
    assert_eq!(
        prose_words("[Next](plpython-envar.html \"46.11. Environment Variables\")"),
        0
    );
    assert_eq!(prose_words("See [json](x.html) for how loads works."), 5);
    let pages = vec![PageExtract {
        url: "http://docs/plpython.html".into(),
        title: "Python 2 vs. Python 3".into(),
        text: "[Next](plpython-envar.html \"Python Environment Variables\")\n\n[Prev](a.html \"Python\")".into(),
    }];
    assert!(number_passages(&pages, "Which pickle protocol does Python use?", 4000).is_empty());
}

#[test]
fn only_a_call_shape_is_a_signature() {
    assert!(looks_like_signature("json.loads(s, *, cls=None)"));
    assert!(looks_like_signature("`len(s)`"));
    assert!(!looks_like_signature("search() vs. match()"));
    assert!(!looks_like_signature("Basic Usage"));
    assert!(!looks_like_signature("What (not) to do"));
}

#[test]
fn a_sentence_its_passage_does_not_support_is_dropped() {
    let items = number_passages(&pages(), "decode a JSON document", 4000);
    let md = assemble(
        "json.loads deserializes a str containing a JSON document to a Python object [1]. SQLAlchemy's create_engine has a default pool_size of 10 [1].",
        &items,
    )
    .unwrap();
    assert!(!md.contains("pool_size"), "{md}");
    assert!(md.contains("json.loads deserializes"), "{md}");
    assert_eq!(
        assemble("The default pool_size of create_engine is 10 [1].", &items),
        None
    );
}

/// The JSON-form tests' passages: [1] json.loads, [2] json.load (the pickle passage may be
/// shown as [3]).
fn json_items() -> Vec<Numbered> {
    let items = number_passages(&pages(), "decode a JSON document", 4000);
    assert!(items[0].text.starts_with("json.loads(s)"), "{items:#?}");
    assert!(items[1].text.starts_with("json.load(fp)"), "{items:#?}");
    items
}

#[test]
fn a_json_answer_becomes_the_same_cited_report() {
    let items = json_items();
    let answer = r#"{"points": [
        {"passages": [1], "sentence": "json.loads deserializes a str containing a JSON document to a Python object."},
        {"passages": [2], "sentence": "json.load deserializes a text file containing a JSON document"}
    ]}"#;
    let points = parse_points(answer, items.len()).unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0].passages, vec![1]);
    let md = assemble_json(answer, &items).unwrap();
    assert!(
        md.starts_with("## Summary\n\njson.loads deserializes a str containing a JSON document to a Python object ([json — JSON encoder and decoder](http://docs/json.html)). json.load deserializes"),
        "{md}"
    );
    // The second sentence had no stop: it gets one after its citation.
    assert!(md.contains("containing a JSON document ([json — JSON encoder and decoder](http://docs/json.html)).\n"), "{md}");
    assert!(md.contains("## Evidence"), "{md}");
    assert!(md.contains("> json.loads(s): Deserialize s"), "{md}");
    assert!(md.contains("> json.load(fp): Deserialize fp"), "{md}");
    // The same points in the [n] form make the same report.
    let prose = "json.loads deserializes a str containing a JSON document to a Python object [1]. json.load deserializes a text file containing a JSON document [2].";
    assert_eq!(assemble(prose, &items), Some(md));
}

#[test]
fn an_unusable_answer_leaves_the_numbered_passages_quoted_best_first() {
    let items = json_items();
    let md = quoted_report("", &items);
    // The best passage's statement first, quoted and cited; then why the rest is quotes.
    assert!(
        md.starts_with("## Summary\n\njson.loads: “Deserialize s (a str instance containing a JSON document) to a Python object” ([json — JSON encoder and decoder](http://docs/json.html)). The model did not write a usable report"),
        "{md}"
    );
    let first = md
        .find("> json.loads(s): Deserialize s")
        .expect("passage 1");
    let second = md
        .find("> json.load(fp): Deserialize fp")
        .expect("passage 2");
    assert!(first < second, "{md}");
    assert!(md.contains("(http://docs/json.html)"), "{md}");
    // Two passages of one entry: one link line, both quotes, nothing cut by the report's
    // repetition guard.
    let mut twice = json_items();
    twice[1].heading = twice[0].heading.clone();
    twice[1].url = twice[0].url.clone();
    let md = crate::research::writing::report::tidy_model_markdown(&quoted_report("", &twice));
    assert!(md.contains("> json.load(fp): Deserialize fp"), "{md}");
    assert_eq!(md.matches("- [").count(), 1, "{md}");
}

#[test]
fn the_best_passage_is_shown_when_the_summary_left_it_out() {
    let items = json_items();
    let md = assemble(
        "json.load deserializes a text file containing a JSON document [2].",
        &items,
    )
    .unwrap();
    let best = md
        .find("## Best-matching passage (not cited above)")
        .expect("the best passage");
    assert!(
        md[best..].contains("> json.loads(s): Deserialize s"),
        "{md}"
    );
    // Another paragraph of a cited entry: the section survives the report's repetition guard
    // (it was cut there: both quoted the entry under the same link line).
    let mut same_entry = json_items();
    same_entry[1].heading = same_entry[0].heading.clone();
    same_entry[1].url = same_entry[0].url.clone();
    let md = assemble(
        "json.load deserializes a text file containing a JSON document [2].",
        &same_entry,
    )
    .unwrap();
    let md = crate::research::writing::report::tidy_model_markdown(&md);
    let best = md
        .find("## Best-matching passage (not cited above)")
        .expect("the best passage survives the repetition guard");
    assert!(
        md[best..].contains("> json.loads(s): Deserialize s"),
        "{md}"
    );
    // Cited, it is in the evidence and not repeated.
    let md = assemble(
        "json.loads deserializes a str containing a JSON document to a Python object [1].",
        &items,
    )
    .unwrap();
    assert!(!md.contains("Best-matching passage"), "{md}");
}

#[test]
fn each_question_of_a_two_part_task_gets_its_best_passage_quoted() {
    let items = vec![
        numbered(
            1,
            "http://docs/iso.html",
            "13.2. Transaction Isolation",
            "The Serializable isolation level works exactly the same as Repeatable Read except that it also monitors for serialization anomalies.",
        ),
        numbered(
            2,
            "http://docs/iso.html",
            "13.2. Transaction Isolation",
            "In PostgreSQL, you can request any of the four standard transaction isolation levels, but internally only three distinct isolation levels are implemented.",
        ),
        numbered(
            3,
            "http://docs/iso.html",
            "13.2.2. Repeatable Read",
            "The Repeatable Read isolation level only sees data committed before the transaction began.",
        ),
        numbered(
            4,
            "http://docs/mvcc.html",
            "13. Concurrency Control",
            "This chapter describes the behavior of the PostgreSQL database system.",
        ),
    ];
    let task = "What isolation levels does PostgreSQL support and how does Serializable differ from Repeatable Read?";
    let md = assemble_for(
        task,
        "Serializable works exactly the same as Repeatable Read except that it also monitors for serialization anomalies [1].",
        &items,
    )
    .unwrap();
    let md = crate::research::writing::report::tidy_model_markdown(&md);
    // The first question's passage reaches the reader: the model's sentence does not name the
    // isolation levels the task asks about, so that passage's statement leads the summary.
    let summary = md.split("## Evidence").next().unwrap_or_default();
    assert!(
        summary.contains("four standard transaction isolation levels"),
        "{md}"
    );
    assert!(
        !md.contains("behavior of the PostgreSQL database system"),
        "{md}"
    );
    // One question, its best passage cited: nothing more is quoted.
    let md = assemble_for(
        "How does Serializable differ from Repeatable Read?",
        "Serializable works exactly the same as Repeatable Read except that it also monitors for serialization anomalies [1].",
        &items,
    )
    .unwrap();
    assert!(!md.contains("Best-matching"), "{md}");
}

#[test]
fn the_explanation_on_the_asked_names_page_is_shown_before_notes_elsewhere() {
    let copy = PageExtract {
        url: "http://docs/copy.html".into(),
        title: "copy — Shallow and deep copy operations".into(),
        text: "§ copy › copy.copy(x)\nReturn a shallow copy of *x*.\n\n§ copy › copy.deepcopy(x)\nReturn a deep copy of *x*.\n\n§ copy › exception copy.Error\nRaised for module specific errors.\n\nThe difference between shallow and deep copying is only relevant for compound objects:\n\n*   A *shallow copy* constructs a new compound object and inserts *references* into it.\n\n*   A *deep copy* constructs a new compound object and, recursively, inserts *copies* into it.".into(),
    };
    let mut pages = vec![copy];
    for (i, class) in [
        "Compress",
        "Decompress",
        "Match",
        "Pattern",
        "Other",
        "More",
    ]
    .iter()
    .enumerate()
    {
        pages.push(PageExtract {
            url: format!("http://docs/notes{i}.html"),
            title: format!("notes{i}"),
            text: format!("§ notes › {class}.copy()\nChanged in version 3.8: Added `copy.copy()` and `copy.deepcopy()` support to {class} objects."),
        });
    }
    let items = number_passages(
        &pages,
        "What is the difference between copy.copy() and copy.deepcopy() in Python?",
        6000,
    );
    assert!(
        items
            .iter()
            .any(|i| i.text.contains("A *shallow copy* constructs")),
        "{items:#?}"
    );
    let first_note = items
        .iter()
        .position(|i| i.text.contains("Changed in version"));
    let explanation = items
        .iter()
        .position(|i| i.text.contains("shallow copy* constructs"));
    assert!(
        first_note.is_none() || explanation < first_note,
        "{items:#?}"
    );
}

#[test]
fn a_repeated_point_is_said_once() {
    let items = json_items();
    let answer = r#"{"points": [
        {"passages": [1], "sentence": "json.loads deserializes a str containing a JSON document to a Python object."},
        {"passages": [1], "sentence": "json.loads deserializes a str containing a JSON document to a Python object."}
    ]}"#;
    let md = assemble_json(answer, &items).unwrap();
    assert_eq!(md.matches("json.loads deserializes").count(), 1, "{md}");
    // Cut short, or spelled apart: the same point (my own demo question's `git stash pop`
    // sentence came twice, the second cut at "i.e").
    let answer = r#"{"points": [
        {"passages": [1], "sentence": "json.loads deserializes a str containing a JSON document to a Python object."},
        {"passages": [1], "sentence": "Json-loads deserializes a str containing a JSON document."}
    ]}"#;
    let md = assemble_json(answer, &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert_eq!(summary.matches("deserializes").count(), 1, "{md}");
}

#[test]
fn fenced_json_with_prose_around_it_string_ids_and_a_bare_array_are_understood() {
    let items = json_items();
    let fenced = "Here is the answer:\n```json\n{\"points\": [{\"passages\": [\"[1]\"], \"sentence\": \"json.loads deserializes a str containing a JSON document [1].\"}]}\n```\nHope this helps.";
    let md = assemble_json(fenced, &items).unwrap();
    assert!(
        md.contains("json.loads deserializes a str containing a JSON document ([json"),
        "{md}"
    );
    // The model's own marker is gone from the sentence: the engine made the citation.
    assert!(
        !md.split("## Evidence").next().unwrap().contains("[1]"),
        "{md}"
    );

    let bare = r#"[{"passage": "2", "text": "json.load deserializes a text file containing a JSON document."}]"#;
    let points = parse_points(bare, items.len()).unwrap();
    assert_eq!(
        points,
        vec![Point {
            passages: vec![2],
            sentence: "json.load deserializes a text file containing a JSON document.".into(),
            written_for: None,
        }]
    );
    assert!(
        assemble_json(bare, &items)
            .unwrap()
            .contains("> json.load(fp)")
    );

    let mixed = r#"{"points": [{"passages": [1.0, "2", "1, 2"], "sentence": "x y z"}]}"#;
    assert_eq!(
        parse_points(mixed, items.len()).unwrap()[0].passages,
        vec![1, 2]
    );

    // Cut off at the output cap: the complete points are kept.
    let cut = r#"{"points": [{"passages": [1], "sentence": "json.loads deserializes a str containing a JSON document."}, {"passages": [2], "sente"#;
    let points = parse_points(cut, items.len()).unwrap();
    assert_eq!(points.len(), 1, "{points:?}");
}

#[test]
fn invented_passage_ids_cite_nothing() {
    let items = json_items();
    let invented = r#"{"points": [{"passages": [9, 0], "sentence": "json.loads deserializes a str containing a JSON document."}]}"#;
    assert_eq!(parse_points(invented, items.len()), Some(vec![]));
    assert_eq!(assemble_json(invented, &items), None);
    // A real id next to an invented one still counts.
    let partly = r#"{"points": [{"passages": [9, 1], "sentence": "json.loads deserializes a str containing a JSON document."}]}"#;
    let md = assemble_json(partly, &items).unwrap();
    assert!(md.contains("> json.loads(s)"), "{md}");
    assert!(!md.contains("[9]"), "{md}");
}

#[test]
fn an_unsupported_json_sentence_is_dropped_and_the_best_cited_passage_gets_the_citation() {
    let items = json_items();
    let answer = r#"{"points": [
        {"passages": [1], "sentence": "SQLAlchemy's create_engine has a default pool_size of 10."},
        {"passages": [1, 2], "sentence": "json.load deserializes fp, a text file containing a JSON document, to a Python object."}
    ]}"#;
    let md = assemble_json(answer, &items).unwrap();
    assert!(!md.contains("pool_size"), "{md}");
    // Cited [1, 2], but only the json.load passage says "text file" and "fp": it is quoted.
    let evidence = md
        .split("## Best-matching passage")
        .next()
        .unwrap_or_default();
    assert!(evidence.contains("> json.load(fp)"), "{md}");
    assert!(!evidence.contains("> json.loads(s)"), "{md}");
    let unsupported = r#"{"points": [{"passages": [1], "sentence": "The default pool_size of create_engine is 10."}]}"#;
    assert_eq!(assemble_json(unsupported, &items), None);
}

#[test]
fn garbage_is_no_json_answer_and_prose_falls_back_to_the_numbered_form() {
    let items = json_items();
    for garbage in [
        "",
        "I cannot answer that.",
        "{not json",
        "[1] [2]",
        r#"{"tool": "search", "arguments": {}}"#,
        r#"{"points": "none"}"#,
    ] {
        assert_eq!(parse_points(garbage, items.len()), None, "{garbage}");
    }
    assert_eq!(assemble_json("I cannot answer that.", &items), None);
    // A model that ignored the JSON request and wrote the [n] form is still understood.
    let md = assemble_json(
        "json.loads deserializes a str containing a JSON document to a Python object [1].",
        &items,
    )
    .unwrap();
    assert!(md.contains("> json.loads(s)"), "{md}");
}

#[test]
fn the_schema_names_only_the_shown_passages_and_caps_the_answer() {
    let s = answer_schema(3);
    assert_eq!(s.name, "grounded_answer");
    assert!(!s.strict);
    let point = &s.schema["properties"]["points"]["items"];
    assert_eq!(
        point["properties"]["passages"]["items"]["enum"],
        json!([1, 2, 3])
    );
    assert_eq!(point["properties"]["passages"]["maxItems"], json!(3));
    assert_eq!(point["properties"]["sentence"]["maxLength"], json!(300));
    assert_eq!(
        s.schema["properties"]["points"]["maxItems"],
        json!(MAX_POINTS)
    );
    // Three points at least, or one per passage shown when fewer.
    assert_eq!(s.schema["properties"]["points"]["minItems"], json!(3));
    assert_eq!(
        answer_schema(2).schema["properties"]["points"]["minItems"],
        json!(2)
    );
    assert_eq!(
        answer_schema(1).schema["properties"]["points"]["minItems"],
        json!(1)
    );
    // Generation follows property order: the passages are chosen before the sentence.
    let keys: Vec<&String> = point["properties"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["passages", "sentence"]);
}

/// Passages of Python's json documentation as the engine numbers them.
fn json_doc_items() -> Vec<Numbered> {
    let title = "json — JSON encoder and decoder";
    let item = |number: usize, heading: &str, text: &str| Numbered {
        number,
        url: "https://docs.python.org/3/library/json.html".into(),
        title: title.into(),
        heading: heading.into(),
        text: text.into(),
    };
    vec![
        item(
            1,
            "Basic Usage › json.loads(s, *, cls=None, object_hook=None, parse_float=None, parse_int=None, parse_constant=None, object_pairs_hook=None, **kw)",
            "json.loads(s, *, cls=None, object_hook=None, parse_float=None, parse_int=None, parse_constant=None, object_pairs_hook=None, **kw): Deserialize s (a str, bytes or bytearray instance containing a JSON document) to a Python object using this conversion table.",
        ),
        item(
            2,
            "Basic Usage › json.load(fp, *, cls=None, object_hook=None, parse_float=None, parse_int=None, parse_constant=None, object_pairs_hook=None, **kw)",
            "json.load(fp, *, cls=None, object_hook=None, parse_float=None, parse_int=None, parse_constant=None, object_pairs_hook=None, **kw): Deserialize fp (a .read()-supporting text file or binary file containing a JSON document) to a Python object using this conversion table.",
        ),
        item(
            3,
            "Basic Usage › json.dumps(obj, *, skipkeys=False, ensure_ascii=True, check_circular=True, allow_nan=True, cls=None, indent=None, separators=None, default=None, sort_keys=False, **kw)",
            "json.dumps(obj, *, skipkeys=False, ensure_ascii=True, check_circular=True, allow_nan=True, cls=None, indent=None, separators=None, default=None, sort_keys=False, **kw): Serialize obj to a JSON formatted str using this conversion table.",
        ),
        item(
            4,
            "",
            "Decoding JSON:\n>>> import json\n>>> json.loads('[\"foo\", {\"bar\":[\"baz\", null, 1.0, 2]}]')\n['foo', {'bar': ['baz', None, 1.0, 2]}]",
        ),
    ]
}

#[test]
fn the_real_0_5b_models_json_answer_is_grounded() {
    // qwen2.5-coder-0.5b-instruct (q4_k_m) on tools/llm-server, temperature 0, held to
    // answer_schema(4) by the server's grammar, asked "How do I decode JSON with the json
    // module in Python?" over these passages.
    let answer = r#"{"points": [{"passages": [1, 2, 3], "sentence": "To decode JSON with the json module in Python, you can use the `json.loads()` function. This function takes a string or bytes object containing a JSON document and returns a Python object."}]}"#;
    let items = json_doc_items();
    let md = assemble_json(answer, &items).unwrap();
    assert!(
        md.starts_with("## Summary\n\nTo decode JSON with the json module in Python, you can use the `json.loads()` function."),
        "{md}"
    );
    // Of the three passages cited, json.loads's supports the sentence best and is quoted;
    // json.dumps's (cited too) is not.
    assert!(md.contains("> json.loads(s, *"), "{md}");
    assert!(!md.contains("> json.dumps"), "{md}");
    assert_eq!(md.matches("\n> ").count(), 1, "{md}");
}

#[test]
fn an_answer_citing_no_passage_is_not_a_grounded_report() {
    let items = number_passages(&pages(), "decode a JSON document", 4000);
    assert_eq!(assemble("JSON is decoded with json.loads.", &items), None);
    assert_eq!(assemble("See [0] and [x].", &items), None);
}

fn numbered(number: usize, url: &str, heading: &str, text: &str) -> Numbered {
    Numbered {
        number,
        url: url.to_string(),
        title: "20.3. Connections and Authentication".to_string(),
        heading: heading.to_string(),
        text: text.to_string(),
    }
}

/// The 1.5B model's answer to "the default of max_connections, and the slots reserved for
/// superusers": one sentence over both settings' passages; each alone lacks the other's number.
#[test]
fn a_sentence_two_passages_of_a_page_support_together_is_kept() {
    let page = "http://docs/runtime-config-connection.html";
    let items = vec![
        numbered(
            1,
            page,
            "max_connections (integer)",
            "Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections.",
        ),
        numbered(
            2,
            page,
            "superuser_reserved_connections (integer)",
            "Determines the number of connection slots that are reserved for connections by PostgreSQL superusers. The default value is three connections.",
        ),
    ];
    let sentence = "The default value of max_connections is 100 connections, and three connection slots are reserved for superusers.";
    let answer = format!(r#"{{"points": [{{"passages": [1, 2], "sentence": "{sentence}"}}]}}"#);
    let md = assemble_json(&answer, &items).expect("kept");
    assert!(md.contains("The default value of max_connections is 100 connections, and three connection slots are reserved for superusers ([20.3. Connections and Authentication](http://docs/runtime-config-connection.html))."), "{md}");
    assert!(md.contains("> Determines the maximum number"), "{md}");
    assert!(
        md.contains("> Determines the number of connection slots"),
        "{md}"
    );
    // Neither passage supports it alone: cited one at a time, it is dropped.
    for n in [1, 2] {
        let one = format!(r#"{{"points": [{{"passages": [{n}], "sentence": "{sentence}"}}]}}"#);
        assert_eq!(assemble_json(&one, &items), None);
    }
    // Passages of two pages are not joined: the run's check verifies each cited page alone.
    let mut two_pages = items.clone();
    two_pages[1].url = "http://docs/other.html".to_string();
    assert_eq!(assemble_json(&answer, &two_pages), None);
}

/// The 0.5B model's answer to the defaults of work_mem and maintenance_work_mem, shown six
/// passages of one page: a subject from one passage and a number from another passage.
#[test]
fn a_subject_and_a_number_from_two_passages_are_not_joined() {
    let page = "http://docs/runtime-config-resource.html";
    let items = vec![
        numbered(
            1,
            page,
            "maintenance_work_mem (integer)",
            "Note that when autovacuum runs, up to autovacuum_max_workers times this memory may be allocated, so be careful not to set the default value too high.",
        ),
        numbered(
            3,
            page,
            "maintenance_work_mem (integer)",
            "Specifies the maximum amount of memory to be used by maintenance operations. It defaults to 64 megabytes (64MB).",
        ),
        numbered(
            2,
            page,
            "hash_mem_multiplier (floating point)",
            "Higher settings may be effective where work_mem has already been increased to 40MB or more; the default value is 2.0.",
        ),
    ];
    let wrong = r#"{"points": [{"passages": [1, 2], "sentence": "The default value of maintenance_work_mem is 40MB."}]}"#;
    assert_eq!(assemble_json(wrong, &items), None);
    let right = r#"{"points": [{"passages": [1, 2, 3], "sentence": "The default value of maintenance_work_mem is 64MB."}]}"#;
    let md = assemble_json(right, &items).expect("kept");
    // Cited and quoted as evidence: only the passage that says it.
    let evidence = md.split("## Best-matching").next().unwrap_or(&md);
    assert!(evidence.contains("> Specifies the maximum amount"), "{md}");
    assert!(!evidence.contains("> Higher settings"), "{md}");
    assert!(!evidence.contains("> Note that when autovacuum"), "{md}");
}

/// The 0.5B model's answer to "What does the timeout parameter of socket.create_connection() do?":
/// it copied the passage's sentence with a "not" added, and cited the paragraph
/// beside it. Every other word was on the page.
#[test]
fn a_sentence_turning_its_passage_round_is_dropped() {
    let items = vec![Numbered {
        number: 1,
        url: "http://docs/library/socket.html".to_string(),
        title: "socket — Low-level networking interface".to_string(),
        heading: "socket.create_connection(address, timeout=GLOBAL_DEFAULT, source_address=None, *, all_errors=False)".to_string(),
        text: "Connect to a TCP service listening on the internet address, and return the socket object. Passing the optional timeout parameter will set the timeout on the socket instance before attempting to connect. If no timeout is supplied, the global default timeout setting returned by getdefaulttimeout() is used.".to_string(),
    }];
    let flipped = r#"{"points": [{"passages": [1], "sentence": "The timeout parameter does not set the timeout on the socket instance before attempting to connect."}]}"#;
    assert_eq!(assemble_json(flipped, &items), None);
    // What the demo printed: the same sentence cited to the entry's paragraph about errors,
    // which never speaks of setting anything.
    let mut with_errors = items.clone();
    with_errors.push(Numbered {
        number: 2,
        text: "socket.create_connection(address, timeout=GLOBAL_DEFAULT, source_address=None): When a connection cannot be created, an exception is raised. By default, it is the exception from the last address in the list. If all_errors is True, it is an ExceptionGroup containing the errors of all attempts.".to_string(),
        ..items[0].clone()
    });
    let cited_beside = r#"{"points": [{"passages": [2], "sentence": "The timeout parameter of socket.create_connection() does not set the timeout on the socket instance before attempting to connect."}]}"#;
    assert_eq!(assemble_json(cited_beside, &with_errors), None);
    // The model's whole answer, five times over: the point's right second sentence is kept.
    let point = r#"{"passages": [1], "sentence": "The timeout parameter of Python's socket.create_connection() does not set the timeout on the socket instance before attempting to connect. If no timeout is supplied, the global default timeout setting returned by `getdefaulttimeout()` is used."}"#;
    let answer = format!(r#"{{"points": [{point}, {point}, {point}]}}"#);
    let md = assemble_json(&answer, &items).expect("the right sentence is kept");
    assert!(!md.contains("does not set"), "{md}");
    assert_eq!(md.matches("If no timeout is supplied, the global default timeout setting returned by `getdefaulttimeout()` is used (").count(), 1, "{md}");
    let right = r#"{"points": [{"passages": [1], "sentence": "Passing the timeout parameter sets the timeout on the socket instance before attempting to connect."}, {"passages": [1], "sentence": "If no timeout is supplied, the global default timeout setting returned by getdefaulttimeout() is used."}]}"#;
    let md = assemble_json(right, &items).expect("kept");
    assert!(
        md.contains("Passing the timeout parameter sets the timeout"),
        "{md}"
    );
    assert!(md.contains("If no timeout is supplied"), "{md}");
}

/// The 1.5B model's answer to "What is the default value of max_connections in PostgreSQL 15,
/// ...?": right, but "15" is not in the passage. The question's own "PostgreSQL 15"
/// is context; another number the passage lacks still drops the sentence.
#[test]
fn a_version_restated_from_the_question_needs_no_backing() {
    let page = "http://docs/runtime-config-connection.html";
    let items = vec![numbered(
        1,
        page,
        "max_connections (integer)",
        "Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections, but might be less if your kernel settings will not support it (as determined during initdb).",
    )];
    let asked = "What is the default value of max_connections in PostgreSQL 15, and how many connection slots are reserved for superusers by default?";
    let answer = r#"{"points": [{"passages": [1], "sentence": "The default value of max_connections in PostgreSQL 15 is typically 100 connections, but might be less if your kernel settings will not support it (as determined during initdb)."}]}"#;
    assert_eq!(assemble_json(answer, &items), None);
    let md = assemble_json_for(asked, answer, &items).expect("kept");
    assert!(
        md.contains("in PostgreSQL 15 is typically 100 connections"),
        "{md}"
    );
    let invented = r#"{"points": [{"passages": [1], "sentence": "The default value of max_connections in PostgreSQL 15 is typically 200 connections."}]}"#;
    assert_eq!(assemble_json_for(asked, invented, &items), None);
}

/// The 1.5B model gave Python 3.5's default as 3.11's, citing the 3.5 version note: the restated
/// "Python 3.11" does not make a note on another version back it.
#[test]
fn a_restated_version_is_not_backed_by_a_note_on_another_version() {
    let items = vec![numbered(
        1,
        "http://docs/library/concurrent.futures.html",
        "ThreadPoolExecutor",
        "Changed in version 3.5: If max_workers is None or not given, it will default to the number of processors on the machine, multiplied by 5, assuming that ThreadPoolExecutor is often used to overlap I/O instead of CPU work.",
    )];
    let asked =
        "What is the default max_workers of concurrent.futures.ThreadPoolExecutor in Python 3.11?";
    let answer = r#"{"points": [{"passages": [1], "sentence": "The default max_workers of ThreadPoolExecutor in Python 3.11 is the number of processors on the machine, multiplied by 5."}]}"#;
    assert_eq!(assemble_json_for(asked, answer, &items), None);
}

#[test]
fn a_code_sample_repeating_the_names_does_not_outrank_the_sentence_that_answers() {
    // The shape of the Logging HOWTO: samples call `logging.info` again and again.
    let page = PageExtract {
        url: "http://docs/howto/logging.html".into(),
        title: "Logging HOWTO".into(),
        text: "§ Logging HOWTO › When to use logging\nThe default level is `WARNING`, which means that only events of this level and above will be tracked, unless the logging package is configured to do otherwise.\n\n§ Logging HOWTO › Logging from multiple modules\n```\nimport logging\nlogging.basicConfig(level=logging.INFO)\nlogging.info('Started')\nlogging.info('Working')\nlogging.info('Finished')\n```\n\n§ Logging HOWTO › Logging to a file\n```\nimport logging\nlogging.debug('This message should go to the log file')\nlogging.info('So should this')\n```".into(),
    };
    let what = "What is the default logging level in Python's logging module, and why does logging.info() print nothing by default?";
    let items = number_passages(std::slice::from_ref(&page), what, 4000);
    assert!(items[0].text.contains("default level is"), "{items:#?}");
    // Asked how to do something, a sample is what answers.
    let items = number_passages(
        &[page],
        "How do I call logging.info() from several modules?",
        4000,
    );
    assert!(items[0].text.contains("```"), "{items:#?}");
}

#[test]
fn a_whole_prose_passage_is_shown() {
    // sql-vacuum.html: the paragraph on plain VACUUM says what VACUUM FULL does in its last
    // sentence, past 700 characters; cut there, the comparison lost its other half.
    let first = "Plain `VACUUM` (without `FULL`) simply reclaims space and makes it available for re-use. This form of the command can operate in parallel with normal reading and writing of the table, as an exclusive lock is not obtained. However, extra space is not returned to the operating system (in most cases); it's just kept available for re-use within the same table. It also allows us to leverage multiple CPUs in order to process indexes. This feature is known as *parallel vacuum*. To disable this feature, one can use `PARALLEL` option and specify parallel workers as zero.";
    let last = " `VACUUM FULL` rewrites the entire contents of the table into a new disk file with no extra space, allowing unused space to be returned to the operating system.";
    let page = PageExtract {
        url: "http://docs/sql-vacuum.html".into(),
        title: "VACUUM".into(),
        text: format!("§ VACUUM › Description\n{first}{last}"),
    };
    assert!(first.len() + last.len() > 700 && first.len() + last.len() < 900);
    let items = number_passages(
        &[page],
        "How does VACUUM FULL differ from plain VACUUM?",
        4000,
    );
    assert!(items[0].text.ends_with("operating system."), "{items:#?}");
}

#[test]
fn a_version_note_is_shown_when_the_task_asks_for_the_version() {
    let page = PageExtract {
        url: "http://docs/stdtypes.html".into(),
        title: "Built-in Types".into(),
        text: "§ Built-in Types › String Methods › str.removeprefix(prefix, /)\nIf the string starts with the *prefix* string, return `string[len(prefix):]`. Otherwise, return a copy of the original string.\n\nNew in version 3.9.".into(),
    };
    let asked = number_passages(
        std::slice::from_ref(&page),
        "What does Python's str.removeprefix() do, and in which version was it added?",
        4000,
    );
    assert!(
        asked
            .iter()
            .any(|n| n.text == "str.removeprefix(prefix, /): New in version 3.9."),
        "{asked:#?}"
    );
    let not_asked = number_passages(&[page], "What does Python's str.removeprefix() do?", 4000);
    assert!(
        not_asked.iter().all(|n| !n.text.contains("New in version")),
        "{not_asked:#?}"
    );
}

fn titled(number: usize, url: &str, title: &str, heading: &str, text: &str) -> Numbered {
    Numbered {
        number,
        url: url.into(),
        title: title.into(),
        heading: heading.into(),
        text: text.into(),
    }
}

#[test]
fn passages_that_leave_out_a_subject_of_the_question_do_not_answer_it() {
    let items = vec![
        titled(
            1,
            "http://docs/runtime-config-connection.html",
            "20.3. Connections and Authentication",
            "20.3.1. Connection Settings › max_connections (integer)",
            "Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections.",
        ),
        titled(
            2,
            "http://docs/runtime-config-resource.html",
            "20.4. Resource Consumption",
            "20.4.1. Memory › shared_buffers (integer)",
            "Sets the amount of memory the database server uses for shared memory buffers. The default is typically 128 megabytes (128MB).",
        ),
    ];
    // Every subject named somewhere (a heading counts); the product is context.
    assert!(
        unanswered(
            "What is the default value of max_connections in PostgreSQL 15?",
            &items
        )
        .is_empty()
    );
    assert!(
        unanswered(
            "What are the default values of max_connections and shared_buffers in PostgreSQL 15?",
            &items
        )
        .is_empty()
    );
    // A setting no passage names: however many words they share, they do not answer (the
    // product a possessive names, SQLAlchemy, is context, as PostgreSQL is).
    assert_eq!(
        unanswered(
            "What are the default values of max_connections and work_mem in PostgreSQL 15?",
            &items
        ),
        ["work_mem"]
    );
    assert_eq!(
        unanswered(
            "What is the default pool_size of the connection pool created by SQLAlchemy's create_engine()?",
            &items
        ),
        ["pool_size", "create_engine"]
    );
    assert_eq!(
        closest_pages(&items),
        [
            "http://docs/runtime-config-connection.html",
            "http://docs/runtime-config-resource.html"
        ]
    );
    // No passage: nothing to judge (the caller has its own report for that).
    assert!(unanswered("What is the default pool_size?", &[]).is_empty());
}

#[test]
fn a_copied_signature_is_stripped_and_a_heading_is_no_statement() {
    assert_eq!(
        strip_signature(
            "contextlib.chdir(path): Non parallel-safe context manager to change the current working directory."
        ),
        "Non parallel-safe context manager to change the current working directory."
    );
    assert_eq!(
        strip_signature("`json.loads(s, *, cls=None)`: deserialize s to a Python object."),
        "Deserialize s to a Python object."
    );
    // A sentence that only begins with a call keeps it.
    let kept = "json.loads(s) deserializes s to a Python object.";
    assert_eq!(strip_signature(kept), kept);
    assert_eq!(strip_signature("f(x):"), "f(x):");
    let items = vec![titled(
        1,
        "http://docs/datatype-numeric.html",
        "8.1. Numeric Types",
        "8.1. Numeric Types › 8.1.4. Serial Types",
        "The data types smallserial, serial and bigserial are not true types.",
    )];
    assert!(is_heading_copy("Numeric Types", &items));
    assert!(is_heading_copy("8.1.4. Serial Types.", &items));
    assert!(is_heading_copy("8.1. Numeric Types", &items));
    // A lead-in copied with its code block's fence (datetime.html, tuning set).
    assert!(is_heading_copy(
        "Or by calculating the timestamp directly:```,",
        &items
    ));
    // A code block copied into a sentence and cut in a span (probe set, git-reset's example):
    // its backticks do not pair.
    assert!(is_heading_copy(
        "To reset a single file in the index, ``$ git reset -- frotz.c **<1>**",
        &items
    ));
    assert!(!is_heading_copy(
        "The serial types are not true types.",
        &items
    ));
    assert!(!is_heading_copy(
        "The `serial` types are not true types, and ``bigserial`` neither.",
        &items
    ));
    // A summary that is only a heading is no answer: the passages are quoted, the best first.
    assert_eq!(
        assemble_for(
            "Is serial a real data type in PostgreSQL?",
            "Numeric Types [1].",
            &items
        ),
        None
    );
}

/// The Python 3.11 `concurrent.futures` entries a held-out-shaped question is answered from.
fn executor_items() -> Vec<Numbered> {
    vec![
        titled(
            1,
            "http://docs/library/concurrent.futures.html",
            "concurrent.futures — Launching parallel tasks",
            "ThreadPoolExecutor › concurrent.futures.ThreadPoolExecutor(max_workers=None, thread_name_prefix='', initializer=None, initargs=())",
            "An Executor subclass that uses a pool of at most max_workers threads to execute calls asynchronously. Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4).",
        ),
        titled(
            2,
            "http://docs/library/concurrent.futures.html",
            "concurrent.futures — Launching parallel tasks",
            "ThreadPoolExecutor › concurrent.futures.ThreadPoolExecutor(max_workers=None, thread_name_prefix='', initializer=None, initargs=())",
            "New in version 3.6: The thread_name_prefix argument was added to allow users to control the threading.Thread names for worker threads created by the pool for easier debugging.",
        ),
    ]
}

#[test]
fn a_summary_about_a_sibling_parameter_leads_with_the_best_passages_answer() {
    let asked =
        "What is the default max_workers of concurrent.futures.ThreadPoolExecutor in Python 3.11?";
    let items = executor_items();
    let answer = r#"{"points": [{"passages": [2], "sentence": "The thread_name_prefix argument allows users to control the threading.Thread names for worker threads created by the pool."}]}"#;
    let md = assemble_json_for(asked, answer, &items).unwrap();
    let summary = md
        .split("## Summary\n\n")
        .nth(1)
        .and_then(|s| s.split("\n\n").next())
        .unwrap();
    assert!(
        summary.starts_with("“Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4)” ([concurrent.futures — Launching parallel tasks](http://docs/library/concurrent.futures.html))."),
        "{md}"
    );
    // The model's sentence follows it, and the passage is quoted as evidence, not as "not cited".
    assert!(
        summary.contains("The thread_name_prefix argument allows"),
        "{md}"
    );
    assert!(!md.contains("not cited above"), "{md}");
    // A summary that answers keeps its own first sentence.
    let answer = r#"{"points": [{"passages": [1], "sentence": "The default value of max_workers is min(32, os.cpu_count() + 4)."}]}"#;
    let md = assemble_json_for(asked, answer, &items).unwrap();
    assert!(
        md.starts_with(
            "## Summary\n\nThe default value of max_workers is min(32, os.cpu_count() + 4) ("
        ),
        "{md}"
    );
}

#[test]
fn the_quoted_fallback_leads_with_the_best_statement() {
    let asked =
        "What is the default max_workers of concurrent.futures.ThreadPoolExecutor in Python 3.11?";
    let md = quoted_report(asked, &executor_items());
    assert!(
        md.starts_with("## Summary\n\n“Changed in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4)” (["),
        "{md}"
    );
}

fn item(number: usize, heading: &str, text: &str) -> Numbered {
    Numbered {
        number,
        url: format!("http://docs/page{number}.html"),
        title: format!("Page {number}"),
        heading: heading.to_string(),
        text: text.to_string(),
    }
}

/// A model's "Other common use cases include:" and a breadcrumb it copied ("dropuser › Options
/// › -p port--port=port") were kept as sentences and counted as claims (tuning reports).
#[test]
fn lead_ins_and_breadcrumbs_are_not_statements() {
    assert!(is_heading_copy("Other common use cases include:", &[]));
    assert!(is_heading_copy("Other common use cases include:.", &[]));
    assert!(is_heading_copy(
        "dropuser › Options › -p port--port=port",
        &[]
    ));
    assert!(!is_heading_copy(
        "The default port is 5432 on most systems.",
        &[]
    ));
}

/// A quote is the page's words: its links are not the run's citations, and a URL it never
/// read, left as a link, was cut by the evidence gate and counted as invented.
#[test]
fn quoted_passages_carry_no_links() {
    let n = item(
        1,
        "",
        "See [PEP 8](https://peps.python.org/pep-0008/) and https://git-scm.com/docs. Also `https://in.code/x`.",
    );
    let md = quoted_list(&[&n]);
    assert!(
        md.contains("> See PEP 8 and `https://git-scm.com/docs`. Also `https://in.code/x`."),
        "{md}"
    );
    let mut read = crate::research::writing::evidence::EvidenceBase::default();
    read.add_page("http://docs/page1.html", "Page 1", &n.text);
    let gated = crate::research::writing::evidence::gate_links(&md, &read);
    assert!(gated.unverified.is_empty(), "{gated:?}");
    assert_eq!(gated.cited, ["http://docs/page1.html"]);
}

/// `py-sqlite3-connect-timeout`: the answer, a list item ending "Default five seconds.", sat
/// under "Best-matching passage" while the summary spoke of `setlimit`. The summary now leads
/// with that item whole (it names what the default is of), without its list marker.
#[test]
fn the_summary_leads_with_the_list_item_stating_the_asked_default() {
    let items = vec![
        item(
            1,
            "sqlite3.connect(database, timeout=5.0)",
            "Parameters:\n*   **database** (path-like object) – The path to the database file to be opened. Pass \":memory:\" to open a connection in RAM.\n*   **timeout** (*float*) – How many seconds the connection should wait before raising an exception, if the database is locked by another connection. Default five seconds.",
        ),
        item(
            2,
            "Connection.setlimit(category, limit)",
            "Set a connection runtime limit.",
        ),
    ];
    let asked = "How long does a Python sqlite3 connection wait by default when the database is locked by another connection?";
    let md = report(
        asked,
        &["The setlimit method sets a connection runtime limit.".to_string()],
        &["The setlimit method sets a connection runtime limit".to_string()],
        vec![2],
        &[],
        &[],
        &items,
    );
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("## Summary\n\nsqlite3.connect: “**timeout** (*float*) – How many seconds the connection should wait before raising an exception, if the database is locked by another connection. Default five seconds” ([Page 1](http://docs/page1.html))."),
        "{md}"
    );
}

/// `pg-max-connections-default`: the best passage was the setting's definition; the sentence
/// stating its default was the next passage, and the summary said "The value must be less than
/// max_connections".
#[test]
fn the_lead_for_a_default_is_the_passage_stating_it() {
    let items = vec![
        item(
            1,
            "max_connections (integer)",
            "Determines the maximum number of concurrent connections to the database server.",
        ),
        item(
            2,
            "max_connections (integer)",
            "The default is typically 100 connections, but might be less if your kernel settings will not support it.",
        ),
    ];
    let asked = "What is the default value of max_connections?";
    let md = report(
        asked,
        &["The value must be less than max_connections.".to_string()],
        &["The value must be less than max_connections".to_string()],
        vec![1],
        &[],
        &[],
        &items,
    );
    assert!(
        md.starts_with("## Summary\n\nmax_connections: “The default is typically 100 connections, but might be less if your kernel settings will not support it” ([Page 2](http://docs/page2.html))."),
        "{md}"
    );
}

/// `pg-work-mem-default`: each setting's entry names it only in its heading; the sentence
/// stating its default is led with, labelled with the setting, not a sentence naming the other.
#[test]
fn a_subject_only_the_heading_names_leads_with_its_stated_default_labelled() {
    let items = vec![
        item(
            1,
            "20.4.1. Memory › hash_mem_multiplier (floating point)",
            "Used to compute the maximum amount of memory that hash-based operations can use. The default value is 2.0.",
        ),
        item(
            2,
            "20.4.1. Memory › maintenance_work_mem (integer)",
            "Specifies the maximum amount of memory to be used by maintenance operations. It defaults to 64 megabytes (`64MB`). Since only one of these operations can be executed at a time, it's safe to set this value significantly larger than `work_mem`.",
        ),
        item(
            3,
            "20.4.1. Memory › work_mem (integer)",
            "Sets the base maximum amount of memory to be used by a query operation. The default value is four megabytes (`4MB`).",
        ),
    ];
    let asked =
        "What are the default values of work_mem and maintenance_work_mem in PostgreSQL 15?";
    let md = report(
        asked,
        &[
            "The default value of hash_mem_multiplier is 2.0 ([Page 1](http://docs/page1.html))."
                .to_string(),
        ],
        &["The default value of hash_mem_multiplier is 2.0".to_string()],
        vec![1],
        &[],
        &[],
        &items,
    );
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("maintenance_work_mem: “It defaults to 64 megabytes (`64MB`)” ([Page 2](http://docs/page2.html))."),
        "{md}"
    );
    assert!(
        summary.contains("work_mem: “The default value is four megabytes (`4MB`)” ([Page 3](http://docs/page3.html))."),
        "{md}"
    );
    assert!(!summary.contains("Since only one"), "{md}");
    // A module is named by its function's name in the label, not beside it.
    let entry = item(
        1,
        "logging — Logging facility for Python › Module-Level Functions › logging.info(msg, *args, **kwargs)",
        "Logs a message with level INFO on the root logger.",
    );
    assert_eq!(
        labelled(
            "What is the default logging level in Python's logging module, and why does logging.info() print nothing by default?",
            &entry,
            "Logs a message with level INFO on the root logger".to_string()
        ),
        "logging.info: “Logs a message with level INFO on the root logger”"
    );
}

/// My demo question on `work_mem`: another entry's statement naming the asked setting only
/// after its number is labelled with its own entry, which it states the number of.
#[test]
fn another_entrys_statement_is_labelled_with_that_entry() {
    let hash = item(
        1,
        "Memory › hash_mem_multiplier (floating point)",
        "The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.",
    );
    let statement = "The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount";
    assert_eq!(
        labelled(
            "What is the default value of work_mem in PostgreSQL 15?",
            &hash,
            statement.to_string()
        ),
        format!("hash_mem_multiplier: “{statement}”")
    );
    // The asked entry itself, named by its last part, is labelled as the asked subject is.
    let group = item(
        2,
        "asyncio › Task Groups › class asyncio.TaskGroup",
        "An asynchronous context manager holding a group of tasks.",
    );
    let lead = labelled(
        "What does Python's TaskGroup do?",
        &group,
        "An asynchronous context manager holding a group of tasks".to_string(),
    );
    assert!(!lead.starts_with("asyncio.TaskGroup"), "{lead}");
}

/// `multi-json-duplicate-keys`: a question about two things answered for one; the other's
/// passage, shown to the model, now leads the summary with its statement naming it.
#[test]
fn the_summary_names_each_subject_the_sentences_leave_out() {
    let items = vec![
        item(
            1,
            "json.loads(s)",
            "json.loads(s): Deserialize s to a Python object. Repeated names in an object keep the last value.",
        ),
        item(
            2,
            "8.14. JSON Types",
            "If duplicate keys are specified in the input, only the last value is kept. Because jsonb does not keep duplicate object keys, it is stored in a decomposed binary format: jsonb is faster to process.",
        ),
    ];
    let asked =
        "How do Python's json.loads() and PostgreSQL's jsonb type each handle duplicate keys?";
    let said = "json.loads keeps the last value for a repeated name";
    let md = report(
        asked,
        &[format!("{said} ([Page 1](http://docs/page1.html)).")],
        &[said.to_string()],
        vec![1],
        &[],
        &[],
        &items,
    );
    assert!(
        md.starts_with("## Summary\n\n“Because jsonb does not keep duplicate object keys, it is stored in a decomposed binary format: jsonb is faster to process” ([Page 2](http://docs/page2.html)). json.loads keeps"),
        "{md}"
    );
    // Both named: no lead.
    let both = "json.loads keeps the last value and jsonb keeps the last value too";
    let md = report(
        asked,
        &[both.to_string()],
        &[both.to_string()],
        vec![1],
        &[],
        &[],
        &items,
    );
    assert!(md.starts_with("## Summary\n\njson.loads keeps"), "{md}");
}

/// The 0.5B model's per-passage answer with its keys one too far after an empty one (tuning
/// set, "How does VACUUM FULL differ from plain VACUUM?"): each sentence is cited to the shown
/// passage that says it instead of being dropped against the one its key names.
#[test]
fn a_per_passage_answer_with_shifted_keys_cites_the_passages_that_say_it() {
    let item = |number: usize, url: &str, heading: &str, text: &str| Numbered {
        number,
        url: format!("http://docs/{url}"),
        title: url.to_string(),
        heading: heading.to_string(),
        text: text.to_string(),
    };
    let items = vec![
        item(
            1,
            "sql-vacuum.html",
            "Notes",
            "The FULL option is not recommended for routine use, but might be useful in special cases. VACUUM FULL will usually shrink the table more than a plain VACUUM would.",
        ),
        item(
            2,
            "app-vacuumdb.html",
            "Description",
            "vacuumdb is a wrapper around the SQL command VACUUM.",
        ),
        item(
            3,
            "sql-vacuum.html",
            "Description",
            "Plain VACUUM (without FULL) simply reclaims space and makes it available for re-use. This form of the command can operate in parallel with normal reading and writing of the table, as an exclusive lock is not obtained.",
        ),
        item(
            4,
            "index-locking.html",
            "Index Locking",
            "Index access methods must handle concurrent updates of the index by multiple processes.",
        ),
    ];
    let answer = r#"{"1": "VACUUM FULL will usually shrink the table more than a plain VACUUM would.", "2": "", "3": "vacuumdb is a wrapper around the SQL command VACUUM.", "4": "Plain VACUUM (without FULL) simply reclaims space and makes it available for re-use."}"#;
    let points = each_points(answer, items.len()).unwrap();
    let md = assemble_points(
        "How does VACUUM FULL differ from plain VACUUM in PostgreSQL?",
        &points,
        &items,
    )
    .unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("simply reclaims space and makes it available for re-use ([sql-vacuum.html](http://docs/sql-vacuum.html))"),
        "{md}"
    );
    assert!(
        summary.contains("wrapper around the SQL command VACUUM ([app-vacuumdb.html](http://docs/app-vacuumdb.html))"),
        "{md}"
    );
    assert!(
        md.contains("> Plain VACUUM (without FULL) simply reclaims space"),
        "{md}"
    );
}

/// Tuning set, py-copy-shallow-vs-deep: the model's "The difference ... is only relevant for
/// compound objects (...):" was the answer and was dropped as a lead-in.
#[test]
fn a_sentence_that_states_something_before_its_colon_is_a_statement() {
    assert_eq!(
        statement_before_colon(
            "The difference between shallow and deep copying is only relevant for compound objects (objects that contain other objects, like lists or class instances):"
        )
        .as_deref(),
        Some(
            "The difference between shallow and deep copying is only relevant for compound objects (objects that contain other objects, like lists or class instances)."
        )
    );
    for lead_in in [
        "Other common use cases include:",
        "The `deepcopy()` function avoids these problems by:",
        "The csv module defines the following constants:",
        "For example:",
        "The three isolation levels are:",
    ] {
        assert_eq!(statement_before_colon(lead_in), None, "{lead_in}");
    }
    assert_eq!(statement_before_colon("No colon here."), None);
    let items = vec![Numbered {
        number: 1,
        url: "http://docs/copy.html".into(),
        title: "copy".into(),
        heading: "copy".into(),
        text: "The difference between shallow and deep copying is only relevant for compound objects (objects that contain other objects, like lists or class instances):\n* A shallow copy constructs a new compound object and then inserts references into it to the objects found in the original.".into(),
    }];
    let answer = r#"{"1": "The difference between shallow and deep copying is only relevant for compound objects (objects that contain other objects, like lists or class instances):"}"#;
    let md = assemble_points(
        "What is the difference between copy.copy() and copy.deepcopy()?",
        &each_points(answer, 1).unwrap(),
        &items,
    )
    .unwrap();
    assert!(
        md.contains("only relevant for compound objects (objects that contain other objects, like lists or class instances) ([copy](http://docs/copy.html))."),
        "{md}"
    );
}

/// Tuning set, py-dataclass-frozen: the model's one sentence said "raises an exception" and
/// the passage naming `FrozenInstanceError` sat below the best one; asked for an exception,
/// the summary leads with the passage that names one.
#[test]
fn a_summary_holding_no_value_of_the_asked_kind_leads_with_a_passage_that_does() {
    let item = |number: usize, heading: &str, text: &str| Numbered {
        number,
        url: "http://docs/dataclasses.html".into(),
        title: "dataclasses".into(),
        heading: heading.to_string(),
        text: text.to_string(),
    };
    let items = vec![
        item(
            1,
            "dataclass()",
            "frozen: If true (the default is False), assigning to fields of a frozen dataclass will generate an exception. This emulates read-only frozen instances.",
        ),
        item(
            2,
            "exception dataclasses.FrozenInstanceError",
            "Raised when an implicitly defined __setattr__() or __delattr__() is called on a frozen dataclass. It is a subclass of AttributeError.",
        ),
        item(
            3,
            "replace()",
            "Creates a new object of the same type as obj, replacing fields with values from changes.",
        ),
    ];
    let asked =
        "What exception is raised when assigning to a field of a frozen dataclass in Python?";
    let answer =
        r#"{"1": "Assigning to fields of a frozen dataclass will generate an exception."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("subclass of AttributeError"), "{md}");
    assert!(
        summary.find("AttributeError").unwrap()
            < summary.find("will generate an exception").unwrap(),
        "the answer leads: {md}"
    );
    // A sentence that names the exception needs no lead.
    let named = r#"{"2": "Assigning to a field of a frozen dataclass raises FrozenInstanceError, raised when an implicitly defined __setattr__() is called on a frozen dataclass."}"#;
    let md = assemble_points(asked, &each_points(named, items.len()).unwrap(), &items).unwrap();
    assert!(!md.contains('“'), "{md}");
}

/// The 0.5B model's answer to a tuning question: the question's words and the entry's signature
/// said back ("functools.cache(user_function) is equivalent to functools.cache(user_function)")
/// state nothing; the passage's statement answers instead.
#[test]
fn a_sentence_restating_the_question_and_the_entry_is_no_answer() {
    let items = vec![item(
        1,
        "`functools` › @functools.cache(user_function)",
        "Returns the same as lru_cache(maxsize=None), creating a thin wrapper around a dictionary lookup for the function arguments.",
    )];
    let asked = "What is functools.cache equivalent to in terms of functools.lru_cache?";
    let restated = r#"{"1": "functools.cache(user_function) is equivalent to functools.cache(user_function)."}"#;
    assert_eq!(
        assemble_points(asked, &each_points(restated, 1).unwrap(), &items),
        None
    );
    let answered = r#"{"1": "functools.cache returns the same as lru_cache(maxsize=None)."}"#;
    let md = assemble_points(asked, &each_points(answered, 1).unwrap(), &items).unwrap();
    assert!(md.contains("maxsize=None"), "{md}");
    // Without the question, the entry's words alone are no restatement to judge.
    assert!(assemble_points("", &each_points(restated, 1).unwrap(), &items).is_some());
}

/// The 0.5B model's answer to a tuning question: sentences that name nothing, cited to the
/// entries of other settings, are said of those settings, not of the one asked about.
#[test]
fn a_default_given_to_a_name_its_entry_only_mentions_is_no_answer() {
    let items = vec![
        item(
            1,
            "20.4.1. Memory › hash_mem_multiplier (floating point)",
            "The final limit is determined by multiplying `work_mem` by `hash_mem_multiplier`. The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.",
        ),
        item(
            2,
            "20.4.1. Memory › work_mem (integer)",
            "Sets the base maximum amount of memory to be used by a query operation. The default value is four megabytes (`4MB`).",
        ),
    ];
    let asked = "What is the default value of PostgreSQL's work_mem?";
    let answer = r#"{"1": "The default value of PostgreSQL's work_mem is 2.0, which makes hash-based operations use twice the usual work_mem base amount.", "2": "The default value of work_mem is four megabytes (4MB)."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("work_mem is 2.0"), "{md}");
    assert!(summary.contains("4MB"), "{md}");
}

#[test]
fn a_sentence_naming_nothing_under_another_entry_is_no_answer() {
    let items = vec![
        item(
            1,
            "20.11.1. Statement Behavior › statement_timeout (integer)",
            "Abort any statement that takes more than the specified amount of time. A value of zero (the default) disables the timeout.",
        ),
        item(
            2,
            "20.6.3. Standby Servers › wal_receiver_status_interval (integer)",
            "If this value is specified without units, it is taken as seconds. The default value is 10 seconds.",
        ),
        item(
            3,
            "20.11.2. Locale and Formatting › TimeZone (string)",
            "Sets the time zone for displaying and interpreting time stamps.",
        ),
    ];
    let asked = "What is the default statement_timeout in PostgreSQL?";
    let answer = r#"{"2": "The default value is 10 seconds.", "3": "Sets the time zone for displaying and interpreting time stamps.", "1": "Abort any statement that takes more than the specified amount of time."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("10 seconds"), "{md}");
    assert!(!summary.contains("time zone"), "{md}");
    assert!(summary.contains("Abort any statement"), "{md}");
    assert!(
        summary.contains("zero (the default)"),
        "the default leads: {md}"
    );
    // The same sentence answers a question that asks about that entry ...
    let asked = "What is the default wal_receiver_status_interval?";
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    assert!(md.contains("The default value is 10 seconds"), "{md}");
    // ... or about a word of its name.
    let asked = "How often does a standby report its status?";
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    assert!(md.contains("The default value is 10 seconds"), "{md}");
    let items = vec![item(
        1,
        "20.11.1. Statement Behavior › lock_timeout (integer)",
        "Unlike statement_timeout, this timeout can only occur while waiting for locks. A value of zero (the default) disables the timeout.",
    )];
    // A sentence naming that other entry is said of it: a side remark, for a question that
    // names its own subject.
    let named = r#"{"1": "The lock_timeout can only occur while waiting for locks."}"#;
    let asked = "What is the default statement_timeout in PostgreSQL?";
    assert_eq!(
        assemble_points(asked, &each_points(named, items.len()).unwrap(), &items),
        None
    );
}

/// A tuning question's quoted report led with the older of two version notes on one default.
#[test]
fn a_later_version_note_supersedes_an_earlier_one_as_the_statement() {
    let items = vec![item(
        1,
        "ThreadPoolExecutor › class concurrent.futures.ThreadPoolExecutor(max_workers=None)",
        "Changed in version 3.5: If max_workers is None or not given, it will default to the number of processors on the machine, multiplied by 5.\n\nChanged in version 3.8: Default value of max_workers is changed to min(32, os.cpu_count() + 4). This default value preserves at least 5 workers for I/O bound tasks.",
    )];
    let asked =
        "What is the default max_workers of concurrent.futures.ThreadPoolExecutor in Python 3.11?";
    let md = quoted_report(asked, &items);
    let summary = md.split("## Key findings").next().unwrap();
    assert!(summary.contains("min(32, os.cpu_count() + 4)"), "{md}");
    assert!(!summary.contains("multiplied by 5"), "{md}");
}

/// A tuning question's report: "How do I ...?" answered without a name to use leads with the
/// best passage's statement, said of its entry.
#[test]
fn a_how_do_i_answer_naming_nothing_to_use_leads_with_the_entry() {
    let items = vec![
        item(
            1,
            "`json` — JSON encoder and decoder › Basic Usage › json.loads(s, *, cls=None, object_hook=None)",
            "json.loads(s, *, cls=None, object_hook=None): Deserialize *s* (a `str`, `bytes` or `bytearray` instance containing a JSON document) to a Python object using this conversion table.",
        ),
        item(
            2,
            "`json` — JSON encoder and decoder › Basic Usage › json.loads(s, *, cls=None, object_hook=None)",
            "If the data being deserialized is not a valid JSON document, a `JSONDecodeError` will be raised.",
        ),
    ];
    let asked = "How do I decode JSON with the json module in Python?";
    let vague = r#"{"2": "The `json` module is used to parse and serialize JSON data being deserialized."}"#;
    let md = assemble_points(asked, &each_points(vague, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.starts_with("## Summary\n\njson.loads: “Deserialize *s* (a `str`, `bytes`"),
        "{md}"
    );
    // A sentence naming the function needs no lead.
    let named = r#"{"1": "json.loads() deserializes s, a str instance containing a JSON document, to a Python object."}"#;
    let md = assemble_points(asked, &each_points(named, items.len()).unwrap(), &items).unwrap();
    assert!(!md.contains('“'), "{md}");
}

/// A tuning question's report answered the first of two questions; the second's answer sat in
/// a passage quoted below the summary.
#[test]
fn each_part_of_a_two_part_question_is_answered_in_the_summary() {
    let items = vec![
        item(
            1,
            "4.1.1. Identifiers and Key Words",
            "By default, NAMEDATALEN is 64 so the maximum identifier length is 63 bytes.",
        ),
        item(
            2,
            "4.1.1. Identifiers and Key Words",
            "The system uses no more than NAMEDATALEN-1 bytes of an identifier; longer names can be written in commands, but they will be truncated.",
        ),
        item(
            3,
            "8.3. Character Types",
            "If you desire to store long strings with no specific upper limit, use text.",
        ),
    ];
    let asked = "What is the maximum length of an identifier in PostgreSQL, and what happens to longer names?";
    let answer = r#"{"1": "The maximum identifier length is 63 bytes.", "3": "If you desire to store long strings with no specific upper limit, use text."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("they will be truncated"), "{md}");
    assert!(!md.contains("not cited above"), "{md}");
    // A question asking one thing gets no such statement.
    let asked = "What is the maximum length of an identifier in PostgreSQL?";
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("truncated"), "{md}");
}

/// My own demo question: a part asking for a number that no sentence of the summary states is
/// said to be unanswered; a part the summary answers, or one asking for no kind of value, is not.
#[test]
fn a_part_asking_for_a_number_none_states_is_said_to_be_unanswered() {
    let items = vec![
        titled(
            1,
            "http://docs/python3.11-doc/html/library/functools.html",
            "functools — Python 3.11.2 documentation",
            "functools.partial(func, /, *args, **keywords)",
            "Return a new partial object which when called will behave like func.",
        ),
        titled(
            2,
            "http://docs/postgresql-doc-15/html/xfunc.html",
            "38.3. User-Defined Functions",
            "38.3. User-Defined Functions",
            "Many kinds of functions can take or return certain pseudo-types.",
        ),
    ];
    let asked = "What does Python's functools.partial return, and how many arguments can a PostgreSQL function take at most?";
    let answer = "It returns a new partial object which when called will behave like func [1].";
    let md = assemble_for(asked, answer, &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("do not answer “how many arguments can a PostgreSQL function take at most”: none states the number asked for"),
        "{md}"
    );
    // The title's "3.11.2" in a citation is no number the summary states, and the partial
    // part asks for no kind of value.
    assert_eq!(summary.matches("do not answer").count(), 1, "{md}");
    // Stated: no such sentence.
    let items = vec![
        items[0].clone(),
        titled(
            2,
            "http://docs/postgresql-doc-15/html/limits.html",
            "Appendix K. PostgreSQL Limits",
            "Appendix K. PostgreSQL Limits",
            "Function arguments can number at most 100 arguments per function.",
        ),
    ];
    let answer = "It returns a new partial object which when called will behave like func [1]. A PostgreSQL function can take at most 100 arguments [2].";
    let md = assemble_for(asked, answer, &items).unwrap();
    assert!(!md.contains("do not answer"), "{md}");
}

/// Probe set (`probe-none-pg-query-cache`): "How do I enable ...?" does not ask about every
/// `enable_*` setting; a sentence under another one's entry is no answer.
#[test]
fn the_verb_of_a_how_do_i_question_does_not_make_an_entry_asked_about() {
    assert_eq!(
        action_verb("How do I enable PostgreSQL's built-in query result cache?").as_deref(),
        Some("enable")
    );
    assert_eq!(
        action_verb("How to disable autocommit?").as_deref(),
        Some("disable")
    );
    assert_eq!(action_verb("What is the default of enable_seqscan?"), None);
    let item = item(
        1,
        "20.7. Query Planning › 20.7.1. Planner Method Configuration › enable_partitionwise_aggregate (boolean)",
        "Enables or disables the query planner's use of partitionwise grouping or aggregation, which allows grouping or aggregation on partitioned tables to be performed separately for each partition.",
    );
    let sentence = "This allows grouping or aggregation on partitioned tables to be performed.";
    let asked = "How do I enable PostgreSQL's built-in query result cache?";
    assert!(about_another_entry(sentence, &item, asked));
    // A question naming the entry's own words still asks about it.
    let asked = "How do I enable partitionwise aggregation in PostgreSQL?";
    assert!(!about_another_entry(sentence, &item, asked));
}

/// My own demo question (a `git stash` and a PostgreSQL lock question): the 0.5B model's
/// per-passage strings were windows of the passage cut mid-sentence at both ends.
#[test]
fn a_point_cut_from_the_middle_of_its_passage_is_no_sentence() {
    assert!(is_fragment(
        "for long periods of time (e.g., while waiting for user input)."
    ));
    assert!(is_fragment(
        "This means it is a bad idea for applications to hold transactions open for"
    ));
    assert!(is_fragment(
        "is blocked on transaction one: a deadlock condition."
    ));
    assert!(!is_fragment("The default is one second (`1s`)."));
    assert!(!is_fragment(
        "sys.maxsize is the largest value a Py_ssize_t can take."
    ));
    assert!(!is_fragment("git stash pop may fail with conflicts."));
    let items = vec![item(
        1,
        "13.3. Explicit Locking › 13.3.4. Deadlocks",
        "So long as no deadlock situation is detected, a transaction seeking either a table-level or row-level lock will wait indefinitely for conflicting locks to be released. This means it is a bad idea for applications to hold transactions open for long periods of time (e.g., while waiting for user input).",
    )];
    let asked = "How long does PostgreSQL wait on a lock?";
    let answer = r#"{"1": "for long periods of time (e.g., while waiting for user input). So long as no deadlock is detected, a transaction seeking a row-level lock will wait indefinitely for conflicting locks to be released."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("for long periods"), "{md}");
    assert!(summary.contains("will wait indefinitely"), "{md}");
    // Without its condition the consequence is not what the passage says (`evidence::condition`).
    let unconditional = r#"{"1": "A transaction seeking a row-level lock will wait indefinitely for conflicting locks to be released."}"#;
    let md = assemble_points(asked, &each_points(unconditional, 1).unwrap(), &items);
    assert!(
        md.as_deref().is_none_or(|md| !md
            .split("## Evidence")
            .next()
            .unwrap_or("")
            .contains("A transaction seeking a row-level lock will wait")),
        "{md:?}"
    );
}

/// Probe set (`probe-none-pg-query-cache`): the quoted fallback's lead says what it is said of.
#[test]
fn the_quoted_fallback_labels_its_lead_with_its_entry() {
    let items = vec![item(
        1,
        "20.7. Query Planning › 20.7.1. Planner Method Configuration › enable_memoize (boolean)",
        "Enables or disables the query planner's use of memoize plans for caching results from parameterized scans inside nested-loop joins. The default is `on`.",
    )];
    let md = quoted_report(
        "How do I enable PostgreSQL's built-in query result cache?",
        &items,
    );
    let summary = md.split("## Key findings").next().unwrap();
    assert!(summary.contains("enable_memoize: “"), "{md}");
}

/// Tuning set (`multi-py311-tomllib`): the product a question is asked in is no label.
#[test]
fn the_product_asked_in_is_no_label() {
    let items = vec![titled(
        1,
        "http://docs/python3.11-doc/html/library/pickle.html",
        "pickle — Python object serialization",
        "pickle — Python object serialization › pickle.Unpickler.load()",
        "Read the pickled representation of an object from the open file object given in the constructor.",
    )];
    let md = quoted_report(
        "Which standard library module for TOML was added in Python 3.11, and what kind of file object does its load() function need?",
        &items,
    );
    assert!(!md.contains("python: “"), "{md}");
    // Tuning set (`pg-max-columns-per-table`, judged unsupported): nor is the product of the
    // passage's docs when the question uses it as no context.
    let limits = titled(
        1,
        "http://docs/postgresql-doc-15/html/limits.html",
        "Appendix K. PostgreSQL Limits",
        "Appendix K. PostgreSQL Limits",
        "For shorter length variable-length fields, either a 4-byte or 1-byte field header is used.",
    );
    let lead = labelled(
        "What is the maximum number of columns a PostgreSQL table can have?",
        &limits,
        "For shorter length variable-length fields, either a 4-byte or 1-byte field header is used"
            .into(),
    );
    assert!(!lead.contains("postgresql"), "{lead}");
}

/// Probe set (`random_page_cost`): a summary citing the entry for its default, and saying
/// nothing of what the entry is, leads with the entry's statement for that part.
#[test]
fn a_part_its_cited_passage_answers_and_the_summary_does_not_is_stated() {
    let items = vec![item(
        1,
        "20.7. Query Planning › random_page_cost (floating point)",
        "Sets the planner's estimate of the cost of a non-sequentially-fetched disk page. The default is 4.0.",
    )];
    let asked = "What does random_page_cost estimate in PostgreSQL and what is its default?";
    let answer = r#"{"1": "The default is 4.0."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("non-sequentially-fetched disk page"),
        "{md}"
    );
    assert_eq!(summary.matches("4.0").count(), 1, "{md}");
    // Said in words of its own: no quote besides.
    let answer = r#"{"1": "It is the planner's estimate of the cost of fetching a disk page non-sequentially, and the default is 4.0."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains('“'), "{md}");
}

/// Probe set (`git stash pop`): the summary said what `pop` does; the passage it cited goes on
/// with what the question asks, the case of a conflict, and that sentence leads.
#[test]
fn the_sentence_stating_the_questions_condition_leads_when_the_summary_leaves_it_out() {
    let items = vec![item(
        1,
        "git-stash(1) › COMMANDS › pop [--index] [-q|--quiet] [<stash>]",
        "Remove a single stashed state from the stash list and apply it on top of the current working tree state. Applying the state can fail with conflicts; in this case, it is not removed from the stash list. You need to resolve the conflicts by hand and call git stash drop manually afterwards.",
    )];
    let asked = "What happens to the stash entry when git stash pop fails with conflicts?";
    let answer = r#"{"1": "git stash pop removes a single stashed state from the stash list and applies it on top of the current working tree state."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("“Applying the state can fail with conflicts; in this case, it is not removed from the stash list”"),
        "{md}"
    );
    // A summary that says it: no quote.
    let answer = r#"{"1": "When git stash pop fails with conflicts, the entry is not removed from the stash list."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains('“'), "{md}");
}

/// A tuning question's report carried a FAQ's question the model copied.
#[test]
fn a_question_copied_from_a_passage_is_no_sentence_of_the_summary() {
    let items = vec![item(
        1,
        "Design and History FAQ › How are dictionaries implemented in CPython?",
        "How does the OrderedDict work? It maintains a doubly linked list of keys, appending new keys to the list as they are inserted.",
    )];
    let asked = "Does a Python dict preserve insertion order?";
    let answer = r#"{"1": "How does the OrderedDict work? It maintains a doubly linked list of keys, appending new keys as they are inserted."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    assert!(
        !md.split("## Evidence").next().unwrap().contains("work?"),
        "{md}"
    );
    assert!(md.contains("doubly linked list"), "{md}");
    let md = assemble_for(
        asked,
        "How does the OrderedDict work? [1] It maintains a doubly linked list of keys [1].",
        &items,
    )
    .unwrap();
    assert!(
        !md.split("## Evidence").next().unwrap().contains("work?"),
        "{md}"
    );
}

/// A question of one's own: an option git does not have is a subject no passage names, though
/// the page of a similar option (`--autosquash`) shares its words.
#[test]
fn an_option_no_passage_names_leaves_the_question_unanswered() {
    let items = vec![item(
        1,
        "git-rebase(1) › OPTIONS › --autosquash, --no-autosquash",
        "--autosquash: When the commit log message begins with \"squash! ...\", automatically modify the todo list of rebase -i so that the commit marked for squashing comes right after the commit to be modified.",
    )];
    assert_eq!(
        unanswered(
            "What does the --autosquash-all option of git commit do?",
            &items
        ),
        ["--autosquash-all"]
    );
    assert!(
        unanswered(
            "What does the --autosquash option of git rebase do?",
            &items
        )
        .is_empty()
    );
}

/// Own hostile question: subjects written as one phrase ("asyncio HTTP client") must be named
/// together; `http.client`'s timeout answered for an asyncio HTTP client Python lacks.
#[test]
fn subjects_written_as_one_phrase_are_named_together_or_not_answered() {
    let http = titled(
        1,
        "http://docs/library/http.client.html",
        "http.client — HTTP protocol client",
        "class http.client.HTTPConnection(host, port=None, [timeout, ]…)",
        "If the optional timeout parameter is given, blocking operations will timeout after that many seconds.",
    );
    let asyncio = titled(
        2,
        "http://docs/library/asyncio.html",
        "asyncio — Asynchronous I/O",
        "asyncio — Asynchronous I/O",
        "asyncio is a library to write concurrent code using the async/await syntax.",
    );
    let items = vec![http.clone(), asyncio.clone()];
    assert_eq!(
        unanswered(
            "What is the default timeout of Python's asyncio HTTP client?",
            &items
        ),
        ["`asyncio` together with `HTTP`"]
    );
    // Apart in the question, apart on the pages: each is answered from its own.
    assert!(
        unanswered(
            "What does asyncio do, and what is the timeout of the HTTP client?",
            &items
        )
        .is_empty()
    );
    // One passage naming both answers the phrase.
    let streams = titled(
        3,
        "http://docs/library/asyncio-stream.html",
        "Streams — asyncio",
        "TCP echo client",
        "An HTTP client written with asyncio streams opens a connection with open_connection().",
    );
    assert!(
        unanswered(
            "What is the default timeout of Python's asyncio HTTP client?",
            &[http, asyncio, streams]
        )
        .is_empty()
    );
}

/// Own hostile questions: a keyword the question writes in capitals is named only in capitals
/// ("compacts tables" names no `VACUUM COMPACT`), and the words of "Which ... module" say what
/// the answer is, not what is asked of the subject (json's page "can be used as a YAML
/// serializer" parses no YAML).
#[test]
fn keywords_are_named_in_capitals_and_the_asked_kind_is_not_what_is_asked() {
    let vacuum = titled(
        1,
        "http://docs/routine-vacuuming.html",
        "25.1. Routine Vacuuming",
        "25.1.2. Recovering Disk Space",
        "VACUUM FULL actively compacts tables by writing a complete new version of the table file with no dead space.",
    );
    assert_eq!(
        unanswered(
            "How does PostgreSQL's VACUUM COMPACT differ from VACUUM FULL?",
            std::slice::from_ref(&vacuum)
        ),
        ["COMPACT"]
    );
    let full = unanswered(
        "What does PostgreSQL's VACUUM FULL do to the table file?",
        std::slice::from_ref(&vacuum),
    );
    assert!(full.is_empty(), "{full:?}");

    let json = titled(
        2,
        "http://docs/library/json.html",
        "json — JSON encoder and decoder",
        "json — JSON encoder and decoder",
        "JSON is a subset of YAML 1.2. This module can thus also be used as a YAML serializer.",
    );
    let asked = "Which Python 3.11 standard library module parses YAML files?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&json)),
        ["`yaml` other than in passing"]
    );
    // A passage holding what is asked of YAML bears on it.
    let parser = titled(
        3,
        "http://docs/library/json.html",
        "json — JSON encoder and decoder",
        "json — JSON encoder and decoder",
        "No standard library module parses YAML files; JSON is a subset of YAML 1.2.",
    );
    assert!(unanswered(asked, &[json, parser]).is_empty());
}

/// Own hostile question: an attribute asked of a subject ("the default compression level of
/// Python's pickle module") must be spoken of; generic words ("default value of") ask none,
/// and only "What is the X of" asks for the attribute itself.
#[test]
fn an_attribute_asked_of_a_subject_must_be_spoken_of() {
    let pickle = titled(
        1,
        "http://docs/python3.11-doc/html/library/pickle.html",
        "pickle — Python object serialization",
        "pickle › Module Interface › pickle.DEFAULT_PROTOCOL",
        "An integer, the default protocol version used for pickling. Currently the default protocol is 4. Functions must be defined at the top level of a module.",
    );
    let asked = "What is the default compression level of Python's pickle module?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&pickle)),
        ["“compression level”"]
    );
    for answerable in [
        "What is the default protocol version of Python's pickle module?",
        "What is the default value of pickle.DEFAULT_PROTOCOL in terms of pickle versions?",
        "What is the finest version of the pickle protocol?",
        "Does pickle round the quotient of a protocol number down?",
    ] {
        let missing = unanswered(answerable, std::slice::from_ref(&pickle));
        assert!(missing.is_empty(), "{answerable}: {missing:?}");
    }
}

/// Probe set: a feature the documents never name is not theirs. Asked how PostgreSQL's
/// built-in index advisor chooses indexes, the model answered from trigger functions' pages;
/// the thing a phrase names (its last word) must be held by some passage, its modifiers and a
/// verb after an auxiliary aside.
#[test]
fn the_thing_a_question_names_must_be_held() {
    let triggers = titled(
        1,
        "http://docs/postgresql-doc-15/html/functions-trigger.html",
        "9.28. Trigger Functions",
        "9.28. Trigger Functions",
        "PostgreSQL provides a few built-in trigger functions. You would choose a trigger name that sorts after the others; deferred index constraints are not documented here.",
    );
    let asked = "How does PostgreSQL's built-in index advisor choose which indexes to create?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&triggers)),
        ["“built-in index advisor”"]
    );
    let sqlite = titled(
        2,
        "http://docs/python3.11-doc/html/library/sqlite3.html",
        "sqlite3 — DB-API 2.0 interface for SQLite databases",
        "sqlite3 › Module functions › sqlite3.connect",
        "timeout: How many seconds the connection should wait before raising an exception, if the database is locked by another connection.",
    );
    let asked =
        "How many connections does Python's sqlite3 module keep in its connection pool by default?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&sqlite)),
        ["“connection pool”"]
    );
    let tasks = titled(
        3,
        "http://docs/python3.11-doc/html/library/asyncio-task.html",
        "Coroutines and Tasks",
        "Task Groups",
        "The first time any of the tasks belonging to an asyncio.TaskGroup fails with an exception, the remaining tasks in the group are cancelled. Unlike gather, a TaskGroup is sorted out when the sort is stable.",
    );
    for answerable in [
        // A modifier is the question's own word: "child" of tasks.
        "How does asyncio.TaskGroup handle exceptions raised by its child tasks?",
        // The frame's verb ends a phrase: "settings differ".
        "How does the first task with its default settings differ from the others?",
        // After an opening "Is" the phrase's last word is what is asked of it.
        "Is Python's TaskGroup stable?",
        // Generic attributes and superlatives are the other checks' to judge.
        "What is the finest exception of the group?",
        // Where the answer is written is no thing asked of (tuning set, deep mode:
        // `multi-py311-speed-and-int-limit`, refused for want of "release notes").
        "How do tasks fail according to its release notes?",
    ] {
        let missing = unanswered(answerable, std::slice::from_ref(&tasks));
        assert!(missing.is_empty(), "{answerable}: {missing:?}");
    }
}

/// A word in capitals beside an identifier is checked too: `http.server` has no TLS mode. (My
/// hostile question asked of its HTTPS mode, which "HTTP" named by the plural rule; a word in
/// capitals ending in a capital S is another acronym now: probe set, probe-none-py-httpserver-https.)
#[test]
fn a_keyword_beside_an_identifier_must_be_named() {
    let server = titled(
        1,
        "http://docs/library/http.server.html",
        "http.server — HTTP servers",
        "class http.server.HTTPServer(server_address, RequestHandlerClass)",
        "The server listens on port 8000 by default when run from the command line.",
    );
    let asked = "What is the default port of the TLS mode of Python's http.server module?";
    assert_eq!(unanswered(asked, std::slice::from_ref(&server)), ["TLS"]);
    assert!(
        unanswered(
            "What is the default port of Python's http.server module over HTTP?",
            std::slice::from_ref(&server)
        )
        .is_empty()
    );
    let asked = "What is the default port of the HTTPS mode of Python's http.server module?";
    assert_eq!(unanswered(asked, std::slice::from_ref(&server)), ["HTTPS"]);
}

/// Own hostile questions: an option another command documents, and a subject a passage names
/// only in passing, answer nothing (the 0.5B model answered both from them).
#[test]
fn an_option_of_another_command_or_a_subject_named_in_passing_is_no_answer() {
    let pull = titled(
        1,
        "http://docs/git-pull.html",
        "git-pull(1)",
        "OPTIONS › --dry-run",
        "Show what would be done, without making any changes.",
    );
    let stash = titled(
        2,
        "http://docs/git-stash.html",
        "git-stash(1)",
        "COMMANDS › pop [--index] [-q|--quiet] [<stash>]",
        "Remove a single stashed state from the stash list and apply it on top of the current working tree state.",
    );
    let items = vec![pull.clone(), stash];
    assert_eq!(
        unanswered("What does the --dry-run option of git stash do?", &items),
        ["`--dry-run` for `git stash`"]
    );
    assert!(unanswered("What does git pull --dry-run do?", &items).is_empty());
    // Named on its command's page under another entry still counts: the page is the command's.
    assert!(unanswered("What does git stash pop --quiet do?", &items).is_empty());

    let release = titled(
        3,
        "http://docs/release-15-5.html",
        "E.16. Release 15.5",
        "E.16.2. Changes",
        "This has only been seen to occur when the server connection runs through pgbouncer.",
    );
    let timezones = titled(
        4,
        "http://docs/release-15-5.html",
        "E.16. Release 15.5",
        "E.16.2. Changes",
        "Remove PHOT from the default timezone abbreviations list.",
    );
    let items = vec![release.clone(), timezones];
    assert_eq!(
        unanswered("What port does PgBouncer listen on by default?", &items),
        ["`pgbouncer` other than in passing"]
    );
    // Named where the question's other words are: it bears on the question.
    let port = titled(
        5,
        "http://docs/pgbouncer.html",
        "PgBouncer",
        "Settings › listen_port",
        "Which port to listen on. The default is 6432.",
    );
    assert!(
        unanswered(
            "What port does PgBouncer listen on by default?",
            &[release.clone(), port]
        )
        .is_empty()
    );
    // A passage under the subject's own entry is about it, whatever words it uses (tuning set:
    // `functools.cache`'s entry says "Returns the same as lru_cache(maxsize=None)", no word of
    // "equivalent to in terms of").
    let cache = titled(
        6,
        "http://docs/functools.html",
        "functools — Higher-order functions",
        "functools › @functools.cache(user_function)",
        "Simple lightweight unbounded function cache. Returns the same as lru_cache(maxsize=None).",
    );
    assert!(
        unanswered(
            "What is functools.cache equivalent to in terms of functools.lru_cache?",
            &[cache]
        )
        .is_empty()
    );
    // A question that asks nothing beside its subject and its frame is not held to this.
    assert!(unanswered("What is PgBouncer?", std::slice::from_ref(&release)).is_empty());
    assert!(unanswered("How does PgBouncer work?", &[release]).is_empty());
}

/// A question of my own, after the frozen set's gate check (`eval_questions`) found one of its
/// questions refused on its own pages: two products compared are answered from their docs,
/// whose passages seldom name their own product; the page's address and title do.
#[test]
fn products_compared_are_named_by_their_docs_addresses() {
    let pg = titled(
        1,
        "https://www.postgresql.org/docs/15/functions-math.html",
        "9.3. Mathematical Functions and Operators",
        "9.3. Mathematical Functions and Operators",
        "/ division (for integral types, division truncates the result towards zero)",
    );
    let py = titled(
        2,
        "https://docs.python.org/3.11/library/stdtypes.html",
        "Built-in Types — Python 3.11.2 documentation",
        "Numeric Types",
        "The floor division of integers x // y rounds towards minus infinity.",
    );
    let items = vec![pg, py];
    for q in [
        "How does integer division of negative numbers differ between Python and PostgreSQL?",
        "Do PostgreSQL or Python round the quotient of integer division down?",
        "Which way does integer division round negative numbers in Python (//) and in PostgreSQL (/)?",
    ] {
        assert!(unanswered(q, &items).is_empty(), "{q}");
    }
    // A product asked about is named by its docs' address, and only by what the address
    // names: the same passage elsewhere does not name PostgreSQL.
    let port = titled(
        3,
        "https://www.postgresql.org/docs/15/runtime-config-connection.html",
        "20.3. Connections and Authentication",
        "20.3.1. Connection Settings",
        "port (integer): The TCP port the server listens on; 5432 by default.",
    );
    let q = "What TCP port does PostgreSQL listen on by default?";
    assert!(unanswered(q, std::slice::from_ref(&port)).is_empty());
    let elsewhere = Numbered {
        url: "https://example.org/connections.html".into(),
        ..port
    };
    assert_eq!(unanswered(q, &[elsewhere]), ["postgresql"]);
    // Paired with another subject, each is held to the in-passing rule.
    let about = titled(
        3,
        "https://www.postgresql.org/docs/15/preface.html",
        "Preface",
        "Preface",
        "PostgreSQL is an object-relational database management system.",
    );
    let release = titled(
        4,
        "https://www.postgresql.org/docs/15/release-15-5.html",
        "E.16. Release 15.5",
        "E.16.2. Changes",
        "This has only been seen to occur when the server connection runs through pgbouncer.",
    );
    let why = unanswered(
        "What port do PgBouncer and PostgreSQL listen on by default?",
        &[release, about],
    );
    assert!(
        why.contains(&"`pgbouncer` other than in passing".to_string()),
        "{why:?}"
    );
}

/// A tuning question's report: after the answer, sentences on methods the question does not ask
/// about, each naming its own entry.
#[test]
fn a_sentence_on_an_unasked_entry_is_no_answer_when_the_question_names_its_subject() {
    let items = vec![
        item(
            1,
            "sqlite3 › Module functions › sqlite3.connect(database, timeout=5.0)",
            "timeout (float) – How many seconds the connection should wait before raising an OperationalError when a table is locked. Default five seconds.",
        ),
        item(
            2,
            "sqlite3 › Connection objects › setlimit(category, limit, /)",
            "Set a connection runtime limit. Attempts to increase a limit above its hard upper bound are silently truncated to the hard upper bound.",
        ),
    ];
    let asked =
        "How long does a Python sqlite3 connection wait by default when the database is locked?";
    let answer = r#"{"1": "The connection waits five seconds before raising an OperationalError when a table is locked.", "2": "The setlimit method sets a connection runtime limit."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("five seconds"), "{md}");
    assert!(!summary.contains("setlimit"), "{md}");
    // A question naming no subject of its own keeps it: the entry may be the answer.
    let asked = "How can a connection limit be changed at runtime?";
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    assert!(md.contains("setlimit method sets"), "{md}");
}

/// A tuning question's report lost its answer: the copy page's closing paragraphs sit under its
/// last entry, `exception copy.Error`, an entry of the module the question asks about.
#[test]
fn an_entry_of_the_asked_module_is_asked_about() {
    let items = vec![item(
        1,
        "`copy` — Shallow and deep copy operations › exception copy.Error",
        "The difference between shallow and deep copying is only relevant for compound objects (objects that contain other objects, like lists or class instances).",
    )];
    let asked = "What is the difference between copy.copy() and copy.deepcopy() in Python?";
    let answer = r#"{"1": "The difference between shallow and deep copying is only relevant for compound objects."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    assert!(md.contains("only relevant for compound objects"), "{md}");
}

/// A tuning question's answer, under a method's entry in the "Task Groups" section, names the
/// exceptions but not `asyncio.TaskGroup`: it is the answer, not a sentence about something else.
#[test]
fn a_sentence_under_a_method_of_the_asked_class_is_kept() {
    let items = vec![item(
        1,
        "Coroutines and Tasks › Task Groups › create_task(coro, *, name=None, context=None)",
        "Once all tasks have finished, if any tasks have failed with an exception other than asyncio.CancelledError, those exceptions are combined in an ExceptionGroup or BaseExceptionGroup which is then raised.",
    )];
    let asked =
        "How does asyncio.TaskGroup handle exceptions raised by its child tasks in Python 3.11?";
    let answer = r#"{"1": "If any tasks have failed with an exception other than asyncio.CancelledError, those exceptions are combined in an ExceptionGroup or BaseExceptionGroup which is then raised."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("combined in an ExceptionGroup"), "{md}");
}

/// Probe set: "What does git log --follow do, and what is its limitation?" was answered from
/// the page's examples while `--follow`'s own entry, shown first, said what it does.
#[test]
fn a_summary_writing_around_the_asked_entrys_definition_leads_with_it() {
    let asked = "What does git log --follow do, and what is its limitation?";
    let page = |n: Numbered| Numbered {
        title: "git-log(1)".to_string(),
        url: "http://docs/git-log.html".to_string(),
        ..n
    };
    let items = vec![
        item(
            1,
            "OPTIONS › --follow",
            "Continue listing the history of a file beyond renames (works only for a single file).",
        ),
        item(
            2,
            "EXAMPLES › git log --follow builtin/rev-list.c",
            "Shows the commits that changed `builtin/rev-list.c`, including those commits that occurred before the file was given its present name.",
        ),
    ]
    .into_iter()
    .map(page)
    .collect::<Vec<_>>();
    let answer = r#"{"points": [{"passages": [2], "sentence": "With --follow, git log shows the commits that changed `builtin/rev-list.c`, including those commits that occurred before the file was given its present name."}]}"#;
    let md = assemble_json_for(asked, answer, &items).unwrap();
    assert!(
        md.starts_with("## Summary\n\n--follow: “Continue listing the history of a file beyond renames (works only for a single file)”"),
        "{md}"
    );
    // Ranked below the example that names it twice, the entry still leads.
    let reversed: Vec<Numbered> = vec![
        Numbered {
            number: 1,
            ..items[1].clone()
        },
        Numbered {
            number: 2,
            ..items[0].clone()
        },
    ];
    let answer = r#"{"points": [{"passages": [1], "sentence": "With --follow, git log shows the commits that changed `builtin/rev-list.c`, including those commits that occurred before the file was given its present name."}]}"#;
    let md = assemble_json_for(asked, answer, &reversed).unwrap();
    assert!(
        md.starts_with("## Summary\n\n--follow: “Continue listing"),
        "{md}"
    );
    // A sentence saying what the entry says keeps the summary's first place.
    let answer = r#"{"points": [{"passages": [1], "sentence": "git log --follow continues listing the history of a file beyond renames, and it works only for a single file."}]}"#;
    let md = assemble_json_for(asked, answer, &items).unwrap();
    assert!(
        md.starts_with("## Summary\n\ngit log --follow continues listing"),
        "{md}"
    ); // So does one citing the entry, in words of its own.
    let answer = r#"{"points": [{"passages": [1], "sentence": "With --follow, git log keeps listing a file's history past renames of a single file."}]}"#;
    let md = assemble_json_for(asked, answer, &items).unwrap();
    assert!(md.starts_with("## Summary\n\nWith --follow"), "{md}");
}

/// A question of my own (`scripts/demo.sh`): Python's pages on division filled every slot, and
/// PostgreSQL's operator row, which states how its `/` rounds, was not shown.
#[test]
fn each_product_compared_keeps_its_best_passage() {
    let task =
        "How does integer division of negative numbers differ between Python and PostgreSQL?";
    let python = |n: usize| PageExtract {
        url: format!("https://docs.python.org/3.11/page{n}.html"),
        title: format!("Page {n} — Python 3.11.2 documentation"),
        text: (0..4)
            .map(|k| {
                format!(
                    "§ Numbers {k}\nInteger division of negative numbers: floor division of \
                     negative integer numbers rounds the division down ({n}.{k})."
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    let postgres = PageExtract {
        url: "https://www.postgresql.org/docs/15/functions-math.html".into(),
        title: "9.3. Mathematical Functions and Operators".into(),
        text: "§ Table 9.4. Mathematical Operators\n`/` division (for integral types, division \
               truncates the result towards zero)"
            .into(),
    };
    let pages = vec![python(1), python(2), python(3), postgres];
    let items = number_passages(&pages, task, 6000);
    assert!(
        items.iter().any(|i| i.url.contains("postgresql.org")),
        "{items:#?}"
    );
    // Not a comparison: the best passages, whoever's docs they are in.
    let items = number_passages(
        &pages,
        "How does integer division of negative numbers round?",
        6000,
    );
    assert!(!items.iter().any(|i| i.url.contains("postgresql.org")));
}

/// The same question's extractive report (the 0.5B model wrote one sentence naming both
/// products five times): its summary led with a passage on powers, and PostgreSQL's half came
/// last. It leads with each product's best passage.
#[test]
fn an_extractive_summary_leads_with_each_asked_products_best_passage() {
    let task =
        "How does integer division of negative numbers differ between Python and PostgreSQL?";
    let items = vec![
        titled(
            1,
            "https://docs.python.org/3.11/reference/expressions.html",
            "6. Expressions — Python 3.11.2 documentation",
            "6.5. The power operator",
            "Raising a negative number to a fractional power results in a complex number.",
        ),
        titled(
            2,
            "https://docs.python.org/3.11/reference/expressions.html",
            "6. Expressions — Python 3.11.2 documentation",
            "6.7. Binary arithmetic operations",
            "Division of integers yields a float, while floor division of integers results in an integer.",
        ),
        titled(
            3,
            "https://www.postgresql.org/docs/15/functions-math.html",
            "9.3. Mathematical Functions and Operators",
            "Table 9.4. Mathematical Operators",
            "| *`numeric_type`* `/` *`numeric_type`* → *`numeric_type`*   Division (for integral types, division truncates the result towards zero)   `(-5) / 2` → `-2` |",
        ),
    ];
    let md = quoted_report(task, &items);
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(
        summary.contains("truncates the result towards zero"),
        "{summary}"
    );
    assert!(summary.contains("Raising a negative number"), "{summary}");
    // A table row is quoted by its description cell, not as markup.
    assert!(
        summary.contains(
            "“Division (for integral types, division truncates the result towards zero)”"
        ),
        "{summary}"
    );
    assert!(!summary.contains('|'), "{summary}");
    // One product asked: the best passage alone.
    let md = quoted_report(
        "How does integer division of negative numbers round in Python?",
        &items,
    );
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(!summary.contains("truncates"), "{summary}");
}

/// A tuning question's report ("the finest time resolution of a Python datetime object and of
/// a PostgreSQL timestamp"): every cited passage was Python's, and PostgreSQL's passage, shown
/// to the model, never reached the reader.
#[test]
fn each_asked_product_uncited_is_quoted() {
    let task = "What is the finest time resolution of a Python datetime object and of a PostgreSQL timestamp?";
    let items = vec![
        titled(
            1,
            "https://docs.python.org/3.11/library/datetime.html",
            "datetime — Basic date and time types — Python 3.11.2 documentation",
            "datetime Objects",
            "A datetime object holds microseconds.",
        ),
        titled(
            2,
            "https://docs.python.org/3.11/library/datetime.html",
            "datetime — Basic date and time types — Python 3.11.2 documentation",
            "datetime.timestamp()",
            "Return POSIX timestamp corresponding to the datetime instance.",
        ),
        titled(
            3,
            "https://www.postgresql.org/docs/15/datatype-datetime.html",
            "8.5. Date/Time Types",
            "8.5. Date/Time Types",
            "timestamp values have a resolution of 1 microsecond.",
        ),
    ];
    let shown = uncited_best(task, &[1], &items);
    assert!(shown.iter().any(|n| n.number == 3), "{shown:#?}");
    // Cited already: not quoted again.
    let shown = uncited_best(task, &[1, 3], &items);
    assert!(!shown.iter().any(|n| n.number == 3), "{shown:#?}");
}

/// The 0.5B model's answer to "What is the largest value that Python's int and PostgreSQL's
/// bigint type can hold?": the summary led with a conversion rule that names `bigint` and holds
/// no number, while a passage below it states the range.
#[test]
fn a_subjects_lead_holds_a_value_of_the_kind_asked_for() {
    let asked =
        "What is the largest value that Python's int and PostgreSQL's bigint type can hold?";
    let items = vec![
        numbered(
            1,
            "http://docs/postgresql-doc-15/html/plpython-data.html",
            "46.2.1. Data Type Mapping",
            "PostgreSQL `smallint`, `int`, `bigint` and `oid` are converted to Python `int`.",
        ),
        numbered(
            2,
            "http://docs/postgresql-doc-15/html/datatype-numeric.html",
            "8.1.1. Integer Types",
            "The `bigint` type holds values from -9223372036854775808 to +9223372036854775807 and should be used when the range of the `integer` type is insufficient.",
        ),
    ];
    let plain = vec!["Python has several numeric types.".to_string()];
    let led: Vec<String> = leads(asked, &plain, &[], &items)
        .into_iter()
        .map(|(n, s)| format!("{}: {s}", n.number))
        .collect();
    assert!(
        led.iter()
            .any(|l| l.starts_with("2:") && l.contains("9223372036854775807")),
        "{led:?}"
    );
    assert!(!led.iter().any(|l| l.starts_with("1:")), "{led:?}");
}

/// The 0.5B model's unusable answer to a question about a connection pool Python's sqlite3 does
/// not have: the extractive summary led with "Default five seconds".
#[test]
fn an_extractive_lead_states_the_kind_asked_for_or_says_none_does() {
    let asked =
        "How many connections does Python's sqlite3 module keep in its connection pool by default?";
    let timeout = numbered(
        1,
        "http://docs/python3.11-doc/html/library/sqlite3.html",
        "sqlite3.connect(database, timeout=5.0)",
        "*   **timeout** (*float*) – How many seconds the connection should wait before raising an exception. Default five seconds.",
    );
    let md = quoted_report(asked, std::slice::from_ref(&timeout));
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(!summary.contains("five seconds"), "{md}");
    assert!(
        summary.contains("The passages read do not answer this: none states the number asked for."),
        "{md}"
    );
    // A passage that states a count leads, wherever it ranks.
    let count = numbered(
        2,
        "http://docs/python3.11-doc/html/library/sqlite3.html",
        "sqlite3.connect(database, cached_statements=128)",
        "The module keeps up to 128 connections open in its pool.",
    );
    let md = quoted_report(asked, &[timeout, count]);
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(
        summary.contains("“The module keeps up to 128 connections open in its pool”"),
        "{md}"
    );
}

/// My own demo question: the exception asked of the Python half was asked of the PostgreSQL
/// half too, so neither lead held; each product's lead is now held to its own part's kind.
#[test]
fn each_products_lead_holds_the_kind_its_own_part_asks_for() {
    let json = titled(
        1,
        "http://docs/python3.11-doc/html/library/json.html",
        "json — JSON encoder and decoder — Python 3.11.2 documentation",
        "json › json.loads(s)",
        "If the data being deserialized is not a valid JSON document, a `JSONDecodeError` will be raised.",
    );
    let xfunc = titled(
        2,
        "http://docs/postgresql-doc-15/html/xfunc.html",
        "38.3. User-Defined Functions",
        "38.3. User-Defined Functions",
        "Functions can take base types, composite types, or combinations of these as arguments.",
    );
    let asked = "Which Python exception does json.loads raise on invalid input, and how many arguments can a PostgreSQL function take at most?";
    let md = quoted_report(asked, &[json.clone(), xfunc]);
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(summary.contains("JSONDecodeError"), "{summary}");
    assert!(
        summary.contains("The passages read do not answer “how many arguments can a PostgreSQL function take at most”: none states the number asked for."),
        "{summary}"
    );
    // No page of PostgreSQL's docs read: said so, not led by a Python passage.
    let md = quoted_report(asked, &[json]);
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(
        summary.contains("none is from PostgreSQL's documentation"),
        "{summary}"
    );
}

/// My own hostile question: PostgreSQL's JIT chapter, the one page read naming JIT, answered
/// a question asked of Python.
#[test]
fn a_question_asked_of_one_product_is_answered_only_by_its_pages() {
    let configure = titled(
        1,
        "http://docs/python3.11-doc/html/using/configure.html",
        "3. Configure Python — Python 3.11.2 documentation",
        "3. Configure Python › PY_BUILTIN_MODULE_CFLAGS",
        "Compiler flags to build a standard library extension module as a built-in module.",
    );
    let jit = titled(
        2,
        "http://docs/postgresql-doc-15/html/jit-reason.html",
        "32.1. What Is JIT compilation?",
        "32.1. What Is JIT compilation?",
        "PostgreSQL has built-in support to perform JIT compilation using LLVM.",
    );
    let asked = "How do I enable Python's built-in JIT compiler in Python 3.11?";
    let missing = unanswered(asked, &[configure.clone(), jit.clone()]);
    assert!(missing.contains(&"JIT".to_string()), "{missing:?}");
    // No page of the product read: another product's docs answer nothing for it.
    let missing = unanswered(asked, std::slice::from_ref(&jit));
    assert!(missing.contains(&"JIT".to_string()), "{missing:?}");
    // A page of no product's docs (a blog) still may.
    let blog = titled(
        3,
        "https://blog.example/jit-in-python",
        "JIT compilation explained",
        "JIT compilation explained",
        "Python 3.11 has no built-in JIT compiler to enable.",
    );
    assert!(unanswered(asked, &[jit.clone(), blog]).is_empty());
    // A question of no product in particular: every page counts.
    assert!(
        unanswered(
            "How do I enable a JIT compiler?",
            &[
                configure,
                titled(
                    2,
                    "http://docs/postgresql-doc-15/html/jit-reason.html",
                    "32.1. What Is JIT compilation?",
                    "32.1. What Is JIT compilation?",
                    "PostgreSQL has builtin support to enable JIT compilation using LLVM."
                )
            ]
        )
        .is_empty()
    );
}

/// My own hostile question: the passages shown for a question asked of Python are Python's
/// when any Python page was read.
#[test]
fn passages_are_numbered_from_the_asked_products_pages() {
    let page = |url: &str, title: &str, text: &str| PageExtract {
        url: url.into(),
        title: title.into(),
        text: text.into(),
    };
    let pages = vec![
        page(
            "http://docs/postgresql-doc-15/html/jit-reason.html",
            "32.1. What Is JIT compilation?",
            "PostgreSQL has built-in support to perform JIT compilation using LLVM.",
        ),
        page(
            "http://docs/python3.11-doc/html/whatsnew/3.11.html",
            "What’s New In Python 3.11 — Python 3.11.2 documentation",
            "Q: Is there a JIT compiler? A: No. We're still exploring other optimizations.",
        ),
    ];
    let asked = "How do I enable Python's built-in JIT compiler in Python 3.11?";
    let items = number_passages(&pages, asked, 4000);
    assert!(!items.is_empty());
    assert!(
        items.iter().all(|n| n.url.contains("python3.11")),
        "{items:?}"
    );
    // A question of both products keeps both.
    let both = number_passages(
        &pages,
        "Do Python and PostgreSQL have a JIT compiler?",
        4000,
    );
    assert!(
        both.iter().any(|n| n.url.contains("postgresql")),
        "{both:?}"
    );
}

/// Tuning set (`py-asyncio-taskgroup-exceptions`, `pg-isolation-levels`, judged unsupported):
/// a pointer elsewhere on the page is cut with its parenthesis, or its sentence is dropped.
#[test]
fn a_pointer_elsewhere_on_the_page_is_no_part_of_a_summary() {
    assert_eq!(
        pointers::without_pointers(
            "Those exceptions are combined in an `ExceptionGroup` or `BaseExceptionGroup` (as appropriate; see their doc)."
        )
        .as_deref(),
        Some("Those exceptions are combined in an `ExceptionGroup` or `BaseExceptionGroup`.")
    );
    assert_eq!(
        pointers::without_pointers(
            "PostgreSQL supports the Serializable level, which provides exactly the same behavior described here."
        ),
        None
    );
    let plain = "The default is 5.0 seconds (see below for the busy handler is wrong).";
    assert_eq!(pointers::without_pointers(plain).as_deref(), Some(plain));
}

/// Own hostile question (Python's JIT): a FAQ passage's statement is its answer with its
/// question, not the question alone.
#[test]
fn a_faq_passage_states_its_answer_with_its_question() {
    let faq = item(
        1,
        "What’s New In Python 3.11 › Faster CPython › FAQ",
        "Q: Is there a JIT compiler? A: No. We're still exploring other optimizations.",
    );
    let s = statements::statement("How do I enable Python's JIT compiler?", &faq).unwrap();
    assert_eq!(s, "Q: Is there a JIT compiler? A: No");
}

/// My own demo question: the sentence naming the limit is completed by the next one, which
/// states it.
#[test]
fn a_statement_without_the_value_asked_for_takes_the_next_sentence_stating_it() {
    let basics = titled(
        1,
        "http://docs/postgresql-doc-15/html/ddl-basics.html",
        "5.1. Table Basics",
        "5.1. Table Basics",
        "There is a limit on how many columns a table can contain. Depending on the column types, it is between 250 and 1600. However, defining a table with anywhere near this many columns is highly unusual.",
    );
    let s = statements::statement(
        "How many columns can a PostgreSQL table have at most?",
        &basics,
    )
    .unwrap();
    assert!(s.contains("between 250 and 1600"), "{s}");
    // A question asking for no value keeps the one sentence.
    let s = statements::statement("What does a PostgreSQL table contain?", &basics).unwrap();
    assert!(!s.contains("1600"), "{s}");
}

/// My own demo question: lru_cache's default maxsize is said in a sentence ending in a colon
/// before its example, which was skipped as a lead-in; the lead was "If *user_function* is
/// specified, it must be a callable".
#[test]
fn a_statement_before_its_example_can_lead() {
    let lru = item(
        1,
        "`functools` — Higher-order functions › @functools.lru_cache(user_function)",
        "If *user_function* is specified, it must be a callable. This allows the *lru_cache* decorator to be applied directly to a user function, leaving the *maxsize* at its default value of 128:\n\n```\n@lru_cache\ndef count_vowels(sentence):\n    return sum(sentence.count(vowel) for vowel in 'AEIOU')\n```",
    );
    let s = statements::statement(
        "What does Python's functools.lru_cache use as its default maxsize?",
        &lru,
    )
    .unwrap();
    assert!(s.contains("default value of 128"), "{s}");
    // A lead-in still states nothing.
    let list = item(
        2,
        "`functools` › functools.total_ordering",
        "Other common use cases include:\n\n* a\n* b",
    );
    assert_eq!(
        statements::statement("What are the common use cases of total_ordering?", &list),
        None
    );
}

/// Tuning set (`pg-default-index-type`): a sentence the model put under another passage's
/// number is cited to the passage shown that supports it; one that none supports stays out.
#[test]
fn a_sentence_under_the_wrong_number_is_cited_to_the_passage_saying_it() {
    let items = vec![
        item(
            1,
            "CREATE INDEX › Parameters › tablespace_name",
            "The tablespace in which to create the index. If not specified, default\\_tablespace is consulted.",
        ),
        item(
            2,
            "11.2. Index Types",
            "PostgreSQL provides several index types: B-tree, Hash, GiST, SP-GiST, GIN, BRIN. By default, the `CREATE INDEX` command creates B-tree indexes, which fit the most common situations.",
        ),
    ];
    let asked = "Which index type does PostgreSQL's CREATE INDEX create by default?";
    let points = vec![
        Point {
            passages: vec![1],
            sentence: "PostgreSQL's CREATE INDEX creates B-tree indexes by default.".into(),
            written_for: None,
        },
        Point {
            passages: vec![1],
            sentence: "PostgreSQL's CREATE INDEX creates Hash indexes by default.".into(),
            written_for: None,
        },
    ];
    let md = assemble_points(asked, &points, &items).expect("a report");
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("PostgreSQL's CREATE INDEX creates B-tree indexes by default ([Page 2](http://docs/page2.html))."),
        "{md}"
    );
    assert!(!summary.contains("Hash indexes by default"), "{md}");
}

/// Tuning set: asked which index type `CREATE INDEX` makes by default, the summary led with
/// `tablespace_name`'s entry, whose `default_tablespace is consulted` read as a stated default
/// the model's "creates B-tree indexes by default" left out.
#[test]
fn a_setting_named_default_something_states_no_default_to_lead_with() {
    let best = titled(
        1,
        "http://docs/postgresql-doc-15/html/sql-createindex.html",
        "CREATE INDEX",
        "CREATE INDEX › Parameters › tablespace_name",
        "The tablespace in which to create the index. If not specified, default_tablespace is consulted, or temp_tablespaces for indexes on temporary tables.",
    );
    let asked = "Which index type does PostgreSQL's CREATE INDEX create by default?";
    let plain = vec!["PostgreSQL's CREATE INDEX creates B-tree indexes by default.".to_string()];
    assert!(!super::statements::misses_the_answer(asked, &plain, &best));
    // Another entry's stated default is no answer the sentence left out: asked what it does
    // "by default", it said what it does by default.
    let only = titled(
        2,
        "http://docs/postgresql-doc-15/html/sql-createindex.html",
        "CREATE INDEX",
        "CREATE INDEX › Parameters › ONLY",
        "Indicates not to recurse creating indexes on partitions, if the table is partitioned. The default is to recurse.",
    );
    assert!(!super::statements::misses_the_answer(asked, &plain, &only));
    let unanswered = vec!["PostgreSQL's CREATE INDEX creates indexes on partitions.".to_string()];
    assert!(super::statements::misses_the_answer(
        asked,
        &unanswered,
        &only
    ));
}

/// Tuning set (`multi-datetime-timestamp-resolution`): the model copied a passage and stopped
/// mid-word ("`pg_sleep_until` is notguarant"), short of the schema's length limit, and the
/// output limit cut the answer in a later point. What either cut off is no claim; the whole
/// sentences before it stay, and so does a lone sentence without its stop.
#[test]
fn a_sentence_cut_short_is_no_claim() {
    let torn = "The sleep delay will be at least as long as specified. It might be longer depending on factors such as server load. In particular, `pg_sleep_until` is notguarant";
    let answer = format!(
        r#"{{"points": [{{"passages": [1], "sentence": "{torn}"}}, {{"passages": [2], "sentence": "Resolution is one microsecond"}}, {{"passages": [1], "sentence": "The effective resolution is platform-spec"#
    );
    let points = parse_points(&answer, 2).unwrap();
    let sentences: Vec<&str> = points.iter().map(|p| p.sentence.as_str()).collect();
    assert_eq!(
        sentences,
        [
            "The sleep delay will be at least as long as specified. It might be longer depending on factors such as server load.",
            "Resolution is one microsecond"
        ]
    );
}

/// Tuning set: the asked entry's one-line definition ("CREATE INDEX — define a new index") led
/// a summary that already said what `CREATE INDEX` does by default.
#[test]
fn a_definition_does_not_lead_a_stated_default() {
    let entry = titled(
        1,
        "http://docs/postgresql-doc-15/html/sql-createindex.html",
        "CREATE INDEX",
        "CREATE INDEX",
        "CREATE INDEX — define a new index",
    );
    let asked = "Which index type does PostgreSQL's CREATE INDEX create by default?";
    let plain = vec!["PostgreSQL's CREATE INDEX creates B-tree indexes by default.".to_string()];
    let items = vec![entry];
    assert!(super::statements::leads(asked, &plain, &[], &items).is_empty());
    // Without the default said, the entry still leads.
    let around = vec!["PostgreSQL's CREATE INDEX builds indexes on partitions.".to_string()];
    assert_eq!(
        super::statements::leads(asked, &around, &[], &items).len(),
        1
    );
}

/// Tuning set (`pg-max-connections-default`): a model sentence copied from another setting's
/// entry, naming no setting, is written after that entry's name; one naming it, or from an
/// asked entry, is written as it is.
#[test]
fn a_sentence_from_another_entry_is_labelled_with_it() {
    let items = vec![
        item(
            1,
            "20.3. Connections and Authentication › max_connections (integer)",
            "Determines the maximum number of concurrent connections to the database server. The default is typically 100 connections, but might be less if your kernel settings will not support it.",
        ),
        item(
            2,
            "20.3. Connections and Authentication › superuser_reserved_connections (integer)",
            "The default value is three connections. The value must be less than `max_connections`. This parameter can only be set at server start.",
        ),
        item(
            3,
            "20.3. Connections and Authentication › superuser_reserved_connections (integer)",
            "Determines the number of connection slots that are reserved for connections by PostgreSQL superusers.",
        ),
    ];
    let asked = "What is the default value of max_connections in PostgreSQL 15, and how many connection slots are reserved for superusers by default?";
    let answer = r#"{"1": "The default value of max_connections in PostgreSQL 15 is 100 connections.", "2": "The default value is three connections. The value must be less than max_connections.", "3": "This setting decides how many connection slots PostgreSQL superusers get."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    // Copied word for word: quoted after its entry; a sentence naming the asked setting is not.
    assert!(
        summary
            .contains("superuser_reserved_connections: “The default value is three connections”"),
        "{md}"
    );
    // The next sentence of the same passage is not labelled again.
    assert!(
        summary.contains("connections”. The value must be less than max_connections ("),
        "{md}"
    );
    assert_eq!(
        summary.matches("superuser_reserved_connections: ").count(),
        2,
        "{md}"
    );
    // The asked entry's sentence stands alone.
    assert!(!summary.contains("max_connections: "), "{md}");
    assert!(
        summary
            .contains("The default value of max_connections in PostgreSQL 15 is 100 connections ("),
        "{md}"
    );
}

/// Tuning set (`pg-work-mem-default`): a cited passage's default is said only by a sentence
/// holding its number; "four megabytes" (`work_mem`'s) does not say `maintenance_work_mem`'s
/// "It defaults to 64 megabytes", which leads its part.
#[test]
fn a_part_is_said_only_with_its_number() {
    let items = vec![
        item(
            1,
            "20.4. Resource Consumption › work_mem (integer)",
            "Sets the base maximum amount of memory to be used by a query operation. The default value is four megabytes (4MB).",
        ),
        item(
            2,
            "20.4. Resource Consumption › maintenance_work_mem (integer)",
            "It defaults to 64 megabytes (64MB). Note that when autovacuum runs, up to autovacuum_max_workers times this memory may be allocated, so be careful not to set the default value too high.",
        ),
    ];
    let asked =
        "What are the default values of work_mem and maintenance_work_mem in PostgreSQL 15?";
    let answer = r#"{"1": "The default value is four megabytes (4MB).", "2": "Note that when autovacuum runs, up to autovacuum_max_workers times this memory may be allocated, so be careful not to set the default value too high."}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("It defaults to 64 megabytes"), "{md}");
    assert!(summary.contains("four megabytes"), "{md}");
}

/// The tuning set's `py-threadpoolexecutor-max-workers`: the 0.5B model's one point for every
/// passage was the passage's sentence torn off at "instead of", and the report quoted passages.
#[test]
fn a_point_cut_at_its_end_keeps_its_whole_clauses() {
    let torn = "The default max_workers is set to the number of processors on the machine, multiplied by 5, assuming that ThreadPoolExecutor is often used to overlap I/O instead of";
    assert_eq!(
        before_cut_tail(torn).as_deref(),
        Some(
            "The default max_workers is set to the number of processors on the machine, multiplied by 5."
        )
    );
    // A whole sentence, and a piece torn at both ends, are left as they are.
    assert_eq!(before_cut_tail("The default is one second (`1s`)."), None);
    assert_eq!(
        before_cut_tail("for long periods of time, while waiting for user input and for"),
        None
    );
    let items = vec![item(
        1,
        "concurrent.futures › ThreadPoolExecutor",
        "Changed in version 3.5: If max_workers is None or not given, it will default to the number of processors on the machine, multiplied by 5, assuming that ThreadPoolExecutor is often used to overlap I/O instead of CPU work.",
    )];
    let asked = "What is the default max_workers of concurrent.futures.ThreadPoolExecutor?";
    let points = vec![Point {
        passages: vec![1],
        sentence: torn.to_string(),
        written_for: None,
    }];
    let md = assemble_points(asked, &points, &items).expect("the torn point keeps its clauses");
    assert!(md.contains("multiplied by 5 ("), "{md}");
    // "is set to" says what the default is: its value is what follows.
    assert!(!focus::contradicts_default(
        "The default max_workers is set to the number of processors on the machine.",
        &items[0].text
    ));
}

/// The tuning set's `multi-pg-port-pgport`: with no passage stating the port, the quoted
/// summary of a two-part question still leads with its best passage (which may answer the
/// other part) and names the part left unanswered, instead of "do not answer this" alone.
#[test]
fn a_quoted_summary_names_the_part_no_passage_answers() {
    let items = vec![
        item(
            1,
            "postgres › Environment › PGPORT",
            "Default port number (preferably set in the configuration file).",
        ),
        item(
            2,
            "postgres › Options",
            "Specifies the TCP/IP port or local Unix domain socket file extension on which postgres is to listen for connections from client applications.",
        ),
    ];
    let asked = "Which TCP port does a PostgreSQL server listen on by default, and which environment variable sets the port for libpq clients such as psql?";
    let md = quoted_report(asked, &items);
    let summary = md.split("## Key findings").next().unwrap_or_default();
    assert!(summary.contains("Default port number"), "{summary}");
    assert!(
        summary.contains(
            "do not answer “Which TCP port does a PostgreSQL server listen on by default”"
        ),
        "{summary}"
    );
    assert!(!summary.contains("do not answer this"), "{summary}");
    // Asked alone, the part is simply not answered.
    let md = quoted_report(
        "Which TCP port does a PostgreSQL server listen on by default?",
        &items[1..],
    );
    assert!(
        md.contains("do not answer this: none states the number"),
        "{md}"
    );
}

/// The model's sentences, each cited to a page of its own.
fn each_cited(plain: &[String]) -> Vec<String> {
    plain
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{p} ([Page {i}](http://docs/page{i}.html))."))
        .collect()
}

/// Tuning set, deep mode: the sentence stating the asked default leads the model's sentences.
#[test]
fn the_sentence_stating_the_asked_default_goes_first() {
    let asked = "What is the default transaction isolation level of a PostgreSQL session?";
    let plain = [
        "Each SQL transaction has an isolation level",
        "Idle sessions are terminated after the timeout",
        "Read Committed is the default isolation level in PostgreSQL",
    ]
    .map(String::from);
    let sentences = each_cited(&plain);
    let out = super::summary::answer_first(asked, &sentences, &plain);
    assert!(
        out[0].starts_with("Read Committed is the default"),
        "{out:?}"
    );
    assert_eq!(out.len(), 3);
    // Already first, or not asked for, or sharing the next sentence's citation: kept in place.
    let asked_what = "What is a transaction isolation level?";
    assert_eq!(
        super::summary::answer_first(asked_what, &sentences, &plain),
        sentences
    );
    let mut run = sentences.clone();
    run[1] = "Idle sessions are terminated after the timeout.".to_string();
    assert_eq!(super::summary::answer_first(asked, &run, &plain), run);
    // A copied quote does not lead (tuning set, `py-enum-strenum-auto`).
    let asked = "What value does enum.auto() produce for members of an enum.StrEnum?";
    let plain = [
        "StrEnum is the same as Enum, but its members are also strings",
        "> * `FIRST = auto()` will work (auto() is replaced with `1`);",
    ]
    .map(String::from);
    let sentences = each_cited(&plain);
    assert_eq!(
        super::summary::answer_first(asked, &sentences, &plain),
        sentences
    );
}

/// My own question on `itertools.pairwise`: a credit line is no statement, neither the
/// model's nor a passage's lead.
#[test]
fn a_credit_line_is_no_statement() {
    assert!(prose::is_credit(
        "(Contributed by Raymond Hettinger in bpo-38200.)"
    ));
    assert!(prose::is_credit("Patch by Victor Stinner."));
    assert!(!prose::is_credit(
        "Raymond Hettinger contributed itertools.pairwise() to Python 3.10."
    ));
    let notes = item(
        1,
        "What’s New In Python 3.10 › Improved Modules › itertools",
        "Add itertools.pairwise(). (Contributed by Raymond Hettinger in bpo-38200.)",
    );
    assert_eq!(
        statements::statement(
            "In which Python version was itertools.pairwise() added?",
            &notes
        ),
        None
    );
}

/// Tuning set, py-asyncio-taskgroup-exceptions: the 0.5B model wrote passage 1's sentence at
/// number 2 and passage 3's at number 1, so passage 2, which answers, had no sentence.
#[test]
fn a_best_passage_the_model_wrote_another_passages_sentence_for_is_stated() {
    let asked =
        "How does asyncio.TaskGroup handle exceptions raised by its child tasks in Python 3.11?";
    let items = vec![
        item(
            1,
            "Task Groups › class asyncio.TaskGroup",
            "An asynchronous context manager holding a group of tasks. Tasks can be added to the group using `create_task()`. All tasks are awaited when the context manager exits.",
        ),
        item(
            2,
            "Task Groups › create_task(coro, *, name=None, context=None)",
            "Once all tasks have finished, if any tasks have failed with an exception other than `asyncio.CancelledError`, those exceptions are combined in an `ExceptionGroup` or `BaseExceptionGroup` which is then raised.",
        ),
        item(
            3,
            "Task Object › result()",
            "If the Task is *done*, the result of the wrapped coroutine is returned (or if the coroutine raised an exception, that exception is re-raised.)",
        ),
    ];
    let answer = r#"{"1": "If the Task is done, the result of the wrapped coroutine is returned.", "2": "An asynchronous context manager holding a group of tasks.", "3": ""}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("those exceptions are combined in an `ExceptionGroup`"),
        "{md}"
    );
    assert!(summary.contains("(http://docs/page2.html)"), "{md}");
    // A passage the model wrote nothing for is the model's to leave out.
    let answer =
        r#"{"1": "An asynchronous context manager holding a group of tasks.", "2": "", "3": ""}"#;
    let md = assemble_points(asked, &each_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(!summary.contains("combined in an"), "{md}");
}

/// Tuning set, multi-json-duplicate-keys: a comment of an SQL example led the summary.
#[test]
fn a_code_block_gives_no_statement() {
    let code = item(
        1,
        "8.14.5. jsonb Subscripting",
        "```\n-- Update object value by key. Note the quotes around '1': the assigned\n-- value must be of the jsonb type as well\nUPDATE table_name SET jsonb_field['key'] = '1';\n```",
    );
    let asked = "How does PostgreSQL's jsonb type handle duplicate keys?";
    assert_eq!(statements::statement(asked, &code), None);
    let prose = item(
        2,
        "8.14. JSON Types",
        "By contrast, `jsonb` does not keep duplicate object keys.",
    );
    assert!(statements::statement(asked, &prose).is_some());
}

/// My own demo question: the 0.5B model copied `textwrap.shorten()`'s condition and stopped;
/// what happens otherwise, the answer, was only in the quoted evidence.
fn shorten_entry() -> Numbered {
    item(
        1,
        "`textwrap` — Text wrapping and filling › textwrap.shorten(text, width, *, placeholder=' [...]')",
        "textwrap.shorten(text, width, *, placeholder=' [...]'): First the whitespace in *text* is collapsed (all whitespace is replaced by single spaces). If the result fits in the *width*, it is returned. Otherwise, enough words are dropped from the end so that the remaining words plus the `placeholder` fit within `width`:\n```\n>>> textwrap.shorten(\"Hello  world!\", width=11)\n'Hello [...]'\n```",
    )
}

#[test]
fn a_condition_the_summary_states_is_followed_by_what_happens_otherwise() {
    let asked = "What does textwrap.shorten() do in Python when the text is longer than the width?";
    let answer = r#"{"1": "First the whitespace in text is collapsed (all whitespace is replaced by single spaces). If the result fits in the width, it is returned."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &[shorten_entry()]).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    let condition = summary
        .find("it is returned")
        .expect("the model's sentence");
    let otherwise = summary
        .find("“Otherwise, enough words are dropped from the end so that the remaining words plus the `placeholder` fit within `width`” ([")
        .unwrap_or_else(|| panic!("{md}"));
    assert!(condition < otherwise, "{md}");
    assert_eq!(summary.matches("Otherwise").count(), 1, "{md}");
}

#[test]
fn an_alternative_the_summary_says_already_is_not_repeated() {
    let asked = "What does textwrap.shorten() do in Python when the text is longer than the width?";
    let answer = r#"{"1": "If the result fits in the width, it is returned; otherwise enough words are dropped from the end so that the remaining words plus the placeholder fit within width."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &[shorten_entry()]).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert_eq!(
        summary.to_lowercase().matches("otherwise").count(),
        1,
        "{md}"
    );
}

#[test]
fn a_statement_of_a_condition_carries_what_happens_otherwise() {
    let asked = "What does textwrap.shorten() return when the text fits in the width?";
    let s = statements::statement(asked, &shorten_entry()).expect("a statement");
    assert!(
        s.ends_with("it is returned. Otherwise, enough words are dropped from the end so that the remaining words plus the `placeholder` fit within `width`"),
        "{s}"
    );
}

/// Tuning set, deep mode: the aspect "How do Python's json.loads() handle duplicate keys in a
/// JSON object?" was refused on `json.loads`'s own entry for want of a "json.loads handle
/// duplicate": a call names a whole thing, and the word after it is its verb.
#[test]
fn the_word_after_an_asked_call_is_its_verb_not_part_of_its_name() {
    let loads = titled(
        1,
        "http://docs/library/json.html",
        "json — JSON encoder and decoder",
        "`json` — JSON encoder and decoder › json.loads(s, *, cls=None)",
        "The RFC specifies that the names within a JSON object should be unique, but does not mandate how repeated names in JSON objects should be handled. By default, this module does not raise an exception; instead, it ignores all but the last name-value pair for a given name.",
    );
    let asked = "How do Python's json.loads() handle duplicate keys in a JSON object?";
    assert!(unanswered(asked, std::slice::from_ref(&loads)).is_empty());
}

/// Tuning set, deep mode: asked of `jsonb`, the 0.5B model's sentences named only `json`, and
/// the summary led with the passage's best sentence overall, on `json`'s exact copy, which the
/// model's first sentence then said again. The lead states what the sentences left out.
#[test]
fn a_lead_states_the_subject_the_sentences_left_out() {
    let types = titled(
        1,
        "http://d/postgresql-doc-15/html/datatype-json.html",
        "8.14. JSON Types",
        "8.14. JSON Types",
        "Because the `json` type stores an exact copy of the input text, it will preserve semantically-insignificant white space between tokens, as well as the order of keys within JSON objects. Also, if a JSON object within the value contains the same key more than once, all the key/value pairs are kept. (The processing functions consider the last value as the operative one.) By contrast, `jsonb` does not preserve white space, does not preserve the order of object keys, and does not keep duplicate object keys. If duplicate keys are specified in the input, only the last value is kept.",
    );
    let asked = "How do PostgreSQL's jsonb type each handle duplicate keys in a JSON object?";
    let plain = vec![
        "Because the `json` type stores an exact copy of the input text, it will preserve semantically-insignificant white space between tokens, as well as the order of keys within JSON objects.".to_string(),
        "If duplicate keys are specified in the input, only the last value is kept.".to_string(),
    ];
    let led = leads(asked, &plain, &[], std::slice::from_ref(&types));
    assert_eq!(
        led.first().map(|(_, s)| s.as_str()),
        Some(
            "“By contrast, `jsonb` does not preserve white space, does not preserve the order of object keys, and does not keep duplicate object keys”"
        )
    );
}

/// Tuning set, deep mode: the 0.5B model copied a piece from inside a passage's sentence,
/// "contains the same key more than once, all the key/value pairs are kept"; the summary says
/// the passage's whole sentence.
#[test]
fn a_piece_copied_from_inside_a_sentence_is_completed_to_it() {
    let types = item(
        1,
        "8.14. JSON Types",
        "Because the `json` type stores an exact copy of the input text, it will preserve white space. Also, if a JSON object within the value contains the same key more than once, all the key/value pairs are kept.",
    );
    let asked = "How does PostgreSQL's json type handle duplicate keys in a JSON object?";
    let answer =
        r#"{"1": "contains the same key more than once, all the key/value pairs are kept."}"#;
    let md = assemble_points(asked, &each_points(answer, 1).unwrap(), &[types]).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(
        summary.contains("Also, if a JSON object within the value contains the same key more than once, all the key/value pairs are kept"),
        "{md}"
    );
    // A sentence of its own, opening with a code name, stays as written.
    assert_eq!(
        prose::completed_tail(
            "jsonb keeps the last key",
            &["The jsonb keeps the last key."]
        ),
        Some("The jsonb keeps the last key.".to_string())
    );
    assert_eq!(
        prose::completed_tail(
            "`jsonb` keeps the last key",
            &["The `jsonb` keeps the last key."]
        ),
        None
    );
}

/// Tuning set: a lead for `TRUNCATE`, left out by the model's sentences, keeps the passage's best
/// sentence when the passage's page is `TRUNCATE`'s: its sentences are about it.
#[test]
fn a_lead_under_the_left_out_subjects_heading_keeps_the_best_sentence() {
    let truncate = titled(
        1,
        "http://d/postgresql-doc-15/html/sql-truncate.html",
        "TRUNCATE",
        "Description",
        "`TRUNCATE` quickly removes all rows from a set of tables. It has the same effect as an unqualified `DELETE` on each table, but since it does not actually scan the tables it is faster. Furthermore, it reclaims disk space immediately, rather than requiring a subsequent `VACUUM` operation.",
    );
    let asked = "How do TRUNCATE and VACUUM differ in reclaiming disk space in PostgreSQL?";
    let plain = vec!["VACUUM reclaims storage occupied by dead tuples.".to_string()];
    let led = leads(asked, &plain, &[], std::slice::from_ref(&truncate));
    assert_eq!(
        led.first().map(|(_, s)| s.as_str()),
        Some(
            "“Furthermore, it reclaims disk space immediately, rather than requiring a subsequent `VACUUM` operation”"
        ),
        "{led:?}"
    );
}

/// Tuning set: the model's sentence was cut at a passage's end ("... locks out writes (but not
/// reads) on …") and its next point went on "table until it's done."; completed, that piece
/// is the sentence said already, and is not said twice.
#[test]
fn a_completed_piece_of_a_sentence_said_already_is_not_repeated() {
    let items = vec![item(
        1,
        "CREATE INDEX › Building Indexes Concurrently",
        "When this option is used, PostgreSQL will build the index without taking any locks that prevent concurrent inserts, updates, or deletes on the table; whereas a standard index build locks out writes (but not reads) on the table until it's done.",
    )];
    let asked = "What does CREATE INDEX CONCURRENTLY do in PostgreSQL?";
    let answer = r#"{"points": [{"passages": [1], "sentence": "When this option is used, PostgreSQL will build the index without taking any locks that prevent concurrent inserts, updates, or deletes on the table; whereas a standard index build locks out writes (but not reads) on …"}, {"passages": [1], "sentence": "table until it's done."}]}"#;
    let md = assemble_points(asked, &parse_points(answer, 1).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert_eq!(
        summary.matches("When this option is used").count(),
        1,
        "{md}"
    );
}

/// Tuning set, deep mode with the 1.5B model (`multi-pg15-merge`): the same point twice in other
/// words, citing other passages, and both reached the summary.
#[test]
fn a_point_said_again_in_other_words_is_said_once() {
    let url = "http://docs/postgresql-doc-15/html/sql-merge.html";
    let items = vec![
        numbered(
            1,
            url,
            "MERGE",
            "MERGE — conditionally insert, update, or delete rows of a table",
        ),
        numbered(
            2,
            url,
            "MERGE › Description",
            "`MERGE` performs actions that modify rows in the target table identified as *`target_table_name`*, using the *`data_source`*. `MERGE` provides a single SQL statement that can conditionally `INSERT`, `UPDATE` or `DELETE` rows, a task that would otherwise require multiple procedural language statements.",
        ),
        numbered(
            3,
            url,
            "MERGE › Description",
            "`MERGE` actions have the same effect as regular `UPDATE`, `INSERT`, or `DELETE` commands of the same names.",
        ),
    ];
    let asked = "What does the MERGE command introduced in PostgreSQL 15 do?";
    let answer = r#"{"points": [{"passages": [1, 2], "sentence": "The MERGE command introduced in PostgreSQL 15 performs actions that modify rows in the target table using the data source, providing a single SQL statement that can conditionally INSERT, UPDATE, or DELETE rows."}, {"passages": [3, 2], "sentence": "The MERGE command is described as performing actions that modify rows in the target table using the data source, providing a single SQL statement that can conditionally INSERT, UPDATE, or DELETE rows."}, {"passages": [3], "sentence": "MERGE actions have the same effect as regular UPDATE, INSERT, or DELETE commands of the same names."}]}"#;
    let md = assemble_points(asked, &parse_points(answer, items.len()).unwrap(), &items).unwrap();
    let summary = md.split("## Evidence").next().unwrap();
    assert!(summary.contains("performs actions"), "{md}");
    assert!(!summary.contains("is described as performing"), "{md}");
    // A sentence sharing most of its few words with one said is its own.
    assert!(summary.contains("same effect as regular"), "{md}");
    // A point of two sentences, one new, is kept whole: "This method" keeps what it names.
    let answer = r#"{"points": [{"passages": [2], "sentence": "MERGE provides a single SQL statement that can conditionally INSERT, UPDATE or DELETE rows, a task that would otherwise require multiple procedural language statements."}, {"passages": [2, 3], "sentence": "MERGE provides one SQL statement that can conditionally INSERT, UPDATE or DELETE rows. Its actions have the same effect as regular UPDATE, INSERT, or DELETE commands of the same names."}]}"#;
    let md = assemble_points(asked, &parse_points(answer, items.len()).unwrap(), &items).unwrap();
    assert!(md.contains("provides one SQL statement"), "{md}");
}

/// Probe set (`probe-none-pg-tde`): asked how to enable transparent data encryption in
/// PostgreSQL 15, which it does not have, the passages read named GSSAPI's encryption of the
/// data sent, each word apart, and the model answered from them. A run of three words or more
/// must be held together by one sentence; a pair, a verb after "I" and a product are not.
#[test]
fn the_words_of_a_phrase_must_stand_in_one_sentence() {
    let gssapi = titled(
        1,
        "http://docs/postgresql-doc-15/html/gssapi-auth.html",
        "21.6. GSSAPI Authentication",
        "21.6. GSSAPI Authentication",
        "PostgreSQL supports GSSAPI for authentication, communications encryption, or both. If GSSAPI encryption or SSL encryption is used, the data sent along the database connection will be encrypted. Setting up a transparent proxy is not covered here.",
    );
    let asked = "How do I enable transparent data encryption in PostgreSQL 15?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&gssapi)),
        ["“transparent data encryption”"]
    );
    // An article after the verb opens the phrase (probe: "How do I size the query result
    // cache in PostgreSQL 15?", answered from release notes on caches and buffer sizes).
    let caches = titled(
        3,
        "http://docs/postgresql-doc-15/html/release-15-6.html",
        "E.15. Release 15.6",
        "E.15.2. Changes",
        "We expand any out-of-line fields in a catalog tuple before inserting it into the catalog caches. A cached plan reuses the values of the query that built it.",
    );
    let asked = "How do I size the query result cache in PostgreSQL 15?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&caches)),
        ["“query result cache”"]
    );
    let ssl = titled(
        2,
        "http://docs/postgresql-doc-15/html/ssl-tcp.html",
        "19.9. Secure TCP/IP Connections with SSL",
        "19.9. Secure TCP/IP Connections with SSL",
        "PostgreSQL has native support for using SSL connections to encrypt client/server communications. With SSL, the data the client sends is encrypted in transit, and a transparent encryption layer protects it.",
    );
    for answerable in [
        // The words in one sentence, in another order and form.
        "How do I enable transparent data encryption in PostgreSQL 15?",
        // Two words only: a pair is paraphrased too often to be held to.
        "How do I enable client encryption in PostgreSQL 15?",
        // The word after "I" is the verb, not the thing: "transparent encryption layer" is
        // held, "activate" is not on the page.
        "How do I activate transparent encryption layer protection in PostgreSQL?",
        // After an article, held in one sentence.
        "How do I enable the transparent encryption layer in PostgreSQL?",
    ] {
        let missing = unanswered(answerable, std::slice::from_ref(&ssl));
        assert!(missing.is_empty(), "{answerable}: {missing:?}");
    }
}

/// Probe set (`probe-none-py-dict-sort-method`): asked what `dict.sort()` returns, which
/// Python lacks, the model answered from What's New's `sort()` of lists. A method written bare
/// names a dotted name only where its owner is named too.
#[test]
fn a_bare_method_names_a_dotted_name_only_beside_its_owner() {
    let sorting = titled(
        1,
        "http://docs/python3.11-doc/html/whatsnew/2.4.html",
        "What’s New in Python 2.4",
        "Other Language Changes",
        "This function will then be used to sort the list. Previously this was the only parameter that could be provided to `sort()`.",
    );
    let asked = "What does Python's dict.sort() method return?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&sorting)),
        ["dict.sort"]
    );
    let entry = titled(
        2,
        "http://docs/python3.11-doc/html/library/stdtypes.html",
        "Built-in Types",
        "Built-in Types › Sequence Types — list, tuple, range › Lists › sort(*, key=None, reverse=False)",
        "This method sorts the list in place, using only < comparisons between items. The sort() method returns None.",
    );
    let asked = "What does Python's list.sort() method return?";
    let missing = unanswered(asked, &[entry]);
    assert!(missing.is_empty(), "{missing:?}");
}

/// Probe set (`probe-none-py-match-else`): asked what the else clause of Python's match
/// statement does, the model answered, though `match` has no `else` and the docs hold "else" of
/// other statements and "match" of patterns, each apart. The part "the X of Y" asks of a thing
/// must stand in one sentence with it.
#[test]
fn the_part_asked_of_a_thing_must_stand_with_it() {
    let for_else = titled(
        1,
        "http://docs/python3.11-doc/html/reference/compound_stmts.html",
        "8. Compound statements",
        "8.3. The for statement",
        "When the items are exhausted, the suite in the else clause, if present, is executed, and the loop terminates.",
    );
    let match_stmt = titled(
        2,
        "http://docs/python3.11-doc/html/reference/compound_stmts.html",
        "8. Compound statements",
        "8.6. The match statement",
        "The match statement is used for pattern matching. A match statement runs the first case block whose pattern succeeds against the subject value.",
    );
    let both = [for_else, match_stmt];
    let asked = "What does the else clause of Python's match statement do?";
    assert_eq!(
        unanswered(asked, &both),
        ["“else clause of Python's match statement”"]
    );
    for answerable in [
        "What does the else clause of a for statement do?",
        // The part and the thing in one sentence.
        "When does the case block of a match statement run?",
        // "What is the X of Y" asks for an attribute: another check's.
        "What is the else clause of Python's match statement?",
        // A part without its kind is often put in other words.
        "What does the else of Python's match statement do?",
    ] {
        let missing = unanswered(answerable, &both);
        assert!(
            !missing.iter().any(|m| m.contains(" of ")),
            "{answerable}: {missing:?}"
        );
    }
}

/// Tuning set, `multi-py311-speed-and-int-limit` in deep mode with the 1.5B model: “New in
/// version 3.11” was quoted as the answer to "what new limit on int/str conversion did it
/// introduce?". A bare version note answers only a question asking when.
#[test]
fn a_bare_version_note_is_no_statement_unless_the_version_is_asked() {
    let note = item(
        1,
        "Built-in Types › Integer string conversion length limitation",
        "New in version 3.11.",
    );
    let asked = "What new limit on int/str conversion did Python 3.11 introduce?";
    assert_eq!(statements::statement(asked, &note), None);
    let asked = "In which version was the int/str conversion limit added?";
    assert_eq!(
        statements::statement(asked, &note).as_deref(),
        Some("New in version 3.11")
    );
}

/// Probe set (`probe-none-git-encrypt`, `probe-none-pg-autoscale`): asked which git command
/// encrypts a repository's history, the passages held "history" in the user manual and
/// "encrypt" in git-cvsserver's password setup, and the summary quoted the manual's `gitk`. The
/// verb asked about must stand in one sentence with the thing it acts on, in any form or a word
/// the documentation uses for it; a relational verb ("controls") is not held to.
#[test]
fn the_verb_asked_about_must_stand_with_its_object() {
    let manual = titled(
        1,
        "http://docs/git-doc/user-manual.html",
        "Git User Manual",
        "Understanding History: Commits",
        "Every change in the history of a project is represented by a commit. The git-show(1) command shows the most recent commit on the current branch.",
    );
    let cvs = titled(
        2,
        "http://docs/git-doc/git-cvsserver.html",
        "git-cvsserver(1)",
        "INSTALLATION",
        "Preferably use the system specific utility that manages password hash creation in your platform (e.g. mkpasswd in Linux, encrypt in OpenBSD or pwhash in NetBSD). Each repository needs its own authdb.",
    );
    let asked = "Which git command encrypts the history of a repository?";
    assert_eq!(
        unanswered(asked, &[manual.clone(), cvs.clone()]),
        ["“encrypts the history of a repository”"]
    );
    let buffers = titled(
        3,
        "http://docs/postgresql-doc-15/html/runtime-config-resource.html",
        "20.4. Resource Consumption",
        "shared_buffers (integer)",
        "Sets the amount of memory the database server uses for shared memory buffers. If you have a dedicated database server with 1GB or more of RAM, a reasonable starting value for shared_buffers is 25% of the memory in your system. Larger settings for shared_buffers usually require a corresponding increase in max_wal_size.",
    );
    let asked = "How does PostgreSQL 15 automatically scale shared_buffers when memory is added?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&buffers)),
        ["“scale shared_buffers”"]
    );
    // The thing a possessive owns is the subject, not its verb; the verb must stand with the
    // thing it acts on, not with any word after it (probe2: "Python now retries system calls
    // ... when they fail" answered how asyncio retries failed tasks).
    let retries = titled(
        5,
        "http://docs/python3.11-doc/html/whatsnew/3.5.html",
        "What's New In Python 3.5",
        "PEP 475: Retry system calls failing with EINTR",
        "Python's asyncio now retries system calls automatically when they fail with EINTR. Tasks are not affected.",
    );
    let asked = "How does Python's asyncio automatically retry failed tasks?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&retries)),
        ["“retry failed tasks”"]
    );
    let asked = "How does Python's asyncio retry failed system calls?";
    assert!(unanswered(asked, std::slice::from_ref(&retries)).is_empty());
    let clean = titled(
        4,
        "http://docs/git-doc/git-clean.html",
        "git-clean(1)",
        "DESCRIPTION",
        "Cleans the working tree by recursively removing files that are not under version control, starting from the current directory.",
    );
    for (answerable, items) in [
        // The verb in another form, with a word of its object.
        (
            "Which git command removes untracked files from the working tree?",
            vec![clean.clone()],
        ),
        // A word the documentation uses for the verb.
        (
            "Which git command deletes files from the working tree?",
            vec![clean],
        ),
        // A relational verb is answered in other words ("Sets").
        (
            "Which PostgreSQL setting controls the amount of memory for shared buffers?",
            vec![buffers.clone()],
        ),
        // "json module" is a name, not a verb and its object.
        (
            "How does Python's json module treat duplicate keys?",
            vec![buffers],
        ),
    ] {
        let missing = unanswered(answerable, &items);
        assert!(
            !missing.iter().any(|m| m.starts_with('“')),
            "{answerable}: {missing:?}"
        );
    }
}

/// Probe set (`probe3-none-git-bisect-rewrite`): "How does git bisect automatically rewrite the
/// commits that fail the test?" was answered from git-bisect's pages, which rewrite nothing. A
/// product written in lower case, and the command after it that the pages write with it, are the
/// subject, so the verb after them is held to its object.
#[test]
fn a_lower_case_command_is_the_subject_of_the_verb_after_it() {
    let bisect = titled(
        1,
        "http://docs/git-doc/git-bisect.html",
        "git-bisect(1)",
        "DESCRIPTION",
        "This command uses a binary search algorithm to find which commit in your project's history introduced a bug. You use git bisect run to test each commit with a script.",
    );
    let asked = "How does git bisect automatically rewrite the commits that fail the test?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&bisect)),
        ["“rewrite the commits that fail the test”"]
    );
    for answerable in [
        "How does git bisect find the commit that introduced a bug?",
        // The pages never write "git search": no command is named, nothing is held to.
        "How does git search the history for commits that introduced a bug?",
    ] {
        let missing = unanswered(answerable, std::slice::from_ref(&bisect));
        assert!(missing.is_empty(), "{answerable}: {missing:?}");
    }
}

/// Probe set (`probe2-none-py-http3`): "Which Python 3.11 standard library module implements an
/// HTTP/3 client?" was answered from `http.server`'s "classes for implementing HTTP servers":
/// a name's version after a slash must be written as asked.
#[test]
fn a_name_with_a_version_after_a_slash_is_named_as_written() {
    let server = titled(
        1,
        "http://docs/python3.11-doc/html/library/http.server.html",
        "http.server — HTTP servers",
        "http.server — HTTP servers",
        "This module defines classes for implementing HTTP servers. Its handlers also answer HTTP/2 clients.",
    );
    let asked = "Which Python 3.11 standard library module implements an HTTP/3 client?";
    assert_eq!(
        unanswered(asked, std::slice::from_ref(&server)),
        ["`HTTP/3`"]
    );
    let asked = "Which Python 3.11 module answers HTTP/2 clients?";
    let missing = unanswered(asked, std::slice::from_ref(&server));
    assert!(missing.is_empty(), "{missing:?}");
}
