//! Unit tests of `http`.

use super::*;

fn answer(status: u16, headers: &[(&'static str, &str)]) -> Answer {
    let mut map = HeaderMap::new();
    for (k, v) in headers {
        map.insert(*k, HeaderValue::from_str(v).unwrap());
    }
    Answer {
        status: StatusCode::from_u16(status).unwrap(),
        headers: map,
        body: vec![],
    }
}

#[test]
fn statuses_map_to_actionable_errors() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_000);
    assert!(check_status("brave", &answer(200, &[]), now).is_ok());
    let err = check_status("brave", &answer(401, &[]), now).unwrap_err();
    assert_eq!(
        err.to_string(),
        "brave rejected the API key (HTTP 401): check the key in the Secret the profile references"
    );
    let err = check_status("tavily", &answer(429, &[("retry-after", "7")]), now).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
    assert_eq!(
        err.to_string(),
        "tavily is rate limiting requests; retry after 7s"
    );
    // HTTP-date form: 2015-10-21 07:28:00 GMT is 1445412480, 480 s after `now`.
    let err = check_status(
        "serper",
        &answer(429, &[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]),
        now,
    )
    .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(480)));
    let err = check_status("serper", &answer(429, &[("retry-after", "soon")]), now).unwrap_err();
    assert!(
        matches!(
            err,
            SourceError::RateLimited {
                retry_after: None,
                ..
            }
        ),
        "{err:?}"
    );
    let err = check_status("serper", &answer(503, &[]), now).unwrap_err();
    assert_eq!(err.to_string(), "serper answered HTTP 503");
    let err = check_status("x", &answer(429, &[("retry-after", "999999")]), now).unwrap_err();
    assert_eq!(err.retry_after(), Some(MAX_RETRY_AFTER));
}

#[test]
fn secrets_never_show() {
    let s = Secret::new(" sk-123\n");
    assert_eq!(s.expose(), "sk-123");
    assert_eq!(format!("{s:?} {s}"), "Secret(<redacted>) <redacted>");
    assert!(s.header_value("Bearer ").unwrap().is_sensitive());
    let http = HttpSource::new("x", DEFAULT_TIMEOUT, 10, vec![s, Secret::new("")]).unwrap();
    assert_eq!(http.redact("key=sk-123&q=a"), "key=<redacted>&q=a");
    assert!(!format!("{http:?}").contains("sk-123"));
}

#[test]
fn base_urls_keep_their_prefix() {
    let b = base_url("osv", "http://h:1/proxy/osv?x=1#f").unwrap();
    assert_eq!(
        endpoint("osv", &b, "v1/query").unwrap().as_str(),
        "http://h:1/proxy/osv/v1/query"
    );
    assert!(matches!(
        base_url("osv", "ftp://h"),
        Err(SourceError::Config(_))
    ));
    assert!(matches!(base_url("osv", ""), Err(SourceError::Config(_))));
}

#[test]
fn inline_html_becomes_text() {
    assert_eq!(
        inline_html_to_text(
            "The <strong>Rust</strong>ic book &amp; more &#8212; &#x27;x&#x27; &bogus;<br/>end"
        ),
        "The Rustic book & more — 'x' &bogus; end"
    );
    assert_eq!(
        inline_html_to_text("How do I use &quot;async&quot; in <code>tokio</code>, really?"),
        "How do I use \"async\" in tokio, really?"
    );
}

#[test]
fn clip_marks_the_cut() {
    assert_eq!(clip("abcdef", 4), "abc…");
    assert_eq!(clip("abc", 4), "abc");
}
