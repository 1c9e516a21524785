//! Unit tests of `researcher`.

use super::*;
use crate::llm::{ChatResponse, Role};
use crate::research::machine::state::Mode;
use crate::scrape::{FetchError, Page};
use crate::sources::SourceError;
use crate::sources::specialised::{QuestionSearch, SecurityLookup};
use async_trait::async_trait;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const NVD: &str = "https://nvd.nist.gov/vuln/detail/CVE-2021-44228";
const SF: &str = "https://serverfault.com/questions/1/log4j-mitigation";

/// Plays a fixed script of answers, one per model turn, and keeps the requests.
struct Script {
    turns: Vec<ChatResponse>,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Script {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut requests = self.requests.lock().unwrap();
        let turn = requests.len();
        requests.push(request);
        Ok(self
            .turns
            .get(turn)
            .cloned()
            .unwrap_or_else(|| text("done")))
    }
    fn context_window(&self) -> u64 {
        128_000
    }
}

fn text(s: &str) -> ChatResponse {
    ChatResponse {
        content: s.into(),
        tool_calls: vec![],
        usage: Usage::default(),
        model: "fake".into(),
        finish_reason: None,
    }
}

fn call(name: &str, arguments: serde_json::Value) -> ChatResponse {
    ChatResponse {
        tool_calls: vec![ToolCall {
            id: format!("call-{name}"),
            name: name.into(),
            arguments,
        }],
        ..text("")
    }
}

#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
    last_site: Mutex<Option<String>>,
    last_query: Mutex<Option<SecurityQuery>>,
}

#[async_trait]
impl Gatherer for Counting {
    async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(vec![])
    }
}

fn hit(url: &str, engine: &str) -> SearchHit {
    SearchHit {
        url: url.into(),
        title: format!("title of {url}"),
        snippet: "snippet".into(),
        engine: engine.into(),
    }
}

#[async_trait]
impl SecurityLookup for Counting {
    async fn lookup(&self, query: &SecurityQuery) -> ToolAnswer {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.last_query.lock().unwrap() = Some(query.clone());
        ToolAnswer {
            hits: vec![hit(NVD, "nvd")],
            text: format!("NVD: CVE-2021-44228 — {NVD}"),
        }
    }
}

#[async_trait]
impl QuestionSearch for Counting {
    async fn questions(&self, _: &str, site: Option<&str>) -> Result<ToolAnswer, SourceError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self.last_site.lock().unwrap() = site.map(str::to_string);
        Ok(ToolAnswer {
            hits: vec![hit(SF, "stackexchange")],
            text: format!("Q: log4j mitigation — {SF}"),
        })
    }
}

struct Pages(Mutex<Vec<String>>);

#[async_trait]
impl Fetcher for Pages {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        self.0.lock().unwrap().push(url.to_string());
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title: format!("Title of {url}"),
            markdown: format!("Content of {url}"),
            bytes: 10,
        })
    }
}

#[tokio::test]
async fn specialised_tools_share_the_gathering_budget_and_their_hits_are_readable() {
    let model = Arc::new(Script {
        turns: vec![
            call(
                "security_search",
                json!({"query": "CVE-2021-44228", "package": "log4j-core", "ecosystem": "Maven"}),
            ),
            call(
                "stackexchange",
                json!({"query": "log4j mitigation", "site": "serverfault"}),
            ),
            call("security_search", json!({"query": "log4j"})),
            call("stackexchange", json!({"query": "log4j jndi"})),
            // Fifth gathering call: over the budget of four, whatever the tool.
            call("stackexchange", json!({"query": "one more"})),
            call("search", json!({"queries": ["log4j"]})),
            call("scrape", json!({"urls": [NVD]})),
            call("scrape", json!({"urls": [NVD, SF]})),
            text(&format!(
                "## Summary\nLog4Shell.\n\n## Key findings\n- Critical ([NVD]({NVD})).\n- Mitigations ([SF]({SF})).\n\n## Links\n- {NVD}\n- {SF}"
            )),
        ],
        requests: Mutex::default(),
    });
    let security = Arc::new(Counting::default());
    let stackexchange = Arc::new(Counting::default());
    let web = Arc::new(Counting::default());
    let fetcher = Arc::new(Pages(Mutex::default()));
    let deps = ResearcherDeps {
        model: model.clone(),
        gatherer: web.clone(),
        fetcher: fetcher.clone(),
        pool: Arc::default(),
        settings: ResearcherSettings::default(),
        specialised: Some(Arc::new(SpecialisedSources {
            security: Some(security.clone()),
            stackexchange: Some(stackexchange.clone()),
        })),
    };
    let input = RunInput::new("Is log4j exploitable?", Mode::Quick);
    let report = run_researcher(&deps, &input, 0, "log4j", &[], None, &|_, _| {})
        .await
        .unwrap();

    assert_eq!(security.calls.load(Ordering::SeqCst), 2);
    assert_eq!(stackexchange.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        web.calls.load(Ordering::SeqCst),
        0,
        "search came after the budget was spent"
    );
    assert_eq!(report.searches, 4);
    assert_eq!(
        *security.last_query.lock().unwrap(),
        Some(SecurityQuery::text("log4j"))
    );
    assert_eq!(
        stackexchange.last_site.lock().unwrap().as_deref(),
        None,
        "the last call named no site"
    );
    let first = model.requests.lock().unwrap()[0].clone();
    let offered: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        offered,
        vec!["search", "scrape", "security_search", "stackexchange"]
    );
    assert!(first.messages[0].content.contains("`security_search`"));
    let requests = model.requests.lock().unwrap();
    let tool_results: Vec<&str> = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert!(tool_results[0].contains("CVE-2021-44228"));
    assert!(
        tool_results[4].starts_with("Gathering budget exhausted"),
        "{}",
        tool_results[4]
    );
    assert!(
        tool_results[5].starts_with("Gathering budget exhausted"),
        "{}",
        tool_results[5]
    );
    // The specialised hits were readable and read (after two turns refused for budget, the
    // engine reads the best of them itself, in score order; the model's scrapes follow).
    let mut read = fetcher.0.lock().unwrap().clone();
    read.sort();
    assert_eq!(read, vec![NVD.to_string(), SF.to_string()]);
    let mut fetched: Vec<&str> = report.fetched.iter().map(|s| s.url.as_str()).collect();
    fetched.sort_unstable();
    assert_eq!(fetched, vec![NVD, SF]);
    let seen: Vec<&str> = report.seen.iter().map(|s| s.url.as_str()).collect();
    assert_eq!(seen, vec![NVD, SF]);
}

#[test]
fn specialised_tools_are_offered_only_when_configured() {
    let names =
        |s: Option<&SpecialisedSources>| tools(s).into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(None), vec!["search", "scrape"]);
    let only_se = SpecialisedSources {
        security: None,
        stackexchange: Some(Arc::new(Counting::default())),
    };
    assert_eq!(
        names(Some(&only_se)),
        vec!["search", "scrape", "stackexchange"]
    );
    assert_eq!(specialised_tools_note(None), "");
    assert!(specialised_tools_note(Some(&only_se)).contains("`stackexchange`"));
    assert_eq!(
        names(Some(&SpecialisedSources::default())),
        vec!["search", "scrape"]
    );
}

/// Answers each turn with what `turn` returns for its index, and keeps the requests.
struct Turns {
    turn: fn(usize) -> Result<ChatResponse, LlmError>,
    requests: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl ChatModel for Turns {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut requests = self.requests.lock().unwrap();
        let n = requests.len();
        requests.push(request);
        (self.turn)(n)
    }
    fn context_window(&self) -> u64 {
        8192
    }
}

/// Every query finds the json page; the queries are kept.
#[derive(Default)]
struct JsonSearch(Mutex<Vec<String>>);

const JSON_PAGE: &str = "https://docs.python.org/3/library/json.html";

#[async_trait]
impl Gatherer for JsonSearch {
    async fn search(&self, q: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
        self.0.lock().unwrap().push(q.to_string());
        Ok(vec![SearchHit {
            url: JSON_PAGE.into(),
            title: "json — JSON encoder and decoder".into(),
            snippet: "json.loads decodes JSON".into(),
            engine: "searx".into(),
        }])
    }
}

struct JsonPage;

#[async_trait]
impl Fetcher for JsonPage {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        Ok(Page {
                url: url.into(),
                final_url: url.into(),
                title: "json — JSON encoder and decoder".into(),
                markdown: "# json\n\n**json.loads(s)**\n\nDeserialize s (a str instance containing a JSON document) to a Python object.".into(),
                bytes: 100,
            })
    }
}

fn degenerate() -> LlmError {
    LlmError::Billed {
        usage: Usage {
            input_tokens: 900,
            output_tokens: 165,
            cost_pico_usd: 7,
            llm_calls: 1,
            ..Usage::default()
        },
        source: Box::new(LlmError::Degenerate { tokens: 165 }),
    }
}

fn assert_no_repeats(searched: &[String]) {
    let distinct: BTreeSet<String> = searched.iter().map(|q| queries::normalise(q)).collect();
    assert_eq!(distinct.len(), searched.len(), "{searched:?}");
}

fn json_deps(model: Arc<dyn ChatModel>, search: Arc<JsonSearch>) -> ResearcherDeps {
    ResearcherDeps {
        model,
        gatherer: search,
        fetcher: Arc::new(JsonPage),
        pool: Arc::default(),
        // These tests drive the agent loop itself, whatever the window.
        settings: ResearcherSettings {
            guided: Some(false),
            ..ResearcherSettings::default()
        },
        specialised: None,
    }
}

#[tokio::test]
async fn degenerate_turns_are_billed_and_the_engine_searches_and_reads_for_the_model() {
    let model = Arc::new(Turns {
        // Two degenerate turns, then the clean-context reporter degenerates as well.
        turn: |_| Err(degenerate()),
        requests: Mutex::default(),
    });
    let search = Arc::new(JsonSearch::default());
    let deps = json_deps(model.clone(), search.clone());
    let task = "How do I decode JSON with the json module in Python?";
    let input = RunInput::new(task, Mode::Quick);
    let reported = Mutex::new(Usage::default());
    let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, u| {
        reported.lock().unwrap().add(&u)
    })
    .await
    .expect("a bad output is not the end of the run");

    // Asked twice in the conversation, once in a clean context: three calls, all billed.
    assert_eq!(model.requests.lock().unwrap().len(), 3);
    assert_eq!(report.usage.llm_calls, 3);
    assert_eq!(report.usage.input_tokens, 2700);
    assert_eq!(report.usage.output_tokens, 495);
    assert_eq!(*reported.lock().unwrap(), report.usage);
    // The engine searched the task as written and as keywords (then perhaps reformulated), and
    // read the result.
    let searched = search.0.lock().unwrap().clone();
    assert_eq!(
        searched[..2],
        [task.to_string(), "decode json module python".to_string()]
    );
    assert_no_repeats(&searched);
    assert_eq!(report.fetched.len(), 1);
    assert_eq!(report.pages.len(), 1);
    // The extractive report quotes the passage that answers, not the page's opening.
    assert!(
        report.markdown.contains("json.loads(s)"),
        "{}",
        report.markdown
    );
    assert!(report.markdown.contains(JSON_PAGE), "{}", report.markdown);
}

/// Finds an off-topic page first, then the one that answers.
struct TwoResults;

const OFF_TOPIC: &str = "https://docs.python.org/3/library/pickle.html";

#[async_trait]
impl Gatherer for TwoResults {
    async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
        Ok(vec![hit(OFF_TOPIC, "searx"), hit(JSON_PAGE, "searx")])
    }
}

struct TwoPages(Mutex<Vec<String>>);

#[async_trait]
impl Fetcher for TwoPages {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        self.0.lock().unwrap().push(url.to_string());
        let markdown = if url == OFF_TOPIC {
            "# pickle\n\nThe pickle module implements binary protocols for object structures."
        } else {
            "# json\n\n**json.loads(s)**\n\nDeserialize s (a str instance containing a JSON document) to a Python object."
        };
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title: url.into(),
            markdown: markdown.into(),
            bytes: 100,
        })
    }
}

/// Runs one researcher on the JSON task over [`TwoResults`] and [`TwoPages`], guided or not.
async fn research_json_task(model: Arc<Turns>, guided: bool) -> (ResearcherReport, Arc<TwoPages>) {
    research_json_task_in(model, guided, Arc::default()).await
}

/// [`research_json_task`] with the run's URL pool `pool`.
async fn research_json_task_in(
    model: Arc<Turns>,
    guided: bool,
    pool: Arc<UrlPool>,
) -> (ResearcherReport, Arc<TwoPages>) {
    research_task_in(
        model,
        guided,
        pool,
        "How do I decode a JSON document with json.loads?",
    )
    .await
}

/// Runs one researcher on `task` over [`TwoResults`] and [`TwoPages`].
async fn research_task_in(
    model: Arc<Turns>,
    guided: bool,
    pool: Arc<UrlPool>,
    task: &str,
) -> (ResearcherReport, Arc<TwoPages>) {
    let fetcher = Arc::new(TwoPages(Mutex::default()));
    let deps = ResearcherDeps {
        model,
        gatherer: Arc::new(TwoResults),
        fetcher: fetcher.clone(),
        pool,
        settings: ResearcherSettings {
            guided: Some(guided),
            ..ResearcherSettings::default()
        },
        specialised: None,
    };
    let input = RunInput::new(task, Mode::Quick);
    let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
        .await
        .unwrap();
    (report, fetcher)
}

/// A page the researcher found nothing on for its task goes back to the run's pool for its
/// siblings, and the researcher does not read it again.
#[tokio::test]
async fn an_off_task_page_is_given_back_to_the_pool_and_not_read_twice() {
    let model = Arc::new(Turns {
        turn: |n| {
            Ok(match n {
                0 => call("search", json!({"queries": ["json loads"]})),
                1 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                2 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                _ => text(&format!(
                    "## Summary\njson.loads deserializes a JSON document ([json]({JSON_PAGE}))."
                )),
            })
        },
        requests: Mutex::default(),
    });
    let pool = Arc::new(UrlPool::default());
    let (_, fetcher) = research_json_task_in(model, false, pool.clone()).await;
    assert!(!pool.contains(OFF_TOPIC).await);
    assert!(pool.contains(JSON_PAGE).await);
    assert_eq!(
        fetcher
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|u| *u == OFF_TOPIC)
            .count(),
        1
    );
}

#[tokio::test]
async fn a_batch_of_off_task_pages_is_spent_on_the_next_candidates() {
    let model = Arc::new(Turns {
        turn: |n| {
            Ok(match n {
                0 => call("search", json!({"queries": ["json loads"]})),
                1 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                2 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                _ => text(&format!(
                    "## Summary\njson.loads deserializes a JSON document ([json]({JSON_PAGE}))."
                )),
            })
        },
        requests: Mutex::default(),
    });
    let (report, fetcher) = research_json_task(model.clone(), false).await;
    // The model asked for the off-topic page only; its batch went on to the next result.
    assert_eq!(
        *fetcher.0.lock().unwrap(),
        vec![OFF_TOPIC.to_string(), JSON_PAGE.to_string()]
    );
    assert_eq!(report.irrelevant, vec![OFF_TOPIC.to_string()]);
    assert_eq!(report.pages.len(), 1);
    assert_eq!(report.pages[0].url, JSON_PAGE);
    let requests = model.requests.lock().unwrap();
    let batch = requests[3]
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(
        batch.content.contains(
            "None of those pages bears on the task, so the next search results were read instead."
        ),
        "{}",
        batch.content
    );
    assert!(
        !batch.content.contains("binary protocols"),
        "{}",
        batch.content
    );
}

#[tokio::test]
async fn placeholder_and_repeated_queries_do_not_spend_the_search_budget() {
    let model = Arc::new(Turns {
        turn: |n| {
            Ok(match n {
                0 => call(
                    "search",
                    json!({"queries": ["example1", "example2", "example3"]}),
                ),
                1 => call(
                    "search",
                    json!({"queries": ["example1", "  ", "python json decode"]}),
                ),
                2 => call("search", json!({"queries": ["Python JSON decode."]})),
                3 => call("search", json!({"queries": ["json.loads object_hook"]})),
                _ => text(&format!(
                    "## Summary\nUse json.loads ([json]({JSON_PAGE}))."
                )),
            })
        },
        requests: Mutex::default(),
    });
    let search = Arc::new(JsonSearch::default());
    let deps = json_deps(model.clone(), search.clone());
    let task = "decode JSON in Python";
    let input = RunInput::new(task, Mode::Quick);
    let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
        .await
        .unwrap();
    // Turn 0: the task's own searches run, the placeholders do not. Turn 1: one new query.
    // Turn 2: a repeat, refused without a search call. Turn 3: one more. (The
    // reformulations may follow a search; they are never repeats either.)
    let searched = search.0.lock().unwrap().clone();
    assert_eq!(
        searched[..2],
        [
            "decode JSON in Python".to_string(),
            "decode json python".to_string()
        ]
    );
    assert!(
        searched.contains(&"python json decode".to_string()),
        "{searched:?}"
    );
    assert!(
        searched.contains(&"json.loads object_hook".to_string()),
        "{searched:?}"
    );
    assert!(
        !searched.iter().any(|q| q.contains("example")),
        "{searched:?}"
    );
    assert_no_repeats(&searched);
    assert_eq!(report.searches as usize, searched.len());
    let requests = model.requests.lock().unwrap();
    let results: Vec<&str> = requests
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.as_str())
        .collect();
    assert!(
        results[0].contains("Query \"example1\" was not run: a placeholder"),
        "{}",
        results[0]
    );
    assert!(
        results[1].contains("Query \"\" was not run: empty"),
        "{}",
        results[1]
    );
    assert!(
            results[2].starts_with("Query \"Python JSON decode.\" was not run: already searched.\nNo search was run and no search call was used."),
            "{}",
            results[2]
        );
    // Turn 2 spent no gathering call, so turn 3's query still ran.
    assert!(
        results[3].contains("Query \"json.loads object_hook\""),
        "{}",
        results[3]
    );
}

#[test]
fn small_windows_are_guided_unless_the_settings_say_otherwise() {
    assert!(guided::is_guided(None, 8192, true));
    assert!(guided::is_guided(None, guided::GUIDED_WINDOW_TOKENS, true));
    assert!(!guided::is_guided(None, 32_768, true));
    // Native tool calling keeps the agent loop at the profile's default 8k window.
    assert!(!guided::is_guided(None, 8192, false));
    assert!(!guided::is_guided(Some(false), 8192, true));
    assert!(guided::is_guided(Some(true), 128_000, false));
}

#[tokio::test]
async fn a_guided_researcher_searches_reads_and_asks_the_model_once() {
    let model = Arc::new(Turns {
        turn: |_| {
            Ok(text(
                "json.loads deserializes s, a str instance containing a JSON document, to a Python object [1].",
            ))
        },
        requests: Mutex::default(),
    });
    let (report, _) = research_json_task(model.clone(), true).await;
    // One model call: the grounded answer, with no tools offered.
    let requests = model.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].tools.is_empty());
    assert!(requests[0].messages[1].content.contains("Passages:"));
    assert!(
        !requests[0].messages[1].content.contains("binary protocols"),
        "an off-task page is never shown"
    );
    // The engine read the results and kept the one that bears on the task.
    assert_eq!(report.irrelevant, vec![OFF_TOPIC.to_string()]);
    assert_eq!(report.pages.len(), 1);
    assert!(report.markdown.contains(JSON_PAGE), "{}", report.markdown);
    assert!(
        report.markdown.contains("json.loads"),
        "{}",
        report.markdown
    );
    assert!(report.searches >= 2, "the task as written and as keywords");
}

/// Serves one page of PostgreSQL's docs, whatever is searched or fetched.
struct OtherProductDocs;

const PG_JIT: &str = "http://docs/postgresql-doc-15/html/jit-reason.html";

#[async_trait]
impl Gatherer for OtherProductDocs {
    async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
        Ok(vec![hit(PG_JIT, "searx")])
    }
}

#[async_trait]
impl Fetcher for OtherProductDocs {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title: "32.1. What Is JIT compilation?".into(),
            markdown: "# 32.1. What Is JIT compilation?\n\nJust-in-Time (JIT) compilation is the process of turning some form of interpreted program evaluation into a native program. PostgreSQL has built-in support to perform JIT compilation using LLVM when PostgreSQL is built with --with-llvm. To enable the built-in JIT compiler, set jit to on.".into(),
            bytes: 300,
        })
    }
}

/// My own hostile question: when every page read is another product's docs, no passage is
/// shown to the model and the report says the sources do not answer; before, the researcher
/// quoted that page's openings as its findings.
#[tokio::test]
async fn only_another_products_docs_read_answer_nothing() {
    let model = Arc::new(Turns {
        turn: |n| {
            Ok(match n {
                0 => call("search", json!({"queries": ["python jit compiler enable"]})),
                1 => call("scrape", json!({"urls": [PG_JIT]})),
                _ => text("{\"1\": \"To enable the built-in JIT compiler, set jit to on.\"}"),
            })
        },
        requests: Mutex::default(),
    });
    let docs = Arc::new(OtherProductDocs);
    let deps = ResearcherDeps {
        model,
        gatherer: docs.clone(),
        fetcher: docs,
        pool: Arc::default(),
        settings: ResearcherSettings::default(),
        specialised: None,
    };
    let task = "How do I enable Python's built-in JIT compiler in Python 3.11?";
    let input = RunInput::new(task, Mode::Quick);
    let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
        .await
        .unwrap();
    assert!(
        report.markdown.contains("The sources read do not answer"),
        "{}",
        report.markdown
    );
    assert!(
        !report.markdown.contains("set jit to on"),
        "{}",
        report.markdown
    );
}

/// Probe set: a report whose sentences state no value of the kind every part of the task asks
/// for is no answer; the task is refused with what was read, not finished with the passages.
#[tokio::test]
async fn a_report_stating_no_value_asked_for_is_refused() {
    let model = Arc::new(Turns {
        turn: |_| {
            Ok(text(
                "json.loads deserializes s, a str instance containing a JSON document, to a Python object [1].",
            ))
        },
        requests: Mutex::default(),
    });
    let task = "What is the maximum size of a JSON document json.loads can deserialize?";
    let (report, _) = research_task_in(model.clone(), true, Arc::default(), task).await;
    // The model was asked and answered; its answer states no size.
    assert_eq!(model.requests.lock().unwrap().len(), 1);
    assert!(
        report
            .markdown
            .contains("no passage read states the number asked for"),
        "{}",
        report.markdown
    );
    assert!(report.irrelevant.contains(&JSON_PAGE.to_string()));
    assert!(
        !report.markdown.contains("deserializes s"),
        "{}",
        report.markdown
    );
}

/// Serves the release notes of Python 3.7 and 3.11, both found by any search.
struct TwoReleases;

const NEW_37: &str = "http://docs/python3.11-doc/html/whatsnew/3.7.html";
const NEW_311: &str = "http://docs/python3.11-doc/html/whatsnew/3.11.html";

#[async_trait]
impl Gatherer for TwoReleases {
    async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
        Ok(vec![hit(NEW_37, "searx"), hit(NEW_311, "searx")])
    }
}

#[async_trait]
impl Fetcher for TwoReleases {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        let (version, body) = if url == NEW_37 {
            (
                "3.7",
                "The asyncio module has received new features: the new loop.sock_sendfile() coroutine method sends files with os.sendfile when possible.",
            )
        } else {
            (
                "3.11",
                "The asyncio module has received new features: the new TaskGroup class, an asynchronous context manager holding a group of tasks that will wait for all of them upon exit.",
            )
        };
        let title = format!("What’s New In Python {version} — Python 3.11.2 documentation");
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title: title.clone(),
            markdown: format!("# {title}\n\n## asyncio\n\n{body}"),
            bytes: 300,
        })
    }
}

/// Tuning set, deep mode: asked what Python 3.11 added, the model is shown only the 3.11
/// notes; the 3.7 notes' asyncio changes were cited as 3.11's.
#[tokio::test]
async fn another_releases_notes_are_not_shown_for_the_asked_release() {
    let model = Arc::new(Turns {
        turn: |_| {
            Ok(text(
                "The asyncio module has received the new TaskGroup class [1].",
            ))
        },
        requests: Mutex::default(),
    });
    let docs = Arc::new(TwoReleases);
    let deps = ResearcherDeps {
        model: model.clone(),
        gatherer: docs.clone(),
        fetcher: docs,
        pool: Arc::default(),
        settings: ResearcherSettings {
            guided: Some(true),
            ..ResearcherSettings::default()
        },
        specialised: None,
    };
    let task = "What new asyncio features did Python 3.11 add?";
    let input = RunInput::new(task, Mode::Quick);
    run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
        .await
        .unwrap();
    let requests = model.requests.lock().unwrap();
    let prompt = &requests.last().unwrap().messages[1].content;
    assert!(prompt.contains("TaskGroup"), "{prompt}");
    assert!(!prompt.contains("sock_sendfile"), "{prompt}");
}
