//! Pure report assembly: citation verification, the Sources section, findings JSON and the
//! honest "unable to research" report.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::json;

use super::evidence::{ClaimCheck, EvidenceBase, check_claims, gate_links, subject};
use super::links::{LINK_RE, normalize_url};
use super::outputs::{ParsedOutput, ResearchItem};
use crate::research::machine::state::{FinalReport, RunState, SourceRef, TaskState};

#[allow(clippy::expect_used)]
static SOURCES_HEADING_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(#{1,6})\s*(sources|references|cited links|links|bibliography)\s*:?\s*$")
        .expect("valid regex")
});

/// Outcome of checking a report's citations against what the run fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationCheck {
    /// The Markdown with every unverified link removed (link text kept).
    pub markdown: String,
    /// Fetched URLs the text cites, in order of first citation.
    pub cited: Vec<String>,
    /// URLs that were cited but never fetched, removed from the text.
    pub removed: Vec<String>,
}

/// Keeps only citations of URLs in `fetched`; other links lose their target and bare URLs are dropped.
pub fn verify_citations(markdown: &str, fetched: &BTreeSet<String>) -> CitationCheck {
    let allowed: BTreeMap<String, &String> =
        fetched.iter().map(|u| (normalize_url(u), u)).collect();
    let mut cited = Vec::new();
    let mut removed = Vec::new();
    let out = LINK_RE.replace_all(markdown, |caps: &regex::Captures<'_>| {
        let (text, raw) = match (caps.get(1), caps.get(2), caps.get(3)) {
            (Some(t), Some(u), _) => (Some(t.as_str()), u.as_str()),
            (_, _, Some(u)) => (None, u.as_str()),
            _ => return caps[0].to_string(),
        };
        let trailing: String = {
            let trimmed = raw.trim_end_matches(['.', ',', ';', ':', '!', '?']);
            raw[trimmed.len()..].to_string()
        };
        let key = normalize_url(raw);
        if let Some(original) = allowed.get(&key) {
            if !cited.contains(*original) {
                cited.push((*original).clone());
            }
            caps[0].to_string()
        } else {
            if !removed.contains(&key) {
                removed.push(key);
            }
            match text {
                Some(t) => t.to_string(),
                None => trailing,
            }
        }
    });
    CitationCheck {
        markdown: out.into_owned(),
        cited,
        removed,
    }
}

/// Cleans a model's Markdown answer: unwraps one outer code fence (```markdown ... ```), and cuts
/// degenerate repetition at the first paragraph that repeats an earlier one verbatim, with any
/// headings left dangling before the cut.
pub fn tidy_model_markdown(text: &str) -> String {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let body = rest.split_once('\n').map(|(_, b)| b).unwrap_or("");
        t = body.trim_end().strip_suffix("```").unwrap_or(body).trim();
    }
    let blocks: Vec<&str> = t
        .split("\n\n")
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    let mut kept: Vec<&str> = Vec::with_capacity(blocks.len());
    for block in blocks {
        let paragraph = !block.starts_with('#') && block.len() >= 40;
        if paragraph && kept.contains(&block) {
            while kept.last().is_some_and(|b| b.starts_with('#')) {
                kept.pop();
            }
            break;
        }
        kept.push(block);
    }
    kept.join("\n\n")
}

/// Removes a model-written Sources/References section; the verified one is appended instead.
pub fn strip_sources_section(markdown: &str) -> String {
    let mut out = Vec::new();
    let mut skipping: Option<usize> = None;
    for line in markdown.lines() {
        if let Some(level) = skipping {
            let heading_level = line.chars().take_while(|c| *c == '#').count();
            if heading_level > 0 && heading_level <= level && line[heading_level..].starts_with(' ')
            {
                skipping = None;
            } else {
                continue;
            }
        }
        if let Some(caps) = SOURCES_HEADING_RE.captures(line.trim()) {
            skipping = Some(caps[1].len());
            continue;
        }
        out.push(line);
    }
    out.join("\n").trim_end().to_string()
}

/// Every page the run fetched, with the best title known for it.
pub fn fetched_sources(state: &RunState) -> Vec<SourceRef> {
    let mut by_url: BTreeMap<String, String> = BTreeMap::new();
    for r in &state.reports {
        for s in &r.fetched {
            let entry = by_url.entry(s.url.clone()).or_default();
            if entry.is_empty() {
                entry.clone_from(&s.title);
            }
        }
    }
    by_url
        .into_iter()
        .map(|(url, title)| SourceRef::new(url, title))
        .collect()
}

/// A per-document summary, or the page's opening text when the summary
/// failed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceNote {
    pub url: String,
    pub title: String,
    pub text: String,
    /// False when the summary failed and `text` is the page's opening text.
    pub summarized: bool,
}

/// The model's output before the evidence gate: a study body and/or idea and implementation items.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Draft {
    /// Per-document summaries the outputs were written from.
    pub source_notes: Vec<SourceNote>,
    /// The study report Markdown (or the researchers' merged reports).
    pub study: Option<String>,
    /// Ideas, when requested.
    pub ideas: Option<ParsedOutput>,
    /// Implementations, when requested.
    pub implementations: Option<ParsedOutput>,
    /// Problems worth telling the reader (an output call that failed, truncated output).
    pub notes: Vec<String>,
}

impl Draft {
    /// A draft holding only a study body.
    pub fn study(body: &str) -> Self {
        Self {
            study: Some(body.to_string()),
            ..Self::default()
        }
    }
}

/// A draft after the evidence gate.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    /// The draft with every unverifiable citation removed and item sources resolved.
    pub draft: Draft,
    /// Verified URLs cited, in order of first citation.
    pub cited: Vec<String>,
    /// Cited URLs the run neither fetched nor saw (normalized), removed.
    pub unverified: Vec<String>,
    /// Items dropped because their source was unverifiable.
    pub items_unverified: u32,
    /// Support verdicts of every cited claim.
    pub claims: Vec<ClaimCheck>,
}

fn push_unique(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for i in items {
        if !list.contains(&i) {
            list.push(i);
        }
    }
}

/// Runs the evidence gate over a draft: unverifiable links removed, items whose
/// source the run never saw dropped, every cited claim checked against the cited text.
pub fn check(state: &RunState, draft: Draft) -> Checked {
    let base = EvidenceBase::from_state(state);
    let mut cited = Vec::new();
    let mut unverified = Vec::new();
    let mut claims = Vec::new();
    let mut items_unverified = 0;
    let study = draft.study.map(|body| {
        let gated = gate_links(&strip_sources_section(&body), &base);
        claims.extend(check_claims(&gated.markdown, &base, &state.input.query));
        push_unique(&mut cited, gated.cited);
        push_unique(&mut unverified, gated.unverified);
        gated.markdown
    });
    let mut gate_items = |parsed: Option<ParsedOutput>| {
        parsed.map(|mut p| {
            let mut kept = Vec::new();
            for item in p.items {
                let Some(source) = base.resolve(&item.source).map(str::to_string) else {
                    items_unverified += 1;
                    push_unique(&mut unverified, [normalize_url(&item.source)]);
                    continue;
                };
                let gated = gate_links(&item.content, &base);
                claims.extend(check_claims(&gated.markdown, &base, &state.input.query));
                push_unique(&mut cited, [source.clone()]);
                push_unique(&mut cited, gated.cited);
                push_unique(&mut unverified, gated.unverified);
                kept.push(ResearchItem {
                    source,
                    content: gated.markdown,
                });
            }
            p.items = kept;
            p
        })
    };
    let ideas = gate_items(draft.ideas);
    let implementations = gate_items(draft.implementations);
    Checked {
        draft: Draft {
            source_notes: draft.source_notes,
            study,
            ideas,
            implementations,
            notes: draft.notes,
        },
        cited,
        unverified,
        items_unverified,
        claims,
    }
}

/// The progressive Markdown: every finished researcher report in agenda order,
/// readable while the run goes on and kept if it never finishes. Citations here have not been
/// through the evidence gate yet; the final report's have.
pub fn progress_markdown(state: &RunState) -> String {
    let mut md = format!(
        "# {} (in progress)

",
        one_line(&state.input.query)
    );
    md.push_str(&format!(
        "_Phase {}, round {}: {} of {} tasks reported. Researcher reports as written; the final report checks every citation._\n",
        state.phase,
        state.round,
        state.reports.len(),
        state.agenda.len()
    ));
    let mut reports: Vec<_> = state.reports.iter().collect();
    reports.sort_by_key(|r| r.task_id);
    for r in reports {
        let task = state
            .agenda
            .iter()
            .find(|t| t.id == r.task_id)
            .map_or_else(|| format!("Task {}", r.task_id), |t| one_line(&t.query));
        md.push_str(&format!("\n## {task}\n\n{}\n", r.markdown.trim()));
    }
    md
}

/// Builds the final report from a body: the evidence gate, a Sources section, findings JSON.
pub fn compose(state: &RunState, body: &str, partial: bool) -> FinalReport {
    render(state, check(state, Draft::study(body)), partial)
}

/// Renders a checked draft as `report.md` and `findings.json`.
pub fn render(state: &RunState, checked: Checked, partial: bool) -> FinalReport {
    let base = EvidenceBase::from_state(state);
    let fetched = fetched_sources(state);
    // Cited sources first (in citation order), then the rest the run read.
    let mut ordered: Vec<SourceRef> = Vec::new();
    for url in &checked.cited {
        let title = base.title(url).unwrap_or_default();
        ordered.push(SourceRef::new(url.clone(), title));
    }
    for s in &fetched {
        if !ordered.iter().any(|o| o.url == s.url) {
            ordered.push(s.clone());
        }
    }
    let study = checked.draft.study.clone().unwrap_or_default();
    let mut md = String::new();
    if !study.trim_start().starts_with("# ") {
        md.push_str(&format!("# {}\n\n", one_line(&state.input.query)));
    }
    if partial {
        md.push_str("> **Partial report**: the run stopped at a limit before research was complete; this is what was found so far.\n\n");
    }
    md.push_str(study.trim());
    for (heading, parsed) in [
        ("Ideas", &checked.draft.ideas),
        ("Implementations", &checked.draft.implementations),
    ] {
        let Some(parsed) = parsed else { continue };
        md.push_str(&format!("\n\n## {heading}\n"));
        if parsed.items.is_empty() {
            md.push_str(&format!(
                "\n_No {} could be drawn from the sources this run read._\n",
                heading.to_lowercase()
            ));
        }
        for (i, item) in parsed.items.iter().enumerate() {
            let title = base
                .title(&item.source)
                .filter(|t| !t.trim().is_empty())
                .unwrap_or(&item.source);
            md.push_str(&format!(
                "\n### {}. {}\n\n{}\n\n_Source: [{}]({})_\n",
                i + 1,
                one_line(title),
                demote(&item.content, 2).trim(),
                escape_link_text(one_line(title).as_str()),
                item.source
            ));
        }
    }
    // What changed since an earlier run: new claims keep their (gated) links.
    let changes = state.input.earlier.as_ref().map(|earlier| {
        let sources: Vec<String> = ordered.iter().map(|s| s.url.clone()).collect();
        super::changes::diff(earlier, &checked.claims, &sources)
    });
    if let Some(changes) = &changes {
        md.push('\n');
        md.push_str(&super::changes::section(changes));
    }
    // Sources are the pages the report cites; the rest the run read are listed apart, folded:
    // a one-fact answer listed 13 sources, most of them unrelated.
    md.push_str("\n\n## Sources\n\n");
    let (cited, also): (Vec<&SourceRef>, Vec<&SourceRef>) =
        ordered.iter().partition(|s| checked.cited.contains(&s.url));
    let entry = |i: usize, s: &SourceRef| {
        let title = if s.title.trim().is_empty() {
            s.url.as_str()
        } else {
            s.title.trim()
        };
        let note = if base.was_fetched(&s.url) {
            ""
        } else {
            " (search result, not read)"
        };
        format!(
            "{}. [{}]({}){note}\n",
            i + 1,
            escape_link_text(title),
            s.url
        )
    };
    if cited.is_empty() {
        md.push_str("_The report cites no page._\n");
    }
    for (i, s) in cited.iter().enumerate() {
        md.push_str(&entry(i, s));
    }
    if !also.is_empty() {
        md.push_str(&format!(
            "\n<details>\n<summary>Also read ({} page(s), not cited)</summary>\n\n",
            also.len()
        ));
        for (i, s) in also.iter().enumerate() {
            md.push_str(&entry(i, s));
        }
        md.push_str("\n</details>\n");
    }
    if !checked.unverified.is_empty() {
        md.push_str(&format!(
            "\n_{} citation(s) to pages this run neither read nor saw in search results were removed._\n",
            checked.unverified.len()
        ));
    }
    let checked_count = u32::try_from(checked.claims.len()).unwrap_or(u32::MAX);
    let supported =
        u32::try_from(checked.claims.iter().filter(|c| c.supported).count()).unwrap_or(u32::MAX);
    if checked_count > 0 {
        md.push_str(&format!(
            "\n_Citation check: {supported} of {checked_count} cited claims are supported by the text of the source they cite (precision {:.2})._\n",
            f64::from(supported) / f64::from(checked_count)
        ));
        let unsupported: Vec<&ClaimCheck> =
            checked.claims.iter().filter(|c| !c.supported).collect();
        for c in unsupported.iter().take(10) {
            md.push_str(&format!(
                "- Not supported by {}: \"{}\"\n",
                c.url,
                one_line(&c.claim)
            ));
        }
        if unsupported.len() > 10 {
            md.push_str(&format!(
                "- … and {} more (see findings.json)\n",
                unsupported.len() - 10
            ));
        }
    }
    for note in &checked.draft.notes {
        md.push_str(&format!("\n_{note}_\n"));
    }
    let findings = findings_json(state, &ordered, &checked, partial, false, changes.as_ref());
    FinalReport {
        markdown: md,
        findings_json: findings,
        sources: ordered,
        partial,
        aborted: false,
        claims_checked: checked_count,
        claims_supported: supported,
        changes: changes
            .as_ref()
            .map(|c| u32::try_from(c.count()).unwrap_or(u32::MAX)),
    }
}

/// Pushes Markdown headings `levels` levels down (capped at `######`), outside code fences.
pub fn demote(md: &str, levels: usize) -> String {
    let mut in_fence = false;
    md.lines()
        .map(|l| {
            if l.trim_start().starts_with("```") {
                in_fence = !in_fence;
            }
            let hashes = l.chars().take_while(|c| *c == '#').count();
            if !in_fence && hashes > 0 && l[hashes..].starts_with(' ') {
                format!("{}{}", "#".repeat((hashes + levels).min(6)), &l[hashes..])
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The abort path: an honest report when no usable source was found, instead of an invented one.
pub fn abort_report(state: &RunState) -> FinalReport {
    let q = one_line(&state.input.query);
    let searched = state.searches;
    let mut queries: Vec<&str> = Vec::new();
    let mut read: Vec<(&str, &str)> = Vec::new();
    for r in &state.reports {
        for query in &r.queries {
            if !queries.contains(&query.as_str()) {
                queries.push(query);
            }
        }
        for s in &r.fetched {
            if !read.iter().any(|(u, _)| *u == s.url) {
                read.push((&s.url, &s.title));
            }
        }
    }
    // Pages whose passages were shown but left out a subject of the question (the researcher's
    // answerability gate keeps them, closest first): the reader sees what came nearest.
    let mut closest: Vec<(&str, &str)> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut heads: Vec<String> = Vec::new();
    for r in &state.reports {
        for p in &r.pages {
            if !closest.iter().any(|(u, _)| *u == p.url) {
                closest.push((&p.url, &p.title));
                texts.push(format!(
                    "{}\n{}\n{}",
                    p.title,
                    p.text,
                    subject::address_words(&p.url)
                ));
                // A page's text is its passages under their breadcrumbs: those lines say what
                // the passages are about.
                let breadcrumbs: Vec<&str> =
                    p.text.lines().filter(|l| l.starts_with('§')).collect();
                heads.push(format!("{}\n{}", p.title, breadcrumbs.join("\n")));
            }
        }
    }
    // As the researcher's gate judged them: only the asked product's pages count.
    let read_urls: Vec<&str> = read.iter().map(|(u, _)| *u).collect();
    let mask = subject::of_asked_product(&state.input.query, &closest, &read_urls);
    // Every page read is another product's docs: that is what keeps them from answering.
    let other_product = (!closest.is_empty() && !mask.contains(&true))
        .then(|| subject::asked_product(&state.input.query, &read_urls))
        .flatten();
    let keep = |v: Vec<String>| -> Vec<String> {
        v.into_iter()
            .zip(&mask)
            .filter_map(|(t, k)| k.then_some(t))
            .collect()
    };
    let (heads, texts) = (keep(heads), keep(texts));
    let missing = if closest.is_empty() {
        vec![]
    } else {
        subject::unanswerable(&state.input.query, &heads, &texts)
    };
    let finding = if read.is_empty() {
        "found no source it could read for this question".to_string()
    } else if let Some(product) = other_product {
        format!(
            "read {} page(s), and none of them is of {product}'s documentation, which the question asks about",
            read.len()
        )
    } else if !missing.is_empty() {
        let names: Vec<String> = missing.iter().map(|m| subject::as_code(m)).collect();
        format!(
            "read {} page(s), and none of them names {}, which the question asks about",
            read.len(),
            names.join(", ")
        )
    } else {
        format!(
            "read {} page(s), and no passage of any of them matches the question",
            read.len()
        )
    };
    let mut md = format!(
        "# Unable to research: {q}\n\n\
         ## Research limitations\n\n\
         After {searched} search(es) in {rounds} round(s), this run {finding}, \
         so it wrote no findings rather than inventing them. The sources searched do not answer the question.\n\n\
         ## What this means\n\n\
         Nothing in this report is an answer to the question. No claims were made and no sources are cited.\n",
        rounds = state.round.max(1),
    );
    if !queries.is_empty() {
        md.push_str("\n## What was searched\n\n");
        for query in queries.iter().take(20) {
            md.push_str(&format!("- `{}`\n", one_line(query).replace('`', "'")));
        }
    }
    let line = |url: &str, title: &str| {
        let title = if title.trim().is_empty() {
            "(untitled)"
        } else {
            title.trim()
        };
        format!("- {} — <{url}>\n", one_line(title))
    };
    if !closest.is_empty() {
        md.push_str("\n## Closest pages read (none of them answers the question)\n\n");
        for (url, title) in closest.iter().take(5) {
            md.push_str(&line(url, title));
        }
    }
    let rest: Vec<&(&str, &str)> = read
        .iter()
        .filter(|(u, _)| !closest.iter().take(5).any(|(c, _)| c == u))
        .collect();
    if !rest.is_empty() {
        md.push_str(if closest.is_empty() {
            "\n## What was read (none of it answers the question)\n\n"
        } else {
            "\n## What else was read\n\n"
        });
        for (url, title) in rest.into_iter().take(20) {
            md.push_str(&line(url, title));
        }
    }
    md.push_str(
        "\n## Suggestions\n\n\
         - Rephrase the question with more common terms, or split it into narrower questions.\n\
         - Check that the search engine the profile names is reachable and covers this topic.\n\
         - Check the profile's fetch policy: pages on denied or non-allow-listed hosts are not read.\n",
    );
    let empty = Checked {
        draft: Draft::default(),
        cited: vec![],
        unverified: vec![],
        items_unverified: 0,
        claims: vec![],
    };
    let findings = findings_json(state, &[], &empty, false, true, None);
    FinalReport {
        markdown: md,
        findings_json: findings,
        sources: vec![],
        partial: false,
        aborted: true,
        claims_checked: 0,
        claims_supported: 0,
        changes: None,
    }
}

fn findings_json(
    state: &RunState,
    sources: &[SourceRef],
    checked: &Checked,
    partial: bool,
    aborted: bool,
    changes: Option<&super::changes::Changes>,
) -> String {
    let tasks: Vec<_> = state
        .agenda
        .iter()
        .map(|t| {
            json!({
                "id": t.id, "query": t.query, "round": t.round,
                "state": match t.state { TaskState::Pending => "Pending", TaskState::Running => "Running", TaskState::Done => "Done", TaskState::Failed => "Failed" },
                "error": t.error,
            })
        })
        .collect();
    let reports: Vec<_> = state
        .reports
        .iter()
        .map(|r| json!({"taskId": r.task_id, "markdown": r.markdown, "fetched": r.fetched, "searches": r.searches}))
        .collect();
    let items = |p: &Option<ParsedOutput>| p.as_ref().map(|p| json!(p.items));
    let dropped = |p: &Option<ParsedOutput>| p.as_ref().map_or(0, |p| p.dropped);
    let supported = checked.claims.iter().filter(|c| c.supported).count();
    let precision = (!checked.claims.is_empty())
        .then(|| ((supported as f64 / checked.claims.len() as f64) * 1000.0).round() / 1000.0);
    let v = json!({
        "query": state.input.query,
        "mode": state.input.mode,
        "outputs": state.input.outputs,
        "topK": state.input.top_k,
        "partial": partial,
        "aborted": aborted,
        "rounds": state.round,
        "tasks": tasks,
        "researcherReports": reports,
        "study": checked.draft.study,
        "ideas": items(&checked.draft.ideas),
        "implementations": items(&checked.draft.implementations),
        "droppedItems": {
            "malformed": {"ideas": dropped(&checked.draft.ideas), "implementations": dropped(&checked.draft.implementations)},
            "unverifiedSource": checked.items_unverified,
        },
        "notes": checked.draft.notes,
        "sourceNotes": checked.draft.source_notes,
        "sources": sources,
        "citedUrls": checked.cited,
        "unverifiedReferences": checked.unverified,
        "citationPrecision": precision,
        "claims": checked.claims,
        "changes": changes,
        "usage": {
            "inputTokens": state.usage.input_tokens,
            "outputTokens": state.usage.output_tokens,
            "llmCalls": state.usage.llm_calls,
            "costUSD": state.usage.cost_usd_string(),
            "searches": state.searches,
            "pagesFetched": state.pages_fetched,
            "byModel": state.usage_by_model.iter().map(|(model, u)| (model.clone(), json!({
                "inputTokens": u.input_tokens,
                "cachedInputTokens": u.cached_input_tokens,
                "outputTokens": u.output_tokens,
                "costUSD": u.cost_usd_string(),
                "llmCalls": u.llm_calls,
            }))).collect::<serde_json::Map<String, serde_json::Value>>(),
        },
    });
    serde_json::to_string_pretty(&v).unwrap_or_else(|_| "{}".to_string())
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > 200 {
        s.chars().take(200).collect::<String>() + "…"
    } else {
        s
    }
}

fn escape_link_text(s: &str) -> String {
    s.replace('[', "\\[").replace(']', "\\]")
}

#[cfg(test)]
mod tests;
