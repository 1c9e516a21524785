use super::*;
use crate::research::machine::state::{Mode, ResearcherReport, RunInput};

fn set(urls: &[&str]) -> BTreeSet<String> {
    urls.iter().map(|s| s.to_string()).collect()
}

#[test]
fn verified_links_stay_and_unfetched_links_lose_their_target() {
    let md = "See [json](http://h/json.html) and [made up](http://evil/x). Also http://h/a.html, and https://nope/y.";
    let c = verify_citations(md, &set(&["http://h/json.html", "http://h/a.html"]));
    assert_eq!(
        c.markdown,
        "See [json](http://h/json.html) and made up. Also http://h/a.html, and ."
    );
    assert_eq!(
        c.cited,
        vec![
            "http://h/json.html".to_string(),
            "http://h/a.html".to_string()
        ]
    );
    assert_eq!(
        c.removed,
        vec!["http://evil/x".to_string(), "https://nope/y".to_string()]
    );
}

#[test]
fn fragments_and_trailing_slashes_match_the_fetched_page() {
    let c = verify_citations(
        "[a](http://h/p.html#sec) <http://h/dir/>",
        &set(&["http://h/p.html", "http://h/dir"]),
    );
    assert!(c.removed.is_empty(), "{c:?}");
    assert_eq!(c.cited.len(), 2);
}

#[test]
fn model_sources_section_is_replaced_by_the_verified_one() {
    let md = "# T\n\nBody [x](http://h/a).\n\n## Sources\n- http://invented/1\n\n## Next\nmore";
    assert_eq!(
        strip_sources_section(md),
        "# T\n\nBody [x](http://h/a).\n\n## Next\nmore"
    );
}

#[test]
fn compose_lists_only_fetched_pages_and_counts_removed_citations() {
    let mut state = RunState::new(RunInput::new("what is json", Mode::Quick));
    state.reports.push(ResearcherReport {
        task_id: 0,
        markdown: String::new(),
        fetched: vec![SourceRef::new("http://h/json.html", "json — JSON encoder")],
        seen: vec![],
        pages: vec![],
        irrelevant: vec![],
        queries: vec![],
        searches: 1,
        usage: Default::default(),
    });
    let r = compose(
        &state,
        "JSON is parsed by [json](http://h/json.html) per [x](http://made.up/).\n\n## References\n1. http://made.up/",
        false,
    );
    assert!(
        r.markdown
            .starts_with("# what is json\n\nJSON is parsed by [json](http://h/json.html) per x.")
    );
    assert!(
        r.markdown
            .contains("## Sources\n\n1. [json — JSON encoder](http://h/json.html)\n")
    );
    assert!(r.markdown.contains(
        "1 citation(s) to pages this run neither read nor saw in search results were removed"
    ));
    assert!(!r.markdown.contains("made.up"));
    let v: serde_json::Value = serde_json::from_str(&r.findings_json).unwrap();
    assert_eq!(v["unverifiedReferences"], json!(["http://made.up"]));
    assert_eq!(r.sources.len(), 1);
}

#[test]
fn sources_are_the_cited_pages_and_the_rest_read_is_folded_apart() {
    let mut state = RunState::new(RunInput::new("what is json", Mode::Quick));
    state.reports.push(ResearcherReport {
        task_id: 0,
        markdown: String::new(),
        fetched: vec![
            SourceRef::new("http://h/json.html", "json — JSON encoder"),
            SourceRef::new("http://h/pickle.html", "pickle"),
            SourceRef::new("http://h/csv.html", "csv"),
        ],
        seen: vec![],
        pages: vec![],
        irrelevant: vec![],
        queries: vec![],
        searches: 1,
        usage: Default::default(),
    });
    let r = compose(
        &state,
        "JSON is parsed by [json](http://h/json.html).",
        false,
    );
    assert!(
        r.markdown.contains(
            "## Sources\n\n1. [json — JSON encoder](http://h/json.html)\n\n<details>\n<summary>Also read (2 page(s), not cited)</summary>\n\n1. [csv](http://h/csv.html)\n2. [pickle](http://h/pickle.html)\n\n</details>\n"
        ),
        "{}",
        r.markdown
    );
    // Nothing cited: the report says so, and everything read is folded.
    let r = compose(&state, "JSON is a format.", false);
    assert!(
        r.markdown
            .contains("## Sources\n\n_The report cites no page._\n\n<details>"),
        "{}",
        r.markdown
    );
}

#[test]
fn model_markdown_is_unfenced_and_repetition_is_cut() {
    let looped = "```markdown\n## Summary\n\nThe json module decodes JSON text into Python objects.\n\n## Key findings\n\n- loads parses a str\n\n## Summary\n\nThe json module decodes JSON text into Python objects.\n\n## Key findings\n\n- loads\n```";
    assert_eq!(
        tidy_model_markdown(looped),
        "## Summary\n\nThe json module decodes JSON text into Python objects.\n\n## Key findings\n\n- loads parses a str"
    );
    let normal = "## A\n\n#### Pros\n\n- x\n\n## B\n\n#### Pros\n\n- y";
    assert_eq!(tidy_model_markdown(normal), normal);
}

#[test]
fn abort_report_is_honest_and_cites_nothing() {
    let state = RunState::new(RunInput::new("zzqx nonsense", Mode::Quick));
    let r = abort_report(&state);
    assert!(r.aborted);
    assert!(
        r.markdown
            .starts_with("# Unable to research: zzqx nonsense")
    );
    assert!(!r.markdown.contains("http"));
}

/// Own hostile question: git's pages were read and judged off the task, Python's release notes
/// kept. The honest report says none kept is of git's docs, not that none names Mercurial.
#[test]
fn an_abort_report_says_when_no_page_kept_is_of_the_asked_products_docs() {
    use crate::research::machine::state::PageExtract;
    let asked = "Which git subcommand converts a repository to Mercurial?";
    let mut state = RunState::new(RunInput::new(asked, Mode::Quick));
    let (git, py) = (
        "http://d/git-doc/git-fast-export.html",
        "http://d/python3.11-doc/html/whatsnew/3.2.html",
    );
    state.reports.push(ResearcherReport {
        task_id: 0,
        markdown: String::new(),
        fetched: vec![
            SourceRef::new(git, "git-fast-export(1)"),
            SourceRef::new(py, "What's New In Python 3.2"),
        ],
        seen: vec![],
        pages: vec![PageExtract {
            url: py.into(),
            title: "What's New In Python 3.2".into(),
            text: "There is now a Mercurial repository.".into(),
        }],
        irrelevant: vec![git.into()],
        queries: vec![],
        searches: 1,
        usage: Default::default(),
    });
    let r = abort_report(&state);
    assert!(
        r.markdown
            .contains("none of them is of git's documentation"),
        "{}",
        r.markdown
    );
}

#[test]
fn a_report_of_a_compared_run_ends_with_its_changes_before_the_sources() {
    use crate::research::machine::state::{Mode, ResearcherReport, RunInput, RunState, SourceRef};
    let url = "http://docs/json.html";
    let input = RunInput::new("How do I decode JSON?", Mode::Quick).with_earlier(
        crate::research::machine::state::Earlier::from_findings(
            &serde_json::json!({
                "claims": [{"claim": "json.loads parses a str.", "supported": true}],
                "sources": [{"url": "http://docs/pickle.html"}],
            }),
            "2026-11-24T08:00:00Z",
        ),
    );
    assert!(
        input
            .context
            .as_deref()
            .unwrap_or("")
            .contains("An earlier report")
    );
    let mut state = RunState::new(input);
    state.fetched_urls.insert(url.into());
    state.reports.push(ResearcherReport {
        task_id: 0,
        markdown: String::new(),
        fetched: vec![SourceRef::new(url.to_string(), "json")],
        seen: vec![],
        pages: vec![crate::research::machine::state::PageExtract {
            url: url.into(),
            title: "json".into(),
            text: "json.dump writes an object to a file-like object as JSON.".into(),
        }],
        irrelevant: vec![],
        queries: vec![],
        searches: 1,
        usage: Default::default(),
    });
    let report = crate::research::writing::report::compose(
        &state,
        &format!("# JSON\n\njson.dump writes an object to a file-like object ([json]({url})).\n"),
        false,
    );
    let changes = report
        .markdown
        .find("## Changes since 2026-11-24T08:00:00Z")
        .unwrap();
    let sources = report.markdown.find("## Sources").unwrap();
    assert!(changes < sources, "{}", report.markdown);
    let findings: serde_json::Value = serde_json::from_str(&report.findings_json).unwrap();
    assert_eq!(findings["changes"]["since"], "2026-11-24T08:00:00Z");
    assert_eq!(
        findings["changes"]["vanishedSources"],
        serde_json::json!(["http://docs/pickle.html"])
    );
}
