//! Behaviour of `HttpFetcher` against servers the tests start on 127.0.0.1.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use quarry_engine::scrape::extract::strip_markdown;
use quarry_engine::scrape::{FetchError, FetchPolicy, Fetcher, HttpFetcher};

const ARTICLE: &str = "<!doctype html><html><head><title>Quarry test article</title></head><body>\
<nav><a href='/'>Home</a> <a href='/shop'>Shop now</a> <a href='/login'>Log in</a></nav>\
<article><h1>Quarry test article</h1>\
<p>Operators reconcile custom resources by comparing the desired state with the observed state of the cluster.</p>\
<p>Every reconcile loop should be idempotent, so that running it twice has the same effect as running it once.</p>\
<p>Status is written through the status subresource so that spec and status have separate permissions.</p>\
</article><footer>Copyright 2026 Example Corp. All rights reserved.</footer></body></html>";

/// Serves `router` on 127.0.0.1 with an OS-chosen port.
async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    addr
}

/// These tests are about the transfer itself: robots.txt and politeness are off here and
/// covered by `fetch_policy.rs`.
fn policy(allowed: &[&str]) -> FetchPolicy {
    FetchPolicy {
        allowed_hosts: allowed.iter().map(|s| s.to_string()).collect(),
        timeout: Duration::from_secs(10),
        respect_robots: false,
        politeness_delay: Duration::ZERO,
        ..FetchPolicy::default()
    }
}

fn fetcher(p: FetchPolicy) -> HttpFetcher {
    HttpFetcher::new(p).unwrap()
}

fn html(body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

fn redirect(to: String) -> Response {
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

#[tokio::test]
async fn fetches_and_extracts_an_allowed_page() {
    let addr = serve(Router::new().route("/article", get(|| async { html(ARTICLE) }))).await;
    let url = format!("http://{addr}/article");
    let page = fetcher(policy(&["127.0.0.1"])).fetch(&url).await.unwrap();
    assert_eq!(page.url, url);
    assert_eq!(page.final_url, url);
    assert_eq!(page.title, "Quarry test article");
    assert_eq!(page.bytes, ARTICLE.len() as u64);
    assert!(
        page.markdown
            .contains("Every reconcile loop should be idempotent, so that running it twice"),
        "{}",
        page.markdown
    );
    assert!(!page.markdown.contains("Shop now"), "{}", page.markdown);
    assert!(
        !page.markdown.contains("All rights reserved"),
        "{}",
        page.markdown
    );
}

#[tokio::test]
async fn loopback_is_refused_without_the_allow_list() {
    let addr = serve(Router::new().route("/article", get(|| async { html(ARTICLE) }))).await;
    let err = fetcher(policy(&[]))
        .fetch(&format!("http://{addr}/article"))
        .await
        .unwrap_err();
    match err {
        FetchError::Refused { reason, .. } => assert!(
            reason.contains("127.0.0.1 is a loopback address"),
            "{reason}"
        ),
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[tokio::test]
async fn redirect_to_a_loopback_name_is_refused_unless_allow_listed() {
    let target = serve(Router::new().route("/article", get(|| async { html(ARTICLE) }))).await;
    let port = target.port();
    let start = serve(Router::new().route(
        "/start",
        get(move || async move { redirect(format!("http://localhost:{port}/article")) }),
    ))
    .await;
    let url = format!("http://{start}/start");

    // 127.0.0.1 is allowed, but the redirect goes to a loopback name (refused by name, before
    // it is resolved).
    let err = fetcher(policy(&["127.0.0.1"]))
        .fetch(&url)
        .await
        .unwrap_err();
    match err {
        FetchError::Refused { url: u, reason } => {
            assert_eq!(u, url);
            assert!(reason.contains("localhost is a loopback name"), "{reason}");
        }
        other => panic!("expected Refused, got {other:?}"),
    }

    let page = fetcher(policy(&["127.0.0.1", "localhost"]))
        .fetch(&url)
        .await
        .unwrap();
    assert_eq!(page.final_url, format!("http://localhost:{port}/article"));
    assert!(
        page.markdown
            .contains("comparing the desired state with the observed state")
    );
}

#[tokio::test]
async fn redirect_to_a_private_ip_literal_is_refused_before_connecting() {
    let start = serve(Router::new().route(
        "/start",
        get(|| async { redirect("http://10.0.0.1/admin".into()) }),
    ))
    .await;
    let err = fetcher(policy(&["127.0.0.1"]))
        .fetch(&format!("http://{start}/start"))
        .await
        .unwrap_err();
    match err {
        FetchError::Refused { reason, .. } => {
            assert_eq!(
                reason,
                "http://10.0.0.1/admin: 10.0.0.1 is a private address"
            )
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[tokio::test]
async fn ip_literals_and_other_schemes_are_refused() {
    let f = fetcher(FetchPolicy::default());
    for (url, reason) in [
        (
            "http://10.0.0.1/",
            "http://10.0.0.1/: 10.0.0.1 is a private address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/",
            "http://169.254.169.254/latest/meta-data/: 169.254.169.254 is a cloud metadata address",
        ),
        (
            "http://[::1]:8080/",
            "http://[::1]:8080/: ::1 is a loopback address",
        ),
        (
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/: ::ffff:127.0.0.1 is a loopback address",
        ),
        (
            "http://2130706433/",
            "http://127.0.0.1/: 127.0.0.1 is a loopback address",
        ),
        (
            "http://[fd00:ec2::254]/",
            "http://[fd00:ec2::254]/: fd00:ec2::254 is a cloud metadata address",
        ),
        (
            "http://100.100.100.200/",
            "http://100.100.100.200/: 100.100.100.200 is a cloud metadata address",
        ),
        ("file:///etc/passwd", "scheme file is not http or https"),
        ("ftp://example.com/x", "scheme ftp is not http or https"),
    ] {
        match f.fetch(url).await {
            Err(FetchError::Refused { url: u, reason: r }) => {
                assert_eq!(u, url);
                assert_eq!(r, reason, "{url}");
            }
            other => panic!("{url}: expected Refused, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn denied_domains_are_refused() {
    let f = fetcher(FetchPolicy {
        denied_domains: vec!["blocked.example".into()],
        ..FetchPolicy::default()
    });
    match f.fetch("https://www.blocked.example/page").await {
        Err(FetchError::Refused { reason, .. }) => {
            assert_eq!(
                reason,
                "https://www.blocked.example/page: host www.blocked.example is in the denied domain blocked.example"
            )
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[tokio::test]
async fn bodies_over_max_bytes_are_too_large() {
    let big = "x".repeat(5000);
    let streamed = big.clone();
    let addr = serve(
        Router::new()
            .route(
                "/declared",
                get(move || async move {
                    ([(header::CONTENT_TYPE, "text/plain")], big).into_response()
                }),
            )
            .route(
                "/chunked",
                get(move || async move {
                    // No Content-Length: only the streamed count can catch it.
                    let chunks: Vec<Result<Bytes, std::io::Error>> = streamed
                        .into_bytes()
                        .chunks(500)
                        .map(|c| Ok(Bytes::copy_from_slice(c)))
                        .collect();
                    (
                        [(header::CONTENT_TYPE, "text/plain")],
                        Body::from_stream(futures::stream::iter(chunks)),
                    )
                        .into_response()
                }),
            ),
    )
    .await;
    let f = fetcher(FetchPolicy {
        max_bytes: 1000,
        ..policy(&["127.0.0.1"])
    });
    match f.fetch(&format!("http://{addr}/declared")).await {
        Err(FetchError::TooLarge { what, .. }) => {
            assert_eq!(what, "Content-Length 5000 is over the 1000 byte limit")
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    match f.fetch(&format!("http://{addr}/chunked")).await {
        Err(FetchError::TooLarge { what, .. }) => {
            assert_eq!(what, "body over the 1000 byte wire limit")
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // At the limit exactly is fine.
    let ok = fetcher(FetchPolicy {
        max_bytes: 5000,
        ..policy(&["127.0.0.1"])
    });
    let page = ok.fetch(&format!("http://{addr}/chunked")).await.unwrap();
    assert_eq!(page.bytes, 5000);
    assert_eq!(page.markdown.len(), 5000);
}

#[tokio::test]
async fn a_gzip_bomb_stops_at_the_decompressed_cap() {
    let bomb = gzip(&vec![b'a'; 20 * 1024 * 1024]);
    assert!(bomb.len() < 64 * 1024, "bomb is {} bytes", bomb.len());
    let bomb_len = bomb.len();
    let addr = serve(Router::new().route(
        "/bomb",
        get(move || async move {
            (
                [
                    (header::CONTENT_TYPE, "text/plain"),
                    (header::CONTENT_ENCODING, "gzip"),
                ],
                bomb,
            )
                .into_response()
        }),
    ))
    .await;
    let f = fetcher(FetchPolicy {
        max_decompressed_bytes: 1024 * 1024,
        ..policy(&["127.0.0.1"])
    });
    match f.fetch(&format!("http://{addr}/bomb")).await {
        Err(FetchError::TooLarge { what, .. }) => {
            assert!(
                what.starts_with("body over the 1048576 byte decompressed limit"),
                "{what}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(
        bomb_len < 1024 * 1024,
        "the wire size alone would have passed"
    );
}

#[tokio::test]
async fn gzip_pages_are_decoded_and_counted_on_the_wire() {
    let body = gzip(ARTICLE.as_bytes());
    let wire = body.len() as u64;
    let addr = serve(Router::new().route(
        "/gz",
        get(move || async move {
            (
                [
                    (header::CONTENT_TYPE, "text/html"),
                    (header::CONTENT_ENCODING, "gzip"),
                ],
                body,
            )
                .into_response()
        }),
    ))
    .await;
    let page = fetcher(policy(&["127.0.0.1"]))
        .fetch(&format!("http://{addr}/gz"))
        .await
        .unwrap();
    assert_eq!(page.bytes, wire);
    assert!(
        page.markdown.contains("separate permissions"),
        "{}",
        page.markdown
    );
}

#[tokio::test]
async fn a_redirect_loop_stops_after_max_redirects() {
    let addr =
        serve(Router::new().route("/loop", get(|| async { redirect("/loop".into()) }))).await;
    let url = format!("http://{addr}/loop");
    let f = fetcher(FetchPolicy {
        max_redirects: 3,
        ..policy(&["127.0.0.1"])
    });
    match f.fetch(&url).await {
        Err(FetchError::Redirects { url: u, limit }) => {
            assert_eq!(u, url);
            assert_eq!(limit, 3);
        }
        other => panic!("expected Redirects, got {other:?}"),
    }
}

#[tokio::test]
async fn slow_servers_time_out() {
    let addr = serve(Router::new().route(
        "/slow",
        get(|| async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            html(ARTICLE)
        }),
    ))
    .await;
    let f = fetcher(FetchPolicy {
        timeout: Duration::from_millis(300),
        ..policy(&["127.0.0.1"])
    });
    let started = std::time::Instant::now();
    match f.fetch(&format!("http://{addr}/slow")).await {
        Err(FetchError::Timeout { after, .. }) => assert_eq!(after, Duration::from_millis(300)),
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn windows_1252_without_a_header_charset_is_decoded_from_meta() {
    let body = b"<html><head><meta charset=\"windows-1252\"><title>Caf\xe9</title></head><body><p>Cr\xe8me br\xfbl\xe9e \x96 \x93the best\x94.</p></body></html>".to_vec();
    let addr = serve(Router::new().route(
        "/latin",
        get(move || async move {
            (
                [(header::CONTENT_TYPE, HeaderValue::from_static("text/html"))],
                body,
            )
                .into_response()
        }),
    ))
    .await;
    let doc = fetcher(policy(&["127.0.0.1"]))
        .fetch_document(&format!("http://{addr}/latin"))
        .await
        .unwrap();
    assert_eq!(doc.encoding, "windows-1252");
    assert!(doc.text.contains("<title>Café</title>"), "{}", doc.text);
    assert!(
        doc.text.contains("Crème brûlée – “the best”."),
        "{}",
        doc.text
    );
}

#[tokio::test]
async fn a_bom_decides_the_encoding() {
    let mut utf16 = vec![0xFF, 0xFE];
    for unit in "Grüße aus Köln\nzweite Zeile".encode_utf16() {
        utf16.extend_from_slice(&unit.to_le_bytes());
    }
    let mut utf8 = vec![0xEF, 0xBB, 0xBF];
    utf8.extend_from_slice("naïve résumé".as_bytes());
    let addr = serve(
        Router::new()
            .route(
                "/u16",
                get(move || async move {
                    ([(header::CONTENT_TYPE, "text/plain")], utf16).into_response()
                }),
            )
            .route(
                "/u8",
                // The header's charset is wrong; the BOM wins.
                get(move || async move {
                    (
                        [(header::CONTENT_TYPE, "text/plain; charset=iso-8859-1")],
                        utf8,
                    )
                        .into_response()
                }),
            ),
    )
    .await;
    let f = fetcher(policy(&["127.0.0.1"]));
    let page = f.fetch(&format!("http://{addr}/u16")).await.unwrap();
    assert_eq!(page.markdown, "Grüße aus Köln\nzweite Zeile");
    assert_eq!(page.title, "Grüße aus Köln");
    let doc = f
        .fetch_document(&format!("http://{addr}/u8"))
        .await
        .unwrap();
    assert_eq!((doc.text.as_str(), doc.encoding), ("naïve résumé", "UTF-8"));
}

#[tokio::test]
async fn non_text_content_types_are_unsupported() {
    let addr = serve(
        Router::new()
            .route(
                "/zip",
                get(|| async {
                    ([(header::CONTENT_TYPE, "application/zip")], "PK\u{3}\u{4}").into_response()
                }),
            )
            .route(
                "/png",
                get(|| async {
                    ([(header::CONTENT_TYPE, "image/png")], "\u{89}PNG").into_response()
                }),
            ),
    )
    .await;
    let f = fetcher(policy(&["127.0.0.1"]));
    for (path, ct) in [("zip", "application/zip"), ("png", "image/png")] {
        match f.fetch(&format!("http://{addr}/{path}")).await {
            Err(FetchError::Unsupported { content_type, .. }) => assert_eq!(content_type, ct),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn http_errors_are_reported_with_their_status() {
    let addr = serve(Router::new().route("/gone", get(|| async { StatusCode::GONE }))).await;
    match fetcher(policy(&["127.0.0.1"]))
        .fetch(&format!("http://{addr}/gone"))
        .await
    {
        Err(FetchError::Status { status, .. }) => assert_eq!(status, 410),
        other => panic!("expected Status, got {other:?}"),
    }
}

#[tokio::test]
async fn a_real_bench_page_yields_its_article_text() {
    let gz = include_bytes!("scrape_fixtures/sciencealert-europa.html.gz");
    let mut page_html = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut page_html)
        .unwrap();
    // Served gzip-compressed, as the site would.
    let body = gzip(page_html.as_bytes());
    let addr = serve(Router::new().route(
        "/europa",
        get(move || async move {
            (
                [
                    (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                    (header::CONTENT_ENCODING, "gzip"),
                ],
                body,
            )
                .into_response()
        }),
    ))
    .await;
    let page = fetcher(policy(&["127.0.0.1"]))
        .fetch(&format!("http://{addr}/europa"))
        .await
        .unwrap();
    assert_eq!(
        page.title,
        "NASA Just Confirmed There Are Water Plumes Above The Surface of Jupiter's Moon Europa"
    );
    let text = strip_markdown(&page.markdown);
    for sentence in [
        "But while that sounds like a lot, it was only just enough to be detected from Earth.",
        "the NASA team discovered enough water vapor being released from Europa to fill an Olympic-size swimming pool within minutes.",
    ] {
        assert!(text.contains(sentence), "missing {sentence:?} in {text}");
    }
    for boilerplate in [
        "Privacy Policy",
        "Terms & Conditions",
        "All rights reserved",
        "Daily Email",
        "Our Team",
    ] {
        assert!(!text.contains(boilerplate), "{boilerplate:?} in {text}");
    }
}
