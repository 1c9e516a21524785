//! The label sets of Quarry's metric families: bounded values only, never a run name.

use super::*;

/// Labels of reconcile errors: a short, bounded reason such as `KubeApi` or `Serialization`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Error reason (bounded set, from the controller's error enum).
    pub reason: String,
}

/// A run phase as a metric label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum PhaseLabel {
    /// Accepted, not started (includes runs stalled on a missing profile or Secret).
    Pending,
    /// The coordinator is planning the agenda.
    Planning,
    /// Researchers are working.
    Researching,
    /// The final report is being written.
    Synthesizing,
    /// Finished with a report.
    Completed,
    /// Finished without success.
    Failed,
    /// Stopped by suspend or delete.
    Cancelled,
    /// Planned, waiting for a person to approve the plan (`spec.approval.required`).
    AwaitingApproval,
}

impl PhaseLabel {
    /// Parses a phase name as written in the ResearchRun status (`"Researching"`, ...).
    pub fn from_phase_name(name: &str) -> Option<Self> {
        Some(match name {
            "Pending" => Self::Pending,
            "Planning" => Self::Planning,
            "Researching" => Self::Researching,
            "Synthesizing" => Self::Synthesizing,
            "Completed" => Self::Completed,
            "Failed" => Self::Failed,
            "Cancelled" => Self::Cancelled,
            "AwaitingApproval" => Self::AwaitingApproval,
            _ => return None,
        })
    }
}

/// Labels of the runs-by-phase gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// Namespace of the runs.
    pub namespace: String,
    /// Phase of the runs.
    pub phase: PhaseLabel,
}

/// Labels of the scheduled-research counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    /// Namespace of the schedules.
    pub namespace: String,
}

/// What a schedule did at a due time.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum ScheduleDecision {
    /// A run was created.
    Created,
    /// The time was skipped (past its starting deadline, or `Forbid` with a run going).
    Skipped,
    /// A going run was cancelled for the new one (`Replace`).
    Replaced,
}

/// Labels of the schedule decision counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScheduleLabels {
    /// Namespace of the schedule.
    pub namespace: String,
    /// What was decided.
    pub decision: ScheduleDecision,
}

/// Labels of model usage counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    /// Namespace of the run.
    pub namespace: String,
    /// ResearchProfile name.
    pub profile: String,
    /// Provider, e.g. the host of the model's base URL.
    pub provider: String,
    /// Model name as configured in the profile.
    pub model: String,
}

/// Labels of search and fetch counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    /// Namespace of the run.
    pub namespace: String,
    /// ResearchProfile name.
    pub profile: String,
}

/// Labels of model requests: who asked, which endpoint answered, how it went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub namespace: String,
    pub profile: String,
    pub provider: String,
    pub model: String,
    /// `ok`, `rate_limited`, `unavailable`, `timeout`, `invalid_output`, `rejected`,
    /// `budget_refused` or `circuit_open`.
    pub outcome: String,
}

/// Labels of token counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub namespace: String,
    pub profile: String,
    pub provider: String,
    pub model: String,
    /// `input`, `cached` or `output`.
    pub kind: String,
}

/// Labels of per-endpoint series (durations, breaker state, rate-limit waits).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub provider: String,
    pub model: String,
}

/// The exemplar of a model-call duration: the call's trace id, so a slow bucket links to its trace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceLabels {
    pub trace_id: String,
}

/// Labels of search and fetch counters by outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    pub namespace: String,
    pub profile: String,
    /// `ok`, `empty` (searches without results) or `error`.
    pub outcome: String,
}

/// Labels of a SearXNG engine's health gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EngineHealthLabels {
    /// The search backend: a SearchEngine's `namespace/name` or an external URL's host.
    pub backend: String,
    /// The SearXNG engine (`wikipedia`, `bing`, ...).
    pub engine: String,
    /// `Healthy`, `Captcha`, `Suspended`, `Timeout`, `Empty` or `Error`.
    pub state: String,
}

/// Labels of a search backend in the failover chain.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabels {
    /// `searxng`, `brave`, `tavily` or `serper`.
    pub backend: String,
}

/// Labels of a search backend call by outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendOutcomeLabels {
    pub backend: String,
    /// `ok`, `empty`, `error` or `skipped` (breaker open).
    pub outcome: String,
}

/// Labels of cache lookups.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// `search` or `page`.
    pub kind: String,
    /// `memory` or `redis`.
    pub backend: String,
    /// `hit`, `miss` or `error`.
    pub result: String,
}

/// Labels of event stream publications.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StreamPublishLabels {
    /// `memory` or `redis`.
    pub backend: String,
    /// `ok`, `dropped` (the publish queue was full) or `error` (the backend failed; dropped).
    pub outcome: String,
}

/// Labels of the run duration histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `quick` or `deep`.
    pub mode: String,
    /// Terminal phase: Completed, Failed or Cancelled.
    pub outcome: PhaseLabel,
}

/// controller-runtime's reconcile labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub controller: String,
}

/// controller-runtime's reconcile result labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerResultLabels {
    pub controller: String,
    /// `success`, `error` or `requeue_after`.
    pub result: String,
}
