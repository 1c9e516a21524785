//! Unit tests of `server`.

use super::*;
use axum::body::{Body, to_bytes};
use axum::http::Request;
use tower::ServiceExt;

fn state() -> ServerState {
    ServerState {
        metrics: Metrics::new(),
        readiness: Readiness::new(),
        events: None,
    }
}

async fn call(router: Router, path: &str) -> (StatusCode, Option<String>, String) {
    let response = router
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string());
    let body = to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn metrics_are_openmetrics() {
    let state = state();
    state.metrics.reconciliations.inc_by(3);
    let (status, content_type, body) = call(router(state), "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type.as_deref(), Some(OPENMETRICS_CONTENT_TYPE));
    assert!(body.contains("quarry_reconciliations_total 3\n"), "{body}");
    assert!(body.ends_with("# EOF\n"));
}

#[tokio::test]
async fn readyz_follows_the_flag_and_livez_is_always_ok() {
    let state = state();
    let (status, _, body) = call(router(state.clone()), "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body, "not ready: controller caches have not synced yet");
    assert_eq!(
        call(router(state.clone()), "/livez").await.0,
        StatusCode::OK
    );
    state.readiness.set(true);
    let (status, _, body) = call(router(state.clone()), "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "ready");
    assert_eq!(call(router(state), "/nope").await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn serves_on_a_real_listener_and_shuts_down() {
    let listener = bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, state(), async move {
        let _ = rx.await;
    }));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_string(&mut response),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.ends_with("ok"), "{response}");
    tx.send(()).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
