//! Unit tests of `osv`.

use super::*;

#[test]
fn commits_and_versions_make_different_bodies() {
    assert_eq!(
        OsvClient::body("jinja2", "PyPI", Some("2.4.1")),
        json!({"package": {"name": "jinja2", "ecosystem": "PyPI"}, "version": "2.4.1"})
    );
    let sha = "6879efc2c1596d11a6a6ad296f80063b558d5e0f";
    assert_eq!(OsvClient::body("x", "y", Some(sha)), json!({"commit": sha}));
    assert_eq!(
        OsvClient::body("lodash", "npm", None),
        json!({"package": {"name": "lodash", "ecosystem": "npm"}})
    );
}

#[test]
fn empty_answer_means_no_vulnerabilities() {
    assert_eq!(parse(&json!({}), 5).unwrap(), vec![]);
    assert!(matches!(
        parse(&json!([]), 5),
        Err(SourceError::Malformed(_))
    ));
    assert!(matches!(
        parse(&json!({"vulns": 3}), 5),
        Err(SourceError::Malformed(_))
    ));
}
