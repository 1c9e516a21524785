//! The model router against scripted model servers: Retry-After, the circuit breaker with its
//! fallback and half-open recovery, timeouts, and the planner's repair-then-next-tier rule. Each
//! engine is built from a ResearchProfile exactly as `quarry run` and the operator build it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_api::ResearchProfile;
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_engine::llm::{CallPurpose, ChatRequest, LlmError, Message};
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::{Mode, RunInput, RunState};
use quarry_engine::research::shell::executor::Engine;
use quarry_engine::store::memory::MemoryStore;
use quarry_engine::telemetry::Metrics;
use quarry_operator::engine_builder;

fn tier(name: &str, url: &str, model: &str, extra: &str) -> String {
    format!(
        "    {name}:\n      baseURL: \"{url}\"\n      model: {model}\n      timeoutSeconds: 2\n      stream: false\n{extra}"
    )
}

fn engine(tiers: &[String], metrics: Option<&Metrics>) -> Engine {
    let yaml = format!(
        "apiVersion: quarry.dev/v1alpha1\nkind: ResearchProfile\nmetadata:\n  name: router\nspec:\n  models:\n{}\n  search:\n    url: \"http://127.0.0.1:9\"\n",
        tiers.join("\n")
    );
    let profile = ResearchProfile::from_yaml(&yaml).unwrap();
    let no_key = |_: &quarry_api::ModelTier| None;
    engine_builder::build_engine(
        &profile.spec,
        &no_key,
        Arc::new(MemoryStore::new()),
        metrics.map(|m| m.for_run("ns", "router")),
    )
    .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hello")],
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens: 16,
        purpose: CallPurpose::Research,
    }
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out() {
    let primary = ScriptedModel::start(Script::new(vec![
        Step::status_retry_after(429, 1),
        Step::text("after the wait"),
    ]))
    .await
    .unwrap();
    let e = engine(&[tier("primary", &primary.base_url(), "p429", "")], None);
    let started = Instant::now();
    let answer = e.model.chat(request()).await.unwrap();
    assert_eq!(answer.content, "after the wait");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was honoured"
    );
    assert_eq!(primary.request_count(), 2);
}

#[tokio::test]
async fn five_failures_open_the_breaker_the_fallback_answers_and_half_open_recovers() {
    // The primary fails five calls, then recovers.
    let primary = ScriptedModel::start(
        Script::new((0..5).map(|_| Step::status(503)).collect())
            .with_fallback(Step::text("primary")),
    )
    .await
    .unwrap();
    let fallback = ScriptedModel::start(Script::default().with_fallback(Step::text("fallback")))
        .await
        .unwrap();
    let breaker = "      maxRetries: 0\n      circuitBreaker:\n        failureThreshold: 5\n        openSeconds: 1\n        successThreshold: 2\n";
    let metrics = Metrics::new();
    let e = engine(
        &[
            tier("primary", &primary.base_url(), "pbreak", breaker),
            tier(
                "fallback",
                &fallback.base_url(),
                "fbreak",
                "      maxRetries: 0\n",
            ),
        ],
        Some(&metrics),
    );
    for _ in 0..5 {
        assert_eq!(e.model.chat(request()).await.unwrap().content, "fallback");
    }
    assert_eq!(primary.request_count(), 5);
    // Open: the fallback answers without the primary being asked.
    assert_eq!(e.model.chat(request()).await.unwrap().content, "fallback");
    assert_eq!(primary.request_count(), 5);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(
            "quarry_llm_circuit_breaker_state{provider=\"127.0.0.1\",model=\"pbreak\"} 2\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("quarry_llm_fallbacks_total{provider=\"127.0.0.1\",model=\"pbreak\"} 5\n"),
        "{text}"
    );
    // After openSeconds, trial calls reach the recovered primary; two successes close the breaker.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(e.model.chat(request()).await.unwrap().content, "primary");
    assert_eq!(e.model.chat(request()).await.unwrap().content, "primary");
    assert_eq!(primary.request_count(), 7);
    let text = metrics.encode().unwrap();
    assert!(
        text.contains(
            "quarry_llm_circuit_breaker_state{provider=\"127.0.0.1\",model=\"pbreak\"} 0\n"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn a_timeout_moves_the_call_to_the_next_tier() {
    let primary = ScriptedModel::start(
        Script::default().with_fallback(Step::delay(3_000, Step::text("too late"))),
    )
    .await
    .unwrap();
    let budget = ScriptedModel::start(Script::default().with_fallback(Step::text("budget")))
        .await
        .unwrap();
    let metrics = Metrics::new();
    let e = engine(
        &[
            tier(
                "primary",
                &primary.base_url(),
                "ptime",
                "      maxRetries: 0\n",
            ),
            tier("budget", &budget.base_url(), "btime", ""),
        ],
        Some(&metrics),
    );
    let started = Instant::now();
    assert_eq!(e.model.chat(request()).await.unwrap().content, "budget");
    assert!(
        started.elapsed() < Duration::from_millis(2_900),
        "the 2 s timeout cut the call"
    );
    let text = metrics.encode().unwrap();
    assert!(
        text.contains("model=\"ptime\",outcome=\"timeout\"} 1\n"),
        "{text}"
    );
}

#[tokio::test]
async fn an_unusable_agenda_is_repaired_once_then_the_budget_tier_plans() {
    let primary = ScriptedModel::start(
        Script::default().with_fallback(Step::text("I would rather write prose than JSON.")),
    )
    .await
    .unwrap();
    let budget = ScriptedModel::start(Script::new(vec![Step::text(
        r#"{"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": ["json module", "pickle module"]}"#,
    )]))
    .await
    .unwrap();
    let e = engine(
        &[
            tier("primary", &primary.base_url(), "pplan", ""),
            tier("budget", &budget.base_url(), "bplan", ""),
        ],
        None,
    );
    let state = RunState::new(RunInput::new("compare json and pickle", Mode::Deep));
    let event = quarry_engine::research::agents::lead::plan(
        e.model.as_ref(),
        e.budget_model.as_deref(),
        &state,
        256,
    )
    .await;
    match event {
        Event::PlanReady { tasks, .. } => assert_eq!(tasks, vec!["json module", "pickle module"]),
        other => panic!("expected an agenda, got {other:?}"),
    }
    // The answer and one repair retry on the primary, quoting the parse error; then the budget tier.
    assert_eq!(primary.request_count(), 2);
    let repair = primary.requests()[1]["messages"].to_string();
    assert!(repair.contains("Your answer could not be used"), "{repair}");
    assert_eq!(budget.request_count(), 1);
}

#[tokio::test]
async fn when_every_tier_is_down_the_caller_gets_the_last_error_promptly() {
    // Both tiers down: the caller sees the last availability error, no hang.
    let primary = ScriptedModel::start(Script::default().with_fallback(Step::status(500)))
        .await
        .unwrap();
    let fallback = ScriptedModel::start(Script::default().with_fallback(Step::status(502)))
        .await
        .unwrap();
    let e = engine(
        &[
            tier(
                "primary",
                &primary.base_url(),
                "pdown",
                "      maxRetries: 1\n",
            ),
            tier(
                "fallback",
                &fallback.base_url(),
                "fdown",
                "      maxRetries: 0\n",
            ),
        ],
        None,
    );
    let err = e.model.chat(request()).await.unwrap_err();
    assert!(matches!(err, LlmError::Status { status: 502, .. }), "{err}");
    assert_eq!(primary.request_count(), 2, "one call and one retry");
    assert_eq!(fallback.request_count(), 1);
}
