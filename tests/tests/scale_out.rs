//! Scale-out mode through real processes: `quarry run --workers` hands a deep run's researchers
//! to two `quarry worker` processes over Debian's redis-server, with real searx over the docs and
//! the scripted model. One worker is killed with SIGKILL while the scripted model holds its
//! researcher's call; the other reclaims the task (XAUTOCLAIM) and the run completes. The model
//! server's request log is the proof of which calls were made, and of what they cost.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use quarry_e2e::deep_script::{contents, planner, study, summarizer};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::profiles::write_scripted_profile;
use quarry_e2e::quarry_bin::{run_args, spawn_quarry};
use quarry_e2e::redis_server::RedisServer;
use quarry_e2e::searx::SearchStack;
use quarry_e2e::worker::{WorkerProcess, metric};

const KEY: (&str, &str) = ("QUARRY_TEST_KEY", "sk-test-secret-123");

/// `quarry run QUERY --workers` in the background; resolves to its output.
fn leader(
    dir: &Path,
    profile: &Path,
    redis_url: &str,
    mode: &str,
    extra: &[&str],
) -> tokio::task::JoinHandle<std::process::Output> {
    leader_asking(
        "How do Python's serialization modules compare?",
        dir,
        profile,
        redis_url,
        mode,
        extra,
    )
}

fn leader_asking(
    query: &str,
    dir: &Path,
    profile: &Path,
    redis_url: &str,
    mode: &str,
    extra: &[&str],
) -> tokio::task::JoinHandle<std::process::Output> {
    let mut args = run_args(query, mode, profile, dir);
    args.extend(["--workers", "--redis-url", redis_url].map(String::from));
    args.extend(extra.iter().map(|s| s.to_string()));
    spawn_quarry(args, vec![(KEY.0.into(), KEY.1.into())])
}

async fn redis_conn(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Pending entries of the task group: (entry id, consumer).
async fn pending(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, String)> {
    let reply: redis::streams::StreamPendingCountReply = redis::cmd("XPENDING")
        .arg("quarry:tasks")
        .arg("quarry-workers")
        .arg("-")
        .arg("+")
        .arg(100)
        .query_async(conn)
        .await
        .unwrap();
    reply.ids.into_iter().map(|p| (p.id, p.consumer)).collect()
}

/// The `task` field of a tasks-stream entry.
async fn task_of(conn: &mut redis::aio::MultiplexedConnection, id: &str) -> String {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg("quarry:tasks")
        .arg(id)
        .arg(id)
        .query_async(conn)
        .await
        .unwrap();
    reply.ids[0].get::<String>("task").unwrap()
}

async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The totals of the leader's last line: `usage: I input + O output tokens in N model calls, cost $C`.
fn usage_line(stderr: &str) -> (u64, u64, u64, String) {
    let re = regex::Regex::new(
        r"usage: (\d+) input \+ (\d+) output tokens in (\d+) model calls, cost \$([0-9.]+)",
    )
    .unwrap();
    let c = re.captures(stderr).expect("usage line");
    (
        c[1].parse().unwrap(),
        c[2].parse().unwrap(),
        c[3].parse().unwrap(),
        c[4].to_string(),
    )
}

#[tokio::test]
#[ignore = "needs redis-server and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn a_task_of_a_killed_worker_is_reclaimed_and_every_call_is_paid_for() {
    let redis = RedisServer::start_for("killed_worker_reclaimed");
    let stack = SearchStack::start_for("killed_worker_reclaimed").await;
    let docs = stack.docs.base_url();
    let page = |name: &str| format!("{docs}/python3.11-doc/html/library/{name}.html");
    let (json_url, pickle_url) = (page("json"), page("pickle"));
    let tasks = ["JSON decoding in Python", "Python pickle serialization"];
    let json_report = format!(
        "## Summary\nJSON-FINDINGS-MARKER: the json module decodes JSON text ([json]({json_url}))."
    );
    let pickle_report =
        format!("## Summary\nPickle serializes Python object structures ([pickle]({pickle_url})).");
    // Researcher 0: search, handshake, read json, then its report call (turn 3) is held until
    // the test has killed the worker running it. The reclaiming worker's attempt gets the next
    // four steps.
    let attempt = |report: Step| {
        vec![
            Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(1000, 10),
            Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1200, 10),
            Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1400, 12),
            report,
        ]
    };
    let mut a_steps = attempt(Step::text("never delivered"));
    a_steps.extend(attempt(Step::text(&json_report).with_usage(3000, 120)));
    // Researcher 1 searches for both pages, then waits until researcher 0 is done: its next call
    // must carry 0's report (steering), and json must be refused to it (the run's URL pool).
    let b_steps = vec![
        Step::tool_call(
            "search",
            json!({"queries": ["pickle serialization", "json decoder"]}),
        )
        .with_usage(1100, 11),
        Step::await_route(
            "a",
            3000,
            Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1250, 10),
        ),
        Step::tool_call("scrape", json!({"urls": [json_url, pickle_url]})).with_usage(1450, 12),
        Step::text(&pickle_report).with_usage(3100, 110),
    ];
    let study_text = format!(
        "<research_result>\n# Python serialization modules\n\n## Key Takeaways\n1. JSON is a lightweight data interchange format inspired by JavaScript object literal syntax ([json]({json_url})).\n2. The pickle module implements binary protocols for serializing and de-serializing a Python object structure ([pickle]({pickle_url})).\n</research_result>"
    );
    let script = Script::default()
        .with_route(planner(&tasks))
        .with_route(
            Route::new("a", format!("Research task: {}\n", tasks[0]), a_steps)
                .with_fallback(Step::text(&json_report).with_usage(900, 100)),
        )
        .with_route(
            Route::new("b", format!("Research task: {}\n", tasks[1]), b_steps)
                .with_fallback(Step::text(&pickle_report).with_usage(900, 100)),
        )
        .with_route(Route::new(
            "evaluator",
            "You are the lead evaluator",
            vec![Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10)],
        ))
        .with_route(summarizer())
        .with_route(study(&study_text));
    let model = ScriptedModel::start(script).await.unwrap();
    model.hold_once("a", 3);
    let dir = tempfile::tempdir().unwrap();
    let profile =
        write_scripted_profile(dir.path(), &model.base_url(), stack.searx.base_url()).unwrap();
    let worker_args = |concurrency: &'static str| {
        [
            "--concurrency",
            concurrency,
            "--visibility-timeout",
            "3s",
            "--drain-timeout",
            "5s",
        ]
    };
    let mut w1 =
        WorkerProcess::start(dir.path(), &redis.url(), "w1", &worker_args("1"), &[KEY]).unwrap();
    assert!(w1.wait_ready(Duration::from_secs(30)).await, "{}", w1.log());
    let run = leader(
        dir.path(),
        &profile,
        &redis.url(),
        "deep",
        &["--max-concurrent-researchers", "2"],
    );

    // Mid-task, deterministically: w1's researcher 0 is inside its held report call.
    eventually("the held call", Duration::from_secs(120), || async {
        model.held("a", 3)
    })
    .await;
    let mut redis_conn = redis_conn(&redis.url()).await;
    let held_by: Vec<(String, String)> = pending(&mut redis_conn).await;
    assert_eq!(held_by.len(), 1, "{held_by:?}");
    assert_eq!(held_by[0].1, "w1");
    assert_eq!(task_of(&mut redis_conn, &held_by[0].0).await, "0");
    let a_before_kill = model.route_requests("a").len();
    assert_eq!(a_before_kill, 4, "search, handshake, read, report (held)");

    let w2 =
        WorkerProcess::start(dir.path(), &redis.url(), "w2", &worker_args("2"), &[KEY]).unwrap();
    assert!(w2.wait_ready(Duration::from_secs(30)).await, "{}", w2.log());
    // w2 takes researcher 1 from the stream while w1 still heartbeats researcher 0.
    eventually("w2 taking task 1", Duration::from_secs(30), || {
        let mut c = redis_conn.clone();
        async move { pending(&mut c).await.iter().any(|(_, owner)| owner == "w2") }
    })
    .await;
    w1.kill();

    let out = tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the run finished")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let diagnostics = || format!("{stderr}\n--- w1\n{}\n--- w2\n{}", w1.log(), w2.log());
    assert!(out.status.success(), "{}", diagnostics());
    if std::env::var_os("QUARRY_SHOW_REPORT").is_some() {
        eprintln!("{}", diagnostics());
    }

    // The report exists once: one file, one report per researcher, both tasks done.
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        report.starts_with("# Python serialization modules"),
        "{report}"
    );
    let f: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("state/findings.json")).unwrap(),
    )
    .unwrap();
    let states: Vec<&str> = f["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["Done", "Done"], "{}", diagnostics());
    let reports: Vec<u64> = f["researcherReports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["taskId"].as_u64().unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(reports.contains(&0) && reports.contains(&1), "{reports:?}");

    // The request log: researcher 0 ran twice (the killed attempt's four calls, the reclaimed
    // attempt's four), researcher 1 once; one plan, one evaluation.
    assert_eq!(model.route_requests("a").len(), 8, "{}", diagnostics());
    assert_eq!(model.route_requests("b").len(), 4);
    assert_eq!(model.route_requests("planner").len(), 1);
    assert_eq!(model.route_requests("evaluator").len(), 1);
    // The reclaimed attempt started over from the task, with nothing of the dead one.
    let a = model.route_requests("a");
    assert_eq!(contents(&a[4])[..2], contents(&a[0])[..2]);

    // Recorded cost = every answered call, the killed attempt's three included; the held call
    // was never answered, so it cost nothing.
    let recorded = model.recorded();
    let answered: Vec<_> = recorded
        .iter()
        .filter(|r| r.answered)
        .filter_map(|r| r.reply_usage)
        .collect();
    let input: u64 = answered.iter().map(|u| u.prompt_tokens).sum();
    let output: u64 = answered.iter().map(|u| u.completion_tokens).sum();
    let pico = input * 1_250_000 + output * 10_000_000;
    let killed: u64 = recorded
        .iter()
        .filter(|r| r.route.as_deref() == Some("a"))
        .take(3)
        .map(|r| r.reply_usage.unwrap().prompt_tokens)
        .sum();
    assert_eq!(killed, 3600);
    let (in_tokens, out_tokens, calls, cost) = usage_line(&stderr);
    assert_eq!(
        (in_tokens, out_tokens, calls as usize),
        (input, output, answered.len()),
        "{}",
        diagnostics()
    );
    assert_eq!(cost, quarry_engine::llm::format_pico_usd(pico));
    assert_eq!(
        recorded.len(),
        answered.len() + 1,
        "only the held call went unanswered"
    );
    // The per-model ledger holds the remote usage too.
    assert_eq!(
        f["usage"]["inputTokens"], f["usage"]["byModel"]["scripted"]["inputTokens"],
        "{:#}",
        f["usage"]
    );
    // The provenance log has the killed attempt's calls: 3 + 4 answered calls of task 0.
    let log = std::fs::read_to_string(dir.path().join("state/events.jsonl")).unwrap();
    let by_task = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["kind"] == "modelCall")
        .fold(BTreeMap::<i64, usize>::new(), |mut m, v| {
            *m.entry(v["task"].as_i64().unwrap_or(-1)).or_default() += 1;
            m
        });
    assert_eq!(by_task.get(&0), Some(&7), "{by_task:?}");
    assert_eq!(by_task.get(&1), Some(&4), "{by_task:?}");
    // As a cost journal, its newest run total is the whole run's cost, remote calls included.
    let journal_total = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|v| v["runTotal"]["costPicoUSD"].as_u64())
        .max();
    assert_eq!(journal_total, Some(pico), "{log}");

    // The run's URL pool in Redis: researcher 1 (on w2) was refused json, which researcher 0
    // claimed; the reclaimed attempt of 0 was let read it again, as its dead predecessor's read
    // never reached the run.
    let b = model.route_requests("b");
    let after_scrape = contents(&b[3]).join("\n");
    assert!(
        after_scrape.contains(&format!("{json_url} (already read by a researcher)")),
        "{after_scrape}"
    );
    let reclaimed_read = contents(&a[7]).join("\n");
    assert!(
        reclaimed_read.contains("JSON (JavaScript Object Notation)")
            && !reclaimed_read.contains("already read by a researcher"),
        "{reclaimed_read}"
    );
    let access = stack.docs.access_log();
    let reads = |name: &str| {
        access
            .iter()
            .filter(|l| *l == &format!("GET /python3.11-doc/html/library/{name}.html"))
            .count()
    };
    // Each page left the docs server once: the second read of json came from the page cache
    // the workers share in Redis.
    assert_eq!((reads("json"), reads("pickle")), (1, 1), "{access:?}");

    // Steering across processes: researcher 1 got researcher 0's report before its next turn.
    let steered = b[2..].iter().any(|r| {
        contents(r).iter().any(|c| {
            c.starts_with("Steering update: researcher 0 of this run just finished")
                && c.contains("JSON-FINDINGS-MARKER")
        })
    });
    assert!(steered, "{:#?}", contents(&b[2]));
    assert!(!contents(&b[0]).join("\n").contains("JSON-FINDINGS-MARKER"));

    // w2 reclaimed one task and acknowledged both; nothing is left in the stream.
    let (status, body) = w2.get("metrics").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        metric(&body, "quarry_worker_tasks_reclaimed_total"),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        metric(&body, "quarry_worker_tasks_taken_total"),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        metric(
            &body,
            r#"quarry_worker_tasks_acked_total{outcome="finished"}"#
        ),
        Some(2.0),
        "{body}"
    );
    assert!(pending(&mut redis_conn).await.is_empty());
    let len: u64 = redis::cmd("XLEN")
        .arg("quarry:tasks")
        .query_async(&mut redis_conn)
        .await
        .unwrap();
    assert_eq!(len, 0);
    // The leader cleaned up its run's keys, leaving the marker that it ended.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("quarry:run:*")
        .query_async(&mut redis_conn)
        .await
        .unwrap();
    assert!(
        keys.iter()
            .all(|k| k.ends_with(":done") || k.ends_with(":cancelled")),
        "{keys:?}"
    );

    // SIGTERM: an idle worker stops at once, cleanly.
    let mut w2 = w2;
    let status = w2.terminate(Duration::from_secs(15));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        w2.log()
    );
    assert!(w2.log().contains("worker stopped"), "{}", w2.log());
}

#[tokio::test]
#[ignore = "needs redis-server (scripts/install-test-deps.sh)"]
async fn a_worker_without_the_api_key_fails_the_task_with_what_to_set() {
    let redis = RedisServer::start_for("worker_without_key");
    let model = ScriptedModel::start(Script::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    // No search is made: the task fails before the researcher starts.
    let profile =
        write_scripted_profile(dir.path(), &model.base_url(), "http://127.0.0.1:9").unwrap();
    let worker = WorkerProcess::start(
        dir.path(),
        &redis.url(),
        "keyless",
        &["--visibility-timeout", "3s"],
        &[],
    )
    .unwrap();
    assert!(
        worker.wait_ready(Duration::from_secs(30)).await,
        "{}",
        worker.log()
    );
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        leader(dir.path(), &profile, &redis.url(), "quick", &[]),
    )
    .await
    .expect("the run ended")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("quarry: the run failed (SecretUnavailable): worker keyless has no API key for this standalone run: environment variable QUARRY_TEST_KEY (profile models.primary.apiKeyEnv) is not set on the worker; set it as for `quarry run`"),
        "{stderr}\n{}",
        worker.log()
    );
    assert_eq!(model.request_count(), 0, "no model call was made");
    let (_, body) = worker.get("metrics").await.unwrap();
    assert_eq!(
        metric(
            &body,
            r#"quarry_worker_tasks_acked_total{outcome="failed"}"#
        ),
        Some(1.0),
        "{body}"
    );
}

#[tokio::test]
#[ignore = "needs redis-server and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn shutdown_hands_a_running_task_back_and_an_ended_run_stops_its_remote_task() {
    let redis = RedisServer::start_for("shutdown_and_cancel");
    let stack = SearchStack::start_for("shutdown_and_cancel").await;
    let json_url = format!(
        "{}/python3.11-doc/html/library/json.html",
        stack.docs.base_url()
    );
    let handed_back = "How do I decode JSON in Python?";
    let timed_out = "What does the marshal module do?";
    let report =
        format!("## Summary\nPython decodes JSON with the json module ([json]({json_url})).");
    let script = Script::default()
        .with_route(Route::new(
            "handed-back",
            format!("Research task: {handed_back}\n"),
            vec![
                Step::text("never delivered"),
                Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
                Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1000, 10),
                Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
                Step::text(&report).with_usage(2000, 80),
            ],
        ))
        .with_route(Route::new(
            "timed-out",
            format!("Research task: {timed_out}\n"),
            vec![Step::text("never delivered")],
        ));
    let model = ScriptedModel::start(script).await.unwrap();
    model.hold_once("handed-back", 0);
    model.hold_once("timed-out", 0);
    let dir = tempfile::tempdir().unwrap();
    let profile =
        write_scripted_profile(dir.path(), &model.base_url(), stack.searx.base_url()).unwrap();
    // A long visibility timeout: anything faster than a minute is a hand-back, not a reclaim.
    let args = [
        "--concurrency",
        "1",
        "--visibility-timeout",
        "60s",
        "--drain-timeout",
        "1s",
    ];
    let mut w1 = WorkerProcess::start(dir.path(), &redis.url(), "w1", &args, &[KEY]).unwrap();
    assert!(w1.wait_ready(Duration::from_secs(30)).await, "{}", w1.log());
    let first = dir.path().join("first");
    std::fs::create_dir_all(&first).unwrap();
    let run = leader_asking(handed_back, &first, &profile, &redis.url(), "quick", &[]);
    eventually("the held call", Duration::from_secs(120), || async {
        model.held("handed-back", 0)
    })
    .await;
    let w2 = WorkerProcess::start(dir.path(), &redis.url(), "w2", &args, &[KEY]).unwrap();
    assert!(w2.wait_ready(Duration::from_secs(30)).await, "{}", w2.log());
    let started = std::time::Instant::now();
    // SIGTERM mid-task: w1 stops taking tasks, waits its 1 s drain, hands the task back, exits 0.
    let status = w1.terminate(Duration::from_secs(20));
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}\n{}",
        w1.log()
    );
    assert!(
        w1.log().contains("task handed back to the queue"),
        "{}",
        w1.log()
    );
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the run finished")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "{stderr}\n--- w1\n{}\n--- w2\n{}",
        w1.log(),
        w2.log()
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "handed back, not reclaimed"
    );
    assert_eq!(model.route_requests("handed-back").len(), 5);
    let (_, body) = w2.get("metrics").await.unwrap();
    assert_eq!(
        metric(&body, "quarry_worker_tasks_reclaimed_total"),
        Some(0.0),
        "{body}"
    );
    assert_eq!(
        metric(
            &body,
            r#"quarry_worker_tasks_acked_total{outcome="finished"}"#
        ),
        Some(1.0),
        "{body}"
    );

    // A run that ends (here at its time limit) while its researcher runs on a worker: the
    // worker stops that researcher and drops the task.
    let second = dir.path().join("second");
    std::fs::create_dir_all(&second).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        leader_asking(
            timed_out,
            &second,
            &profile,
            &redis.url(),
            "quick",
            &["--timeout", "3s"],
        ),
    )
    .await
    .expect("the run ended")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("TimeLimit"), "{stderr}");
    eventually(
        "the remote task dropped",
        Duration::from_secs(10),
        || async {
            let Some((_, body)) = w2.get("metrics").await else {
                return false;
            };
            metric(
                &body,
                r#"quarry_worker_tasks_acked_total{outcome="cancelled"}"#,
            ) == Some(1.0)
        },
    )
    .await;
    let mut conn = redis_conn(&redis.url()).await;
    assert!(pending(&mut conn).await.is_empty());
}

/// The operator's side of an operator run in scale-out mode, in this process: the keys the
/// operator resolved from the run's Secrets, handed to the queue by the operator's own dispatch
/// (sealed with `sealing`). The profile names its model key by Secret, as in a cluster.
async fn operator_dispatch(
    redis_url: &str,
    model_url: &str,
    run: &str,
    sealing: &std::path::Path,
) -> quarry_operator::queue::dispatch::RedisDispatch {
    use quarry_operator::queue::dispatch::{RedisDispatch, TaskKeys};
    let yaml = quarry_e2e::profiles::scripted_profile(model_url, "http://127.0.0.1:9").replace(
        "apiKeyEnv: QUARRY_TEST_KEY",
        "apiKeySecretRef: {name: model-keys, key: openai}",
    );
    let profile: quarry_api::ResearchProfile = serde_yaml::from_str(&yaml).unwrap();
    let header = quarry_operator::queue::protocol::RunHeader {
        run: run.to_string(),
        namespace: Some("team-a".into()),
        profile_name: "scripted".into(),
        profile: profile.spec,
        managed_search: None,
        specialised: Some((false, false)),
    };
    let spend = std::sync::Arc::new(quarry_engine::llm::router::SpendGuard::default());
    let sealing = quarry_operator::queue::seal::SealingKey::load(sealing).unwrap();
    RedisDispatch::connect(redis_url, header, spend)
        .await
        .unwrap()
        .with_keys(TaskKeys {
            sealing: std::sync::Arc::new(sealing),
            keys: vec![(
                quarry_api::SecretKeyRef {
                    name: "model-keys".into(),
                    key: "openai".into(),
                },
                quarry_operator::engine_builder::ApiKey::new(KEY.1),
            )],
        })
}

/// Starts one researcher task through `dispatch`; resolves to its terminal event.
fn dispatch_task(
    dispatch: &quarry_operator::queue::dispatch::RedisDispatch,
    query: &str,
) -> quarry_engine::research::shell::dispatch::ResearcherWork {
    use quarry_engine::research::machine::state::{Mode, RunInput};
    use quarry_engine::research::shell::dispatch::{ResearcherDispatch, ResearcherJob};
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let (_, steering) = tokio::sync::mpsc::unbounded_channel();
    dispatch.start(
        ResearcherJob {
            task_id: 0,
            round: 1,
            query: query.to_string(),
            input: RunInput::new(
                "How do Python's serialization modules compare?",
                Mode::Quick,
            ),
            injected: vec![],
            spent: Default::default(),
        },
        steering,
        events,
    )
}

/// A sealing key file of 48 random bytes (base64), as the chart's Secret holds.
fn sealing_key_file(dir: &Path, name: &str) -> std::path::PathBuf {
    use rand::Rng;
    let bytes: [u8; 36] = rand::rng().random();
    let path = dir.join(name);
    std::fs::write(&path, format!("{}\n", hex::encode(bytes))).unwrap();
    path
}

#[tokio::test]
#[ignore = "needs redis-server (scripts/install-test-deps.sh)"]
async fn a_worker_without_any_kubeconfig_runs_an_operator_task_with_the_keys_the_operator_sealed() {
    use quarry_engine::research::machine::reducer::Event;
    let redis = RedisServer::start_for("worker_sealed_keys");
    let report = "## Summary\nSEALED-KEYS-MARKER: the json module decodes JSON text.";
    let model = ScriptedModel::start(
        Script::default().with_route(
            Route::new("r", "Research task: JSON decoding in Python\n", vec![])
                .with_fallback(Step::text(report).with_usage(900, 100)),
        ),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = sealing_key_file(dir.path(), "sealing-key");
    let dispatch =
        operator_dispatch(&redis.url(), &model.base_url(), "sealed-run-1", &key_file).await;
    let work = dispatch_task(&dispatch, "JSON decoding in Python");

    // Queued before any worker runs: what Redis holds has the key sealed, never in plaintext.
    let mut conn = redis_conn(&redis.url()).await;
    let queued: redis::streams::StreamRangeReply = {
        let mut reply = redis::streams::StreamRangeReply::default();
        for _ in 0..100 {
            reply = redis::cmd("XRANGE")
                .arg("quarry:tasks")
                .arg("-")
                .arg("+")
                .query_async(&mut conn)
                .await
                .unwrap();
            if !reply.ids.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        reply
    };
    assert_eq!(queued.ids.len(), 1);
    let entry = &queued.ids[0];
    let sealed: String = entry.get("k").expect("the entry carries sealed keys");
    let message: String = entry.get("m").unwrap();
    for text in [&sealed, &message] {
        assert!(!text.contains(KEY.1), "plaintext key in Redis: {text}");
    }
    assert!(message.contains("\"apiKeySecretRef\""), "{message}");

    // The worker has no kubeconfig, no in-cluster variables and no key in its environment: only
    // the sealing key file.
    let key_env = key_file.display().to_string();
    let worker = WorkerProcess::start_without_cluster(
        dir.path(),
        &redis.url(),
        "tokenless",
        &["--visibility-timeout", "3s"],
        &[("QUARRY_SEALING_KEY_FILE", key_env.as_str())],
    )
    .unwrap();
    assert!(
        worker.wait_ready(Duration::from_secs(30)).await,
        "{}",
        worker.log()
    );
    let event = tokio::time::timeout(Duration::from_secs(90), work)
        .await
        .unwrap_or_else(|_| panic!("no result; worker log:\n{}", worker.log()));
    match event {
        Event::ResearcherFinished { report } => {
            assert!(
                report.markdown.contains("SEALED-KEYS-MARKER"),
                "{}",
                report.markdown
            );
        }
        other => panic!("{other:?}\n{}", worker.log()),
    }
    // Every model call carried the key the operator handed over.
    let recorded = model.recorded();
    assert!(!recorded.is_empty());
    for request in &recorded {
        assert_eq!(
            request.authorization.as_deref(),
            Some(format!("Bearer {}", KEY.1).as_str())
        );
    }
    assert!(!worker.log().contains(KEY.1), "the key is never logged");
    dispatch.finish().await;
}

#[tokio::test]
#[ignore = "needs redis-server (scripts/install-test-deps.sh)"]
async fn a_worker_with_another_sealing_key_fails_the_task_saying_what_to_set() {
    use quarry_engine::research::machine::reducer::Event;
    let redis = RedisServer::start_for("worker_wrong_sealing_key");
    let model = ScriptedModel::start(Script::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let operator_key = sealing_key_file(dir.path(), "operator-key");
    let worker_key = sealing_key_file(dir.path(), "worker-key");
    let worker_env = worker_key.display().to_string();
    let worker = WorkerProcess::start_without_cluster(
        dir.path(),
        &redis.url(),
        "wrongkey",
        &["--visibility-timeout", "3s"],
        &[("QUARRY_SEALING_KEY_FILE", worker_env.as_str())],
    )
    .unwrap();
    assert!(
        worker.wait_ready(Duration::from_secs(30)).await,
        "{}",
        worker.log()
    );
    let dispatch = operator_dispatch(
        &redis.url(),
        &model.base_url(),
        "sealed-run-2",
        &operator_key,
    )
    .await;
    let event = tokio::time::timeout(
        Duration::from_secs(60),
        dispatch_task(&dispatch, "JSON decoding in Python"),
    )
    .await
    .expect("a result");
    let failure = match event {
        Event::ResearcherFailed { failure, .. } => failure,
        other => panic!("{other:?}"),
    };
    assert_eq!(failure.reason, "SecretUnavailable");
    let operator_id = quarry_operator::queue::seal::SealingKey::load(&operator_key).unwrap();
    let worker_id = quarry_operator::queue::seal::SealingKey::load(&worker_key).unwrap();
    assert_eq!(
        failure.message,
        format!(
            "worker wrongkey cannot open the API keys the operator sealed for this task of namespace \"team-a\": they were sealed with sealing key {}, but this worker's key (QUARRY_SEALING_KEY_FILE={worker_env}) is {}; set QUARRY_SEALING_KEY_FILE to a file holding the operator's sealing key (with the chart, the operator and workers mount the same Secret, workers.sealingKey.existingSecret if set)",
            operator_id.id(),
            worker_id.id()
        )
    );
    assert_eq!(model.request_count(), 0, "no model call was made");
    let (_, body) = worker.get("metrics").await.unwrap();
    assert_eq!(
        metric(
            &body,
            r#"quarry_worker_tasks_acked_total{outcome="failed"}"#
        ),
        Some(1.0),
        "{body}"
    );
    dispatch.finish().await;
}

/// A researcher gives back a page it found nothing on for its task, so a sibling whose task it
/// bears on may read it; the pool never lets one task free another's claim.
#[tokio::test]
#[ignore = "needs redis-server (scripts/install-test-deps.sh)"]
async fn a_url_given_back_by_its_task_may_be_claimed_by_another_and_only_its_task_gives_it_back() {
    use quarry_engine::research::agents::researcher::SharedUrls;
    use quarry_operator::queue::pool::RedisUrls;
    let redis = RedisServer::start_for("url_release");
    let manager = || async {
        redis::aio::ConnectionManager::new(redis::Client::open(redis.url()).unwrap())
            .await
            .unwrap()
    };
    let key = "quarry:run:release-test:urls".to_string();
    let jsonb = RedisUrls::new(manager().await, key.clone(), 1);
    let loads = RedisUrls::new(manager().await, key.clone(), 0);
    let url = "http://docs/python3.11-doc/html/library/json.html";
    assert!(jsonb.claim(url).await.unwrap());
    assert!(!loads.claim(url).await.unwrap());
    // Another task's release frees nothing.
    loads.release(url).await.unwrap();
    assert!(!loads.claim(url).await.unwrap());
    // The claiming task's does.
    jsonb.release(url).await.unwrap();
    assert!(!jsonb.taken().await.unwrap().contains(url));
    assert!(loads.claim(url).await.unwrap());
    assert!(!jsonb.claim(url).await.unwrap());
}
