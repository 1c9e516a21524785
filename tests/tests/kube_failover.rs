//! Crash and failover on the real API server, with the operator as shipped (the chart's
//! ServiceAccount token), the scripted model server and real searx over the Debian docs.
//!
//! - SIGKILL in Planning, in the middle of Researching (one researcher finished and checkpointed,
//!   the other's call held) and in Synthesizing: a restarted process (as the kubelet restarts a
//!   container: same pod name) finishes the run; exactly one report ConfigMap exists; status cost
//!   equals the cost journal (`<run>-events`) and every call the model answered; no finished
//!   researcher is asked again (the model server's request log). The checkpoint (pointer and
//!   slots) at the kill is printed.
//! - SIGKILL in the instant between a checkpoint slot and its pointer (slot B and the pointer live
//!   in two ConfigMaps: two requests): that slot is complete and verifies, so the restarted
//!   process resumes from it and does not ask the researcher it holds as finished again.
//! - SIGKILL at seeded random moments (`QUARRY_KILLS` in all, 12 unless set, a soak sets 100 or
//!   more; `QUARRY_KILL_SEED` replays the schedule): each kill picks a phase of a run without
//!   kills first, then a moment inside that phase's window, so short phases are hit as often as
//!   long ones. Every run completes once with the report of a run without kills, status cost
//!   equals the cost journal, and no step the durable checkpoint held as finished at a kill is
//!   asked again.
//! - The other processes: a scale-out worker SIGKILLed mid-task (its task is delivered once more,
//!   to the other worker), the API server killed and started again on the same etcd while the
//!   final status is written, and etcd paused (SIGSTOP) longer than the lease (the leader steps
//!   down before its lease could lapse; the restarted one finishes the run): each run completes
//!   once, status cost equals the cost journal, and checkpointed work is not asked again.
//! - Two operator processes: only the Lease holder writes status (the audit log, each replica
//!   with a ServiceAccount of its own so its writes can be told apart); when the holder is killed
//!   the other takes the lease within the lease duration and completes the run.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::kube_operator::{
    Operator, OperatorOptions, RELEASE_NAMESPACE, apply, audit_requests, forbidden,
    install_chart_rbac, service_account_user, wait_for,
};
use quarry_e2e::model_server::{Route, Script, ScriptedModel, ScriptedModelHandle, Step};
use quarry_e2e::searx::SearchStack;
use quarry_engine::research::shell::checkpoint;
use quarry_engine::store::ArtifactStore;
use quarry_engine::store::keys::{CHECKPOINT_KEY, CHECKPOINT_SLOTS};
use quarry_operator::store::configmap::ConfigMapStore;
use serde_json::{Value, json};

const QUERY: &str = "How do Python's JSON and pickle modules differ?";
const TASKS: [&str; 2] = ["JSON decoding in Python", "Python pickle serialization"];
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

fn page(docs: &str, name: &str) -> String {
    format!("{docs}/python3.11-doc/html/library/{name}.html")
}

/// How long the planner, the evaluator, the writer and pickle's last call take: each phase of
/// a run lasts long enough for the randomized kills to aim inside it (with instant replies,
/// planning and synthesis pass between two reads of the checkpoint).
const STEP_DELAY_MS: u64 = 400;

/// A researcher answering by turn, so a redone researcher gets the same replies; its report
/// call takes `report_delay_ms`.
fn researcher(
    name: &str,
    task: &str,
    query: &str,
    url: &str,
    marker: &str,
    report_delay_ms: u64,
) -> Route {
    let report = format!("## Summary\n{marker}: the module is documented here ([doc]({url})).");
    Route::new(
        name,
        format!("Research task: {task}\n"),
        vec![
            Step::tool_call("search", json!({"queries": [query]})).with_usage(1000, 10),
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1200, 10),
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1400, 12),
            Step::delay(
                report_delay_ms,
                Step::text(report.clone()).with_usage(3000, 120),
            ),
        ],
    )
    .with_fallback(Step::text(report).with_usage(900, 100))
    .by_turn()
}

fn script(docs: &str) -> Script {
    let (json_url, pickle_url) = (page(docs, "json"), page(docs, "pickle"));
    let plan = json!({"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": TASKS}).to_string();
    let study = format!(
        "<research_result>\n# JSON and pickle\n\n## Key Takeaways\n1. JSON is a lightweight data interchange format ([json]({json_url})).\n2. The pickle module implements binary protocols for serializing a Python object structure ([pickle]({pickle_url})).\n\n## Abstract\nTwo modules compared.\n</research_result>"
    );
    Script::default()
        .with_route(
            Route::new(
                "planner",
                "You are the research coordinator",
                vec![Step::delay(
                    STEP_DELAY_MS,
                    Step::text(plan).with_usage(300, 40),
                )],
            )
            .by_turn(),
        )
        .with_route(researcher(
            "json",
            TASKS[0],
            "json decoder",
            &json_url,
            "JSON-MARKER",
            0,
        ))
        .with_route(researcher(
            "pickle",
            TASKS[1],
            "pickle",
            &pickle_url,
            "PICKLE-MARKER",
            2 * STEP_DELAY_MS,
        ))
        .with_route(
            Route::new(
                "evaluator",
                "You are the lead evaluator",
                vec![Step::delay(
                    STEP_DELAY_MS,
                    Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10),
                )],
            )
            .by_turn(),
        )
        .with_route(quarry_e2e::deep_script::summarizer())
        .with_route(
            Route::new(
                "study",
                "Mode: study",
                vec![Step::delay(
                    STEP_DELAY_MS,
                    Step::text(study).with_usage(5000, 400),
                )],
            )
            .by_turn(),
        )
}

/// One namespace of research on a control plane with the chart's RBAC.
struct Setup {
    plane: ControlPlane,
    stack: SearchStack,
    model: ScriptedModelHandle,
    namespace: String,
    operator_kubeconfig: std::path::PathBuf,
}

async fn setup(label: &str) -> Result<Setup, String> {
    let plane = ControlPlane::start().await?;
    let operator_kubeconfig = install_chart_rbac(&plane, &[]).await?;
    let stack = SearchStack::start()
        .await
        .map_err(|e| format!("the local search stack (scripts/install-test-deps.sh): {e}"))?;
    let (namespace, model) = research_namespace(&plane, &stack, label).await?;
    Ok(Setup {
        plane,
        stack,
        model,
        namespace,
        operator_kubeconfig,
    })
}

/// A fresh namespace with the model key and a profile on a fresh scripted model server.
async fn research_namespace(
    plane: &ControlPlane,
    stack: &SearchStack,
    label: &str,
) -> Result<(String, ScriptedModelHandle), String> {
    let model = ScriptedModel::start(script(&stack.docs.base_url()))
        .await
        .map_err(|e| format!("model server: {e}"))?;
    let client = plane.client();
    let namespace = plane.namespace(label).await?;
    apply(
        &client,
        Some(&namespace),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key", "labels": {"quarry.dev/credential": "true"}, "annotations": {"quarry.dev/credential-hosts": "127.0.0.1"}}, "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
    )
    .await?;
    apply(
        &client,
        Some(&namespace),
        &json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
            "metadata": {"name": "default"},
            "spec": {
                "models": {"primary": {
                    "baseURL": model.base_url(), "model": "scripted",
                    "apiKeySecretRef": {"name": "model-key", "key": "apiKey"},
                    "timeoutSeconds": 30
                }},
                "prices": [{"model": "scripted", "inputUSDPerMillion": "1.25", "outputUSDPerMillion": "10.00"}],
                "search": {"url": stack.searx.base_url()},
                "fetch": {"allowedHosts": ["127.0.0.1"], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
            }
        }),
    )
    .await?;
    Ok((namespace, model))
}

impl Setup {
    /// Moves to a fresh namespace and model server (the control plane and searx are kept).
    async fn renew(&mut self, label: &str) -> Result<(), String> {
        let (namespace, model) = research_namespace(&self.plane, &self.stack, label).await?;
        self.namespace = namespace;
        self.model = model;
        Ok(())
    }

    fn client(&self) -> Client {
        self.plane.client()
    }

    fn runs(&self) -> Api<ResearchRun> {
        Api::namespaced(self.client(), &self.namespace)
    }

    async fn start_operator(
        &self,
        identity: &str,
        log: &str,
        kubeconfig: Option<&std::path::Path>,
        extra: &[&str],
    ) -> Result<Operator, String> {
        Operator::start(&OperatorOptions {
            kubeconfig: kubeconfig
                .unwrap_or(&self.operator_kubeconfig)
                .to_path_buf(),
            identity: identity.into(),
            pod_namespace: RELEASE_NAMESPACE.into(),
            args: extra.iter().map(|a| a.to_string()).collect(),
            log: self.plane.scratch().join(log),
        })
        .await
    }

    async fn apply_run(&self, name: &str) -> Result<(), String> {
        apply(
            &self.client(),
            Some(&self.namespace),
            &json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": name},
                    "spec": {"query": QUERY, "mode": "deep", "limits": {"maxConcurrentResearchers": 2}}}),
        )
        .await
    }

    async fn wait_finished(&self, name: &str) -> Result<ResearchRun, String> {
        let runs = self.runs();
        wait_for(
            &format!("run {name} finished"),
            RUN_TIMEOUT,
            || async { runs.get(name).await.ok() },
            |r: &ResearchRun| r.is_finished(),
        )
        .await
    }

    /// Whether a checkpoint slot of run `name` holds `marker`: durable from the moment it shows,
    /// since a restarted operator resumes from the newest slot that verifies.
    async fn checkpointed(&self, name: &str, marker: &str) -> bool {
        let configmaps: Api<ConfigMap> = Api::namespaced(self.client(), &self.namespace);
        for cm in [format!("{name}-state"), format!("{name}-state-b")] {
            if let Ok(Some(cm)) = configmaps.get_opt(&cm).await
                && cm
                    .data
                    .unwrap_or_default()
                    .values()
                    .any(|v| v.contains(marker))
            {
                return true;
            }
        }
        false
    }

    /// The run's artifact store, as the operator opens it.
    async fn store(&self, name: &str) -> Result<ConfigMapStore, String> {
        let run = self.runs().get(name).await.map_err(|e| e.to_string())?;
        let owner = run
            .controller_owner_ref(&())
            .ok_or("run without owner ref data")?;
        Ok(ConfigMapStore::new(
            self.client(),
            &self.namespace,
            name,
            owner,
        ))
    }

    /// The checkpoint of run `name` as it stands in the API server: the pointer, and for each
    /// slot its sequence and whether its state holds `marker` (what a kill at this moment leaves).
    async fn checkpoint_view(&self, name: &str, marker: &str) -> String {
        let Ok(store) = self.store(name).await else {
            return "no store".into();
        };
        let pointer = match store.get(CHECKPOINT_KEY).await {
            Ok(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
            other => format!("{other:?}"),
        };
        let mut view = format!("pointer {pointer}");
        for slot in CHECKPOINT_SLOTS {
            let text = match store.get(slot).await {
                Ok(Some(b)) => match checkpoint::decode(&b) {
                    Ok((state, seq)) => format!(
                        "seq {seq}, {} report(s), {marker}: {}",
                        state.reports.len(),
                        String::from_utf8_lossy(&b).contains(marker)
                    ),
                    Err(e) => format!("undecodable: {e}"),
                },
                other => format!("{other:?}"),
            };
            view.push_str(&format!("; {slot}: {text}"));
        }
        view
    }

    /// Puts run `name`'s `<run>-state` ConfigMap back to where it stood before its latest
    /// checkpoint went to slot B: the pointer on slot A's checkpoint and no progress report
    /// (they are written together, after slot B), as a SIGKILL between the two requests leaves it.
    async fn rewind_pointer(&self, name: &str) -> Result<(), String> {
        let store = self.store(name).await?;
        let pointer: checkpoint::Pointer = store
            .get(CHECKPOINT_KEY)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or("no checkpoint pointer")?;
        if pointer.slot != CHECKPOINT_SLOTS[1] {
            // Killed in that very instant already: nothing to put back.
            return Ok(());
        }
        let a = store
            .get(CHECKPOINT_SLOTS[0])
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no slot A")?;
        let (_, sequence) = checkpoint::decode(&a)?;
        let digest = String::from_utf8_lossy(&a)
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        let previous = checkpoint::Pointer {
            slot: CHECKPOINT_SLOTS[0].into(),
            sequence,
            sha256: digest,
        };
        let bytes = serde_json::to_vec(&previous).map_err(|e| e.to_string())?;
        store
            .put(CHECKPOINT_KEY, &bytes)
            .await
            .map_err(|e| e.to_string())?;
        store
            .delete(quarry_engine::store::keys::PROGRESS_KEY)
            .await
            .map_err(|e| e.to_string())
    }

    /// The run's cost journal as the operator's store reads it.
    async fn journal(&self, run: &ResearchRun) -> Result<String, String> {
        quarry_e2e::kube_operator::cost_journal(self.client(), run).await
    }

    /// The checks every kill scenario shares.
    async fn assert_completed_once_with_exact_cost(
        &self,
        done: &ResearchRun,
    ) -> Result<(), String> {
        let status = done.status.clone().unwrap_or_default();
        if done.phase().as_str() != "Completed" {
            return Err(format!(
                "run ended {:?}: {:?}",
                done.phase(),
                status.message
            ));
        }
        let reports: Vec<String> = Api::<ConfigMap>::namespaced(self.client(), &self.namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .map(|c| c.name_any())
            .filter(|n| n.ends_with("-report"))
            .collect();
        if reports != vec![format!("{}-report", done.name_any())] {
            return Err(format!(
                "expected exactly one report ConfigMap, found {reports:?}"
            ));
        }
        let answered: Vec<_> = self
            .model
            .recorded()
            .into_iter()
            .filter(|r| r.answered)
            .collect();
        let input: u64 = answered
            .iter()
            .filter_map(|r| r.reply_usage)
            .map(|u| u.prompt_tokens)
            .sum();
        let output: u64 = answered
            .iter()
            .filter_map(|r| r.reply_usage)
            .map(|u| u.completion_tokens)
            .sum();
        let paid = quarry_engine::llm::format_pico_usd(input * 1_250_000 + output * 10_000_000);
        let usage = status.usage.clone().unwrap_or_default();
        if (
            usage.llm_calls as usize,
            usage.input_tokens,
            usage.output_tokens,
        ) != (answered.len(), input, output)
            || usage.cost_usd.as_deref() != Some(paid.as_str())
        {
            return Err(format!(
                "status usage {usage:?} vs the model server: {} answered calls, {input} in, {output} out, ${paid}",
                answered.len()
            ));
        }
        let journal = self.journal(done).await?;
        let newest = journal
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["kind"] == "modelCall")
            .filter_map(|v| v["runTotal"]["costPicoUSD"].as_u64())
            .max()
            .ok_or("no call in the journal")?;
        if quarry_engine::llm::format_pico_usd(newest) != paid {
            return Err(format!("journal total {newest} pico-USD vs status ${paid}"));
        }
        Ok(())
    }
}

/// Where the first process dies.
#[derive(Clone, Copy, Debug)]
enum KillIn {
    Planning,
    Researching,
    /// As `Researching`, killed in the instant after json's checkpoint slot was written and
    /// before the pointer followed it (the slot and the pointer are two requests).
    BetweenSlotAndPointer,
    Synthesizing,
}

async fn kill_and_restart(kill: KillIn) {
    let s = setup(&format!("kill-{kill:?}").to_lowercase())
        .await
        .expect("setup");
    let outcome = async {
        match kill {
            KillIn::Planning => s.model.hold_once("planner", 0),
            // The json researcher finishes; pickle's third call is held.
            KillIn::Researching | KillIn::BetweenSlotAndPointer => s.model.hold_once("pickle", 2),
            KillIn::Synthesizing => s.model.hold_once("study", 0),
        }
        let mut first = s.start_operator("quarry-0", "first.log", None, &[]).await?;
        s.apply_run("killed").await?;
        let model = &s.model;
        match kill {
            KillIn::Planning => {
                wait_for(
                    "the planner call held",
                    RUN_TIMEOUT,
                    || async { Some(model.held("planner", 0)) },
                    |h| *h,
                )
                .await?;
            }
            KillIn::Researching | KillIn::BetweenSlotAndPointer => {
                wait_for(
                    "pickle held",
                    RUN_TIMEOUT,
                    || async { Some(model.held("pickle", 2)) },
                    |h| *h,
                )
                .await?;
                wait_for(
                    "json's report in the checkpoint",
                    RUN_TIMEOUT,
                    || async { Some(s.checkpointed("killed", "JSON-MARKER").await) },
                    |h| *h,
                )
                .await?;
            }
            KillIn::Synthesizing => {
                wait_for(
                    "the study call held",
                    RUN_TIMEOUT,
                    || async { Some(model.held("study", 0)) },
                    |h| *h,
                )
                .await?;
            }
        }
        let phase = s
            .runs()
            .get("killed")
            .await
            .map_err(|e| e.to_string())?
            .phase();
        first.kill().await?;
        if let KillIn::BetweenSlotAndPointer = kill {
            s.rewind_pointer("killed").await?;
        }
        let at_kill = s.checkpoint_view("killed", "JSON-MARKER").await;
        eprintln!("checkpoint at the kill: {at_kill}");
        // The kubelet restarts the container: same pod name, so the Lease is its own again.
        let mut second = s
            .start_operator("quarry-0", "second.log", None, &[])
            .await?;
        // A process that exits by itself is started again, as the kubelet does.
        let mut restarts = String::new();
        let (done, exits) = s
            .finish_restarting(&mut second, "killed", &[], &mut restarts)
            .await;
        let logs = format!(
            "checkpoint at the kill: {at_kill}\n--- first:\n{}\n{restarts}--- second:\n{}",
            first.log_tail(),
            second.log_tail()
        );
        eprintln!("the restarted operator exited by itself {exits} time(s)");
        second.kill().await?;
        let done = done.map_err(|e| format!("{e}\n{logs}"))?;
        s.assert_completed_once_with_exact_cost(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let asked = |route: &str| model.route_requests(route).len();
        match kill {
            KillIn::Planning => {
                if asked("planner") != 2 || asked("json") != 4 || asked("pickle") != 4 {
                    return Err(format!(
                        "planner {}, json {}, pickle {}",
                        asked("planner"),
                        asked("json"),
                        asked("pickle")
                    ));
                }
            }
            KillIn::Researching | KillIn::BetweenSlotAndPointer => {
                // json finished before the kill: never asked again; pickle was redone.
                if asked("planner") != 1 || asked("json") != 4 || asked("pickle") != 3 + 4 {
                    return Err(format!(
                        "planner {}, json {}, pickle {}",
                        asked("planner"),
                        asked("json"),
                        asked("pickle")
                    ));
                }
            }
            KillIn::Synthesizing => {
                if asked("planner") != 1
                    || asked("json") != 4
                    || asked("pickle") != 4
                    || asked("evaluator") != 1
                    || asked("study") != 2
                {
                    return Err(format!(
                        "planner {}, json {}, pickle {}, evaluator {}, study {}",
                        asked("planner"),
                        asked("json"),
                        asked("pickle"),
                        asked("evaluator"),
                        asked("study")
                    ));
                }
            }
        }
        eprintln!(
            "killed in {kill:?} (status phase {phase:?}); the restarted operator completed the run"
        );
        Ok::<(), String>(())
    }
    .await;
    let refused = forbidden(&s.plane, &service_account_user(RELEASE_NAMESPACE, "quarry"));
    if let Err(e) = outcome {
        panic!("{e}");
    }
    assert!(refused.is_empty(), "the operator was refused: {refused:#?}");
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_operator_killed_in_planning_is_restarted_and_plans_once_more() {
    kill_and_restart(KillIn::Planning).await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_operator_killed_mid_research_does_not_rerun_the_finished_researcher() {
    kill_and_restart(KillIn::Researching).await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_operator_killed_between_a_checkpoint_slot_and_its_pointer_keeps_that_checkpoint() {
    kill_and_restart(KillIn::BetweenSlotAndPointer).await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_operator_killed_in_synthesis_only_writes_the_report_again() {
    kill_and_restart(KillIn::Synthesizing).await;
}

/// A second replica with a ServiceAccount of its own, bound like the chart binds `quarry`, so
/// the audit log tells the replicas' requests apart.
async fn second_replica_kubeconfig(s: &Setup) -> Result<std::path::PathBuf, String> {
    let client = s.client();
    apply(
        &client,
        Some(RELEASE_NAMESPACE),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "quarry-b"}}),
    )
    .await?;
    for (kind, ns, role_kind) in [
        ("ClusterRoleBinding", None, "ClusterRole"),
        ("RoleBinding", Some(RELEASE_NAMESPACE), "Role"),
    ] {
        let name = if kind == "ClusterRoleBinding" {
            "quarry-b"
        } else {
            "quarry-b-leader-election"
        };
        let role = if kind == "ClusterRoleBinding" {
            "quarry"
        } else {
            "quarry-leader-election"
        };
        let mut body = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "quarry-b", "namespace": RELEASE_NAMESPACE}],
        });
        if let Some(ns) = ns {
            body["metadata"]["namespace"] = json!(ns);
        }
        apply(&client, ns, &body).await?;
    }
    let token = s
        .plane
        .service_account_token(RELEASE_NAMESPACE, "quarry-b")
        .await?;
    let path = s.plane.scratch().join("quarry-b.kubeconfig");
    s.plane.token_kubeconfig(&token, RELEASE_NAMESPACE, &path)?;
    Ok(path)
}

async fn lease_holder(client: Client) -> Option<String> {
    Api::<Lease>::namespaced(client, RELEASE_NAMESPACE)
        .get("quarry-operator")
        .await
        .ok()
        .and_then(|l| l.spec.and_then(|s| s.holder_identity))
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn only_the_lease_holder_writes_status_and_a_killed_holder_is_replaced_within_the_lease() {
    let s = setup("two-replicas").await.expect("setup");
    let outcome = async {
        let b_kubeconfig = second_replica_kubeconfig(&s).await?;
        let lease = ["--lease-duration-seconds", "6"];
        let mut a = s.start_operator("a", "a.log", None, &lease).await?;
        let first = wait_for(
            "a lease holder",
            Duration::from_secs(30),
            || lease_holder(s.client()),
            |_| true,
        )
        .await?;
        if first != "a" {
            return Err(format!("a started first but {first} holds the lease"));
        }
        let mut b = s
            .start_operator("b", "b.log", Some(&b_kubeconfig), &lease)
            .await?;
        s.model.hold_once("pickle", 2);
        s.apply_run("handover").await?;
        wait_for(
            "pickle held",
            RUN_TIMEOUT,
            || async { Some(s.model.held("pickle", 2)) },
            |h| *h,
        )
        .await?;
        // Killed only once json's researcher is checkpointed, no call but pickle's held one is in
        // flight: a call the server answered a moment before SIGKILL could not be journaled by
        // anyone (a busy CI machine once had json's last call land in that window).
        wait_for(
            "json's report in the checkpoint",
            RUN_TIMEOUT,
            || async { Some(s.checkpointed("handover", "JSON-MARKER").await) },
            |h| *h,
        )
        .await?;
        let a_user = service_account_user(RELEASE_NAMESPACE, "quarry");
        let b_user = service_account_user(RELEASE_NAMESPACE, "quarry-b");
        let status_writes = |user: &str| {
            audit_requests(&s.plane)
                .into_iter()
                .filter(|r| {
                    r.user == user
                        && r.resource == "researchruns"
                        && r.subresource == "status"
                        && r.is_write()
                })
                .count()
        };
        // The leader's status writer is paced (one write per interval): give it that interval.
        wait_for(
            "a status write by the leader",
            Duration::from_secs(20),
            || async { Some(status_writes(&a_user)) },
            |n| *n > 0,
        )
        .await?;
        if status_writes(&a_user) == 0 || status_writes(&b_user) != 0 {
            return Err(format!(
                "while a leads, only a writes status: a {}, b {}",
                status_writes(&a_user),
                status_writes(&b_user)
            ));
        }
        let killed_at = tokio::time::Instant::now();
        a.kill().await?;
        wait_for(
            "b takes the lease",
            Duration::from_secs(30),
            || lease_holder(s.client()),
            |h: &String| h == "b",
        )
        .await?;
        let handover = killed_at.elapsed();
        // The lease must lapse (6 s), then the standby's next try (every 2 s) takes it; on a
        // loaded 2-core CI machine the API server and the process add a few seconds more.
        if handover > Duration::from_secs(6 + 6) {
            return Err(format!(
                "handover took {handover:?}, more than the 6 s lease (+6 s: the standby's retry period and a busy machine)"
            ));
        }
        let done = s.wait_finished("handover").await;
        let logs = format!("--- a:\n{}\n--- b:\n{}", a.log_tail(), b.log_tail());
        b.kill().await?;
        let done = done.map_err(|e| format!("{e}\n{logs}"))?;
        s.assert_completed_once_with_exact_cost(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        if status_writes(&b_user) == 0 {
            return Err("the new leader wrote no status".into());
        }
        for user in [&a_user, &b_user] {
            let refused = forbidden(&s.plane, user);
            if !refused.is_empty() {
                return Err(format!("{user} was refused: {refused:#?}"));
            }
        }
        eprintln!("handover in {handover:?}");
        Ok::<(), String>(())
    }
    .await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

impl Setup {
    /// Waits for run `name` to finish; an operator that exits by itself (it stepped down: its
    /// lease could not be confirmed in time) is started again with the same pod name and
    /// `extra` arguments, as the kubelet restarts a container. Returns the run and the number of
    /// such exits; `logs` gets each exited process's log.
    async fn finish_restarting(
        &self,
        op: &mut Operator,
        name: &str,
        extra: &[&str],
        logs: &mut String,
    ) -> (Result<ResearchRun, String>, usize) {
        let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
        let mut exits = 0;
        let done = loop {
            if let Ok(run) = self.runs().get(name).await
                && run.is_finished()
            {
                break Ok(run);
            }
            if tokio::time::Instant::now() > deadline {
                break Err(format!("run {name} not finished within {RUN_TIMEOUT:?}"));
            }
            if let Ok(Some(status)) = op.child.try_wait() {
                exits += 1;
                logs.push_str(&format!(
                    "--- attempt exited by itself with {status}:\n{}\n",
                    op.log_tail()
                ));
                match self
                    .start_operator("quarry-0", &format!("{name}-exit-{exits}.log"), None, extra)
                    .await
                {
                    Ok(next) => *op = next,
                    Err(e) => break Err(e),
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        };
        (done, exits)
    }

    /// Exactly one report ConfigMap in the namespace: run `name`'s.
    async fn exactly_one_report(&self, name: &str) -> Result<(), String> {
        let reports: Vec<String> = Api::<ConfigMap>::namespaced(self.client(), &self.namespace)
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .map(|c| c.name_any())
            .filter(|n| n.ends_with("-report"))
            .collect();
        if reports != vec![format!("{name}-report")] {
            return Err(format!("expected exactly one report, found {reports:?}"));
        }
        Ok(())
    }

    /// Status usage equals the run's cost journal, and the journal counts no call the model
    /// server did not answer. Returns the answered calls the journal lacks: those answered in
    /// the instant before a process died, too late for it to record them.
    async fn status_matches_journal(&self, done: &ResearchRun) -> Result<usize, String> {
        let spent = quarry_e2e::kube_operator::status_spend_matches_journal(self.client(), done)
            .await?
            .total;
        let answered = self.model.recorded().iter().filter(|r| r.answered).count() as u64;
        if spent.llm_calls > answered {
            return Err(format!(
                "the journal counts {} calls, the model server answered {answered}",
                spent.llm_calls
            ));
        }
        Ok((answered - spent.llm_calls) as usize)
    }

    /// Model requests so far per route, for the failure messages.
    fn asked(&self) -> String {
        ["planner", "json", "pickle", "evaluator", "study"]
            .iter()
            .map(|r| format!("{r} {}", self.model.route_requests(r).len()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Starts the run `name` with pickle's third call held, and waits until it is held and
    /// json's finished researcher is in the durable checkpoint: the moment the tests below
    /// break something, with exactly one model call in flight.
    async fn run_to_the_held_pickle_call(&self, name: &str) -> Result<(), String> {
        self.model.hold_once("pickle", 2);
        self.apply_run(name).await?;
        wait_for(
            "pickle held",
            RUN_TIMEOUT,
            || async { Some(self.model.held("pickle", 2)) },
            |h| *h,
        )
        .await?;
        wait_for(
            "json's report in the checkpoint",
            RUN_TIMEOUT,
            || async { Some(self.checkpointed(name, "JSON-MARKER").await) },
            |h| *h,
        )
        .await?;
        Ok(())
    }
}

/// Kills at seeded random moments: `QUARRY_KILLS` in all (12 unless set; a soak sets 100 or
/// more), `QUARRY_KILL_SEED` to replay a schedule (printed at the start and with any failure).
const KILLS_ENV: &str = "QUARRY_KILLS";
const SEED_ENV: &str = "QUARRY_KILL_SEED";
/// At most this many kills per run before it is let finish.
const KILLS_PER_RUN: usize = 3;

/// The model route of each agenda task.
fn route_of(task: &str) -> Option<&'static str> {
    match task {
        t if t == TASKS[0] => Some("json"),
        t if t == TASKS[1] => Some("pickle"),
        _ => None,
    }
}

/// What one kill left behind, read after the process is gone: where the durable checkpoint
/// stood, and the model calls so far of each step it records as finished (none may follow).
struct KillRecord {
    /// How long into the aimed phase it came.
    after: Duration,
    /// The phase the schedule aimed at.
    aimed: String,
    phase: String,
    frozen: Vec<(&'static str, usize)>,
}

/// The phase a kill hit, as a restarted operator finds it, and the routes whose work the
/// checkpoint holds as done.
fn durable_work(
    state: Option<&quarry_engine::research::machine::state::RunState>,
) -> (String, Vec<&'static str>) {
    use quarry_engine::research::machine::state::{Phase, TaskState};
    let Some(state) = state else {
        return ("Planning (no checkpoint)".into(), vec![]);
    };
    let mut done = Vec::new();
    if !state.agenda.is_empty() {
        done.push("planner");
    }
    let finished = state
        .agenda
        .iter()
        .filter(|t| t.state == TaskState::Done)
        .filter_map(|t| route_of(&t.query))
        .collect::<Vec<_>>();
    done.extend(&finished);
    let phase = match state.phase {
        Phase::Researching => format!(
            "Researching ({}/{} researchers checkpointed)",
            finished.len(),
            state.agenda.len()
        ),
        Phase::Synthesizing | Phase::Completed => {
            done.push("evaluator");
            match (&state.final_report, state.published) {
                (Some(_), true) => {
                    done.push("study");
                    format!("{} (published)", state.phase)
                }
                (Some(_), false) => {
                    done.push("study");
                    format!("{} (report written, not published)", state.phase)
                }
                (None, _) => format!("{}", state.phase),
            }
        }
        other => format!("{other}"),
    };
    (phase, done)
}

/// Where the durable checkpoint of a run without kills stood over time: each phase a restarted
/// operator would find, with the window (from the run's creation) in which it was the newest.
#[derive(Debug, Default)]
struct Timeline {
    phases: Vec<(String, Duration, Duration)>,
}

impl Timeline {
    /// Records that `phase` was seen `at`.
    fn saw(&mut self, phase: String, at: Duration) {
        match self.phases.iter_mut().find(|(p, _, _)| *p == phase) {
            Some((_, _, last)) => *last = at,
            None => self.phases.push((phase, at, at)),
        }
    }

    /// The position of `phase` in the run's order (unknown phases sort last).
    fn index(&self, phase: &str) -> usize {
        self.phases
            .iter()
            .position(|(p, _, _)| p == phase)
            .unwrap_or(self.phases.len())
    }
}

/// A tiny report of what one randomized run hit.
struct RunOutcome {
    kills: Vec<KillRecord>,
    unjournaled: usize,
    /// Times the operator exited by itself and was started again.
    exits: usize,
}

impl Setup {
    /// The report of a finished run.
    async fn report(&self, name: &str) -> Result<String, String> {
        let cm = Api::<ConfigMap>::namespaced(self.client(), &self.namespace)
            .get(&format!("{name}-report"))
            .await
            .map_err(|e| format!("{name}-report: {e}"))?;
        cm.data
            .unwrap_or_default()
            .get("report.md")
            .cloned()
            .ok_or_else(|| format!("{name}-report has no report.md"))
    }

    /// The phase a restarted operator would find for run `name` now (its durable checkpoint).
    async fn durable_phase(&self, name: &str) -> Result<String, String> {
        let store = self.store(name).await?;
        let loaded = checkpoint::load(&store)
            .await
            .map_err(|e| format!("the checkpoint of {name}: {e}"))?;
        Ok(durable_work(loaded.as_ref().map(|l| &l.state)).0)
    }

    /// Runs `name` without kills, reading its durable phase every 50 ms: the phases a kill can
    /// hit and how long each lasts.
    async fn measure_timeline(&self, name: &str) -> Result<(ResearchRun, Timeline), String> {
        let started = tokio::time::Instant::now();
        self.apply_run(name).await?;
        let mut timeline = Timeline::default();
        loop {
            let run = self.runs().get(name).await.map_err(|e| e.to_string())?;
            if run.is_finished() {
                return Ok((run, timeline));
            }
            if started.elapsed() > RUN_TIMEOUT {
                return Err(format!("run {name} not finished within {RUN_TIMEOUT:?}"));
            }
            // Before the operator has taken the run, there is no store to read yet.
            if let Ok(phase) = self.durable_phase(name).await {
                timeline.saw(phase, started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the operator (SIGKILL) and records what the restarted one will find.
    async fn kill_and_record(
        &self,
        op: &mut Operator,
        name: &str,
        after: Duration,
    ) -> Result<KillRecord, String> {
        let in_flight = self.model.recorded().iter().any(|r| !r.answered);
        op.kill().await?;
        // A request already on the wire reaches the server a moment after the kill.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let store = self.store(name).await?;
        let loaded = checkpoint::load(&store)
            .await
            .map_err(|e| format!("the checkpoint after the kill: {e}"))?;
        let (mut phase, done) = durable_work(loaded.as_ref().map(|l| &l.state));
        if in_flight {
            phase.push_str(", a model call in flight");
        }
        let frozen = done
            .into_iter()
            .map(|route| (route, self.model.route_requests(route).len()))
            .collect();
        Ok(KillRecord {
            after,
            aimed: String::new(),
            phase,
            frozen,
        })
    }

    /// One run killed up to [`KILLS_PER_RUN`] times, then let finish; checks every invariant
    /// against the run without kills (`baseline`). Each kill first picks a phase of `timeline`
    /// uniformly, waits until the run's durable checkpoint reaches it, then waits a uniform
    /// moment within that phase's window: every phase is aimed at about as often, however short
    /// (a uniform moment over the whole run lands mostly in the longest phase).
    async fn randomly_killed_run(
        &self,
        name: &str,
        rng: &mut rand::rngs::StdRng,
        timeline: &Timeline,
        kills: usize,
        baseline: &str,
    ) -> Result<RunOutcome, String> {
        use rand::Rng;
        let mut op = self
            .start_operator("quarry-0", &format!("{name}-0.log"), None, &[])
            .await?;
        self.apply_run(name).await?;
        let mut records = Vec::new();
        let mut logs = String::new();
        // Each kill's phase is drawn uniformly; sorted, since a run only moves forward (a
        // restarted one resumes from the phase its kill left).
        let mut aims: Vec<usize> = (0..kills)
            .map(|_| rng.random_range(0..timeline.phases.len()))
            .collect();
        aims.sort_unstable();
        let mut early_exits = 0;
        'kills: for target in aims {
            let (aim, first, last) = &timeline.phases[target];
            // The first phase's window opens when the run is created.
            let first = if target == 0 { Duration::ZERO } else { *first };
            let within =
                Duration::from_millis(rng.random_range(0..=(*last - first).as_millis() as u64));
            // Until the run gets there (or past it).
            let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
            loop {
                let run = self.runs().get(name).await.map_err(|e| e.to_string())?;
                if run.is_finished() {
                    break 'kills;
                }
                let at = self.durable_phase(name).await.unwrap_or_default();
                if timeline.index(&at) >= target && timeline.index(&at) < timeline.phases.len() {
                    break;
                }
                // As the kubelet does, a process that exits by itself is started again.
                if let Ok(Some(status)) = op.child.try_wait() {
                    early_exits += 1;
                    logs.push_str(&format!(
                        "--- attempt exited by itself with {status}:\n{}\n",
                        op.log_tail()
                    ));
                    op = self
                        .start_operator(
                            "quarry-0",
                            &format!("{name}-early-{early_exits}.log"),
                            None,
                            &[],
                        )
                        .await?;
                }
                if tokio::time::Instant::now() > deadline {
                    return Err(format!("run {name} never reached {aim}"));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(within).await;
            let run = self.runs().get(name).await.map_err(|e| e.to_string())?;
            if run.is_finished() {
                break;
            }
            let after = within;
            let mut record = self.kill_and_record(&mut op, name, after).await?;
            record.aimed = aim.clone();
            logs.push_str(&format!(
                "--- attempt {} (killed after {after:?} in {}):\n{}\n",
                records.len(),
                record.phase,
                op.log_tail()
            ));
            records.push(record);
            // The kubelet restarts the container: same pod name, so the Lease is its own again.
            op = self
                .start_operator(
                    "quarry-0",
                    &format!("{name}-{}.log", records.len()),
                    None,
                    &[],
                )
                .await?;
        }
        let (done, exits) = self.finish_restarting(&mut op, name, &[], &mut logs).await;
        let exits = exits + early_exits;
        logs.push_str(&format!("--- last attempt:\n{}\n", op.log_tail()));
        op.kill().await?;
        let fail = |e: String| {
            let hit: Vec<String> = records
                .iter()
                .map(|r| format!("aimed at {} + {:?}: {}", r.aimed, r.after, r.phase))
                .collect();
            format!("{e}\nkills: {hit:#?}\n{logs}")
        };
        let done = done.map_err(fail)?;
        if done.phase().as_str() != "Completed" {
            return Err(fail(format!("run ended {:?}", done.phase())));
        }
        // Exactly one report, and the report a run without kills writes.
        self.exactly_one_report(name).await.map_err(fail)?;
        let report = self.report(name).await?;
        if report != baseline {
            return Err(fail(format!(
                "the report differs from the run without kills:\n{report}\n--- without kills:\n{baseline}"
            )));
        }
        let unjournaled = self.status_matches_journal(&done).await.map_err(fail)?;
        // No call for work a checkpoint held as finished when its process was killed.
        for (i, r) in records.iter().enumerate() {
            for (route, before) in &r.frozen {
                let now = self.model.route_requests(route).len();
                if now != *before {
                    return Err(fail(format!(
                        "kill {i} ({}): the checkpoint held {route}'s work as finished with {before} call(s), yet it was asked {} more time(s)",
                        r.phase,
                        now - before
                    )));
                }
            }
        }
        Ok(RunOutcome {
            kills: records,
            unjournaled,
            exits,
        })
    }
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn operators_killed_at_random_moments_finish_every_run_exactly_once() {
    use rand::SeedableRng;
    let kills: usize = std::env::var(KILLS_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var(SEED_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("random kills: {kills}, seed {seed} ({SEED_ENV}={seed} replays the schedule)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut s = setup("random-kills").await.expect("setup");
    // The run without kills: its report is the reference, its phases' windows where kills aim.
    let mut op = s
        .start_operator("quarry-0", "baseline.log", None, &[])
        .await
        .expect("operator");
    let measured = s.measure_timeline("baseline").await;
    op.kill().await.expect("kill");
    let (done, timeline) = measured.unwrap_or_else(|e| panic!("{e}\n{}", op.log_tail()));
    s.assert_completed_once_with_exact_cost(&done)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", op.log_tail()));
    let baseline = s.report("baseline").await.expect("baseline report");
    eprintln!("the run without kills, its durable phases (from creation): {timeline:#?}");
    assert!(
        timeline.phases.len() >= 3,
        "too few phases seen to aim at: {timeline:?}"
    );
    let mut aimed: std::collections::BTreeMap<String, usize> = Default::default();
    let mut phases: std::collections::BTreeMap<String, usize> = Default::default();
    let (mut killed, mut runs, mut unjournaled, mut frozen_checks, mut exits) = (0, 0, 0, 0, 0);
    while killed < kills {
        // Kills after a run finished are skipped; a schedule that keeps missing is a failure.
        assert!(
            runs < 4 * kills.max(1),
            "seed {seed}: only {killed} kills landed in {runs} runs"
        );
        let name = format!("killed-{runs}");
        s.renew(&name).await.expect("namespace");
        let per_run = KILLS_PER_RUN.min(kills - killed);
        let outcome = s
            .randomly_killed_run(&name, &mut rng, &timeline, per_run, &baseline)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}, run {runs}: {e}"));
        runs += 1;
        killed += outcome.kills.len();
        unjournaled += outcome.unjournaled;
        exits += outcome.exits;
        for k in &outcome.kills {
            *phases.entry(k.phase.clone()).or_default() += 1;
            *aimed.entry(k.aimed.clone()).or_default() += 1;
            frozen_checks += k.frozen.len();
        }
    }
    eprintln!(
        "random kills: seed {seed}: {killed} kills over {runs} runs, all completed once with the reference report and status cost = journal; {frozen_checks} finished steps checked not asked again; {unjournaled} call(s) answered in the instant before a kill; {exits} exit(s) of a process that lost its lease, restarted; phases aimed at: {aimed:#?}; phases hit (the checkpoint after the kill): {phases:#?}"
    );
    let refused = forbidden(&s.plane, &service_account_user(RELEASE_NAMESPACE, "quarry"));
    assert!(refused.is_empty(), "the operator was refused: {refused:#?}");
}

/// Arguments of an operator in scale-out mode on `redis`, sealing keys with the file `key`.
fn workers_args<'a>(redis: &'a str, key: &'a str) -> [&'a str; 5] {
    ["--redis-url", redis, "--workers", "--sealing-key-file", key]
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd and redis-server (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn a_worker_killed_mid_task_has_its_task_delivered_once_more_and_the_run_completes() {
    use quarry_e2e::redis_server::RedisServer;
    use quarry_e2e::worker::{WorkerProcess, metric};
    let s = setup("worker-kill").await.expect("setup");
    let redis = RedisServer::start_for("worker_kill");
    let url = redis.url();
    let dir = s.plane.scratch();
    // The operator reads the profile's Secret and seals its key for the workers, which have no
    // API access at all: only the sealing key file.
    let key_file = dir.join("sealing-key");
    std::fs::write(
        &key_file,
        "kube-failover-sealing-key-material-0123456789abcdef\n",
    )
    .expect("sealing key file");
    let key = key_file.display().to_string();
    let outcome = async {
        let mut op = s
            .start_operator("quarry-0", "operator.log", None, &workers_args(&url, &key))
            .await?;
        let env = [("QUARRY_SEALING_KEY_FILE", key.as_str())];
        let args = |concurrency| {
            [
                "--concurrency",
                concurrency,
                "--visibility-timeout",
                "3s",
                "--drain-timeout",
                "5s",
            ]
        };
        let mut w1 = WorkerProcess::start_without_cluster(&dir, &url, "w1", &args("2"), &env)
            .map_err(|e| format!("worker w1: {e}"))?;
        if !w1.wait_ready(Duration::from_secs(30)).await {
            return Err(format!("w1 not ready:\n{}", w1.log()));
        }
        // Both researchers run on w1: json finishes and is checkpointed, pickle's third call is
        // held, so w1 dies with exactly that task in hand.
        s.run_to_the_held_pickle_call("scaled").await?;
        let w2 = WorkerProcess::start_without_cluster(&dir, &url, "w2", &args("2"), &env)
            .map_err(|e| format!("worker w2: {e}"))?;
        if !w2.wait_ready(Duration::from_secs(30)).await {
            return Err(format!("w2 not ready:\n{}", w2.log()));
        }
        let before = s.asked();
        w1.kill();
        let mut logs = String::new();
        let (done, exits) = s
            .finish_restarting(&mut op, "scaled", &workers_args(&url, &key), &mut logs)
            .await;
        let logs = format!(
            "asked at the kill: {before}; now: {}\n{logs}--- operator:\n{}\n--- w1:\n{}\n--- w2:\n{}",
            s.asked(),
            op.log_tail(),
            w1.log(),
            w2.log()
        );
        op.kill().await?;
        let done = done.map_err(|e| format!("{e}\n{logs}"))?;
        // Workers publish usage per call, so the killed attempt's answered calls are paid for:
        // status = every call the model server answered = the cost journal.
        s.assert_completed_once_with_exact_cost(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let unjournaled = s
            .status_matches_journal(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let asked = |route: &str| s.model.route_requests(route).len();
        // json was checkpointed before the kill: never asked again. pickle ran once more, from
        // the start (its three calls on w1, four on w2): delivered exactly once more.
        if (asked("planner"), asked("json"), asked("pickle")) != (1, 4, 3 + 4) {
            return Err(format!("expected planner 1, json 4, pickle 7\n{logs}"));
        }
        let (status, body) = w2.get("metrics").await.ok_or("w2 metrics")?;
        let reclaimed = metric(&body, "quarry_worker_tasks_reclaimed_total");
        let finished = metric(
            &body,
            r#"quarry_worker_tasks_acked_total{outcome="finished"}"#,
        );
        if status != 200 || reclaimed != Some(1.0) || finished != Some(1.0) {
            return Err(format!(
                "w2 reclaimed {reclaimed:?} and finished {finished:?} tasks, expected 1 and 1\n{body}\n{logs}"
            ));
        }
        let mut conn = redis::Client::open(url.as_str())
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let left: u64 = redis::cmd("XLEN")
            .arg("quarry:tasks")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        if left != 0 {
            return Err(format!("{left} task(s) left in the stream\n{logs}"));
        }
        eprintln!(
            "worker killed mid-task: re-delivered once (w2 reclaimed 1), run completed; {unjournaled} unjournaled call(s), {exits} operator exit(s)"
        );
        Ok::<(), String>(())
    }
    .await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn an_api_server_restarted_during_the_final_status_write_leaves_one_completed_run() {
    let mut s = setup("apiserver-restart").await.expect("setup");
    let outcome = async {
        let mut op = s.start_operator("quarry-0", "operator.log", None, &[]).await?;
        // The writer's call is held: when it is answered, the report ConfigMap and the final
        // status are written next, and the API server is gone by then.
        s.model.hold_once("study", 0);
        s.apply_run("restarted").await?;
        wait_for(
            "the study call held",
            RUN_TIMEOUT,
            || async { Some(s.model.held("study", 0)) },
            |h| *h,
        )
        .await?;
        s.plane.stop_apiserver();
        s.model.release_held();
        wait_for(
            "the study call answered",
            Duration::from_secs(30),
            || async {
                Some(
                    s.model
                        .recorded()
                        .iter()
                        .any(|r| r.route.as_deref() == Some("study") && r.answered),
                )
            },
            |a| *a,
        )
        .await?;
        // The operator's report and status writes meet a closed port for a few seconds.
        tokio::time::sleep(Duration::from_secs(4)).await;
        s.plane.start_apiserver().await?;
        let mut logs = String::new();
        let (done, exits) = s.finish_restarting(&mut op, "restarted", &[], &mut logs).await;
        let logs = format!("{logs}--- operator:\n{}", op.log_tail());
        op.kill().await?;
        let done = done.map_err(|e| format!("{e}\n{logs}"))?;
        if exits == 0 {
            // The same process wrote everything: every answered call is in the status.
            s.assert_completed_once_with_exact_cost(&done)
                .await
                .map_err(|e| format!("{e}\n{logs}"))?;
        }
        s.exactly_one_report("restarted")
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let unjournaled = s
            .status_matches_journal(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let asked = |route: &str| s.model.route_requests(route).len();
        // Research was checkpointed before the outage: no researcher, plan or evaluation is
        // asked again; at most the writer once more, had the operator stepped down meanwhile.
        let study = asked("study");
        if (asked("planner"), asked("json"), asked("pickle"), asked("evaluator")) != (1, 4, 4, 1)
            || study > 1 + exits
        {
            return Err(format!("asked {}\n{logs}", s.asked()));
        }
        eprintln!(
            "API server restarted during the final status write: completed once, {} call(s) of the writer, {exits} operator exit(s), {unjournaled} unjournaled call(s)",
            study
        );
        Ok::<(), String>(())
    }
    .await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn etcd_paused_longer_than_the_lease_makes_the_operator_step_down_and_the_run_completes_once()
{
    let s = setup("etcd-pause").await.expect("setup");
    let outcome = async {
        let lease = ["--lease-duration-seconds", "6"];
        let mut op = s.start_operator("quarry-0", "operator.log", None, &lease).await?;
        s.run_to_the_held_pickle_call("paused").await?;
        let before = s.asked();
        s.plane.pause_etcd()?;
        // pickle's researcher finishes while etcd is stalled: its checkpoint cannot land.
        s.model.release_held();
        let paused_at = tokio::time::Instant::now();
        // Twice the lease: the leader must notice it cannot renew and step down.
        let mut stepped_down = Err("the operator still runs 12 s into the pause".to_string());
        while paused_at.elapsed() < Duration::from_secs(12) {
            if let Ok(Some(_)) = op.child.try_wait() {
                stepped_down = Ok(k8s_openapi::jiff::Timestamp::now());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stepped_down_after = paused_at.elapsed();
        let pickle_at_step_down = s.model.route_requests("pickle").len();
        s.plane.resume_etcd()?;
        let first_log = op.log_tail();
        let stepped_down_at = stepped_down.map_err(|e| format!("{e}\n{first_log}"))?;
        if !first_log.contains("lost the leader lease") {
            return Err(format!(
                "the operator exited, but not for its lease:\n{first_log}"
            ));
        }
        // Before a standby could have taken the lease: its last renewal plus its duration.
        let held = Api::<Lease>::namespaced(s.client(), RELEASE_NAMESPACE)
            .get("quarry-operator")
            .await
            .map_err(|e| e.to_string())?
            .spec
            .unwrap_or_default();
        let renewed = held.renew_time.ok_or("a lease without renewTime")?.0;
        let lapses = renewed
            + k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
                held.lease_duration_seconds.unwrap_or(6),
            ));
        if stepped_down_at >= lapses {
            return Err(format!(
                "stepped down at {stepped_down_at}, after its lease lapsed at {lapses}\n{first_log}"
            ));
        }
        let mut logs = format!("--- stepped down after {stepped_down_after:?}:\n{first_log}\n");
        let (done, exits) = s.finish_restarting(&mut op, "paused", &lease, &mut logs).await;
        let logs = format!("{logs}--- last operator:\n{}", op.log_tail());
        op.kill().await?;
        let done = done.map_err(|e| format!("{e}\n{logs}"))?;
        if done.phase().as_str() != "Completed" {
            return Err(format!("run ended {:?}\n{logs}", done.phase()));
        }
        s.exactly_one_report("paused")
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let unjournaled = s
            .status_matches_journal(&done)
            .await
            .map_err(|e| format!("{e}\n{logs}"))?;
        let asked = |route: &str| s.model.route_requests(route).len();
        // json was checkpointed before the pause: never asked again. pickle's end was not (etcd
        // stood still), so the restarted operator ran it once more, from its start: 4 calls.
        if (asked("planner"), asked("json"), asked("pickle")) != (1, 4, pickle_at_step_down + 4)
        {
            return Err(format!(
                "asked at the pause: {before}; pickle {pickle_at_step_down} at the step-down; at the end: {}\n{logs}",
                s.asked()
            ));
        }
        eprintln!(
            "etcd paused: the leader stepped down after {stepped_down_after:?}; the run completed once (the stepped-down process restarted {exits} time(s), {unjournaled} unjournaled call(s))"
        );
        Ok::<(), String>(())
    }
    .await;
    if let Err(e) = outcome {
        panic!("{e}");
    }
}
