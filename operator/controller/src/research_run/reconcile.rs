//! The path of one ResearchRun, step by step: [`reconcile`] → finalizer (apply | cleanup) →
//! look up what this process holds for the run → [`decide::next`] (pure) → apply that step:
//! a status write, a signal to the running task, or look up and validate the profile
//! ([`resolve`]) and start research ([`apply::launch`]). Status is written through
//! [`status_writer`](super::status_writer) only; once research runs, by its writer task alone.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{info, warn};

use super::decide::{self, Next};
use super::resolve::resolve;
use super::status::RunView;
use super::status_writer::{apply_status, stored_spec_invalid};
use super::{ACTIVE_RECHECK, Context, SEARCH_ENGINE_RECHECK, apply, artifacts};
use crate::error::Error;
use quarry_api::{ResearchRun, reasons};
use quarry_engine::telemetry::{ErrorLabels, PhaseLabel};

/// Reconciles one ResearchRun. Returns quickly: research runs in the registry's tasks.
#[tracing::instrument(skip_all, fields(run = %run.name_any(), namespace = %run.namespace().unwrap_or_default()))]
pub async fn reconcile(run: Arc<ResearchRun>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = finalizer(run, &ctx).await;
    ctx.metrics
        .record_reconcile(result.is_ok(), started.elapsed().as_secs_f64());
    result
}

/// Runs with object-store artifacts go through kube's finalizer helper: cleanup on deletion.
async fn finalizer(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    if !artifacts::has_finalizer(&run) {
        return apply_run(run, ctx).await;
    }
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), &namespace);
    kube::runtime::finalizer::finalizer(
        &api,
        artifacts::ARTIFACTS_FINALIZER,
        run,
        |event| async move {
            match event {
                kube::runtime::finalizer::Event::Apply(run) => apply_run(run, ctx).await,
                kube::runtime::finalizer::Event::Cleanup(run) => artifacts::cleanup(run, ctx).await,
            }
        },
    )
    .await
    .map_err(artifacts::finalizer_error)
}

/// The apply side of the finalizer; a run the API server refuses every write to is left alone.
async fn apply_run(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    match steps(run.clone(), ctx).await {
        Err(Error::StoredSpecInvalid { message, .. }) => {
            stored_spec_invalid(ctx, &run, &message).await;
            Ok(Action::await_change())
        }
        other => other,
    }
}

/// Look up what this process holds for the run, decide the next step, apply it.
async fn steps(run: Arc<ResearchRun>, ctx: &Arc<Context>) -> Result<Action, Error> {
    let uid = run.uid().ok_or(Error::MissingMetadata("uid"))?;
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let presence = ctx.registry.presence(&uid);
    match decide::next(&run, presence) {
        Next::Forget => {
            ctx.registry.forget(&uid);
            Ok(Action::await_change())
        }
        Next::Finished => {
            ctx.metrics.set_run_phase(
                &uid,
                &namespace,
                PhaseLabel::from_phase_name(run.phase().as_str()),
            );
            apply::delete_after_ttl(&run, ctx).await
        }
        Next::Signal(signal) => {
            ctx.registry.publish_run(&uid, &run);
            // A cancelled run's executor stops and ends Cancelled; its status writer writes that.
            ctx.registry.signal(&uid, signal);
            Ok(Action::requeue(ACTIVE_RECHECK))
        }
        // Its status writer lands the final status; that write brings the run back here.
        Next::TaskEnded => Ok(Action::await_change()),
        Next::Cancel => {
            info!(run = %run.name_any(), namespace = %namespace, "run cancelled before research ran in this process");
            apply_status(ctx, &run, RunView::Cancelled).await?;
            Ok(Action::await_change())
        }
        Next::Suspend => {
            apply_status(ctx, &run, RunView::Suspended).await?;
            Ok(Action::await_change())
        }
        Next::Start => start(run, ctx, &namespace).await,
    }
}

/// Look up and validate the profile, its Secrets and SearchEngine, then start research.
async fn start(
    run: Arc<ResearchRun>,
    ctx: &Arc<Context>,
    namespace: &str,
) -> Result<Action, Error> {
    match resolve(ctx, &run, namespace).await? {
        Ok(request) => apply::launch(ctx, run, request).await,
        Err(wait) if wait.reason == reasons::WAITING_FOR_SEARCH_ENGINE => {
            let view = RunView::Waiting {
                reason: wait.reason,
                message: &wait.message,
            };
            apply_status(ctx, &run, view).await?;
            Ok(Action::requeue(SEARCH_ENGINE_RECHECK))
        }
        Err(stall) => apply::stalled(ctx, &run, &stall).await,
    }
}

/// Requeue policy after a reconcile error.
pub fn error_policy(run: Arc<ResearchRun>, error: &Error, ctx: Arc<Context>) -> Action {
    warn!(run = %run.name_any(), error = %error, "reconcile failed");
    ctx.metrics
        .reconcile_errors
        .get_or_create(&ErrorLabels {
            reason: error.metric_reason().into(),
        })
        .inc();
    Action::requeue(Duration::from_secs(10))
}
