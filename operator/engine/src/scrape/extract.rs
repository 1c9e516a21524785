//! Main-content extraction from HTML to Markdown.
//!
//! The pipeline was chosen by measurement (see `operator/engine/benches/README.md`): rs-trafilatura
//! selects the main content and converts it to Markdown; when it returns almost nothing the
//! whole page is converted with htmd instead, so a model still sees the page's text.

use std::collections::HashSet;
use std::sync::LazyLock;

use regex::Regex;

/// Below this many `\w+` tokens the extracted content is treated as a miss.
pub const MIN_CONTENT_WORDS: usize = 25;

/// Tags whose content is never page text.
const SKIPPED_TAGS: [&str; 10] = [
    "script", "style", "noscript", "template", "iframe", "svg", "canvas", "head", "form", "button",
];

/// How the Markdown of a page was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// rs-trafilatura found the main content.
    MainContent,
    /// Main-content extraction found almost nothing; the whole page was converted.
    WholePage,
}

/// The readable content of an HTML page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extracted {
    /// The page title (empty when the page has none).
    pub title: String,
    /// Main content as Markdown.
    pub markdown: String,
    /// Which path produced `markdown`.
    pub method: Method,
}

/// Extracts the main content of `html` (fetched from `url`) as Markdown.
pub fn extract_markdown(html: &str, url: &str) -> Extracted {
    // Hostile nesting would overflow the recursive walks below (see `nesting`).
    let limited = super::nesting::limit_depth(html, super::nesting::MAX_DEPTH);
    let untitled = admonitions_untitled(&limited);
    let terms = definition_terms_as_headings(&untitled);
    let html: &str = &terms;
    let options = rs_trafilatura::Options {
        url: (!url.is_empty()).then(|| url.to_string()),
        ..rs_trafilatura::Options::default()
    };
    let (title, main) = match rs_trafilatura::extract_with_options(html, &options) {
        Ok(r) => {
            let text = r.content_text;
            let md = r
                .content_html
                .and_then(|h| html_to_markdown(&code_in_bare_pre(&h)))
                .map(|md| align_to_text(&md, &text))
                .unwrap_or_default();
            // The converter can lose text the extractor kept (odd markup); the plain text is
            // then the better answer, even without structure.
            let main = if word_count(&md) * 10 >= word_count(&text) * 9 {
                md
            } else {
                text
            };
            (r.metadata.title.unwrap_or_default(), main)
        }
        Err(e) => {
            tracing::debug!(url, error = %e, "main-content extraction failed");
            (String::new(), String::new())
        }
    };
    let title = best_title(&collapse_ws(&title), &html_title(html));
    let main = tidy(&main);
    if word_count(&main) >= MIN_CONTENT_WORDS {
        return Extracted {
            title,
            markdown: main,
            method: Method::MainContent,
        };
    }
    let whole = tidy(&whole_page_markdown(html));
    // Keep the extracted text if the whole page has no more words than it does.
    if word_count(&whole) <= word_count(&main) {
        return Extracted {
            title,
            markdown: main,
            method: Method::MainContent,
        };
    }
    Extracted {
        title,
        markdown: whole,
        method: Method::WholePage,
    }
}

/// Converts an HTML fragment to Markdown; `None` when it has no text.
fn html_to_markdown(html: &str) -> Option<String> {
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    converter
        .convert(html)
        .ok()
        .filter(|m| !m.trim().is_empty())
}

/// Pure: every `<pre>` without a `<code>` inside gets one, so the converter writes a fenced
/// code block. The extractor's HTML keeps Sphinx's code examples as bare `<pre>`, which the
/// converter turns into unfenced lines; a passage splitter then cut them at blank lines and a
/// small model quoted a stray `import csv` as a finding.
fn code_in_bare_pre(html: &str) -> std::borrow::Cow<'_, str> {
    if !html.contains("<pre>") {
        return std::borrow::Cow::Borrowed(html);
    }
    let mut out = String::with_capacity(html.len() + 64);
    let mut rest = html;
    while let Some(open) = rest.find("<pre>") {
        let body_start = open + "<pre>".len();
        let Some(close) = rest[body_start..].find("</pre>").map(|c| body_start + c) else {
            break;
        };
        let body = &rest[body_start..close];
        out.push_str(&rest[..open]);
        if body.trim_start().starts_with("<code") {
            out.push_str(&rest[open..close + "</pre>".len()]);
        } else {
            // Code inside the text (a grammar rule's `othername`) is not the block's code: left
            // in, the converter opened the fence mid-line ("**name** ::=  ```"), a splitter
            // reading fences at a line's start paired every later fence wrongly, and the whole
            // rest of Python's expressions page read as one code block.
            out.push_str("<pre><code>");
            out.push_str(&without_code_tags(body));
            out.push_str("</code></pre>");
        }
        rest = &rest[close + "</pre>".len()..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Pure: `html` without its `<code …>` and `</code>` tags (their text kept).
fn without_code_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = [rest.find("<code"), rest.find("</code")]
        .into_iter()
        .flatten()
        .min()
    {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let tag_end = after.find('>').map_or(after.len(), |e| e + 1);
        let tag = &after[..tag_end];
        // `<codex>` is no code tag: kept.
        let is_code = tag == "</code>" || tag.starts_with("<code>") || tag.starts_with("<code ");
        if !is_code {
            out.push_str(tag);
        }
        rest = &after[tag_end..];
    }
    out.push_str(rest);
    out
}

/// Markdown blocks (separated by blank lines), a fenced code block always one block whatever
/// blank lines it holds.
fn markdown_blocks(markdown: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    let mut open_fence = false;
    for block in markdown.split("\n\n") {
        if open_fence && let Some(last) = blocks.last_mut() {
            last.push_str("\n\n");
            last.push_str(block);
        } else {
            blocks.push(block.to_string());
        }
        let fences = block
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        if fences % 2 == 1 {
            open_fence = !open_fence;
        }
    }
    blocks
}

/// Keeps the Markdown blocks whose words the extractor's plain text also has.
///
/// rs-trafilatura's HTML output carries a few things its text output leaves out (the title
/// heading, date lines); measured on the bench, dropping blocks that are not in the text keeps
/// the Markdown structure at the text's precision.
fn align_to_text(markdown: &str, text: &str) -> String {
    let text_tokens = super::metric::tokens(text);
    let words: HashSet<&str> = text_tokens.iter().copied().collect();
    let shingles: HashSet<&[&str]> = text_tokens.windows(4).collect();
    let mut out = String::with_capacity(markdown.len());
    for block in markdown_blocks(markdown) {
        let block = block.as_str();
        let stripped = strip_markdown(block);
        let toks = super::metric::tokens(&stripped);
        let trimmed = block.trim();
        // A definition term turned into a bold line (see `definition_terms_as_headings`): the
        // extractor's text leaves it out, its HTML keeps it, and it names what follows.
        let term = trimmed.starts_with("**")
            && trimmed.ends_with("**")
            && !trimmed.contains('\n')
            && trimmed.chars().count() <= 90;
        let keep = if toks.is_empty() {
            false
        } else if term {
            true
        } else if toks.len() < 4 {
            toks.iter().all(|t| words.contains(t))
        } else {
            let windows = toks.len() - 3;
            let found = toks.windows(4).filter(|w| shingles.contains(w)).count();
            found * 2 >= windows
        };
        if keep {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(block.trim_matches('\n'));
        }
    }
    out
}

/// Converts the whole page to Markdown with htmd, skipping non-content tags (nesting bounded).
pub fn whole_page_markdown(html: &str) -> String {
    let html = super::nesting::limit_depth(html, super::nesting::MAX_DEPTH);
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    converter.convert(&html).unwrap_or_default()
}

/// Number of `\w+` tokens in a text.
pub fn word_count(text: &str) -> usize {
    super::metric::tokens(text).len()
}

static TITLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?is)<title[^>]*>(.*?)</title>")
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static MD_IMAGE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"!\[[^\]]*\]\([^)]*\)").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static MD_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static MD_REF_DEF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*\[[^\]]+\]:[ \t]*\S+.*$")
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static AUTOLINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"<(?:https?|mailto):[^<>\s]*>")
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});
static BLANK_RUNS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\n[ \t]*(\n[ \t]*)+\n").unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// Picks the page title: the metadata title, unless the `<title>` element contains it and says
/// more (documentation sites put the site name in metadata and the page name in `<title>`).
fn best_title(metadata: &str, element: &str) -> String {
    if metadata.is_empty() || (element.len() > metadata.len() && element.contains(metadata)) {
        element.to_string()
    } else {
        metadata.to_string()
    }
}

/// The `<title>` of a page, whitespace collapsed.
fn html_title(html: &str) -> String {
    TITLE
        .captures(html)
        .and_then(|c| c.get(1))
        .map(|m| collapse_ws(&decode_entities(m.as_str())))
        .unwrap_or_default()
}

/// Decodes the character references a `<title>` commonly holds (numeric, and the five XML ones).
fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let decoded = tail.find(';').filter(|&end| end <= 10).and_then(|end| {
            let name = &tail[1..end];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" | "#39" => Some('\''),
                n if n.starts_with("#x") || n.starts_with("#X") => u32::from_str_radix(&n[2..], 16)
                    .ok()
                    .and_then(char::from_u32),
                n if n.starts_with('#') => n[1..].parse::<u32>().ok().and_then(char::from_u32),
                _ => None,
            }?;
            Some((c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &tail[len..];
            }
            None => {
                out.push('&');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A definition term that is an anchor target (`<dt id=...>`): Sphinx's API entries
/// (`dl.function`, `dl.class`: `json.loads(s, *, cls=None, ...)`) and PostgreSQL's settings
/// (`<dt id="GUC-SHARED-BUFFERS">`). Their `headerlink` pilcrows go with them.
/// Also a DocBook term without an anchor (`<dt><span class="term">`): most of PostgreSQL's
/// command parameters (`GENERATED { ALWAYS | BY DEFAULT } AS IDENTITY`) have none, and their
/// descriptions were filed under the last anchored term before them (`PARTITION OF
/// parent_table`).
/// And AsciiDoc's labelled-list term (`<dt class="hdlist1">`): every option of a Git manual page
/// (`-p`, `--prune`) and every subcommand (`pop [--index] ...`), whose descriptions otherwise all
/// sat under the page's "OPTIONS" or "COMMANDS" heading with nothing naming them.
static ANCHORED_DT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?s)<dt(\s[^>]*?\bid="[^"]*"[^>]*)>(.*?)</dt>|<dt>(\s*<span class="term">.*?)</dt>|<dt class="hdlist1">(.*?)</dt>"#,
    )
    .expect("valid regex")
});
/// `<dl ...>`, `</dl>`, `<dd ...>`, `</dd>`.
static DL_DD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)<(/?)(dl|dd)(\s[^>]*)?>").expect("valid regex"));
/// A line break, `<br>` or `<br />`.
static BREAK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)<br\s*/?>").expect("valid regex"));
static TAG: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<[^>]*>").expect("valid regex"));
static HEADERLINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?s)<a class="headerlink"[^>]*>.*?</a>"#).expect("valid regex"));

/// Turns anchored definition terms into headings before extraction: main-content extraction
/// drops `<dt>` signatures, which left "Deserialize s ... to a Python object" with no
/// `json.loads` anywhere near it. As headings they survive and name the passages below them.
pub fn definition_terms_as_headings(html: &str) -> std::borrow::Cow<'_, str> {
    if !html.contains("<dt") {
        return std::borrow::Cow::Borrowed(html);
    }
    if !ANCHORED_DT.is_match(html) {
        return std::borrow::Cow::Borrowed(html);
    }
    let headed = ANCHORED_DT.replace_all(html, |c: &regex::Captures<'_>| {
        let term = c
            .get(2)
            .or_else(|| c.get(3))
            .or_else(|| c.get(4))
            .map_or("", |m| m.as_str());
        let inner = HEADERLINK.replace_all(term, "");
        // DocBook writes an option's forms on lines of one term (`-a<br />--data-only`): they
        // are a list, not one word.
        let inner = BREAK.replace_all(&inner, ", ");
        // Plain, short text: extraction drops long headings full of inline markup (a whole
        // signature with every default value).
        let text = collapse_ws(&decode_entities(&TAG.replace_all(&inner, "")));
        let short: String = if text.chars().count() > 80 {
            let cut: String = text.chars().take(76).collect();
            // A cut signature keeps its closing parenthesis; a cut option list needs none.
            let close = if cut.matches('(').count() > cut.matches(')').count() {
                ")"
            } else {
                ""
            };
            format!("{cut}…{close}")
        } else {
            text
        };
        // Decoded text goes back into HTML: `list [<log-options>]` must not become a tag.
        let short = short
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        format!("<p><strong>{short}</strong></p>")
    });
    // A heading is no valid child of <dl>: extraction would drop it with the list's structure.
    // The lists become plain blocks, the descriptions stay below their headings.
    let blocks = DL_DD.replace_all(&headed, "<${1}div>");
    std::borrow::Cow::Owned(blocks.into_owned())
}

/// An admonition's opening with its title heading: `<div class="note"><h3 class="title">Note</h3>`
/// (DocBook, the PostgreSQL docs).
static ADMONITION_TITLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?s)(<div class="(?:note|tip|warning|caution|important)"[^>]*>\s*)<h[1-6][^>]*>.*?</h[1-6]>"#,
    )
    .expect("valid regex")
});

/// Drops the title headings of admonitions ("Note", "Tip"): as headings they replaced the
/// section's own, and everything after a note stayed under "Note" (the paragraph "serial ... are
/// not true types" was filed under "8.1. Numeric Types › Note", not "8.1.4. Serial Types", and
/// ranked below table rows that named `serial` in their headings).
pub fn admonitions_untitled(html: &str) -> std::borrow::Cow<'_, str> {
    if !html.contains("class=\"") {
        return std::borrow::Cow::Borrowed(html);
    }
    ADMONITION_TITLE.replace_all(html, "$1")
}

/// Runs of whitespace replaced by one space, ends trimmed.
fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Collapses runs of blank lines and trims, so the model's budget is not spent on whitespace.
fn tidy(markdown: &str) -> String {
    BLANK_RUNS.replace_all(markdown.trim(), "\n\n").into_owned()
}

/// Reduces Markdown to its prose: images and link targets removed, link text kept.
///
/// Used to score Markdown with the word-shingle metric, where URLs would count as words.
pub fn strip_markdown(markdown: &str) -> String {
    let s = MD_IMAGE.replace_all(markdown, " ");
    let s = MD_LINK.replace_all(&s, "$1");
    let s = MD_REF_DEF.replace_all(&s, "");
    AUTOLINK.replace_all(&s, " ").into_owned()
}

#[cfg(test)]
mod tests;
