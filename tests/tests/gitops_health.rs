//! The Argo CD health checks in deploy/argocd/, run by Debian's `lua5.4` the way Argo CD runs them
//! (the object as the global `obj`, the script's return value the health), against objects whose
//! status the operator's own status functions wrote, in every phase.

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use quarry_api::{ResearchRun, ResearchRunSpec};
use quarry_e2e::kube_tools::repo_root;
use quarry_engine::research::machine::state::{
    ApprovalPolicy, Failure, LimitHit, Mode, Phase, RunInput, RunState,
};
use quarry_operator::research_run::status::{RunView, desired_status};
use serde_json::{Value, json};

/// Debian's lua5.4, or a panic saying how to install it (these tests run only when asked for).
fn lua() -> PathBuf {
    ["/usr/bin/lua5.4", "/usr/local/bin/lua5.4"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("lua5.4 not found: apt-get install lua5.4 (scripts/install-test-deps.sh)")
        })
}

/// A JSON value as a Lua table constructor (arrays 1-based, as Argo CD's conversion gives them).
fn lua_literal(v: &Value) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let mut out = String::from("\"");
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    c => out.push(c),
                }
            }
            out.push('"');
            out
        }
        Value::Array(items) => format!(
            "{{{}}}",
            items.iter().map(lua_literal).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("[{}] = {}", lua_literal(&json!(k)), lua_literal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// (status, message) the script returns for `obj`.
fn health(lua: &PathBuf, script: &str, obj: &Value) -> (String, String) {
    let body = std::fs::read_to_string(repo_root().join("deploy/argocd").join(script))
        .expect("health script");
    let program = format!(
        "obj = {}\nlocal hs = (function()\n{body}\nend)()\nio.write(hs.status, \"\\t\", hs.message or \"\")\n",
        lua_literal(obj)
    );
    let out = Command::new(lua)
        .arg("-e")
        .arg(&program)
        .output()
        .expect("run lua5.4");
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (status, message) = text.split_once('\t').expect("status and message");
    (status.to_owned(), message.to_owned())
}

fn at(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

fn run(suspend: bool) -> ResearchRun {
    let mut spec: ResearchRunSpec = serde_yaml::from_str("query: what is CEL?").unwrap();
    spec.suspend = suspend;
    let mut run = ResearchRun::new("r1", spec);
    run.metadata.namespace = Some("ns".into());
    run.metadata.generation = Some(1);
    run
}

/// The run as the operator writes it for `view`.
fn run_in(view: RunView<'_>, suspend: bool) -> Value {
    let mut r = run(suspend);
    r.status = Some(desired_status(&r, RunView::Starting, "r1-report", &at(1)));
    r.status = Some(desired_status(&r, view, "r1-report", &at(2)));
    serde_json::to_value(&r).unwrap()
}

fn state(phase: Phase) -> RunState {
    let mut s = RunState::new(RunInput::new("what is CEL?", Mode::Deep));
    s.phase = phase;
    s
}

#[test]
#[ignore = "needs lua5.4 (scripts/install-test-deps.sh)"]
fn research_run_health_in_every_phase() {
    let lua = lua();
    let check = |obj: &Value, want: &str, says: &str| {
        let (status, message) = health(&lua, "researchrun-health.lua", obj);
        assert_eq!(status, want, "{message} for {}", obj["status"]);
        assert!(message.contains(says), "{message:?} lacks {says:?}");
    };
    let mut created = serde_json::to_value(run(false)).unwrap();
    created.as_object_mut().unwrap().remove("status");
    check(&created, "Progressing", "Waiting for the Quarry operator");

    check(&run_in(RunView::Starting, false), "Progressing", "Pending");
    for (phase, name) in [
        (Phase::Planning, "Planning"),
        (Phase::Researching, "Researching"),
        (Phase::Synthesizing, "Synthesizing"),
    ] {
        check(
            &run_in(RunView::Progress(&state(phase)), false),
            "Progressing",
            name,
        );
    }
    check(
        &run_in(
            RunView::Waiting {
                reason: "WaitingForSearchEngine",
                message: "waiting for SearchEngine default to become ready",
            },
            false,
        ),
        "Progressing",
        "waiting for SearchEngine default",
    );
    check(
        &run_in(
            RunView::Stalled {
                reason: "SecretNotFound",
                message: "Secret \"openai-api-key\" not found in namespace \"ns\"",
            },
            false,
        ),
        "Degraded",
        "SecretNotFound: Secret \"openai-api-key\" not found",
    );
    check(
        &run_in(RunView::Suspended, true),
        "Suspended",
        "spec.suspend is true",
    );
    // A plan waiting for a person is Suspended, not Progressing: nothing moves until approved.
    let mut waiting = state(Phase::Planning);
    waiting.input.approval = Some(ApprovalPolicy::default());
    waiting.approval.waiting = true;
    check(
        &run_in(RunView::Progress(&waiting), false),
        "Suspended",
        "AwaitingApproval: the agenda (0 task(s)) waits for approval",
    );

    check(
        &run_in(RunView::Progress(&state(Phase::Completed)), false),
        "Healthy",
        "report stored in ConfigMap r1-report",
    );
    let mut partial = state(Phase::Completed);
    partial.limit_hit = Some(LimitHit::Cost);
    check(
        &run_in(RunView::Progress(&partial), false),
        "Healthy",
        "partial report (CostLimit)",
    );
    let mut failed = state(Phase::Failed);
    failed.failure = Some(Failure::new("ModelRejected", "401 from the model endpoint"));
    check(
        &run_in(RunView::Progress(&failed), false),
        "Degraded",
        "ModelRejected: 401 from the model endpoint",
    );
    check(
        &run_in(RunView::Progress(&state(Phase::Cancelled)), false),
        "Degraded",
        "Cancelled",
    );
    // A spec change the operator has not seen yet (suspend flipped) is in progress.
    let mut behind = run_in(RunView::Progress(&state(Phase::Researching)), false);
    behind["metadata"]["generation"] = json!(2);
    check(&behind, "Progressing", "observe generation 2");
}

fn engine(status: Value, generation: i64) -> Value {
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "SearchEngine",
        "metadata": {"name": "default", "namespace": "ns", "generation": generation},
        "spec": {"replicas": 1},
        "status": status
    })
}

fn cond(t: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": t, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

#[test]
#[ignore = "needs lua5.4 (scripts/install-test-deps.sh)"]
fn search_engine_health_in_every_state() {
    let lua = lua();
    let check = |obj: &Value, want: &str, says: &str| {
        let (status, message) = health(&lua, "searchengine-health.lua", obj);
        assert_eq!(status, want, "{message}");
        assert!(message.contains(says), "{message:?} lacks {says:?}");
    };
    let mut fresh = engine(json!(null), 1);
    fresh.as_object_mut().unwrap().remove("status");
    check(&fresh, "Progressing", "Waiting");
    let ok = |ready: Value| {
        json!({"observedGeneration": 1, "conditions": [ready,
            cond("Reconciling", "False", "Reconciled", ""), cond("Stalled", "False", "Reconciled", "")]})
    };
    check(
        &engine(
            ok(cond("Ready", "True", "Ready", "1 of 1 replicas ready")),
            1,
        ),
        "Healthy",
        "1 of 1 replicas ready",
    );
    check(
        &engine(
            ok(cond(
                "Ready",
                "False",
                "Idle",
                "scaled to zero: no active runs",
            )),
            1,
        ),
        "Healthy",
        "scaled to zero",
    );
    check(
        &engine(
            json!({"observedGeneration": 1, "conditions": [
                cond("Ready", "False", "Starting", "0 of 1 replicas ready"),
                cond("Reconciling", "True", "Starting", "0 of 1 replicas ready")]}),
            1,
        ),
        "Progressing",
        "Starting: 0 of 1",
    );
    check(
        &engine(
            json!({"observedGeneration": 1, "conditions": [
                cond("Ready", "False", "SettingsInvalid", "spec.settingsOverrides: not a mapping"),
                cond("Stalled", "True", "SettingsInvalid", "spec.settingsOverrides: not a mapping")]}),
            1,
        ),
        "Degraded",
        "SettingsInvalid",
    );
    check(
        &engine(ok(cond("Ready", "True", "Ready", "ready")), 3),
        "Progressing",
        "generation 3",
    );
}

#[test]
#[ignore = "needs lua5.4 (scripts/install-test-deps.sh)"]
fn research_profile_health() {
    let lua = lua();
    let profile = |status: Value| {
        json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
               "metadata": {"name": "default", "generation": 1},
               "spec": {"models": {"primary": {"baseURL": "http://m/v1", "model": "m"}}},
               "status": status})
    };
    let check = |obj: &Value, want: &str, says: &str| {
        let (status, message) = health(&lua, "researchprofile-health.lua", obj);
        assert_eq!(status, want, "{message}");
        assert!(message.contains(says), "{message:?} lacks {says:?}");
    };
    check(&profile(json!(null)), "Healthy", "accepted");
    check(
        &profile(
            json!({"observedGeneration": 1, "conditions": [cond("Ready", "True", "Ready", "all Secrets present")]}),
        ),
        "Healthy",
        "all Secrets present",
    );
    check(
        &profile(
            json!({"observedGeneration": 1, "conditions": [cond("Ready", "False", "SecretNotFound", "Secret \"k\" not found")]}),
        ),
        "Degraded",
        "SecretNotFound",
    );
    check(
        &profile(json!({"observedGeneration": 0, "conditions": []})),
        "Progressing",
        "generation 1",
    );
}

#[test]
#[ignore = "needs lua5.4 (scripts/install-test-deps.sh)"]
fn research_schedule_health() {
    let lua = lua();
    let schedule = |suspend: bool, status: Value| {
        json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule",
               "metadata": {"name": "daily", "generation": 1},
               "spec": {"schedule": "@daily", "suspend": suspend,
                        "runTemplate": {"spec": {"query": "What changed?"}}},
               "status": status})
    };
    let check = |obj: &Value, want: &str, says: &str| {
        let (status, message) = health(&lua, "researchschedule-health.lua", obj);
        assert_eq!(status, want, "{message}");
        assert!(message.contains(says), "{message:?} lacks {says:?}");
    };
    check(
        &schedule(false, json!(null)),
        "Progressing",
        "Waiting for the Quarry operator",
    );
    check(
        &schedule(
            false,
            json!({"observedGeneration": 1, "nextScheduleTime": "2026-11-26T00:00:00Z",
                   "conditions": [cond("Ready", "True", "Scheduled", "runs are created")]}),
        ),
        "Healthy",
        "next run at 2026-11-26T00:00:00Z",
    );
    check(
        &schedule(
            false,
            json!({"observedGeneration": 1, "conditions": [
                cond("Stalled", "True", "ScheduleInvalid", "spec.timeZone \"Mars/Olympus\" is not an IANA time zone"),
                cond("Ready", "False", "ScheduleInvalid", "x")]}),
        ),
        "Degraded",
        "ScheduleInvalid: spec.timeZone",
    );
    check(
        &schedule(
            true,
            json!({"observedGeneration": 1, "conditions": [cond("Ready", "True", "Suspended", "spec.suspend is true")]}),
        ),
        "Suspended",
        "no new runs",
    );
    check(
        &schedule(false, json!({"observedGeneration": 0, "conditions": []})),
        "Progressing",
        "generation 1",
    );
}

#[test]
fn argocd_cm_patch_holds_the_scripts_verbatim() {
    let dir = repo_root().join("deploy/argocd");
    let patch: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("argocd-cm-patch.yaml")).unwrap())
            .unwrap();
    for (kind, file) in [
        ("ResearchRun", "researchrun-health.lua"),
        ("SearchEngine", "searchengine-health.lua"),
        ("ResearchProfile", "researchprofile-health.lua"),
        ("ResearchSchedule", "researchschedule-health.lua"),
    ] {
        let key = format!("resource.customizations.health.quarry.dev_{kind}");
        let script = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(patch["data"][&key].as_str(), Some(script.as_str()), "{key}");
    }
}
