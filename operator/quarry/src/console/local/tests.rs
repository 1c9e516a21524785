//! The local console's guard: Host allow-list and launch key.

use super::*;
use axum::body::Body;
use axum::http::Request as HttpRequest;
use axum::routing::{get, post};
use tower::ServiceExt;

const KEY: &str = "k3y0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab";

fn app() -> Router {
    let inner = Router::new()
        .route("/console", get(|| async { "the runs" }))
        .route("/console/runs", post(|| async { "created" }));
    LocalGuard::new(8090, &["laptop.lan:8090".to_string()], KEY).protect(inner)
}

async fn send(request: HttpRequest<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
    let response = app().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn request(method: &str, uri: &str, host: &str, cookie: Option<&str>) -> HttpRequest<Body> {
    let mut builder = HttpRequest::builder()
        .method(method)
        .uri(uri)
        .header("host", host);
    if let Some(c) = cookie {
        builder = builder.header("cookie", c);
    }
    builder.body(Body::empty()).unwrap()
}

#[tokio::test]
async fn a_page_of_another_site_rebinding_its_name_to_loopback_is_refused() {
    let with_key = format!("{LAUNCH_COOKIE}={KEY}");
    // DNS rebinding: the browser sends the attacker's name, even with a stolen cookie jar.
    for host in [
        "evil.example:8090",
        "127.0.0.1.nip.io:8090",
        "127.0.0.1:9999",
        "",
    ] {
        let (status, _, body) = send(request("GET", "/console", host, Some(&with_key))).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host}: {body}");
        assert!(body.contains("--allow-host"), "{body}");
        let (status, _, _) = send(request("POST", "/console/runs", host, Some(&with_key))).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{host}");
    }
    // Its own names (any case) and the allowed extra one get through with the key.
    for host in [
        "127.0.0.1:8090",
        "LOCALHOST:8090",
        "[::1]:8090",
        "laptop.lan:8090",
    ] {
        let (status, _, body) = send(request("GET", "/console", host, Some(&with_key))).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::OK, "the runs"),
            "{host}"
        );
    }
}

#[tokio::test]
async fn only_the_printed_address_lets_a_browser_in() {
    // Without the key: refused with what to do.
    let (status, _, body) = send(request("GET", "/console", "127.0.0.1:8090", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("Open the address"), "{body}");
    let (status, _, _) = send(request("POST", "/console/runs", "127.0.0.1:8090", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A wrong key, in the address or the cookie: refused.
    let (status, headers, _) = send(request(
        "GET",
        "/console?launch=0000",
        "127.0.0.1:8090",
        None,
    ))
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(headers.get("set-cookie").is_none());
    let wrong = format!("{LAUNCH_COOKIE}={}", "0".repeat(KEY.len()));
    let (status, _, _) = send(request("GET", "/console", "127.0.0.1:8090", Some(&wrong))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // The printed address: the key becomes an HttpOnly, same-site cookie, and the key leaves
    // the address bar.
    let (status, headers, _) = send(request(
        "GET",
        &format!("/console?launch={KEY}"),
        "127.0.0.1:8090",
        None,
    ))
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers["location"], "/console");
    assert_eq!(
        headers["set-cookie"],
        format!("{LAUNCH_COOKIE}={KEY}; Path=/console; HttpOnly; SameSite=Strict").as_str()
    );
    let jar = format!("other=1; {LAUNCH_COOKIE}={KEY}");
    let (status, _, body) = send(request("GET", "/console", "127.0.0.1:8090", Some(&jar))).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "the runs"));
}

#[test]
fn the_printed_address_carries_a_fresh_key_on_loopback() {
    let a = LocalGuard::random(8090, &[]);
    let b = LocalGuard::random(8090, &[]);
    let url = a.launch_url("0.0.0.0:8090".parse().unwrap());
    assert!(
        url.starts_with("http://127.0.0.1:8090/console?launch="),
        "{url}"
    );
    assert_eq!(
        url.len(),
        "http://127.0.0.1:8090/console?launch=".len() + 64
    );
    assert_ne!(url, b.launch_url("127.0.0.1:8090".parse().unwrap()));
    assert!(format!("{a:?}").contains("127.0.0.1:8090") && !format!("{a:?}").contains(&url[38..]));
}
