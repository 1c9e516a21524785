//! Quarry installed on a real one-node cluster the way the README tells users: the image built
//! from the repository's Dockerfile (scripts/build-images.sh), `helm install` of charts/quarry,
//! and pods that really run under the chart's probes, securityContext and limits.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use quarry_api::{Phase, ResearchRun};
use quarry_e2e::kube_operator::wait_for;
use quarry_e2e::model_server::{Route, Script, ScriptedModel, Step};
use quarry_e2e::node::{
    Images, Node, build_images, readme_command, readme_install_commands, resolve,
};
use quarry_vocab::reasons;
use serde_json::json;

const NS: &str = "quarry-system";

/// The README's `helm install`, with its example registry replaced by the imported image, and
/// `extra` `--set` values a test needs (never pulled: `image.pullPolicy=Never`).
fn helm_install(node: &Node, images: &Images, extra: &[&str]) {
    let commands = readme_install_commands().expect("README");
    let readme = readme_command(&commands, &["helm", "install"]).expect("helm install");
    let mut args: Vec<String> = readme[1..]
        .iter()
        .map(|w| match w.as_str() {
            "image.repository=registry.example.com/quarry" => {
                format!("image.repository={}", images.quarry.repository())
            }
            "image.tag=0.1.0" => format!("image.tag={}", images.quarry.tag()),
            other => other.to_owned(),
        })
        .collect();
    assert!(
        args.iter()
            .any(|a| a.starts_with("image.tag=") && a != "image.tag=0.1.0"),
        "the README's helm install no longer sets image.tag=0.1.0: {readme:?}"
    );
    for value in ["image.pullPolicy=Never"].iter().chain(extra) {
        args.push("--set".into());
        args.push((*value).to_owned());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ok, out, err) = node.run("helm", &args);
    assert!(ok, "helm {args:?}: {out}{err}");
}

/// Whether a pod's Ready condition is True.
fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test]
#[ignore = "needs a node (root, containerd: scripts/install-node-deps.sh, QUARRY_NODE_SH)"]
async fn helm_install_runs_a_ready_operator_that_leads_and_serves_metrics() {
    let images = build_images().expect("images");
    let image = images.quarry.clone();
    let node = Node::up().await.expect("node");
    node.import(&image.archive).expect("import");

    // The README's command, with the image overridden to the imported one (never pulled). The
    // default SearchEngine would need SearXNG's public image: left out here (the SearchEngine test
    // below runs one).
    let started = std::time::Instant::now();
    helm_install(&node, &images, &["searchEngine.create=false"]);

    // Ready under the chart's probes (startup on /livez, readiness on /readyz).
    let pods: Api<Pod> = Api::namespaced(node.client(), NS);
    let selector = ListParams::default().labels("app.kubernetes.io/component=operator");
    let pod = match wait_for(
        "a Ready operator pod",
        Duration::from_secs(180),
        || async { pods.list(&selector).await.ok()?.items.into_iter().next() },
        ready,
    )
    .await
    {
        Ok(pod) => pod,
        Err(e) => panic!("{e}\n{}", node.diagnostics(NS)),
    };
    eprintln!("operator Ready {:?} after helm install", started.elapsed());
    let name = pod.metadata.name.clone().unwrap();

    // It runs as the chart says: non-root 65532, read-only root filesystem, no capabilities,
    // memory limit, the imported image.
    let spec = serde_json::to_value(pod.spec.as_ref().unwrap()).unwrap();
    let container = &spec["containers"][0];
    assert_eq!(container["image"], json!(image.name));
    assert_eq!(container["imagePullPolicy"], "Never");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(container["resources"]["limits"]["memory"], "1Gi");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);
    let status = serde_json::to_value(pod.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        status["containerStatuses"][0]["restartCount"], 0,
        "{status}"
    );

    // The process really is uid 65532 (the image's USER): the kubelet would have refused a root
    // one under runAsNonRoot, and /proc on the node shows it.
    let pid = container_pid(&node, &status);
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().skip(1).all(|u| u == "65532"),
        "{uid_line}"
    );

    // It takes the leader Lease.
    let leases: Api<Lease> = Api::namespaced(node.client(), NS);
    let lease = wait_for(
        "the leader Lease held by the pod",
        Duration::from_secs(60),
        || async { leases.get_opt("quarry-operator").await.ok().flatten() },
        |lease: &Lease| {
            lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(name.as_str())
        },
    )
    .await
    .expect("lease");
    eprintln!("lease: {:?}", lease.spec);

    // /metrics through the chart's Service: the cluster IP (kube-proxy's rules) and its DNS name.
    let services: Api<Service> = Api::namespaced(node.client(), NS);
    let service = services.get("quarry").await.expect("service");
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();
    let resolved = wait_for(
        "the Service's DNS name",
        Duration::from_secs(20),
        || async {
            resolve("quarry.quarry-system.svc.cluster.local")
                .ok()
                .flatten()
        },
        |_| true,
    )
    .await
    .expect("dns");
    assert_eq!(resolved.to_string(), cluster_ip);
    // Retried: kube-proxy may program the Service's endpoint a moment after the Pod holds the
    // Lease (once refused on the node: "Connection refused" from its reject rule).
    let metrics = wait_for(
        "/metrics through the Service's cluster IP",
        Duration::from_secs(30),
        || async {
            reqwest::get(format!("http://{cluster_ip}:8080/metrics"))
                .await
                .ok()?
                .text()
                .await
                .ok()
        },
        |m: &String| m.contains("quarry_"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    assert!(metrics.contains("quarry_"), "{metrics}");

    // A pod resolves the Service by its DNS name (the kubelet points pods at the node's dnsmasq):
    // the image's own getent, as a one-shot pod under the same restrictions.
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "dns-probe"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532},
            "containers": [{
                "name": "probe", "image": image.name, "imagePullPolicy": "Never",
                "command": ["getent", "hosts", "quarry.quarry-system.svc.cluster.local"],
            }],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &probe).await.unwrap();
    let done = wait_for(
        "the DNS probe pod to finish",
        Duration::from_secs(60),
        || async { pods.get_opt("dns-probe").await.ok().flatten() },
        |p: &Pod| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    let (_, logs, _) = node.run("kubectl", &["-n", NS, "logs", "dns-probe"]);
    assert_eq!(
        done.status.and_then(|s| s.phase).as_deref(),
        Some("Succeeded"),
        "{logs}"
    );
    assert!(logs.starts_with(&cluster_ip), "{logs}");
}

/// The host pid of the pod's first container (containerd's task, by container id).
fn container_pid(node: &Node, status: &serde_json::Value) -> String {
    let id = status["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap()
        .trim_start_matches("containerd://")
        .to_owned();
    let sock = node.dir().join("containerd/containerd.sock");
    let out = std::process::Command::new("ctr")
        .arg("--address")
        .arg(&sock)
        .args(["-n", "k8s.io", "tasks", "ls"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_else(|| panic!("no task {id}: {text}"))
        .to_owned()
}

/// Where the Pods reach this host: the node's address (on lo), whatever port the OS gives.
fn on_node() -> std::net::SocketAddr {
    (quarry_e2e::node::NODE_IP, 0).into()
}

/// The pages the runs read: about the README example's question (a page that does not answer
/// the question is not a source, and a run without one fails honestly).
const TASKGROUP_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>asyncio.TaskGroup</title></head><body><main><article>\
<h1>Task groups in asyncio</h1><p>asyncio.TaskGroup is an asynchronous context manager holding a group of tasks. \
When a child task raises an exception, the TaskGroup cancels the remaining tasks in the group.</p>\
<p>Once all tasks have finished, the exceptions raised by child tasks are combined and raised together in an ExceptionGroup.</p></article></main></body></html>";

const EXCEPT_STAR_PAGE: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>Exception groups</title></head><body><main><article>\
<h1>Exception groups and except*</h1><p>The except* clause handles the exceptions of an ExceptionGroup raised by a TaskGroup: \
each except* clause extracts the child task exceptions that match its type.</p></article></main></body></html>";

/// The web the Pods search and read, on the node address: `/search?q=` (JSON, the shape searx's
/// `json_engine` reads) over two pages under `/docs/`. Returns its base URL.
async fn start_web() -> String {
    use axum::Router;
    use axum::response::Html;
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(on_node()).await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let results = json!({"results": [
        {"url": format!("{base}/docs/taskgroup.html"), "title": "asyncio.TaskGroup", "content": "Task groups cancel the remaining tasks when a child task raises"},
        {"url": format!("{base}/docs/except-star.html"), "title": "Exception groups", "content": "except* handles the ExceptionGroup of a TaskGroup"}
    ]});
    let app = Router::new()
        .route(
            "/search",
            get(move || {
                let results = results.clone();
                async move { axum::Json(results) }
            }),
        )
        .route(
            "/docs/taskgroup.html",
            get(|| async { Html(TASKGROUP_PAGE) }),
        )
        .route(
            "/docs/except-star.html",
            get(|| async { Html(EXCEPT_STAR_PAGE) }),
        );
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    base
}

/// A researcher answering by turn (a researcher redone after an operator restart gets the same
/// replies): search, scrape handshake, one batch, its report. `delay` holds its batch turn.
fn researcher(name: &str, task: &str, web: &str, delay_ms: u64) -> Route {
    let url = format!("{web}/docs/taskgroup.html");
    let report = format!(
        "## Summary\nWhen a child task raises an exception, the TaskGroup cancels the remaining tasks in the group ([TaskGroup]({url})).\n\n## Key findings\n- The exceptions raised by child tasks are raised together in an ExceptionGroup ([TaskGroup]({url})).\n\n## Links\n- {url}"
    );
    Route::new(
        name,
        format!("Research task: {task}\n"),
        vec![
            Step::tool_call("search", json!({"queries": [task]})).with_usage(100, 10),
            Step::tool_call("scrape", json!({"urls": [url]})).with_usage(100, 10),
            Step::delay(
                delay_ms,
                Step::tool_call("scrape", json!({"urls": [url]})).with_usage(200, 10),
            ),
            Step::text(report.clone()).with_usage(300, 50),
        ],
    )
    .with_fallback(Step::text(report).with_usage(300, 50))
    .by_turn()
}

const DEEP_TASKS: [&str; 2] = ["TaskGroup exception handling", "TaskGroup cancellation"];

/// The scripted model of the node's runs: the quick run's researcher (any other query) and a deep
/// run (planner, two researchers, evaluator, summaries, study).
fn model_script(web: &str, quick_query: &str) -> Script {
    let url = format!("{web}/docs/taskgroup.html");
    let plan =
        json!({"intent": "RESEARCH_REQUIRED", "complexity": 1, "tasks": DEEP_TASKS}).to_string();
    let study = format!(
        "<research_result>\n# asyncio.TaskGroup and exceptions\n\n## Key Takeaways\n1. When a child task raises an exception, the TaskGroup cancels the remaining tasks in the group ([TaskGroup]({url})).\n2. Once all tasks have finished, the exceptions raised by child tasks are combined and raised together in an ExceptionGroup ([TaskGroup]({url})).\n\n## Abstract\nHow a TaskGroup handles the exceptions of its child tasks.\n</research_result>"
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
        // The deep researchers' batch turn is held 6 s: long enough to delete the operator Pod
        // while the run is Researching.
        .with_route(researcher("admission", DEEP_TASKS[0], web, 6000))
        .with_route(researcher("transition", DEEP_TASKS[1], web, 6000))
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
        // The quick runs' researcher (its task is the README example's query).
        .with_route(researcher("quick", quick_query, web, 0))
}

/// A ResearchProfile `name` for the node: the scripted model and the SearchEngine `default`, pages
/// fetched from the node address.
fn node_profile(name: &str, model: &str) -> serde_json::Value {
    let host = quarry_e2e::node::NODE_IP.to_string();
    json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": name},
        "spec": {
            "models": {"primary": {
                "baseURL": model, "model": "scripted",
                "apiKeySecretRef": {"name": "openai-api-key", "key": "apiKey"},
                "timeoutSeconds": 30
            }},
            "prices": [{"model": "scripted", "inputUSDPerMillion": "1.00", "outputUSDPerMillion": "2.00"}],
            "search": {"searchEngineRef": {"name": "default"}},
            "fetch": {"allowedHosts": [host], "respectRobots": false, "politenessDelayMillis": 0, "perHostConcurrency": 8}
        }
    })
}

/// Runs `kubectl apply -f -` with `doc` (JSON is YAML) in `namespace`.
fn kubectl_apply(node: &Node, namespace: &str, doc: &serde_json::Value) {
    let path = node.dir().join(format!(
        "apply-{}.json",
        doc["metadata"]["name"].as_str().unwrap_or("doc")
    ));
    std::fs::write(&path, doc.to_string()).unwrap();
    let (ok, out, err) = node.run(
        "kubectl",
        &["-n", namespace, "apply", "-f", path.to_str().unwrap()],
    );
    assert!(ok, "kubectl apply {doc}: {out}{err}");
}

/// Runs one README `kubectl` command (its words after `kubectl`), failing with its output.
fn kubectl(node: &Node, words: &[String]) -> String {
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let (ok, out, err) = node.run("kubectl", &args);
    assert!(ok, "kubectl {args:?}: {out}{err}");
    out
}

async fn wait_phase(
    node: &Node,
    runs: &Api<ResearchRun>,
    name: &str,
    timeout: Duration,
    done: impl Fn(&ResearchRun) -> bool,
) -> ResearchRun {
    match wait_for(
        &format!("run {name}"),
        timeout,
        || async { runs.get_opt(name).await.ok().flatten() },
        done,
    )
    .await
    {
        Ok(run) => run,
        Err(e) => panic!(
            "{e}\n{}\n{}",
            node.diagnostics(NS),
            node.diagnostics("default")
        ),
    }
}

/// The report ConfigMaps of `run` in `namespace` (the run's own: owner reference).
async fn reports_of(node: &Node, namespace: &str, run: &str) -> Vec<ConfigMap> {
    let cms: Api<ConfigMap> = Api::namespaced(node.client(), namespace);
    cms.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|cm| {
            cm.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "ResearchRun" && o.name == run)
                && cm
                    .data
                    .as_ref()
                    .is_some_and(|d| d.contains_key("report.md"))
        })
        .collect()
}

/// A SearchEngine from Debian's searx answers JSON searches inside the cluster by its Service's
/// name; the README's first run (quick) and a deep run complete in Pods against it and the
/// scripted model on the node address; the operator Pod deleted mid-run is replaced and the run
/// finishes with one report; deleting runs leaves their ConfigMaps to the garbage collector; a
/// namespace holding runs and schedules is deleted completely; the operator's console, reached
/// through its Service in the headless browser, signs a token in and renders the quick run's report.
#[tokio::test]
#[ignore = "needs a node and chromium and chromium-driver (root, containerd: scripts/install-node-deps.sh, QUARRY_NODE_SH; scripts/install-test-deps.sh)"]
async fn searchengine_and_research_runs_work_in_pods_through_the_readme_install() {
    let started = std::time::Instant::now();
    let images = build_images().expect("images");
    let node = Node::up().await.expect("node");
    node.import(&images.quarry.archive).expect("import quarry");
    node.import(&images.searx.archive).expect("import searx");
    node.import(&images.redis.archive).expect("import redis");
    let web = start_web().await;
    let run_quick: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(
            quarry_e2e::kube_tools::repo_root().join("deploy/examples/run-quick.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let quick_query = run_quick["spec"]["query"].as_str().unwrap().to_owned();
    let model = ScriptedModel::start_on(model_script(&web, &quick_query), on_node(), None)
        .await
        .expect("model server");
    let model_url = model.base_url();
    let host = quarry_e2e::node::NODE_IP.to_string();
    let s3 = quarry_e2e::s3_server::S3Server::start_on(quarry_e2e::node::NODE_IP)
        .await
        .expect("moto");

    // The README's install, with the search-engine image allowed and the node address (model,
    // pages) exempt from the egress guard: both are chart values a user sets the same way.
    let searx_repository = images.searx.repository().to_owned();
    let allowed =
        format!("searchEngine.allowedImages={{docker.io/searxng/searxng,{searx_repository}}}");
    let exempt = format!("operator.egressExemptHosts={{{host}}}");
    helm_install(
        &node,
        &images,
        &["searchEngine.create=false", &allowed, &exempt],
    );
    eprintln!("helm install done at {:?}", started.elapsed());

    // The README's first-run commands, with the scripted model's key and host.
    let commands = readme_install_commands().unwrap();
    let mut secret = readme_command(&commands, &["kubectl", "create", "secret"]).unwrap();
    let last = secret.len() - 1;
    secret[last] = "--from-literal=apiKey=sk-node-not-a-real-key".into();
    kubectl(&node, &secret);
    kubectl(
        &node,
        &readme_command(&commands, &["kubectl", "label", "secret"]).unwrap(),
    );
    let mut annotate = readme_command(&commands, &["kubectl", "annotate", "secret"]).unwrap();
    let last = annotate.len() - 1;
    assert_eq!(annotate[last], "quarry.dev/credential-hosts=api.openai.com");
    annotate[last] = format!("quarry.dev/credential-hosts={host}");
    kubectl(&node, &annotate);
    // The README's profile points at OpenAI; the node's at the scripted model, under the name the
    // README's run uses (`default`).
    assert!(
        readme_command(
            &commands,
            &[
                "kubectl",
                "apply",
                "-f",
                "deploy/examples/profile-openai.yaml"
            ]
        )
        .is_ok()
    );
    kubectl_apply(&node, "default", &node_profile("default", &model_url));

    // The SearchEngine of deploy/examples/searchengine.yaml with the searx image, searching the
    // node's web through a searx `json_engine` (a user's custom engine in settingsOverrides).
    let example: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(
            quarry_e2e::kube_tools::repo_root().join("deploy/examples/searchengine.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut engine = example.clone();
    engine["spec"]["image"] = json!(images.searx.name);
    engine["spec"]["engines"] = json!([]);
    engine["spec"]["settingsOverrides"] = json!({
        "use_default_settings": {"engines": {"keep_only": ["stub"]}},
        "engines": [{
            "name": "stub", "engine": "json_engine", "shortcut": "stub", "categories": "general",
            // searx sends plain-http requests only for engines that enable it.
            "enable_http": true,
            "search_url": format!("{web}/search?q={{query}}"), "paging": false,
            "results_query": "results", "url_query": "url", "title_query": "title", "content_query": "content"
        }],
    });
    kubectl_apply(&node, "default", &engine);

    // The README's run (quick), as it is in deploy/examples: the engine scales up from zero for it.
    let apply_run = readme_command(
        &commands,
        &["kubectl", "apply", "-f", "deploy/examples/run-quick.yaml"],
    )
    .unwrap();
    kubectl(&node, &apply_run);
    let pods: Api<Pod> = Api::namespaced(node.client(), "default");
    let engine_selector = ListParams::default().labels("app.kubernetes.io/name=searxng");
    let engine_pod = wait_for(
        "a Ready search-engine pod",
        Duration::from_secs(120),
        || async {
            pods.list(&engine_selector)
                .await
                .ok()?
                .items
                .into_iter()
                .next()
        },
        ready,
    )
    .await;
    let engine_pod = match engine_pod {
        Ok(p) => p,
        Err(e) => panic!("{e}\n{}", node.diagnostics("default")),
    };
    eprintln!("search engine Ready at {:?}", started.elapsed());
    let spec = serde_json::to_value(engine_pod.spec.as_ref().unwrap()).unwrap();
    assert_eq!(spec["securityContext"]["runAsUser"], 977);
    assert_eq!(
        spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
    // searx really runs as 977 (the image's USER and the operator's runAsUser agree), as /proc on
    // the node shows.
    let engine_status = serde_json::to_value(engine_pod.status.as_ref().unwrap()).unwrap();
    let pid = container_pid(&node, &engine_status);
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let uid_line = proc_status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid_line.split_whitespace().skip(1).all(|u| u == "977"),
        "{uid_line}"
    );

    // A JSON search from inside the cluster by the Service's DNS name (a pod of the same image).
    let url = format!(
        "{}/search?q=taskgroup&format=json",
        quarry_api::SearchEngine::service_url("default", "default")
    );
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "search-probe"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "probe", "image": images.searx.name, "imagePullPolicy": "Never",
                "command": ["/usr/bin/python3", "-c",
                    // Retries a refused connection: kube-proxy programs the Service's rules a
                    // moment after the Pod turns Ready.
                    "import sys, time, urllib.request\nfor attempt in range(30):\n    try:\n        print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())\n        break\n    except OSError as e:\n        if attempt == 29:\n            raise\n        time.sleep(1)\n", &url],
            }],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &probe).await.unwrap();
    let done = wait_for(
        "the search probe pod to finish",
        Duration::from_secs(60),
        || async { pods.get_opt("search-probe").await.ok().flatten() },
        |p: &Pod| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics("default")));
    let (_, logs, _) = node.run("kubectl", &["logs", "search-probe"]);
    assert_eq!(
        done.status.and_then(|s| s.phase).as_deref(),
        Some("Succeeded"),
        "{logs}"
    );
    let answer: serde_json::Value =
        serde_json::from_str(logs.trim()).unwrap_or_else(|e| panic!("{e}: {logs}"));
    let urls: Vec<&str> = answer["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["url"].as_str())
        .collect();
    assert!(
        urls.contains(&format!("{web}/docs/taskgroup.html").as_str()),
        "{answer}"
    );
    eprintln!("in-cluster JSON search answered at {:?}", started.elapsed());

    // The quick run completes; `kubectl get rr` shows it.
    let runs: Api<ResearchRun> = Api::namespaced(node.client(), "default");
    let quick = "python-asyncio-taskgroup";
    let run = wait_phase(
        &node,
        &runs,
        quick,
        Duration::from_secs(180),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(run.phase(), Phase::Completed, "{:?}", run.status);
    assert_eq!(reports_of(&node, "default", quick).await.len(), 1);
    let listed = kubectl(
        &node,
        &readme_command(&commands, &["kubectl", "get", "rr"]).unwrap()[..3],
    );
    assert!(
        listed.contains(quick) && listed.contains("Completed"),
        "{listed}"
    );
    eprintln!("quick run Completed at {:?}", started.elapsed());
    console_shows_the_run(&node, "default", quick, "cancels the remaining tasks").await;

    // A deep run; the operator Pod is deleted while it is Researching (its researchers' batch turns
    // are held 6 s), and the Deployment's new Pod finishes it.
    let deep_run = |name: &str| {
        json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": name},
            "spec": {"query": "How does asyncio.TaskGroup cancel tasks and report their exceptions?",
                     "mode": "deep", "profileRef": "default", "limits": {"maxRounds": 1}}
        })
    };
    let operator_pods: Api<Pod> = Api::namespaced(node.client(), NS);
    let operator_selector = ListParams::default().labels("app.kubernetes.io/component=operator");
    let operator_pod_names = || async {
        operator_pods
            .list(&operator_selector)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect::<Vec<_>>()
    };
    let researching = |r: &ResearchRun| r.phase() == Phase::Researching || r.is_finished();
    kubectl_apply(&node, "default", &deep_run("taskgroup-deep"));
    let at_delete = wait_phase(
        &node,
        &runs,
        "taskgroup-deep",
        Duration::from_secs(120),
        researching,
    )
    .await;
    assert_eq!(
        at_delete.phase(),
        Phase::Researching,
        "{:?}",
        at_delete.status
    );
    let old_name = operator_pod_names().await[0].clone();
    // Planning is finished while the run is Researching: the replacement Pod must not plan again.
    let planned = model.route_requests("planner").len();
    assert_eq!(planned, 1, "planner calls before the deletion");
    let (ok, out, err) = node.run(
        "kubectl",
        &["-n", NS, "delete", "pod", &old_name, "--wait=false"],
    );
    assert!(ok, "{out}{err}");
    let deep = wait_phase(
        &node,
        &runs,
        "taskgroup-deep",
        Duration::from_secs(240),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(deep.phase(), Phase::Completed, "{:?}", deep.status);
    assert!(
        !operator_pod_names().await.contains(&old_name),
        "the deleted pod is still there"
    );
    assert_eq!(
        reports_of(&node, "default", "taskgroup-deep").await.len(),
        1
    );
    // The spend in status is the cost journal's (the new Pod recovered it, and counted the calls
    // it made itself), and the finished planning step was not asked of the model again.
    let spent = quarry_e2e::kube_operator::status_spend_matches_journal(node.client(), &deep)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(spent.total.llm_calls > 0, "{spent:?}");
    assert_eq!(
        model.route_requests("planner").len(),
        planned,
        "the planner was asked again after the operator Pod was deleted"
    );
    // The journal never counts a call the model server did not answer (this run's: every call
    // so far but the quick run's).
    let answered = model
        .recorded()
        .iter()
        .filter(|r| r.answered && r.route.as_deref() != Some("quick"))
        .count() as u64;
    assert!(
        spent.total.llm_calls <= answered,
        "{spent:?} vs {answered} answered"
    );
    eprintln!(
        "deep run Completed across an operator Pod deletion at {:?}",
        started.elapsed()
    );

    // `helm upgrade` with a changed value during another deep run: the Deployment rolls to a new
    // Pod, and the run finishes with one report.
    kubectl_apply(&node, "default", &deep_run("taskgroup-upgrade"));
    let at_upgrade = wait_phase(
        &node,
        &runs,
        "taskgroup-upgrade",
        Duration::from_secs(120),
        researching,
    )
    .await;
    assert_eq!(
        at_upgrade.phase(),
        Phase::Researching,
        "{:?}",
        at_upgrade.status
    );
    let before_upgrade = operator_pod_names().await;
    let (ok, out, err) = node.run(
        "helm",
        &[
            "upgrade",
            "quarry",
            "charts/quarry",
            "-n",
            NS,
            "--reuse-values",
            "--set",
            "operator.logLevel=debug",
        ],
    );
    assert!(ok, "helm upgrade: {out}{err}");
    let upgraded = wait_phase(
        &node,
        &runs,
        "taskgroup-upgrade",
        Duration::from_secs(240),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(upgraded.phase(), Phase::Completed, "{:?}", upgraded.status);
    assert_eq!(
        reports_of(&node, "default", "taskgroup-upgrade")
            .await
            .len(),
        1
    );
    let after_upgrade = wait_for(
        "the upgraded operator Pod alone",
        Duration::from_secs(60),
        || async {
            let pods = operator_pods.list(&operator_selector).await.ok()?.items;
            (pods.len() == 1).then(|| pods.into_iter().next()).flatten()
        },
        ready,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    assert!(!before_upgrade.contains(after_upgrade.metadata.name.as_ref().unwrap()));
    let args = serde_json::to_value(&after_upgrade.spec.as_ref().unwrap().containers[0]).unwrap();
    assert!(args.to_string().contains("debug"), "{args}");
    // The Pod that ran the rest of the run, under the chart's default 1Gi limit: not restarted
    // (no OOM kill), and its peak memory as the kernel counted it.
    let status = serde_json::to_value(after_upgrade.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        status["containerStatuses"][0]["restartCount"], 0,
        "{status}"
    );
    eprintln!(
        "deep run Completed across helm upgrade at {:?}; operator peak memory {}",
        started.elapsed(),
        peak_memory(&node, &status).map_or("unknown".into(), |b| format!("{} MiB", b / (1 << 20)))
    );

    // The search engine served every run without a restart (probes, read-only root, its limit).
    let engine_now = pods
        .get(engine_pod.metadata.name.as_ref().unwrap())
        .await
        .unwrap();
    let engine_status = serde_json::to_value(engine_now.status.as_ref().unwrap()).unwrap();
    assert_eq!(
        engine_status["containerStatuses"][0]["restartCount"], 0,
        "{engine_status}"
    );

    // Deleting the runs: their ConfigMaps go with them (the real garbage collector, by owner).
    let cms: Api<ConfigMap> = Api::namespaced(node.client(), "default");
    let owned_by = |cm: &ConfigMap, run: &str| {
        cm.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "ResearchRun" && o.name == run)
    };
    let before = cms.list(&ListParams::default()).await.unwrap().items;
    let owned = before
        .iter()
        .filter(|cm| {
            ["taskgroup-deep", "taskgroup-upgrade", quick]
                .iter()
                .any(|r| owned_by(cm, r))
        })
        .count();
    assert!(owned >= 2, "{before:?}");
    for name in [quick, "taskgroup-deep", "taskgroup-upgrade"] {
        runs.delete(name, &Default::default()).await.unwrap();
    }
    wait_for(
        "the runs' ConfigMaps to be collected",
        Duration::from_secs(90),
        || async {
            let left = cms.list(&ListParams::default()).await.ok()?.items;
            Some(
                left.iter()
                    .filter(|cm| {
                        ["taskgroup-deep", "taskgroup-upgrade", quick]
                            .iter()
                            .any(|r| owned_by(cm, r))
                    })
                    .count(),
            )
        },
        |n| *n == 0,
    )
    .await
    .unwrap();
    eprintln!("{owned} ConfigMaps collected at {:?}", started.elapsed());

    // TTL expiry: the README's run with `ttlSecondsAfterFinished: 3` is deleted by the operator
    // after it completes, and the garbage collector takes its ConfigMaps.
    let mut ttl_run = run_quick.clone();
    ttl_run["metadata"]["name"] = json!("ttl-quick");
    ttl_run["spec"]["ttlSecondsAfterFinished"] = json!(3);
    kubectl_apply(&node, "default", &ttl_run);
    let ttl_done = wait_phase(
        &node,
        &runs,
        "ttl-quick",
        Duration::from_secs(120),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(ttl_done.phase(), Phase::Completed, "{:?}", ttl_done.status);
    assert_eq!(reports_of(&node, "default", "ttl-quick").await.len(), 1);
    wait_for(
        "the expired run and its ConfigMaps to be gone",
        Duration::from_secs(90),
        || async {
            let run = runs.get_opt("ttl-quick").await.ok()?;
            let left = cms.list(&ListParams::default()).await.ok()?.items;
            Some(run.is_none() && !left.iter().any(|cm| owned_by(cm, "ttl-quick")))
        },
        |gone| *gone,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    eprintln!(
        "TTL-expired run and its ConfigMaps gone at {:?}",
        started.elapsed()
    );

    // A namespace holding a finished run and a schedule: deleted completely.
    let doomed = "doomed";
    let (ok, out, err) = node.run("kubectl", &["create", "namespace", doomed]);
    assert!(ok, "{out}{err}");
    kubectl(
        &node,
        &[
            vec!["kubectl".to_owned(), "-n".into(), doomed.into()],
            secret[1..].to_vec(),
        ]
        .concat(),
    );
    kubectl(
        &node,
        &[
            vec!["kubectl".to_owned(), "-n".into(), doomed.into()],
            readme_command(&commands, &["kubectl", "label", "secret"]).unwrap()[1..].to_vec(),
        ]
        .concat(),
    );
    kubectl(
        &node,
        &[
            vec!["kubectl".to_owned(), "-n".into(), doomed.into()],
            annotate[1..].to_vec(),
        ]
        .concat(),
    );
    kubectl_apply(&node, doomed, &node_profile("default", &model_url));
    kubectl_apply(&node, doomed, &engine);
    let mut doomed_run = run_quick.clone();
    doomed_run["metadata"]["name"] = json!("doomed-quick");
    kubectl_apply(&node, doomed, &doomed_run);
    let s3_secret = json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s3-creds", "labels": {"quarry.dev/credential": "true"},
                     "annotations": {"quarry.dev/credential-hosts": host}},
        "stringData": {"aws_access_key_id": s3.access_key_id, "aws_secret_access_key": s3.secret_access_key}
    });
    kubectl_apply(&node, doomed, &s3_secret);
    let mut s3_profile = node_profile("s3", &model_url);
    s3_profile["spec"]["objectStore"] = json!({
        "url": format!("s3://{}/quarry", quarry_e2e::s3_server::BUCKET), "endpoint": s3.endpoint(),
        "region": "us-east-1", "allowHttp": true, "credentialsSecretRef": {"name": "s3-creds"}
    });
    kubectl_apply(&node, doomed, &s3_profile);
    let mut s3_run = run_quick.clone();
    s3_run["metadata"]["name"] = json!("doomed-s3");
    s3_run["spec"]["profileRef"] = json!("s3");
    s3_run["spec"]["report"] = json!({"kind": "objectStore"});
    kubectl_apply(&node, doomed, &s3_run);
    let schedule = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchSchedule",
        "metadata": {"name": "weekly"},
        "spec": {"schedule": "0 7 * * 1", "runTemplate": {"spec": {"query": "What changed in asyncio.TaskGroup?", "mode": "quick", "profileRef": "default"}}}
    });
    kubectl_apply(&node, doomed, &schedule);
    let doomed_runs: Api<ResearchRun> = Api::namespaced(node.client(), doomed);
    let finished = wait_phase(
        &node,
        &doomed_runs,
        "doomed-quick",
        Duration::from_secs(180),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(finished.phase(), Phase::Completed, "{:?}", finished.status);
    // A run whose report lives in an object store (moto on the node address, as S3): deleting it
    // deletes its objects through its finalizer.
    let s3_done = wait_phase(
        &node,
        &doomed_runs,
        "doomed-s3",
        Duration::from_secs(180),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(s3_done.phase(), Phase::Completed, "{:?}", s3_done.status);
    let object_url = s3_done
        .status
        .clone()
        .unwrap_or_default()
        .report
        .and_then(|r| r.object_url)
        .unwrap_or_default();
    assert!(
        object_url.starts_with(&format!(
            "s3://{}/quarry/{doomed}/doomed-s3/",
            quarry_e2e::s3_server::BUCKET
        )),
        "{:?}",
        s3_done.status
    );
    assert!(
        s3_done
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "quarry.dev/artifacts"),
        "{:?}",
        s3_done.metadata.finalizers
    );
    let bucket = s3_objects(&s3, doomed, &s3_done);
    let objects = bucket.list().await.unwrap();
    assert!(!objects.is_empty(), "no objects for doomed-s3");
    let deleting = std::time::Instant::now();
    let (ok, out, err) = node.run("kubectl", &["delete", "namespace", doomed, "--wait=false"]);
    assert!(ok, "{out}{err}");
    let namespaces: Api<Namespace> = Api::all(node.client());
    let gone = wait_for(
        "the namespace to be gone",
        Duration::from_secs(120),
        || async { Some(namespaces.get_opt(doomed).await.ok()?.is_none()) },
        |gone| *gone,
    )
    .await;
    if let Err(e) = gone {
        let (_, left, _) = node.run("kubectl", &["get", "namespace", doomed, "-o", "yaml"]);
        panic!("{e}\n{left}\n{}", node.diagnostics(doomed));
    }
    // The object-store run went with its namespace, its finalizer having deleted its objects,
    // though the namespace controller deletes its profile and credentials Secret at the same
    // time (the operator that launched it reaches the bucket with the store it launched it
    // with; kube_e2e's object_store_runs_never_hold_a_namespace_deletion covers the rest).
    let left = bucket.list().await.unwrap();
    assert!(
        left.is_empty(),
        "objects left after the namespace was deleted: {left:?} (were {objects:?})"
    );
    eprintln!(
        "namespace deleted in {:?}, at {:?}; model calls: {}",
        deleting.elapsed(),
        started.elapsed(),
        model.request_count()
    );

    // Workers: Redis as deploy/kustomize/overlays/redis runs it (the chart deploys none), then
    // `helm upgrade` with workers.enabled and redis.url; a deep run's two researchers run on the two
    // worker Pods (one task each), one Pod is deleted mid-run, and the run completes once.
    let redis_docs: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(
        &std::fs::read_to_string(
            quarry_e2e::kube_tools::repo_root().join("deploy/kustomize/overlays/redis/redis.yaml"),
        )
        .unwrap(),
    )
    .map(|d| serde::Deserialize::deserialize(d).unwrap())
    .collect();
    for mut doc in redis_docs {
        if doc["kind"] == "Deployment" {
            let container = &mut doc["spec"]["template"]["spec"]["containers"][0];
            container["image"] = json!(images.redis.name);
            container["imagePullPolicy"] = json!("Never");
        }
        kubectl_apply(&node, NS, &doc);
    }
    let (ok, out, err) = node.run(
        "helm",
        &[
            "upgrade",
            "quarry",
            "charts/quarry",
            "-n",
            NS,
            "--reuse-values",
            "--set",
            "workers.enabled=true",
            "--set",
            "workers.concurrency=1",
            "--set",
            "redis.url=redis://quarry-redis.quarry-system.svc.cluster.local:6379/0",
        ],
    );
    assert!(ok, "helm upgrade with workers: {out}{err}");
    let worker_selector = ListParams::default().labels("app.kubernetes.io/component=worker");
    let all_ready = |pods: &Vec<Pod>| pods.len() == 2 && pods.iter().all(ready);
    wait_for(
        "two Ready worker Pods",
        Duration::from_secs(120),
        || async { Some(operator_pods.list(&worker_selector).await.ok()?.items) },
        all_ready,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    wait_for(
        "the operator Pod with --workers alone and Ready",
        Duration::from_secs(120),
        || async {
            let pods = operator_pods.list(&operator_selector).await.ok()?.items;
            (pods.len() == 1).then(|| pods.into_iter().next()).flatten()
        },
        |p: &Pod| {
            ready(p)
                && serde_json::to_string(&p.spec)
                    .unwrap()
                    .contains("--workers")
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    eprintln!(
        "Redis, two workers and the operator with --workers Ready at {:?}",
        started.elapsed()
    );
    // Worker Pods reach no API: no token is mounted (the run's keys come sealed from the operator).
    for pod in operator_pods.list(&worker_selector).await.unwrap().items {
        let spec = serde_json::to_value(&pod.spec).unwrap();
        let text = spec.to_string();
        assert_eq!(spec["automountServiceAccountToken"], false, "{text}");
        assert!(
            !text.contains("serviceAccountToken")
                && !text.contains("/var/run/secrets/kubernetes.io"),
            "a token reached worker Pod {:?}: {text}",
            pod.metadata.name
        );
    }

    kubectl_apply(&node, "default", &deep_run("taskgroup-workers"));
    let taken = |pod: Pod| async move {
        let ip = pod.status.and_then(|s| s.pod_ip)?;
        let text = reqwest::get(format!("http://{ip}:8080/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("quarry_worker_tasks_taken_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let per_worker = wait_for(
        "each worker Pod running one of the run's researchers",
        Duration::from_secs(120),
        || async {
            let pods = operator_pods.list(&worker_selector).await.ok()?.items;
            let mut counts = Vec::new();
            for pod in pods {
                let name = pod.metadata.name.clone()?;
                counts.push((name, taken(pod).await.unwrap_or(0.0)));
            }
            Some(counts)
        },
        |counts: &Vec<(String, f64)>| counts.len() == 2 && counts.iter().all(|(_, n)| *n == 1.0),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    // Mid-run: both researchers are on workers and the run is not finished (its status phase may
    // still say Pending: the workers' progress reaches status on the reducer's next write).
    let mid = runs.get("taskgroup-workers").await.unwrap();
    assert!(!mid.is_finished(), "{:?}", mid.status);
    eprintln!(
        "workers took the run's tasks while its status said {:?}",
        mid.phase()
    );
    // One worker is killed without a drain (SIGKILL from the host, as the OOM killer or a lost
    // node would): its task is taken over once the visibility timeout (chart default 30s) passes
    // without a heartbeat, not after minutes. The other worker Pod is deleted: it drains.
    let killed_worker = per_worker[0].0.clone();
    let killed_status = serde_json::to_value(
        operator_pods
            .get(&killed_worker)
            .await
            .unwrap()
            .status
            .unwrap(),
    )
    .unwrap();
    let pid = container_pid(&node, &killed_status);
    let killed_at = std::time::Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid])
        .status()
        .unwrap();
    assert!(killed.success(), "kill -KILL {pid}: {killed}");
    let deleted_worker = per_worker[1].0.clone();
    let (ok, out, err) = node.run(
        "kubectl",
        &["-n", NS, "delete", "pod", &deleted_worker, "--wait=false"],
    );
    assert!(ok, "{out}{err}");
    let reclaimed = |pod: Pod| async move {
        let ip = pod.status.and_then(|s| s.pod_ip)?;
        let text = reqwest::get(format!("http://{ip}:8080/metrics"))
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("quarry_worker_tasks_reclaimed_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    wait_for(
        "a worker to take over the killed worker's task",
        Duration::from_secs(75),
        || async {
            let mut total = 0.0;
            for pod in operator_pods.list(&worker_selector).await.ok()?.items {
                total += reclaimed(pod).await.unwrap_or(0.0);
            }
            Some(total)
        },
        |total: &f64| *total >= 1.0,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", node.diagnostics(NS)));
    eprintln!(
        "the task of the SIGKILLed worker {killed_worker} was taken over {:?} after the kill",
        killed_at.elapsed()
    );
    let spread = wait_phase(
        &node,
        &runs,
        "taskgroup-workers",
        Duration::from_secs(240),
        ResearchRun::is_finished,
    )
    .await;
    assert_eq!(spread.phase(), Phase::Completed, "{:?}", spread.status);
    assert_eq!(
        reports_of(&node, "default", "taskgroup-workers")
            .await
            .len(),
        1
    );
    quarry_e2e::kube_operator::status_spend_matches_journal(node.client(), &spread)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let workers_now: Vec<String> = operator_pods
        .list(&worker_selector)
        .await
        .unwrap()
        .items
        .into_iter()
        // A deleted Pod is listed until its grace period ends; only live ones count.
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    assert!(!workers_now.contains(&deleted_worker), "{workers_now:?}");
    eprintln!(
        "deep run over workers {per_worker:?} Completed across the deletion of {deleted_worker} at {:?}",
        started.elapsed()
    );
}

/// The objects of `run` in the node test's bucket, read with the operator's own store.
fn s3_objects(
    s3: &quarry_e2e::s3_server::S3Server,
    namespace: &str,
    run: &ResearchRun,
) -> quarry_operator::store::object::ObjectArtifactStore {
    use quarry_operator::store::object::{Bucket, ObjectStoreConfig, RunLayout, SecretValue};
    let config = ObjectStoreConfig {
        url: format!("s3://{}/quarry", quarry_e2e::s3_server::BUCKET),
        endpoint: Some(s3.endpoint()),
        region: Some("us-east-1".into()),
        allow_http: true,
        options: vec![
            (
                "aws_access_key_id".into(),
                SecretValue::new(&s3.access_key_id),
            ),
            (
                "aws_secret_access_key".into(),
                SecretValue::new(&s3.secret_access_key),
            ),
        ],
        from_env: false,
        origin: "test".into(),
    };
    Bucket::connect(&config).unwrap().for_run(&RunLayout {
        prefix: None,
        namespace: namespace.to_owned(),
        run: run.metadata.name.clone().unwrap(),
        uid: run.metadata.uid.clone().unwrap_or_default(),
        query: run.spec.query.clone(),
    })
}

/// The peak resident memory (bytes) of the pod's first container's process: `VmHWM` in its
/// `/proc/PID/status` on the node.
fn peak_memory(node: &Node, status: &serde_json::Value) -> Option<u64> {
    let pid = container_pid(node, status);
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Forwards connections to a free port of `listen`'s address to `target`; returns where it
/// listens. The browser opens the console on loopback through one: the sign-in cookie is
/// `Secure`, which chromium keeps over plain HTTP only on loopback (on the Service's cluster IP it
/// would drop it and never be signed in). The Pods reach the host's real model through another,
/// on the node address.
async fn forward(listen: std::net::IpAddr, target: std::net::SocketAddr) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind((listen, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    addr
}

/// A ServiceAccount `name` in `namespace` bound to the chart's `roles`, and a token for it from
/// `kubectl create token` (what the console's sign-in page tells people to paste).
fn service_account_token(node: &Node, namespace: &str, name: &str, roles: &[&str]) -> String {
    let (ok, out, err) = node.run(
        "kubectl",
        &["-n", namespace, "create", "serviceaccount", name],
    );
    assert!(ok, "{out}{err}");
    for role in roles {
        let binding = format!("{name}-{role}");
        let sa = format!("{namespace}:{name}");
        let clusterrole = format!("--clusterrole={role}");
        let serviceaccount = format!("--serviceaccount={sa}");
        let (ok, out, err) = node.run(
            "kubectl",
            &[
                "-n",
                namespace,
                "create",
                "rolebinding",
                &binding,
                &clusterrole,
                &serviceaccount,
            ],
        );
        assert!(ok, "{out}{err}");
    }
    let (ok, out, err) = node.run("kubectl", &["-n", namespace, "create", "token", name]);
    assert!(ok, "{out}{err}");
    out.trim().to_owned()
}

/// The operator's console (`console.enabled`, the chart default) through the chart's Service,
/// in the headless browser: a token of a ServiceAccount bound to quarry-edit (and quarry-view,
/// for the report ConfigMap) signs in, the list shows `run` of `namespace`, and its page renders
/// the report containing `expected`.
async fn console_shows_the_run(node: &Node, namespace: &str, run: &str, expected: &str) {
    use fantoccini::Locator;
    let started = std::time::Instant::now();
    let token = service_account_token(
        node,
        namespace,
        "console-editor",
        &["quarry-edit", "quarry-view"],
    );
    let services: Api<Service> = Api::namespaced(node.client(), NS);
    let cluster_ip: std::net::IpAddr = services
        .get("quarry")
        .await
        .unwrap()
        .spec
        .unwrap()
        .cluster_ip
        .unwrap()
        .parse()
        .unwrap();
    let local = forward(
        std::net::Ipv4Addr::LOCALHOST.into(),
        (cluster_ip, 8080).into(),
    )
    .await;
    let base = format!("http://localhost:{}", local.port());
    let shots = node.dir().join("console-screenshots");
    let b = quarry_e2e::browser::Browser::start(&shots).await;
    // Signed out, the console sends the browser to its sign-in page.
    b.client
        .goto(&format!("{base}/console?namespace={namespace}"))
        .await
        .unwrap();
    let url = b.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/console/login", "{url}");
    let form = b
        .client
        .form(Locator::Css("form[action='/console/login']"))
        .await
        .unwrap();
    form.set_by_name("token", &token).await.unwrap();
    form.submit().await.unwrap();
    // A token the API server accepts leaves the sign-in page (a refused one stays on it, with
    // the reason); the submit does not wait for that navigation.
    let left = wait_for(
        "the console to sign the browser in",
        Duration::from_secs(30),
        || async { Some(b.client.current_url().await.ok()?.path().to_owned()) },
        |path: &String| path != "/console/login",
    )
    .await;
    if let Err(e) = left {
        b.screenshot("sign-in").await;
        panic!("{e}: {:?}", b.client.source().await);
    }
    // The cookie the sign-in set is what signs the next pages in.
    b.client
        .goto(&format!("{base}/console?namespace={namespace}"))
        .await
        .unwrap();
    let page = b.client.source().await.unwrap();
    assert!(
        page.contains(&format!(
            "signed in as system:serviceaccount:{namespace}:console-editor"
        )),
        "{page}"
    );
    let row = b
        .client
        .find(Locator::Css(&format!("tr[data-run='{namespace}/{run}']")))
        .await
        .unwrap_or_else(|e| panic!("{e}: no row for {run}"))
        .text()
        .await
        .unwrap();
    assert!(row.contains(run), "{row}");
    b.screenshot("runs").await;
    b.client
        .find(Locator::LinkText(run))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let report = wait_for(
        "the run's report on its page",
        Duration::from_secs(30),
        || async {
            b.client
                .find(Locator::Css("article.report"))
                .await
                .ok()?
                .text()
                .await
                .ok()
        },
        |text: &String| text.contains(expected),
    )
    .await;
    b.screenshot("report").await;
    let report = report.unwrap_or_else(|e| panic!("{e} (screenshots in {})", shots.display()));
    eprintln!(
        "console through the Service: signed in, list and report in {:?} ({} report chars)",
        started.elapsed(),
        report.len()
    );
    b.close().await;
}

/// The failure reasons the real-model run may end with: what the 0.5B model may honestly do
/// (output the engine cannot use, pages it judges to not answer, or running out of its time on
/// a busy 2-core machine). Not `ModelUnreachable`: reaching the host's model from the Pod is what
/// this test proves.
const REAL_MODEL_HONEST_REASONS: [&str; 5] = [
    reasons::MODEL_OUTPUT_INVALID,
    reasons::MODEL_REJECTED,
    reasons::NO_EVIDENCE,
    reasons::ALL_RESEARCHERS_FAILED,
    reasons::TIME_LIMIT,
];

/// A quick run in the operator Pod with the real 0.5B model (tools/llm-server on the node address,
/// temperature 0, the JSON action protocol) over the node's two pages: it completes with a report
/// citing only those pages, or fails with an honest reason in its status; either way the model
/// answered the Pod's calls.
#[tokio::test]
#[ignore = "needs a node and the real model (root, containerd: scripts/install-node-deps.sh, QUARRY_NODE_SH; scripts/install-real-model.sh)"]
async fn a_quick_run_in_a_pod_with_the_real_model_completes_or_fails_honestly() {
    use quarry_e2e::real_model::{MODEL_NAME, RealModel, RealModelConfig};
    let config = RealModelConfig::from_env();
    if let Err(e) = config.check_installed() {
        panic!("{e}");
    }
    let started = std::time::Instant::now();
    let images = build_images().expect("images");
    // The model loads (on loopback) while the node starts: both take tens of seconds, and the
    // node address the Pods reach it at exists only once the node is up.
    let (model, node) = tokio::join!(RealModel::start_with(config), Node::up());
    let node = node.expect("node");
    let model = model.expect("real model server");
    let model_on_node = forward(
        quarry_e2e::node::NODE_IP.into(),
        ([127, 0, 0, 1], model.port()).into(),
    )
    .await;
    node.import(&images.quarry.archive).expect("import quarry");
    let web = start_web().await;
    let host = quarry_e2e::node::NODE_IP.to_string();
    eprintln!("node, model and pages up at {:?}", started.elapsed());
    let exempt = format!("operator.egressExemptHosts={{{host}}}");
    helm_install(&node, &images, &["searchEngine.create=false", &exempt]);
    // The profile of the local demo (tests/src/profiles.rs `demo_profile`) with the node's
    // addresses: no SearchEngine Pod, the pages' own `/search`.
    let profile = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
        "metadata": {"name": "real"},
        "spec": {
            "models": {"primary": {
                "baseURL": format!("http://{model_on_node}/v1"), "model": MODEL_NAME,
                "toolMode": "jsonAction", "jsonMode": true, "temperature": 0,
                "timeoutSeconds": 150, "contextWindow": 8192, "maxOutputTokens": 400
            }},
            "search": {"url": web},
            "fetch": {"allowedHosts": [host], "respectRobots": false, "politenessDelayMillis": 0,
                      "perHostConcurrency": 8, "pageCharsForModel": 1500}
        }
    });
    kubectl_apply(&node, "default", &profile);
    let name = "real-model-quick";
    let run = json!({
        "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
        "metadata": {"name": name},
        "spec": {"query": "What does asyncio.TaskGroup do with the remaining tasks when a child task raises an exception?",
                 "mode": "quick", "profileRef": "real",
                 "limits": {"maxConcurrentResearchers": 1, "timeout": "150s"}}
    });
    kubectl_apply(&node, "default", &run);
    let applied = std::time::Instant::now();
    let runs: Api<ResearchRun> = Api::namespaced(node.client(), "default");
    let done = wait_phase(
        &node,
        &runs,
        name,
        Duration::from_secs(240),
        ResearchRun::is_finished,
    )
    .await;
    let model_log = model.stderr_tail();
    eprintln!(
        "real-model run {:?} {:?} after {:?} (test at {:?}): {:?}\nmodel server:\n{model_log}",
        done.phase(),
        done.status.as_ref().and_then(|s| s.message.clone()),
        applied.elapsed(),
        started.elapsed(),
        done.status.as_ref().and_then(|s| s.usage.clone()),
    );
    // The Pod reached the host's model, and the model answered: a quick run whose model is
    // unreachable still completes, with a report made without it (seen on the node with the
    // profile pointing at a closed port: `Completed`, 0 model calls), so `Completed` alone proves
    // nothing here.
    let calls = done
        .status
        .as_ref()
        .and_then(|s| s.usage.as_ref())
        .map_or(0, |u| u.llm_calls);
    assert!(calls >= 1, "the run made no model call: {:?}", done.status);
    assert!(
        model_log.contains("quarry-llm-server: completion")
            || model_log.contains("quarry-llm-server: stream"),
        "the model server answered no call from the Pod:\n{model_log}"
    );
    let status = serde_json::to_string(&done.status).unwrap();
    match done.phase() {
        Phase::Completed => {
            let reports = reports_of(&node, "default", name).await;
            assert_eq!(reports.len(), 1);
            let report = reports[0].data.as_ref().unwrap()["report.md"].clone();
            eprintln!("report:\n{report}");
            let body = report.split("\n---\n").next().unwrap();
            for word in body.split(|c: char| {
                c.is_whitespace() || matches!(c, '(' | ')' | '<' | '>' | '[' | ']')
            }) {
                if word.starts_with("http://") || word.starts_with("https://") {
                    let url = word.trim_end_matches(['.', ',', ';']);
                    assert!(
                        url.starts_with(&format!("{web}/docs/")),
                        "the report cites {url}, which is not one of the node's pages"
                    );
                }
            }
        }
        Phase::Failed => {
            assert!(
                REAL_MODEL_HONEST_REASONS
                    .iter()
                    .any(|r| status.contains(&format!("\"reason\":\"{r}\""))),
                "a failed run must say why with a known reason: {status}"
            );
            assert!(
                done.status
                    .as_ref()
                    .and_then(|s| s.message.as_deref())
                    .is_some_and(|m| !m.is_empty()),
                "{status}"
            );
            // NoEvidence stores its honest "unable to research" report; the others store none.
            if !status.contains(&format!("\"reason\":\"{}\"", reasons::NO_EVIDENCE)) {
                assert!(reports_of(&node, "default", name).await.is_empty());
            }
        }
        other => panic!("run ended {other:?}: {status}"),
    }
}
