//! `ResearchSchedule`: a ResearchRun made on a cron schedule, as a CronJob makes Jobs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// A cron pattern: five fields (minute hour day-of-month month day-of-week) or a macro such as
/// `@daily`; the operator parses it fully and marks the schedule `Stalled` if it cannot.
pub const CRON_PATTERN: &str =
    r"^(@(yearly|annually|monthly|weekly|daily|hourly)|\S+\s+\S+\s+\S+\s+\S+\s+\S+)$";
/// An IANA time zone name such as `Europe/Berlin` or `UTC`.
pub const TIME_ZONE_PATTERN: &str = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,2}$";
/// Label on every run a schedule creates, naming the schedule.
pub const SCHEDULE_LABEL: &str = "quarry.dev/schedule";
/// Annotation on every run a schedule creates: the scheduled time it stands for (RFC 3339).
pub const SCHEDULED_AT_ANNOTATION: &str = "quarry.dev/scheduled-at";
/// Annotation on a scheduled run after the first: the earlier run whose findings it is compared
/// with (its report ends with what changed since).
pub const COMPARE_WITH_ANNOTATION: &str = "quarry.dev/compare-with";

/// Research on a schedule: a ResearchRun from `runTemplate` at every time `schedule` names.
// Several printcolumns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "quarry.dev",
    version = "v1alpha1",
    kind = "ResearchSchedule",
    plural = "researchschedules",
    namespaced,
    shortname = "rsched",
    category = "quarry",
    status = "ResearchScheduleStatus",
    derive = "PartialEq",
    doc = "Research on a schedule: Quarry creates a ResearchRun from the template at every scheduled time.",
    printcolumn(name = "Schedule", type_ = "string", json_path = ".spec.schedule"),
    printcolumn(name = "Suspend", type_ = "boolean", json_path = ".spec.suspend"),
    printcolumn(name = "Last", type_ = "date", json_path = ".status.lastScheduleTime"),
    printcolumn(
        name = "Next",
        type_ = "string",
        json_path = ".status.nextScheduleTime"
    ),
    printcolumn(
        name = "Report",
        type_ = "string",
        json_path = ".status.lastReport.run"
    ),
    printcolumn(name = "Changes", type_ = "integer", json_path = ".status.lastChanges"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResearchScheduleSpec {
    /// When to research, in cron syntax (`0 7 * * 1-5`, `@daily`).
    #[schemars(length(min = 1, max = 100), regex(pattern = CRON_PATTERN))]
    pub schedule: String,
    /// Time zone of `schedule` (IANA name, default UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), regex(pattern = TIME_ZONE_PATTERN))]
    pub time_zone: Option<String>,
    /// The ResearchRun each scheduled time creates.
    pub run_template: RunTemplate,
    /// What to do when a run of the previous time is still going: `Allow` another, `Forbid`
    /// (skip this time, the default: research costs money), or `Replace` (cancel it).
    #[serde(default)]
    pub concurrency_policy: ConcurrencyPolicy,
    /// A time missed by more than this many seconds (operator down) is skipped, not made up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub starting_deadline_seconds: Option<i64>,
    /// No new runs while true; runs already going are left alone.
    #[serde(default)]
    pub suspend: bool,
    /// Completed runs kept (older ones are deleted, with their reports).
    #[serde(default = "default_successful_history")]
    #[schemars(range(max = 100))]
    pub successful_runs_history_limit: u32,
    /// Failed or cancelled runs kept.
    #[serde(default = "default_failed_history")]
    #[schemars(range(max = 100))]
    pub failed_runs_history_limit: u32,
}

fn default_successful_history() -> u32 {
    3
}

fn default_failed_history() -> u32 {
    1
}

/// The run a schedule creates.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunTemplate {
    /// Labels added to every run (the schedule's own label is always added).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// A ResearchRun spec. Kept as given here (a run's immutability rules must not freeze the
    /// template); it is validated when each run is created, and a template the API server
    /// refuses marks the schedule `Stalled` with the server's message.
    #[schemars(schema_with = "free_form_object")]
    pub spec: serde_json::Value,
}

/// An object whose fields the API server keeps as given.
fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// Concurrency policy of a schedule (CronJob's).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConcurrencyPolicy {
    /// A new run starts even if the last one is still going.
    Allow,
    /// The time is skipped while a run is still going.
    #[default]
    Forbid,
    /// The running one is cancelled and a new one starts.
    Replace,
}

/// The latest report of a schedule: the run that wrote it and where it is stored.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleReport {
    /// The completed run.
    pub run: String,
    /// The ConfigMap holding `report.md` and `findings.json`, when the report is in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<String>,
    /// The report's URL in the object store, when it is in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_url: Option<String>,
}

/// Observed state of a schedule.
#[derive(Serialize, Deserialize, KubeSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResearchScheduleStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The last scheduled time a run was created for (or skipped by the policy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// When the last run that completed was scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_successful_time: Option<Time>,
    /// The next time a run is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
    /// Runs of this schedule not yet finished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active: Vec<String>,
    /// The last completed run and where its report is (the latest report of this schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report: Option<ScheduleReport>,
    /// What changed in the last completed run since the one before (claims and sources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_changes: Option<u32>,
    /// Ready (the schedule parses and runs are being made) or Stalled (it cannot be used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}
