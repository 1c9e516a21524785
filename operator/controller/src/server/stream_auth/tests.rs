//! Unit tests of `stream_auth`.

use super::*;

#[test]
fn the_token_comes_from_authorization_or_the_proxy_header() {
    let mut headers = HeaderMap::new();
    assert_eq!(token_of(&headers), None);
    headers.insert(TOKEN_HEADER, "from-proxy".parse().unwrap());
    assert_eq!(token_of(&headers).as_deref(), Some("from-proxy"));
    headers.insert(header::AUTHORIZATION, "Bearer direct".parse().unwrap());
    assert_eq!(token_of(&headers).as_deref(), Some("direct"));
    headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
    assert_eq!(token_of(&headers).as_deref(), Some("from-proxy"));
}

#[tokio::test]
async fn one_caller_holds_at_most_its_share_and_a_closed_stream_frees_a_slot() {
    let (service, _handle) = tower_test::mock::pair::<
        axum::http::Request<kube::client::Body>,
        axum::http::Response<kube::client::Body>,
    >();
    let auth = StreamAuth::new(kube::Client::new(service, "default"), 2);
    let first = auth.slot("alice").unwrap();
    let _second = auth.slot("alice").unwrap();
    assert_eq!(
            auth.slot("alice").unwrap_err(),
            Refusal::TooMany(
                "alice has 2 event streams open, the most one caller may hold; close one or retry shortly".into()
            )
        );
    let _bob = auth.slot("bob").expect("another caller is not locked out");
    drop(first);
    assert!(auth.slot("alice").is_ok(), "a closed stream frees its slot");
}
