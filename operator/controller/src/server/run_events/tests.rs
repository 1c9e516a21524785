//! Unit tests of `run_events`.

use super::*;
use crate::server::Readiness;
use quarry_engine::events::memory::MemoryEvents;
use quarry_engine::events::{RunEvent, RunRef};

struct Served {
    base: String,
    metrics: Metrics,
    events: Arc<MemoryEvents>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Served {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(settings: StreamSettings) -> Served {
    let events = Arc::new(MemoryEvents::default());
    let metrics = Metrics::new();
    let listener = crate::server::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = ServerState {
        metrics: metrics.clone(),
        readiness: Readiness::new(),
        events: Some(EventsApi::with_settings(
            events.clone(),
            events.clone(),
            metrics.clone(),
            settings,
        )),
    };
    let task = tokio::spawn(async move {
        let _ = crate::server::serve(listener, state, std::future::pending()).await;
    });
    Served {
        base,
        metrics,
        events,
        task,
    }
}

fn run() -> RunRef {
    RunRef::new("ns", "r", "u")
}

fn publish(events: &MemoryEvents, kind: &str) {
    events.publish(
        &run(),
        RunEvent::from_object(&run(), kind, Default::default(), "t"),
    );
}

async fn wait_for_clients(metrics: &Metrics, n: i64) {
    for _ in 0..200 {
        if metrics.event_stream_clients.get() == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "clients gauge stayed at {}, expected {n}",
        metrics.event_stream_clients.get()
    );
}

#[tokio::test]
async fn streams_are_bounded_counted_and_released_on_disconnect() {
    let served = serve(StreamSettings {
        max_streams: 1,
        ..StreamSettings::default()
    })
    .await;
    publish(&served.events, "phase");
    let url = format!("{}{}", served.base, events_path("ns", "r"));
    let first = reqwest::get(&url).await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(
        first.headers()[header::CONTENT_TYPE.as_str()],
        "text/event-stream"
    );
    wait_for_clients(&served.metrics, 1).await;
    let refused = reqwest::get(&url).await.unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()[header::RETRY_AFTER.as_str()], "5");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["error"], "TooManyStreams");
    // The first client goes away: its slot and its count are released, the run is untouched.
    drop(first);
    wait_for_clients(&served.metrics, 0).await;
    let again = reqwest::get(&url).await.unwrap();
    assert_eq!(again.status(), 200);
    publish(&served.events, "search");
    assert!(served.events.exists(&run()).await.unwrap());
}

#[tokio::test]
async fn a_quiet_stream_gets_keep_alive_comments_and_ends_with_the_final_event() {
    let served = serve(StreamSettings {
        keep_alive: Duration::from_millis(100),
        follow_slice: Duration::from_millis(200),
        ..StreamSettings::default()
    })
    .await;
    publish(&served.events, "phase");
    let url = format!("{}{}", served.base, events_path("ns", "r"));
    let mut response = reqwest::get(&url).await.unwrap();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !text.contains(":\n\n") && tokio::time::Instant::now() < deadline {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("event: phase\n"), "{text}");
    assert!(text.contains(":\n\n"), "no keep-alive comment: {text}");
    // The run finishes: the stream sends its final event and ends.
    publish(&served.events, RUN_FINISHED);
    served.events.finish(&run());
    let rest = tokio::time::timeout(Duration::from_secs(5), response.text())
        .await
        .unwrap()
        .unwrap();
    assert!(rest.contains("event: runFinished\n"), "{rest}");
}

#[tokio::test]
async fn unknown_runs_bad_ids_and_disabled_streams_get_json_problems() {
    let served = serve(StreamSettings::default()).await;
    publish(&served.events, "phase");
    let get = |path: String, last_id: Option<&'static str>| {
        let url = format!("{}{path}", served.base);
        async move {
            let mut request = reqwest::Client::new().get(url);
            if let Some(id) = last_id {
                request = request.header("last-event-id", id);
            }
            let r = request.send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<serde_json::Value>().await.unwrap(),
            )
        }
    };
    let (status, body) = get(events_path("ns", "r"), Some("not-an-id")).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], "BadEventId");
    let (status, body) = get(format!("{}?after=x", events_path("ns", "r")), None).await;
    assert_eq!((status, body["error"].as_str()), (400, Some("BadEventId")));
    let (status, body) = get(format!("{}?after=1-0", events_path("ns", "missing")), None).await;
    assert_eq!(status, 404);
    assert_eq!(
        body["message"],
        "ResearchRun \"missing\" not found in namespace \"ns\"; list the runs with `kubectl get researchruns -n ns`"
    );
    let router = crate::server::router(ServerState {
        metrics: Metrics::new(),
        readiness: Readiness::new(),
        events: None,
    });
    use tower::ServiceExt;
    let response = router
        .oneshot(
            axum::http::Request::get(events_path("ns", "r"))
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}
