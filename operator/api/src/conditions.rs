//! Status conditions: the type and reason vocabulary of Quarry, and pure helpers to maintain a
//! `meta/v1 Condition` list the way Kubernetes conventions (and kstatus, Flux, Argo CD) expect.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Condition types used on ResearchRun and ResearchProfile status.
pub mod types {
    /// ResearchRun: `Unknown` while running, `True` when completed, `False` when failed or cancelled.
    pub const SUCCEEDED: &str = "Succeeded";
    /// ResearchRun: `True` while work is in progress (kstatus "in progress").
    pub const RECONCILING: &str = "Reconciling";
    /// ResearchRun: `True` when it cannot progress without a change (missing profile or Secret).
    pub const STALLED: &str = "Stalled";
    /// ResearchRun: `True` when a cost, token, round or time limit stopped the run.
    pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
    /// ResearchRun: `True` when the run continues with reduced capability (fallback model, failed source).
    pub const DEGRADED: &str = "Degraded";
    /// ResearchRun: `True` while the planned agenda waits for a person's approval.
    pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
    /// ResearchProfile: `True` when the profile is usable (Secrets present, search endpoint known).
    pub const READY: &str = "Ready";
}

/// Condition reasons used by the operator (CamelCase, as the `Condition.reason` format requires).
pub mod reasons {
    // The engine's failure reasons are defined once, below the engine and the API, and surface
    // here unchanged.
    pub use quarry_vocab::reasons::{
        ALL_RESEARCHERS_FAILED, APPROVAL_TIMEOUT, CANCELLED, COST_LIMIT, MODEL_OUTPUT_INVALID,
        MODEL_REJECTED, MODEL_UNREACHABLE, PLAN_UNPARSEABLE, POLICY_REFUSED, REPORT_STORE_FAILED,
        SYNTHESIS_FAILED, TIME_LIMIT, TOKEN_LIMIT,
    };

    /// The referenced ResearchProfile does not exist (yet).
    pub const PROFILE_NOT_FOUND: &str = "ProfileNotFound";
    /// The run's stored spec fails validation added after it was stored: no status can be
    /// written (Event only).
    pub const STORED_SPEC_INVALID: &str = "StoredSpecInvalid";
    /// The ResearchProfile exists but is invalid.
    pub const PROFILE_INVALID: &str = "ProfileInvalid";
    /// The Secret named by a model tier's `apiKeySecretRef` does not exist.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// The Secret exists but lacks the key named by `apiKeySecretRef.key`.
    pub const SECRET_KEY_MISSING: &str = "SecretKeyMissing";
    /// The Secret exists but has not opted in to being used by Quarry for this destination
    /// (label `quarry.dev/credential: "true"` and annotation `quarry.dev/credential-hosts`).
    pub const SECRET_NOT_OPTED_IN: &str = "SecretNotOptedIn";
    /// The run's `spec.limits` set a limit above its ResearchProfile's `limits`.
    pub const LIMITS_ABOVE_PROFILE: &str = "LimitsAboveProfile";
    /// A ConfigMap with the name of one of the run's artifact ConfigMaps exists and is not the
    /// run's (Quarry never takes it over).
    pub const CONFIGMAP_NOT_OWNED: &str = "ConfigMapNotOwned";
    /// The SearchEngine named by the profile's `search.searchEngineRef` does not exist.
    pub const SEARCH_ENGINE_NOT_FOUND: &str = "SearchEngineNotFound";
    /// `spec.report.kind` is objectStore but no object store is configured.
    pub const OBJECT_STORE_NOT_CONFIGURED: &str = "ObjectStoreNotConfigured";
    /// The profile's `objectStore` (or its credentials Secret) cannot be used as written.
    pub const OBJECT_STORE_INVALID: &str = "ObjectStoreInvalid";
    /// The object store refused the credentials.
    pub const OBJECT_STORE_ACCESS_DENIED: &str = "ObjectStoreAccessDenied";
    /// The object store could not be reached, or its bucket does not exist.
    pub const OBJECT_STORE_UNAVAILABLE: &str = "ObjectStoreUnavailable";
    /// The run is being deleted but its object-store artifacts could not be deleted yet.
    pub const ARTIFACT_CLEANUP_FAILED: &str = "ArtifactCleanupFailed";
    /// The run's object-store artifacts were deleted (an Event).
    pub const ARTIFACTS_DELETED: &str = "ArtifactsDeleted";
    /// A run was deleted with its namespace after its profile or credentials Secret, so its
    /// object-store artifacts could not be reached and were left in place (a Warning Event).
    pub const ARTIFACTS_LEFT: &str = "ArtifactsLeft";
    /// The run waits for its managed SearchEngine to scale up from zero.
    pub const WAITING_FOR_SEARCH_ENGINE: &str = "WaitingForSearchEngine";
    /// The search endpoint could not be reached.
    pub const SEARCH_UNREACHABLE: &str = "SearchUnreachable";
    /// No usable sources were found; the honest "unable to research" report was written.
    pub const NO_SOURCES: &str = "NoSources";
    /// The agenda is planned and waits for approval (`quarry approve NAME`).
    pub const PLAN_READY: &str = "PlanReady";
    /// The plan was approved.
    pub const APPROVED: &str = "Approved";
    /// ResearchSchedule: `spec.schedule` or `spec.timeZone` cannot be used.
    pub const SCHEDULE_INVALID: &str = "ScheduleInvalid";
    /// ResearchSchedule: the run template is no ResearchRun spec, or the API server refused it.
    pub const TEMPLATE_INVALID: &str = "TemplateInvalid";
    /// ResearchSchedule: runs are created at the scheduled times (an Event per run created).
    pub const SCHEDULED: &str = "Scheduled";
    /// ResearchSchedule: a due time was skipped (past its deadline, or Forbid with a run going).
    pub const SKIPPED: &str = "Skipped";
    /// ResearchSchedule: a running run was cancelled for a new one (Replace).
    pub const REPLACED: &str = "Replaced";
    /// ResearchSchedule: the last run found changes since the run before (an Event).
    pub const CHANGED: &str = "Changed";
    /// `spec.suspend` is true.
    pub const SUSPENDED: &str = "Suspended";
    /// The run completed and its report is stored.
    pub const COMPLETED: &str = "Completed";
    /// The run is making progress.
    pub const RUNNING: &str = "Running";
    /// The run hit `limits.maxRounds`.
    pub const ROUND_LIMIT: &str = "RoundLimit";
    /// The run failed for a reason not covered above.
    pub const FAILED: &str = "Failed";
    /// A condition that no longer applies (e.g. `Stalled=False` after the profile appeared).
    pub const RESOLVED: &str = "Resolved";
    /// ResearchProfile: everything it references is present.
    pub const READY: &str = "Ready";
}

/// The three values of `Condition.status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet (e.g. `Succeeded` while a run is in progress).
    Unknown,
}

impl ConditionStatus {
    /// The wire form: `"True"`, `"False"` or `"Unknown"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

impl std::fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `Condition.message` is limited to 32768 bytes by the Kubernetes schema.
pub const MAX_CONDITION_MESSAGE_BYTES: usize = 32_768;

/// Truncates `message` to at most `max` bytes on a char boundary.
fn truncate_bytes(message: &str, max: usize) -> &str {
    if message.len() <= max {
        return message;
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// Sets condition `type_` in `conditions`, adding it if absent; returns whether anything changed.
///
/// `lastTransitionTime` is set to `now` only when the status changes (or the condition is new),
/// as Kubernetes conventions require; reason, message and observedGeneration are updated in place.
/// The message is truncated to the 32768-byte limit of the Condition schema.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
    now: &Time,
) -> bool {
    let message = truncate_bytes(message, MAX_CONDITION_MESSAGE_BYTES);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => {
            let mut changed = false;
            if existing.status != status.as_str() {
                existing.status = status.as_str().to_owned();
                existing.last_transition_time = now.clone();
                changed = true;
            }
            if existing.reason != reason {
                existing.reason = reason.to_owned();
                changed = true;
            }
            if existing.message != message {
                existing.message = message.to_owned();
                changed = true;
            }
            if existing.observed_generation != observed_generation {
                existing.observed_generation = observed_generation;
                changed = true;
            }
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_owned(),
                status: status.as_str().to_owned(),
                reason: reason.to_owned(),
                message: message.to_owned(),
                observed_generation,
                last_transition_time: now.clone(),
            });
            true
        }
    }
}

/// Removes condition `type_`; returns whether it was present.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether condition `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

#[cfg(test)]
mod tests;
