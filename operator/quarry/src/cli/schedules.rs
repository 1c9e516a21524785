//! `quarry schedules` (list, or one schedule with its runs), `quarry suspend` and `quarry resume`:
//! ResearchSchedules as people read them. Requests go through the API server with the user's
//! identity, so RBAC decides.

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use quarry_api::schedule::SCHEDULE_LABEL;
use quarry_api::{ResearchRun, ResearchSchedule, condition_types, find_condition};

use super::cluster::{self, Cluster, FIELD_MANAGER, KubeArgs, Target};
use super::runs::{print_object, write_stdout};
use super::table::{self, NONE, human_duration, render};
use super::{CliError, OutputFormat};

/// Flags of `quarry schedules [NAME]`.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedulesArgs {
    /// One schedule: its status and its runs.
    pub name: Option<String>,
    /// Schedules of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Output: table (default), wide, json, yaml.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Flags of `quarry suspend NAME` and `quarry resume NAME`.
#[derive(clap::Args, Debug, Clone)]
pub struct SuspendArgs {
    /// Name of the ResearchSchedule.
    pub name: String,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Pure: the time from `now` to `t` (`in 5m`) or since it (`3m ago`).
fn relative(
    t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    now: Timestamp,
) -> String {
    match t {
        None => NONE.to_string(),
        Some(t) => {
            let d = t.0.as_second() - now.as_second();
            if d >= 0 {
                format!("in {}", human_duration(d))
            } else {
                format!("{} ago", human_duration(-d))
            }
        }
    }
}

/// Pure: `Suspended`, `Stalled` (the schedule cannot be used) or `Active`.
pub fn state(schedule: &ResearchSchedule) -> &'static str {
    let stalled = schedule.status.as_ref().is_some_and(|s| {
        find_condition(&s.conditions, condition_types::STALLED).is_some_and(|c| c.status == "True")
    });
    if stalled {
        "Stalled"
    } else if schedule.spec.suspend {
        "Suspended"
    } else {
        "Active"
    }
}

/// Pure: the table of schedules (`-A` adds NAMESPACE, wide adds TIMEZONE, POLICY and QUERY).
pub fn schedules_table(
    schedules: &[ResearchSchedule],
    now: Timestamp,
    wide: bool,
    all_namespaces: bool,
) -> String {
    let mut headers = vec![];
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend([
        "NAME", "SCHEDULE", "STATE", "ACTIVE", "LAST", "NEXT", "REPORT", "CHANGES", "AGE",
    ]);
    if wide {
        headers.extend(["TIMEZONE", "POLICY", "QUERY"]);
    }
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let status = s.status.clone().unwrap_or_default();
            let mut row = vec![];
            if all_namespaces {
                row.push(s.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                s.metadata.name.clone().unwrap_or_default(),
                s.spec.schedule.clone(),
                state(s).to_string(),
                status.active.len().to_string(),
                relative(status.last_schedule_time.as_ref(), now),
                relative(status.next_schedule_time.as_ref(), now),
                status
                    .last_report
                    .as_ref()
                    .map_or_else(|| NONE.to_string(), |r| r.run.clone()),
                status
                    .last_changes
                    .map_or_else(|| NONE.to_string(), |n| n.to_string()),
                s.metadata.creation_timestamp.as_ref().map_or_else(
                    || NONE.to_string(),
                    |t| human_duration(now.as_second() - t.0.as_second()),
                ),
            ]);
            if wide {
                let query = s.spec.run_template.spec["query"]
                    .as_str()
                    .unwrap_or_default();
                row.extend([
                    s.spec.time_zone.clone().unwrap_or_else(|| "UTC".into()),
                    format!("{:?}", s.spec.concurrency_policy),
                    table::short_query(query, table::WIDE_QUERY_CHARS),
                ]);
            }
            row
        })
        .collect();
    render(&headers, &rows)
}

/// Pure: one schedule for a person: what it does, where its latest report is, why it is stalled,
/// and its runs.
pub fn describe(schedule: &ResearchSchedule, runs: &[ResearchRun], now: Timestamp) -> String {
    let status = schedule.status.clone().unwrap_or_default();
    let mut out = format!(
        "Name:       {}\nSchedule:   {} ({})\nState:      {}\nPolicy:     {:?}\nLast:       {}\nNext:       {}\n",
        schedule.metadata.name.clone().unwrap_or_default(),
        schedule.spec.schedule,
        schedule.spec.time_zone.as_deref().unwrap_or("UTC"),
        state(schedule),
        schedule.spec.concurrency_policy,
        relative(status.last_schedule_time.as_ref(), now),
        relative(status.next_schedule_time.as_ref(), now),
    );
    if let Some(report) = &status.last_report {
        let place = report
            .config_map
            .as_ref()
            .map(|c| format!("ConfigMap {c}"))
            .or_else(|| report.object_url.clone())
            .unwrap_or_else(|| NONE.to_string());
        out.push_str(&format!(
            "Report:     {} ({place}); quarry report {}\n",
            report.run, report.run
        ));
    }
    if let Some(n) = status.last_changes {
        out.push_str(&format!("Changes:    {n} since the run before\n"));
    }
    if let Some(c) =
        find_condition(&status.conditions, condition_types::STALLED).filter(|c| c.status == "True")
    {
        out.push_str(&format!("Stalled:    {} — {}\n", c.reason, c.message));
    }
    out.push_str("\nRuns:\n");
    if runs.is_empty() {
        out.push_str("  none yet\n");
    } else {
        out.push_str(&table::runs_table(runs, now, false, false));
    }
    out
}

async fn schedule_api(cluster: &Cluster, all: bool) -> Api<ResearchSchedule> {
    if all {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    }
}

/// `quarry schedules [NAME]`.
pub async fn schedules(args: SchedulesArgs) -> Result<(), CliError> {
    let cluster = cluster::connect(&args.kube).await?;
    let api = schedule_api(&cluster, args.all_namespaces && args.name.is_none()).await;
    let Some(name) = &args.name else {
        let mut items = api
            .list(&ListParams::default())
            .await
            .map_err(|e| {
                cluster::classify(
                    e,
                    "list ResearchSchedules",
                    Target::Collection,
                    &cluster.namespace,
                    &cluster.url,
                )
            })?
            .items;
        items.sort_by(|a, b| {
            (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
        });
        return match args.output {
            OutputFormat::Table | OutputFormat::Wide => {
                if items.is_empty() {
                    eprintln!("No ResearchSchedules found.");
                    return Ok(());
                }
                write_stdout(&schedules_table(
                    &items,
                    Timestamp::now(),
                    args.output == OutputFormat::Wide,
                    args.all_namespaces,
                ))
            }
            f => print_object(
                &serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}),
                f,
            ),
        };
    };
    let schedule = api.get(name).await.map_err(|e| {
        cluster::classify(
            e,
            &format!("read ResearchSchedule {name}"),
            Target::Schedule(name),
            &cluster.namespace,
            &cluster.url,
        )
    })?;
    let runs: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let mut owned = runs
        .list(&ListParams::default().labels(&format!("{SCHEDULE_LABEL}={name}")))
        .await
        .map_err(|e| {
            cluster::classify(
                e,
                "list the schedule's ResearchRuns",
                Target::Collection,
                &cluster.namespace,
                &cluster.url,
            )
        })?
        .items;
    owned.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    match args.output {
        OutputFormat::Table | OutputFormat::Wide => {
            write_stdout(&describe(&schedule, &owned, Timestamp::now()))
        }
        f => print_object(&schedule, f),
    }
}

/// `quarry suspend NAME` (`suspend = true`) and `quarry resume NAME` (`false`).
pub async fn set_suspend(args: SuspendArgs, suspend: bool) -> Result<(), CliError> {
    let cluster = cluster::connect(&args.kube).await?;
    let api: Api<ResearchSchedule> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(
        &args.name,
        &params,
        &Patch::Merge(serde_json::json!({"spec": {"suspend": suspend}})),
    )
    .await
    .map_err(|e| {
        cluster::classify(
            e,
            &format!("patch ResearchSchedule {}", args.name),
            Target::Schedule(&args.name),
            &cluster.namespace,
            &cluster.url,
        )
    })?;
    let what = if suspend {
        "suspended: no new runs; running ones go on"
    } else {
        "resumed: the latest missed time (within startingDeadlineSeconds) runs now, then the schedule"
    };
    write_stdout(&format!("researchschedule/{} {what}\n", args.name))
}

#[cfg(test)]
mod tests;
