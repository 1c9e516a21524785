//! Pure status logic: the desired ResearchRun status for what the controller knows about a run,
//! and the Events a status transition calls for. No I/O, no clock (the time is passed in).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;

use crate::store::routed::ReportLocation;
use kube::ResourceExt;
use quarry_api::{
    AgendaTask, ApprovalStatus, ConditionStatus, CostRange, Phase, ReportRef, ResearchRun,
    ResearchRunStatus, RunUsage, TaskState, condition_types as types, find_condition, reasons,
    set_condition,
};
use quarry_engine::llm::format_pico_usd;
use quarry_engine::research::machine::state::{
    Phase as EnginePhase, RunState, TaskState as EngineTaskState,
};

/// What the controller knows about a run, from which its status follows.
#[derive(Debug, Clone, Copy)]
pub enum RunView<'a> {
    /// It cannot progress until something changes (missing profile, Secret or key).
    Stalled {
        /// Condition reason, e.g. `ProfileNotFound`.
        reason: &'a str,
        /// What a person should do, naming the object and key (never a value).
        message: &'a str,
    },
    /// It waits for something that is on its way (a SearchEngine scaling up from zero).
    Waiting {
        /// Condition reason, e.g. `WaitingForSearchEngine`.
        reason: &'a str,
        /// What it waits for.
        message: &'a str,
    },
    /// `spec.suspend` is true and no research is running.
    Suspended,
    /// `spec.cancel` is true and no research is running: the run ends `Cancelled` as it stands.
    Cancelled,
    /// Research was just handed to an executor.
    Starting,
    /// The executor reported this engine state.
    Progress(&'a RunState),
    /// The run is being deleted and its object-store artifacts could not be deleted yet.
    CleanupFailed {
        /// What failed and the way out.
        message: &'a str,
    },
}

/// An Event the controller should publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Normal or Warning.
    pub type_: EventType,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable note.
    pub note: String,
    /// CamelCase action.
    pub action: String,
}

/// Message of a cancelled run's conditions, however it was cancelled.
pub const CANCELLED_MESSAGE: &str = "the run was cancelled";

/// Maps the engine's phase onto the API's.
pub fn api_phase(phase: EnginePhase) -> Phase {
    match phase {
        EnginePhase::Pending => Phase::Pending,
        EnginePhase::Planning => Phase::Planning,
        EnginePhase::Researching => Phase::Researching,
        EnginePhase::Synthesizing => Phase::Synthesizing,
        EnginePhase::Completed => Phase::Completed,
        EnginePhase::Failed => Phase::Failed,
        EnginePhase::Cancelled => Phase::Cancelled,
    }
}

fn task_state(state: EngineTaskState) -> TaskState {
    match state {
        EngineTaskState::Pending => TaskState::Pending,
        EngineTaskState::Running => TaskState::Running,
        EngineTaskState::Done => TaskState::Completed,
        EngineTaskState::Failed => TaskState::Failed,
    }
}

/// Sets `Stalled=False` only if the condition exists: a run that never stalled does not carry it.
fn clear_stalled(status: &mut ResearchRunStatus, generation: Option<i64>, now: &Time) {
    if find_condition(&status.conditions, types::STALLED).is_some() {
        set_condition(
            &mut status.conditions,
            types::STALLED,
            ConditionStatus::False,
            reasons::RESOLVED,
            "",
            generation,
            now,
        );
    }
}

/// [`desired_status_at`] for a report stored in ConfigMap `report_configmap`.
pub fn desired_status(
    run: &ResearchRun,
    view: RunView<'_>,
    report_configmap: &str,
    now: &Time,
) -> ResearchRunStatus {
    desired_status_at(
        run,
        view,
        &ReportLocation::ConfigMap(report_configmap.to_string()),
        now,
    )
}

/// The status the run should have given `view`, its report being at `report` once stored.
/// Starts from the current status so transition times and start time are kept; equal to the
/// current status when nothing changed.
pub fn desired_status_at(
    run: &ResearchRun,
    view: RunView<'_>,
    report: &ReportLocation,
    now: &Time,
) -> ResearchRunStatus {
    let generation = run.metadata.generation;
    let mut status = run.status.clone().unwrap_or_default();
    status.observed_generation = generation;
    let current_phase = status.phase.unwrap_or_default();
    // A stall or suspension keeps a phase that is already under way (e.g. after an operator restart).
    let waiting_phase = if current_phase.is_terminal() {
        Phase::Pending
    } else {
        current_phase
    };
    match view {
        RunView::Stalled { reason, message } => {
            status.phase = Some(waiting_phase);
            set_conditions(
                &mut status.conditions,
                &[
                    (types::STALLED, ConditionStatus::True),
                    (types::RECONCILING, ConditionStatus::False),
                    (types::SUCCEEDED, ConditionStatus::Unknown),
                ],
                reason,
                message,
                generation,
                now,
            );
            status.message = Some(message.to_string());
        }
        RunView::Waiting { reason, message } => {
            status.phase = Some(waiting_phase);
            clear_stalled(&mut status, generation, now);
            set_conditions(
                &mut status.conditions,
                &[
                    (types::RECONCILING, ConditionStatus::True),
                    (types::SUCCEEDED, ConditionStatus::Unknown),
                ],
                reason,
                message,
                generation,
                now,
            );
            status.message = Some(message.to_string());
        }
        RunView::Suspended => suspended(&mut status, waiting_phase, generation, now),
        RunView::Cancelled => {
            status.phase = Some(Phase::Cancelled);
            finished(
                &mut status,
                ConditionStatus::False,
                reasons::CANCELLED,
                CANCELLED_MESSAGE,
                generation,
                now,
            );
        }
        RunView::CleanupFailed { message } => {
            // Only the deletion is stuck: the phase and the outcome stay as they were.
            set_condition(
                &mut status.conditions,
                types::STALLED,
                ConditionStatus::True,
                reasons::ARTIFACT_CLEANUP_FAILED,
                message,
                generation,
                now,
            );
            status.message = Some(message.to_string());
        }
        RunView::Starting => {
            status.phase = Some(waiting_phase);
            running(&mut status, waiting_phase, generation, now);
            status.start_time.get_or_insert_with(|| now.clone());
        }
        RunView::Progress(state) => {
            let phase = api_phase(state.phase);
            status.round = (state.round > 0).then_some(state.round);
            status.progress = Some(state.progress());
            status.usage = Some(RunUsage {
                input_tokens: state.usage.input_tokens,
                output_tokens: state.usage.output_tokens,
                cost_usd: Some(state.usage.cost_usd_string()),
                llm_calls: state.usage.llm_calls,
                searches: u64::from(state.searches),
                pages_fetched: u64::from(state.pages_fetched),
                by_model: state
                    .usage_by_model
                    .iter()
                    .take(16)
                    .map(|(model, u)| quarry_api::ModelUsage {
                        model: model.clone(),
                        input_tokens: u.input_tokens,
                        cached_input_tokens: u.cached_input_tokens,
                        output_tokens: u.output_tokens,
                        cost_usd: u.cost_usd_string(),
                        llm_calls: u.llm_calls,
                    })
                    .collect(),
            });
            status.agenda = state
                .agenda
                .iter()
                .map(|t| AgendaTask {
                    id: t.id.to_string(),
                    query: t.query.clone(),
                    state: task_state(t.state),
                })
                .collect();
            status.start_time.get_or_insert_with(|| now.clone());
            if let Some(limit) = state.limit_hit {
                set_condition(
                    &mut status.conditions,
                    types::BUDGET_EXCEEDED,
                    ConditionStatus::True,
                    limit.reason(),
                    "a run limit stopped the research; the report is partial",
                    generation,
                    now,
                );
            }
            // A stored report is referenced whatever the outcome (NoEvidence stores one too).
            if let Some(stored) = state.final_report.as_ref().filter(|_| state.published) {
                status.report = Some(report_ref(stored, report));
            }
            match phase {
                Phase::Completed => {
                    status.phase = Some(phase);
                    let message = match &state.final_report {
                        Some(r) if r.aborted => "no usable sources were found; an honest \"unable to research\" report was stored".to_string(),
                        _ => match report {
                            ReportLocation::ConfigMap(name) => {
                                format!("report stored in ConfigMap {name}")
                            }
                            ReportLocation::Object(url) => format!("report stored at {url}"),
                        },
                    };
                    finished(
                        &mut status,
                        ConditionStatus::True,
                        reasons::COMPLETED,
                        &message,
                        generation,
                        now,
                    );
                }
                Phase::Failed => {
                    status.phase = Some(phase);
                    let (reason, message) = match &state.failure {
                        Some(f) => (f.reason.as_str(), f.message.as_str()),
                        None => (reasons::FAILED, "the run failed"),
                    };
                    finished(
                        &mut status,
                        ConditionStatus::False,
                        reason,
                        message,
                        generation,
                        now,
                    );
                }
                Phase::Cancelled => {
                    status.phase = Some(phase);
                    finished(
                        &mut status,
                        ConditionStatus::False,
                        reasons::CANCELLED,
                        CANCELLED_MESSAGE,
                        generation,
                        now,
                    );
                }
                _ if state.suspended => suspended(&mut status, phase, generation, now),
                _ if state.approval.waiting => {
                    status.phase = Some(phase);
                    awaiting_approval(&mut status, run, state, generation, now);
                }
                _ => {
                    status.phase = Some(phase);
                    running(&mut status, phase, generation, now);
                }
            }
            if !state.approval.waiting || phase.is_terminal() {
                approval_ended(&mut status, state, generation, now);
            }
        }
    }
    status
}

/// Unix seconds as an API time.
fn time_at(secs: i64) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .ok()
        .map(Time)
}

/// The plan waits for a person: the agenda is in status, with since when it waits, its
/// deadline and the estimated cost; how to approve or reject is in the message.
fn awaiting_approval(
    status: &mut ResearchRunStatus,
    run: &ResearchRun,
    state: &RunState,
    generation: Option<i64>,
    now: &Time,
) {
    let name = run.name_any();
    let namespace = run.namespace().unwrap_or_default();
    let tasks = state.agenda.len();
    let cost = state
        .approval
        .estimated_cost_pico
        .map(|(min, max)| {
            format!(
                "; estimated cost {} to {} USD",
                format_pico_usd(min),
                format_pico_usd(max)
            )
        })
        .unwrap_or_default();
    let message = format!(
        "the agenda ({tasks} task(s)) waits for approval{cost}: quarry approve {name} -n {namespace} \
         (or set spec.approval.approved: true); quarry reject {name} -n {namespace} cancels it"
    );
    let timeout = state.input.approval.and_then(|a| a.timeout_secs);
    status.approval = Some(ApprovalStatus {
        waiting_since: state.approval.waiting_since.and_then(time_at),
        deadline: state
            .approval
            .waiting_since
            .zip(timeout)
            .and_then(|(since, t)| time_at(since.saturating_add(t as i64))),
        estimated_cost_usd: state
            .approval
            .estimated_cost_pico
            .map(|(min, max)| CostRange {
                min: format_pico_usd(min),
                max: format_pico_usd(max),
            }),
    });
    clear_stalled(status, generation, now);
    set_condition(
        &mut status.conditions,
        types::AWAITING_APPROVAL,
        ConditionStatus::True,
        reasons::PLAN_READY,
        &message,
        generation,
        now,
    );
    set_conditions(
        &mut status.conditions,
        &[
            (types::RECONCILING, ConditionStatus::False),
            (types::SUCCEEDED, ConditionStatus::Unknown),
        ],
        reasons::PLAN_READY,
        &message,
        generation,
        now,
    );
    status.message = Some(message);
}

/// A plan that waited is decided: the condition turns False (approved, or the run ended).
fn approval_ended(
    status: &mut ResearchRunStatus,
    state: &RunState,
    generation: Option<i64>,
    now: &Time,
) {
    status.approval = None;
    let was_waiting = find_condition(&status.conditions, types::AWAITING_APPROVAL)
        .is_some_and(|c| c.status == "True");
    if !was_waiting {
        return;
    }
    let (reason, message) = if state.approval.approved {
        (reasons::APPROVED, "the plan was approved")
    } else {
        (
            reasons::RESOLVED,
            "the run ended before the plan was approved",
        )
    };
    set_condition(
        &mut status.conditions,
        types::AWAITING_APPROVAL,
        ConditionStatus::False,
        reason,
        message,
        generation,
        now,
    );
}

fn running(status: &mut ResearchRunStatus, phase: Phase, generation: Option<i64>, now: &Time) {
    let message = format!("research in progress: {phase}");
    clear_stalled(status, generation, now);
    set_conditions(
        &mut status.conditions,
        &[
            (types::RECONCILING, ConditionStatus::True),
            (types::SUCCEEDED, ConditionStatus::Unknown),
        ],
        reasons::RUNNING,
        &message,
        generation,
        now,
    );
    status.message = Some(message);
}

fn suspended(status: &mut ResearchRunStatus, phase: Phase, generation: Option<i64>, now: &Time) {
    let message = "spec.suspend is true; set it to false to continue from the last checkpoint";
    status.phase = Some(phase);
    clear_stalled(status, generation, now);
    set_conditions(
        &mut status.conditions,
        &[
            (types::RECONCILING, ConditionStatus::False),
            (types::SUCCEEDED, ConditionStatus::Unknown),
        ],
        reasons::SUSPENDED,
        message,
        generation,
        now,
    );
    status.message = Some(message.to_string());
}

/// Sets several conditions that share one reason and message.
fn set_conditions(
    conditions: &mut Vec<Condition>,
    which: &[(&str, ConditionStatus)],
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    for (type_, value) in which {
        set_condition(conditions, type_, *value, reason, message, generation, now);
    }
}

fn finished(
    status: &mut ResearchRunStatus,
    succeeded: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    clear_stalled(status, generation, now);
    set_conditions(
        &mut status.conditions,
        &[
            (types::RECONCILING, ConditionStatus::False),
            (types::SUCCEEDED, succeeded),
        ],
        reason,
        message,
        generation,
        now,
    );
    status.completion_time.get_or_insert_with(|| now.clone());
    status.message = Some(message.to_string());
}

/// The Events a move from `old` to `new` status calls for: one per phase change, a Warning for a
/// failure, and a Warning when the run becomes stalled (or stalls for another reason).
pub fn transition_events(
    old: Option<&ResearchRunStatus>,
    new: &ResearchRunStatus,
) -> Vec<EventSpec> {
    let mut events = Vec::new();
    let old_stalled = old
        .and_then(|s| find_condition(&s.conditions, types::STALLED))
        .filter(|c| c.status == "True");
    let new_stalled =
        find_condition(&new.conditions, types::STALLED).filter(|c| c.status == "True");
    if let Some(stall) = new_stalled
        && old_stalled.is_none_or(|o| o.reason != stall.reason || o.message != stall.message)
    {
        events.push(EventSpec {
            type_: EventType::Warning,
            reason: stall.reason.clone(),
            note: stall.message.clone(),
            action: "Resolve".into(),
        });
    }
    let old_awaiting = old
        .and_then(|s| find_condition(&s.conditions, types::AWAITING_APPROVAL))
        .map(|c| c.status.as_str());
    if let Some(c) = find_condition(&new.conditions, types::AWAITING_APPROVAL)
        && old_awaiting != Some(c.status.as_str())
        && (c.status == "True" || c.reason == reasons::APPROVED)
    {
        events.push(EventSpec {
            type_: EventType::Normal,
            reason: c.reason.clone(),
            note: c.message.clone(),
            action: "Approve".into(),
        });
    }
    let old_phase = old.and_then(|s| s.phase);
    if let Some(phase) = new.phase
        && old_phase != Some(phase)
        && !(old_phase.is_none() && phase == Phase::Pending)
    {
        let succeeded = find_condition(&new.conditions, types::SUCCEEDED);
        let event = match phase {
            Phase::Failed => EventSpec {
                type_: EventType::Warning,
                reason: succeeded.map_or_else(|| reasons::FAILED.to_string(), |c| c.reason.clone()),
                note: succeeded.map_or_else(|| "the run failed".to_string(), |c| c.message.clone()),
                action: "Research".into(),
            },
            Phase::Completed => EventSpec {
                type_: EventType::Normal,
                reason: reasons::COMPLETED.into(),
                note: succeeded
                    .map_or_else(|| "the run completed".to_string(), |c| c.message.clone()),
                action: "Research".into(),
            },
            other => EventSpec {
                type_: EventType::Normal,
                reason: other.as_str().into(),
                note: format!("run entered phase {other}"),
                action: "Research".into(),
            },
        };
        events.push(event);
    }
    events
}

/// Where a stored report is, with its size, digest and the evidence gate's figures.
fn report_ref(
    report: &quarry_engine::research::machine::state::FinalReport,
    at: &ReportLocation,
) -> ReportRef {
    use sha2::Digest;
    let (config_map, object_url) = match at {
        ReportLocation::ConfigMap(name) => (Some(name.clone()), None),
        ReportLocation::Object(url) => (None, Some(url.clone())),
    };
    ReportRef {
        config_map,
        object_url,
        bytes: report.markdown.len() as u64,
        sha256: Some(hex::encode(sha2::Sha256::digest(
            report.markdown.as_bytes(),
        ))),
        sources: u32::try_from(report.sources.len()).unwrap_or(u32::MAX),
        partial: report.partial,
        citations_checked: (report.claims_checked > 0).then_some(report.claims_checked),
        citation_precision: report.citation_precision().map(|p| format!("{p:.3}")),
        changes: report.changes,
    }
}

#[cfg(test)]
mod tests;
