//! Quarry installed on a real one-node cluster the way the README tells users: the image built
//! from the repository's Dockerfile (scripts/build-images.sh), `helm install` of charts/quarry,
//! and pods that really run under the chart's probes, securityContext and limits.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use kube::api::{ListParams, PostParams};
use quarry_e2e::kube_operator::wait_for;
use quarry_e2e::node::{Node, build_image, resolve};
use serde_json::json;

const NS: &str = "quarry-system";

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
    let image = build_image().expect("image");
    let node = Node::up().await.expect("node");
    node.import(&image.archive).expect("import");

    // The README's command, with the image overridden to the imported one (never pulled). The
    // default SearchEngine would need SearXNG's public image: left out here.
    let started = std::time::Instant::now();
    let repository = format!("image.repository={}", image.repository());
    let tag = format!("image.tag={}", image.tag());
    let (ok, out, err) = node.run(
        "helm",
        &[
            "install",
            "quarry",
            "charts/quarry",
            "-n",
            NS,
            "--create-namespace",
            "--set",
            &repository,
            "--set",
            &tag,
            "--set",
            "image.pullPolicy=Never",
            "--set",
            "searchEngine.create=false",
        ],
    );
    assert!(ok, "helm install: {out}{err}");

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
    let metrics = reqwest::get(format!("http://{cluster_ip}:8080/metrics"))
        .await
        .expect("GET /metrics")
        .text()
        .await
        .unwrap();
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
