//! Unit tests of `normalize`.

use super::*;

fn hit(url: &str, title: &str, snippet: &str, engine: &str) -> SearchHit {
    SearchHit {
        url: url.into(),
        title: title.into(),
        snippet: snippet.into(),
        engine: engine.into(),
    }
}

#[test]
fn canonical_urls() {
    let cases = [
        (
            "HTTPS://Example.COM:443/Docs/?utm_source=x#top",
            "https://example.com/Docs",
        ),
        ("http://example.com:80/", "http://example.com/"),
        ("http://example.com:8080/a/", "http://example.com:8080/a"),
        (
            "https://e.org/p?b=2&utm_medium=m&a=1&fbclid=F&gclid=G&UTM_Campaign=c",
            "https://e.org/p?b=2&a=1",
        ),
        ("https://e.org/p?q=a+b", "https://e.org/p?q=a+b"),
        ("  not a url ", "not a url"),
    ];
    for (input, expected) in cases {
        assert_eq!(canonical_url(input), expected, "{input}");
    }
}

#[test]
fn dedup_keeps_first_order_and_fills_empty_snippets() {
    let hits = vec![
        hit("https://a.example/x/", "  A \n x ", "", "brave"),
        hit("https://b.example/y", "B", "b snippet", "serper"),
        hit(
            "https://A.example/x?utm_source=t#frag",
            "A again",
            "a  snippet",
            "tavily",
        ),
        hit("javascript:alert(1)", "js", "", "brave"),
        hit("mailto:a@b.c", "mail", "", "brave"),
        hit("https://b.example/y#other", "B again", "other", "brave"),
        hit("https://c.example/", "", "c", "brave"),
    ];
    let out = normalize_and_dedup(hits);
    assert_eq!(
        out,
        vec![
            hit("https://a.example/x/", "A x", "a snippet", "brave"),
            hit("https://b.example/y", "B", "b snippet", "serper"),
            hit("https://c.example/", "https://c.example/", "c", "brave"),
        ]
    );
    assert_eq!(normalize_and_dedup(vec![]), vec![]);
}
