//! Unit tests of `changes`.

use super::*;
use serde_json::json;

fn check(claim: &str, url: &str, supported: bool) -> ClaimCheck {
    ClaimCheck {
        claim: claim.into(),
        url: url.into(),
        overlap: 1.0,
        missing_numbers: vec![],
        missing_subjects: vec![],
        supported,
        judged_by: "lexical",
    }
}

fn earlier() -> Earlier {
    Earlier::from_findings(
        &json!({
            "claims": [
                {"claim": "json.loads parses a str into Python objects.", "supported": true},
                {"claim": "The json module is implemented in C only.", "supported": true},
                {"claim": "An unsupported sentence.", "supported": false},
            ],
            "sources": [
                {"url": "http://docs/json.html", "title": "json"},
                {"url": "http://docs/pickle.html", "title": "pickle"},
            ],
        }),
        "2026-11-24T08:00:00Z",
    )
}

#[test]
fn findings_are_read_supported_claims_and_sources_only() {
    let e = earlier();
    assert_eq!(e.claims.len(), 2);
    assert_eq!(
        e.sources,
        vec!["http://docs/json.html", "http://docs/pickle.html"]
    );
    assert!(e.as_context().contains("(2026-11-24T08:00:00Z)"));
    assert!(e.as_context().contains("- json.loads parses a str"));
}

#[test]
fn reworded_claims_are_the_same_and_real_changes_are_listed() {
    let claims = [
        // The first earlier claim, reworded: not new.
        check(
            "The json.loads function parses a str into Python objects",
            "http://docs/json.html/",
            true,
        ),
        check(
            "json.dump writes to a file-like object.",
            "http://docs/json.html",
            true,
        ),
        check("A claim the gate refused.", "http://docs/json.html", false),
    ];
    let sources = vec![
        "http://docs/json.html/".to_string(),
        "http://docs/io.html".to_string(),
    ];
    let c = diff(&earlier(), &claims, &sources);
    assert_eq!(c.since, "2026-11-24T08:00:00Z");
    assert_eq!(
        c.new_claims,
        vec![CitedClaim {
            claim: "json.dump writes to a file-like object.".into(),
            url: "http://docs/json.html".into()
        }]
    );
    assert_eq!(
        c.unsupported_claims,
        vec!["The json module is implemented in C only."]
    );
    assert_eq!(c.new_sources, vec!["http://docs/io.html"]);
    assert_eq!(c.vanished_sources, vec!["http://docs/pickle.html"]);
    assert_eq!(c.count(), 4);
    let text = section(&c);
    assert!(
        text.starts_with("\n## Changes since 2026-11-24T08:00:00Z\n"),
        "{text}"
    );
    assert!(
        text.contains("- json.dump writes to a file-like object ([source](http://docs/json.html))"),
        "{text}"
    );
    assert!(
        text.contains("- The json module is implemented in C only.\n"),
        "{text}"
    );
    assert!(text.contains("- <http://docs/io.html>"), "{text}");
    // An earlier source is named, not linked: this run did not read it.
    assert!(text.contains("- `http://docs/pickle.html`"), "{text}");
}

#[test]
fn no_change_says_so() {
    let e = earlier();
    let claims = [
        check(
            "json.loads parses a str into Python objects.",
            "http://docs/json.html",
            true,
        ),
        check(
            "The json module is implemented in C only.",
            "http://docs/json.html",
            true,
        ),
    ];
    let sources = e.sources.clone();
    let c = diff(&e, &claims, &sources);
    assert_eq!(c.count(), 0);
    assert!(section(&c).contains("Nothing changed"));
}
