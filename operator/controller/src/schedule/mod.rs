//! The ResearchSchedule controller: at every time a schedule names, a ResearchRun from its
//! template, owned by the schedule and labelled with it; history limits and the concurrency
//! policy as CronJob has them. Reconcile looks up the schedule's runs, asks the pure planner
//! ([`plan::plan`]) what to do at the injected clock's `now`, applies that, and writes status.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};
use tracing::{debug, warn};

use quarry_api::schedule::{COMPARE_WITH_ANNOTATION, SCHEDULE_LABEL, SCHEDULED_AT_ANNOTATION};
use quarry_api::{
    ConditionStatus, Phase, ResearchRun, ResearchRunSpec, ResearchSchedule, ResearchScheduleStatus,
    ScheduleReport, condition_types as types, reasons, set_condition,
};
use quarry_engine::telemetry::{Metrics, NamespaceLabels, ScheduleDecision, ScheduleLabels};

use crate::CONTROLLER_NAME;
use crate::error::Error;
use crate::store::configmap::FIELD_MANAGER;
use plan::{Plan, Policy, Run, When};

/// Longest wait between two looks at a schedule (a safety net for missed watch events).
const RECHECK: Duration = Duration::from_secs(300);

/// The clock the controller plans with (tests pass a fixed one).
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// Shared state of the ResearchSchedule controller.
pub struct ScheduleContext {
    /// Kubernetes client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Operator metrics.
    pub metrics: Metrics,
    /// Now.
    pub clock: Clock,
}

impl ScheduleContext {
    /// A context on the wall clock.
    pub fn new(client: Client, metrics: Metrics) -> Self {
        let reporter = Reporter {
            controller: CONTROLLER_NAME.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            clock: Arc::new(Utc::now),
        }
    }
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}

fn to_time(t: DateTime<Utc>) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(Time)
}

/// A run of the schedule for the planner: its scheduled time and outcome.
fn planned_run(run: &ResearchRun) -> Option<Run> {
    let at = run
        .annotations()
        .get(SCHEDULED_AT_ANNOTATION)
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())?
        .with_timezone(&Utc);
    let succeeded = match run.phase() {
        Phase::Completed => Some(true),
        Phase::Failed | Phase::Cancelled => Some(false),
        _ => None,
    };
    Some(Run {
        name: run.name_any(),
        scheduled_at: at,
        succeeded,
    })
}

/// The run for scheduled time `at`, from the template (already parsed as a run spec), compared
/// with `earlier` (the last completed run) when there is one.
fn build_run(
    schedule: &ResearchSchedule,
    spec: ResearchRunSpec,
    at: DateTime<Utc>,
    earlier: Option<&str>,
) -> ResearchRun {
    let name = schedule.name_any();
    let mut run = ResearchRun::new(&plan::run_name(&name, at), spec);
    let mut labels = schedule.spec.run_template.labels.clone();
    labels.insert(SCHEDULE_LABEL.into(), name.clone());
    run.metadata.labels = Some(labels);
    run.metadata.namespace = schedule.namespace();
    let mut annotations: std::collections::BTreeMap<String, String> =
        [(SCHEDULED_AT_ANNOTATION.to_string(), at.to_rfc3339())]
            .into_iter()
            .collect();
    if let Some(earlier) = earlier {
        annotations.insert(COMPARE_WITH_ANNOTATION.into(), earlier.to_string());
    }
    run.metadata.annotations = Some(annotations);
    run.metadata.owner_references = Some(vec![OwnerReference {
        api_version: ResearchSchedule::api_version(&()).into_owned(),
        kind: ResearchSchedule::kind(&()).into_owned(),
        name,
        uid: schedule.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    run
}

/// Counts what the schedule did at a due time (`quarry_schedule_runs_total`).
fn count(ctx: &ScheduleContext, schedule: &ResearchSchedule, decision: ScheduleDecision) {
    ctx.metrics
        .schedule_runs
        .get_or_create(&ScheduleLabels {
            namespace: schedule.namespace().unwrap_or_default(),
            decision,
        })
        .inc();
}

/// Publishes an Event about the schedule; a failure to publish is logged, never fatal.
async fn publish(
    ctx: &ScheduleContext,
    schedule: &ResearchSchedule,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let reference = schedule.object_ref(&());
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Schedule".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &reference).await {
        warn!(error = %e, "publishing a schedule Event");
    }
}

/// Reconciles one ResearchSchedule.
#[tracing::instrument(skip_all, fields(schedule = %schedule.name_any(), namespace = %schedule.namespace().unwrap_or_default()))]
pub async fn reconcile(
    schedule: Arc<ResearchSchedule>,
    ctx: Arc<ScheduleContext>,
) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = reconcile_inner(&schedule, &ctx).await;
    ctx.metrics.record_reconcile_of(
        quarry_engine::telemetry::SCHEDULE_CONTROLLER_NAME,
        result.is_ok(),
        started.elapsed().as_secs_f64(),
    );
    result
}

async fn reconcile_inner(
    schedule: &ResearchSchedule,
    ctx: &ScheduleContext,
) -> Result<Action, Error> {
    let namespace = schedule
        .namespace()
        .ok_or(Error::MissingMetadata("namespace"))?;
    let name = schedule.name_any();
    let uid = schedule.uid().ok_or(Error::MissingMetadata("uid"))?;
    let now = (ctx.clock)();
    let mut status = schedule.status.clone().unwrap_or_default();
    status.observed_generation = schedule.metadata.generation;
    // Condition times come from the same clock the plan used.
    let stamp = to_time(now).unwrap_or_else(|| Time(k8s_openapi::jiff::Timestamp::now()));
    // Validate: the pattern, the time zone and the template must be usable.
    let checked = When::parse(&schedule.spec.schedule, schedule.spec.time_zone.as_deref())
        .map_err(|e| (reasons::SCHEDULE_INVALID, e.to_string()))
        .and_then(|when| {
            serde_json::from_value::<ResearchRunSpec>(schedule.spec.run_template.spec.clone())
                .map(|spec| (when, spec))
                .map_err(|e| {
                    (
                        reasons::TEMPLATE_INVALID,
                        format!("spec.runTemplate.spec is not a ResearchRun spec: {e}"),
                    )
                })
        });
    let (when, template) = match checked {
        Ok(ok) => ok,
        Err((reason, message)) => {
            return stall(ctx, schedule, status, reason, &message, &stamp).await;
        }
    };
    // Look up the schedule's runs.
    let runs: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
    let listed = runs
        .list(&ListParams::default().labels(&format!("{SCHEDULE_LABEL}={name}")))
        .await
        .map_err(kube_err(format!(
            "listing the runs of ResearchSchedule {name}"
        )))?;
    let owned: Vec<&ResearchRun> = listed
        .items
        .iter()
        .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
        .collect();
    let planned: Vec<Run> = owned.iter().filter_map(|r| planned_run(r)).collect();
    let created = schedule
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0))
        .unwrap_or(now);
    let last = status
        .last_schedule_time
        .as_ref()
        .and_then(|t| DateTime::from_timestamp(t.0.as_second(), 0));
    let policy = Policy {
        concurrency: schedule.spec.concurrency_policy,
        starting_deadline_secs: schedule.spec.starting_deadline_seconds,
        suspend: schedule.spec.suspend,
        keep_successful: schedule.spec.successful_runs_history_limit as usize,
        keep_failed: schedule.spec.failed_runs_history_limit as usize,
    };
    let plan = plan::plan(&when, &policy, &planned, last, created, now);
    let latest_ok = planned
        .iter()
        .filter(|r| r.succeeded == Some(true) && !plan.delete.contains(&r.name))
        .max_by_key(|r| r.scheduled_at);
    apply(
        ctx,
        schedule,
        &runs,
        &plan,
        template,
        latest_ok.map(|r| r.name.as_str()),
    )
    .await?;
    // Status: what was scheduled, what runs, where the latest report is.
    status.last_schedule_time = plan.last_schedule.and_then(to_time);
    status.next_schedule_time = if schedule.spec.suspend {
        None
    } else {
        plan.next.and_then(to_time)
    };
    let mut active: Vec<String> = planned
        .iter()
        .filter(|r| r.succeeded.is_none() && !plan.cancel.contains(&r.name))
        .map(|r| r.name.clone())
        .collect();
    if let Some(at) = plan.create {
        active.push(plan::run_name(&name, at));
    }
    active.sort();
    active.dedup();
    status.active = active;
    if let Some(latest) = latest_ok {
        let newly = status.last_report.as_ref().map(|r| r.run.as_str()) != Some(&latest.name);
        let report = owned
            .iter()
            .find(|r| r.name_any() == latest.name)
            .and_then(|r| r.status.as_ref()?.report.as_ref());
        let changes = report.and_then(|r| r.changes);
        status.last_successful_time = to_time(latest.scheduled_at);
        status.last_report = Some(ScheduleReport {
            run: latest.name.clone(),
            config_map: report.and_then(|r| r.config_map.clone()),
            object_url: report.and_then(|r| r.object_url.clone()),
        });
        status.last_changes = changes;
        // Something changed since the run before: an Event and a metric an alert can page on.
        if newly && let Some(n) = changes.filter(|n| *n > 0) {
            ctx.metrics
                .schedule_changes
                .get_or_create(&NamespaceLabels {
                    namespace: namespace.clone(),
                })
                .inc_by(u64::from(n));
            publish(
                ctx,
                schedule,
                EventType::Normal,
                reasons::CHANGED,
                format!(
                    "run {} found {n} change(s) since the run before (see its report's Changes section)",
                    latest.name
                ),
            )
            .await;
        }
    }
    set_condition(
        &mut status.conditions,
        types::STALLED,
        ConditionStatus::False,
        reasons::RESOLVED,
        "the schedule is valid",
        schedule.metadata.generation,
        &stamp,
    );
    set_condition(
        &mut status.conditions,
        types::READY,
        ConditionStatus::True,
        if schedule.spec.suspend {
            reasons::SUSPENDED
        } else {
            reasons::SCHEDULED
        },
        if schedule.spec.suspend {
            "spec.suspend is true: no new runs"
        } else {
            "runs are created at the scheduled times"
        },
        schedule.metadata.generation,
        &stamp,
    );
    write_status(ctx, schedule, &namespace, status).await?;
    let wait = plan
        .next
        .map(|next| (next - now).to_std().unwrap_or_default() + Duration::from_secs(1))
        .unwrap_or(RECHECK)
        .min(RECHECK);
    Ok(Action::requeue(wait))
}

/// Applies a plan: history deleted, replaced runs cancelled, the due run created.
async fn apply(
    ctx: &ScheduleContext,
    schedule: &ResearchSchedule,
    runs: &Api<ResearchRun>,
    plan: &Plan,
    template: ResearchRunSpec,
    earlier: Option<&str>,
) -> Result<(), Error> {
    for old in &plan.delete {
        match runs.delete(old, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(kube_err(format!("deleting run {old}"))(e)),
        }
    }
    for going in &plan.cancel {
        runs.patch(
            going,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"cancel": true}})),
        )
        .await
        .map_err(kube_err(format!("cancelling run {going} (Replace)")))?;
        count(ctx, schedule, ScheduleDecision::Replaced);
        publish(
            ctx,
            schedule,
            EventType::Normal,
            reasons::REPLACED,
            format!("cancelled run {going}: a new time is due (concurrencyPolicy Replace)"),
        )
        .await;
    }
    if let Some((at, why)) = plan.skipped {
        count(ctx, schedule, ScheduleDecision::Skipped);
        publish(
            ctx,
            schedule,
            EventType::Normal,
            reasons::SKIPPED,
            format!("no run for {}: {why}", at.to_rfc3339()),
        )
        .await;
    }
    if let Some(at) = plan.create {
        let run = build_run(schedule, template, at, earlier);
        let name = run.name_any();
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match runs.create(&params, &run).await {
            Ok(_) => {
                count(ctx, schedule, ScheduleDecision::Created);
                publish(
                    ctx,
                    schedule,
                    EventType::Normal,
                    reasons::SCHEDULED,
                    format!("created run {name} for {}", at.to_rfc3339()),
                )
                .await;
            }
            // Made by an earlier reconcile whose status write was lost.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(kube::Error::Api(e)) if e.code == 422 || e.code == 400 => {
                // The API server refuses the template: say so on the schedule.
                let message = format!("the API server refused run {name}: {}", e.message);
                publish(
                    ctx,
                    schedule,
                    EventType::Warning,
                    reasons::TEMPLATE_INVALID,
                    message.clone(),
                )
                .await;
                return Err(Error::TemplateRefused(message));
            }
            Err(e) => return Err(kube_err(format!("creating run {name}"))(e)),
        }
    }
    Ok(())
}

/// The schedule cannot be used as written: Stalled with a message to act on, and an Event.
async fn stall(
    ctx: &ScheduleContext,
    schedule: &ResearchSchedule,
    mut status: ResearchScheduleStatus,
    reason: &str,
    message: &str,
    now: &Time,
) -> Result<Action, Error> {
    let was = quarry_api::find_condition(&status.conditions, types::STALLED)
        .is_some_and(|c| c.status == "True" && c.message == message);
    set_condition(
        &mut status.conditions,
        types::STALLED,
        ConditionStatus::True,
        reason,
        message,
        schedule.metadata.generation,
        now,
    );
    set_condition(
        &mut status.conditions,
        types::READY,
        ConditionStatus::False,
        reason,
        message,
        schedule.metadata.generation,
        now,
    );
    status.next_schedule_time = None;
    if !was {
        publish(
            ctx,
            schedule,
            EventType::Warning,
            reason,
            message.to_string(),
        )
        .await;
    }
    let namespace = schedule.namespace().unwrap_or_default();
    write_status(ctx, schedule, &namespace, status).await?;
    Ok(Action::await_change())
}

/// Writes the status when it changed.
async fn write_status(
    ctx: &ScheduleContext,
    schedule: &ResearchSchedule,
    namespace: &str,
    status: ResearchScheduleStatus,
) -> Result<(), Error> {
    if schedule.status.as_ref() == Some(&status) {
        return Ok(());
    }
    // Server-Side Apply: a field this manager wrote before and omits now (no active runs, no
    // next time while suspended) is removed; a merge patch would leave the old value standing.
    let body = serde_json::json!({
        "apiVersion": ResearchSchedule::api_version(&()),
        "kind": ResearchSchedule::kind(&()),
        "status": serde_json::to_value(&status).map_err(|source| Error::Serialize { what: "status", source })?,
    });
    let api: Api<ResearchSchedule> = Api::namespaced(ctx.client.clone(), namespace);
    api.patch_status(
        &schedule.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(kube_err(format!(
        "writing the status of ResearchSchedule {}",
        schedule.name_any()
    )))?;
    Ok(())
}

/// Requeue policy after a reconcile error.
pub fn error_policy(
    schedule: Arc<ResearchSchedule>,
    error: &Error,
    _ctx: Arc<ScheduleContext>,
) -> Action {
    warn!(schedule = %schedule.name_any(), error = %error, "schedule reconcile failed");
    Action::requeue(Duration::from_secs(15))
}

/// Runs the ResearchSchedule controller for `namespace` (or all) until shutdown.
pub async fn run_controller(client: Client, namespace: Option<String>, ctx: Arc<ScheduleContext>) {
    let (schedules, runs): (Api<ResearchSchedule>, Api<ResearchRun>) = match &namespace {
        Some(ns) => (
            Api::namespaced(client.clone(), ns),
            Api::namespaced(client.clone(), ns),
        ),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    Controller::new(schedules, watcher::Config::default())
        .owns(runs, watcher::Config::default().labels(SCHEDULE_LABEL))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "schedule controller event");
            }
        })
        .await;
}
