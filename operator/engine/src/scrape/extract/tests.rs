//! Unit tests of `extract`.

use super::*;

#[test]
fn an_unanchored_docbook_term_heads_its_description() {
    // sql-createtable.html: an anchored parameter, then one without an anchor.
    let html = "<dl class=\"variablelist\"><dt id=\"SQL-CREATETABLE-PARTITION\"><span class=\"term\"><code class=\"literal\">PARTITION OF parent_table</code></span></dt><dd><p>Creates the table as a partition of the specified parent table.</p></dd><dt><span class=\"term\"><code class=\"literal\">GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY</code></span></dt><dd><p>If BY DEFAULT is selected, then the user-specified value takes precedence.</p></dd></dl><dl class=\"field-list\"><dt>Parameters</dt><dd><p>x</p></dd></dl>";
    let headed = definition_terms_as_headings(html);
    assert!(
        headed.contains("<p><strong>GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY</strong></p>"),
        "{headed}"
    );
    assert!(headed.contains("<p><strong>PARTITION OF parent_table</strong></p>"));
    // A term that is neither anchored nor DocBook's (Sphinx's field lists) stays a term.
    assert!(!headed.contains("<strong>Parameters</strong>"), "{headed}");
}

#[test]
fn an_admonition_title_does_not_replace_the_section_heading() {
    // The shape of PostgreSQL's datatype-numeric.html: a section whose first child is a note.
    let filler = "Numeric types consist of two-, four-, and eight-byte integers and selectable-precision decimals, which this paragraph describes at enough length to be main content.";
    let html = format!(
        "<html><head><title>8.1. Numeric Types</title></head><body><div class=\"sect1\"><h2 class=\"title\">8.1. Numeric Types</h2><p>{filler}</p><div class=\"sect2\"><div class=\"titlepage\"><h3 class=\"title\">8.1.4. Serial Types</h3></div><div class=\"note\"><h3 class=\"title\">Note</h3><p>This section describes a PostgreSQL-specific way to create an autoincrementing column.</p></div><p>The data types smallserial, serial and bigserial are not true types, but merely a notational convenience for creating unique identifier columns.</p></div></div></body></html>"
    );
    let md = extract_markdown(&html, "https://docs.example/datatype-numeric.html").markdown;
    let passages = crate::research::reading::passages::split(&md);
    let serial = passages
        .iter()
        .find(|p| p.text.contains("not true types"))
        .expect("the paragraph is kept");
    assert_eq!(
        serial.heading_path.last().map(String::as_str),
        Some("8.1.4. Serial Types"),
        "{md}"
    );
    assert!(!md.contains("Note"), "{md}");
    assert_eq!(admonitions_untitled("<p>x</p>"), "<p>x</p>");
}

/// Python's expressions page: a grammar rule's `<pre>` holds inline `<code>`; the fence was
/// opened mid-line and every later block was read as code.
#[test]
fn a_pre_with_inline_code_is_one_fenced_block_at_a_line_start() {
    let prose = "This paragraph is long enough to be the main content of the page for the \
        extractor, and it says what the rule below means in plain words for a reader.";
    let html = format!(
        "<html><head><title>Expressions</title></head><body><article><h1>Expressions</h1>\
         <p>{prose}</p><pre>\n<strong>name</strong> ::=  <code class=\"xref\"><span>othername</span></code>\n</pre>\
         <p>{prose}</p><p>The floor division of integers results in an integer.</p></article></body></html>"
    );
    let md = extract_markdown(&html, "https://docs.example/expressions.html").markdown;
    for line in md.lines().filter(|l| l.contains("```")) {
        assert!(line.trim_start().starts_with("```"), "{md}");
    }
    assert!(md.contains("othername"), "{md}");
    assert_eq!(
        without_code_tags("a <code class=\"x\">b</code> <codex>c"),
        "a b <codex>c"
    );
    let passages = crate::research::reading::passages::split(&md);
    let last = passages.last().expect("passages");
    assert_eq!(
        last.kind,
        crate::research::reading::passages::PassageKind::Prose,
        "{passages:?}"
    );
}

#[test]
fn a_bare_pre_becomes_one_fenced_block_blank_lines_and_all() {
    let html = "<html><head><title>csv</title></head><body><article><h1>csv</h1><p>The csv module implements classes to read and write tabular data in CSV format, and this paragraph is long enough to be the main content of the page for the extractor.</p><p>A short usage example:</p><div><div><pre>import csv\nwith open('eggs.csv', newline='') as f:\n    reader = csv.reader(f)\n\n    for row in reader:\n        print(row)\n</pre></div></div><p>The reader object iterates over the lines of the given file and returns each row as a list of strings, which is what most programs want from a CSV file.</p></article></body></html>";
    let md = extract_markdown(html, "https://docs.example/csv.html").markdown;
    let open = md.find("```").expect("a fence");
    let close = md[open + 3..].find("```").expect("a closing fence") + open + 3;
    let code = &md[open..close];
    assert!(
        code.contains("import csv") && code.contains("print(row)"),
        "{md}"
    );
    assert_eq!(
        code_in_bare_pre("<pre><code>x</code></pre>"),
        "<pre><code>x</code></pre>"
    );
    assert_eq!(
        code_in_bare_pre("<pre>x</pre>"),
        "<pre><code>x</code></pre>"
    );
    assert_eq!(
        markdown_blocks("a\n\n```\nx\n\ny\n```\n\nb"),
        ["a", "```\nx\n\ny\n```", "b"]
    );
}

#[test]
fn strip_markdown_keeps_prose_only() {
    let md = "# Title\n\nSee [the docs](https://x.example/a?b=c) and ![logo](/l.png) <https://y.example>.\n\n[1]: https://z.example\n";
    assert_eq!(strip_markdown(md), "# Title\n\nSee the docs and    .\n\n\n");
}

#[test]
fn short_pages_fall_back_to_the_whole_page() {
    let html = "<html><head><title> A  list </title><script>var x = 1;</script></head><body><ul><li>alpha</li><li>beta</li></ul></body></html>";
    let e = extract_markdown(html, "https://example.com/");
    assert_eq!(e.title, "A list");
    assert_eq!(
        best_title(
            "Python 3.11.2 documentation",
            "json — JSON encoder and decoder — Python 3.11.2 documentation"
        ),
        "json — JSON encoder and decoder — Python 3.11.2 documentation"
    );
    assert_eq!(best_title("Fox news", "Home"), "Fox news");
    assert_eq!(
        decode_entities("json &#8212; JSON &amp; more &#x2014; &bogus; & x"),
        "json — JSON & more — &bogus; & x"
    );
    assert!(
        e.markdown.contains("alpha") && e.markdown.contains("beta"),
        "{e:?}"
    );
    assert!(!e.markdown.contains("var x"), "{e:?}");
}

#[test]
fn an_article_is_extracted_without_navigation() {
    let para = "The quick brown fox jumps over the lazy dog near the quiet river bank today. ";
    let html = format!(
        "<html><head><title>Fox news</title></head><body><nav><a href='/'>Home</a> <a href='/about'>About us</a> <a href='/shop'>Shop now</a></nav>\
             <article><h1>Fox news</h1><p>{}</p><p>{}</p><p>{}</p></article>\
             <footer>Copyright 2024 Example Corp. All rights reserved.</footer></body></html>",
        para.repeat(3),
        para.repeat(3),
        para.repeat(2)
    );
    let e = extract_markdown(&html, "https://example.com/fox");
    assert_eq!(e.method, Method::MainContent);
    assert_eq!(e.title, "Fox news");
    assert!(e.markdown.contains("The quick brown fox jumps"), "{e:?}");
    assert!(!e.markdown.contains("Shop now"), "{e:?}");
    assert!(!e.markdown.contains("All rights reserved"), "{e:?}");
}

#[test]
fn an_asciidoc_labelled_list_term_heads_its_description() {
    // git-stash.html: a subcommand term with placeholders written as entities.
    let html = "<div class=\"dlist\"><dl><dt class=\"hdlist1\">\npop [--index] [-q|--quiet] [&lt;stash&gt;]\n</dt>\n<dd>\n<p>Applying the state can fail with conflicts; in this case, it is not removed from the stash list.</p>\n</dd></dl></div>";
    let headed = definition_terms_as_headings(html);
    assert!(
        headed.contains("<p><strong>pop [--index] [-q|--quiet] [&lt;stash&gt;]</strong></p>"),
        "{headed}"
    );
    assert!(!headed.contains("<dt"), "{headed}");
}

#[test]
fn a_long_term_is_cut_with_a_closing_parenthesis_only_when_one_is_open() {
    let options = format!(
        "<dt class=\"hdlist1\">push {}</dt>",
        "[-p|--patch] ".repeat(8)
    );
    let headed = definition_terms_as_headings(&options);
    assert!(headed.contains("…</strong>"), "{headed}");
    let signature = format!(
        "<dt id=\"f\">f({})</dt>",
        (0..20)
            .map(|i| format!("a{i}=None"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let headed = definition_terms_as_headings(&signature);
    assert!(headed.contains("…)</strong>"), "{headed}");
}

#[test]
fn a_docbook_term_with_several_forms_lists_them() {
    // app-pgdump.html: an option's short and long forms on two lines of one term.
    let html = "<dl><dt><span class=\"term\"><code class=\"option\">-a</code><br /></span><span class=\"term\"><code class=\"option\">--data-only</code></span></dt><dd><p>Dump only the data, not the schema.</p></dd></dl>";
    let headed = definition_terms_as_headings(html);
    assert!(
        headed.contains("<p><strong>-a, --data-only</strong></p>"),
        "{headed}"
    );
}
