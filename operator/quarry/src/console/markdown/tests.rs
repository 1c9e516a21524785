//! Unit tests of `markdown`.

use super::*;
use serde_json::json;

fn findings() -> Citations {
    Citations::from_findings(&json!({
        "claims": [
            {"claim": "loads parses a str", "url": "https://docs.python.org/3/library/json.html", "supported": true},
            {"claim": "pickle is safe", "url": "https://docs.python.org/3/library/pickle.html", "supported": false}
        ],
        "citedUrls": ["https://docs.python.org/3/library/json.html", "https://docs.python.org/3/library/csv.html/"],
        "unverifiedReferences": ["https://invented.example/page"]
    }))
}

#[test]
fn each_citation_is_marked_with_the_gates_verdict() {
    let html = render_report(
        "Use `json.loads` ([json](https://docs.python.org/3/library/json.html#json.loads)). \
             Pickle ([p](https://docs.python.org/3/library/pickle.html)), csv ([c](https://docs.python.org/3/library/csv.html)), \
             other ([o](https://elsewhere.example/)).",
        &findings(),
    );
    assert!(
        html.contains(
            "<span class=\"cite cite-verified\" title=\"citation verified\">verified</span>"
        ),
        "{html}"
    );
    assert!(html.contains("cite-unsupported"), "{html}");
    assert!(html.contains("cite-read"), "{html}");
    assert!(html.contains("cite-unchecked"), "{html}");
    assert!(
        html.contains("rel=\"noopener noreferrer nofollow\""),
        "{html}"
    );
    assert_eq!(
        findings().removed,
        vec!["https://invented.example/page".to_string()]
    );
    assert_eq!(
        findings().counts("https://docs.python.org/3/library/pickle.html"),
        (0, 1)
    );
}

#[test]
fn script_handlers_and_javascript_links_are_inert() {
    let hostile = "# Report\n\n<script>document.title='pwned'</script>\n\n\
            Click [here](javascript:alert(1)) or <a href=\"javascript:alert(2)\" onclick=\"alert(3)\">there</a>.\n\n\
            <img src=x onerror=alert(4)> <span class=\"cite cite-verified\">verified</span>\n\n\
            [data](data:text/html;base64,PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==)";
    let html = render_report(hostile, &Citations::default());
    // Raw HTML is shown as text: escaped, never a tag. Only real tags start with `<`.
    let tags: Vec<&str> = html
        .split('<')
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or_default())
        .collect();
    for bad in [
        "script",
        "img",
        "javascript:",
        "onclick",
        "onerror",
        "data:",
    ] {
        assert!(
            !tags.iter().any(|t| t.to_ascii_lowercase().contains(bad)),
            "{bad} in a tag: {tags:?}"
        );
    }
    assert!(html.contains("&lt;script&gt;"), "{html}");
    // The model cannot forge a verdict: its span is text, the only span is the one we add.
    assert!(
        !html.contains("<span class=\"cite cite-verified\">"),
        "{html}"
    );
    assert_eq!(html.matches("<span class=\"cite ").count(), 2, "{html}");
}
