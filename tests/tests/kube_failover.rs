//! Crash and failover on the real API server, with the operator as shipped (the chart's
//! ServiceAccount token), the scripted model server and real searx over the Debian docs.
//!
//! - SIGKILL in Planning, in the middle of Researching (one researcher finished and checkpointed,
//!   the other's call held) and in Synthesizing: a restarted process (as the kubelet restarts a
//!   container: same pod name) finishes the run; exactly one report ConfigMap exists; status cost
//!   equals the cost journal (`<run>-events`) and every call the model answered; no finished
//!   researcher is asked again (the model server's request log).
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
use quarry_engine::store::ArtifactStore;
use serde_json::{Value, json};

const QUERY: &str = "How do Python's JSON and pickle modules differ?";
const TASKS: [&str; 2] = ["JSON decoding in Python", "Python pickle serialization"];
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

fn page(docs: &str, name: &str) -> String {
    format!("{docs}/python3.11-doc/html/library/{name}.html")
}

/// A researcher answering by turn, so a redone researcher gets the same replies.
fn researcher(name: &str, task: &str, query: &str, url: &str, marker: &str) -> Route {
    let report = format!("## Summary\n{marker}: the module is documented here ([doc]({url})).");
    Route::new(
        name,
        format!("Research task: {task}\n"),
        vec![
            Step::tool_call("search", json!({"queries": [query]})).with_usage(1000, 10),
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1200, 10),
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(1400, 12),
            Step::text(report.clone()).with_usage(3000, 120),
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
                vec![Step::text(plan).with_usage(300, 40)],
            )
            .by_turn(),
        )
        .with_route(researcher(
            "json",
            TASKS[0],
            "json decoder",
            &json_url,
            "JSON-MARKER",
        ))
        .with_route(researcher(
            "pickle",
            TASKS[1],
            "pickle",
            &pickle_url,
            "PICKLE-MARKER",
        ))
        .with_route(
            Route::new(
                "evaluator",
                "You are the lead evaluator",
                vec![Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10)],
            )
            .by_turn(),
        )
        .with_route(quarry_e2e::deep_script::summarizer())
        .with_route(
            Route::new(
                "study",
                "Mode: study",
                vec![Step::text(study).with_usage(5000, 400)],
            )
            .by_turn(),
        )
}

/// One namespace of research on a control plane with the chart's RBAC.
struct Setup {
    plane: ControlPlane,
    _stack: SearchStack,
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
    let model = ScriptedModel::start(script(&stack.docs.base_url()))
        .await
        .map_err(|e| format!("model server: {e}"))?;
    let client = plane.client();
    let namespace = plane.namespace(label).await?;
    apply(
        &client,
        Some(&namespace),
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "model-key"}, "stringData": {"apiKey": "sk-e2e-not-a-real-key"}}),
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
    Ok(Setup {
        plane,
        _stack: stack,
        model,
        namespace,
        operator_kubeconfig,
    })
}

impl Setup {
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

    /// Whether a checkpoint slot of run `name` holds `marker`.
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

    /// The run's cost journal as the operator's store reads it.
    async fn journal(&self, run: &ResearchRun) -> Result<String, String> {
        let owner = run
            .controller_owner_ref(&())
            .ok_or("run without owner ref data")?;
        let store = quarry_operator::store::configmap::ConfigMapStore::new(
            self.client(),
            &self.namespace,
            &run.name_any(),
            owner,
        );
        let bytes = store
            .get(quarry_engine::store::keys::EVENTS_KEY)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no events.jsonl")?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
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
            KillIn::Researching => s.model.hold_once("pickle", 2),
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
            KillIn::Researching => {
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
        // The kubelet restarts the container: same pod name, so the Lease is its own again.
        let mut second = s
            .start_operator("quarry-0", "second.log", None, &[])
            .await?;
        let done = s.wait_finished("killed").await;
        let logs = format!(
            "--- first:\n{}\n--- second:\n{}",
            first.log_tail(),
            second.log_tail()
        );
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
            KillIn::Researching => {
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
