//! Fifty runs of one operator share a rate-limited model endpoint: the router's shared limiter
//! keeps every run under the provider's rate, so the provider never answers 429.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_api::ResearchProfile;
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_engine::llm::{CallPurpose, ChatRequest, Message};
use quarry_engine::store::memory::MemoryStore;
use quarry_operator::engine_builder;

const RUNS: usize = 50;
const CALLS_PER_RUN: usize = 4;
const PER_MINUTE: u64 = 1200;

fn profile(model_url: &str) -> ResearchProfile {
    ResearchProfile::from_yaml(&format!(
        r#"apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: limited
spec:
  models:
    primary:
      baseURL: "{model_url}"
      model: limited
      timeoutSeconds: 20
      requestsPerMinute: {PER_MINUTE}
  search:
    url: "http://127.0.0.1:9"
"#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_runs_stay_under_the_endpoints_rate_limit() {
    let model = ScriptedModel::start(
        Script::default()
            .with_fallback(Step::text("ok").with_usage(10, 1))
            .with_rate_limit(PER_MINUTE),
    )
    .await
    .unwrap();
    let profile = profile(&model.base_url());
    let no_key = |_: &quarry_api::ModelTier| None;
    let metrics = quarry_engine::telemetry::Metrics::new();
    // One engine per run, as the operator builds them; they share the endpoint's limiter.
    let engines: Vec<_> = (0..RUNS)
        .map(|i| {
            engine_builder::build_engine(
                &profile.spec,
                &no_key,
                Arc::new(MemoryStore::new()),
                Some(metrics.for_run(&format!("ns{}", i % 5), "limited")),
            )
            .unwrap()
        })
        .collect();
    let start = Instant::now();
    let runs = engines.into_iter().map(|engine| {
        tokio::spawn(async move {
            for _ in 0..CALLS_PER_RUN {
                let request = ChatRequest {
                    messages: vec![Message::user("hello")],
                    tools: vec![],
                    json_mode: false,
                    json_schema: None,
                    max_tokens: 16,
                    purpose: CallPurpose::Research,
                };
                engine.model.chat(request).await.unwrap();
            }
        })
    });
    for run in futures::future::join_all(runs).await {
        run.unwrap();
    }
    let elapsed = start.elapsed();
    assert_eq!(
        model.request_count(),
        RUNS * CALLS_PER_RUN,
        "no call was retried"
    );
    assert_eq!(
        model.rate_limited(),
        0,
        "the provider never had to answer 429"
    );
    // 200 calls at 20/s after a burst of 100 take at least 5 s: the limiter really held them back.
    assert!(elapsed >= Duration::from_millis(4_500), "{elapsed:?}");
    // The waits are visible in the metrics, per endpoint and without run names.
    let text = metrics.encode().unwrap();
    let waits: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "quarry_llm_rate_limit_waits_total{provider=\"127.0.0.1\",model=\"limited\"} ",
            )
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(waits >= 90, "about 100 calls waited: {waits}\n{text}");
    let ok: u64 = text
        .lines()
        .filter(|l| l.starts_with("quarry_llm_requests_total{") && l.contains("outcome=\"ok\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(ok, (RUNS * CALLS_PER_RUN) as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_shared_limit_the_same_load_meets_429s() {
    // The control: the same provider limit, a profile without requestsPerMinute.
    let model = ScriptedModel::start(
        Script::default()
            .with_fallback(Step::text("ok").with_usage(10, 1))
            .with_rate_limit(PER_MINUTE),
    )
    .await
    .unwrap();
    let yaml = format!(
        "apiVersion: quarry.dev/v1alpha1\nkind: ResearchProfile\nmetadata:\n  name: unlimited\nspec:\n  models:\n    primary:\n      baseURL: \"{}\"\n      model: unlimited\n      timeoutSeconds: 20\n  search:\n    url: \"http://127.0.0.1:9\"\n",
        model.base_url()
    );
    let profile = ResearchProfile::from_yaml(&yaml).unwrap();
    let no_key = |_: &quarry_api::ModelTier| None;
    let engines: Vec<_> = (0..RUNS)
        .map(|_| {
            engine_builder::build_engine(&profile.spec, &no_key, Arc::new(MemoryStore::new()), None)
                .unwrap()
        })
        .collect();
    let runs = engines.into_iter().map(|engine| {
        tokio::spawn(async move {
            let request = ChatRequest {
                messages: vec![Message::user("hello")],
                tools: vec![],
                json_mode: false,
                json_schema: None,
                max_tokens: 16,
                purpose: CallPurpose::Research,
            };
            for _ in 0..CALLS_PER_RUN {
                // Retries with Retry-After eventually succeed or give up; either way 429s happened.
                let _ = engine.model.chat(request.clone()).await;
            }
        })
    });
    futures::future::join_all(runs).await;
    assert!(
        model.rate_limited() > 0,
        "the control load must exceed the provider's rate"
    );
}
