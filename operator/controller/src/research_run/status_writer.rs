//! The status writer: a run's progress drained into status patches (at most one per interval), metrics and Events.
//! It alone writes a running run's status, the final one included, and publishes the Event of a
//! run the API server refuses every status write to.

use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use tokio::sync::watch;
use tracing::{info, warn};

use super::status::{self, RunView, desired_status_at, transition_events};
use super::{Context, now};
use crate::error::{Error, ErrorReason};
use crate::store::configmap::FIELD_MANAGER;
use quarry_api::{ResearchRun, ResearchRunStatus, reasons};
use quarry_engine::research::machine::state::RunState;
use quarry_engine::telemetry::{ErrorLabels, ModelLabels, PhaseLabel, RunLabels};

/// Writes the status for `view` if it differs from the current one, and publishes the Events the
/// transition calls for. Returns the status the run now has.
pub(super) async fn apply_status(
    ctx: &Context,
    run: &ResearchRun,
    view: RunView<'_>,
) -> Result<ResearchRunStatus, Error> {
    let name = run.name_any();
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let desired = desired_status_at(run, view, &ctx.report_location(run), &now());
    if run.status.as_ref() == Some(&desired) {
        return Ok(desired);
    }
    if !ctx.fence.is_open() {
        // Leadership was lost: the new leader owns this run's status.
        return Err(Error::NotLeader);
    }
    let body = serde_json::json!({
        "apiVersion": ResearchRun::api_version(&()),
        "kind": ResearchRun::kind(&()),
        "status": serde_json::to_value(&desired).map_err(|source| Error::Serialize { what: "status", source })?,
    });
    let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|source| match source {
        kube::Error::Api(status) if status.code == 422 => Error::StoredSpecInvalid {
            namespace: namespace.clone(),
            name: name.clone(),
            message: status.message.clone(),
        },
        source => Error::Kube {
            action: format!("patching status of ResearchRun {namespace}/{name}"),
            source,
        },
    })?;
    if let (Some(uid), Some(phase)) = (run.uid(), desired.phase) {
        // A plan waiting for a person is counted as such (its phase is still Planning).
        let waiting = !phase.is_terminal()
            && quarry_api::find_condition(
                &desired.conditions,
                quarry_api::condition_types::AWAITING_APPROVAL,
            )
            .is_some_and(|c| c.status == "True");
        let label = if waiting {
            Some(PhaseLabel::AwaitingApproval)
        } else {
            PhaseLabel::from_phase_name(phase.as_str())
        };
        ctx.metrics.set_run_phase(&uid, &namespace, label);
    }
    let reference = run.object_ref(&());
    for event in transition_events(run.status.as_ref(), &desired) {
        let event = Event {
            type_: event.type_,
            reason: event.reason,
            note: Some(event.note),
            action: event.action,
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            // Events are best effort: the status already says what happened.
            warn!(run = %name, namespace = %namespace, error = %e, "publishing event failed");
        }
    }
    Ok(desired)
}

/// Drains one run's progress into status patches (at most one per `status_interval`), metrics and
/// Events, until the research task ends.
pub(super) async fn status_writer(
    ctx: Arc<Context>,
    mut base: ResearchRun,
    mut rx: watch::Receiver<Option<RunState>>,
    (writer_id, mut latest): (u64, watch::Receiver<Arc<ResearchRun>>),
    labels: ModelLabels,
    profile: String,
) {
    let uid = base.uid().unwrap_or_default();
    let namespace = labels.namespace.clone();
    let run_labels = RunLabels {
        namespace: namespace.clone(),
        profile: profile.clone(),
    };
    let mut last: Option<RunState> = None;
    let mut latest_open = true;
    // The reconcile wrote the Starting status just now: pacing starts from that write, so a
    // run never gets two status writes within one interval.
    tokio::time::sleep(ctx.status_interval).await;
    // A final status whose write failed is retried by this writer, one interval apart, until it
    // lands (or the run is deleted); nothing else writes it, so it is never written twice.
    let mut retrying_final = false;
    loop {
        let mut closed = false;
        if !retrying_final {
            tokio::select! {
                changed = rx.changed() => closed = changed.is_err(),
                changed = latest.changed(), if latest_open => latest_open = changed.is_ok(),
            }
        }
        {
            let run = latest.borrow_and_update();
            base.metadata = run.metadata.clone();
            base.spec = run.spec.clone();
        }
        let state = rx.borrow_and_update().clone().or_else(|| last.clone());
        if let Some(state) = state {
            let written = match apply_status(&ctx, &base, RunView::Progress(&state)).await {
                Ok(status) => {
                    base.status = Some(status);
                    true
                }
                Err(e) if e.is_not_found() => {
                    info!(run = %base.name_any(), "run deleted; cancelling its research");
                    ctx.registry.forget(&uid);
                    ctx.metrics.set_run_phase(&uid, &namespace, None);
                    return;
                }
                Err(Error::StoredSpecInvalid { message, .. }) if state.phase.is_terminal() => {
                    // No status of this run can be written until it is recreated: say so, once.
                    stored_spec_invalid(&ctx, &base, &message).await;
                    ctx.registry.unsubscribe_writer(&uid, writer_id);
                    return;
                }
                Err(e) => {
                    warn!(run = %base.name_any(), error = %e, "status update failed; will retry");
                    false
                }
            };
            if state.phase.is_terminal()
                && !last.as_ref().is_some_and(|l| l.phase.is_terminal())
                && let Some(outcome) =
                    PhaseLabel::from_phase_name(status::api_phase(state.phase).as_str())
            {
                {
                    let started = base
                        .status
                        .as_ref()
                        .and_then(|s| s.start_time.clone())
                        .or_else(|| base.metadata.creation_timestamp.clone());
                    let mode = match state.input.mode {
                        quarry_engine::research::machine::state::Mode::Quick => "quick",
                        quarry_engine::research::machine::state::Mode::Deep => "deep",
                    };
                    let seconds = started
                        .map(|started| (now().0.as_second() - started.0.as_second()).max(0) as f64);
                    ctx.metrics.record_finished_run(
                        &run_labels,
                        mode,
                        outcome,
                        seconds,
                        state.usage.cost_pico_usd as f64 / 1e12,
                        state.trace_id.clone(),
                    );
                }
            }
            let terminal = state.phase.is_terminal();
            last = Some(state);
            if terminal && written {
                ctx.registry.unsubscribe_writer(&uid, writer_id);
                return;
            }
            retrying_final = terminal && !written;
        }
        if closed && !retrying_final {
            ctx.registry.unsubscribe_writer(&uid, writer_id);
            return;
        }
        tokio::time::sleep(ctx.status_interval).await;
    }
}

/// A run whose stored spec fails validation added after it was stored (a CRD upgrade that
/// tightened a rule, on a server without validation ratcheting) can have no status written.
/// Retrying would loop forever: the run is left alone until it changes, with a Warning Event
/// that says what to do. Nothing was started for it (status is written before research starts).
pub(super) async fn stored_spec_invalid(ctx: &Context, run: &ResearchRun, message: &str) {
    let name = run.name_any();
    warn!(run = %name, error = %message, "stored spec fails the current validation; not retrying");
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            reason: <&str>::from(ErrorReason::StoredSpecInvalid).into(),
        })
        .inc();
    let event = Event {
        type_: EventType::Warning,
        reason: reasons::STORED_SPEC_INVALID.into(),
        note: Some(stored_spec_invalid_note(&name, message)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &run.object_ref(&())).await {
        warn!(run = %name, error = %e, "publishing event failed");
    }
}

/// Pure: the Event note for [`stored_spec_invalid`] (Events are bounded at 1 KiB by the API).
pub fn stored_spec_invalid_note(name: &str, server_message: &str) -> String {
    let message: String = server_message.chars().take(600).collect();
    format!(
        "The stored spec fails this Quarry version's validation, so the API server refuses every \
         status write and the run cannot start: {message}. Recreate it with a valid spec \
         (kubectl delete researchrun {name}; fix the spec; kubectl apply)."
    )
}
