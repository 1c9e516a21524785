//! The ResearchSchedule controller on the real API server with an injected clock: catch-up after
//! downtime (at most one run, none past the starting deadline), the three concurrency policies,
//! history limits and suspend, each driven by moving the clock, never by sleeping until a time.
//!
//! The controller runs in this process (`quarry_operator::schedule::run_controller`)
//! with a clock the test sets; no research controller runs, so the test plays its part by writing
//! a run's status (Completed, Failed) as the run controller would. A "tick" moves the clock, then
//! changes each schedule's spec so it is reconciled, and waits until status reports that
//! generation: everything asserted after a tick was decided at the new time.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use quarry_api::{ResearchRun, ResearchSchedule, find_condition};
use quarry_e2e::control_plane::{ControlPlane, install_crds};
use quarry_e2e::kube_operator::{apply, wait_for};
use quarry_engine::telemetry::Metrics;
use quarry_operator::schedule::{ScheduleContext, run_controller};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn schedule(name: &str, pattern: &str, extra: Value) -> Value {
    let mut spec = json!({
        "schedule": pattern,
        "runTemplate": {"spec": {"query": "What changed in CEL validation rules?", "mode": "quick"}}
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule",
        "metadata": {"name": name}, "spec": spec
    })
}

/// The test's handle on the controller's clock.
struct Clock(Arc<AtomicI64>);

impl Clock {
    fn set(&self, t: DateTime<Utc>) {
        self.0.store(t.timestamp(), Ordering::SeqCst);
    }
}

struct Scene {
    client: Client,
    namespace: String,
    schedules: Api<ResearchSchedule>,
    runs: Api<ResearchRun>,
    ticks: std::sync::atomic::AtomicU32,
}

impl Scene {
    /// Makes `names` reconcile at the clock's time now and waits until each has.
    async fn tick(&self, names: &[&str]) -> Result<(), String> {
        let n = self.ticks.fetch_add(1, Ordering::SeqCst) + 1;
        for name in names {
            let patched = self
                .schedules
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(
                        json!({"spec": {"runTemplate": {"labels": {"tick": n.to_string()}}}}),
                    ),
                )
                .await
                .map_err(|e| format!("touching {name}: {e}"))?;
            let generation = patched.metadata.generation;
            wait_for(
                &format!("{name} reconciled at tick {n}"),
                WAIT,
                || async {
                    self.schedules
                        .get(name)
                        .await
                        .ok()
                        .and_then(|s| s.status)
                        .map(|s| s.observed_generation)
                },
                |seen: &Option<i64>| *seen == generation,
            )
            .await?;
        }
        Ok(())
    }

    async fn runs_of(&self, schedule: &str) -> Result<Vec<ResearchRun>, String> {
        let mut items = self
            .runs
            .list(&ListParams::default().labels(&format!("quarry.dev/schedule={schedule}")))
            .await
            .map_err(|e| e.to_string())?
            .items;
        items.sort_by_key(|r| r.name_any());
        Ok(items)
    }

    async fn run_names(&self, schedule: &str) -> Result<BTreeSet<String>, String> {
        Ok(self
            .runs_of(schedule)
            .await?
            .iter()
            .map(|r| r.name_any())
            .collect())
    }

    async fn status(&self, name: &str) -> Result<quarry_api::ResearchScheduleStatus, String> {
        self.schedules
            .get(name)
            .await
            .map_err(|e| e.to_string())?
            .status
            .ok_or_else(|| format!("{name} has no status"))
    }

    /// Plays the run controller: `run` ends with `phase` (and a report ConfigMap if Completed).
    async fn finish(&self, run: &str, phase: &str) -> Result<(), String> {
        let mut status = json!({"phase": phase});
        if phase == "Completed" {
            status["report"] = json!({"configMap": format!("{run}-report"), "changes": 2});
        }
        self.runs
            .patch_status(
                run,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .map_err(|e| format!("finishing {run}: {e}"))?;
        Ok(())
    }

    /// The reasons of the Events about `name` (polled: Events follow the status write).
    async fn events_include(&self, name: &str, wanted: &[&str]) -> Result<(), String> {
        let api: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), &self.namespace);
        wait_for(
            &format!("Events {wanted:?} of {name}"),
            WAIT,
            || async {
                api.list(&ListParams::default()).await.ok().map(|l| {
                    l.items
                        .into_iter()
                        .filter(|e| {
                            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                        })
                        .filter_map(|e| e.reason)
                        .collect::<Vec<_>>()
                })
            },
            |reasons: &Vec<String>| wanted.iter().all(|w| reasons.iter().any(|r| r == w)),
        )
        .await
        .map(|_| ())
    }
}

/// `quarry ARGS -n NAMESPACE` against the control plane, as a person types it; its stdout.
async fn quarry(plane: &ControlPlane, namespace: &str, args: &[&str]) -> Result<String, String> {
    let bin = quarry_e2e::quarry_bin::quarry_bin()?;
    let out = quarry_e2e::quarry_bin::exempt_loopback_async(tokio::process::Command::new(bin))
        .args(args)
        .args(["-n", namespace])
        .env("KUBECONFIG", plane.kubeconfig())
        .output()
        .await
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    if !out.status.success() {
        return Err(format!(
            "quarry {args:?} failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(stdout)
}

fn run_for(schedule: &str, at: DateTime<Utc>) -> String {
    quarry_operator::schedule::plan::run_name(schedule, at)
}

fn scheduled_at(run: &ResearchRun) -> Option<String> {
    run.annotations().get("quarry.dev/scheduled-at").cloned()
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn schedules_catch_up_once_follow_their_concurrency_policy_keep_their_history_and_suspend() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    let namespace = plane.namespace("schedule-clock").await.unwrap();
    install_crds(&client).await.unwrap();
    // Every time used is a day ahead of the real clock, so all of them are after the schedules'
    // creation (nothing is due before a schedule exists).
    let real = Utc::now();
    let base = Utc
        .timestamp_opt(real.timestamp() - real.timestamp() % 3600 + 24 * 3600, 0)
        .single()
        .unwrap();
    let hour = |h: i64, m: i64| base + chrono::Duration::hours(h) + chrono::Duration::minutes(m);
    let clock = Clock(Arc::new(AtomicI64::new(real.timestamp())));
    let mut ctx = ScheduleContext::new(client.clone(), Metrics::new());
    let seconds = clock.0.clone();
    ctx.clock = Arc::new(move || {
        Utc.timestamp_opt(seconds.load(Ordering::SeqCst), 0)
            .single()
            .unwrap_or_else(Utc::now)
    });
    let controller = tokio::spawn(run_controller(
        client.clone(),
        Some(namespace.clone()),
        Arc::new(ctx),
    ));
    let scene = Scene {
        client: client.clone(),
        schedules: Api::namespaced(client.clone(), &namespace),
        runs: Api::namespaced(client.clone(), &namespace),
        namespace: namespace.clone(),
        ticks: Default::default(),
    };
    let outcome = async {
        let every_five = json!({"concurrencyPolicy": "Allow", "startingDeadlineSeconds": 600});
        let hourly_strict = json!({"concurrencyPolicy": "Allow", "startingDeadlineSeconds": 60});
        let history = json!({"concurrencyPolicy": "Allow", "successfulRunsHistoryLimit": 1, "failedRunsHistoryLimit": 1});
        for body in [
            schedule("catch-up", "*/5 * * * *", every_five),
            schedule("too-late", "0 * * * *", hourly_strict),
            schedule("forbid", "0 * * * *", json!({"concurrencyPolicy": "Forbid"})),
            schedule("allow", "0 * * * *", json!({"concurrencyPolicy": "Allow"})),
            schedule("replace", "0 * * * *", json!({"concurrencyPolicy": "Replace"})),
            schedule("history", "0 * * * *", history),
            schedule("paused", "* * * * *", json!({"suspend": true})),
        ] {
            apply(&client, Some(&namespace), &body).await?;
        }
        let all = ["catch-up", "too-late", "forbid", "allow", "replace", "history", "paused"];
        // At the real time nothing is due yet (each schedule was created a moment ago).
        scene.tick(&all).await?;
        for name in all {
            if !scene.run_names(name).await?.is_empty() {
                return Err(format!("{name} made a run before any time was due"));
            }
        }

        // The operator was down for a day and two minutes: 288 five-minute times were missed.
        // One run is made, for the latest; an hourly time 2 minutes late with a 60 s deadline is
        // skipped, not made up.
        clock.set(hour(1, 2));
        scene.tick(&all).await?;
        let made = scene.runs_of("catch-up").await?;
        let names: Vec<String> = made.iter().map(|r| r.name_any()).collect();
        if names != [run_for("catch-up", hour(1, 0))] {
            return Err(format!("catch-up after downtime made {names:?}"));
        }
        if scheduled_at(&made[0]) != Some(hour(1, 0).to_rfc3339()) {
            return Err(format!("scheduled-at of {:?}", made[0].metadata.annotations));
        }
        let status = scene.status("catch-up").await?;
        if status.last_schedule_time.as_ref().map(|t| t.0.as_second()) != Some(hour(1, 0).timestamp())
            || status.next_schedule_time.as_ref().map(|t| t.0.as_second()) != Some(hour(1, 5).timestamp())
            || status.active != names
        {
            return Err(format!("catch-up status: {:?}", scene.status("catch-up").await?));
        }
        if !scene.run_names("too-late").await?.is_empty() {
            return Err("a time past its starting deadline was made up".into());
        }
        let late = scene.status("too-late").await?;
        if late.last_schedule_time.as_ref().map(|t| t.0.as_second()) != Some(hour(1, 0).timestamp()) {
            return Err(format!("the skipped time is recorded as scheduled: {late:?}"));
        }
        scene.events_include("too-late", &["Skipped"]).await?;
        scene.events_include("catch-up", &["Scheduled"]).await?;
        // Reconciling again at the same time makes nothing new (idempotent).
        scene.tick(&["catch-up"]).await?;
        if scene.runs_of("catch-up").await?.len() != 1 {
            return Err("a second reconcile at the same time made another run".into());
        }

        // The next hour, with the first runs of forbid, allow and replace still going.
        let first = |name: &str| run_for(name, hour(1, 0));
        for name in ["forbid", "allow", "replace"] {
            if scene.run_names(name).await? != BTreeSet::from([first(name)]) {
                return Err(format!("{name} at 1:02: {:?}", scene.run_names(name).await?));
            }
        }
        clock.set(hour(2, 2));
        scene.tick(&["forbid", "allow", "replace", "history"]).await?;
        if scene.run_names("forbid").await? != BTreeSet::from([first("forbid")]) {
            return Err(format!("Forbid made a run beside a going one: {:?}", scene.run_names("forbid").await?));
        }
        scene.events_include("forbid", &["Skipped"]).await?;
        let second = |name: &str| run_for(name, hour(2, 0));
        if scene.run_names("allow").await? != BTreeSet::from([first("allow"), second("allow")]) {
            return Err(format!("Allow: {:?}", scene.run_names("allow").await?));
        }
        if scene.status("allow").await?.active != vec![first("allow"), second("allow")] {
            return Err(format!("Allow's active runs: {:?}", scene.status("allow").await?));
        }
        let replaced = scene.runs_of("replace").await?;
        let cancelled: Vec<(String, bool)> = replaced
            .iter()
            .map(|r| (r.name_any(), r.spec.cancel))
            .collect();
        if cancelled != vec![(first("replace"), true), (second("replace"), false)] {
            return Err(format!("Replace cancels the going run and starts one: {cancelled:?}"));
        }
        scene.events_include("replace", &["Replaced", "Scheduled"]).await?;

        // History: completed and failed runs beyond the limits (1 and 1) are deleted, newest kept.
        scene.finish(&run_for("history", hour(1, 0)), "Completed").await?;
        scene.finish(&run_for("history", hour(2, 0)), "Failed").await?;
        clock.set(hour(3, 2));
        scene.tick(&["history"]).await?;
        scene.finish(&run_for("history", hour(3, 0)), "Completed").await?;
        clock.set(hour(4, 2));
        scene.tick(&["history"]).await?;
        scene.finish(&run_for("history", hour(4, 0)), "Failed").await?;
        let kept = wait_for(
            "history trimmed to one completed and one failed run",
            WAIT,
            || async { scene.run_names("history").await.ok() },
            |names: &BTreeSet<String>| names.len() == 2,
        )
        .await?;
        let expected = BTreeSet::from([run_for("history", hour(3, 0)), run_for("history", hour(4, 0))]);
        if kept != expected {
            return Err(format!("history kept {kept:?}, not the newest of each outcome"));
        }
        let status = wait_for(
            "history's last report",
            WAIT,
            || async { scene.status("history").await.ok() },
            |s: &quarry_api::ResearchScheduleStatus| {
                s.last_report.as_ref().map(|r| r.run.as_str())
                    == Some(run_for("history", hour(3, 0)).as_str())
                    && s.active.is_empty()
            },
        )
        .await?;
        let report = status.last_report.clone().unwrap_or_default();
        if report.config_map != Some(format!("{}-report", report.run))
            || status.last_successful_time.as_ref().map(|t| t.0.as_second()) != Some(hour(3, 0).timestamp())
            || status.last_changes != Some(2)
        {
            return Err(format!("history's status: {status:?}"));
        }

        // Suspended through four hours of every-minute times: nothing made, nothing next.
        if !scene.run_names("paused").await?.is_empty() {
            return Err("a suspended schedule made a run".into());
        }
        let paused = scene.status("paused").await?;
        let ready = find_condition(&paused.conditions, "Ready").map(|c| c.reason.clone());
        if paused.next_schedule_time.is_some() || ready.as_deref() != Some("Suspended") {
            return Err(format!("suspended status: {paused:?}"));
        }
        // Resumed (`quarry resume`): CronJob's catch-up, one run for the latest missed minute,
        // not 240.
        quarry(&plane, &namespace, &["resume", "paused"]).await?;
        scene.tick(&["paused"]).await?;
        let resumed = scene.run_names("paused").await?;
        if resumed != BTreeSet::from([run_for("paused", hour(4, 2))]) {
            return Err(format!("resuming made {resumed:?}, not one run for 4:02"));
        }
        // Suspending (`quarry suspend`) a schedule that had a next time removes it from status
        // (not left stale).
        quarry(&plane, &namespace, &["suspend", "allow"]).await?;
        scene.tick(&["allow"]).await?;
        let allow = scene.status("allow").await?;
        if allow.next_schedule_time.is_some() || allow.active.len() != 2 {
            return Err(format!("suspended allow: {allow:?}"));
        }
        // What a person sees: every schedule with its state, one with its report and runs, and
        // the runs of one schedule.
        let listed = quarry(&plane, &namespace, &["schedules"]).await?;
        let history_row = listed.lines().find(|l| l.starts_with("history ")).unwrap_or_default();
        if !listed.starts_with("NAME ")
            || listed.lines().count() != 8
            || !history_row.contains(&run_for("history", hour(3, 0)))
            || !listed.lines().any(|l| l.starts_with("allow ") && l.contains("Suspended"))
        {
            return Err(format!("quarry schedules:\n{listed}"));
        }
        let one = quarry(&plane, &namespace, &["schedules", "history"]).await?;
        let report_line = format!(
            "Report:     {0} (ConfigMap {0}-report); quarry report {0}",
            run_for("history", hour(3, 0))
        );
        if !one.contains(&report_line) || !one.contains(&run_for("history", hour(4, 0))) {
            return Err(format!("quarry schedules history:\n{one}"));
        }
        let runs = quarry(&plane, &namespace, &["list", "--schedule", "allow"]).await?;
        if runs.lines().count() != 3 || runs.contains("history") {
            return Err(format!("quarry list --schedule allow:\n{runs}"));
        }
        Ok::<(), String>(())
    }
    .await;
    controller.abort();
    if let Err(message) = outcome {
        let runs: Vec<(String, String, Option<String>)> = scene
            .runs
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .iter()
            .map(|r| (r.name_any(), r.phase().to_string(), scheduled_at(r)))
            .collect();
        panic!("{message}\nruns: {runs:?}");
    }
}
