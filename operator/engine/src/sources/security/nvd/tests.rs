//! Unit tests of `nvd`.

use super::*;
use serde_json::json;

#[test]
fn cvss_prefers_the_newest_version() {
    let m = json!({
        "cvssMetricV2": [{"cvssData": {"baseScore": 9.3}, "baseSeverity": "HIGH"}],
        "cvssMetricV31": [{"cvssData": {"baseScore": 10.0, "baseSeverity": "CRITICAL"}}]
    });
    assert_eq!(cvss(Some(&m)).as_deref(), Some("CVSS 3.1 10.0 CRITICAL"));
    let v2 = json!({"cvssMetricV2": [{"cvssData": {"baseScore": 5.0}, "baseSeverity": "MEDIUM"}]});
    assert_eq!(cvss(Some(&v2)).as_deref(), Some("CVSS 2.0 5.0 MEDIUM"));
    assert_eq!(cvss(Some(&json!({}))), None);
}

#[test]
fn answers_without_vulnerabilities_are_malformed() {
    assert!(matches!(
        parse(&json!({"message": "x"}), 5),
        Err(SourceError::Malformed(_))
    ));
    assert_eq!(
        parse(&json!({"totalResults": 0, "vulnerabilities": []}), 5).unwrap(),
        vec![]
    );
}
