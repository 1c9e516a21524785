//! `quarry logs` as a real process: following a running deep run's events from a server this test
//! starts (printing them as they come, exiting when the run ends); a finished run's history; a
//! finished run read from its `<run>-events` ConfigMap and a running one followed through the
//! API server's service proxy, both through a stand-in API server.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use quarry_e2e::event_stream::{EventServer, SseConnection, start_streamed_run, wait_for_run};
use quarry_e2e::fake_apiserver::FakeApiServer;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::slow_web::SlowWeb;
use quarry_engine::events::memory::MemoryEvents;
use quarry_engine::events::{EventId, RUN_FINISHED, RunRef};
use quarry_engine::research::machine::state::{Mode, Phase};
use quarry_engine::store::keys::EVENTS_KEY;
use quarry_operator::server::run_events::StreamSettings;

const MODEL_MS: u64 = 150;
const WAIT: Duration = Duration::from_secs(60);

/// A `quarry` process whose stdout lines are collected with the instant each arrived.
struct Cli {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<(Instant, String)>,
    stderr: std::thread::JoinHandle<String>,
}

/// Builds the binary before anything is timed (a build on 2 cores takes a while).
fn build_cli() {
    quarry_bin().unwrap();
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Cli {
    let mut command = quarry_e2e::quarry_bin::exempt_loopback(Command::new(quarry_bin().unwrap()));
    command
        .args(args)
        .env_remove("QUARRY_SERVER")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send((Instant::now(), line));
        }
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
        text
    });
    Cli {
        child,
        lines,
        stderr,
    }
}

impl Cli {
    /// Waits (bounded) for the process to exit; its exit success, stdout lines and stderr.
    async fn finish(mut self) -> (bool, Vec<(Instant, String)>, String) {
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("quarry logs did not exit within {WAIT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let stderr = self.stderr.join().unwrap();
        let lines: Vec<(Instant, String)> = self.lines.iter().collect();
        (status.success(), lines, stderr)
    }
}

fn ids(lines: &[Value]) -> Vec<EventId> {
    lines
        .iter()
        .filter_map(|l| l["id"].as_str())
        .map(|id| id.parse().unwrap())
        .collect()
}

/// The whole stream of a run as the server has it, read from the start without following.
async fn full_stream(server: &EventServer, namespace: &str, name: &str) -> Vec<Value> {
    let url = format!("{}?follow=false", server.events_url(namespace, name));
    let mut conn = SseConnection::open(&url, None).await.unwrap();
    let mut out = Vec::new();
    while let Some(m) = conn.next(Duration::from_secs(10)).await {
        let mut v: Value = serde_json::from_str(&m.data).unwrap();
        if let Some(id) = m.id {
            v["id"] = json!(id);
        }
        out.push(v);
    }
    out
}

/// Starts a deep run `team/<name>` publishing to `events`, runs `quarry <args>` (which must
/// print `--output json`) until it exits, and checks it printed exactly the run's stream, ending
/// with the final event. Returns the printed events with when each arrived, and when the run
/// ended.
async fn follow_live_run(
    web: &SlowWeb,
    events: &Arc<MemoryEvents>,
    server: &EventServer,
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Vec<(Instant, Value)>, Instant) {
    let streamed = start_streamed_run(
        web,
        Mode::Deep,
        MODEL_MS,
        events.clone(),
        RunRef::new("team", name, format!("uid-{name}")),
    )
    .await
    .unwrap();
    assert!(wait_for_run(events.as_ref(), "team", name, WAIT).await);
    let (ok, lines, stderr) = spawn(args, env).finish().await;
    assert!(ok, "quarry {args:?} failed: {stderr}");
    let (state, run_ended) = streamed.task.await.unwrap();
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    let printed: Vec<(Instant, Value)> = lines
        .into_iter()
        .map(|(at, l)| (at, serde_json::from_str(&l).unwrap()))
        .collect();
    let values: Vec<Value> = printed.iter().map(|(_, v)| v.clone()).collect();
    // Exactly the stream, every event once, in order, ending with the outcome.
    let full = full_stream(server, "team", name).await;
    assert_eq!(ids(&values), ids(&full));
    assert_eq!(values.len(), full.len());
    let last = values.last().unwrap();
    assert_eq!(last["type"], RUN_FINISHED);
    assert_eq!(last["phase"], "Completed");
    (printed, run_ended)
}

#[tokio::test]
async fn logs_follow_prints_events_as_they_come_and_exits_when_the_run_ends() {
    build_cli();
    let web = SlowWeb::start(Duration::from_millis(30), Duration::from_millis(10))
        .await
        .unwrap();
    let events = Arc::new(MemoryEvents::default());
    let server = EventServer::start(events.clone(), events.clone(), StreamSettings::default())
        .await
        .unwrap();
    let (printed, run_ended) = follow_live_run(
        &web,
        &events,
        &server,
        "deep-run",
        &[
            "logs",
            "-f",
            "deep-run",
            "-n",
            "team",
            "--server",
            server.base_url(),
            "--output",
            "json",
        ],
        &[],
    )
    .await;
    // Printed as they came: the first lines were out long before the run ended.
    assert!(
        printed[0].0 + Duration::from_millis(500) < run_ended,
        "the first event was printed only at the end"
    );
    let full = full_stream(&server, "team", "deep-run").await;

    // The finished run's history, for people, without -f.
    let cli = spawn(
        &[
            "logs",
            "deep-run",
            "-n",
            "team",
            "--server",
            server.base_url(),
        ],
        &[],
    );
    let (ok, lines, stderr) = cli.finish().await;
    assert!(ok, "{stderr}");
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(text.len(), full.len());
    assert!(
        text[0].contains(" phase      None -> Planning"),
        "{}",
        text[0]
    );
    assert!(
        text.iter()
            .any(|l| l.contains(" agenda     3 tasks: #0 json decoding in Python"))
    );
    assert!(
        text.iter()
            .any(|l| l.contains(" evaluator  another round: marshal internal format"))
    );
    let finished = text.last().unwrap();
    assert!(finished.contains(" finished   Completed; "), "{finished}");

    // An unknown run: a helpful error and a failing exit status.
    let cli = spawn(
        &[
            "logs",
            "-f",
            "nope",
            "-n",
            "team",
            "--server",
            server.base_url(),
        ],
        &[],
    );
    let (ok, lines, stderr) = cli.finish().await;
    assert!(!ok);
    assert!(lines.is_empty());
    assert!(
        stderr.contains("ResearchRun \"nope\" not found in namespace \"team\""),
        "{stderr}"
    );
}

fn research_run(name: &str, phase: &str) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1",
        "kind": "ResearchRun",
        "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}")},
        "spec": {"query": "How do Python's serialization modules compare"},
        "status": {
            "phase": phase,
            "progress": "100%",
            "usage": {"inputTokens": 41000, "outputTokens": 1500, "costUSD": "0.066250", "llmCalls": 22, "searches": 4, "pagesFetched": 12},
        },
    })
}

/// Runs a quick scripted run to the end and puts it in `api` as a Completed ResearchRun `name`
/// with its provenance log in the `<name>-events` ConfigMap; returns the log.
async fn finished_run_in_api(web: &SlowWeb, api: &FakeApiServer, name: &str) -> String {
    let done = start_streamed_run(
        web,
        Mode::Quick,
        20,
        Arc::new(MemoryEvents::default()),
        RunRef::new("team", name, format!("uid-{name}")),
    )
    .await
    .unwrap();
    let (state, _) = done.task.await.unwrap();
    assert_eq!(state.phase, Phase::Completed, "{:?}", state.failure);
    let log = done.store.text(EVENTS_KEY).unwrap();
    api.insert(research_run(name, "Completed"));
    api.insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": format!("{name}-events"), "namespace": "team",
            // The run's own: the operator reads only ConfigMaps carrying its label and owner.
            "labels": {"quarry.dev/run": name},
            "ownerReferences": [{"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "name": name,
                "uid": format!("uid-{name}"), "controller": true, "blockOwnerDeletion": true}]
        }, "data": {"events.jsonl": log}}));
    log
}

#[tokio::test]
async fn logs_reads_finished_runs_from_their_configmap_and_follows_running_ones_through_the_service_proxy()
 {
    build_cli();
    let web = SlowWeb::start(Duration::from_millis(30), Duration::from_millis(10))
        .await
        .unwrap();
    let events = Arc::new(MemoryEvents::default());
    // The server ends every connection after 400 ms: the follower has to resume again and again.
    let short_lived = StreamSettings {
        follow_slice: Duration::from_millis(100),
        max_age: Duration::from_millis(400),
        ..StreamSettings::default()
    };
    let server = EventServer::start(events.clone(), events.clone(), short_lived)
        .await
        .unwrap();
    let api = FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path(), "team").unwrap();
    let kubeconfig = kubeconfig.display().to_string();
    let env = [("KUBECONFIG", kubeconfig.as_str())];

    // A run that finished: its provenance log is in its ConfigMap.
    let log = finished_run_in_api(&web, &api, "done-run").await;
    let log_lines = log.lines().count();
    assert!(log_lines >= 6, "{log}");
    let cli = spawn(&["logs", "-f", "done-run"], &env);
    let (ok, lines, stderr) = cli.finish().await;
    assert!(ok, "{stderr}");
    let text: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(text.len(), log_lines + 1, "{text:#?}");
    let model_lines = log
        .lines()
        .filter(|l| l.contains("\"kind\":\"modelCall\""))
        .count();
    assert_eq!(
        text.iter().filter(|l| l.contains(" model      ")).count(),
        model_lines
    );
    let finished = text.last().unwrap();
    assert!(
        finished.ends_with(
            " finished   Completed; 42500 tokens, $0.066250, 22 model calls, 4 searches, 12 pages read"
        ),
        "{finished}"
    );
    assert!(
        api.request_lines()
            .contains(&"GET /api/v1/namespaces/team/configmaps/done-run-events".to_string()),
        "{:?}",
        api.request_lines()
    );

    // A run in progress: followed through the API server's service proxy to the operator.
    api.proxy_service("quarry-system", "quarry", "http", server.base_url());
    api.insert(research_run("live-run", "Researching"));
    follow_live_run(
        &web,
        &events,
        &server,
        "live-run",
        &["logs", "-f", "live-run", "-o", "json"],
        &env,
    )
    .await;
    let proxied: Vec<String> = api
        .request_lines()
        .into_iter()
        .filter(|r| r.contains("/services/quarry:http/proxy/"))
        .collect();
    assert_eq!(
        proxied[0],
        "GET /api/v1/namespaces/quarry-system/services/quarry:http/proxy/api/v1/namespaces/team/researchruns/live-run/events"
    );
    // It resumed after the last id it printed, every time (and printed nothing twice, above).
    let resumed = proxied
        .iter()
        .filter(|r| r.contains("/events?after="))
        .count();
    assert!(resumed >= 2, "{proxied:#?}");
    assert_eq!(resumed, proxied.len() - 1, "{proxied:#?}");

    // No such Service: the error says how to reach the operator instead.
    let cli = spawn(
        &[
            "logs",
            "-f",
            "live-run",
            "--operator-namespace",
            "elsewhere",
        ],
        &env,
    );
    let (ok, _, stderr) = cli.finish().await;
    assert!(!ok);
    assert!(stderr.contains("--server URL"), "{stderr}");
}

#[tokio::test]
async fn the_operator_serves_a_finished_runs_history_from_its_configmap() {
    let web = SlowWeb::start(Duration::from_millis(30), Duration::from_millis(10))
        .await
        .unwrap();
    let api = FakeApiServer::start().await.unwrap();
    // The run's stream is gone (another replica, or expired): only the stored log is left.
    let log = finished_run_in_api(&web, &api, "old-run").await;
    let client = kube::Client::try_from(kube::Config::new(api.url().parse().unwrap())).unwrap();
    let directory = Arc::new(quarry_operator::server::run_finder::KubeDirectory::new(
        client,
    ));
    let server = EventServer::start(
        Arc::new(MemoryEvents::default()),
        directory,
        StreamSettings::default(),
    )
    .await
    .unwrap();
    let url = server.events_url("team", "old-run");
    let mut conn = SseConnection::open(&url, None).await.unwrap();
    let mut got = Vec::new();
    while let Some(m) = conn.next(Duration::from_secs(10)).await {
        got.push(m);
    }
    assert_eq!(got.len(), log.lines().count() + 1);
    let last: Value = serde_json::from_str(&got.last().unwrap().data).unwrap();
    assert_eq!(last["type"], RUN_FINISHED);
    assert_eq!(last["synthesized"], true);
    assert_eq!(last["phase"], "Completed");
    assert_eq!(last["inputTokens"], 41000);
    // Resuming inside the stored log gives the rest of it.
    let third = got[2].id.clone().unwrap();
    let mut conn = SseConnection::open(&url, Some(&third)).await.unwrap();
    let mut rest = Vec::new();
    while let Some(m) = conn.next(Duration::from_secs(10)).await {
        rest.push(m.id);
    }
    let expected: Vec<Option<String>> = got[3..].iter().map(|m| m.id.clone()).collect();
    assert_eq!(rest, expected);
    // An unknown run is a 404 that says where it looked.
    let response = reqwest::get(server.events_url("team", "missing"))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "NotFound");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("namespace \"team\"")
    );
}
