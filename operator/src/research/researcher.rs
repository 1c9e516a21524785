//! The agent researcher (seed 000): gathering, scraping, reporting, within its tool budgets.
//!
//! This is the imperative shell around one model conversation; the budgets are the pure
//! [`ToolBudget`], the prompts come from [`prompts`].

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::future::join_all;
use serde_json::json;

use super::budget::{GATHER_CALLS, ScrapeStep, ToolBudget};
use super::grounded;
use super::prompts;
use super::queries;
use super::report;
use super::scoring::{
    MIN_PASSING_SOURCES, Reformulation, adaptive_threshold, reformulate, score, social_ratio,
};
use super::state::{Failure, PageExtract, ResearcherReport, RunInput, SourceRef, reasons};
use crate::llm::json_extract::{extract_json_object, strip_think};
use crate::llm::{
    CallPurpose, ChatModel, ChatRequest, LlmError, Message, ToolCall, ToolSpec, Usage,
};
use crate::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES};
use crate::scrape::{FetchError, Fetcher, truncate_head, truncate_page};
use crate::sources::security::SecurityQuery;
use crate::sources::{Gatherer, SearchHit, SpecialisedSources, ToolAnswer};

/// Characters of each page kept for the extractive fallback report.
const EXCERPT_CHARS: usize = 600;

/// Largest report injected from a sibling (seed 000: up to 50k chars).
pub const INJECTED_REPORT_CHARS: usize = 50_000;
/// Characters of a search snippet kept as evidence for citations of unread results.
const SNIPPET_CHARS: usize = 500;
/// URLs listed by the scrape handshake at most.
const HANDSHAKE_LIST: usize = 40;

/// Reports of siblings that finish while a researcher runs, steered in before its next model
/// turn (seed 000).
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
}

impl Default for ResearcherSettings {
    fn default() -> Self {
        Self {
            page_chars: 6000,
            results_per_query: 8,
            max_turns: 14,
            max_output_tokens: 1024,
        }
    }
}

/// A URL pool kept outside this process, shared by the researchers of one run on every worker
/// (Redis in scale-out mode, `crate::queue`).
#[async_trait::async_trait]
pub trait SharedUrls: Send + Sync {
    /// Claims `url` for this researcher's task; false when another task of the run has it.
    async fn claim(&self, url: &str) -> Result<bool, String>;
    /// Every URL claimed in the run.
    async fn taken(&self) -> Result<BTreeSet<String>, String>;
}

/// The per-run pool of URLs already read, shared by sibling researchers (seed 000).
#[derive(Default)]
pub struct UrlPool {
    urls: Mutex<BTreeSet<String>>,
    /// The run's pool on other processes; the local set then only backs it up.
    shared: Option<Arc<dyn SharedUrls>>,
}

impl std::fmt::Debug for UrlPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UrlPool")
            .field("shared", &self.shared.is_some())
            .finish_non_exhaustive()
    }
}

impl UrlPool {
    /// A pool pre-filled with URLs read before (after a restart).
    pub fn with(urls: impl IntoIterator<Item = String>) -> Self {
        Self {
            urls: Mutex::new(urls.into_iter().collect()),
            shared: None,
        }
    }
    /// A pool kept in `shared` (the run's researchers on other workers claim from it too).
    pub fn shared(shared: Arc<dyn SharedUrls>) -> Self {
        Self {
            urls: Mutex::default(),
            shared: Some(shared),
        }
    }
    fn local(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        self.urls.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Claims a URL for reading; false when a sibling already did.
    pub async fn claim(&self, url: &str) -> bool {
        if let Some(shared) = &self.shared {
            // The shared pool lets a task re-claim its own URLs (see `queue::pool`); this
            // researcher still reads each URL once.
            if self.local().contains(url) {
                return false;
            }
            match shared.claim(url).await {
                Ok(claimed) => {
                    if claimed {
                        self.local().insert(url.to_string());
                    }
                    return claimed;
                }
                // The shared pool saves duplicate reads; without it the research still goes on.
                Err(e) => {
                    tracing::warn!(error = %e, "shared URL pool unavailable; using the local one")
                }
            }
        }
        self.local().insert(url.to_string())
    }
    /// Every claimed URL.
    pub async fn taken(&self) -> BTreeSet<String> {
        let mut all = self.local().clone();
        if let Some(shared) = &self.shared {
            match shared.taken().await {
                Ok(urls) => all.extend(urls),
                Err(e) => {
                    tracing::warn!(error = %e, "shared URL pool unavailable; using the local one")
                }
            }
        }
        all
    }
    /// True when the URL was already claimed.
    pub async fn contains(&self, url: &str) -> bool {
        self.taken().await.contains(url)
    }
    /// Up to `limit` claimed URLs, in order.
    pub async fn snapshot(&self, limit: usize) -> Vec<String> {
        self.taken().await.into_iter().take(limit).collect()
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
    // Seed 000: the specialised tools share the gathering budget with `search`.
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
    /// Score of every search result seen, by URL (seed 004).
    scores: std::collections::BTreeMap<String, f64>,
    /// Reformulated searches made so far (broaden, narrow, synonyms).
    reformulations: u32,
    /// Sibling reports arriving while this researcher runs.
    steering: Option<SteeringInbox>,
    /// Task ids of the reports steered in so far.
    steered: Vec<u32>,
    /// Messages covered by the last server-reported token count, and that count.
    anchor: Option<(usize, u64)>,
}

impl Session<'_> {
    /// Share of the context window the conversation fills. The server's own token count of the
    /// last call (its real tokenizer, whatever the model) anchors it; only messages added since
    /// are estimated, at four characters per token.
    fn context_used(&self) -> f64 {
        let (tokens, from) = match self.anchor {
            // The assistant answer right after the anchored request is in its output tokens.
            Some((sent, tokens)) => (tokens as f64, sent + 1),
            None => (0.0, 0),
        };
        let chars: usize = self
            .messages
            .iter()
            .skip(from)
            .map(|m| m.content.len() + 16)
            .sum();
        let window = self.deps.model.context_window().max(1) as f64;
        (tokens + chars as f64 / 4.0) / window
    }

    /// Steers reports of siblings that finished since the last turn into the conversation.
    fn take_steered_reports(&mut self) {
        let Some(inbox) = self.steering.as_mut() else {
            return;
        };
        let mut arrived = Vec::new();
        while let Ok(report) = inbox.try_recv() {
            arrived.push(report);
        }
        for r in arrived {
            if self.steered.contains(&r.task_id) {
                continue;
            }
            self.steered.push(r.task_id);
            tracing::debug!(from = r.task_id, "sibling report steered in");
            self.messages.push(Message::user(format!(
                "Steering update: researcher {} of this run just finished. Its report follows; build on it, do not repeat its work, and do not cite its links unless you read them yourself.\n\n--- report of researcher {} ---\n{}\n",
                r.task_id,
                r.task_id,
                truncate_chars(&r.markdown, INJECTED_REPORT_CHARS)
            )));
        }
    }

    /// Unread search results, best score first.
    async fn best_unread(&self, n: usize) -> Vec<String> {
        let taken = self.deps.pool.taken().await;
        let mut unread: Vec<(f64, usize, &SearchHit)> = self
            .seen
            .iter()
            .enumerate()
            .filter(|(_, h)| !taken.contains(&h.url))
            .map(|(i, h)| (self.scores.get(&h.url).copied().unwrap_or(0.0), i, h))
            .collect();
        unread.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        unread
            .into_iter()
            .take(n)
            .map(|(_, _, h)| h.url.clone())
            .collect()
    }

    async fn call(&mut self, with_tools: bool) -> Result<crate::llm::ChatResponse, Failure> {
        self.take_steered_reports();
        let sent = self.messages.len();
        let request = ChatRequest {
            messages: self.messages.clone(),
            tools: if with_tools {
                tools(self.deps.specialised.as_deref())
            } else {
                vec![]
            },
            json_mode: false,
            max_tokens: self.deps.settings.max_output_tokens,
            purpose: CallPurpose::Research,
        };
        match self.deps.model.chat(request).await {
            Ok(resp) => {
                self.usage.add(&resp.usage);
                if resp.usage.input_tokens > 0 {
                    self.anchor = Some((sent, resp.usage.input_tokens + resp.usage.output_tokens));
                }
                (self.progress)(self.budget.units(), resp.usage);
                Ok(resp)
            }
            Err(e) => {
                // The model answered, but unusably (degenerate, unparsable): not a broken server.
                self.model_fault = matches!(
                    e.unbilled(),
                    LlmError::Degenerate { .. } | LlmError::Malformed(_)
                );
                // An unusable answer is still paid for: it counts in this researcher's usage.
                let billed = e.billed();
                if billed.llm_calls > 0 {
                    self.usage.add(&billed);
                    (self.progress)(self.budget.units(), billed);
                }
                Err(failure_from_llm(&e))
            }
        }
    }

    async fn search(&mut self, queries: &[String]) -> String {
        // The task is searched first, as written and as keywords, whatever the model asks for;
        // the model's queries are added to it, screened so a placeholder or a repeat never
        // spends the budget (issue 14: a 0.5B model searched `example1` twelve times).
        let seeds: Vec<String> = if self.seeded {
            vec![]
        } else {
            queries::seed_queries(&self.task)
                .into_iter()
                .filter(|q| !self.queries.contains(&queries::normalise(q)))
                .collect()
        };
        let mut planned: Vec<String> = self.queries.clone();
        planned.extend(seeds.iter().map(|q| queries::normalise(q)));
        let mut notes = String::new();
        let mut accepted: Vec<String> = Vec::new();
        for q in queries.iter().take(3) {
            match queries::screen(q, &planned) {
                Ok(q) => {
                    planned.push(queries::normalise(&q));
                    accepted.push(q);
                }
                Err(why) => {
                    notes.push_str(&format!("Query \"{}\" was not run: {why}.\n", q.trim()))
                }
            }
        }
        if seeds.is_empty() && accepted.is_empty() {
            return format!(
                "{notes}No search was run and no search call was used. Search for words of the task itself: {}",
                self.task.trim()
            );
        }
        if !self.budget.take_gather() {
            return format!(
                "Gathering budget exhausted ({GATHER_CALLS} calls). Read pages with `scrape` or write your report."
            );
        }
        self.seeded = true;
        let to_run: Vec<String> = seeds.into_iter().chain(accepted).collect();
        let mut results: Vec<(String, Result<Vec<SearchHit>, String>)> = Vec::new();
        for q in &to_run {
            let r = self.run_query(q).await;
            results.push((q.clone(), r));
        }
        let queries = to_run.as_slice();
        // Seed 004's sufficiency check: too few results above the adaptive threshold means the
        // query is reformulated (broaden, narrow, synonyms) with one more gathering call.
        let passing = |s: &Self, results: &[(String, Result<Vec<SearchHit>, String>)]| {
            let hits: Vec<SearchHit> = results
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .flatten()
                .cloned()
                .collect();
            let threshold = adaptive_threshold(hits.len(), social_ratio(&hits));
            let passing = hits
                .iter()
                .filter(|h| s.scores.get(&h.url).copied().unwrap_or(0.0) >= threshold)
                .map(|h| h.url.as_str())
                .collect::<BTreeSet<_>>()
                .len();
            (passing, threshold)
        };
        let (count, threshold) = passing(self, &results);
        if count < MIN_PASSING_SOURCES
            && self.reformulations < 3
            && let Some(first) = queries.first()
            && let Some(next) = reformulate(first, Reformulation::nth(self.reformulations))
            && !self.queries.contains(&queries::normalise(&next))
            && self.budget.take_gather()
        {
            let strategy = Reformulation::nth(self.reformulations);
            self.reformulations += 1;
            notes.push_str(&format!(
                "Only {count} result(s) passed the quality bar (score >= {threshold:.2}), so the query was reformulated ({strategy:?}) as \"{next}\"; this used one more search call.\n"
            ));
            let r = self.run_query(&next).await;
            results.push((next, r));
        }
        let (_, threshold) = passing(self, &results);
        let mut out = notes;
        for (q, r) in &results {
            match r {
                Ok(hits) if hits.is_empty() => {
                    out.push_str(&format!("Query \"{q}\": no results.\n"))
                }
                Ok(hits) => {
                    out.push_str(&format!("Query \"{q}\":\n"));
                    let mut ranked: Vec<&SearchHit> = hits.iter().collect();
                    let score_of = |h: &SearchHit| self.scores.get(&h.url).copied().unwrap_or(0.0);
                    ranked.sort_by(|a, b| score_of(b).total_cmp(&score_of(a)));
                    let mut below = Vec::new();
                    for h in ranked {
                        let sc = score_of(h);
                        if sc < threshold {
                            below.push(format!("{} — {}", h.title.trim(), h.url));
                            continue;
                        }
                        let snippet: String = h.snippet.chars().take(300).collect();
                        out.push_str(&format!(
                            "- {} — {} (score {sc:.2})\n   {}\n",
                            h.title.trim(),
                            h.url,
                            snippet.trim()
                        ));
                    }
                    if !below.is_empty() {
                        out.push_str(&format!(
                            "  Below the quality bar ({threshold:.2}): {}\n",
                            below.join("; ")
                        ));
                    }
                }
                Err(e) => out.push_str(&format!("Query \"{q}\" failed: {e}\n")),
            }
        }
        out
    }

    /// Runs one query, scores its results and records them as seen.
    async fn run_query(&mut self, q: &str) -> Result<Vec<SearchHit>, String> {
        self.searches += 1;
        self.queries.push(queries::normalise(q));
        let hits = self
            .deps
            .gatherer
            .search(q, self.deps.settings.results_per_query)
            .await
            .map_err(|e| e.to_string())?;
        self.record(q, &hits);
        Ok(hits)
    }

    /// Scores hits and adds them to what this researcher has seen (and so may read and cite).
    fn record(&mut self, q: &str, hits: &[SearchHit]) {
        for h in hits {
            let sc = score(q, h).score;
            let entry = self.scores.entry(h.url.clone()).or_insert(sc);
            *entry = entry.max(sc);
            if !self.seen.iter().any(|s| s.url == h.url) {
                self.seen.push(h.clone());
            }
        }
    }

    /// A specialised tool call: one gathering call; its hits join the seen results.
    async fn specialised(
        &mut self,
        tool: &str,
        query: &SecurityQuery,
        site: Option<&str>,
    ) -> String {
        let Some(sources) = self.deps.specialised.clone() else {
            return format!("The `{tool}` tool is not available in this run.");
        };
        if !self.budget.take_gather() {
            return format!(
                "Gathering budget exhausted ({GATHER_CALLS} calls). Read pages with `scrape` or write your report."
            );
        }
        self.searches += 1;
        let answer: Result<ToolAnswer, String> =
            match (tool, &sources.security, &sources.stackexchange) {
                ("security_search", Some(security), _) => Ok(security.lookup(query).await),
                ("stackexchange", _, Some(se)) => se
                    .questions(&query.query, site)
                    .await
                    .map_err(|e| e.to_string()),
                _ => Err(format!("the `{tool}` tool is not available in this run")),
            };
        match answer {
            Ok(answer) => {
                self.record(&query.query, &answer.hits);
                // Sources truncate already; this keeps seed 002's bound whatever the source.
                truncate_head(&answer.text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES).text
            }
            Err(e) => format!("{tool} failed: {e}"),
        }
    }

    async fn scrape(&mut self, urls: &[String]) -> String {
        // Gathering comes before scraping (seed 000): a model that skips it gets a search for its
        // task instead of a wasted scrape step, and picks from real results.
        if self.seen.is_empty() && self.known_urls.is_empty() && !self.budget.gathering_exhausted()
        {
            let task = self.task.clone();
            let results = self.search(&[task]).await;
            return format!(
                "There are no search results to read yet: gathering comes before scraping. The task was searched for you:\n{results}\nCall `scrape` with URLs from these results."
            );
        }
        // Seed 000's 55% gate protects room for the report; before anything was read there is
        // nothing to report from, so the first batch is never skipped (a 0.5B model's search
        // results alone filled 64% of an 8k window and every batch was skipped). The window
        // itself is enforced when each prompt is sent (llm::window).
        let used = if self.fetched.is_empty() {
            0.0
        } else {
            self.context_used()
        };
        match self.budget.take_scrape(used) {
            ScrapeStep::Handshake => {
                // Seed 000: the handshake returns what siblings took, with no network activity.
                let all = self.deps.pool.taken().await;
                let taken: Vec<&String> = all.iter().take(HANDSHAKE_LIST).collect();
                let list = if taken.is_empty() {
                    "none".to_string()
                } else {
                    taken
                        .iter()
                        .map(|u| u.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let clash: Vec<&String> = urls.iter().filter(|u| all.contains(*u)).collect();
                let clash = if clash.is_empty() {
                    String::new()
                } else {
                    format!(
                        " Of the URLs you named, these are taken: {}.",
                        clash
                            .iter()
                            .map(|u| u.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                format!(
                    "Handshake done. URLs already read by researchers of this run (do not request them): {list}.{clash} Call `scrape` again with up to 3 URLs to read batch 1."
                )
            }
            ScrapeStep::Batch { index, max_urls } => self.read_batch(index, max_urls, urls).await,
            ScrapeStep::Skipped { index } => format!(
                "Batch {} skipped: the conversation already fills more than 55% of the context window. Write your report now.",
                index + 1
            ),
            ScrapeStep::Exhausted => "Scrape budget exhausted. Write your report now.".to_string(),
        }
    }

    async fn read_batch(&mut self, index: usize, max_urls: usize, urls: &[String]) -> String {
        let mut chosen = Vec::new();
        let mut skipped = Vec::new();
        for u in urls {
            let u = u.trim();
            if chosen.len() >= max_urls {
                break;
            }
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                skipped.push(format!("{u} (not an http(s) URL)"));
            } else if !self.may_read(u) {
                // Reading only what gathering found keeps invented URLs out of reports (seed 000).
                skipped.push(format!("{u} (not among your search results)"));
            } else if !self.deps.pool.claim(u).await {
                skipped.push(format!("{u} (already read by a researcher)"));
            } else {
                chosen.push(u.to_string());
            }
        }
        let mut out = format!("Batch {} (up to {max_urls} URLs):\n", index + 1);
        if chosen.is_empty() {
            // Weak models often name URLs they never saw; a batch is too precious to waste,
            // so the best unread search results are read instead, and the model is told.
            let fallback = self.best_unread(max_urls).await;
            for u in fallback {
                if self.deps.pool.claim(&u).await {
                    chosen.push(u);
                }
            }
            if !chosen.is_empty() {
                out.push_str("None of the requested URLs could be read, so the top unread search results were read instead.\n");
            }
        }
        let relevant_before = self.pages.len();
        let off_task_before = self.irrelevant.len();
        self.fetch_into(&chosen, &mut out).await;
        // Every page of the batch was off the task: the batch goes to the next candidates
        // instead, once (issue 14: the search engine ranked three unrelated pages first).
        let off_task = self.irrelevant.len() - off_task_before;
        if self.pages.len() == relevant_before && off_task > 0 {
            let mut next = Vec::new();
            for u in self.best_unread(off_task).await {
                if self.deps.pool.claim(&u).await {
                    next.push(u);
                }
            }
            if !next.is_empty() {
                out.push_str("None of those pages bears on the task, so the next search results were read instead.\n");
                self.fetch_into(&next, &mut out).await;
            }
        }
        for s in skipped {
            out.push_str(&format!("Skipped {s}\n"));
        }
        out
    }

    /// Fetches `urls` and records each page: shown (the passages that bear on the task), off
    /// the task (read, never shown) or failed.
    async fn fetch_into(&mut self, urls: &[String], out: &mut String) {
        let fetches = urls.iter().map(|u| self.deps.fetcher.fetch(u));
        let results = join_all(fetches).await;
        for (url, res) in urls.iter().zip(results) {
            match res {
                Ok(page) => {
                    // The passages that bear on the task, not the page's first N characters: the
                    // answer is rarely in a page's opening (a reference page opens with its
                    // table of contents).
                    let selection = super::passages::select(
                        &page.markdown,
                        &self.task,
                        self.deps.settings.page_chars,
                    );
                    let off_task = selection.best_score == 0.0
                        || !super::passages::mentions_key_terms(&page.markdown, &self.task);
                    if off_task && !self.task.trim().is_empty() {
                        // Read, and on the record as read, but nothing on it bears on the task:
                        // it is not put before the model and cannot stand in a fallback report.
                        out.push_str(&format!(
                            "{url}: read; nothing on this page matches the task, so it is left out\n"
                        ));
                        self.irrelevant.push(url.clone());
                        self.fetched.push(SourceRef::new(url.clone(), page.title));
                        continue;
                    }
                    let body = selection.text;
                    out.push_str(&prompts::fence_page(url, &page.title, &body));
                    out.push('\n');
                    self.pages.push(PageExtract {
                        url: url.clone(),
                        title: page.title.clone(),
                        text: body,
                    });
                    self.fetched.push(SourceRef::new(url.clone(), page.title));
                }
                Err(e) => {
                    // A URL the fetch policy refuses (an internal address, a denied domain) is
                    // no source, read or not: it must not be cited as an unread search result.
                    if matches!(e, FetchError::Refused { .. }) {
                        self.seen.retain(|h| h.url != *url);
                    }
                    out.push_str(&format!("{url}: could not be read ({e})\n"));
                }
            }
        }
    }

    /// When the model cannot write a usable report in its conversation, it is asked once more in
    /// a clean context holding only the task and the pages read (small models imitate a history
    /// full of tool calls); if that fails too, an honest extractive report is built from the pages
    /// (seed 004: pass raw content when summarisation fails). With nothing read, the task fails.
    async fn fallback_report(
        mut self,
        task_id: u32,
        task: &str,
    ) -> Result<ResearcherReport, Failure> {
        if self.fetched.is_empty() && self.seen.is_empty() && !self.budget.gathering_exhausted() {
            // The model never searched usefully: the engine searches the task itself.
            self.search(&[]).await;
        }
        if self.fetched.is_empty() {
            // Searched but never read (weak models repeat searches): read the top results now.
            let urls = self.best_unread(3).await;
            if !urls.is_empty() {
                self.read_batch(0, 3, &urls).await;
            }
        }
        if self.fetched.is_empty() {
            return Err(Failure::new(
                reasons::MODEL_OUTPUT_INVALID,
                "the model wrote no usable report (only empty answers or tool calls as text) and read no page",
            ));
        }
        if self.pages.is_empty() {
            // Everything read was off the task: say so, and quote nothing (a page opening that
            // does not answer is no finding). The run-level NoEvidence check sees `pages` empty.
            let md = nothing_relevant_report(task, &self.fetched);
            return Ok(finish(self, task_id, md));
        }
        // Grounded answer (issue 14): the best passages for the task, numbered; the model writes
        // a few sentences ending in `[n]` and the engine makes the citations. A quarter of the
        // context window for the passages (at three characters per token), at most 6000 chars.
        let budget = (self.deps.model.context_window() as usize * 3 / 4).clamp(1500, 6000);
        let items = grounded::number_passages(&self.pages, task, budget);
        if !items.is_empty() {
            self.messages = vec![
                Message::system(prompts::GROUNDED),
                Message::user(format!(
                    "Research task: {task}\n\nPassages:\n{}Answer the task now, ending every sentence with its passage number like [1].",
                    grounded::render_passages(&items)
                )),
            ];
            if let Ok(resp) = self.call(false).await {
                let text = strip_think(&resp.content).trim().to_string();
                if !looks_like_tool_call(&text)
                    && let Some(md) = grounded::assemble(&text, &items)
                {
                    return Ok(finish(self, task_id, md));
                }
            }
        }
        let md = extractive_report(task, &self.pages);
        Ok(finish(self, task_id, md))
    }

    /// True when nothing was read (nothing to cite) or the text cites at least one page read.
    fn cites_a_read_page(&self, text: &str) -> bool {
        if self.fetched.is_empty() {
            return true;
        }
        if self.pages.is_empty() {
            return true;
        }
        let read: std::collections::BTreeSet<String> =
            self.pages.iter().map(|p| p.url.clone()).collect();
        !report::verify_citations(text, &read).cited.is_empty()
    }

    fn may_read(&self, url: &str) -> bool {
        self.seen.iter().any(|h| h.url == url) || self.known_urls.iter().any(|k| k == url)
    }

    async fn run_tool(&mut self, call: &ToolCall) -> String {
        tracing::debug!(tool = %call.name, arguments = %call.arguments, "tool call");
        let text = |key: &str| -> Option<String> {
            call.arguments
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let list = |key: &str| -> Vec<String> {
            match call.arguments.get(key) {
                Some(serde_json::Value::Array(items)) => items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                Some(serde_json::Value::String(s)) => vec![s.clone()],
                _ => vec![],
            }
        };
        match call.name.as_str() {
            "search" => {
                let queries = list("queries");
                let queries = if queries.is_empty() {
                    list("query")
                } else {
                    queries
                };
                if queries.is_empty() {
                    return "The search tool needs `queries`: a list of 1-3 search strings."
                        .to_string();
                }
                self.search(&queries).await
            }
            "scrape" => {
                let urls = list("urls");
                let urls = if urls.is_empty() { list("url") } else { urls };
                if urls.is_empty() {
                    return "The scrape tool needs `urls`: a list of 1-3 URLs from the search results.".to_string();
                }
                self.scrape(&urls).await
            }
            "security_search" | "stackexchange" => {
                let Some(query) = text("query").or_else(|| list("queries").into_iter().next())
                else {
                    return format!("The {} tool needs `query`: a search string.", call.name);
                };
                let q = SecurityQuery {
                    query,
                    package: text("package"),
                    ecosystem: text("ecosystem"),
                    version: text("version"),
                };
                self.specialised(&call.name, &q, text("site").as_deref())
                    .await
            }
            other => {
                let names: Vec<String> = tools(self.deps.specialised.as_deref())
                    .into_iter()
                    .map(|t| t.name)
                    .collect();
                format!(
                    "Unknown tool `{other}`. Available tools: {}.",
                    names.join(", ")
                )
            }
        }
    }

    /// A researcher must read before it reports: when a model tries to report with nothing read,
    /// the engine gathers or reads on its behalf once, so weak models still ground their report.
    async fn ground_if_needed(&mut self, task: &str) -> bool {
        if !self.fetched.is_empty() {
            return false;
        }
        if self.seen.is_empty() && !self.budget.gathering_exhausted() && self.searches == 0 {
            let result = self.search(&[task.to_string()]).await;
            self.messages.push(Message::user(format!(
                "You must search before reporting. Results of searching for the task:\n{result}\nNow call `scrape` with the most relevant URLs."
            )));
            return true;
        }
        if !self.seen.is_empty() && !self.budget.scraping_exhausted() {
            // The handshake carries no network; take it, then read the best unread results.
            let urls = self.best_unread(usize::MAX).await;
            if urls.is_empty() {
                return false;
            }
            // Nothing is read yet (this grounds a researcher with no page): never gated.
            let mut step = self.budget.take_scrape(0.0);
            if step == ScrapeStep::Handshake {
                step = self.budget.take_scrape(0.0);
            }
            let result = match step {
                ScrapeStep::Batch { index, max_urls } => {
                    self.read_batch(index, max_urls, &urls).await
                }
                _ => return false,
            };
            self.messages.push(Message::user(format!(
                "You must read pages before reporting. Here are the most relevant search results:\n{result}\nNow write your report, citing only these pages."
            )));
            return true;
        }
        false
    }
}

fn urls_in(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>' | '"'))
        .filter(|w| w.starts_with("http://") || w.starts_with("https://"))
        .map(|w| w.trim_end_matches(['.', ',', ';']).to_string())
        .collect()
}

/// Caps text at `max` characters with a notice, within seed 002's byte and line budgets.
fn truncate_chars(text: &str, max: usize) -> String {
    truncate_page(text, max).text
}

/// Runs one researcher on one task and returns its report.
///
/// `progress` receives tool-call units as they are used (seed 000's percentage).
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
        searches: 0,
        known_urls: urls_in(&format!(
            "{} {}",
            input.query,
            input.context.as_deref().unwrap_or_default()
        )),
    };
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
        // Weak models repeat one call for a dozen turns (issue 14: 13 identical turns, 48k
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
        let best = super::passages::select(&page.text, task, EXCERPT_CHARS).text;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ChatResponse, Role};
    use crate::research::state::Mode;
    use crate::scrape::{FetchError, Page};
    use crate::sources::SourceError;
    use crate::sources::specialised::{QuestionSearch, SecurityLookup};
    use async_trait::async_trait;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const NVD: &str = "https://nvd.nist.gov/vuln/detail/CVE-2021-44228";
    const SF: &str = "https://serverfault.com/questions/1/log4j-mitigation";

    /// Plays a fixed script of answers, one per model turn, and keeps the requests.
    struct Script {
        turns: Vec<ChatResponse>,
        requests: Mutex<Vec<ChatRequest>>,
    }

    #[async_trait]
    impl ChatModel for Script {
        async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
            let mut requests = self.requests.lock().unwrap();
            let turn = requests.len();
            requests.push(request);
            Ok(self
                .turns
                .get(turn)
                .cloned()
                .unwrap_or_else(|| text("done")))
        }
        fn context_window(&self) -> u64 {
            128_000
        }
    }

    fn text(s: &str) -> ChatResponse {
        ChatResponse {
            content: s.into(),
            tool_calls: vec![],
            usage: Usage::default(),
            model: "fake".into(),
            finish_reason: None,
        }
    }

    fn call(name: &str, arguments: serde_json::Value) -> ChatResponse {
        ChatResponse {
            tool_calls: vec![ToolCall {
                id: format!("call-{name}"),
                name: name.into(),
                arguments,
            }],
            ..text("")
        }
    }

    #[derive(Default)]
    struct Counting {
        calls: AtomicUsize,
        last_site: Mutex<Option<String>>,
        last_query: Mutex<Option<SecurityQuery>>,
    }

    #[async_trait]
    impl Gatherer for Counting {
        async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Ok(vec![])
        }
    }

    fn hit(url: &str, engine: &str) -> SearchHit {
        SearchHit {
            url: url.into(),
            title: format!("title of {url}"),
            snippet: "snippet".into(),
            engine: engine.into(),
        }
    }

    #[async_trait]
    impl SecurityLookup for Counting {
        async fn lookup(&self, query: &SecurityQuery) -> ToolAnswer {
            self.calls.fetch_add(1, Ordering::SeqCst);
            *self.last_query.lock().unwrap() = Some(query.clone());
            ToolAnswer {
                hits: vec![hit(NVD, "nvd")],
                text: format!("NVD: CVE-2021-44228 — {NVD}"),
            }
        }
    }

    #[async_trait]
    impl QuestionSearch for Counting {
        async fn questions(&self, _: &str, site: Option<&str>) -> Result<ToolAnswer, SourceError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            *self.last_site.lock().unwrap() = site.map(str::to_string);
            Ok(ToolAnswer {
                hits: vec![hit(SF, "stackexchange")],
                text: format!("Q: log4j mitigation — {SF}"),
            })
        }
    }

    struct Pages(Mutex<Vec<String>>);

    #[async_trait]
    impl Fetcher for Pages {
        async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
            self.0.lock().unwrap().push(url.to_string());
            Ok(Page {
                url: url.into(),
                final_url: url.into(),
                title: format!("Title of {url}"),
                markdown: format!("Content of {url}"),
                bytes: 10,
            })
        }
    }

    #[tokio::test]
    async fn specialised_tools_share_the_gathering_budget_and_their_hits_are_readable() {
        let model = Arc::new(Script {
            turns: vec![
                call(
                    "security_search",
                    json!({"query": "CVE-2021-44228", "package": "log4j-core", "ecosystem": "Maven"}),
                ),
                call(
                    "stackexchange",
                    json!({"query": "log4j mitigation", "site": "serverfault"}),
                ),
                call("security_search", json!({"query": "log4j"})),
                call("stackexchange", json!({"query": "log4j jndi"})),
                // Fifth gathering call: over the budget of four, whatever the tool.
                call("stackexchange", json!({"query": "one more"})),
                call("search", json!({"queries": ["log4j"]})),
                call("scrape", json!({"urls": [NVD]})),
                call("scrape", json!({"urls": [NVD, SF]})),
                text(&format!(
                    "## Summary\nLog4Shell.\n\n## Key findings\n- Critical ([NVD]({NVD})).\n- Mitigations ([SF]({SF})).\n\n## Links\n- {NVD}\n- {SF}"
                )),
            ],
            requests: Mutex::default(),
        });
        let security = Arc::new(Counting::default());
        let stackexchange = Arc::new(Counting::default());
        let web = Arc::new(Counting::default());
        let fetcher = Arc::new(Pages(Mutex::default()));
        let deps = ResearcherDeps {
            model: model.clone(),
            gatherer: web.clone(),
            fetcher: fetcher.clone(),
            pool: Arc::default(),
            settings: ResearcherSettings::default(),
            specialised: Some(Arc::new(SpecialisedSources {
                security: Some(security.clone()),
                stackexchange: Some(stackexchange.clone()),
            })),
        };
        let input = RunInput::new("Is log4j exploitable?", Mode::Quick);
        let report = run_researcher(&deps, &input, 0, "log4j", &[], None, &|_, _| {})
            .await
            .unwrap();

        assert_eq!(security.calls.load(Ordering::SeqCst), 2);
        assert_eq!(stackexchange.calls.load(Ordering::SeqCst), 2);
        assert_eq!(
            web.calls.load(Ordering::SeqCst),
            0,
            "search came after the budget was spent"
        );
        assert_eq!(report.searches, 4);
        assert_eq!(
            *security.last_query.lock().unwrap(),
            Some(SecurityQuery::text("log4j"))
        );
        assert_eq!(
            stackexchange.last_site.lock().unwrap().as_deref(),
            None,
            "the last call named no site"
        );
        let first = model.requests.lock().unwrap()[0].clone();
        let offered: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            offered,
            vec!["search", "scrape", "security_search", "stackexchange"]
        );
        assert!(first.messages[0].content.contains("`security_search`"));
        let requests = model.requests.lock().unwrap();
        let tool_results: Vec<&str> = requests
            .last()
            .unwrap()
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert!(tool_results[0].contains("CVE-2021-44228"));
        assert!(
            tool_results[4].starts_with("Gathering budget exhausted"),
            "{}",
            tool_results[4]
        );
        assert!(
            tool_results[5].starts_with("Gathering budget exhausted"),
            "{}",
            tool_results[5]
        );
        // The specialised hits were readable and read (after two turns refused for budget, the
        // engine reads the best of them itself, in score order; the model's scrapes follow).
        let mut read = fetcher.0.lock().unwrap().clone();
        read.sort();
        assert_eq!(read, vec![NVD.to_string(), SF.to_string()]);
        let mut fetched: Vec<&str> = report.fetched.iter().map(|s| s.url.as_str()).collect();
        fetched.sort_unstable();
        assert_eq!(fetched, vec![NVD, SF]);
        let seen: Vec<&str> = report.seen.iter().map(|s| s.url.as_str()).collect();
        assert_eq!(seen, vec![NVD, SF]);
    }

    #[test]
    fn specialised_tools_are_offered_only_when_configured() {
        let names = |s: Option<&SpecialisedSources>| {
            tools(s).into_iter().map(|t| t.name).collect::<Vec<_>>()
        };
        assert_eq!(names(None), vec!["search", "scrape"]);
        let only_se = SpecialisedSources {
            security: None,
            stackexchange: Some(Arc::new(Counting::default())),
        };
        assert_eq!(
            names(Some(&only_se)),
            vec!["search", "scrape", "stackexchange"]
        );
        assert_eq!(specialised_tools_note(None), "");
        assert!(specialised_tools_note(Some(&only_se)).contains("`stackexchange`"));
        assert_eq!(
            names(Some(&SpecialisedSources::default())),
            vec!["search", "scrape"]
        );
    }

    /// Answers each turn with what `turn` returns for its index, and keeps the requests.
    struct Turns {
        turn: fn(usize) -> Result<ChatResponse, LlmError>,
        requests: Mutex<Vec<ChatRequest>>,
    }

    #[async_trait]
    impl ChatModel for Turns {
        async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
            let mut requests = self.requests.lock().unwrap();
            let n = requests.len();
            requests.push(request);
            (self.turn)(n)
        }
        fn context_window(&self) -> u64 {
            8192
        }
    }

    /// Every query finds the json page; the queries are kept.
    #[derive(Default)]
    struct JsonSearch(Mutex<Vec<String>>);

    const JSON_PAGE: &str = "https://docs.example/library/json.html";

    #[async_trait]
    impl Gatherer for JsonSearch {
        async fn search(&self, q: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
            self.0.lock().unwrap().push(q.to_string());
            Ok(vec![SearchHit {
                url: JSON_PAGE.into(),
                title: "json — JSON encoder and decoder".into(),
                snippet: "json.loads decodes JSON".into(),
                engine: "searx".into(),
            }])
        }
    }

    struct JsonPage;

    #[async_trait]
    impl Fetcher for JsonPage {
        async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
            Ok(Page {
                url: url.into(),
                final_url: url.into(),
                title: "json — JSON encoder and decoder".into(),
                markdown: "# json\n\n**json.loads(s)**\n\nDeserialize s (a str instance containing a JSON document) to a Python object.".into(),
                bytes: 100,
            })
        }
    }

    fn degenerate() -> LlmError {
        LlmError::Billed {
            usage: Usage {
                input_tokens: 900,
                output_tokens: 165,
                cost_pico_usd: 7,
                llm_calls: 1,
                ..Usage::default()
            },
            source: Box::new(LlmError::Degenerate { tokens: 165 }),
        }
    }

    fn assert_no_repeats(searched: &[String]) {
        let distinct: BTreeSet<String> = searched.iter().map(|q| queries::normalise(q)).collect();
        assert_eq!(distinct.len(), searched.len(), "{searched:?}");
    }

    fn json_deps(model: Arc<dyn ChatModel>, search: Arc<JsonSearch>) -> ResearcherDeps {
        ResearcherDeps {
            model,
            gatherer: search,
            fetcher: Arc::new(JsonPage),
            pool: Arc::default(),
            settings: ResearcherSettings::default(),
            specialised: None,
        }
    }

    #[tokio::test]
    async fn degenerate_turns_are_billed_and_the_engine_searches_and_reads_for_the_model() {
        let model = Arc::new(Turns {
            // Two degenerate turns, then the clean-context reporter degenerates as well.
            turn: |_| Err(degenerate()),
            requests: Mutex::default(),
        });
        let search = Arc::new(JsonSearch::default());
        let deps = json_deps(model.clone(), search.clone());
        let task = "How do I decode JSON with the json module in Python?";
        let input = RunInput::new(task, Mode::Quick);
        let reported = Mutex::new(Usage::default());
        let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, u| {
            reported.lock().unwrap().add(&u)
        })
        .await
        .expect("a bad output is not the end of the run");

        // Asked twice in the conversation, once in a clean context: three calls, all billed.
        assert_eq!(model.requests.lock().unwrap().len(), 3);
        assert_eq!(report.usage.llm_calls, 3);
        assert_eq!(report.usage.input_tokens, 2700);
        assert_eq!(report.usage.output_tokens, 495);
        assert_eq!(*reported.lock().unwrap(), report.usage);
        // The engine searched the task as written and as keywords (then perhaps reformulated,
        // seed 004), and read the result.
        let searched = search.0.lock().unwrap().clone();
        assert_eq!(
            searched[..2],
            [task.to_string(), "decode json module python".to_string()]
        );
        assert_no_repeats(&searched);
        assert_eq!(report.fetched.len(), 1);
        assert_eq!(report.pages.len(), 1);
        // The extractive report quotes the passage that answers, not the page's opening.
        assert!(
            report.markdown.contains("json.loads(s)"),
            "{}",
            report.markdown
        );
        assert!(report.markdown.contains(JSON_PAGE), "{}", report.markdown);
    }

    /// Finds an off-topic page first, then the one that answers.
    struct TwoResults;

    const OFF_TOPIC: &str = "https://docs.example/library/pickle.html";

    #[async_trait]
    impl Gatherer for TwoResults {
        async fn search(&self, _: &str, _: usize) -> Result<Vec<SearchHit>, SourceError> {
            Ok(vec![hit(OFF_TOPIC, "searx"), hit(JSON_PAGE, "searx")])
        }
    }

    struct TwoPages(Mutex<Vec<String>>);

    #[async_trait]
    impl Fetcher for TwoPages {
        async fn fetch(&self, url: &str) -> Result<Page, FetchError> {
            self.0.lock().unwrap().push(url.to_string());
            let markdown = if url == OFF_TOPIC {
                "# pickle\n\nThe pickle module implements binary protocols for object structures."
            } else {
                "# json\n\n**json.loads(s)**\n\nDeserialize s (a str instance containing a JSON document) to a Python object."
            };
            Ok(Page {
                url: url.into(),
                final_url: url.into(),
                title: url.into(),
                markdown: markdown.into(),
                bytes: 100,
            })
        }
    }

    #[tokio::test]
    async fn a_batch_of_off_task_pages_is_spent_on_the_next_candidates() {
        let model = Arc::new(Turns {
            turn: |n| {
                Ok(match n {
                    0 => call("search", json!({"queries": ["json loads"]})),
                    1 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                    2 => call("scrape", json!({"urls": [OFF_TOPIC]})),
                    _ => text(&format!(
                        "## Summary\njson.loads deserializes a JSON document ([json]({JSON_PAGE}))."
                    )),
                })
            },
            requests: Mutex::default(),
        });
        let fetcher = Arc::new(TwoPages(Mutex::default()));
        let deps = ResearcherDeps {
            model: model.clone(),
            gatherer: Arc::new(TwoResults),
            fetcher: fetcher.clone(),
            pool: Arc::default(),
            settings: ResearcherSettings::default(),
            specialised: None,
        };
        let task = "How do I decode a JSON document with json.loads?";
        let input = RunInput::new(task, Mode::Quick);
        let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
            .await
            .unwrap();
        // The model asked for the off-topic page only; its batch went on to the next result.
        assert_eq!(
            *fetcher.0.lock().unwrap(),
            vec![OFF_TOPIC.to_string(), JSON_PAGE.to_string()]
        );
        assert_eq!(report.irrelevant, vec![OFF_TOPIC.to_string()]);
        assert_eq!(report.pages.len(), 1);
        assert_eq!(report.pages[0].url, JSON_PAGE);
        let requests = model.requests.lock().unwrap();
        let batch = requests[3]
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::Tool)
            .unwrap();
        assert!(
            batch
                .content
                .contains("None of those pages bears on the task, so the next search results were read instead."),
            "{}",
            batch.content
        );
        assert!(
            !batch.content.contains("binary protocols"),
            "{}",
            batch.content
        );
    }

    #[tokio::test]
    async fn placeholder_and_repeated_queries_do_not_spend_the_search_budget() {
        let model = Arc::new(Turns {
            turn: |n| {
                Ok(match n {
                    0 => call(
                        "search",
                        json!({"queries": ["example1", "example2", "example3"]}),
                    ),
                    1 => call(
                        "search",
                        json!({"queries": ["example1", "  ", "python json decode"]}),
                    ),
                    2 => call("search", json!({"queries": ["Python JSON decode."]})),
                    3 => call("search", json!({"queries": ["json.loads object_hook"]})),
                    _ => text(&format!(
                        "## Summary\nUse json.loads ([json]({JSON_PAGE}))."
                    )),
                })
            },
            requests: Mutex::default(),
        });
        let search = Arc::new(JsonSearch::default());
        let deps = json_deps(model.clone(), search.clone());
        let task = "decode JSON in Python";
        let input = RunInput::new(task, Mode::Quick);
        let report = run_researcher(&deps, &input, 0, task, &[], None, &|_, _| {})
            .await
            .unwrap();
        // Turn 0: the task's own searches run, the placeholders do not. Turn 1: one new query.
        // Turn 2: a repeat, refused without a search call. Turn 3: one more. (Seed 004's
        // reformulations may follow a search; they are never repeats either.)
        let searched = search.0.lock().unwrap().clone();
        assert_eq!(
            searched[..2],
            [
                "decode JSON in Python".to_string(),
                "decode json python".to_string()
            ]
        );
        assert!(
            searched.contains(&"python json decode".to_string()),
            "{searched:?}"
        );
        assert!(
            searched.contains(&"json.loads object_hook".to_string()),
            "{searched:?}"
        );
        assert!(
            !searched.iter().any(|q| q.contains("example")),
            "{searched:?}"
        );
        assert_no_repeats(&searched);
        assert_eq!(report.searches as usize, searched.len());
        let requests = model.requests.lock().unwrap();
        let results: Vec<&str> = requests
            .last()
            .unwrap()
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(|m| m.content.as_str())
            .collect();
        assert!(
            results[0].contains("Query \"example1\" was not run: a placeholder"),
            "{}",
            results[0]
        );
        assert!(
            results[1].contains("Query \"\" was not run: empty"),
            "{}",
            results[1]
        );
        assert!(
            results[2].starts_with("Query \"Python JSON decode.\" was not run: already searched.\nNo search was run and no search call was used."),
            "{}",
            results[2]
        );
        // Turn 2 spent no gathering call, so turn 3's query still ran.
        assert!(
            results[3].contains("Query \"json.loads object_hook\""),
            "{}",
            results[3]
        );
    }
}
