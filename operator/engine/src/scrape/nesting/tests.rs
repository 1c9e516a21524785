//! Unit tests of `nesting`.

use super::*;

fn nested(depth: usize, open: &str, close: &str) -> String {
    format!(
        "<html><body>{}deep text{}</body></html>",
        open.repeat(depth),
        close.repeat(depth)
    )
}

#[test]
fn ordinary_pages_are_returned_unchanged() {
    let page = "<!doctype html><html><head><title>a <b> c</title><script>if (a<b) { x = '<div>'; }</script></head>\
            <body><!-- <div><div> --><div class='x>y' data-a=\"<div>\"><p>one<p>two<ul><li>a<li>b</ul>\
            <img src=x><br/><table><tr><td>1<td>2</table></div></body></html>";
    assert!(matches!(limit_depth(page, 5), Cow::Borrowed(_)));
    assert!(matches!(
        limit_depth(&nested(256, "<div>", "</div>"), MAX_DEPTH),
        Cow::Borrowed(_)
    ));
    // Unclosed children are closed by their parent's end tag, siblings by their sibling.
    let sloppy = "<div><span><b>x</div>".repeat(1000);
    assert!(matches!(limit_depth(&sloppy, 3), Cow::Borrowed(_)));
    let lists = format!(
        "<ul>{}</ul><table>{}</table><dl>{}</dl>",
        "<li><p>item".repeat(1000),
        "<tr><td>a<td>b".repeat(1000),
        "<dt>t<dd>d".repeat(1000)
    );
    assert!(matches!(limit_depth(&lists, 3), Cow::Borrowed(_)));
    let icon = format!(
        "<div><svg>{}</svg></div>",
        "<path d=\"M0 0\"/>".repeat(1000)
    );
    assert!(matches!(limit_depth(&icon, 3), Cow::Borrowed(_)));
}

#[test]
fn markup_past_the_bound_is_dropped_and_the_text_kept() {
    let deep = nested(50_000, "<div>", "</div>");
    let out = limit_depth(&deep, 3);
    assert_eq!(
        out,
        "<html><body><div><div><div>deep text</div></div></div></body></html>"
    );
    // Outside SVG and MathML a trailing slash closes nothing.
    assert_eq!(limit_depth(&"<div/>".repeat(1000), 2), "<div/><div/>");
    let tables = nested(1000, "<table><tr><td>", "</td></tr></table>");
    assert_eq!(
        limit_depth(&tables, 4),
        "<html><body><table><tr><td><table>deep text</table></td></tr></table></body></html>"
    );
    let mixed = format!("{}tail", nested(10, "<span class=\"a\">", "</span>"));
    assert_eq!(
        limit_depth(&mixed, 2),
        "<html><body><span class=\"a\"><span class=\"a\">deep text</span></span></body></html>tail"
    );
}

#[test]
fn tags_inside_raw_text_and_comments_are_not_counted() {
    let script = format!(
        "<div><script>{}</script><textarea>{}</textarea><!--{}-->x</div>",
        "<div>".repeat(100),
        "<div>".repeat(100),
        "<div>".repeat(100)
    );
    assert!(matches!(limit_depth(&script, 2), Cow::Borrowed(_)));
    // An unterminated comment or tag ends the scan quietly.
    assert!(matches!(limit_depth("<div><!-- <div", 1), Cow::Borrowed(_)));
    assert!(matches!(limit_depth("<div a=\"<div>", 1), Cow::Borrowed(_)));
    assert!(matches!(limit_depth("a < b <3 </ >", 1), Cow::Borrowed(_)));
}
