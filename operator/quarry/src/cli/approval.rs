//! `quarry approve` and `quarry reject`: the decision on a plan that waits for approval
//! (`spec.approval.required`). Both go through the API server with the user's identity, so RBAC
//! decides who may approve (patch on researchruns).

use kube::Api;
use kube::api::{Patch, PatchParams};
use quarry_api::ResearchRun;

use super::CliError;
use super::cluster::{self, FIELD_MANAGER, KubeArgs, Target};
use super::runs::{cancel_patch, get_run, write_stdout};

/// Most tasks an edited agenda may have (the CRD's limit).
const MAX_TASKS: usize = 10;

/// `quarry approve NAME`.
#[derive(clap::Args, Debug, Clone)]
pub struct ApproveArgs {
    /// Name of the ResearchRun.
    pub name: String,
    /// Replace the planned agenda with these tasks (repeat for each task).
    #[arg(long = "task")]
    pub tasks: Vec<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// `quarry reject NAME`.
#[derive(clap::Args, Debug, Clone)]
pub struct RejectArgs {
    /// Name of the ResearchRun.
    pub name: String,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// The merge patch that approves a plan, with the edited agenda when given.
pub fn approve_patch(tasks: &[String]) -> serde_json::Value {
    let mut approval = serde_json::json!({"approved": true});
    if !tasks.is_empty() {
        approval["agenda"] = serde_json::json!(tasks);
    }
    serde_json::json!({"spec": {"approval": approval}})
}

/// Checks an edited agenda as the CRD will, so the user hears it before the API server.
pub fn check_tasks(tasks: &[String]) -> Result<(), CliError> {
    if tasks.len() > MAX_TASKS {
        return Err(CliError::Usage(format!(
            "--task given {} times; an agenda has at most {MAX_TASKS} tasks",
            tasks.len()
        )));
    }
    if let Some(t) = tasks
        .iter()
        .find(|t| !(3..=500).contains(&t.chars().count()))
    {
        return Err(CliError::Usage(format!(
            "--task {t:?}: each agenda task must be 3 to 500 characters"
        )));
    }
    Ok(())
}

/// `quarry approve NAME [--task T]...`: sets `spec.approval.approved` (and the agenda).
pub async fn approve(args: ApproveArgs) -> Result<(), CliError> {
    check_tasks(&args.tasks)?;
    let cluster = cluster::connect(&args.kube).await?;
    let run = get_run(&cluster, &args.name).await?;
    let name = &args.name;
    if !run.spec.approval.as_ref().is_some_and(|a| a.required) {
        return Err(CliError::Usage(format!(
            "ResearchRun {name} does not wait for approval (spec.approval.required is not set); nothing to approve"
        )));
    }
    if run.is_finished() {
        return write_stdout(&format!(
            "researchrun.quarry.dev/{name} already {}; nothing to approve\n",
            run.phase()
        ));
    }
    let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(approve_patch(&args.tasks)))
        .await
        .map_err(|e| {
            cluster::classify(
                e,
                &format!("approve ResearchRun {name}"),
                Target::Run(name),
                &cluster.namespace,
                &cluster.url,
            )
        })?;
    let edited = if args.tasks.is_empty() {
        String::new()
    } else {
        format!(" with an agenda of {} task(s)", args.tasks.len())
    };
    write_stdout(&format!("researchrun.quarry.dev/{name} approved{edited}\n"))
}

/// `quarry reject NAME`: a rejected plan is a cancelled run (`spec.cancel`).
pub async fn reject(args: RejectArgs) -> Result<(), CliError> {
    let cluster = cluster::connect(&args.kube).await?;
    let run = get_run(&cluster, &args.name).await?;
    let name = &args.name;
    if run.is_finished() {
        return write_stdout(&format!(
            "researchrun.quarry.dev/{name} already {}; nothing to reject\n",
            run.phase()
        ));
    }
    let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(name, &params, &Patch::Merge(cancel_patch()))
        .await
        .map_err(|e| {
            cluster::classify(
                e,
                &format!("reject ResearchRun {name}"),
                Target::Run(name),
                &cluster.namespace,
                &cluster.url,
            )
        })?;
    write_stdout(&format!(
        "researchrun.quarry.dev/{name} rejected: the run is cancelled\n"
    ))
}

#[cfg(test)]
mod tests;
