//! The operator as it is shipped, on the test control plane: the chart's RBAC rendered by `helm
//! template` and applied, `quarry operator` processes authenticated with a ServiceAccount token
//! minted by TokenRequest (never as admin), and readings of the audit log.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::core::{DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::control_plane::ControlPlane;

const FIELD_MANAGER: &str = "quarry-e2e";

/// The chart's release namespace in these tests (where its ServiceAccount and Lease live).
pub const RELEASE_NAMESPACE: &str = "quarry-system";

/// Server-side applies any object (kind and version from its own `apiVersion`/`kind`), in
/// `namespace` when it is namespaced.
pub async fn apply(client: &Client, namespace: Option<&str>, body: &Value) -> Result<(), String> {
    let (group, version) = match body["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            body["apiVersion"].as_str().unwrap_or_default().to_string(),
        ),
    };
    let kind = body["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(&group, &version, kind);
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovering {kind}: {e}"))?;
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match (caps.scope, namespace) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        (kube::discovery::Scope::Namespaced, None) => {
            let ns = body["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        (kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await
    .map_err(|e| format!("applying {kind} {name}: {e}"))?;
    Ok(())
}

/// `helm template` of `charts/quarry` as the release `quarry` in [`RELEASE_NAMESPACE`], for this
/// 1.25 server, CRDs left out (the control plane installed them), with `sets` (`--set` values).
pub fn render_chart(sets: &[&str]) -> Result<Vec<Value>, String> {
    let helm = crate::kube_tools::tool("helm");
    let chart = crate::kube_tools::repo_root().join("charts/quarry");
    let mut args: Vec<String> = vec![
        "template".into(),
        "quarry".into(),
        chart.display().to_string(),
        "--namespace".into(),
        RELEASE_NAMESPACE.into(),
        "--kube-version".into(),
        "1.25.0".into(),
        "--set".into(),
        "crds.enabled=false".into(),
    ];
    for set in sets {
        args.push("--set".into());
        args.push((*set).into());
    }
    let out = std::process::Command::new(&helm)
        .args(&args)
        .output()
        .map_err(|e| format!("running helm: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "helm template failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value: Value = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if value.is_object() {
            docs.push(value);
        }
    }
    Ok(docs)
}

/// The RBAC kinds of a render.
pub fn rbac_objects(docs: &[Value]) -> Vec<Value> {
    const KINDS: [&str; 5] = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ];
    docs.iter()
        .filter(|d| KINDS.contains(&d["kind"].as_str().unwrap_or_default()))
        .cloned()
        .collect()
}

/// Creates `namespace` (admin) if it does not exist.
pub async fn ensure_namespace(client: &Client, namespace: &str) -> Result<(), String> {
    apply(
        client,
        None,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
    )
    .await
}

/// Applies the chart's RBAC (rendered with `sets`) as admin, mints a token for its
/// ServiceAccount and writes a kubeconfig that uses it; returns that kubeconfig's path.
pub async fn install_chart_rbac(plane: &ControlPlane, sets: &[&str]) -> Result<PathBuf, String> {
    let client = plane.client();
    ensure_namespace(&client, RELEASE_NAMESPACE).await?;
    let docs = render_chart(sets)?;
    let rbac = rbac_objects(&docs);
    if rbac.is_empty() {
        return Err("the chart rendered no RBAC".into());
    }
    for object in &rbac {
        if let Some(ns) = object["metadata"]["namespace"].as_str() {
            ensure_namespace(&client, ns).await?;
        }
        apply(&client, object["metadata"]["namespace"].as_str(), object).await?;
    }
    let token = plane
        .service_account_token(RELEASE_NAMESPACE, "quarry")
        .await?;
    let path = plane.scratch().join("operator-sa.kubeconfig");
    plane.token_kubeconfig(&token, RELEASE_NAMESPACE, &path)?;
    Ok(path)
}

/// A kubeconfig for a new ServiceAccount `namespace/name` standing for a person, bound in
/// `namespace` to each ClusterRole of `roles`.
pub async fn user_kubeconfig(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
    roles: &[&str],
) -> Result<PathBuf, String> {
    let client = plane.client();
    apply(
        &client,
        Some(namespace),
        &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}}),
    )
    .await?;
    for role in roles {
        apply(
            &client,
            Some(namespace),
            &json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": format!("{name}-{role}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }),
        )
        .await?;
    }
    let token = plane.service_account_token(namespace, name).await?;
    let path = plane.scratch().join(format!("{name}.kubeconfig"));
    plane.token_kubeconfig(&token, namespace, &path)?;
    Ok(path)
}

/// The audit username of ServiceAccount `namespace/name`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// One API request from the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The authenticated user.
    pub user: String,
    /// `get`, `list`, `watch`, `create`, `patch`, `update`, `delete`...
    pub verb: String,
    /// `configmaps`, `researchruns`, `leases`...
    pub resource: String,
    /// `status`, `token`... or empty.
    pub subresource: String,
    /// The object's namespace, or empty.
    pub namespace: String,
    /// The object's name, or empty for collections.
    pub name: String,
    /// The HTTP status of the answer.
    pub code: u16,
    /// When the request was received (RFC 3339 with microseconds).
    pub time: String,
}

impl Request {
    /// Whether the request changes state (create, update, patch, delete, deletecollection).
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// Every completed request of the audit log (`ResponseComplete` stage; watches end late or never
/// and appear at `ResponseStarted`, which is kept for them).
pub fn audit_requests(plane: &ControlPlane) -> Vec<Request> {
    plane
        .audit_entries()
        .into_iter()
        .filter(|e| {
            e["stage"] == "ResponseComplete"
                || (e["stage"] == "ResponseStarted" && e["verb"] == "watch")
        })
        .map(|e| Request {
            user: e["user"]["username"].as_str().unwrap_or_default().into(),
            verb: e["verb"].as_str().unwrap_or_default().into(),
            resource: e["objectRef"]["resource"]
                .as_str()
                .unwrap_or_default()
                .into(),
            subresource: e["objectRef"]["subresource"]
                .as_str()
                .unwrap_or_default()
                .into(),
            namespace: e["objectRef"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .into(),
            name: e["objectRef"]["name"].as_str().unwrap_or_default().into(),
            code: e["responseStatus"]["code"].as_u64().unwrap_or_default() as u16,
            time: e["requestReceivedTimestamp"]
                .as_str()
                .unwrap_or_default()
                .into(),
        })
        .collect()
}

/// The requests of `user` the server refused with 403.
pub fn forbidden(plane: &ControlPlane, user: &str) -> Vec<Request> {
    audit_requests(plane)
        .into_iter()
        .filter(|r| r.user == user && r.code == 403)
        .collect()
}

/// How a test starts `quarry operator`.
#[derive(Debug, Clone)]
pub struct OperatorOptions {
    /// Kubeconfig the process authenticates with.
    pub kubeconfig: PathBuf,
    /// `POD_NAME`: the replica identity in the Lease.
    pub identity: String,
    /// `POD_NAMESPACE`: where its Lease lives.
    pub pod_namespace: String,
    /// Extra arguments after `operator` (e.g. `--namespace=a,b`, `--lease-duration-seconds=6`).
    pub args: Vec<String>,
    /// Where stdout and stderr go.
    pub log: PathBuf,
}

/// A running `quarry operator` process; killed (SIGKILL) when dropped.
pub struct Operator {
    /// The process.
    pub child: tokio::process::Child,
    /// Its HTTP port (`/metrics`, `/readyz`).
    pub port: u16,
    /// Its log file.
    pub log: PathBuf,
}

impl Operator {
    /// Starts the operator and waits (60 s) until `/readyz` answers.
    pub async fn start(options: &OperatorOptions) -> Result<Operator, String> {
        let port = crate::searx::free_port().map_err(|e| e.to_string())?;
        let log = std::fs::File::create(&options.log)
            .map_err(|e| format!("creating {}: {e}", options.log.display()))?;
        let mut child = crate::quarry_bin::exempt_loopback_async(tokio::process::Command::new(
            crate::quarry_bin::quarry_bin()?,
        ))
        .arg("operator")
        .args(&options.args)
        .env("KUBECONFIG", &options.kubeconfig)
        .env("POD_NAMESPACE", &options.pod_namespace)
        .env("POD_NAME", &options.identity)
        .env("QUARRY_BIND", format!("127.0.0.1:{port}"))
        .env_remove("QUARRY_NAMESPACE")
        .env("RUST_LOG", "info,quarry=debug")
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("starting the operator: {e}"))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| e.to_string())?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "the operator exited early with {status}:\n{}",
                    tail(&options.log)
                ));
            }
            if http
                .get(format!("http://127.0.0.1:{port}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(Operator {
                    child,
                    port,
                    log: options.log.clone(),
                });
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "the operator was not ready within 60 s:\n{}",
                    tail(&options.log)
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(&mut self) -> Result<(), String> {
        self.child.kill().await.map_err(|e| e.to_string())
    }

    /// The operator's `/metrics` text.
    pub async fn metrics(&self) -> Result<String, String> {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.port))
            .await
            .map_err(|e| e.to_string())?
            .text()
            .await
            .map_err(|e| e.to_string())
    }

    /// The last 60 lines of its log.
    pub fn log_tail(&self) -> String {
        tail(&self.log)
    }
}

/// The last 60 lines of a file.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Polls `get` every 300 ms until `done` holds on its value; fails with the last value after
/// `timeout`.
pub async fn wait_for<T: std::fmt::Debug, F, Fut>(
    what: &str,
    timeout: Duration,
    mut get: F,
    done: impl Fn(&T) -> bool,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = None;
    loop {
        if let Some(value) = get().await {
            if done(&value) {
                return Ok(value);
            }
            last = Some(value);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{what}: not within {timeout:?}; last: {last:?}"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The run's cost journal (`events.jsonl` in its ConfigMap store), as the operator reads it.
pub async fn cost_journal(client: Client, run: &quarry_api::ResearchRun) -> Result<String, String> {
    use kube::{Resource, ResourceExt};
    let owner = run
        .controller_owner_ref(&())
        .ok_or("run without owner ref data")?;
    let namespace = run.namespace().ok_or("run without a namespace")?;
    let store = quarry_operator::store::configmap::ConfigMapStore::new(
        client,
        &namespace,
        &run.name_any(),
        owner,
    );
    let bytes =
        quarry_engine::store::ArtifactStore::get(&store, quarry_engine::store::keys::EVENTS_KEY)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no events.jsonl")?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Checks that the run's status usage (calls, tokens, cost) equals the spend its cost journal
/// records, and returns that spend.
pub async fn status_spend_matches_journal(
    client: Client,
    run: &quarry_api::ResearchRun,
) -> Result<quarry_engine::research::shell::journal::Recovered, String> {
    let journal = cost_journal(client, run).await?;
    let recovered = quarry_engine::research::shell::journal::recovered_spend(journal.as_bytes())
        .ok_or("no call in the journal")?;
    let spent = &recovered.total;
    let usage = run
        .status
        .clone()
        .unwrap_or_default()
        .usage
        .unwrap_or_default();
    let paid = quarry_engine::llm::format_pico_usd(spent.cost_pico_usd);
    if (
        usage.llm_calls,
        usage.input_tokens,
        usage.output_tokens,
        usage.cost_usd.as_deref(),
    ) != (
        spent.llm_calls,
        spent.input_tokens,
        spent.output_tokens,
        Some(paid.as_str()),
    ) {
        return Err(format!(
            "status usage {usage:?} vs the cost journal {spent:?}"
        ));
    }
    Ok(recovered)
}
