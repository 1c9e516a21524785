//! Unit tests of `scoring`.

use super::*;

fn hit(url: &str, title: &str, snippet: &str) -> SearchHit {
    SearchHit {
        url: url.into(),
        title: title.into(),
        snippet: snippet.into(),
        engine: "t".into(),
    }
}

#[test]
fn source_types_and_their_multipliers() {
    let cases = [
        ("https://www.youtube.com/watch?v=x", SourceType::Video, 0.20),
        (
            "https://x.com/someone/status/1",
            SourceType::SocialMedia,
            0.50,
        ),
        ("https://en.wikipedia.org/wiki/JSON", SourceType::Wiki, 1.10),
        ("https://arxiv.org/abs/2401.1", SourceType::Academic, 1.08),
        ("https://www.reuters.com/tech/a", SourceType::News, 0.85),
        (
            "https://docs.python.org/3/library/json.html",
            SourceType::Documentation,
            1.0,
        ),
        (
            "http://127.0.0.1:8080/python3.11-doc/html/library/json.html",
            SourceType::Documentation,
            1.0,
        ),
        (
            "https://stackoverflow.com/questions/1",
            SourceType::Forum,
            1.0,
        ),
        ("https://blog.example.com/post", SourceType::Other, 1.0),
    ];
    for (url, kind, mult) in cases {
        assert_eq!(source_type(url), kind, "{url}");
        assert_eq!(kind.multiplier(), mult);
    }
}

#[test]
fn weights_are_fifty_thirty_twenty_times_extractability() {
    let docs = score(
        "json decoder",
        &hit(
            "https://docs.python.org/3/library/json.html",
            "json — JSON encoder and decoder",
            "Source code: Lib/json/__init__.py. JSON (JavaScript Object Notation), specified by RFC 7159 (which obsoletes RFC 4627) and by ECMA-404, is a lightweight data interchange format inspired by JavaScript object literal syntax.",
        ),
    );
    assert_eq!(docs.relevance, 1.0);
    assert_eq!(docs.quality, 0.95); // documentation prior 0.9, .org +0.05
    assert_eq!(docs.usefulness, 1.0);
    assert_eq!(docs.score, 0.985); // 0.5·1 + 0.3·0.95 + 0.2·1
    let video = score(
        "json decoder",
        &hit(
            "https://www.youtube.com/watch?v=1",
            "JSON decoder tutorial",
            "watch",
        ),
    );
    // (0.5·1 + 0.3·0.4 + 0.2·(0.6·5/200 + 0.2)) × 0.2
    assert_eq!(video.score, 0.133);
    let unrelated = score(
        "json decoder",
        &hit("https://blog.example.com/cats", "Cats", "About cats."),
    );
    assert!(unrelated.score < 0.45, "{unrelated:?}");
}

#[test]
fn threshold_adapts_to_result_count_and_social_ratio() {
    assert_eq!(adaptive_threshold(10, 0.0), 0.45);
    assert_eq!(adaptive_threshold(30, 0.6), 0.45);
    assert_eq!(adaptive_threshold(50, 0.1), 0.65);
    assert_eq!(adaptive_threshold(50, 0.3), 0.60);
    assert_eq!(adaptive_threshold(20, 0.0), 0.60);
    let hits = [
        hit("https://x.com/a", "", ""),
        hit("https://youtube.com/b", "", ""),
        hit("https://docs.rs/c", "", ""),
        hit("https://e.org/d", "", ""),
    ];
    assert_eq!(social_ratio(&hits), 0.5);
}

#[test]
fn reformulations_broaden_narrow_and_rephrase() {
    let q = "\"json\" decoder site:python.org for the standard library -reddit";
    assert_eq!(
        reformulate(q, Reformulation::Broaden).as_deref(),
        Some("decoder standard library")
    );
    assert_eq!(
        reformulate("json decoder standard library", Reformulation::Narrow).as_deref(),
        Some("json \"decoder standard\" library")
    );
    assert_eq!(
        reformulate("decode json errors", Reformulation::Synonyms).as_deref(),
        Some("parse json exceptions")
    );
    assert_eq!(
        reformulate("postgres vacuum", Reformulation::Synonyms).as_deref(),
        Some("postgres vacuum guide")
    );
    assert_eq!(reformulate("json", Reformulation::Narrow), None);
    assert_eq!(Reformulation::nth(0), Reformulation::Broaden);
    assert_eq!(Reformulation::nth(5), Reformulation::Synonyms);
}
