//! The whole engine against in-process doubles: quick and deep runs, failures, cancellation, recovery.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::watch;

use quarry_engine::llm::{
    CallPurpose, ChatModel, ChatRequest, ChatResponse, LlmError, Role, ToolCall, Usage,
};
use quarry_engine::research::agents::settings::EngineSettings;
use quarry_engine::research::machine::reducer::{Event, reduce};
use quarry_engine::research::machine::state::{
    ApprovalPolicy, Mode, Phase, RunInput, RunState, TaskState,
};
use quarry_engine::research::shell::executor::RunObserver;
use quarry_engine::research::shell::executor::{self, Control, Engine, NoopObserver};
use quarry_engine::scrape::{FetchError, Fetcher, Page};
use quarry_engine::sources::{Gatherer, SearchHit, SourceError};
use quarry_engine::store::ArtifactStore;
use quarry_engine::store::keys::EVENTS_KEY;
use quarry_engine::store::keys::{CHECKPOINT_KEY, FINDINGS_KEY, REPORT_KEY};
use quarry_engine::store::memory::MemoryStore;

type Responder = dyn Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync;

type Delay = dyn Fn(&ChatRequest) -> Option<std::time::Duration> + Send + Sync;

struct FakeModel {
    respond: Box<Responder>,
    requests: Mutex<Vec<ChatRequest>>,
    delay: Option<std::time::Duration>,
    /// Per-request delay (lets one researcher run slower than its siblings).
    delay_for: Option<Box<Delay>>,
    /// Context window reported to the engine.
    window: u64,
    /// Whether it reports the profile's jsonMode.
    json: bool,
}

impl FakeModel {
    fn new(
        f: impl Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            respond: Box::new(f),
            requests: Mutex::new(vec![]),
            delay: None,
            delay_for: None,
            window: 32_000,
            json: false,
        })
    }
    fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl ChatModel for FakeModel {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        if let Some(d) = self.delay_for.as_ref().and_then(|f| f(&request)) {
            tokio::time::sleep(d).await;
        }
        (self.respond)(&request)
    }
    fn context_window(&self) -> u64 {
        self.window
    }
    fn json_mode(&self, _purpose: CallPurpose) -> bool {
        self.json
    }
}

fn usage(i: u64, o: u64) -> Usage {
    Usage {
        cached_input_tokens: 0,
        input_tokens: i,
        output_tokens: o,
        cost_pico_usd: i * 10 + o * 20,
        llm_calls: 1,
    }
}

fn text(s: &str) -> ChatResponse {
    ChatResponse {
        content: s.to_string(),
        tool_calls: vec![],
        usage: usage(100, 10),
        model: "fake".into(),
        finish_reason: None,
    }
}

fn tool(name: &str, args: serde_json::Value) -> ChatResponse {
    ChatResponse {
        content: String::new(),
        tool_calls: vec![ToolCall {
            id: format!("call_{name}"),
            name: name.into(),
            arguments: args,
        }],
        usage: usage(100, 10),
        model: "fake".into(),
        finish_reason: None,
    }
}

fn tool_turns(req: &ChatRequest) -> usize {
    req.messages.iter().filter(|m| m.role == Role::Tool).count()
}

fn task_of(req: &ChatRequest) -> String {
    let user = &req.messages[1].content;
    user.lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("Research task: ")
        .to_string()
}

/// A well-behaved researcher: search, handshake, one batch, then a report citing one read page
/// and one page it never read.
fn good_researcher(req: &ChatRequest) -> Result<ChatResponse, LlmError> {
    let task = task_of(req);
    let slug = task.replace(' ', "-");
    Ok(match tool_turns(req) {
        0 => tool("search", json!({"queries": [task]})),
        1 => tool(
            "scrape",
            json!({"urls": [format!("http://docs/{slug}/a.html")]}),
        ),
        2 => tool(
            "scrape",
            json!({"urls": [format!("http://docs/{slug}/a.html"), format!("http://docs/{slug}/b.html")]}),
        ),
        _ => text(&format!(
            "## Summary\n{task} explained.\n\n## Key findings\n- A fact ([a](http://docs/{slug}/a.html)).\n- An invented fact ([x](http://invented.example/x)).\n\n## Links\n- http://docs/{slug}/a.html"
        )),
    })
}

struct FakeGatherer {
    empty: bool,
}

#[async_trait]
impl Gatherer for FakeGatherer {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>, SourceError> {
        if self.empty {
            return Ok(vec![]);
        }
        let slug = query.replace(' ', "-");
        Ok(["a", "b", "c"]
            .iter()
            .take(limit)
            .map(|p| SearchHit {
                url: format!("http://docs/{slug}/{p}.html"),
                title: format!("{query} {p}"),
                snippet: "snippet".into(),
                engine: "fake".into(),
            })
            .collect())
    }
}

struct FakeFetcher {
    fetched: Mutex<Vec<String>>,
    /// When set, every page read is this (title, Markdown) instead of "Content of {url}".
    page: Option<(String, String)>,
}

#[async_trait]
impl Fetcher for FakeFetcher {
    async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
        self.fetched.lock().unwrap().push(url.to_string());
        if url.ends_with("b.html") {
            return Err(FetchError::Status {
                url: url.into(),
                status: 404,
            });
        }
        let (title, markdown) = self
            .page
            .clone()
            .unwrap_or_else(|| (format!("Title of {url}"), format!("Content of {url}")));
        Ok(Page {
            url: url.into(),
            final_url: url.into(),
            title,
            markdown,
            bytes: 100,
        })
    }
}

struct Harness {
    model: Arc<FakeModel>,
    fetcher: Arc<FakeFetcher>,
    store: Arc<MemoryStore>,
    engine: Arc<Engine>,
}

fn harness(model: Arc<FakeModel>, empty_search: bool) -> Harness {
    harness_reading(model, empty_search, None)
}

/// [`harness`] whose fetcher returns `page` (title, Markdown) for every URL.
fn harness_reading(
    model: Arc<FakeModel>,
    empty_search: bool,
    page: Option<(String, String)>,
) -> Harness {
    let fetcher = Arc::new(FakeFetcher {
        fetched: Mutex::new(vec![]),
        page,
    });
    let store = Arc::new(MemoryStore::new());
    let engine = Arc::new(Engine {
        model: model.clone(),
        budget_model: None,
        spend: Default::default(),
        gatherer: Arc::new(FakeGatherer {
            empty: empty_search,
        }),
        specialised: None,
        fetcher: fetcher.clone(),
        store: store.clone(),
        settings: EngineSettings::default(),
        dispatch: None,
    });
    Harness {
        model,
        fetcher,
        store,
        engine,
    }
}

/// [`harness_reading`] with the guided researcher of small models.
fn guided_harness(model: Arc<FakeModel>, page: (String, String)) -> Harness {
    let mut h = harness_reading(model, false, Some(page));
    let mut engine = Arc::into_inner(h.engine).unwrap();
    engine.settings.researcher.guided = Some(true);
    h.engine = Arc::new(engine);
    h
}

async fn run(h: &Harness, state: RunState) -> RunState {
    let (_tx, rx) = watch::channel(Control::Run);
    executor::run(h.engine.clone(), state, Arc::new(NoopObserver), rx).await
}

#[tokio::test]
async fn quick_run_completes_with_a_verified_report() {
    let h = harness(FakeModel::new(good_researcher), false);
    let s = run(
        &h,
        RunState::new(RunInput::new("json decoding", Mode::Quick)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.starts_with("# json decoding\n\n## Summary\njson decoding explained."),
        "{report}"
    );
    assert!(report.contains("- A fact ([a](http://docs/json-decoding/a.html))."));
    assert!(
        !report.contains("invented.example"),
        "unverified citation must be removed: {report}"
    );
    assert!(report.contains("## Sources\n\n1. [Title of http://docs/json-decoding/a.html](http://docs/json-decoding/a.html)\n"));
    assert!(
        !report.contains("b.html"),
        "a page that failed to load is not a source"
    );
    // Four model calls, usage summed exactly.
    assert_eq!(h.model.requests().len(), 4);
    assert_eq!(
        s.usage,
        Usage {
            cached_input_tokens: 0,
            input_tokens: 400,
            output_tokens: 40,
            cost_pico_usd: 4 * 1200,
            llm_calls: 4
        }
    );
    assert_eq!(s.searches, 1);
    assert_eq!(s.pages_fetched, 1);
    // The report is written exactly once, after the findings, and the last checkpoint is the final state.
    let writes = h.store.writes();
    assert_eq!(writes.iter().filter(|k| *k == REPORT_KEY).count(), 1);
    assert_eq!(writes.iter().filter(|k| *k == FINDINGS_KEY).count(), 1);
    let restored = executor::load_checkpoint(h.store.as_ref())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(restored, s);
    let findings: serde_json::Value =
        serde_json::from_str(&h.store.text(FINDINGS_KEY).unwrap()).unwrap();
    assert_eq!(
        findings["unverifiedReferences"],
        json!(["http://invented.example/x"])
    );
    assert_eq!(findings["usage"]["inputTokens"], json!(400));
    // Every call carried an output cap and the researcher's tools.
    for r in h.model.requests() {
        assert_eq!(r.purpose, CallPurpose::Research);
        assert!(r.max_tokens > 0);
    }
}

/// An attempt killed before its first checkpoint (quick mode checkpoints after its researcher)
/// leaves only the cost journal: the next attempt starts from Pending and still pays for the
/// killed attempt's calls.
#[tokio::test]
async fn calls_journaled_before_the_first_checkpoint_are_recovered() {
    // The killed attempt's two answered calls, as the router journals them.
    let line = |n: u64| {
        json!({
            "time": format!("2026-01-01T00:00:0{n}.000Z"), "kind": "modelCall", "tier": "primary",
            "provider": "openai", "model": "fake", "purpose": "research", "outcome": "ok",
            "inputTokens": 100, "cachedInputTokens": 0, "outputTokens": 10, "costUSD": "0",
            "durationMs": 5, "task": 1, "costPicoUSD": 1200,
            "runTotal": {"inputTokens": 100 * n, "cachedInputTokens": 0, "outputTokens": 10 * n,
                         "costPicoUSD": 1200 * n, "llmCalls": n},
        })
        .to_string()
    };
    let h = harness(FakeModel::new(good_researcher), false);
    h.store
        .put(EVENTS_KEY, format!("{}\n{}\n", line(1), line(2)).as_bytes())
        .await
        .unwrap();
    let s = run(
        &h,
        RunState::new(RunInput::new("json decoding", Mode::Quick)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!(h.model.requests().len(), 4);
    assert_eq!(
        (
            s.usage.llm_calls,
            s.usage.input_tokens,
            s.usage.cost_pico_usd
        ),
        (6, 600, 6 * 1200),
        "the killed attempt's 2 calls are paid once: {:?}",
        s.usage
    );
}

#[tokio::test]
async fn the_handshake_touches_no_network_and_batches_dedupe() {
    let h = harness(FakeModel::new(good_researcher), false);
    run(&h, RunState::new(RunInput::new("pool", Mode::Quick))).await;
    // a.html requested in the handshake and again in batch 1: fetched once; b.html tried once.
    assert_eq!(
        *h.fetcher.fetched.lock().unwrap(),
        vec![
            "http://docs/pool/a.html".to_string(),
            "http://docs/pool/b.html".to_string()
        ]
    );
}

#[tokio::test]
async fn garbage_from_the_model_fails_the_run_without_a_report() {
    let h = harness(FakeModel::new(|_| Ok(text(""))), true);
    let s = run(
        &h,
        RunState::new(RunInput::new("anything at all", Mode::Quick)),
    )
    .await;
    assert_eq!(s.phase, Phase::Failed);
    let f = s.failure.unwrap();
    assert_eq!(f.reason, "ModelOutputInvalid");
    assert_eq!(
        f.message,
        "the model wrote no usable report (only empty answers or tool calls as text) and read no page"
    );
    assert_eq!(h.store.text(REPORT_KEY), None);
}

#[tokio::test]
async fn an_unreachable_model_fails_with_model_unreachable() {
    let h = harness(
        FakeModel::new(|_| Err(LlmError::Timeout { seconds: 5 })),
        false,
    );
    let s = run(
        &h,
        RunState::new(RunInput::new("anything at all", Mode::Quick)),
    )
    .await;
    assert_eq!(s.failure.unwrap().reason, "ModelUnreachable");
}

#[tokio::test]
async fn no_search_results_give_the_honest_abort_report() {
    let h = harness(FakeModel::new(good_researcher), true);
    let s = run(&h, RunState::new(RunInput::new("zzqx", Mode::Quick))).await;
    // The honest report is stored, and the run says plainly that it found nothing.
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.failure.as_ref().unwrap().reason, "NoEvidence");
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(report.starts_with("# Unable to research: zzqx"), "{report}");
    assert!(s.final_report.unwrap().aborted);
}

#[tokio::test]
async fn a_model_that_skips_its_tools_is_grounded_by_the_engine() {
    // Answers with prose immediately, every time.
    let h = harness(
        FakeModel::new(|_| Ok(text("Here is my report: see [a](http://docs/lazy/a.html)."))),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("lazy", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed);
    assert_eq!(s.searches, 1);
    // The engine read the top results itself (b.html fails to load).
    assert_eq!(s.pages_fetched, 2);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(report.contains("[a](http://docs/lazy/a.html)"), "{report}");
}

#[tokio::test]
async fn with_json_mode_the_grounded_answer_is_asked_for_one_sentence_per_passage_with_its_schema()
{
    for json in [true, false] {
        // Prose on every turn; the grounded call is answered in the form it asks for.
        let mut model = Arc::into_inner(FakeModel::new(|req| {
            Ok(text(match &req.json_schema {
                Some(_) => r#"{"1": "Content of http://docs/lazy/a.html", "2": ""}"#,
                None if req.messages[0].content.contains("numbered passages") => {
                    "Content of http://docs/lazy/a.html [1]."
                }
                None => "Here is my report.",
            }))
        }))
        .unwrap();
        model.json = json;
        let h = harness(Arc::new(model), false);
        let s = run(&h, RunState::new(RunInput::new("lazy", Mode::Quick))).await;
        assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
        let requests = h.model.requests();
        let grounded = requests.last().unwrap();
        let schemas: Vec<_> = requests
            .iter()
            .filter_map(|r| r.json_schema.as_ref())
            .collect();
        if json {
            assert_eq!(schemas.len(), 1, "only the grounded call carries a schema");
            assert_eq!(schemas[0].name, "grounded_each");
            assert!(grounded.json_mode);
            assert!(grounded.messages[0].content.contains("one JSON object"));
            assert!(grounded.messages[0].content.contains("For each passage"));
        } else {
            assert!(schemas.is_empty());
            assert!(
                grounded.messages[1]
                    .content
                    .contains("passage number like [1]")
            );
        }
        // Either form makes the same grounded report: the sentence, its link, its passage quoted.
        let report = h.store.text(REPORT_KEY).unwrap();
        assert!(
            report.contains("Content of http://docs/lazy/a.html ([Title of http://docs/lazy/a.html](http://docs/lazy/a.html))."),
            "{report}"
        );
        assert!(
            report.contains("> Content of `http://docs/lazy/a.html`"),
            "{report}"
        );
    }
}

#[tokio::test]
async fn a_per_passage_answer_that_only_restates_the_task_is_asked_again_as_points() {
    // With JSON mode the model is first asked one sentence per passage; here it says the task
    // back (dropped: no answer), so it is asked for points over all passages.
    let mut model = Arc::into_inner(FakeModel::new(|req| {
        Ok(text(match req.json_schema.as_ref().map(|s| s.name.as_str()) {
            Some("grounded_each") => r#"{"1": "Lazy is lazy and lazy.", "2": ""}"#,
            Some("grounded_answer") => {
                r#"{"points": [{"passages": [1], "sentence": "Content of http://docs/lazy/a.html"}]}"#
            }
            _ => "Here is my report.",
        }))
    }))
    .unwrap();
    model.json = true;
    let h = harness(Arc::new(model), false);
    let s = run(&h, RunState::new(RunInput::new("lazy", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let names: Vec<String> = h
        .model
        .requests()
        .iter()
        .filter_map(|r| r.json_schema.as_ref().map(|s| s.name.clone()))
        .collect();
    assert_eq!(names, ["grounded_each", "grounded_answer"]);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.contains("Content of http://docs/lazy/a.html ([Title of http://docs/lazy/a.html](http://docs/lazy/a.html))."),
        "{report}"
    );
    assert!(
        !report.contains("did not write a usable report"),
        "{report}"
    );
    assert!(!report.contains("Lazy is lazy"), "{report}");
}

fn deep_model(plan: &'static str) -> Arc<FakeModel> {
    FakeModel::new(move |req| match req.purpose {
        CallPurpose::Plan => Ok(text(plan)),
        CallPurpose::Evaluate => Ok(text(r#"{"action": "synthesize"}"#)),
        CallPurpose::Synthesize => Ok(text(
            "# Final\n\nAll found ([a](http://docs/alpha/a.html)).",
        )),
        CallPurpose::Summarize => Ok(text("- the page says things")),
        _ => good_researcher(req),
    })
}

#[tokio::test]
async fn deep_run_plans_researches_evaluates_and_synthesizes() {
    let h = harness(
        deep_model(r#"{"intent": "research", "complexity": 1, "tasks": ["alpha", "beta"]}"#),
        false,
    );
    let s = run(
        &h,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!(
        s.agenda.iter().map(|t| t.state).collect::<Vec<_>>(),
        vec![TaskState::Done, TaskState::Done]
    );
    let purposes: Vec<CallPurpose> = h.model.requests().iter().map(|r| r.purpose).collect();
    assert_eq!(
        purposes.iter().filter(|p| **p == CallPurpose::Plan).count(),
        1
    );
    assert_eq!(
        purposes
            .iter()
            .filter(|p| **p == CallPurpose::Evaluate)
            .count(),
        1
    );
    assert_eq!(
        purposes
            .iter()
            .filter(|p| **p == CallPurpose::Synthesize)
            .count(),
        1
    );
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(report.starts_with("# Final"));
    assert!(
        report.contains("http://docs/beta/a.html"),
        "the Sources section lists every page read"
    );
}

#[tokio::test]
async fn unparseable_plan_falls_back_to_the_question_after_one_repair_retry() {
    let h = harness(deep_model("I would rather not use JSON."), false);
    let s = run(
        &h,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
    )
    .await;
    // No agenda from the planner: the run researches the question itself instead of failing.
    assert_ne!(
        s.failure.as_ref().map(|f| f.reason.as_str()),
        Some("PlanUnparseable")
    );
    assert_eq!(
        s.agenda
            .iter()
            .map(|t| t.query.as_str())
            .collect::<Vec<_>>(),
        vec!["deep question"]
    );
    let reqs = h.model.requests();
    let plans: Vec<_> = reqs
        .iter()
        .filter(|r| r.purpose == CallPurpose::Plan)
        .collect();
    assert_eq!(plans.len(), 2);
    assert!(
        plans[1]
            .messages
            .last()
            .unwrap()
            .content
            .contains("no JSON object or array found")
    );
}

#[tokio::test]
async fn cancel_stops_a_running_researcher() {
    // Every model call takes a minute; the run is cancelled long before.
    let model = Arc::new(FakeModel {
        respond: Box::new(|_| Ok(text("late"))),
        requests: Mutex::new(vec![]),
        delay: Some(std::time::Duration::from_secs(60)),
        delay_for: None,
        window: 32_000,
        json: false,
    });
    let h = harness(model, false);
    let (tx, rx) = watch::channel(Control::Run);
    let engine = h.engine.clone();
    let handle = tokio::spawn(async move {
        executor::run(
            engine,
            RunState::new(RunInput::new("cancel me", Mode::Quick)),
            Arc::new(NoopObserver),
            rx,
        )
        .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    tx.send(Control::Cancel).unwrap();
    let s = tokio::time::timeout(std::time::Duration::from_secs(10), handle)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.phase, Phase::Cancelled);
    assert_eq!(h.store.text(REPORT_KEY), None);
}

#[tokio::test]
async fn a_recovered_run_does_not_redo_finished_researchers() {
    // Build the checkpoint a crashed operator left: task 0 done, task 1 in flight.
    let mut input = RunInput::new("deep question", Mode::Deep);
    input.limits.max_rounds = 1;
    let first = harness(
        deep_model(r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#),
        false,
    );
    let s = RunState::new(input);
    let (s, _) = reduce(s, Event::Start);
    let (s, _) = reduce(
        s,
        Event::PlanReady {
            tasks: vec!["alpha".into(), "beta".into()],
            usage: Usage::default(),
        },
    );
    let (s, _) = reduce(
        s,
        Event::ResearcherFinished {
            report: quarry_engine::research::machine::state::ResearcherReport {
                task_id: 0,
                markdown: "alpha findings ([a](http://docs/alpha/a.html))".into(),
                fetched: vec![quarry_engine::research::machine::state::SourceRef::new(
                    "http://docs/alpha/a.html",
                    "A",
                )],
                seen: vec![],
                pages: vec![],
                irrelevant: vec![],
                queries: vec![],
                searches: 1,
                usage: usage(1, 1),
            },
        },
    );
    first
        .store
        .put(CHECKPOINT_KEY, &executor::encode_checkpoint(&s).unwrap())
        .await
        .unwrap();
    let restored = executor::load_checkpoint(first.store.as_ref())
        .await
        .unwrap()
        .unwrap();
    let done = run(&first, restored).await;
    assert_eq!(done.phase, Phase::Completed, "{:?}", done.failure);
    let tasks: BTreeMap<String, usize> = first
        .model
        .requests()
        .iter()
        .filter(|r| r.purpose == CallPurpose::Research)
        .fold(BTreeMap::new(), |mut m, r| {
            *m.entry(task_of(r)).or_default() += 1;
            m
        });
    assert_eq!(
        tasks.keys().collect::<Vec<_>>(),
        vec!["beta"],
        "only the unfinished task is researched again"
    );
    assert_eq!(done.reports.len(), 2);
}

#[tokio::test]
async fn a_corrupt_checkpoint_is_rejected() {
    let store = MemoryStore::new();
    let mut bytes =
        executor::encode_checkpoint(&RunState::new(RunInput::new("q q q", Mode::Quick))).unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    store.put(CHECKPOINT_KEY, &bytes).await.unwrap();
    let err = executor::load_checkpoint(&store).await.unwrap_err();
    assert!(err.to_string().contains("sha256 mismatch"), "{err}");
}

#[tokio::test]
async fn the_cost_limit_stops_a_researcher_mid_task_and_its_spend_is_counted() {
    let h = harness(FakeModel::new(good_researcher), false);
    let mut input = RunInput::new("costly", Mode::Quick);
    // Each call costs 1200 pico-USD; the second call crosses the limit.
    input.limits.max_cost_pico_usd = Some(2000);
    let s = run(&h, RunState::new(input)).await;
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.failure.as_ref().unwrap().reason, "CostLimit");
    assert!(
        s.usage.cost_pico_usd >= 2400,
        "aborted work is still paid for: {:?}",
        s.usage
    );
    // Every call the model served is accounted, none twice.
    assert_eq!(s.usage.llm_calls as usize, h.model.requests().len());
    assert_eq!(h.store.text(REPORT_KEY), None);
}

#[tokio::test]
async fn a_model_that_never_writes_a_report_gets_an_honest_extractive_one() {
    // Researches properly, then answers every report request with a tool call written as JSON.
    let h = harness(
        FakeModel::new(|req| {
            if tool_turns(req) < 3 {
                good_researcher(req)
            } else {
                Ok(text(
                    "```json\n{\"tool\": \"scrape\", \"arguments\": {\"urls\": [\"json\"]}}\n```",
                ))
            }
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("stubborn", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.contains("The model did not write a usable report"),
        "{report}"
    );
    // The passages the model was shown, quoted under their page's link (a URL in a quote is
    // the page's text, shown as code, not a citation).
    assert!(report.contains("- [Title of http://docs/stubborn/a.html](http://docs/stubborn/a.html):\n\n> Content of `http://docs/stubborn/a.html`"), "{report}");
    assert!(!report.contains("\"tool\""), "{report}");
    // Two refusals to write prose, one clean-context attempt, then the extractive fallback.
    let requests = h.model.requests();
    assert_eq!(requests.len(), 6);
    let clean = &requests[5];
    assert_eq!(
        clean.messages.len(),
        2,
        "the clean report call carries no tool history"
    );
    assert!(clean.messages[1].content.contains(
        "[1] (Title of http://docs/stubborn/a.html)\nContent of http://docs/stubborn/a.html"
    ));
    assert!(clean.tools.is_empty());
}

#[tokio::test]
async fn a_clean_context_rescues_a_model_lost_in_its_tool_history() {
    let h = harness(
        FakeModel::new(|req| {
            if req.messages[0]
                .content
                .starts_with("You answer one research task from numbered passages")
            {
                Ok(text("Content of the rescued docs [1]."))
            } else if tool_turns(req) < 3 {
                good_researcher(req)
            } else {
                Ok(text(
                    "{\"tool\": \"search\", \"arguments\": {\"queries\": [\"x\"]}}",
                ))
            }
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("rescued", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.contains(
            "Content of the rescued docs ([Title of http://docs/rescued/a.html](http://docs/rescued/a.html))."
        ),
        "{report}"
    );
    assert_eq!(h.model.requests().len(), 6);
}

#[tokio::test]
async fn scraping_before_any_search_triggers_the_search_first() {
    let h = harness(
        FakeModel::new(|req| {
            Ok(match tool_turns(req) {
                0 => tool("scrape", json!({"urls": ["http://invented.example/x"]})),
                1 => tool("scrape", json!({"urls": ["http://docs/order/a.html"]})),
                2 => tool("scrape", json!({"urls": ["http://docs/order/a.html"]})),
                _ => text("## Summary\nRead ([a](http://docs/order/a.html))."),
            })
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("order", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!((s.searches, s.pages_fetched), (1, 1));
    let second = &h.model.requests()[1];
    let first_result = &second.messages.last().unwrap().content;
    assert!(
        first_result.starts_with("There are no search results to read yet"),
        "{first_result}"
    );
    assert!(first_result.contains("http://docs/order/a.html"));
    assert_eq!(
        *h.fetcher.fetched.lock().unwrap(),
        vec!["http://docs/order/a.html".to_string()]
    );
}

#[tokio::test]
async fn a_report_that_cites_nothing_it_read_is_rewritten_from_the_pages() {
    let h = harness(
        FakeModel::new(|req| {
            if req.messages[0]
                .content
                .starts_with("You answer one research task from numbered passages")
            {
                Ok(text("Content of the uncited docs [1]."))
            } else if tool_turns(req) < 3 {
                good_researcher(req)
            } else {
                Ok(text("## Summary\nJSON is easy, trust me."))
            }
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("uncited", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.contains(
            "Content of the uncited docs ([Title of http://docs/uncited/a.html](http://docs/uncited/a.html))."
        ),
        "{report}"
    );
    assert!(!report.contains("trust me"));
    assert_eq!(h.model.requests().len(), 5);
}

#[tokio::test]
async fn a_model_that_only_ever_searches_still_gets_its_top_results_read() {
    let h = harness(
        FakeModel::new(|req| {
            if req.messages[0]
                .content
                .starts_with("You answer one research task from numbered passages")
            {
                Ok(text("Content of the searcher docs [1]."))
            } else if req.tools.is_empty() {
                Ok(text(
                    "{\"tool\": \"search\", \"arguments\": {\"queries\": [\"searcher\"]}}",
                ))
            } else {
                Ok(tool("search", json!({"queries": ["searcher"]})))
            }
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("searcher", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!(
        s.pages_fetched, 2,
        "a.html and c.html read; b.html fails to load"
    );
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(
        report.contains(
            "Content of the searcher docs ([Title of http://docs/searcher/a.html](http://docs/searcher/a.html))."
        ),
        "{report}"
    );
}

#[tokio::test]
async fn a_batch_of_invented_urls_reads_the_top_results_instead() {
    let h = harness(
        FakeModel::new(|req| {
            Ok(match tool_turns(req) {
                0 => tool("search", json!({"queries": ["invent"]})),
                1 => tool("scrape", json!({"urls": ["http://made.up/1"]})),
                2 => tool("scrape", json!({"urls": ["http://made.up/1", "not a url"]})),
                _ => text("## Summary\nSee ([a](http://docs/invent/a.html))."),
            })
        }),
        false,
    );
    let s = run(&h, RunState::new(RunInput::new("invent", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let requests = h.model.requests();
    let batch_result = &requests[3].messages.last().unwrap().content;
    assert!(
        batch_result.contains("the top unread search results were read instead"),
        "{batch_result}"
    );
    assert!(batch_result.contains("Skipped http://made.up/1 (not among your search results)"));
    // The top three results: a.html and c.html load, b.html fails.
    assert_eq!(s.pages_fetched, 2);
    assert!(
        !h.fetcher
            .fetched
            .lock()
            .unwrap()
            .iter()
            .any(|u| u.contains("made.up"))
    );
}

/// A deep-mode model: plan `tasks`, evaluator synthesizes, summaries, a fixed synthesis answer.
fn deep_with(
    tasks: &'static str,
    synthesis: &'static str,
) -> impl Fn(&ChatRequest) -> Result<ChatResponse, LlmError> + Send + Sync + 'static {
    move |req: &ChatRequest| match req.purpose {
        CallPurpose::Plan => Ok(text(tasks)),
        CallPurpose::Evaluate => Ok(text(r#"{"action": "synthesize"}"#)),
        CallPurpose::Summarize => Ok(text("- the page describes its content")),
        CallPurpose::Synthesize => Ok(text(synthesis)),
        _ => good_researcher(req),
    }
}

#[tokio::test]
async fn reports_are_injected_into_later_researchers_and_steered_into_running_ones() {
    // Three tasks, two at a time: "slow" is still working when "fast" finishes; "late" starts after.
    let model = Arc::new(FakeModel {
        respond: Box::new(deep_with(
            r#"{"complexity": 2, "tasks": ["fast", "slow", "late"]}"#,
            "# Final\n\nDone ([a](http://docs/fast/a.html)).",
        )),
        requests: Mutex::new(vec![]),
        delay: None,
        delay_for: Some(Box::new(|req: &ChatRequest| {
            (req.purpose == CallPurpose::Research && task_of(req) == "slow" && tool_turns(req) == 1)
                .then(|| std::time::Duration::from_millis(800))
        })),
        window: 32_000,
        json: false,
    });
    let h = harness(model, false);
    let mut input = RunInput::new("three tasks", Mode::Deep);
    input.limits.max_concurrent_researchers = 2;
    let s = run(&h, RunState::new(input)).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let reqs = h.model.requests();
    let research: Vec<&ChatRequest> = reqs
        .iter()
        .filter(|r| r.purpose == CallPurpose::Research)
        .collect();
    // Injection: "late" (task 2) started after "fast" (task 0) finished and holds its report.
    let late_first = research.iter().find(|r| task_of(r) == "late").unwrap();
    assert!(
        late_first.messages[1]
            .content
            .contains("--- report of researcher 0 ---")
            && late_first.messages[1].content.contains("fast explained."),
        "{}",
        late_first.messages[1].content
    );
    // Steering: "slow" (task 1) was running and received the report before its next turn.
    let steered = research
        .iter()
        .filter(|r| task_of(r) == "slow")
        .flat_map(|r| r.messages.iter())
        .find(|m| {
            m.content
                .starts_with("Steering update: researcher 0 of this run just finished")
        })
        .expect("a steered report reached the running researcher");
    assert!(steered.content.contains("fast explained."));
    // The first researcher to finish got nothing steered (it was never running alongside a finisher).
    assert!(research.iter().filter(|r| task_of(r) == "fast").all(|r| {
        r.messages
            .iter()
            .all(|m| !m.content.starts_with("Steering update"))
    }));
    // No URL fetched twice in the run.
    let fetched = h.fetcher.fetched.lock().unwrap().clone();
    let unique: std::collections::BTreeSet<_> = fetched.iter().collect();
    assert_eq!(unique.len(), fetched.len(), "{fetched:?}");
}

#[tokio::test]
async fn an_unusable_agenda_goes_to_the_budget_tier_before_failing() {
    let primary = deep_model("I would rather not use JSON.");
    let budget = FakeModel::new(|_| Ok(text(r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#)));
    let h = harness(primary, false);
    let engine = Arc::new(Engine {
        model: h.model.clone(),
        budget_model: Some(budget.clone()),
        spend: Default::default(),
        gatherer: Arc::new(FakeGatherer { empty: false }),
        specialised: None,
        fetcher: h.fetcher.clone(),
        store: h.store.clone(),
        settings: EngineSettings::default(),
        dispatch: None,
    });
    let (_tx, rx) = watch::channel(Control::Run);
    let s = executor::run(
        engine,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
        Arc::new(NoopObserver),
        rx,
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let plans = |m: &FakeModel| {
        m.requests()
            .iter()
            .filter(|r| r.purpose == CallPurpose::Plan)
            .count()
    };
    assert_eq!(
        plans(&h.model),
        2,
        "primary: the answer and one repair retry"
    );
    assert_eq!(plans(&budget), 1, "then the budget tier");
    assert_eq!(s.agenda.len(), 2);
}

#[tokio::test]
async fn the_context_gate_counts_with_the_servers_token_numbers_and_never_blocks_the_first_read() {
    // The server reports prompts of 12000 tokens in a 20000-token window: past the 55% gate
    // (a window above the guided researcher's 16k, so the agent loop and its gate run).
    // The first batch is read all the same (with nothing read there is nothing to report
    // from: a 0.5B model's search results alone filled 64% of its window and it never read a
    // page); the next batch is skipped.
    let model = Arc::new(FakeModel {
        respond: Box::new(|req: &ChatRequest| {
            let slug = task_of(req).replace(' ', "-");
            let r = match tool_turns(req) {
                3 => Ok(tool(
                    "scrape",
                    json!({"urls": [format!("http://docs/{slug}/c.html")]}),
                )),
                4 => Ok(text(&format!(
                    "## Summary\nGate ([a](http://docs/{slug}/a.html))."
                ))),
                _ => good_researcher(req),
            };
            r.map(|mut r| {
                r.usage.input_tokens = 12_000;
                r
            })
        }),
        requests: Mutex::new(vec![]),
        delay: None,
        delay_for: None,
        window: 20_000,
        json: false,
    });
    let h = harness(model, false);
    let s = run(&h, RunState::new(RunInput::new("gate", Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let fetched = h.fetcher.fetched.lock().unwrap().clone();
    assert!(
        fetched.contains(&"http://docs/gate/a.html".to_string()),
        "{fetched:?}"
    );
    assert!(
        !fetched.contains(&"http://docs/gate/c.html".to_string()),
        "{fetched:?}"
    );
    let tool_results: Vec<String> = h
        .model
        .requests()
        .iter()
        .flat_map(|r| r.messages.iter())
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.content.clone())
        .collect();
    assert!(
        tool_results.iter().any(|c| c.starts_with("Batch 2 skipped: the conversation already fills more than 55%")),
        "{tool_results:?}"
    );
    assert!(
        !tool_results
            .iter()
            .any(|c| c.starts_with("Batch 1 skipped")),
        "{tool_results:?}"
    );
}

#[tokio::test]
async fn deep_outputs_pass_the_evidence_gate_with_a_precision_figure() {
    let synthesis = "<research_result>\n# Study\n\n## Key Takeaways\n1. Content of alpha a html docs is real ([a](http://docs/alpha/a.html)).\n2. Quantum entanglement powers every decoder ([a](http://docs/alpha/a.html)).\n3. A page nobody read says otherwise ([x](http://never.read/x)).\n</research_result>";
    let ideas = "Analysis first.\n<research_result>\n<research_item>\n<source>http://docs/beta/a.html</source>\n<content>\n## Description\nBeta idea.\n</content>\n</research_item>\n<research_item>\n<source>http://invented.example/idea</source>\n<content>\n## Description\nMade up.\n</content>\n</research_item>\n<research_item>\n<source></source>\n<content>no source</content>\n</research_item>\n</research_result>";
    let model = FakeModel::new(move |req: &ChatRequest| match req.purpose {
        CallPurpose::Synthesize if req.messages[0].content.contains("Mode: idea") => {
            Ok(text(ideas))
        }
        _ => deep_with(
            r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#,
            synthesis,
        )(req),
    });
    let h = harness(model, false);
    let mut input = RunInput::new("deep question", Mode::Deep);
    input.outputs = vec![
        quarry_engine::research::machine::state::OutputKind::Study,
        quarry_engine::research::machine::state::OutputKind::Ideas,
    ];
    let s = run(&h, RunState::new(input)).await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(report.starts_with("# Study\n"), "{report}");
    assert!(
        !report.contains("never.read") && !report.contains("invented.example"),
        "{report}"
    );
    assert!(
        report.contains(
            "## Ideas\n\n### 1. Title of http://docs/beta/a.html\n\n#### Description\nBeta idea."
        ),
        "{report}"
    );
    assert!(report.contains("_Citation check: 1 of 2 cited claims are supported by the text of the source they cite (precision 0.50)._"), "{report}");
    let f = s.final_report.as_ref().unwrap();
    assert_eq!((f.claims_checked, f.claims_supported), (2, 1));
    assert_eq!(f.citation_precision(), Some(0.5));
    let findings: serde_json::Value =
        serde_json::from_str(&h.store.text(FINDINGS_KEY).unwrap()).unwrap();
    assert_eq!(findings["citationPrecision"], json!(0.5));
    assert_eq!(
        findings["unverifiedReferences"],
        json!(["http://never.read/x", "http://invented.example/idea"])
    );
    assert_eq!(findings["ideas"].as_array().unwrap().len(), 1);
    assert_eq!(findings["droppedItems"]["malformed"]["ideas"], json!(1));
    assert_eq!(findings["droppedItems"]["unverifiedSource"], json!(1));
    assert_eq!(findings["claims"][1]["supported"], json!(false));
    // Per-document summaries ran, one per page read, and fed every output call.
    let reqs = h.model.requests();
    assert_eq!(
        reqs.iter()
            .filter(|r| r.purpose == CallPurpose::Summarize)
            .count(),
        2
    );
    let synth: Vec<_> = reqs
        .iter()
        .filter(|r| r.purpose == CallPurpose::Synthesize)
        .collect();
    assert_eq!(synth.len(), 2);
    for r in synth {
        assert!(
            r.messages[1]
                .content
                .contains("- the page describes its content")
        );
    }
    assert_eq!(findings["sourceNotes"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_the_page_text() {
    let model = FakeModel::new(|req: &ChatRequest| match req.purpose {
        CallPurpose::Summarize => Err(LlmError::Timeout { seconds: 1 }),
        _ => deep_with(
            r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#,
            "# Final\n\nDone ([a](http://docs/alpha/a.html)).",
        )(req),
    });
    let h = harness(model, false);
    let s = run(
        &h,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let synth = h
        .model
        .requests()
        .into_iter()
        .find(|r| r.purpose == CallPurpose::Synthesize)
        .unwrap();
    let material = &synth.messages[1].content;
    assert!(
        material.contains(
            "kind=\"opening text (summary unavailable)\">\nContent of http://docs/alpha/a.html"
        ),
        "{material}"
    );
    assert!(material.contains("Content of http://docs/beta/a.html"));
}

#[tokio::test]
async fn the_model_judge_overrules_the_lexical_verdict_when_enabled() {
    // Lexically the first claim is supported and the second is not; the judge says the opposite.
    let synthesis = "# Judged\n\n- Content of alpha a html docs is real ([a](http://docs/alpha/a.html)).\n- Quantum entanglement powers every decoder ([a](http://docs/alpha/a.html)).";
    let model = FakeModel::new(move |req: &ChatRequest| match req.purpose {
        CallPurpose::Classify if req.messages[1].content.contains("Quantum") => {
            Ok(text(r#"{"supported": true}"#))
        }
        CallPurpose::Classify => Ok(text(r#"{"supported": false}"#)),
        _ => deep_with(
            r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#,
            synthesis,
        )(req),
    });
    let mut h = harness(model, false);
    let settings = EngineSettings {
        model_judge: true,
        ..EngineSettings::default()
    };
    h.engine = Arc::new(Engine {
        model: h.model.clone(),
        budget_model: None,
        spend: Default::default(),
        gatherer: Arc::new(FakeGatherer { empty: false }),
        specialised: None,
        fetcher: h.fetcher.clone(),
        store: h.store.clone(),
        settings,
        dispatch: None,
    });
    let s = run(
        &h,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let judged = h
        .model
        .requests()
        .iter()
        .filter(|r| r.purpose == CallPurpose::Classify)
        .count();
    assert_eq!(judged, 2);
    let findings: serde_json::Value =
        serde_json::from_str(&h.store.text(FINDINGS_KEY).unwrap()).unwrap();
    let verdicts: Vec<(bool, &str)> = findings["claims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["supported"].as_bool().unwrap(),
                c["judgedBy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(verdicts, vec![(false, "model"), (true, "model")]);
    assert_eq!(findings["citationPrecision"], json!(0.5));
}

#[tokio::test]
async fn a_synthesis_that_copies_its_input_is_replaced_by_reports_and_source_notes() {
    let model = FakeModel::new(|req: &ChatRequest| match req.purpose {
        // A weak model answers with its own input.
        CallPurpose::Synthesize => Ok(text(&format!(
            "<research_result>\n{}",
            req.messages[1].content
        ))),
        _ => deep_with(r#"{"complexity": 1, "tasks": ["alpha", "beta"]}"#, "unused")(req),
    });
    let h = harness(model, false);
    let s = run(
        &h,
        RunState::new(RunInput::new("deep question", Mode::Deep)),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(!report.contains("<page url="), "{report}");
    assert!(!report.contains("--- researcher"), "{report}");
    assert!(
        report.contains("## alpha\n\n### Summary\nalpha explained."),
        "{report}"
    );
    assert!(
        report.contains("## Notes on each source\n\n### [Title of http://docs/alpha/a.html](http://docs/alpha/a.html)\n\n- the page describes its content"),
        "{report}"
    );
    assert!(report.contains("_The Study output repeated its input instead of answering, so it was discarded; the researchers' reports and the notes on each source are shown instead._"), "{report}");
}

/// Publishes every state the executor reaches.
struct StateTap(watch::Sender<Option<RunState>>);

impl RunObserver for StateTap {
    fn on_change(&self, state: &RunState, _: &Event) {
        self.0.send_replace(Some(state.clone()));
    }
}

fn with_approval(query: &str, timeout_secs: Option<u64>) -> RunState {
    let mut input = RunInput::new(query, Mode::Deep);
    input.approval = Some(ApprovalPolicy { timeout_secs });
    RunState::new(input)
}

#[tokio::test]
async fn a_plan_waiting_for_approval_searches_nothing_until_approved_with_an_edited_agenda() {
    let h = harness(
        deep_model(r#"{"intent": "research", "complexity": 1, "tasks": ["alpha", "beta"]}"#),
        false,
    );
    let (control, rx) = watch::channel(Control::Run);
    let (tap, mut states) = watch::channel(None);
    let engine = h.engine.clone();
    let handle = tokio::spawn(async move {
        executor::run(
            engine,
            with_approval("deep question", None),
            Arc::new(StateTap(tap)),
            rx,
        )
        .await
    });
    let waiting = states
        .wait_for(|s| {
            s.as_ref()
                .is_some_and(|s| s.approval.waiting_since.is_some())
        })
        .await
        .unwrap()
        .clone()
        .unwrap();
    assert_eq!(waiting.phase, Phase::Planning);
    assert_eq!(
        waiting
            .agenda
            .iter()
            .map(|t| t.query.as_str())
            .collect::<Vec<_>>(),
        vec!["alpha", "beta"]
    );
    // Only the planner was asked; nothing was searched or read while the plan waits.
    let purposes: Vec<CallPurpose> = h.model.requests().iter().map(|r| r.purpose).collect();
    assert_eq!(purposes, vec![CallPurpose::Plan]);
    assert_eq!(waiting.searches, 0);
    assert!(h.fetcher.fetched.lock().unwrap().is_empty());
    // The waiting plan is checkpointed: a restarted operator shows the same agenda.
    let saved = executor::load_checkpoint(h.store.as_ref())
        .await
        .unwrap()
        .unwrap();
    assert!(saved.approval.waiting);
    control
        .send(Control::Approve {
            agenda: Some(vec!["gamma".into()]),
        })
        .unwrap();
    let s = tokio::time::timeout(std::time::Duration::from_secs(30), handle)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!(
        s.agenda
            .iter()
            .map(|t| t.query.as_str())
            .collect::<Vec<_>>(),
        vec!["gamma"]
    );
    assert!(
        h.fetcher
            .fetched
            .lock()
            .unwrap()
            .iter()
            .all(|u| u.contains("gamma"))
    );
}

#[tokio::test]
async fn a_plan_nobody_approves_fails_approval_timeout_having_searched_nothing() {
    let h = harness(
        deep_model(r#"{"intent": "research", "complexity": 1, "tasks": ["alpha", "beta"]}"#),
        false,
    );
    let (_control, rx) = watch::channel(Control::Run);
    let s = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        executor::run(
            h.engine.clone(),
            with_approval("deep question", Some(1)),
            Arc::new(NoopObserver),
            rx,
        ),
    )
    .await
    .unwrap();
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.failure.as_ref().unwrap().reason, "ApprovalTimeout");
    let purposes: Vec<CallPurpose> = h.model.requests().iter().map(|r| r.purpose).collect();
    assert_eq!(purposes, vec![CallPurpose::Plan]);
    assert_eq!(s.searches, 0);
    assert_eq!(h.store.text(REPORT_KEY), None);
}

#[tokio::test]
async fn passages_that_never_name_the_asked_setting_end_no_evidence_without_an_answer() {
    // A small model's guided run: every page read is Python's sqlite3 entry, which names
    // create_engine() in passing and never `pool_size`; the model, if asked, would answer.
    let mut model = Arc::into_inner(FakeModel::new(|req| {
        Ok(text(match &req.json_schema {
            Some(_) => r#"{"1": "The default pool_size of create_engine() is 5 connections."}"#,
            None => "The default pool_size of create_engine() is 5 connections [1].",
        }))
    }))
    .unwrap();
    model.window = 8_192;
    model.json = true;
    let page = (
        "sqlite3 — DB-API 2.0 interface for SQLite databases".to_string(),
        "# sqlite3\n\n## sqlite3.connect(database, timeout=5.0)\n\nOpen a connection to an SQLite \
         database. Unlike a create_engine() connection pool, each call opens one connection; \
         timeout is how many seconds the connection waits, 5.0 by default."
            .to_string(),
    );
    let h = guided_harness(Arc::new(model), page);
    let question = "What is the default pool_size of the connection pool created by SQLAlchemy's create_engine()?";
    let s = run(&h, RunState::new(RunInput::new(question, Mode::Quick))).await;
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.failure.as_ref().unwrap().reason, "NoEvidence");
    // Nothing was written: no grounded call was made.
    assert!(
        h.model.requests().iter().all(|r| r.json_schema.is_none()),
        "{:?}",
        h.model.requests()
    );
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(report.starts_with("# Unable to research"), "{report}");
    assert!(
        report.contains("none of them names `pool_size`, which"),
        "{report}"
    );
    assert!(report.contains("## Closest pages read"), "{report}");
    assert!(!report.contains("5 connections"), "{report}");
}

/// A guided (small-model) run whose model never answers fails with the model's reason; it once
/// ended Completed with the best passages quoted and no model call made.
#[tokio::test]
async fn a_guided_run_whose_model_never_answers_fails_instead_of_quoting_the_pages() {
    let model = FakeModel::new(|_| Err(LlmError::Timeout { seconds: 5 }));
    let page = (
        "json — JSON encoder and decoder".to_string(),
        "# json\n\n## json.loads(s)\n\nDeserialize s, a str holding a JSON document, to a \
         Python object. json.loads raises JSONDecodeError when the document is invalid."
            .to_string(),
    );
    let h = guided_harness(model, page);
    let s = run(
        &h,
        RunState::new(RunInput::new(
            "What does json.loads raise for an invalid document?",
            Mode::Quick,
        )),
    )
    .await;
    assert_eq!(s.phase, Phase::Failed, "{:?}", h.store.text(REPORT_KEY));
    assert_eq!(s.failure.as_ref().unwrap().reason, "ModelUnreachable");
    assert!(!h.model.requests().is_empty(), "the model was asked");
}

/// Deep mode with a model small enough to be guided: the study is the researchers' cited
/// answers, every task's summary under one "Summary", and no page summaries or synthesis call
/// (the 0.5B model returned the synthesis outline itself as its report).
#[tokio::test]
async fn a_guided_deep_run_writes_its_study_from_the_researchers_answers() {
    let plan = r#"{"intent": "research", "complexity": 1, "tasks": ["What does json.loads raise for an invalid document?", "What does json.dumps return?"]}"#;
    let mut model = Arc::into_inner(FakeModel::new(move |req| {
        let asked = req
            .messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<String>();
        Ok(text(match req.purpose {
            CallPurpose::Plan => plan,
            CallPurpose::Evaluate => r#"{"action": "synthesize"}"#,
            CallPurpose::Synthesize => {
                "# A title for the report\n\n## Key Takeaways\nA numbered list of 5-7 most important insights for busy readers."
            }
            CallPurpose::Summarize => "- the page says things",
            _ if asked.contains("What does json.dumps return") => {
                r#"{"1": "json.dumps returns the JSON document as a str."}"#
            }
            _ => r#"{"1": "json.loads raises JSONDecodeError when the document is invalid."}"#,
        }))
    }))
    .unwrap();
    model.window = 8_192;
    model.json = true;
    let page = (
        "json — JSON encoder and decoder".to_string(),
        "# json\n\n## json.loads(s)\n\nDeserialize s, a str holding a JSON document, to a Python \
         object. json.loads raises JSONDecodeError when the document is invalid.\n\n\
         ## json.dumps(obj)\n\nSerialize obj to a JSON formatted str. json.dumps returns the \
         JSON document as a str."
            .to_string(),
    );
    let h = guided_harness(Arc::new(model), page);
    let s = run(
        &h,
        RunState::new(RunInput::new(
            "What does json.loads raise for an invalid document, and what does json.dumps return?",
            Mode::Deep,
        )),
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    let purposes: Vec<CallPurpose> = h.model.requests().iter().map(|r| r.purpose).collect();
    assert!(
        !purposes
            .iter()
            .any(|p| matches!(p, CallPurpose::Summarize | CallPurpose::Synthesize)),
        "{purposes:?}"
    );
    let report = h.store.text(REPORT_KEY).unwrap();
    assert!(!report.contains("Key Takeaways"), "{report}");
    assert_eq!(report.matches("## Summary").count(), 1, "{report}");
    let summary = report
        .split("## Summary")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    assert!(summary.contains("JSONDecodeError"), "{report}");
    assert!(summary.contains("str"), "{report}");
    assert!(
        report.contains("## What does json.loads raise for an invalid document?")
            && report.contains("## What does json.dumps return?"),
        "{report}"
    );
}

/// A memory store whose cost journal cannot be written until the report is stored and two more
/// journal writes have failed: a store outage that began at the run's last model call.
struct JournalOutage {
    inner: MemoryStore,
    /// Journal writes still to refuse once the report is stored.
    left_after_report: Mutex<u32>,
}

#[async_trait]
impl ArtifactStore for JournalOutage {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), quarry_engine::store::StoreError> {
        if key == EVENTS_KEY {
            let reported = self.inner.text(REPORT_KEY).is_some();
            let mut left = self.left_after_report.lock().unwrap();
            if !reported || *left > 0 {
                if reported {
                    *left -= 1;
                }
                return Err(quarry_engine::store::StoreError::Io {
                    key: key.into(),
                    message: "connection refused".into(),
                });
            }
        }
        self.inner.put(key, bytes).await
    }
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, quarry_engine::store::StoreError> {
        self.inner.get(key).await
    }
    async fn delete(&self, key: &str) -> Result<(), quarry_engine::store::StoreError> {
        self.inner.delete(key).await
    }
}

/// Records, for each state the executor publishes, the run total of the journal's newest call
/// line as the store held it at that moment.
struct JournalAtEachState {
    store: Arc<JournalOutage>,
    seen: Mutex<Vec<(Phase, u64, Option<u64>)>>,
}

impl RunObserver for JournalAtEachState {
    fn on_change(&self, state: &RunState, _: &Event) {
        let newest = self.store.inner.text(EVENTS_KEY).and_then(|log| {
            log.lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter_map(|v| v["runTotal"]["inputTokens"].as_u64())
                .max()
        });
        self.seen
            .lock()
            .unwrap()
            .push((state.phase, state.usage.input_tokens, newest));
    }
}

/// The journal holds every paid call before the run is seen to end: an operator that wrote the
/// terminal status first and died while the journal was still being retried would leave a
/// finished run whose journal (what an audit and a resumed run trust) misses its last calls.
#[tokio::test]
async fn the_cost_journal_is_complete_before_the_run_is_seen_to_end() {
    use quarry_engine::llm::limiter::{RateLimits, endpoint};
    use quarry_engine::llm::pricing::Price;
    use quarry_engine::llm::router::{Router, SpendGuard, Tier};
    let fake = FakeModel::new(good_researcher);
    let spend: Arc<SpendGuard> = Default::default();
    let router = Router::new(
        Tier {
            name: "primary".into(),
            model: fake.clone(),
            endpoint: endpoint(
                "http://journal-outage.invalid/v1",
                "fake",
                RateLimits::default(),
            ),
            price: Price::FREE,
            provider: "test".into(),
            model_name: "fake".into(),
        },
        None,
        None,
        vec![],
        spend.clone(),
    );
    let mut h = harness(fake, false);
    let store = Arc::new(JournalOutage {
        inner: MemoryStore::new(),
        left_after_report: Mutex::new(2),
    });
    let mut engine = Arc::into_inner(h.engine).unwrap();
    engine.model = Arc::new(router);
    engine.spend = spend;
    engine.store = store.clone();
    h.engine = Arc::new(engine);
    let observer = Arc::new(JournalAtEachState {
        store: store.clone(),
        seen: Mutex::new(vec![]),
    });
    let (_tx, rx) = watch::channel(Control::Run);
    let s = executor::run(
        h.engine.clone(),
        RunState::new(RunInput::new("json decoding", Mode::Quick)),
        observer.clone(),
        rx,
    )
    .await;
    assert_eq!(s.phase, Phase::Completed, "{:?}", s.failure);
    assert_eq!(s.usage.input_tokens, 400);
    let seen = observer.seen.lock().unwrap().clone();
    // Every journal write failed until the report was stored: the journal was still empty
    // while the run researched.
    assert!(
        seen.iter().any(|(p, _, j)| !p.is_terminal() && j.is_none()),
        "{seen:?}"
    );
    let (phase, usage, journal) = *seen.last().unwrap();
    assert_eq!(
        (phase, journal),
        (Phase::Completed, Some(usage)),
        "the run was seen Completed with its journal at {journal:?} input tokens of {usage}: {seen:?}"
    );
}
