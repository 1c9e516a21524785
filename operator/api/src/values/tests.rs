//! Unit tests of `values`.

use super::*;

#[test]
fn usd_round_trips() {
    assert_eq!(parse_usd_micros("2.50").unwrap(), 2_500_000);
    assert_eq!(parse_usd_micros("2.5").unwrap(), 2_500_000);
    assert_eq!(parse_usd_micros("0").unwrap(), 0);
    assert_eq!(parse_usd_micros("0.000001").unwrap(), 1);
    assert_eq!(
        parse_usd_micros("123456789.999999").unwrap(),
        123_456_789_999_999
    );
    assert_eq!(format_usd_micros(2_500_000), "2.50");
    assert_eq!(format_usd_micros(0), "0.00");
    assert_eq!(format_usd_micros(1_234), "0.001234");
    assert_eq!(format_usd_micros(10_100_000), "10.10");
    assert_eq!(format_usd_micros(10_120_000), "10.12");
    assert_eq!(format_usd_micros(10_123_000), "10.123");
}

#[test]
fn usd_rejects_what_the_pattern_rejects() {
    for bad in [
        "",
        ".5",
        "5.",
        "-1",
        "1e3",
        "1.0000001",
        "1,5",
        " 1",
        "1234567890",
        "abc",
    ] {
        assert!(
            matches!(parse_usd_micros(bad), Err(ApiError::InvalidUsd { .. })),
            "{bad:?} should be rejected"
        );
    }
}

#[test]
fn durations_parse() {
    assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
    assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
    assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
    assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
    assert_eq!(parse_duration("1h1s").unwrap(), Duration::from_secs(3601));
    for bad in [
        "",
        "30",
        "m",
        "1d",
        "1.5h",
        "30 m",
        "-1s",
        "12345678s",
        "1hm",
    ] {
        assert!(
            matches!(parse_duration(bad), Err(ApiError::InvalidDuration { .. })),
            "{bad:?} should be rejected"
        );
    }
}

#[test]
fn patterns_agree_with_parsers() {
    let usd = regex::Regex::new(USD_PATTERN).unwrap();
    for v in ["2.50", "0", "10", "0.000001"] {
        assert!(usd.is_match(v) && parse_usd_micros(v).is_ok(), "{v}");
    }
    for v in ["5.", ".5", "1.0000001", "-1"] {
        assert!(!usd.is_match(v) && parse_usd_micros(v).is_err(), "{v}");
    }
    let dur = regex::Regex::new(DURATION_PATTERN).unwrap();
    for v in ["30m", "1h30m", "500ms"] {
        assert!(dur.is_match(v) && parse_duration(v).is_ok(), "{v}");
    }
    for v in ["30", "1d", "1.5h", ""] {
        assert!(!dur.is_match(v) && parse_duration(v).is_err(), "{v}");
    }
    let dns = regex::Regex::new(DNS1123_SUBDOMAIN_PATTERN).unwrap();
    assert!(dns.is_match("default"));
    assert!(dns.is_match("openai.prod-1"));
    assert!(!dns.is_match("Default"));
    assert!(!dns.is_match("-x"));
    assert!(!dns.is_match("a_b"));
    let host = regex::Regex::new(HOST_PATTERN).unwrap();
    for v in [
        "example.org",
        "Docs.Example.org.",
        "127.0.0.1",
        "::1",
        "[::1]",
        "fe80::1",
        "svc_a.ns",
        "localhost",
    ] {
        assert!(host.is_match(v), "{v}");
    }
    for v in [
        "",
        " ",
        " example.org",
        "https://example.org",
        "example.org/path",
        "example.org:8080",
        "cafe.be:80",
        "*.example.org",
        "-x.org",
        "a..b",
    ] {
        assert!(!host.is_match(v), "{v:?}");
    }
}
