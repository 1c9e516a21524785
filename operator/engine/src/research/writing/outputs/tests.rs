//! Unit tests of `outputs`.

use super::*;

const IDEAS: &str = "I searched and found several approaches.\n\n<research_result>\n<research_item>\n<source>https://a.example/rag</source>\n<content>\n## Description\nRetrieval first.\n</content>\n</research_item>\n<research_item>\n<source>https://b.example/x</source>\n<content>\n## Description\nSecond.\n</content>\n</research_item>\n</research_result>";

#[test]
fn well_formed_items_are_parsed_in_order_and_capped_at_top_k() {
    let p = parse(IDEAS, OutputKind::Ideas, 5);
    assert_eq!(p.items.len(), 2);
    assert_eq!(p.items[0].source, "https://a.example/rag");
    assert_eq!(p.items[0].content, "## Description\nRetrieval first.");
    assert!(!p.truncated);
    assert_eq!(p.dropped, 0);
    assert_eq!(parse(IDEAS, OutputKind::Ideas, 1).items.len(), 1);
}

#[test]
fn truncated_output_still_yields_what_it_holds() {
    // Cut inside the second item's content: no closing tags at all.
    let cut = &IDEAS[..IDEAS.find("Second.").unwrap() + 4];
    let p = parse(cut, OutputKind::Implementations, 5);
    assert!(p.truncated);
    assert_eq!(p.items.len(), 2, "{p:?}");
    assert_eq!(p.items[1].content, "## Description\nSeco");
    // Only the closing tags are missing: both items are whole.
    let cut2 = format!(
        "{}\n",
        &IDEAS[..IDEAS
            .find("</content>\n</research_item>\n</research_result>")
            .unwrap()]
    );
    let p2 = parse(&cut2, OutputKind::Ideas, 5);
    assert!(p2.truncated);
    assert_eq!(p2.items.len(), 2, "{p2:?}");
    assert_eq!(p2.items[1].content, "## Description\nSecond.");
}

#[test]
fn fenced_and_mangled_tags_are_tolerated() {
    let raw = "```xml\n<Research_Result>\n< research_item >\n<source>```\n[docs](https://c.example/impl)\n```</source>\n<content>\n## Code Snippet\n```python\nprint(1)\n```\n</content>\n</research_item >\n</research_result >\n```";
    let p = parse(raw, OutputKind::Implementations, 3);
    assert_eq!(p.items.len(), 1, "{p:?}");
    assert_eq!(p.items[0].source, "https://c.example/impl");
    assert!(p.items[0].content.contains("```python\nprint(1)\n```"));
}

#[test]
fn items_without_source_or_content_are_dropped_and_counted() {
    let raw = "<research_result><research_item><content>no source</content></research_item><research_item><source>not a url</source><content>x</content></research_item><research_item><source>https://ok.example</source></research_item><research_item><source>https://ok.example/2</source><content>fine</content></research_item></research_result>";
    let p = parse(raw, OutputKind::Ideas, 5);
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.dropped, 3);
}

#[test]
fn study_is_the_body_of_the_envelope_or_the_whole_answer() {
    let p = parse(
        "notes on my search\n<research_result>\n## Key Takeaways\n1. a\n</research_result>\ntrailing",
        OutputKind::Study,
        5,
    );
    assert_eq!(p.body.as_deref(), Some("## Key Takeaways\n1. a"));
    assert!(!p.truncated);
    let cut = parse(
        "<research_result>\n## Abstract\nHalf a rep",
        OutputKind::Study,
        5,
    );
    assert_eq!(cut.body.as_deref(), Some("## Abstract\nHalf a rep"));
    assert!(cut.truncated);
    let bare = parse("## Abstract\nNo envelope at all.", OutputKind::Study, 5);
    assert_eq!(
        bare.body.as_deref(),
        Some("## Abstract\nNo envelope at all.")
    );
    assert_eq!(parse("   ", OutputKind::Study, 5).body, None);
}

#[test]
fn garbage_yields_nothing_and_never_panics() {
    for raw in [
        "",
        "<",
        "</",
        "<research_result",
        "<research_item><source>",
        "<research_result><research_item><source>https://x</source><content>",
    ] {
        let p = parse(raw, OutputKind::Ideas, 5);
        assert!(p.items.is_empty(), "{raw}: {p:?}");
    }
    let p = parse(
        "<research_result><research_item><source>https://x.example</source><content>body",
        OutputKind::Ideas,
        5,
    );
    assert_eq!(p.items.len(), 1);
    assert!(p.truncated);
}
