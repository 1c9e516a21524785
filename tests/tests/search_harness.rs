//! The local search stack end to end: Debian's searx over the FTS5 index of Debian's Python and
//! PostgreSQL docs, with result URLs served by the docs server, queried raw and through
//! `quarry_engine::sources::searxng::SearxngGatherer`.
//!
//! Needs `scripts/install-test-deps.sh`; without it each test prints why it is skipped, unless
//! `CI` is set, where a missing dependency fails the test.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use quarry_e2e::doc_trees::{DocTrees, EVAL_FROZEN_DOC_TREES};
use quarry_e2e::docs_server::DocsServer;
use quarry_e2e::searx::{
    ENGINE_NAME, PAGE_SIZE, SYSTEM_PYTHON, SearchStack, SearxError, SearxInstance, index_builder,
    index_mismatch, index_path_for, missing_dependencies, require_installed,
};
use quarry_engine::sources::Gatherer;
use quarry_engine::sources::searxng::SearxngGatherer;
use serde_json::Value;

const NONSENSE: &str = "xqzvfjw blorptangle";

async fn raw_search(client: &reqwest::Client, stack: &SearchStack, query: &str) -> Value {
    let mut url = reqwest::Url::parse(&format!("{}/search", stack.searx.base_url())).unwrap();
    url.query_pairs_mut()
        .append_pair("q", query)
        .append_pair("format", "json");
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "{query}");
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    response.json().await.unwrap()
}

fn urls(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn searx_answers_in_its_json_shape_with_fetchable_doc_urls() {
    let stack = SearchStack::start_for("searx_answers_in_its_json_shape").await;
    let client = reqwest::Client::new();
    let docs = stack.docs.base_url();
    // (query, a page that must be among the first three results)
    let cases = [
        ("json decoder", "python3.11-doc/html/library/json.html"),
        (
            "list comprehension",
            "python3.11-doc/html/tutorial/datastructures.html",
        ),
        ("VACUUM", "postgresql-doc-15/html/sql-vacuum.html"),
    ];
    for (query, expected) in cases {
        let started = Instant::now();
        let answer = raw_search(&client, &stack, query).await;
        eprintln!("searx {query:?}: {:?}", started.elapsed());
        assert_eq!(answer["query"], query);
        for key in ["answers", "corrections", "infoboxes", "suggestions"] {
            assert!(answer[key].is_array(), "{query}: {key} in {answer}");
        }
        assert_eq!(
            answer["unresponsive_engines"],
            Value::Array(vec![]),
            "{query}"
        );
        let results = answer["results"].as_array().unwrap();
        assert_eq!(results.len(), PAGE_SIZE as usize, "{query}");
        for result in results {
            let url = result["url"].as_str().unwrap();
            assert!(url.starts_with(&format!("{docs}/")), "{query}: {url}");
            assert!(url.ends_with(".html"), "{query}: {url}");
            assert!(!result["title"].as_str().unwrap().is_empty(), "{result}");
            assert!(!result["content"].as_str().unwrap().is_empty(), "{result}");
            assert_eq!(result["engine"], ENGINE_NAME);
            assert_eq!(result["engines"], serde_json::json!([ENGINE_NAME]));
        }
        let top3 = &urls(&answer)[..3];
        let expected_url = format!("{docs}/{expected}");
        assert!(
            top3.contains(&expected_url),
            "{query}: {expected_url} not in {top3:?}"
        );

        // The result really is a page of the docs server.
        let page = client.get(&expected_url).send().await.unwrap();
        assert_eq!(page.status(), 200, "{expected_url}");
        let content_type = page.headers()["content-type"].to_str().unwrap().to_string();
        assert!(content_type.starts_with("text/html"), "{content_type}");
        let html = page.text().await.unwrap();
        assert!(html.contains("<html"), "{expected_url}");
    }

    // The snippet is about the query: VACUUM's reference page says what VACUUM does.
    let answer = raw_search(&client, &stack, "VACUUM").await;
    let first = &answer["results"][0];
    assert_eq!(
        first["url"],
        format!("{docs}/postgresql-doc-15/html/sql-vacuum.html")
    );
    assert_eq!(first["title"], "VACUUM");
    assert!(
        first["content"]
            .as_str()
            .unwrap()
            .contains("garbage-collect and optionally analyze a database"),
        "{first}"
    );
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn nonsense_and_syntax_laden_queries_are_answered_not_failed() {
    let stack = SearchStack::start_for("nonsense_and_syntax_laden_queries").await;
    let client = reqwest::Client::new();
    let answer = raw_search(&client, &stack, NONSENSE).await;
    assert_eq!(answer["results"], Value::Array(vec![]));
    assert_eq!(answer["unresponsive_engines"], Value::Array(vec![]));

    // FTS5 operators and quotes in user text must not turn into SQL/FTS errors.
    for query in [
        "\"json\" AND (decoder OR",
        "col:umn -x NEAR(a b)",
        "it's a \"quoted\"  query*",
    ] {
        let answer = raw_search(&client, &stack, query).await;
        assert_eq!(
            answer["unresponsive_engines"],
            Value::Array(vec![]),
            "{query}: {answer}"
        );
        assert!(!answer["results"].as_array().unwrap().is_empty(), "{query}");
    }
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn searxng_gatherer_returns_hits_from_the_real_instance() {
    let stack = SearchStack::start_for("searxng_gatherer_returns_hits").await;
    let docs = stack.docs.base_url();
    let gatherer = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(10)).unwrap();

    let mut timings = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let hits = gatherer.search("json decoder", 5).await.unwrap();
        timings.push(started.elapsed());
        assert_eq!(hits.len(), 5);
        assert_eq!(
            hits[0].url,
            format!("{docs}/python3.11-doc/html/library/json.html")
        );
        assert_eq!(hits[0].title, "json — JSON encoder and decoder");
        assert!(hits[0].snippet.contains("JSON"), "{:?}", hits[0]);
        assert!(hits.iter().all(|h| h.engine == ENGINE_NAME));
        assert!(hits.iter().all(|h| h.url.starts_with(&format!("{docs}/"))));
        let unique: HashSet<_> = hits.iter().map(|h| &h.url).collect();
        assert_eq!(unique.len(), hits.len());
    }
    timings.sort();
    eprintln!(
        "gatherer latency over 5 queries: min {:?}, median {:?}, max {:?}",
        timings[0], timings[2], timings[4]
    );

    assert_eq!(gatherer.search(NONSENSE, 5).await.unwrap(), vec![]);

    // The second page continues the first, without overlap.
    let first = gatherer.search("VACUUM", 10).await.unwrap();
    let second = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(10))
        .unwrap()
        .with_pageno(2)
        .search("VACUUM", 10)
        .await
        .unwrap();
    assert_eq!(first.len(), 10);
    assert_eq!(second.len(), 10);
    let first_urls: HashSet<_> = first.iter().map(|h| &h.url).collect();
    assert!(second.iter().all(|h| !first_urls.contains(&h.url)));
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn dropping_the_stack_stops_searx() {
    let stack = SearchStack::start_for("dropping_the_stack_stops_searx").await;
    let pid = stack.searx.pid();
    let base = stack.searx.base_url().to_string();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(stack);
    // Drop kills and reaps the child, so its /proc entry is gone at once.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    let gatherer = SearxngGatherer::new(&base, Duration::from_secs(2)).unwrap();
    assert!(gatherer.search("json", 1).await.is_err());
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_broken_index_fails_start_with_searx_stderr() {
    // Needs searx itself but not the real index; reuse the stack's skip rule.
    let stack = SearchStack::start_for("a_broken_index_fails_start").await;
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.sqlite");
    std::fs::write(
        &broken,
        "this is not an SQLite database, just text long enough",
    )
    .unwrap();
    let err = SearxInstance::start(&broken, &stack.docs.base_url())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, SearxError::EngineFailed { .. }), "{err:?}");
    assert!(message.contains("file is not a database"), "{message}");
}

/// Runs the project's index builder (Debian's python3) and returns its stdout.
fn build_index(doc_root: &Path, tree: &str, out: &Path) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/build_docs_index.py");
    let output = std::process::Command::new(SYSTEM_PYTHON)
        .arg(script)
        .arg("--if-stale")
        .arg("--doc-root")
        .arg(doc_root)
        .arg("--tree")
        .arg(tree)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test]
#[ignore = "needs the docs corpus (scripts/install-test-deps.sh)"]
async fn index_builder_indexes_page_text_without_chrome() {
    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("index.sqlite");
    let root = dir.path().join("doc");
    let html = root.join("pkg/html");
    std::fs::create_dir_all(html.join("guide")).unwrap();
    std::fs::write(
        html.join("guide/my page.html"),
        r##"<!DOCTYPE html><html><head><meta charset="utf-8">
        <title>Frobnicator &#8212; Python 3.11.2 documentation</title>
        <script>var zzscripttoken = 1;</script><style>.zzstyletoken{}</style></head>
        <body><div class="related" role="navigation"><a href="x">zznavtoken</a></div>
        <div class="body" role="main"><h1>Frobnicator<a class="headerlink" href="#f">¶</a></h1>
        <p>The quuxification of widgets.</p><p>Second<br>line</p></div>
        <div class="footer">zzfootertoken</div></body></html>"##,
    )
    .unwrap();
    std::fs::write(
        html.join("other.html"),
        "<html><head><title>Other</title></head><body><p>widgets widgets widgets</p></body></html>",
    )
    .unwrap();
    std::fs::write(
        html.join("genindex.html"),
        "<html><title>Index</title><body>quuxification widgets</body></html>",
    )
    .unwrap();

    let missing = missing_dependencies(&index)
        .into_iter()
        .filter(|m| !m.starts_with("docs index"))
        .collect::<Vec<_>>();
    require_installed("index_builder_indexes_page_text_without_chrome", &missing);
    let first = build_index(&root, "pkg/html", &index);
    assert!(first.starts_with("indexed 2 pages ("), "{first}");
    let second = build_index(&root, "pkg/html", &index);
    assert_eq!(second, format!("index {} is up to date\n", index.display()));

    let docs = DocsServer::start(&root).await.unwrap();
    let searx = SearxInstance::start(&index, &docs.base_url())
        .await
        .unwrap();
    let gatherer = SearxngGatherer::new(searx.base_url(), Duration::from_secs(10)).unwrap();

    // Porter stemming: the plural finds the singular; the generated index page is not indexed.
    let hits = gatherer.search("quuxifications", 10).await.unwrap();
    let page_url = format!("{}/pkg/html/guide/my%20page.html", docs.base_url());
    assert_eq!(
        hits,
        vec![quarry_engine::sources::SearchHit {
            url: page_url.clone(),
            title: "Frobnicator".into(),
            snippet: "Frobnicator The quuxification of widgets. Second line".into(),
            engine: ENGINE_NAME.into(),
        }]
    );
    let page = reqwest::get(&page_url).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("The quuxification of widgets.")
    );

    // Term frequency ranks the page saying "widgets" three times first.
    let hits = gatherer.search("widgets", 10).await.unwrap();
    assert_eq!(
        hits.iter().map(|h| h.title.as_str()).collect::<Vec<_>>(),
        vec!["Other", "Frobnicator"]
    );

    for chrome in [
        "zznavtoken",
        "zzscripttoken",
        "zzstyletoken",
        "zzfootertoken",
        "¶",
    ] {
        assert_eq!(
            gatherer.search(chrome, 10).await.unwrap(),
            vec![],
            "{chrome}"
        );
    }
}

/// Runs the index builder with `args` and returns its exit code and stdout.
fn run_builder(args: &[String]) -> (i32, String) {
    let output = std::process::Command::new(SYSTEM_PYTHON)
        .arg(index_builder())
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap() + &String::from_utf8_lossy(&output.stderr),
    )
}

#[tokio::test]
#[ignore = "needs searx (scripts/install-test-deps.sh)"]
async fn configured_trees_below_and_outside_the_root_are_indexed_served_and_searched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("doc");
    std::fs::create_dir_all(root.join("pkg/html")).unwrap();
    std::fs::write(
        root.join("pkg/html/inside.html"),
        "<html><head><title>Inside</title></head><body><p>zzinsideword here</p></body></html>",
    )
    .unwrap();
    let outside = dir.path().join("elsewhere/manual");
    std::fs::create_dir_all(outside.join("sub")).unwrap();
    std::fs::write(
        outside.join("sub/out.html"),
        "<html><head><title>Outside</title></head><body><p>zzoutsideword there</p></body></html>",
    )
    .unwrap();
    let work = dir.path().join("work");
    let trees = DocTrees::new(&["pkg/html", outside.to_str().unwrap()], &root, "test").unwrap();
    let missing = missing_dependencies(&root.join("pkg/html/inside.html"));
    require_installed(
        "configured_trees_below_and_outside_the_root_are_indexed_served_and_searched",
        &missing,
    );

    // The builder names the index as the harness does, and --check agrees with what it built.
    let mut args = vec!["--out-dir".to_string(), work.display().to_string()];
    args.extend(trees.builder_args());
    let (code, printed) = run_builder(&[args.clone(), vec!["--print-path".into()]].concat());
    assert_eq!(code, 0, "{printed}");
    let index = work.join(trees.index_file_name());
    assert_eq!(printed.trim(), index.display().to_string());
    let (code, printed) = run_builder(&[args.clone(), vec!["--check".into()]].concat());
    assert_eq!((code, printed.trim()), (3, "no index file"));
    let (code, printed) = run_builder(&args);
    assert_eq!(code, 0, "{printed}");
    assert!(printed.starts_with("indexed 2 pages ("), "{printed}");
    assert_eq!(index_mismatch(&index, &trees), None);
    let only_inside = DocTrees::new(&["pkg/html"], &root, "test").unwrap();
    let mismatch = index_mismatch(&index, &only_inside).expect("a different tree list is stale");
    assert!(mismatch.contains("index of trees pkg/html,"), "{mismatch}");
    assert!(mismatch.contains("QUARRY_DOC_TREES=pkg/html"), "{mismatch}");

    let docs = DocsServer::start_with_trees(&trees).await.unwrap();
    let searx = SearxInstance::start(&index, &docs.base_url())
        .await
        .unwrap();
    let gatherer = SearxngGatherer::new(searx.base_url(), Duration::from_secs(10)).unwrap();
    for (word, path) in [
        ("zzinsideword", "pkg/html/inside.html".to_string()),
        (
            "zzoutsideword",
            format!("{}/sub/out.html", trees.trees()[1].url_path()),
        ),
    ] {
        let hits = gatherer.search(word, 10).await.unwrap();
        let url = format!("{}/{path}", docs.base_url());
        assert_eq!(
            hits.iter().map(|h| h.url.as_str()).collect::<Vec<_>>(),
            vec![url.as_str()],
            "{word}"
        );
        let page = reqwest::get(&url).await.unwrap();
        assert_eq!(page.status(), 200, "{url}");
        assert!(page.text().await.unwrap().contains(word), "{url}");
    }
}

#[tokio::test]
#[ignore = "needs searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn the_git_manual_is_served_and_searched_beside_the_default_trees() {
    let test = "the_git_manual_is_served_and_searched_beside_the_default_trees";
    let trees = DocTrees::new(
        &EVAL_FROZEN_DOC_TREES,
        Path::new(quarry_e2e::docs_server::DEFAULT_DOC_ROOT),
        "test",
    )
    .unwrap();
    assert_eq!(
        index_path_for(&trees).file_name().unwrap(),
        "docs-index-python3.11-doc_html+postgresql-doc-15_html+git-doc.sqlite"
    );
    let stack = match SearchStack::start_with_trees(&trees, Vec::new()).await {
        Ok(stack) => stack,
        Err(SearxError::Missing { what }) => {
            require_installed(test, &[what]);
            unreachable!("require_installed panics on a missing dependency")
        }
        Err(e) => panic!("{test}: {e}"),
    };
    let gatherer = SearxngGatherer::new(stack.searx.base_url(), Duration::from_secs(10)).unwrap();
    let base = stack.docs.base_url();
    // One query per tree: each tree's pages are in the index and their URLs are served.
    for (query, page) in [
        ("git rebase interactive", "git-doc/git-rebase.html"),
        ("json loads", "python3.11-doc/html/library/json.html"),
        ("vacuum full", "postgresql-doc-15/html/sql-vacuum.html"),
    ] {
        let hits = gatherer.search(query, 10).await.unwrap();
        let url = format!("{base}/{page}");
        assert!(
            hits.iter().any(|h| h.url == url),
            "{query}: {url} not among {:?}",
            hits.iter().map(|h| &h.url).collect::<Vec<_>>()
        );
        let response = reqwest::get(&url).await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        assert!(response.text().await.unwrap().contains("</html>"), "{url}");
    }
    // The default stack's index has no Git pages: the trees are really configuration.
    let default = SearchStack::start_with_trees(&DocTrees::default_trees(), Vec::new())
        .await
        .unwrap();
    let default_gatherer =
        SearxngGatherer::new(default.searx.base_url(), Duration::from_secs(10)).unwrap();
    let hits = default_gatherer
        .search("git rebase interactive", 10)
        .await
        .unwrap();
    assert!(
        hits.iter().all(|h| !h.url.contains("/git-doc/")),
        "{hits:?}"
    );
}
