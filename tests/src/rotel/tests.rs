//! Unit tests of `rotel`.

use super::*;

const SAMPLE: &str = "\
\x1b[2m2026-01-01T00:00:00Z\x1b[0m INFO Starting Rotel.
ResourceSpans #0
Resource SchemaURL: 
Resource attributes:
     -> service.name: Str(quarry)
ScopeSpans #0
ScopeSpans SchemaURL: 
InstrumentationScope quarry 
Span #0
    Trace ID       : 5b8efff798038103d269b633813fc60c
    Parent ID      : 
    ID             : eee19b7ec3c1b174
    Name           : research_run
    Kind           : SPAN_KIND_INTERNAL
Start time: 1544712660000000000
End time: 1544712661000000000
    Status code    : STATUS_CODE_ERROR
    Status message : boom
Attributes:
     -> run: Str(a: b(c) \"q\")
     -> ok: Bool(true)
     -> d: Double(1.5)
     -> note: Str(line1
line2)
Events:
SpanEvent #0
     -> Name: something happened
     -> Timestamp: 1544712660500000000
     -> DroppedAttributesCount: 0
     -> Attributes::
          -> level: Str(INFO)
Span #1
    Trace ID       : 5b8efff798038103d269b633813fc60c
    Parent ID      : eee19b7ec3c1b174
    ID             : eee19b7ec3c1b175
    Name           : chat scripted
    Kind           : SPAN_KIND_CLIENT
Start time: 1544712660000000000
End time: 1544712661000000000
Attributes:
     -> gen_ai.usage.input_tokens: Int(900)
";

#[test]
fn the_debug_output_parses_into_spans_with_their_own_attributes() {
    let spans = parse_debug_output(SAMPLE);
    assert_eq!(spans.len(), 2, "{spans:#?}");
    let run = &spans[0];
    assert_eq!(run.name, "research_run");
    assert_eq!(run.parent_span_id, "");
    assert_eq!(run.span_id, "eee19b7ec3c1b174");
    assert_eq!(run.kind, "SPAN_KIND_INTERNAL");
    assert_eq!(
        run.resource.get("service.name"),
        Some(&AttrValue::Str("quarry".into()))
    );
    assert_eq!(
        run.attr("run"),
        Some(&AttrValue::Str("a: b(c) \"q\"".into()))
    );
    assert_eq!(run.attr("ok"), Some(&AttrValue::Bool(true)));
    assert_eq!(run.attr("d"), Some(&AttrValue::Double(1.5)));
    assert_eq!(
        run.attr("note"),
        Some(&AttrValue::Str("line1\nline2".into()))
    );
    // Event attributes are not the span's.
    assert_eq!(run.attr("level"), None);
    assert_eq!(run.attr("Name"), None);
    assert_eq!(run.attributes.len(), 4);
    let chat = &spans[1];
    assert_eq!(chat.parent_span_id, run.span_id);
    assert_eq!(chat.trace_id, run.trace_id);
    assert_eq!(chat.kind, "SPAN_KIND_CLIENT");
    assert_eq!(
        chat.attr("gen_ai.usage.input_tokens")
            .and_then(AttrValue::as_int),
        Some(900)
    );
}
