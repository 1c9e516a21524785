//! `ResearchRun`: what to research.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiError;
use super::values::{
    DNS1123_SUBDOMAIN_PATTERN, DURATION_PATTERN, parse_duration, parse_usd_micros,
};

/// Longest accepted `spec.query`, in characters.
pub const MAX_QUERY_CHARS: u32 = 4000;
/// Shortest accepted `spec.query`, in characters.
pub const MIN_QUERY_CHARS: u32 = 3;
/// Longest accepted `spec.context`, in characters.
pub const MAX_CONTEXT_CHARS: u32 = 50_000;
/// Default `spec.topK`.
pub const DEFAULT_TOP_K: u32 = 5;
/// Default `spec.profileRef`.
pub const DEFAULT_PROFILE: &str = "default";
/// Built-in default of `limits.maxConcurrentResearchers` when neither run nor profile sets it.
pub const DEFAULT_MAX_CONCURRENT_RESEARCHERS: u32 = 3;

/// CEL rule on `spec`: every field except `suspend`, `cancel` and `ttlSecondsAfterFinished` is
/// unchanged.
///
/// Each field is compared presence-aware (`has` on both sides) so that adding or removing an
/// optional field is caught too, and no comparison can fail with "no such key".
pub const SPEC_IMMUTABLE_RULE: &str = "self.query == oldSelf.query \
&& (has(self.context) ? (has(oldSelf.context) && self.context == oldSelf.context) : !has(oldSelf.context)) \
&& (has(self.mode) ? (has(oldSelf.mode) && self.mode == oldSelf.mode) : !has(oldSelf.mode)) \
&& (has(self.outputs) ? (has(oldSelf.outputs) && self.outputs == oldSelf.outputs) : !has(oldSelf.outputs)) \
&& (has(self.topK) ? (has(oldSelf.topK) && self.topK == oldSelf.topK) : !has(oldSelf.topK)) \
&& (has(self.profileRef) ? (has(oldSelf.profileRef) && self.profileRef == oldSelf.profileRef) : !has(oldSelf.profileRef)) \
&& (has(self.sources) ? (has(oldSelf.sources) && self.sources == oldSelf.sources) : !has(oldSelf.sources)) \
&& (has(self.limits) ? (has(oldSelf.limits) && self.limits == oldSelf.limits) : !has(oldSelf.limits)) \
&& (has(self.report) ? (has(oldSelf.report) && self.report == oldSelf.report) : !has(oldSelf.report))";

/// Message returned by the API server when [`SPEC_IMMUTABLE_RULE`] fails.
pub const SPEC_IMMUTABLE_MESSAGE: &str = "spec is immutable except suspend, cancel, ttlSecondsAfterFinished and the approver's approval.approved and approval.agenda";

/// CEL transition rule on `spec.cancel`: a cancelled run stays cancelled (unsetting it would
/// race with the cancellation already under way).
pub const CANCEL_FINAL_RULE: &str = "self || !oldSelf";
/// Message for [`CANCEL_FINAL_RULE`].
pub const CANCEL_FINAL_MESSAGE: &str = "cancel cannot be unset once true";

/// CEL rule on `spec.query`: at least one character that is not whitespace (`minLength` alone
/// accepts three spaces, which would start a run researching nothing).
pub const QUERY_NOT_BLANK_RULE: &str = r"self.matches('\\S')";
/// Message for [`QUERY_NOT_BLANK_RULE`].
pub const QUERY_NOT_BLANK_MESSAGE: &str = "query must contain text, not only whitespace";

/// CEL transition rule on `spec`: `approval` is there from the start or never (a run that did
/// not wait for approval cannot start waiting, nor the other way round).
pub const APPROVAL_PRESENCE_RULE: &str =
    "has(self.approval) ? has(oldSelf.approval) : !has(oldSelf.approval)";
/// Message for [`APPROVAL_PRESENCE_RULE`].
pub const APPROVAL_PRESENCE_MESSAGE: &str = "approval can only be set when the run is created";
/// CEL transition rule on `spec.approval`: whether approval is required, and how long the plan
/// may wait, are fixed; `approved` and `agenda` are the approver's to set.
pub const APPROVAL_FIXED_RULE: &str = "self.required == oldSelf.required \
&& (has(self.timeout) ? (has(oldSelf.timeout) && self.timeout == oldSelf.timeout) : !has(oldSelf.timeout))";
/// Message for [`APPROVAL_FIXED_RULE`].
pub const APPROVAL_FIXED_MESSAGE: &str =
    "approval.required and approval.timeout cannot change; approve with approval.approved";
/// CEL transition rule on `spec.approval.approved`: an approval stands.
pub const APPROVED_FINAL_RULE: &str = "self || !oldSelf";
/// Message for [`APPROVED_FINAL_RULE`].
pub const APPROVED_FINAL_MESSAGE: &str = "approved cannot be unset once true";
/// CEL rule on `spec.report`: a prefix only makes sense for the object store.
pub const REPORT_PREFIX_RULE: &str = "self.kind == 'objectStore' || !has(self.prefix)";
/// Message for [`REPORT_PREFIX_RULE`].
pub const REPORT_PREFIX_MESSAGE: &str = "prefix is only valid when kind is objectStore";

/// What to research: a query answered with a cited report by the operator.
// Several printcolumns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "quarry.dev",
    version = "v1alpha1",
    kind = "ResearchRun",
    plural = "researchruns",
    namespaced,
    shortname = "rr",
    category = "quarry",
    status = "ResearchRunStatus",
    derive = "PartialEq",
    doc = "A research question that Quarry answers with a cited report.",
    selectable = ".spec.profileRef",
    selectable = ".status.phase",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Progress", type_ = "string", json_path = ".status.progress"),
    printcolumn(
        name = "Cost",
        type_ = "string",
        json_path = ".status.usage.costUSD",
        description = "Cost so far in USD"
    ),
    printcolumn(
        name = "Sources",
        type_ = "integer",
        json_path = ".status.report.sources",
        description = "Sources cited by the report"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new(SPEC_IMMUTABLE_RULE).message(SPEC_IMMUTABLE_MESSAGE))]
#[x_kube(validation = Rule::new(APPROVAL_PRESENCE_RULE).message(APPROVAL_PRESENCE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct ResearchRunSpec {
    /// The research question.
    #[schemars(length(min = MIN_QUERY_CHARS, max = MAX_QUERY_CHARS))]
    #[x_kube(validation = Rule::new(QUERY_NOT_BLANK_RULE).message(QUERY_NOT_BLANK_MESSAGE))]
    pub query: String,
    /// Optional conversation or background text that frames the query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_CONTEXT_CHARS))]
    pub context: Option<String>,
    /// `quick` (one researcher, no planner or evaluator) or `deep` (planned, multi-round).
    #[serde(default)]
    pub mode: Mode,
    /// Which outputs to produce: any of `study`, `ideas`, `implementations`.
    #[serde(default = "default_outputs")]
    #[schemars(length(min = 1, max = 3))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub outputs: Vec<Output>,
    /// Number of ideas or implementations to return.
    #[serde(default = "default_top_k")]
    #[schemars(range(min = 1, max = 20))]
    pub top_k: u32,
    /// Name of the ResearchProfile in the same namespace.
    #[serde(default = "default_profile_ref")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub profile_ref: String,
    /// Which gatherers researchers may use: any of `web`, `security`, `stackexchange`.
    #[serde(default = "default_sources")]
    #[schemars(length(min = 1, max = 3))]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub sources: Vec<SourceKind>,
    /// Limits of this run; unset fields fall back to the profile's `limits`, then to built-ins.
    /// A run may only lower its profile's limits: one above them is refused (`LimitsAboveProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
    /// Where the report is stored.
    #[serde(default)]
    pub report: ReportTarget,
    /// Pauses the run (no new model calls) while true; mutable, like `cancel` and the TTL.
    #[serde(default)]
    pub suspend: bool,
    /// Stops the run for good when true: research stops, no report is written, and the run ends
    /// `Cancelled`. Cannot be unset (`quarry cancel NAME` sets it).
    #[serde(default)]
    #[x_kube(validation = Rule::new(CANCEL_FINAL_RULE).message(CANCEL_FINAL_MESSAGE))]
    pub cancel: bool,
    /// Delete the run this many seconds after it finished (like a Job's TTL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,
    /// Plan approval: the run plans, then waits for a person before anything is searched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalSpec>,
}

/// Plan approval (`spec.approval`): set `required` at creation; the approver sets `approved`
/// (`quarry approve NAME`, or a reviewer's commit), optionally with an edited `agenda`.
/// Rejecting is cancelling (`quarry reject NAME` sets `spec.cancel`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new(APPROVAL_FIXED_RULE).message(APPROVAL_FIXED_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSpec {
    /// Wait for approval once the agenda is planned.
    #[serde(default)]
    pub required: bool,
    /// The plan is approved; research starts. Cannot be unset.
    #[serde(default)]
    #[x_kube(validation = Rule::new(APPROVED_FINAL_RULE).message(APPROVED_FINAL_MESSAGE))]
    pub approved: bool,
    /// Tasks that replace the planned agenda when the plan is approved (1 to 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 10), inner(length(min = 3, max = 500)))]
    pub agenda: Option<Vec<String>>,
    /// How long the plan may wait for a decision, such as "24h"; then the run fails
    /// `ApprovalTimeout`. Unset: it waits until approved or cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), regex(pattern = DURATION_PATTERN))]
    pub timeout: Option<String>,
}

fn default_outputs() -> Vec<Output> {
    vec![Output::Study]
}

fn default_top_k() -> u32 {
    DEFAULT_TOP_K
}

fn default_profile_ref() -> String {
    DEFAULT_PROFILE.to_owned()
}

fn default_sources() -> Vec<SourceKind> {
    vec![
        SourceKind::Web,
        SourceKind::Security,
        SourceKind::Stackexchange,
    ]
}

/// Orchestration mode.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// One agent researcher, no planner or evaluator.
    Quick,
    /// Planner, rounds of parallel researchers, lead evaluator.
    #[default]
    Deep,
}

impl Mode {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quick => "quick",
            Self::Deep => "deep",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A requested output.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub enum Output {
    /// A study report with the sections of `config/prompts/study.md`.
    Study,
    /// Tagged research ideas.
    Ideas,
    /// Tagged implementation suggestions.
    Implementations,
}

impl Output {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Study => "study",
            Self::Ideas => "ideas",
            Self::Implementations => "implementations",
        }
    }
}

/// A kind of gatherer researchers may call.
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
#[serde(rename_all = "camelCase")]
pub enum SourceKind {
    /// Web search through SearXNG.
    Web,
    /// Security advisories (OSV, NVD, CISA KEV, GitHub).
    Security,
    /// Stack Exchange.
    Stackexchange,
}

impl SourceKind {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Web => "web",
            Self::Security => "security",
            Self::Stackexchange => "stackexchange",
        }
    }
}

mod limits;
use limits::stricter;
pub use limits::{EffectiveLimits, LimitAbove, RunLimits};

/// Kind of report store.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ReportKind {
    /// A ConfigMap `<run>-report` owned by the run.
    #[default]
    ConfigMap,
    /// The operator's configured object store.
    ObjectStore,
}

/// Where the report of a run is stored.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[x_kube(validation = Rule::new(REPORT_PREFIX_RULE).message(REPORT_PREFIX_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct ReportTarget {
    /// `configMap` (default) or `objectStore`.
    #[serde(default)]
    pub kind: ReportKind,
    /// Key prefix in the object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub prefix: Option<String>,
}

impl ResearchRunSpec {
    /// The run's own limits with the built-in defaults filled in (no profile layering).
    pub fn limits_or_default(&self) -> RunLimits {
        let builtin = RunLimits {
            max_concurrent_researchers: Some(DEFAULT_MAX_CONCURRENT_RESEARCHERS),
            ..RunLimits::default()
        };
        self.limits.clone().unwrap_or_default().or(&builtin)
    }

    /// Limits of this run under its profile's, then built-ins, parsed: for every limit the
    /// stricter of the two, so a run can lower its profile's limits but never raise them.
    pub fn effective_limits(
        &self,
        profile_limits: Option<&RunLimits>,
    ) -> Result<EffectiveLimits, ApiError> {
        let own = self.limits.clone().unwrap_or_default();
        let Some(profile) = profile_limits else {
            return own.effective();
        };
        let mine = own.effective()?;
        let theirs = profile.effective()?;
        let concurrency = match (
            own.max_concurrent_researchers,
            profile.max_concurrent_researchers,
        ) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap_or(DEFAULT_MAX_CONCURRENT_RESEARCHERS),
        };
        Ok(EffectiveLimits {
            max_concurrent_researchers: concurrency,
            max_rounds: stricter(mine.max_rounds, theirs.max_rounds),
            max_cost_micro_usd: stricter(mine.max_cost_micro_usd, theirs.max_cost_micro_usd),
            max_tokens: stricter(mine.max_tokens, theirs.max_tokens),
            timeout: stricter(mine.timeout, theirs.timeout),
        })
    }

    /// The limits this run sets above its profile's (each would be lowered to the profile's):
    /// empty when the run only lowers them or leaves them to the profile.
    pub fn limits_above_profile(
        &self,
        profile_limits: Option<&RunLimits>,
    ) -> Result<Vec<LimitAbove>, ApiError> {
        let (Some(own), Some(profile)) = (self.limits.as_ref(), profile_limits) else {
            return Ok(Vec::new());
        };
        let mut above = Vec::new();
        let mut check =
            |field: &'static str, run: Option<String>, cap: Option<String>, over: bool| {
                if let (true, Some(run), Some(profile)) = (over, run, cap) {
                    above.push(LimitAbove {
                        field,
                        run,
                        profile,
                    });
                }
            };
        let over = |a: Option<u128>, b: Option<u128>| matches!((a, b), (Some(a), Some(b)) if a > b);
        let text = |v: Option<u32>| v.map(|v| v.to_string());
        check(
            "maxConcurrentResearchers",
            text(own.max_concurrent_researchers),
            text(profile.max_concurrent_researchers),
            over(
                own.max_concurrent_researchers.map(u128::from),
                profile.max_concurrent_researchers.map(u128::from),
            ),
        );
        check(
            "maxRounds",
            text(own.max_rounds),
            text(profile.max_rounds),
            over(
                own.max_rounds.map(u128::from),
                profile.max_rounds.map(u128::from),
            ),
        );
        let cost = |v: &Option<String>| v.as_deref().map(parse_usd_micros).transpose();
        check(
            "maxCostUSD",
            own.max_cost_usd.clone(),
            profile.max_cost_usd.clone(),
            over(
                cost(&own.max_cost_usd)?.map(u128::from),
                cost(&profile.max_cost_usd)?.map(u128::from),
            ),
        );
        check(
            "maxTokens",
            own.max_tokens.map(|v| v.to_string()),
            profile.max_tokens.map(|v| v.to_string()),
            over(
                own.max_tokens.map(u128::from),
                profile.max_tokens.map(u128::from),
            ),
        );
        let time = |v: &Option<String>| v.as_deref().map(parse_duration).transpose();
        check(
            "timeout",
            own.timeout.clone(),
            profile.timeout.clone(),
            over(
                time(&own.timeout)?.map(|d| d.as_millis()),
                time(&profile.timeout)?.map(|d| d.as_millis()),
            ),
        );
        Ok(above)
    }

    /// Whether output `output` was requested.
    pub fn wants(&self, output: Output) -> bool {
        self.outputs.contains(&output)
    }

    /// Whether gatherer `source` is enabled.
    pub fn uses(&self, source: SourceKind) -> bool {
        self.sources.contains(&source)
    }
}

/// Phase of a run, for people (derived from the conditions).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Phase {
    /// Accepted, waiting for its profile or a worker.
    #[default]
    Pending,
    /// The planner is building the agenda.
    Planning,
    /// Researchers are working.
    Researching,
    /// The final report is being written.
    Synthesizing,
    /// The report is stored.
    Completed,
    /// The run ended without a report (see conditions and message).
    Failed,
    /// Deleted or cancelled before finishing.
    Cancelled,
}

impl Phase {
    /// The wire form (`"Pending"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Planning => "Planning",
            Self::Researching => "Researching",
            Self::Synthesizing => "Synthesizing",
            Self::Completed => "Completed",
            Self::Failed => "Failed",
            Self::Cancelled => "Cancelled",
        }
    }

    /// Whether the run can make no further progress (Completed, Failed or Cancelled).
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Observed state of a run, written by the operator through the status subresource.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResearchRunStatus {
    /// Phase for people; tools should read the conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Succeeded, Reconciling, Stalled, BudgetExceeded, Degraded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The research agenda (one task in quick mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["id".into()]))]
    pub agenda: Vec<AgendaTask>,
    /// Current research round, starting at 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// One entry per researcher started so far.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub researchers: Vec<ResearcherStatus>,
    /// `"70%"` when the total is known, else `"exploring"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// Tokens, cost and call counts so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// Where the report is, once stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<ReportRef>,
    /// When work on the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the run reached a terminal phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Human-readable summary of the current state or the failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The plan waiting for approval: since when, and what research would cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalStatus>,
}

/// A plan waiting for approval (`status.approval`); the agenda is `status.agenda`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalStatus {
    /// When the plan started waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_since: Option<Time>,
    /// When the plan stops waiting and the run fails `ApprovalTimeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Time>,
    /// Estimated cost of the research, from the profile's price table: the least and the most
    /// the agenda may cost within the run's limits, in USD such as "0.012000".
    #[serde(
        rename = "estimatedCostUSD",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub estimated_cost_usd: Option<CostRange>,
}

/// A range of USD amounts.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct CostRange {
    /// The least, as a decimal string.
    pub min: String,
    /// The most, as a decimal string.
    pub max: String,
}

/// State of an agenda task.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TaskState {
    /// Not started.
    #[default]
    Pending,
    /// A researcher is working on it.
    Running,
    /// Its researcher reported.
    Completed,
    /// Its researcher failed.
    Failed,
    /// Dropped (cancelled run or limit reached).
    Cancelled,
}

/// One task of the agenda.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AgendaTask {
    /// Stable identifier within the run.
    pub id: String,
    /// What the researcher investigates.
    pub query: String,
    /// Current state.
    #[serde(default)]
    pub state: TaskState,
}

/// State of a researcher.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResearcherState {
    /// Waiting for a slot.
    #[default]
    Queued,
    /// Searching.
    Gathering,
    /// Reading pages.
    Scraping,
    /// Writing its report.
    Reporting,
    /// Report delivered.
    Completed,
    /// Ended without a report.
    Failed,
    /// Stopped by cancellation or a limit.
    Cancelled,
}

/// Progress of one researcher.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResearcherStatus {
    /// The agenda task it works on.
    pub task_id: String,
    /// Current state.
    #[serde(default)]
    pub state: ResearcherState,
    /// Pages read so far.
    #[serde(default)]
    pub sources: u32,
    /// Input + output tokens used so far.
    #[serde(default)]
    pub tokens: u64,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
}

/// Resource usage of a run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunUsage {
    /// Prompt tokens reported by the model servers.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens reported by the model servers.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in USD as a decimal string, e.g. "0.0421".
    #[serde(rename = "costUSD", default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<String>,
    /// Model calls made.
    #[serde(default)]
    pub llm_calls: u64,
    /// Search requests made.
    #[serde(default)]
    pub searches: u64,
    /// Pages fetched.
    #[serde(default)]
    pub pages_fetched: u64,
    /// The same figures per model that answered (tiers and role models).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub by_model: Vec<ModelUsage>,
}

/// Usage and cost of one model in a run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    /// Model name as configured in the profile.
    pub model: String,
    /// Prompt tokens, cached ones included.
    #[serde(default)]
    pub input_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cached_input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in USD as a decimal string.
    #[serde(rename = "costUSD", default)]
    pub cost_usd: String,
    /// Calls answered by this model.
    #[serde(default)]
    pub llm_calls: u64,
}

/// Where a stored report is.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ReportRef {
    /// Name of the ConfigMap holding `report.md` and `findings.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// URL of the report in the object store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_url: Option<String>,
    /// Size of `report.md` in bytes.
    #[serde(default)]
    pub bytes: u64,
    /// Hex SHA-256 of `report.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Number of distinct sources the report cites.
    #[serde(default)]
    pub sources: u32,
    /// Whether the report was cut short by a limit.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
    /// Cited claims the evidence gate checked against the text of the cited source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citations_checked: Option<u32>,
    /// Share of checked citations the cited text supports, a decimal string such as `"0.875"`
    /// (Kubernetes API conventions avoid floats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub citation_precision: Option<String>,
    /// What changed since the earlier run it was compared with (scheduled runs after the
    /// first): new and no-longer-supported claims, new and vanished sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<u32>,
}

impl ResearchRun {
    /// The phase recorded in status (`Pending` when there is no status yet).
    pub fn phase(&self) -> Phase {
        self.status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
    }

    /// Whether the run reached Completed, Failed or Cancelled.
    pub fn is_finished(&self) -> bool {
        self.phase().is_terminal()
    }

    /// The run's conditions (empty without status).
    pub fn conditions(&self) -> &[Condition] {
        self.status
            .as_ref()
            .map_or(&[], |s| s.conditions.as_slice())
    }
}

#[cfg(test)]
mod tests;
