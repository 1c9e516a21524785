//! Applying a decided step with side effects other than the status write: starting a run's
//! research (its launcher, the registry, the status writer) and deleting a finished run after its
//! TTL.

use std::sync::Arc;

use kube::api::DeleteParams;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info};

use super::decide::control_signal;
use super::resolve::{Stall, ttl_wait};
use super::status::RunView;
use super::status_writer::{apply_status, status_writer};
use super::{ACTIVE_RECHECK, Context, LaunchRequest, STALL_REQUEUE, now};
use crate::error::{Error, kube_err};
use quarry_api::{ResearchRun, reasons};
use quarry_engine::telemetry::ModelLabels;

/// Checks and prepares the run's task, writes `Starting`, then starts the task and its status
/// writer: status first, so a failed patch leaves nothing running.
pub(super) async fn launch(
    ctx: &Arc<Context>,
    run: Arc<ResearchRun>,
    request: LaunchRequest,
) -> Result<Action, Error> {
    let uid = run.uid().ok_or(Error::MissingMetadata("uid"))?;
    let namespace = run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    let name = run.name_any();
    if let Err(stall) = ctx.launcher.check(&request).await {
        return stalled(ctx, &run, &stall).await;
    }
    let starter = match ctx.launcher.prepare(request.clone()) {
        Ok(starter) => starter,
        Err(e) => {
            let stall = Stall {
                reason: reasons::PROFILE_INVALID,
                message: format!(
                    "ResearchProfile \"{}\" cannot be used: {e}",
                    request.profile_name
                ),
            };
            return stalled(ctx, &run, &stall).await;
        }
    };
    let written = apply_status(ctx, &run, RunView::Starting).await?;
    let mut base = (*run).clone();
    base.status = Some(written);
    let (progress_tx, progress_rx) = watch::channel(None);
    let progress_tx = Arc::new(progress_tx);
    let task_tx = progress_tx.clone();
    let labels = model_labels(&request, &namespace);
    let started = ctx.registry.start_with(
        &uid,
        control_signal(&run.spec),
        move |control| starter(control, task_tx),
        move |state| {
            // The last state reaches the status writer even when the task did not publish it.
            progress_tx.send_replace(Some(state));
        },
    );
    if started {
        ctx.registry
            .set_report(&uid, request.artifacts.report.clone());
        info!(run = %name, namespace = %namespace, profile = %request.profile_name, "research started");
        let (writer_id, latest_rx) = ctx.registry.subscribe_writer(&uid, &run);
        tokio::spawn(status_writer(
            ctx.clone(),
            base,
            progress_rx,
            (writer_id, latest_rx),
            labels,
            request.profile_name.clone(),
        ));
    }
    Ok(Action::requeue(ACTIVE_RECHECK))
}

fn model_labels(request: &LaunchRequest, namespace: &str) -> ModelLabels {
    let tier = &request.profile.models.primary;
    let provider = url::Url::parse(&tier.base_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    ModelLabels {
        namespace: namespace.to_string(),
        profile: request.profile_name.clone(),
        provider,
        model: tier.model.clone(),
    }
}

pub(super) async fn stalled(
    ctx: &Context,
    run: &ResearchRun,
    stall: &Stall,
) -> Result<Action, Error> {
    debug!(run = %run.name_any(), reason = stall.reason, "run stalled");
    apply_status(
        ctx,
        run,
        RunView::Stalled {
            reason: stall.reason,
            message: &stall.message,
        },
    )
    .await?;
    Ok(Action::requeue(STALL_REQUEUE))
}

/// A finished run: delete it once its TTL has passed.
pub(super) async fn delete_after_ttl(run: &ResearchRun, ctx: &Context) -> Result<Action, Error> {
    let name = &run.name_any();
    let namespace = &run.namespace().ok_or(Error::MissingMetadata("namespace"))?;
    match ttl_wait(run, &now()) {
        None => Ok(Action::await_change()),
        Some(wait) if wait.is_zero() => {
            info!(run = %name, namespace = %namespace, "deleting finished run after ttlSecondsAfterFinished");
            let api: Api<ResearchRun> = Api::namespaced(ctx.client.clone(), namespace);
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => Ok(Action::await_change()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
                Err(e) => Err(kube_err(format!("deleting ResearchRun {namespace}/{name}"))(e)),
            }
        }
        Some(wait) => Ok(Action::requeue(wait)),
    }
}
