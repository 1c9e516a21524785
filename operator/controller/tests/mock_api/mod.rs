//! The scripted API server of the controllers' request tests: each test answers the requests
//! it expects, in order, through a `tower_test` mock under a real `kube::Client`.

use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::Value;

/// The test's end of the mocked API server.
pub type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// Receives the next request, checks method and path+query, returns its JSON body (Null if empty).
pub async fn expect(
    handle: &mut Handle,
    method: Method,
    path_and_query: &str,
) -> (Value, tower_test::mock::SendResponse<Response<Body>>) {
    let (req, send) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .expect("request expected")
        .expect("client gone");
    assert_eq!(req.method(), method, "method of {}", req.uri());
    assert_eq!(req.uri().path_and_query().unwrap().as_str(), path_and_query);
    let bytes = req.into_body().collect_bytes().await.unwrap();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (body, send)
}

/// Fails when the controller sends any request within `within`.
pub async fn expect_no_request_within(handle: &mut Handle, within: Duration) {
    if let Ok(Some((req, _))) = tokio::time::timeout(within, handle.next_request()).await {
        panic!("unexpected request {} {}", req.method(), req.uri());
    }
}
