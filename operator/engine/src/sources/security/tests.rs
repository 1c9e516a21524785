//! Unit tests of `security`.

use super::*;

#[test]
fn cve_ids_and_ecosystems_are_recognised() {
    assert_eq!(
        find_cve("is cve-2021-44228 exploited?"),
        Some("CVE-2021-44228".to_string())
    );
    assert_eq!(find_cve("log4shell"), None);
    assert_eq!(
        ecosystem("pip"),
        Ecosystem {
            osv: "PyPI".into(),
            github: Some("pip")
        }
    );
    assert_eq!(ecosystem("Cargo").osv, "crates.io");
    assert_eq!(ecosystem("crates.io").github, Some("rust"));
    assert_eq!(
        ecosystem("Debian"),
        Ecosystem {
            osv: "Debian".into(),
            github: None
        }
    );
}

#[test]
fn render_reports_failures_and_truncates() {
    let advisory = |i: usize| Advisory {
        source: "NVD",
        id: format!("CVE-2024-{i:04}"),
        url: format!("https://nvd.nist.gov/vuln/detail/CVE-2024-{i:04}"),
        title: "t".into(),
        details: "x".repeat(2000),
        ..Advisory::default()
    };
    let results = vec![
        ("NVD", Ok((0..200).map(advisory).collect::<Vec<_>>())),
        (
            "GitHub",
            Err(SourceError::RateLimited {
                provider: "github".into(),
                retry_after: None,
            }),
        ),
    ];
    let answer = render(&SecurityQuery::text("x"), &results);
    assert_eq!(answer.hits.len(), 200);
    assert!(answer.text.len() <= DEFAULT_MAX_BYTES);
    assert!(answer.text.contains("[Truncated"), "cut text says so");
    assert!(
        answer
            .text
            .contains("- GitHub: failed: github is rate limiting requests"),
        "{}",
        &answer.text[..400]
    );
    assert_eq!(answer.hits[0].engine, "nvd");
    assert_eq!(answer.hits[0].title, "CVE-2024-0000: t");
    assert!(answer.hits[0].snippet.chars().count() <= SNIPPET_CHARS);
}
