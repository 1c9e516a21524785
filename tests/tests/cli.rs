//! The real `quarry` binary (and `kubectl-quarry`) driven as a process against a fake Kubernetes
//! API server on 127.0.0.1: exact stdout, stderr, exit codes and the exact requests received.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use quarry_e2e::fake_apiserver::{FakeApiServer, QUARRY_GV, ago};
use quarry_e2e::quarry_bin::{kubectl_quarry_bin, quarry_bin};

const RUNS: &str = "/apis/quarry.dev/v1alpha1/namespaces/team-a/researchruns";
const PROFILES: &str = "/apis/quarry.dev/v1alpha1/namespaces/team-a/researchprofiles";

/// Runs `program args` with a clean environment: HOME in the test directory, no in-cluster
/// variables, and KUBECONFIG only when given.
async fn run_program(
    program: &Path,
    dir: &Path,
    kubeconfig: Option<&Path>,
    args: &[&str],
) -> Output {
    let mut command = std::process::Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("QUARRY_LOG_LEVEL")
        .env("COLUMNS", "200");
    if let Some(kc) = kubeconfig {
        command.env("KUBECONFIG", kc);
    }
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

struct Env {
    kube: FakeApiServer,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Env {
    async fn new() -> Self {
        let kube = FakeApiServer::start().await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = kube.write_kubeconfig(dir.path(), "team-a").unwrap();
        Env {
            kube,
            dir,
            kubeconfig,
        }
    }

    async fn quarry(&self, args: &[&str]) -> Output {
        run_program(
            &quarry_bin().unwrap(),
            self.dir.path(),
            Some(&self.kubeconfig),
            args,
        )
        .await
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn profile(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchProfile",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:9/v1", "model": "m"}}, "search": {"url": "http://127.0.0.1:8888"}}
    })
}

/// Three runs of known ages in two namespaces.
fn fixtures(kube: &FakeApiServer) {
    kube.insert(json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchRun",
        "metadata": {"name": "vacuum-full", "namespace": "team-a", "creationTimestamp": ago(3 * 3600 + 30)},
        "spec": {"query": "What does VACUUM FULL lock in PostgreSQL?", "mode": "quick", "outputs": ["study"], "topK": 5,
                 "profileRef": "default", "sources": ["web"], "report": {"kind": "configMap"}, "suspend": false, "cancel": false},
        "status": {"phase": "Completed", "progress": "100%",
                   "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630", "llmCalls": 4, "searches": 1, "pagesFetched": 1},
                   "report": {"configMap": "vacuum-full-report", "bytes": 812, "sources": 3}}
    }));
    kube.insert(json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchRun",
        "metadata": {"name": "json-errors", "namespace": "team-a", "creationTimestamp": ago(26 * 3600 + 30)},
        "spec": {"query": "Which errors can json.loads raise in Python, and when does each happen?", "mode": "deep",
                 "outputs": ["study", "ideas"], "topK": 5, "profileRef": "fast", "sources": ["web"], "report": {"kind": "configMap"},
                 "suspend": false, "cancel": false},
        "status": {"phase": "Researching", "progress": "40%", "round": 1,
                   "usage": {"inputTokens": 1000, "outputTokens": 50, "costUSD": "0.001750", "llmCalls": 2, "searches": 3, "pagesFetched": 2}}
    }));
    kube.insert(json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchRun",
        "metadata": {"name": "cve-scan", "namespace": "team-b", "creationTimestamp": ago(3 * 86400 + 4 * 3600 + 30)},
        "spec": {"query": "Is CVE-2024-3094 exploitable?", "mode": "quick", "outputs": ["study"], "topK": 5,
                 "profileRef": "default", "sources": ["web", "security"], "report": {"kind": "configMap"}, "suspend": false, "cancel": false}
    }));
}

#[tokio::test]
async fn list_prints_kubectl_tables_for_a_namespace_and_for_all() {
    let env = Env::new().await;
    fixtures(&env.kube);
    let out = env.quarry(&["list"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "NAME          PHASE         PROGRESS   COST        SOURCES   AGE\n\
         json-errors   Researching   40%        $0.001750   -         26h\n\
         vacuum-full   Completed     100%       $0.013630   3         3h\n"
    );
    let out = env.quarry(&["list", "-A", "-o", "wide"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "NAMESPACE   NAME          PHASE         PROGRESS   COST        SOURCES   AGE    MODE    PROFILE   TOKENS   QUERY\n\
         team-a      json-errors   Researching   40%        $0.001750   -         26h    deep    fast      1050     Which errors can json.loads raise in Python, an…\n\
         team-a      vacuum-full   Completed     100%       $0.013630   3         3h     quick   default   9413     What does VACUUM FULL lock in PostgreSQL?\n\
         team-b      cve-scan      Pending       -          -           -         3d4h   quick   default   -        Is CVE-2024-3094 exploitable?\n"
    );
    let out = env.quarry(&["list", "-n", "empty"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(stderr(&out), "No resources found in empty namespace.\n");
    let out = env.quarry(&["list", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["json-errors", "vacuum-full"]);
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {RUNS}"),
            "GET /apis/quarry.dev/v1alpha1/researchruns".to_string(),
            "GET /apis/quarry.dev/v1alpha1/namespaces/empty/researchruns".to_string(),
            format!("GET {RUNS}"),
        ]
    );
}

#[tokio::test]
async fn get_prints_one_run_as_a_table_json_or_yaml() {
    let env = Env::new().await;
    fixtures(&env.kube);
    let out = env.quarry(&["get", "vacuum-full"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "NAME          PHASE       PROGRESS   COST        SOURCES   AGE\n\
         vacuum-full   Completed   100%       $0.013630   3         3h\n"
    );
    let stored = env
        .kube
        .object(QUARRY_GV, "researchruns", "team-a", "vacuum-full")
        .unwrap();
    let out = env.quarry(&["get", "vacuum-full", "-o", "json"]).await;
    assert_eq!(
        serde_json::from_str::<Value>(&stdout(&out)).unwrap(),
        stored
    );
    let out = env
        .quarry(&["get", "cve-scan", "-n", "team-b", "-o", "yaml"])
        .await;
    let yaml: Value = serde_yaml::from_str(&stdout(&out)).unwrap();
    assert_eq!(yaml["spec"]["query"], "Is CVE-2024-3094 exploitable?");
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {RUNS}/vacuum-full"),
            format!("GET {RUNS}/vacuum-full"),
            "GET /apis/quarry.dev/v1alpha1/namespaces/team-b/researchruns/cve-scan".to_string(),
        ]
    );
}

#[tokio::test]
async fn unknown_runs_missing_crds_and_no_cluster_say_what_to_do() {
    let env = Env::new().await;
    let out = env.quarry(&["get", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "quarry: ResearchRun \"nope\" not found in namespace \"team-a\".\n  List the runs with: quarry list -n team-a   (or quarry list -A for every namespace)\n"
    );
    let out = env.quarry(&["cancel", "nope"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).starts_with("quarry: ResearchRun \"nope\" not found"));

    env.kube.remove_crds();
    let out = env.quarry(&["list"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "quarry: the ResearchRun API (quarry.dev/v1alpha1) is not installed on this cluster.\n  Install the CRDs: quarry crd | kubectl apply -f -   (or the Helm chart in charts/quarry)\n"
    );
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {RUNS}/nope"),
            format!("GET {RUNS}/nope"),
            format!("GET {RUNS}"),
        ]
    );

    // No kubeconfig at all, and not in a pod.
    let out = run_program(&quarry_bin().unwrap(), env.dir.path(), None, &["list"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "quarry: no Kubernetes cluster is configured (KUBECONFIG is not set, ~/.kube/config does not exist and this is not a pod).\n  To use a cluster: point KUBECONFIG (or --kubeconfig) at its kubeconfig and check it with `kubectl cluster-info`.\n  To research without a cluster: quarry run \"QUESTION\" --profile PROFILE.yaml\n"
    );
    // An API server that is not there.
    let dead = env.dir.path().join("dead-kubeconfig");
    std::fs::write(
        &dead,
        std::fs::read_to_string(&env.kubeconfig)
            .unwrap()
            .replace(&env.kube.url(), "http://127.0.0.1:1"),
    )
    .unwrap();
    let out = run_program(
        &quarry_bin().unwrap(),
        env.dir.path(),
        Some(&dead),
        &["list"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let text = stderr(&out);
    assert!(
        text.starts_with("quarry: cannot reach the Kubernetes API server at http://127.0.0.1:1/: "),
        "{text}"
    );
    assert!(text.ends_with("  Check that the cluster is running and that `kubectl cluster-info` works with the same kubeconfig.\n"), "{text}");
}

#[tokio::test]
async fn apply_creates_a_run_from_flags() {
    let env = Env::new().await;
    env.kube.insert(profile("team-a", "default"));
    let out = env
        .quarry(&[
            "apply",
            "What does VACUUM FULL lock?",
            "--mode",
            "quick",
            "--outputs",
            "study,ideas",
            "--top-k",
            "3",
            "--max-cost-usd",
            "0.50",
            "--timeout",
            "20m",
            "--ttl-seconds-after-finished",
            "86400",
        ])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "researchrun.quarry.dev/what-does-vacuum-full-lock-z0001 created\n"
    );
    assert_eq!(stderr(&out), "");
    let requests = env.kube.requests();
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {PROFILES}/default"),
            format!("POST {RUNS}?&fieldManager=quarry-cli"),
        ]
    );
    assert_eq!(
        requests[1].body,
        json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"generateName": "what-does-vacuum-full-lock-", "namespace": "team-a"},
            "spec": {
                "query": "What does VACUUM FULL lock?", "mode": "quick", "outputs": ["study", "ideas"],
                "topK": 3, "profileRef": "default", "sources": ["web", "security", "stackexchange"],
                "limits": {"maxCostUSD": "0.50", "timeout": "20m"}, "report": {"kind": "configMap"},
                "suspend": false, "cancel": false, "ttlSecondsAfterFinished": 86400
            }
        })
    );
    assert_eq!(
        requests[1].content_type.as_deref(),
        Some("application/json")
    );
    // -o json prints the object the API server returned.
    let out = env
        .quarry(&[
            "apply",
            "How do I decode JSON?",
            "--name",
            "json-1",
            "-o",
            "json",
        ])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        printed,
        env.kube
            .object(QUARRY_GV, "researchruns", "team-a", "json-1")
            .unwrap()
    );
    assert_eq!(printed["metadata"]["uid"], "uid-3");
    // The same name again: the API server's conflict, worded.
    let out = env
        .quarry(&["apply", "How do I decode JSON?", "--name", "json-1"])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "quarry: ResearchRun \"json-1\" already exists in namespace \"team-a\".\n  Choose another --name, or leave --name out for a generated one.\n"
    );
}

#[tokio::test]
async fn apply_with_a_missing_profile_names_the_existing_ones_and_creates_nothing() {
    let env = Env::new().await;
    env.kube.insert(profile("team-a", "fast"));
    env.kube.insert(profile("team-a", "openai"));
    let out = env
        .quarry(&[
            "apply",
            "What does VACUUM FULL lock?",
            "--profile",
            "defualt",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "quarry: ResearchProfile \"defualt\" not found in namespace \"team-a\"; it has: fast, openai.\n  Create one (deploy/examples/profile-openai.yaml is a start) with kubectl apply -f PROFILE.yaml, or name an existing one with --profile NAME.\n"
    );
    assert_eq!(
        env.kube.request_lines(),
        [format!("GET {PROFILES}/defualt"), format!("GET {PROFILES}"),]
    );
}

#[tokio::test]
async fn apply_dry_run_prints_the_manifest_without_any_request() {
    let env = Env::new().await;
    let out = env
        .quarry(&[
            "apply",
            "What does VACUUM FULL lock?",
            "--name",
            "vacuum",
            "--mode",
            "quick",
            "--dry-run",
        ])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "apiVersion: quarry.dev/v1alpha1\nkind: ResearchRun\nmetadata:\n  name: vacuum\n  namespace: team-a\nspec:\n  cancel: false\n  mode: quick\n  outputs:\n  - study\n  profileRef: default\n  query: What does VACUUM FULL lock?\n  report:\n    kind: configMap\n  sources:\n  - web\n  - security\n  - stackexchange\n  suspend: false\n  topK: 5\n"
    );
    assert!(env.kube.requests().is_empty());
    // Bad flags fail before any request, with exit status 2.
    let out = env.quarry(&["apply", "ab"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        "quarry: the question must be 3 to 4000 characters, not 2\n"
    );
    assert!(env.kube.requests().is_empty());
}

/// Statuses an operator would write for a quick run, ending `last`.
fn progress_script(last: Value) -> Vec<Value> {
    vec![
        json!({"phase": "Planning", "progress": "0%", "message": "research in progress: Planning"}),
        json!({"phase": "Researching", "progress": "40%", "round": 1, "message": "research in progress: Researching",
               "usage": {"inputTokens": 900, "outputTokens": 20, "costUSD": "0.001325", "llmCalls": 1, "searches": 1, "pagesFetched": 0}}),
        last,
    ]
}

#[tokio::test]
async fn apply_wait_follows_the_run_to_its_end_with_progress_lines() {
    let env = Env::new().await;
    env.kube.insert(profile("team-a", "default"));
    env.kube.script_watch(
        "vacuum",
        progress_script(json!({
            "phase": "Completed", "progress": "100%", "message": "report stored in ConfigMap vacuum-report",
            "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630", "llmCalls": 4, "searches": 1, "pagesFetched": 1},
            "report": {"configMap": "vacuum-report", "bytes": 812, "sources": 3}
        })),
    );
    let out = env
        .quarry(&[
            "apply",
            "What does VACUUM FULL lock?",
            "--name",
            "vacuum",
            "--wait",
            "--progress",
            "lines",
        ])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "researchrun.quarry.dev/vacuum created\n\
         researchrun/vacuum Completed: 3 sources, $0.013630; report in ConfigMap vacuum-report (quarry report vacuum)\n"
    );
    assert_eq!(
        stderr(&out),
        "[Pending] - | 0 searches, 0 pages read | 0 tok | -\n\
         [Planning] 0% | 0 searches, 0 pages read | 0 tok | - | research in progress: Planning\n\
         [Researching] 40% | round 1 | 1 searches, 0 pages read | 920 tok | $0.001325 | research in progress: Researching\n\
         [Completed] 100% | 1 searches, 1 pages read | 9413 tok | $0.013630 | report stored in ConfigMap vacuum-report\n"
    );
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {PROFILES}/default"),
            format!("POST {RUNS}?&fieldManager=quarry-cli"),
            format!("GET {RUNS}?&fieldSelector=metadata.name%3Dvacuum&limit=500"),
            format!(
                "GET {RUNS}?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Dvacuum&allowWatchBookmarks=true&resourceVersion=102"
            ),
        ]
    );
}

#[tokio::test]
async fn apply_wait_on_a_terminal_rewrites_one_live_line_per_phase() {
    let env = Env::new().await;
    env.kube.insert(profile("team-a", "default"));
    env.kube.script_watch(
        "vacuum",
        progress_script(json!({
            "phase": "Completed", "progress": "100%",
            "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630", "llmCalls": 4, "searches": 1, "pagesFetched": 1},
            "report": {"configMap": "vacuum-report", "bytes": 812, "sources": 3}
        })),
    );
    // util-linux `script` gives the CLI a pseudo-terminal, as a person's shell would.
    let command = format!(
        "{} apply 'What does VACUUM FULL lock?' --name vacuum --wait",
        quarry_bin().unwrap().display()
    );
    let out = run_program(
        Path::new("script"),
        env.dir.path(),
        Some(&env.kubeconfig),
        &["-qefc", &command, "/dev/null"],
    )
    .await;
    let screen = stdout(&out);
    assert!(out.status.success(), "{screen}");
    // Each line is drawn over the previous one (carriage return, clear line) while the phase
    // stays; a new phase keeps the last line of the previous one on screen.
    let live = "\r\x1b[2K";
    assert!(
        screen.contains(&format!(
            "{live}[Planning] 0% | 0 searches, 0 pages read | 0 tok | - | research in progress: Planning\r\n{live}[Researching] 40%"
        )),
        "{screen:?}"
    );
    assert!(
        screen.contains(&format!(
            "{live}[Completed] 100% | 1 searches, 1 pages read | 9413 tok | $0.013630\r\nresearchrun/vacuum Completed: 3 sources"
        )),
        "{screen:?}"
    );
}

#[tokio::test]
async fn apply_wait_exits_non_zero_when_the_run_fails_and_prints_the_final_object() {
    let env = Env::new().await;
    env.kube.insert(profile("team-a", "default"));
    let failed = json!({
        "phase": "Failed", "progress": "100%", "message": "no usable sources were found",
        "conditions": [{"type": "Succeeded", "status": "False", "reason": "NoEvidence",
                        "message": "no usable sources were found", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    });
    env.kube.script_watch("q1", progress_script(failed.clone()));
    let out = env
        .quarry(&[
            "apply",
            "Is this knowable?",
            "--name",
            "q1",
            "--wait",
            "-o",
            "json",
        ])
        .await;
    assert_eq!(out.status.code(), Some(1));
    let printed: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(printed["status"], failed);
    // Not a terminal: no progress, only the outcome.
    assert_eq!(
        stderr(&out),
        "quarry: ResearchRun \"q1\" ended Failed (NoEvidence): no usable sources were found\n"
    );
}

#[tokio::test]
async fn cancel_sets_spec_cancel_and_waits_for_cancelled() {
    let env = Env::new().await;
    fixtures(&env.kube);
    env.kube.script_watch(
        "json-errors",
        vec![json!({
            "phase": "Cancelled", "progress": "40%", "message": "the run was cancelled",
            "usage": {"inputTokens": 1000, "outputTokens": 50, "costUSD": "0.001750", "llmCalls": 2, "searches": 3, "pagesFetched": 2}
        })],
    );
    let out = env
        .quarry(&["cancel", "json-errors", "--wait", "--progress", "none"])
        .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "researchrun.quarry.dev/json-errors cancel requested\nresearchrun/json-errors Cancelled: $0.001750\n"
    );
    assert_eq!(stderr(&out), "");
    let requests = env.kube.requests();
    assert_eq!(
        env.kube.request_lines(),
        [
            format!("GET {RUNS}/json-errors"),
            format!("PATCH {RUNS}/json-errors?&fieldManager=quarry-cli"),
            format!("GET {RUNS}?&fieldSelector=metadata.name%3Djson-errors&limit=500"),
            format!(
                "GET {RUNS}?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3Djson-errors&allowWatchBookmarks=true&resourceVersion=104"
            ),
        ]
    );
    assert_eq!(
        requests[1].content_type.as_deref(),
        Some("application/merge-patch+json")
    );
    assert_eq!(requests[1].body, json!({"spec": {"cancel": true}}));
    let stored = env
        .kube
        .object(QUARRY_GV, "researchruns", "team-a", "json-errors")
        .unwrap();
    assert_eq!(stored["spec"]["cancel"], true);
    assert_eq!(stored["metadata"]["generation"], 2);

    // A finished run is left alone.
    env.kube.clear_requests();
    let out = env.quarry(&["cancel", "vacuum-full"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "researchrun.quarry.dev/vacuum-full already Completed; nothing to cancel\n"
    );
    assert_eq!(
        env.kube.request_lines(),
        [format!("GET {RUNS}/vacuum-full")]
    );
}

#[tokio::test]
async fn kubectl_quarry_is_the_same_cli_as_a_kubectl_plugin() {
    let env = Env::new().await;
    fixtures(&env.kube);
    let plugin = kubectl_quarry_bin().unwrap();
    let out = run_program(
        &plugin,
        env.dir.path(),
        Some(&env.kubeconfig),
        &["get", "vacuum-full"],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "NAME          PHASE       PROGRESS   COST        SOURCES   AGE\n\
         vacuum-full   Completed   100%       $0.013630   3         3h\n"
    );
    // Usage reads the way kubectl users type it.
    let out = run_program(&plugin, env.dir.path(), None, &["get"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("Usage: kubectl quarry get <NAME>"),
        "{}",
        stderr(&out)
    );
    // With a kubectl binary at hand (CI installs one), through kubectl's own plugin lookup.
    let kubectl = std::env::var_os("QUARRY_KUBECTL")
        .map(PathBuf::from)
        .or_else(|| which("kubectl"));
    let Some(kubectl) = kubectl else {
        eprintln!(
            "kubectl not found (set QUARRY_KUBECTL): the kubectl plugin lookup is not exercised"
        );
        return;
    };
    let path = format!(
        "{}:{}",
        plugin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = std::process::Command::new(kubectl);
    command
        .args(["quarry", "list", "-A"])
        .env("HOME", env.dir.path())
        .env("KUBECONFIG", &env.kubeconfig)
        .env("PATH", path);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("NAMESPACE   NAME          PHASE"),
        "{}",
        stdout(&out)
    );
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(program))
            .find(|p| p.is_file())
    })
}

/// Runs `quarry __pdf-extract <limit-ms> <memory-bytes>` with `pdf` on stdin.
fn pdf_helper(pdf: Vec<u8>) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = std::process::Command::new(quarry_bin().unwrap())
        .args(["__pdf-extract", "10000", "805306368"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&pdf));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    out
}

#[tokio::test]
async fn the_binary_is_its_own_pdf_helper_and_refuses_a_decoding_bomb() {
    let garbage = tokio::task::spawn_blocking(|| pdf_helper(b"not a pdf".to_vec()))
        .await
        .unwrap();
    assert!(garbage.status.success(), "{}", stderr(&garbage));
    assert_eq!(
        serde_json::from_slice::<Value>(&garbage.stdout).unwrap(),
        json!({"Err": {"Malformed": "no %PDF- header"}})
    );
    // 17 Mi `z` decode to 68 MiB of zeros through ASCII85: past the 64 MiB decoded cap.
    let data = "z".repeat(17 * 1024 * 1024);
    let mut pdf = format!(
        "%PDF-1.7\n1 0 obj\n<< /Length {} /Filter /ASCII85Decode >>\nstream\n",
        data.len()
    )
    .into_bytes();
    pdf.extend_from_slice(data.as_bytes());
    pdf.extend_from_slice(b"\nendstream\nendobj\n%%EOF\n");
    let bomb = tokio::task::spawn_blocking(move || pdf_helper(pdf))
        .await
        .unwrap();
    assert!(bomb.status.success(), "{}", stderr(&bomb));
    assert_eq!(
        serde_json::from_slice::<Value>(&bomb.stdout).unwrap(),
        json!({"Err": {"TooLarge": 64 * 1024 * 1024}})
    );
}
