//! The live event stream end to end: a deep run driven by the engine against the scripted model
//! server and a local web, its events served as Server-Sent Events by the operator's HTTP server,
//! read by a real HTTP client that drops its connection and resumes with `Last-Event-ID`; the
//! Redis Streams backend against a real redis-server, killed mid-run.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use quarry::logs::SseMessage;
use quarry_e2e::event_stream::{EventServer, SseConnection, start_streamed_run, wait_for_run};
use quarry_e2e::redis_server::{RedisServer, redis_available};
use quarry_e2e::searx::running_in_ci;
use quarry_e2e::slow_web::SlowWeb;
use quarry_engine::events::memory::MemoryEvents;
use quarry_engine::events::{EventId, RUN_FINISHED, RunEvents, RunRef, StoredEvent};
use quarry_engine::research::machine::state::{Mode, Phase};
use quarry_engine::telemetry::Metrics;
use quarry_operator::redis::event_stream::{RedisEvents, RedisSettings, stream_key};
use quarry_operator::server::run_events::StreamSettings;

/// Every model answer takes this long: a deep run lasts a few seconds, time to drop and resume.
const MODEL_MS: u64 = 150;
const WAIT: Duration = Duration::from_secs(30);

fn json(message: &SseMessage) -> Value {
    serde_json::from_str(&message.data).unwrap()
}

fn id(message: &SseMessage) -> EventId {
    message.id.as_deref().unwrap().parse().unwrap()
}

async fn web() -> SlowWeb {
    SlowWeb::start(Duration::from_millis(30), Duration::from_millis(10))
        .await
        .unwrap()
}

/// Reads until `stop` says so (inclusive) or the stream ends.
async fn read_until(
    conn: &mut SseConnection,
    stop: impl Fn(&SseMessage, usize) -> bool,
) -> Vec<SseMessage> {
    let mut got = Vec::new();
    while let Some(message) = conn.next(WAIT).await {
        got.push(message);
        if stop(got.last().unwrap(), got.len()) {
            break;
        }
    }
    got
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

#[tokio::test]
async fn a_client_that_drops_and_resumes_with_last_event_id_misses_nothing() {
    let web = web().await;
    let events = Arc::new(MemoryEvents::default());
    let server = EventServer::start(events.clone(), events.clone(), StreamSettings::default())
        .await
        .unwrap();
    let run = RunRef::new("team", "deep-run", "uid-deep");
    let streamed = start_streamed_run(&web, Mode::Deep, MODEL_MS, events.clone(), run)
        .await
        .unwrap();
    assert!(wait_for_run(events.as_ref(), "team", "deep-run", WAIT).await);
    let url = server.events_url("team", "deep-run");

    // First connection: a few events, then the client goes away mid-run.
    let mut first = SseConnection::open(&url, None).await.unwrap();
    let before = read_until(&mut first, |_, n| n == 8).await;
    assert_eq!(before.len(), 8);
    drop(first);
    let dropped_at = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        !streamed.task.is_finished(),
        "the run should still be going while the client is away"
    );
    let resumed_at = chrono::Utc::now();
    // Second connection resumes after the last id it saw, and follows to the end.
    let last_seen = before.last().unwrap().id.clone().unwrap();
    let mut second = SseConnection::open(&url, Some(&last_seen)).await.unwrap();
    let after = read_until(&mut second, |m, _| m.event.as_deref() == Some(RUN_FINISHED)).await;
    // The server ends the stream after the final event.
    assert!(second.next(Duration::from_secs(5)).await.is_none());
    let (state, _) = streamed.task.await.unwrap();
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);

    // The whole stream, read again from the start without following.
    let mut full_conn = SseConnection::open(&format!("{url}?follow=false"), None)
        .await
        .unwrap();
    let full = read_until(&mut full_conn, |_, _| false).await;
    eprintln!(
        "{} events in all: {} before the drop, {} after resuming ({} of them published while away)",
        full.len(),
        before.len(),
        after.len(),
        after
            .iter()
            .filter(|m| {
                let time = json(m)["time"].as_str().unwrap().to_string();
                let time = chrono::DateTime::parse_from_rfc3339(&time).unwrap();
                time >= dropped_at && time < resumed_at
            })
            .count()
    );
    let union: Vec<EventId> = before.iter().chain(&after).map(id).collect();
    let all: Vec<EventId> = full.iter().map(id).collect();
    assert_eq!(
        union, all,
        "the two connections together are exactly the stream"
    );
    assert!(all.windows(2).all(|w| w[0] < w[1]), "ids strictly increase");
    let unique: BTreeSet<EventId> = union.iter().copied().collect();
    assert_eq!(unique.len(), union.len(), "no event twice");

    // Events published while the client was away arrived after it resumed.
    let missed: Vec<&SseMessage> = after
        .iter()
        .filter(|m| {
            let time = json(m)["time"].as_str().unwrap().to_string();
            let time = chrono::DateTime::parse_from_rfc3339(&time).unwrap();
            time >= dropped_at && time < resumed_at
        })
        .collect();
    assert!(!missed.is_empty(), "nothing happened while disconnected");

    // The stream tells the whole run: every model call, every search and read that reached the
    // web, the research steps, and ends with the outcome.
    let values: Vec<Value> = full.iter().map(json).collect();
    assert_eq!(count(&values, "modelCall"), streamed.model.request_count());
    let misses = |kind: &str| {
        values
            .iter()
            .filter(|e| e["type"] == kind && e["cache"] == "miss")
            .count() as u64
    };
    assert_eq!(misses("search"), web.searches());
    assert_eq!(misses("fetch"), web.fetches());
    assert_eq!(
        count(&values, "agendaPlanned"),
        2,
        "the plan and the delegation"
    );
    assert_eq!(count(&values, "researcherStarted"), 4);
    assert_eq!(count(&values, "researcherFinished"), 4);
    assert_eq!(count(&values, "evaluation"), 2);
    assert_eq!(count(&values, "reportStored"), 1);
    let phases: Vec<&str> = values
        .iter()
        .filter(|e| e["type"] == "phase")
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        ["Planning", "Researching", "Synthesizing", "Completed"]
    );
    let last = values.last().unwrap();
    assert_eq!(last["type"], RUN_FINISHED);
    assert_eq!(last["phase"], "Completed");
    assert_eq!(last["report"], true);
    assert_eq!(
        last["inputTokens"].as_u64().unwrap(),
        state.usage.input_tokens
    );
    for event in &values {
        assert_eq!(event["namespace"], "team");
        assert_eq!(event["run"], "deep-run");
        assert_eq!(event["uid"], "uid-deep");
    }
    // No client is left counted.
    assert_eq!(server.metrics.event_stream_clients.get(), 0);
}

/// Every event of a Redis stream read by a follower until the run's final event.
async fn follow_redis(events: &dyn RunEvents, run: &RunRef) -> Vec<StoredEvent> {
    let mut reader = events.reader(run).await.unwrap();
    let mut got: Vec<StoredEvent> = Vec::new();
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let batch = match reader
            .next(got.last().map(|e| e.id), Duration::from_secs(1), 100)
            .await
        {
            Ok(batch) => batch,
            Err(e) => panic!("reading the stream: {e}"),
        };
        got.extend(batch);
        if got.last().is_some_and(|e| e.kind == RUN_FINISHED) {
            return got;
        }
    }
    panic!("no runFinished within {WAIT:?}; got {} events", got.len());
}

async fn redis_cmd(url: &str, args: &[&str]) -> redis::Value {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut conn).await.unwrap()
}

#[tokio::test]
#[ignore = "needs redis-server (scripts/install-test-deps.sh)"]
async fn redis_streams_carry_a_run_to_other_replicas_and_a_redis_death_costs_only_events() {
    if !redis_available() {
        assert!(
            !running_in_ci(),
            "redis-server missing: run scripts/install-test-deps.sh"
        );
        eprintln!("skipped: redis-server is not installed (scripts/install-test-deps.sh)");
        return;
    }
    let mut redis = RedisServer::start().unwrap();
    let web = web().await;
    let metrics = Metrics::new();
    // The replica running the research publishes; another replica (its own client) reads.
    let publishing: Arc<dyn RunEvents> = Arc::new(
        RedisEvents::start(
            &redis.url(),
            RedisSettings::default(),
            Some(metrics.clone()),
        )
        .unwrap(),
    );
    let reading = RedisEvents::start(&redis.url(), RedisSettings::default(), None).unwrap();

    let run = RunRef::new("team", "redis-run", "uid-r1");
    let started = Instant::now();
    let streamed = start_streamed_run(&web, Mode::Deep, MODEL_MS, publishing.clone(), run.clone())
        .await
        .unwrap();
    let got = follow_redis(&reading, &run).await;
    let (state, _) = streamed.task.await.unwrap();
    let healthy_run = started.elapsed();
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    assert!(got.windows(2).all(|w| w[0].id < w[1].id));
    let values: Vec<Value> = got
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    assert_eq!(count(&values, "modelCall"), streamed.model.request_count());
    assert_eq!(values.last().unwrap()["phase"], "Completed");
    // Ids are Redis's own: resuming after any of them gives exactly the rest.
    let mut reader = reading.reader(&run).await.unwrap();
    let rest = reader
        .next(Some(got[5].id), Duration::ZERO, 10_000)
        .await
        .unwrap();
    assert_eq!(rest, got[6..].to_vec());
    // One stream per run, all events in it, expiring an hour after the run finished.
    let key = stream_key(&run);
    assert_eq!(key, "quarry:events:team/redis-run:uid-r1");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let len = redis_cmd(&redis.url(), &["XLEN", &key]).await;
    assert_eq!(len, redis::Value::Int(got.len() as i64));
    let ttl = match redis_cmd(&redis.url(), &["TTL", &key]).await {
        redis::Value::Int(ttl) => ttl,
        other => panic!("TTL answered {other:?}"),
    };
    assert!((3000..=3600).contains(&ttl), "TTL {ttl}");
    let ok_before = published(&metrics, "ok");
    assert_eq!(ok_before, got.len() as u64);

    // Second run: Redis dies after the first few events. The run goes on and completes.
    let run2 = RunRef::new("team", "redis-run-2", "uid-r2");
    let started = Instant::now();
    let streamed = start_streamed_run(&web, Mode::Deep, MODEL_MS, publishing.clone(), run2.clone())
        .await
        .unwrap();
    let mut reader = reading.reader(&run2).await.unwrap();
    let mut early = Vec::new();
    while early.len() < 3 {
        early.extend(
            reader
                .next(
                    early.last().map(|e: &StoredEvent| e.id),
                    Duration::from_secs(1),
                    100,
                )
                .await
                .unwrap(),
        );
    }
    redis.stop();
    let (state, _) = tokio::time::timeout(WAIT, streamed.task)
        .await
        .expect("the run stalled after Redis died")
        .unwrap();
    let degraded_run = started.elapsed();
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    assert!(state.published);
    // Not slowed down: the same script took about as long with Redis up.
    assert!(
        degraded_run < healthy_run * 2 + Duration::from_secs(2),
        "run with Redis down took {degraded_run:?}, with Redis up {healthy_run:?}"
    );
    // The events Redis could not take were dropped and counted.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let lost = published(&metrics, "error") + published(&metrics, "dropped");
    eprintln!(
        "run with Redis up: {healthy_run:?} ({} events); with Redis killed after {} events: {degraded_run:?}, {lost} events dropped",
        got.len(),
        early.len()
    );
    assert!(lost > 0, "no dropped events counted");
    assert!(
        published(&metrics, "ok") > ok_before,
        "the early events were taken"
    );
    // The reader sees the backend gone instead of hanging.
    assert!(
        reader
            .next(early.last().map(|e| e.id), Duration::from_secs(1), 10)
            .await
            .is_err()
    );
}

fn published(metrics: &Metrics, outcome: &str) -> u64 {
    metrics
        .event_stream_publish
        .get_or_create(&quarry_engine::telemetry::StreamPublishLabels {
            backend: "redis".into(),
            outcome: outcome.into(),
        })
        .get()
}

#[tokio::test]
async fn a_standalone_run_publishes_to_the_in_memory_stream() {
    use quarry_e2e::bench::{QUICK_QUESTION, scripted_run};
    use quarry_e2e::model_server::ScriptedModel;
    let web = web().await;
    let model = ScriptedModel::start(scripted_run(&web, Mode::Quick, 20))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    // The scripted server takes any key: no key variable needed.
    let yaml = quarry_e2e::profiles::scripted_profile(&model.base_url(), &web.base_url())
        .replace("      apiKeyEnv: QUARRY_TEST_KEY\n", "");
    std::fs::write(&profile, yaml).unwrap();
    let events = Arc::new(MemoryEvents::default());
    let opts = quarry::standalone::StandaloneOptions {
        query: QUICK_QUESTION.to_string(),
        context: None,
        profile,
        out: Some(dir.path().join("report.md")),
        mode: Mode::Quick,
        outputs: vec![],
        top_k: 5,
        limits: Default::default(),
        state_dir: Some(dir.path().join("state")),
        redis_url: None,
        workers: false,
        approve: false,
        compare_with: None,
        events: None,
    };
    let report = quarry::standalone::run_with_events(opts, events.clone())
        .await
        .unwrap();
    assert!(report.exists());
    let name = quarry_engine::store::sanitize_query(QUICK_QUESTION);
    let info = quarry_engine::events::RunDirectory::lookup(events.as_ref(), "local", &name)
        .await
        .unwrap()
        .expect("the run is in the stream");
    assert!(info.terminal);
    let got = events
        .reader(&info.run)
        .await
        .unwrap()
        .next(None, Duration::ZERO, 10_000)
        .await
        .unwrap();
    let values: Vec<Value> = got
        .iter()
        .map(|e| serde_json::from_str(&e.json).unwrap())
        .collect();
    assert_eq!(count(&values, "modelCall"), model.request_count());
    assert_eq!(count(&values, "researcherStarted"), 1);
    let last = values.last().unwrap();
    assert_eq!(
        (last["type"].as_str(), last["phase"].as_str()),
        (Some(RUN_FINISHED), Some("Completed"))
    );
}
