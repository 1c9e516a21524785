//! The serializable state of one research run and the vocabulary of the reducer.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::llm::Usage;
use quarry_vocab::reasons;

/// Orchestration mode: one researcher, or planner + rounds + evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Quick,
    #[default]
    Deep,
}

/// Requested outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputKind {
    Study,
    Ideas,
    Implementations,
}

/// Hard limits of a run; `None` means unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    pub max_concurrent_researchers: u32,
    /// Hard cap on rounds, including the evaluator's bonus rounds.
    pub max_rounds: u32,
    pub max_cost_pico_usd: Option<u64>,
    pub max_tokens: Option<u64>,
    pub timeout_secs: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_concurrent_researchers: 3,
            max_rounds: TARGET_ROUNDS + MAX_EXTRA_ROUNDS,
            max_cost_pico_usd: None,
            max_tokens: None,
            timeout_secs: None,
        }
    }
}

/// Rounds the planner's agenda is expected to take (`targetRounds`).
pub const TARGET_ROUNDS: u32 = 1;
/// Bonus rounds the evaluator may add beyond the target (hard limit `targetRounds + 2`).
pub const MAX_EXTRA_ROUNDS: u32 = 2;
/// Progress units budgeted per researcher.
pub const UNITS_PER_RESEARCHER: u32 = 10;

/// What the user asked for, fixed for the life of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunInput {
    pub query: String,
    #[serde(default)]
    pub context: Option<String>,
    #[serde(default)]
    pub mode: Mode,
    pub outputs: Vec<OutputKind>,
    pub top_k: u32,
    #[serde(default)]
    pub limits: Limits,
    /// A person approves the agenda before anything is searched (`spec.approval.required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalPolicy>,
    /// An earlier run of the same question: the report ends with what changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<Earlier>,
}

/// How a run's plan is approved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalPolicy {
    /// Seconds the plan waits for a decision before the run fails `ApprovalTimeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// Where a run's plan stands with its approver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The plan is ready and waits for a decision; nothing is searched meanwhile.
    pub waiting: bool,
    /// The approver said yes (possibly before the plan was ready: a GitOps commit may approve
    /// with the run itself).
    pub approved: bool,
    /// When the plan started waiting, in Unix seconds (the timeout counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<i64>,
    /// What the research would cost, least and most, in pico-USD ([`estimate_cost`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost_pico: Option<(u64, u64)>,
}

/// The cost range of researching `agenda` tasks, priced by the calls the run made so far (the
/// planner's, priced from the profile's table): at least two calls per task and one to write
/// the report; at most `max_turns` per task, a summary per page and the writer, each up to
/// twice the planner's size, capped by the run's cost limit. `None` before any priced call.
pub fn estimate_cost(
    spent: &crate::llm::Usage,
    tasks: usize,
    max_turns: u32,
    max_summaries: usize,
    cost_limit_pico: Option<u64>,
) -> Option<(u64, u64)> {
    if spent.llm_calls == 0 || spent.cost_pico_usd == 0 {
        return None;
    }
    let per_call = spent.cost_pico_usd / spent.llm_calls;
    let tasks = tasks as u64;
    let min = per_call.saturating_mul(tasks * 2 + 1);
    let max_calls = tasks * u64::from(max_turns) + max_summaries as u64 + 2;
    let max = per_call.saturating_mul(max_calls).saturating_mul(2);
    let max = cost_limit_pico.map_or(max, |limit| max.min(limit));
    Some((min.min(max), max))
}

impl RunInput {
    /// A run with default outputs, top-k and limits.
    pub fn new(query: impl Into<String>, mode: Mode) -> Self {
        Self {
            query: query.into(),
            context: None,
            mode,
            outputs: vec![OutputKind::Study],
            top_k: 5,
            limits: Limits::default(),
            approval: None,
            earlier: None,
        }
    }

    /// Compares this run with an earlier one: its findings become context for the researchers
    /// and the writer, and the report ends with what changed since.
    pub fn with_earlier(mut self, earlier: Earlier) -> Self {
        let context = earlier.as_context();
        self.context = Some(match self.context.take() {
            Some(own) if !own.trim().is_empty() => format!("{own}\n\n{context}"),
            _ => context,
        });
        self.earlier = Some(earlier);
        self
    }
}

/// Phase of a run as people see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Pending,
    Planning,
    Researching,
    Synthesizing,
    Completed,
    Failed,
    Cancelled,
}

impl Phase {
    /// True for Completed, Failed and Cancelled.
    pub fn is_terminal(self) -> bool {
        matches!(self, Phase::Completed | Phase::Failed | Phase::Cancelled)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// State of one agenda task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TaskState {
    Pending,
    Running,
    Done,
    Failed,
}

/// One agenda task; each round's researchers take one task each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub id: u32,
    pub query: String,
    pub round: u32,
    pub state: TaskState,
    /// Progress units used by the researcher working on it.
    #[serde(default)]
    pub units: u32,
    #[serde(default)]
    pub error: Option<String>,
}

/// A page or search result a report may cite.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceRef {
    pub url: String,
    pub title: String,
    /// The search snippet (search results only): the evidence a seen-but-unread result offers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snippet: String,
}

impl SourceRef {
    /// A source without snippet.
    pub fn new(url: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            title: title.into(),
            snippet: String::new(),
        }
    }
}

/// The text of a page a researcher read, as the model saw it: what the evidence gate checks
/// claims against and what per-document summaries are made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageExtract {
    pub url: String,
    pub title: String,
    pub text: String,
}

/// What a finished researcher hands back to the orchestrator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResearcherReport {
    pub task_id: u32,
    pub markdown: String,
    /// Pages the researcher fetched successfully.
    pub fetched: Vec<SourceRef>,
    /// Search results the researcher saw.
    pub seen: Vec<SourceRef>,
    /// The text of every page in `fetched` that bears on the task, as shown to the model.
    #[serde(default)]
    pub pages: Vec<PageExtract>,
    /// Pages in `fetched` whose passages match nothing of the task (read, never shown).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irrelevant: Vec<String>,
    /// The queries searched, as run (the honest no-evidence report lists them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queries: Vec<String>,
    pub searches: u32,
    pub usage: Usage,
}

impl ResearcherReport {
    /// Whether some page it read bears on its task (one not in `irrelevant`).
    pub fn found_anything(&self) -> bool {
        self.fetched
            .iter()
            .any(|f| !self.irrelevant.contains(&f.url))
    }
}

/// The lead evaluator's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Synthesize,
    Delegate { queries: Vec<String> },
}

/// The stored result of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalReport {
    pub markdown: String,
    pub findings_json: String,
    pub sources: Vec<SourceRef>,
    /// True when limits stopped the run before the evaluator chose to synthesize.
    pub partial: bool,
    /// True for the honest "unable to research" report.
    pub aborted: bool,
    /// Cited claims checked against the cited page's text by the evidence gate.
    #[serde(default)]
    pub claims_checked: u32,
    /// Of those, the claims the cited text supports.
    #[serde(default)]
    pub claims_supported: u32,
    /// What changed since the earlier run it was compared with (`None`: not compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<u32>,
}

impl FinalReport {
    /// Share of checked citations that the cited text supports; `None` when nothing was checked.
    pub fn citation_precision(&self) -> Option<f64> {
        (self.claims_checked > 0)
            .then(|| f64::from(self.claims_supported) / f64::from(self.claims_checked))
    }
}

/// Why a run failed: a machine reason (CamelCase, used in conditions) and a human message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub reason: String,
    pub message: String,
}

impl Failure {
    /// Builds a failure from a reason constant and a message.
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Self {
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// Which limit stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LimitHit {
    Cost,
    Tokens,
    Time,
}

impl LimitHit {
    /// The condition reason for this limit.
    pub fn reason(self) -> &'static str {
        match self {
            LimitHit::Cost => reasons::COST_LIMIT,
            LimitHit::Tokens => reasons::TOKEN_LIMIT,
            LimitHit::Time => reasons::TIME_LIMIT,
        }
    }
}

/// The whole serializable state of a run: what the reducer reads and writes, what a checkpoint holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    pub input: RunInput,
    pub phase: Phase,
    pub suspended: bool,
    /// Current round, 1-based once researching started.
    pub round: u32,
    pub agenda: Vec<Task>,
    pub reports: Vec<ResearcherReport>,
    /// Usage of the whole run, including failed calls.
    pub usage: Usage,
    /// Usage per model that answered: the model router's ledger, copied in by the executor.
    #[serde(default)]
    pub usage_by_model: std::collections::BTreeMap<String, Usage>,
    pub searches: u32,
    pub pages_fetched: u32,
    /// Every URL fetched by any researcher of this run (the shared URL pool).
    pub fetched_urls: BTreeSet<String>,
    /// Planned progress units (10 per researcher, grows on delegation).
    pub budget_units: u32,
    pub limit_hit: Option<LimitHit>,
    pub final_report: Option<FinalReport>,
    pub failure: Option<Failure>,
    /// True once the final report has been stored (written exactly once).
    pub published: bool,
    /// The run's OpenTelemetry trace id when traces are exported (the exemplar of its duration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The plan's approval, when the run requires one.
    #[serde(default)]
    pub approval: Approval,
}

impl RunState {
    /// A fresh run in phase Pending.
    pub fn new(input: RunInput) -> Self {
        Self {
            input,
            phase: Phase::Pending,
            suspended: false,
            round: 0,
            agenda: Vec::new(),
            reports: Vec::new(),
            usage: Usage::default(),
            usage_by_model: Default::default(),
            searches: 0,
            pages_fetched: 0,
            fetched_urls: BTreeSet::new(),
            budget_units: 0,
            limit_hit: None,
            final_report: None,
            failure: None,
            published: false,
            trace_id: None,
            approval: Approval::default(),
        }
    }

    /// Progress for people: `"NN%"` of planned units, or `"exploring"` past the planned rounds.
    pub fn progress(&self) -> String {
        match self.phase {
            Phase::Completed => return "100%".to_string(),
            Phase::Pending | Phase::Planning => return "0%".to_string(),
            _ => {}
        }
        if self.round > TARGET_ROUNDS {
            return "exploring".to_string();
        }
        if self.budget_units == 0 {
            return "0%".to_string();
        }
        let used: u32 = self
            .agenda
            .iter()
            .map(|t| t.units.min(UNITS_PER_RESEARCHER))
            .sum();
        let pct = (u64::from(used) * 100 / u64::from(self.budget_units)).min(99);
        format!("{pct}%")
    }

    /// Number of distinct pages fetched by the run.
    pub fn source_count(&self) -> usize {
        self.fetched_urls.len()
    }

    /// Reports of earlier-finished researchers, for injection into a starting one.
    pub fn finished_reports(&self) -> impl Iterator<Item = &ResearcherReport> {
        self.reports.iter()
    }
}

/// An earlier run's findings, as read from its `findings.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Earlier {
    /// When the earlier report was written (RFC 3339), shown in the section's title.
    pub date: String,
    /// Its claims the evidence gate found supported.
    pub claims: Vec<String>,
    /// Every source it read.
    pub sources: Vec<String>,
}

impl Earlier {
    /// Reads the parts of a `findings.json` the diff needs; `date` is when it was written.
    pub fn from_findings(findings: &serde_json::Value, date: &str) -> Self {
        let claims = findings["claims"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["supported"].as_bool() == Some(true))
            .filter_map(|c| c["claim"].as_str().map(str::to_string));
        let sources = findings["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s["url"].as_str().map(str::to_string));
        Self {
            date: date.to_string(),
            claims: dedup_strings(claims),
            sources: dedup_strings(sources),
        }
    }

    /// The earlier findings as context for this run's researchers and writer.
    pub fn as_context(&self) -> String {
        let mut text = format!(
            "An earlier report on this question ({}) found the following; check whether it still holds and what is new:\n",
            self.date
        );
        for claim in self.claims.iter().take(20) {
            text.push_str(&format!("- {claim}\n"));
        }
        text
    }
}

fn dedup_strings(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    items.filter(|i| seen.insert(i.clone())).collect()
}
