//! The agent researcher: gathering, scraping, reporting, within its tool budgets.
//!
//! This is the imperative shell around one model conversation; the budgets are the pure
//! [`ToolBudget`], the prompts come from [`prompts`].

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::join_all;
use serde_json::json;

use super::budget::{GATHER_CALLS, ScrapeStep, ToolBudget};
use super::prompts;
use crate::llm::json_extract::{extract_json_object, strip_think};
use crate::llm::{
    CallPurpose, ChatModel, ChatRequest, LlmError, Message, ToolCall, ToolSpec, Usage,
};
use crate::research::machine::state::{
    Failure, PageExtract, ResearcherReport, RunInput, SourceRef,
};
use crate::research::reading::queries;
use crate::research::reading::scoring::{
    MIN_PASSING_SOURCES, Reformulation, adaptive_threshold, reformulate, score, social_ratio,
};
use crate::research::writing::evidence::LISTING_HEADINGS;
use crate::research::writing::grounded;
use crate::research::writing::report;
use crate::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use crate::scrape::{FetchError, Fetcher, truncate_head, truncate_page};
use crate::sources::security::SecurityQuery;
use crate::sources::{Gatherer, SearchHit, SpecialisedSources, ToolAnswer};
use quarry_vocab::reasons;

/// Characters of each page kept for the extractive fallback report.
const EXCERPT_CHARS: usize = 600;

/// Largest report injected from a sibling (up to 50k chars).
pub const INJECTED_REPORT_CHARS: usize = 50_000;
/// Characters of a search snippet kept as evidence for citations of unread results.
const SNIPPET_CHARS: usize = 500;
/// URLs listed by the scrape handshake at most.
const HANDSHAKE_LIST: usize = 40;

/// Reports of siblings that finish while a researcher runs, steered in before its next model
/// turn.
pub type SteeringInbox = tokio::sync::mpsc::UnboundedReceiver<ResearcherReport>;

/// Tunables of a researcher.
#[derive(Debug, Clone, PartialEq)]
pub struct ResearcherSettings {
    /// Characters of one page shown to the model (small local models need ~6000).
    pub page_chars: usize,
    /// Search hits kept per query.
    pub results_per_query: usize,
    /// Hard cap on model turns, whatever the model does.
    pub max_turns: u32,
    /// Output cap of each model call.
    pub max_output_tokens: u32,
    /// The engine drives search and reading and the model only answers (see `guided`);
    /// `None` decides by the model's context window.
    pub guided: Option<bool>,
}

impl Default for ResearcherSettings {
    fn default() -> Self {
        Self {
            page_chars: 6000,
            results_per_query: 8,
            max_turns: 14,
            max_output_tokens: 1024,
            guided: None,
        }
    }
}

/// Everything a researcher needs to work.
#[derive(Clone)]
pub struct ResearcherDeps {
    pub model: Arc<dyn ChatModel>,
    pub gatherer: Arc<dyn Gatherer>,
    pub fetcher: Arc<dyn Fetcher>,
    pub pool: Arc<UrlPool>,
    pub settings: ResearcherSettings,
    /// Security advisories and Stack Exchange; their tools are offered only when set.
    pub specialised: Option<Arc<SpecialisedSources>>,
}

/// Maps a model error onto the reason a person sees on the run.
pub fn failure_from_llm(err: &LlmError) -> Failure {
    let reason = match err.unbilled() {
        LlmError::Unreachable { .. } | LlmError::Timeout { .. } => reasons::MODEL_UNREACHABLE,
        LlmError::Status { status, .. } if *status == 429 || *status >= 500 => {
            reasons::MODEL_UNREACHABLE
        }
        LlmError::Status { .. } | LlmError::Config(_) => reasons::MODEL_REJECTED,
        LlmError::Malformed(_) | LlmError::Garbled(_) | LlmError::Degenerate { .. } => {
            reasons::MODEL_OUTPUT_INVALID
        }
        LlmError::CircuitOpen { .. } => reasons::MODEL_UNREACHABLE,
        LlmError::BudgetExhausted { tokens: false, .. } => reasons::COST_LIMIT,
        LlmError::BudgetExhausted { tokens: true, .. } => reasons::TOKEN_LIMIT,
        LlmError::Billed { .. } => reasons::MODEL_OUTPUT_INVALID,
    };
    Failure::new(reason, err.to_string())
}

fn tools(specialised: Option<&SpecialisedSources>) -> Vec<ToolSpec> {
    let mut tools = vec![
        ToolSpec {
            name: "search".into(),
            description: "Search the web. Returns titles, URLs and snippets.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}},
                "required": ["queries"]
            }),
        },
        ToolSpec {
            name: "scrape".into(),
            description: "Read web pages. The first call is a handshake listing URLs already read by other researchers; later calls read up to 3, 2 and 3 URLs.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"urls": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3}},
                "required": ["urls"]
            }),
        },
    ];
    // The specialised tools share the gathering budget with `search`, so offering them never
    // lets a researcher gather more.
    if specialised.is_some_and(|s| s.security.is_some()) {
        tools.push(ToolSpec {
            name: "security_search".into(),
            description: "Look up security advisories (NVD, CISA KEV, GitHub, OSV) by CVE id, by package (with its ecosystem and version), or by short keywords. Uses one search call.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "A CVE id or a few keywords"},
                    "package": {"type": "string"},
                    "ecosystem": {"type": "string", "description": "e.g. PyPI, npm, Maven, Go, crates.io"},
                    "version": {"type": "string"}
                },
                "required": ["query"]
            }),
        });
    }
    if specialised.is_some_and(|s| s.stackexchange.is_some()) {
        tools.push(ToolSpec {
            name: "stackexchange".into(),
            description: "Search Stack Exchange questions (Stack Overflow by default). Uses one search call.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "site": {"type": "string", "description": "e.g. stackoverflow, serverfault, unix, superuser"}
                },
                "required": ["query"]
            }),
        });
    }
    tools
}

/// The sentence telling the model which extra gathering tools it has (empty when none).
fn specialised_tools_note(specialised: Option<&SpecialisedSources>) -> String {
    let mut names = Vec::new();
    if specialised.is_some_and(|s| s.security.is_some()) {
        names.push("`security_search` (vulnerability advisories)");
    }
    if specialised.is_some_and(|s| s.stackexchange.is_some()) {
        names.push("`stackexchange` (Q&A from Stack Overflow and its sister sites)");
    }
    if names.is_empty() {
        String::new()
    } else {
        format!(
            " {} share this budget; their results can be read with `scrape` like search results.",
            names.join(" and ")
        )
    }
}

/// Conversation state of one researcher.
struct Session<'a> {
    deps: &'a ResearcherDeps,
    /// Reports units and per-call usage as they happen.
    progress: &'a (dyn Fn(u32, Usage) + Send + Sync),
    budget: ToolBudget,
    messages: Vec<Message>,
    usage: Usage,
    seen: Vec<SearchHit>,
    fetched: Vec<SourceRef>,
    /// The pages read that bear on the task, as shown to the model (the evidence the gate
    /// checks claims against and the reporting fallbacks quote).
    pages: Vec<PageExtract>,
    /// Pages read whose passages match nothing of the task: read, on the record, never shown.
    irrelevant: Vec<String>,
    /// Normalised queries already run, so a repeat does not spend the search budget.
    queries: Vec<String>,
    /// True once the task itself was searched (the first search call of the conversation).
    seeded: bool,
    /// The last call failed on the model's own output (degenerate, unparsable), not on the
    /// server: the engine may go on without it.
    model_fault: bool,
    searches: u32,
    /// URLs the user named in the question or context: readable without a search.
    known_urls: Vec<String>,
    /// The task this researcher investigates.
    task: String,
    /// Score of every search result seen, by URL.
    scores: std::collections::BTreeMap<String, f64>,
    /// Reformulated searches made so far (broaden, narrow, synonyms).
    reformulations: u32,
    /// Sibling reports arriving while this researcher runs.
    steering: Option<SteeringInbox>,
    /// Task ids of the reports steered in so far.
    steered: Vec<u32>,
    /// Messages covered by the last server-reported token count, and that count.
    anchor: Option<(usize, u64)>,
    /// Characters of each page kept for the model (the settings', or more when guided).
    page_chars: usize,
}

fn urls_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>' | '"'))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| w.trim_end_matches(['.', ',', ';']).to_string())
        .collect()
}

/// Caps text at `max` characters with a notice, within the byte and line budgets of every tool
/// output (`scrape::truncate`).
fn truncate_chars(text: &str, max: usize) -> String {
    truncate_page(text, max).text
}

/// Runs one researcher on one task and returns its report.
///
/// `progress` receives tool-call units as they are used (the run's progress percentage).
pub async fn run_researcher(
    deps: &ResearcherDeps,
    input: &RunInput,
    task_id: u32,
    task: &str,
    injected: &[ResearcherReport],
    steering: Option<SteeringInbox>,
    progress: &(dyn Fn(u32, Usage) + Send + Sync),
) -> Result<ResearcherReport, Failure> {
    let system = prompts::render(
        prompts::RESEARCHER,
        &[
            ("gather_budget", &GATHER_CALLS.to_string()),
            (
                "specialised_tools",
                &specialised_tools_note(deps.specialised.as_deref()),
            ),
        ],
    );
    let context = match &input.context {
        Some(c) if !c.trim().is_empty() => {
            format!("\nBackground from the user:\n{}\n", truncate_chars(c, 8000))
        }
        _ => String::new(),
    };
    let injected_text = if injected.is_empty() {
        String::new()
    } else {
        let mut s = String::from(
            "\nWhat other researchers of this run already found (do not repeat their work):\n",
        );
        for r in injected {
            s.push_str(&format!(
                "\n--- report of researcher {} ---\n{}\n",
                r.task_id,
                truncate_chars(&r.markdown, INJECTED_REPORT_CHARS)
            ));
        }
        s
    };
    let user = prompts::render(
        prompts::RESEARCHER_TASK,
        &[
            ("task", task),
            ("query", &input.query),
            ("context", &context),
            ("injected", &injected_text),
        ],
    );
    let mut s = Session {
        deps,
        progress,
        budget: ToolBudget::default(),
        messages: vec![Message::system(system), Message::user(user)],
        usage: Usage::default(),
        seen: vec![],
        fetched: vec![],
        pages: vec![],
        irrelevant: vec![],
        queries: vec![],
        seeded: false,
        model_fault: false,
        task: task.to_string(),
        scores: Default::default(),
        reformulations: 0,
        steering,
        steered: injected.iter().map(|r| r.task_id).collect(),
        anchor: None,
        page_chars: deps.settings.page_chars,
        searches: 0,
        known_urls: urls_in(&format!(
            "{} {}",
            input.query,
            input.context.as_deref().unwrap_or_default()
        )),
    };
    if guided::guides(deps.model.as_ref(), &deps.settings) {
        return s.guided_report(task_id, task).await;
    }
    let mut groundings = 0;
    let mut unusable_answers = 0;
    let mut invalid_turns = 0;
    let mut idle_turns = 0;
    for _turn in 0..deps.settings.max_turns {
        let out_of_tools = s.budget.gathering_exhausted() && s.budget.scraping_exhausted();
        let resp = match s.call(!out_of_tools).await {
            Ok(resp) => resp,
            // One bad output is not the end of a run: ask once more, briefly; after a second,
            // the engine goes on without the model's tool calls (search the task, read the best
            // results, report from them) and fails only if that yields nothing.
            Err(f) if s.model_fault => {
                invalid_turns += 1;
                tracing::info!(invalid_turns, error = %f.message, "unusable model turn");
                if invalid_turns >= 2 {
                    return s.fallback_report(task_id, task).await;
                }
                s.messages.push(Message::user(
                    "Your last answer could not be used (it repeated itself or was not valid). Answer again, briefly: call exactly one tool, or write your report.",
                ));
                continue;
            }
            Err(f) => return Err(f),
        };
        s.model_fault = false;
        if resp.tool_calls.is_empty() {
            let text = strip_think(&resp.content).trim().to_string();
            if groundings < 2 && s.ground_if_needed(task).await {
                groundings += 1;
                progress(s.budget.units(), Usage::default());
                continue;
            }
            if text.is_empty() || looks_like_tool_call(&text) {
                unusable_answers += 1;
                if unusable_answers >= 2 {
                    return s.fallback_report(task_id, task).await;
                }
                s.messages.push(Message::user(
                    "That was not a report. Do not call tools now: write your report in Markdown prose, citing the pages you read.",
                ));
                continue;
            }
            if !s.cites_a_read_page(&text) {
                // A report that cites none of the pages read is not grounded: ask again cleanly.
                return s.fallback_report(task_id, task).await;
            }
            return Ok(finish(s, task_id, text));
        }
        s.messages.push(Message::assistant(
            resp.content.clone(),
            resp.tool_calls.clone(),
        ));
        let before = (s.seen.len(), s.fetched.len(), s.budget.units());
        for call in &resp.tool_calls {
            let result = s.run_tool(call).await;
            s.messages.push(Message::tool(call.id.clone(), result));
        }
        progress(s.budget.units(), Usage::default());
        // A turn that found nothing new and used no budget (a refused or repeated call) is idle.
        // Weak models repeat one call for a dozen turns (13 identical turns, 48k
        // tokens); after two idle turns the engine moves on for them: it reads the best results
        // when nothing was read yet, and otherwise asks for the answer from what was read.
        if (s.seen.len(), s.fetched.len(), s.budget.units()) == before {
            idle_turns += 1;
        } else {
            idle_turns = 0;
        }
        if idle_turns >= 2 {
            idle_turns = 0;
            if s.fetched.is_empty() && s.ground_if_needed(task).await {
                progress(s.budget.units(), Usage::default());
                continue;
            }
            if !s.fetched.is_empty() {
                tracing::info!("the model repeats itself; answering from the pages read");
                return s.fallback_report(task_id, task).await;
            }
        }
        if s.budget.gathering_exhausted() && s.budget.scraping_exhausted() {
            s.messages.push(Message::user(
                "All tool budgets are used. Write your report now, without calling tools.",
            ));
        }
    }
    // Turn cap reached: one last call without tools asks for the report.
    s.messages.push(Message::user(
        "Stop using tools. Write your report now from what you have read.",
    ));
    let resp = match s.call(false).await {
        Ok(resp) => resp,
        Err(_) if s.model_fault => {
            return s.fallback_report(task_id, task).await;
        }
        Err(f) => return Err(f),
    };
    let text = strip_think(&resp.content).trim().to_string();
    // A report written without reading anything is not grounded: the fallback reads first.
    if text.is_empty()
        || looks_like_tool_call(&text)
        || s.fetched.is_empty()
        || !s.cites_a_read_page(&text)
    {
        return s.fallback_report(task_id, task).await;
    }
    Ok(finish(s, task_id, text))
}

/// The extractive fallback: for each relevant page read, the passages that best match the task
/// (never a page's opening), quoted under the page's link.
fn extractive_report(task: &str, pages: &[PageExtract]) -> String {
    let mut md = String::from(
        "## Summary\n\nThe model did not write a usable report, so this section quotes, unedited, the passages of each page read that best match the task.\n\n## Key findings\n",
    );
    for page in pages {
        let title = if page.title.trim().is_empty() {
            page.url.as_str()
        } else {
            page.title.trim()
        };
        let best = crate::research::reading::passages::select(
            &page.text,
            task,
            EXCERPT_CHARS,
            &page.title,
        )
        .text;
        md.push_str(&format!(
            "\n### [{title}]({})\n\n{}\n",
            page.url,
            report::demote(best.trim(), 3)
        ));
    }
    md
}

/// The report of a researcher whose pages all missed the task: what it read, and that none of
/// it answers. It cites nothing.
fn nothing_relevant_report(task: &str, read: &[SourceRef]) -> String {
    let mut md = format!(
        "## Summary\n\nNone of the {} page(s) read for this task bears on it: no passage of them matches the task \"{}\", so nothing here answers it.\n\n## Pages read\n",
        read.len(),
        task.trim()
    );
    for s in read {
        let title = if s.title.trim().is_empty() {
            "(untitled)"
        } else {
            s.title.trim()
        };
        md.push_str(&format!("- {title} — {}\n", s.url));
    }
    md
}

/// The report of a researcher whose pages do not answer the task: `why` (which subjects no
/// passage names, [`grounded::unanswered`], or that none is of the asked product's docs), the
/// closest pages (those whose passages were best, best first) and the rest read. It cites
/// nothing.
fn unanswered_report(task: &str, why: &str, closest: &[PageExtract], read: &[SourceRef]) -> String {
    let mut md = format!(
        "## Summary\n\nThe sources read do not answer \"{}\": {why}, so nothing here answers it.\n\n## {}\n",
        task.trim(),
        LISTING_HEADINGS[0],
    );
    let line = |url: &str, title: &str| {
        let title = if title.trim().is_empty() {
            "(untitled)"
        } else {
            title.trim()
        };
        format!("- {title} — {url}\n")
    };
    for p in closest {
        md.push_str(&line(&p.url, &p.title));
    }
    let rest: Vec<&SourceRef> = read
        .iter()
        .filter(|s| !closest.iter().any(|p| p.url == s.url))
        .collect();
    if !rest.is_empty() {
        md.push_str(&format!("\n## {}\n", LISTING_HEADINGS[1]));
        for s in rest {
            md.push_str(&line(&s.url, &s.title));
        }
    }
    md
}

/// True when an answer is a tool call written as JSON rather than a report (weak models do this
/// when no tools are offered any more).
fn looks_like_tool_call(text: &str) -> bool {
    let trimmed = text
        .trim_start_matches("```json")
        .trim_start_matches("```")
        .trim_start();
    if !trimmed.starts_with('{') {
        return false;
    }
    match extract_json_object(text) {
        Ok(v) => ["tool", "arguments", "name", "function"]
            .iter()
            .any(|k| v.get(k).is_some()),
        Err(_) => false,
    }
}

/// Ends the task of `s` unanswered: every page fetched counts as off the task, so the run ends
/// NoEvidence and lists them, those at `closest` (addresses, best first) first. `why` says what
/// keeps them from answering ([`unanswered_report`]).
fn refuse(
    mut s: Session<'_>,
    task_id: u32,
    task: &str,
    why: &str,
    closest: &[String],
) -> ResearcherReport {
    s.pages.sort_by_key(|p| {
        closest
            .iter()
            .position(|u| *u == p.url)
            .unwrap_or(usize::MAX)
    });
    for f in &s.fetched {
        if !s.irrelevant.contains(&f.url) {
            s.irrelevant.push(f.url.clone());
        }
    }
    let md = unanswered_report(task, why, &s.pages, &s.fetched);
    finish(s, task_id, md)
}

fn finish(s: Session<'_>, task_id: u32, markdown: String) -> ResearcherReport {
    ResearcherReport {
        task_id,
        markdown: report::tidy_model_markdown(&markdown),
        fetched: s.fetched,
        pages: s.pages,
        irrelevant: s.irrelevant,
        queries: s.queries,
        seen: s
            .seen
            .into_iter()
            .map(|h| SourceRef {
                url: h.url,
                title: h.title,
                snippet: h.snippet.chars().take(SNIPPET_CHARS).collect(),
            })
            .collect(),
        searches: s.searches,
        usage: s.usage,
    }
}

mod answer;
mod guided;
mod pool;
mod session;

pub use guided::guides;
pub use pool::{SharedUrls, UrlPool};

#[cfg(test)]
mod tests;
