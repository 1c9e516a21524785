//! Pure: a report (model output) as HTML that cannot run script in the reader's browser, each
//! citation marked with what the evidence gate found (`findings.json`).
//!
//! Raw HTML in the Markdown is shown as text, never passed through; the HTML pulldown-cmark
//! writes is then cleaned by ammonia (only http, https and mailto links; no script, no event
//! handlers, no styles). The page's Content-Security-Policy is the third line of defence.

use std::collections::{BTreeSet, HashMap};

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;

/// What the evidence gate says of one cited URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// A claim citing it was checked against the page's text and is supported.
    Verified,
    /// Claims citing it were checked and none is supported by the page's text.
    Unsupported,
    /// The page was read, but no claim citing it was checked (a link list, a heading).
    Read,
    /// Not known to the run (not read, not checked).
    Unchecked,
}

impl Mark {
    /// CSS class and the word shown.
    pub fn class_and_label(self) -> (&'static str, &'static str) {
        match self {
            Mark::Verified => ("cite-verified", "verified"),
            Mark::Unsupported => ("cite-unsupported", "unsupported"),
            Mark::Read => ("cite-read", "source read"),
            Mark::Unchecked => ("cite-unchecked", "unchecked"),
        }
    }
}

/// The citation verdicts of one run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Citations {
    /// Per normalised URL: (claims supported, claims checked).
    claims: HashMap<String, (usize, usize)>,
    /// Normalised URLs the report cites that the run read.
    read: BTreeSet<String>,
    /// Citations the gate removed: the run neither read nor saw them.
    pub removed: Vec<String>,
}

/// Pure: a URL as compared here (no fragment, no trailing slash).
fn normal(url: &str) -> String {
    let url = url.split('#').next().unwrap_or(url);
    url.trim_end_matches('/').to_string()
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

impl Citations {
    /// Reads the verdicts from a `findings.json`.
    pub fn from_findings(findings: &Value) -> Self {
        let mut claims: HashMap<String, (usize, usize)> = HashMap::new();
        for c in findings["claims"].as_array().into_iter().flatten() {
            if let Some(url) = c["url"].as_str() {
                let e = claims.entry(normal(url)).or_default();
                e.1 += 1;
                if c["supported"].as_bool() == Some(true) {
                    e.0 += 1;
                }
            }
        }
        Self {
            claims,
            read: strings(&findings["citedUrls"]).map(normal).collect(),
            removed: strings(&findings["unverifiedReferences"])
                .map(str::to_string)
                .collect(),
        }
    }

    /// The verdict for a link to `url`.
    pub fn mark(&self, url: &str) -> Mark {
        let key = normal(url);
        match self.claims.get(&key) {
            Some((supported, _)) if *supported > 0 => Mark::Verified,
            Some(_) => Mark::Unsupported,
            None if self.read.contains(&key) => Mark::Read,
            None => Mark::Unchecked,
        }
    }

    /// The verdict's numbers for the sources table: (supported, checked) claims.
    pub fn counts(&self, url: &str) -> (usize, usize) {
        self.claims.get(&normal(url)).copied().unwrap_or((0, 0))
    }
}

/// Pure: the report as safe HTML with a mark after every link.
pub fn render_report(markdown: &str, citations: &Citations) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut links: Vec<String> = Vec::new();
    let events = Parser::new_ext(markdown, options).flat_map(|event| match event {
        // Raw HTML from the model is text to read, never markup.
        Event::Html(raw) | Event::InlineHtml(raw) => vec![Event::Text(raw)],
        Event::Start(Tag::Link { ref dest_url, .. }) => {
            links.push(dest_url.to_string());
            vec![event]
        }
        Event::End(TagEnd::Link) => {
            let url = links.pop().unwrap_or_default();
            let (class, label) = citations.mark(&url).class_and_label();
            // Written by this function, not by the model: the only HTML that is not escaped.
            let badge =
                format!(" <span class=\"cite {class}\" title=\"citation {label}\">{label}</span>");
            vec![event, Event::InlineHtml(CowStr::from(badge))]
        }
        other => vec![other],
    });
    let mut html = String::with_capacity(markdown.len() * 2);
    pulldown_cmark::html::push_html(&mut html, events);
    ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .add_tag_attributes("span", ["title"])
        .add_allowed_classes(
            "span",
            [
                "cite",
                "cite-verified",
                "cite-unsupported",
                "cite-read",
                "cite-unchecked",
            ],
        )
        .clean(&html)
        .to_string()
}

#[cfg(test)]
mod tests;
