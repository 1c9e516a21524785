//! The Helm chart and the Kustomize overlays, rendered by the real `helm` and `kubectl` (installed by
//! scripts/install-kube-tools.sh) and checked: built-in kinds against the Kubernetes schemas
//! (k8s-openapi's, strict: unknown fields are errors), Quarry's kinds against the generated CRD
//! schemas and CEL rules, the security context, RBAC, and the values schema.
//!
//! Without helm or kubectl the tests skip with a message; under CI=true they fail instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use quarry_e2e::crd_admission;
use quarry_e2e::kube_tools::{repo_root, run, tool, yaml_docs};
use serde_json::{Value, json};

const CHART: &str = "charts/quarry";
const ALL_FEATURES: &str = "charts/quarry/ci/all-features-values.yaml";
const OVERLAYS: [&str; 3] = ["monitoring", "redis", "namespaced"];
/// The non-root user of the image (distroless `nonroot`).
const UID: i64 = 65532;

/// `helm template` of the chart with `args` (values files, --set); `Err(stderr)` when it fails.
fn helm_template(helm: &std::path::Path, args: &[&str]) -> Result<Vec<Value>, String> {
    let mut all = vec!["template", "quarry", CHART, "--namespace", "quarry-system"];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = run(helm, &all);
    if ok {
        Ok(yaml_docs(&stdout))
    } else {
        Err(stderr)
    }
}

fn kustomize(kubectl: &std::path::Path, dir: &str) -> Vec<Value> {
    let (ok, stdout, stderr) = run(kubectl, &["kustomize", dir]);
    assert!(ok, "kubectl kustomize {dir} failed: {stderr}");
    yaml_docs(&stdout)
}

/// The default render and the all-features render.
fn renders(helm: &std::path::Path) -> Vec<(&'static str, Vec<Value>)> {
    vec![
        (
            "default values",
            helm_template(helm, &[]).expect("default render"),
        ),
        (
            "all-features values",
            helm_template(helm, &["-f", ALL_FEATURES]).expect("all-features render"),
        ),
    ]
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

fn name(doc: &Value) -> &str {
    doc["metadata"]["name"].as_str().unwrap_or_default()
}

fn of_kind<'a>(docs: &'a [Value], k: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| kind(d) == k).collect()
}

// ---------------------------------------------------------------- schemas

/// The JSON schema of a k8s-openapi type with every `$ref` inlined (the built-in kinds the chart
/// renders are not recursive). `properties` make objects closed in the validator, so an unknown
/// or misplaced field is an error, as with the API server's strict field validation.
fn k8s_schema<T: schemars::JsonSchema>() -> Value {
    let root = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    let mut root = serde_json::to_value(root).expect("schema serializes");
    let defs = root
        .as_object_mut()
        .and_then(|o| o.remove("$defs"))
        .unwrap_or_else(|| json!({}));
    inline_refs(&root, &defs, 0)
}

fn inline_refs(node: &Value, defs: &Value, depth: usize) -> Value {
    assert!(depth < 64, "schema nesting too deep (a recursive type?)");
    match node {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                let key = target.trim_start_matches("#/$defs/");
                let def = defs
                    .get(key)
                    .unwrap_or_else(|| panic!("no definition {key}"));
                if let Value::Object(resolved) = inline_refs(def, defs, depth + 1) {
                    out.extend(resolved);
                }
            }
            for (k, v) in map {
                if k != "$ref" {
                    out.insert(k.clone(), inline_refs(v, defs, depth + 1));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| inline_refs(v, defs, depth + 1))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Schemas of the built-in kinds the chart and overlays render, keyed by apiVersion/kind.
fn builtin_schemas() -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("apps/v1/Deployment", k8s_schema::<Deployment>()),
        ("v1/Service", k8s_schema::<Service>()),
        ("v1/ServiceAccount", k8s_schema::<ServiceAccount>()),
        ("v1/ConfigMap", k8s_schema::<ConfigMap>()),
        ("v1/Secret", k8s_schema::<Secret>()),
        ("v1/Namespace", k8s_schema::<Namespace>()),
        (
            "networking.k8s.io/v1/NetworkPolicy",
            k8s_schema::<NetworkPolicy>(),
        ),
        (
            "rbac.authorization.k8s.io/v1/ClusterRole",
            k8s_schema::<ClusterRole>(),
        ),
        (
            "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
            k8s_schema::<ClusterRoleBinding>(),
        ),
        ("rbac.authorization.k8s.io/v1/Role", k8s_schema::<Role>()),
        (
            "rbac.authorization.k8s.io/v1/RoleBinding",
            k8s_schema::<RoleBinding>(),
        ),
    ])
}

fn quarry_schemas() -> BTreeMap<String, Value> {
    quarry_api::all_crds()
        .into_iter()
        .map(|crd| (crd.spec.names.kind.clone(), crd_admission::schema_of(&crd)))
        .collect()
}

/// Numbers as f64 so `1.0` in a generated CRD equals `1` after Helm's YAML round trip.
fn normalize_numbers(v: &Value) -> Value {
    match v {
        Value::Number(n) => json!(n.as_f64()),
        Value::Array(a) => Value::Array(a.iter().map(normalize_numbers).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), normalize_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Validates every rendered document; returns the problems found. Third-party kinds
/// (prometheus-operator, KEDA) have no schema here and get their own checks below.
fn validate(docs: &[Value]) -> Vec<String> {
    let builtin = builtin_schemas();
    let quarry = quarry_schemas();
    let generated: BTreeMap<String, Value> = quarry_api::all_crds()
        .into_iter()
        .map(|crd| {
            let name = crd.metadata.name.clone().unwrap_or_default();
            (name, serde_json::to_value(crd).expect("CRD serializes"))
        })
        .collect();
    let mut problems = Vec::new();
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().unwrap_or_default();
        let what = format!("{api_version}/{} {}", kind(doc), name(doc));
        if name(doc).is_empty() {
            problems.push(format!("{what}: no metadata.name"));
        }
        let key = format!("{api_version}/{}", kind(doc));
        if let Some(schema) = builtin.get(key.as_str()) {
            let mut errors = Vec::new();
            crd_admission::openapi_errors(schema, doc, "", &mut errors);
            problems.extend(errors.into_iter().map(|e| format!("{what}: {e}")));
        } else if api_version == "quarry.dev/v1alpha1" {
            let schema = &quarry[kind(doc)];
            let verdict = crd_admission::admit(schema, doc, None);
            problems.extend(verdict.all().into_iter().map(|e| format!("{what}: {e}")));
        } else if key == "apiextensions.k8s.io/v1/CustomResourceDefinition" {
            // The rendered CRD must be the generated one, plus the chart's labels and annotation.
            let mut rendered = doc.clone();
            rendered["metadata"]
                .as_object_mut()
                .map(|m| (m.remove("labels"), m.remove("annotations")));
            match generated.get(name(doc)) {
                Some(expected) if normalize_numbers(expected) == normalize_numbers(&rendered) => {}
                Some(_) => problems.push(format!("{what}: differs from the generated CRD")),
                None => problems.push(format!("{what}: not a generated CRD")),
            }
        } else if ![
            "monitoring.coreos.com/v1/ServiceMonitor",
            "monitoring.coreos.com/v1/PrometheusRule",
            "keda.sh/v1alpha1/ScaledObject",
        ]
        .contains(&key.as_str())
        {
            problems.push(format!("{what}: no schema for this kind"));
        }
    }
    problems
}

#[test]
fn k8s_schemas_are_strict_and_catch_real_mistakes() {
    // The validator must see what it is asked to: a misplaced field, a wrong type, a missing name.
    let deployment = k8s_schema::<Deployment>();
    let mut errors = Vec::new();
    let bad = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"selector": {}, "template": {"spec": {
            "containers": [{"name": "c", "image": "i", "readOnlyRootFilesystem": true,
                            "ports": [{"containerPort": "8080"}]}]}}}
    });
    crd_admission::openapi_errors(&deployment, &bad, "", &mut errors);
    assert!(
        errors.iter().any(|e| e
            .contains("unknown field \"spec.template.spec.containers[0].readOnlyRootFilesystem\"")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("containerPort") && e.contains("must be of type integer")),
        "{errors:?}"
    );
    let mut errors = Vec::new();
    crd_admission::openapi_errors(&deployment, &json!({"spec": {}}), "", &mut errors);
    assert!(
        errors
            .iter()
            .any(|e| e.contains("metadata: Required value")),
        "{errors:?}"
    );
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn helm_lint_is_clean_for_default_and_all_features_values() {
    let helm = tool("helm");
    for extra in [&[][..], &["--values", ALL_FEATURES][..]] {
        let mut args = vec!["lint", CHART, "--strict"];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = run(&helm, &args);
        assert!(ok, "helm lint {extra:?} failed:\n{stdout}\n{stderr}");
        assert!(
            !stdout.contains("[WARNING]") && !stdout.contains("[ERROR]"),
            "helm lint {extra:?}:\n{stdout}"
        );
    }
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn rendered_chart_is_valid_for_kubernetes_and_crd_schemas() {
    let helm = tool("helm");
    for (label, docs) in renders(&helm) {
        let problems = validate(&docs);
        assert!(problems.is_empty(), "{label}:\n{}", problems.join("\n"));
        let kinds: BTreeSet<&str> = docs.iter().map(kind).collect();
        println!("{label}: {} objects, kinds {kinds:?}", docs.len());
    }
    let (_, all) = renders(&helm).remove(1);
    let kinds: BTreeSet<&str> = all.iter().map(kind).collect();
    for expected in [
        "CustomResourceDefinition",
        "Deployment",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "Service",
        "ServiceMonitor",
        "PrometheusRule",
        "ConfigMap",
        "SearchEngine",
        "ResearchProfile",
        "NetworkPolicy",
        "ScaledObject",
    ] {
        assert!(
            kinds.contains(expected),
            "all-features render lacks {expected}"
        );
    }
}

#[test]
#[ignore = "needs kubectl (scripts/install-kube-tools.sh)"]
fn kustomize_base_and_overlays_build_and_are_valid() {
    let kubectl = tool("kubectl");
    let mut dirs = vec!["deploy/kustomize/base".to_owned()];
    dirs.extend(
        OVERLAYS
            .iter()
            .map(|o| format!("deploy/kustomize/overlays/{o}")),
    );
    for dir in &dirs {
        let docs = kustomize(&kubectl, dir);
        let problems = validate(&docs);
        assert!(problems.is_empty(), "{dir}:\n{}", problems.join("\n"));
        assert_eq!(of_kind(&docs, "CustomResourceDefinition").len(), 4, "{dir}");
        check_security(&docs, dir);
        check_rbac(&docs, dir);
        for doc in &docs {
            if ![
                "CustomResourceDefinition",
                "ClusterRole",
                "ClusterRoleBinding",
                "Namespace",
            ]
            .contains(&kind(doc))
            {
                assert_eq!(
                    doc["metadata"]["namespace"],
                    "quarry-system",
                    "{dir}: {} {}",
                    kind(doc),
                    name(doc)
                );
            }
        }
    }
    let monitoring = kustomize(&kubectl, "deploy/kustomize/overlays/monitoring");
    for k in ["ServiceMonitor", "PrometheusRule", "ConfigMap"] {
        assert_eq!(of_kind(&monitoring, k).len(), 1, "monitoring overlay: {k}");
    }
    let dashboard = of_kind(&monitoring, "ConfigMap")[0];
    assert_eq!(dashboard["metadata"]["labels"]["grafana_dashboard"], "1");
    let json: Value = serde_json::from_str(dashboard["data"]["quarry.json"].as_str().unwrap())
        .expect("dashboard JSON");
    assert!(json["panels"].is_array());

    let redis = kustomize(&kubectl, "deploy/kustomize/overlays/redis");
    let operator = operator_container(&redis);
    assert_eq!(
        env_value(operator, "QUARRY_REDIS_URL").as_deref(),
        Some("redis://quarry-redis.quarry-system.svc:6379/0")
    );
    let services: Vec<&str> = of_kind(&redis, "Service").into_iter().map(name).collect();
    assert!(services.contains(&"quarry-redis"), "{services:?}");

    let namespaced = kustomize(&kubectl, "deploy/kustomize/overlays/namespaced");
    assert!(of_kind(&namespaced, "ClusterRole").is_empty());
    assert!(of_kind(&namespaced, "ClusterRoleBinding").is_empty());
    let operator = operator_container(&namespaced);
    // Without a cluster-scoped grant the console cannot review tokens: it is off.
    assert_eq!(
        env_value(operator, "QUARRY_CONSOLE").as_deref(),
        Some("false")
    );
    let ns_env = operator["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "QUARRY_NAMESPACE")
        .expect("QUARRY_NAMESPACE set");
    assert_eq!(
        ns_env["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    let binding = of_kind(&namespaced, "RoleBinding")
        .into_iter()
        .find(|b| name(b) == "quarry")
        .expect("RoleBinding quarry");
    assert_eq!(binding["roleRef"]["kind"], "Role");
}

#[test]
#[ignore = "needs helm and kubectl (scripts/install-kube-tools.sh)"]
fn kustomize_base_grants_what_the_chart_grants() {
    let (helm, kubectl) = (tool("helm"), tool("kubectl"));
    let chart = helm_template(&helm, &[]).expect("default render");
    let base = kustomize(&kubectl, "deploy/kustomize/base");
    let rules = |docs: &[Value], role: &str, k: &str| -> Value {
        docs.iter()
            .find(|d| kind(d) == k && name(d) == role)
            .unwrap_or_else(|| panic!("{k} {role}"))["rules"]
            .clone()
    };
    assert_eq!(
        rules(&chart, "quarry", "ClusterRole"),
        rules(&base, "quarry", "ClusterRole")
    );
    assert_eq!(
        rules(&chart, "quarry-leader-election", "Role"),
        rules(&base, "quarry-leader-election", "Role")
    );
    // The same container hardening and probes.
    let strip = |c: &Value| {
        let mut c = c.clone();
        for k in ["image", "imagePullPolicy", "env", "args"] {
            c.as_object_mut().unwrap().remove(k);
        }
        c
    };
    assert_eq!(
        strip(operator_container(&chart)),
        strip(operator_container(&base))
    );
}

// ---------------------------------------------------------------- security context

fn operator_container(docs: &[Value]) -> &Value {
    let deployment = of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "operator")
        .expect("operator Deployment");
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

fn env_value(container: &Value, key: &str) -> Option<String> {
    container["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == key)
        .and_then(|e| e["value"].as_str())
        .map(str::to_owned)
}

/// Every Quarry pod: non-root 65532, read-only root, no capabilities, RuntimeDefault seccomp,
/// probes on /livez and /readyz, requests and a memory limit.
fn check_security(docs: &[Value], label: &str) {
    let quarry_deployments: Vec<&Value> = of_kind(docs, "Deployment")
        .into_iter()
        .filter(|d| {
            let component = &d["metadata"]["labels"]["app.kubernetes.io/component"];
            component == "operator" || component == "worker"
        })
        .collect();
    assert!(
        !quarry_deployments.is_empty(),
        "{label}: no Quarry Deployment"
    );
    for deployment in quarry_deployments {
        let what = format!("{label}: Deployment {}", name(deployment));
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{what}");
        assert_eq!(pod["securityContext"]["runAsUser"], UID, "{what}");
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{what}"
        );
        assert_ne!(pod["hostNetwork"], true, "{what}");
        let containers = pod["containers"].as_array().expect("containers");
        for c in containers {
            let sc = &c["securityContext"];
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
            assert_eq!(sc["runAsNonRoot"], true, "{what}");
            assert_eq!(sc["runAsUser"], UID, "{what}");
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{what}");
            assert!(sc["capabilities"]["add"].is_null(), "{what}");
            assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{what}");
            assert_ne!(sc["privileged"], true, "{what}");
            assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/livez", "{what}");
            assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz", "{what}");
            assert_eq!(c["livenessProbe"]["httpGet"]["port"], "http", "{what}");
            let port_names: Vec<&Value> = c["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| &p["name"])
                .collect();
            assert!(port_names.contains(&&json!("http")), "{what}: no http port");
            assert!(c["resources"]["requests"]["cpu"].is_string(), "{what}");
            assert!(c["resources"]["requests"]["memory"].is_string(), "{what}");
            assert!(c["resources"]["limits"]["memory"].is_string(), "{what}");
        }
    }
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn every_quarry_pod_is_locked_down() {
    let helm = tool("helm");
    for (label, docs) in renders(&helm) {
        check_security(&docs, label);
    }
}

// ---------------------------------------------------------------- RBAC

/// No wildcard anywhere; the operator's grants bound to its ServiceAccount.
fn check_rbac(docs: &[Value], label: &str) {
    for role in docs
        .iter()
        .filter(|d| kind(d) == "Role" || kind(d) == "ClusterRole")
    {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for field in ["verbs", "resources", "apiGroups", "resourceNames"] {
                for item in rule[field].as_array().into_iter().flatten() {
                    assert!(
                        !item.as_str().unwrap_or_default().contains('*'),
                        "{label}: {} {} has a wildcard in {field}: {rule}",
                        kind(role),
                        name(role)
                    );
                }
            }
            assert!(rule["nonResourceURLs"].is_null(), "{label}: {rule}");
        }
        assert!(role["aggregationRule"].is_null(), "{label}: {}", name(role));
    }
}

/// (namespace or "" for cluster-wide, verbs) of every grant on `resource` in `group`, through
/// bindings to the ServiceAccount `sa`.
fn grants(docs: &[Value], sa: &str, group: &str, resource: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for binding in docs
        .iter()
        .filter(|d| kind(d) == "RoleBinding" || kind(d) == "ClusterRoleBinding")
    {
        let bound = binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == sa);
        if !bound {
            continue;
        }
        let role_kind = binding["roleRef"]["kind"].as_str().unwrap_or_default();
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        let namespace = if kind(binding) == "RoleBinding" {
            binding["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        } else {
            String::new()
        };
        let role = docs
            .iter()
            .find(|d| {
                kind(d) == role_kind
                    && name(d) == role_name
                    && (role_kind == "ClusterRole"
                        || d["metadata"]["namespace"] == binding["metadata"]["namespace"])
            })
            .unwrap_or_else(|| panic!("binding {} names a missing {role_kind}", name(binding)));
        for rule in role["rules"].as_array().into_iter().flatten() {
            let groups = rule["apiGroups"].as_array().cloned().unwrap_or_default();
            let resources = rule["resources"].as_array().cloned().unwrap_or_default();
            if groups.contains(&json!(group)) && resources.contains(&json!(resource)) {
                let verbs = rule["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect();
                out.push((namespace.clone(), verbs));
            }
        }
    }
    out
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn rbac_is_least_privilege_cluster_wide_and_per_namespace() {
    let helm = tool("helm");
    // Cluster-wide (default): one ClusterRole for the operator; Secrets by name only.
    let docs = helm_template(&helm, &[]).expect("default render");
    check_rbac(&docs, "default");
    let secrets = grants(&docs, "quarry", "", "secrets");
    assert_eq!(
        secrets,
        vec![(String::new(), vec!["get".into()])],
        "Secrets: read by name (the opt-in), never listed, watched, created or changed"
    );
    let leases = grants(&docs, "quarry", "coordination.k8s.io", "leases");
    assert_eq!(leases.len(), 1);
    assert_eq!(
        leases[0].0, "quarry-system",
        "leases only in the operator's namespace"
    );
    let runs = grants(&docs, "quarry", "quarry.dev", "researchruns");
    assert!(runs[0].1.contains(&"watch".to_owned()) && runs[0].1.contains(&"delete".to_owned()));
    // It creates runs for ResearchSchedules, and reads (never writes) schedules but their status.
    assert!(runs[0].1.contains(&"create".to_owned()), "{:?}", runs[0].1);
    let schedules = grants(&docs, "quarry", "quarry.dev", "researchschedules");
    assert_eq!(schedules[0].1, vec!["get", "list", "watch"]);
    assert_eq!(
        grants(&docs, "quarry", "quarry.dev", "researchruns/status")[0].1,
        vec!["get", "patch", "update"]
    );
    assert!(
        grants(&docs, "quarry", "", "pods")
            .iter()
            .all(|(ns, verbs)| ns == "quarry-system" && verbs == &vec!["get".to_owned()])
    );

    // watchNamespaces: Roles per namespace, nothing cluster-wide but the user-facing roles.
    let docs = helm_template(&helm, &["-f", ALL_FEATURES]).expect("all-features render");
    check_rbac(&docs, "all-features");
    let secrets = grants(&docs, "quarry", "", "secrets");
    let namespaces: BTreeSet<&str> = secrets.iter().map(|(ns, _)| ns.as_str()).collect();
    assert_eq!(
        namespaces,
        BTreeSet::from(["research", "team-b"]),
        "{secrets:?}"
    );
    assert!(
        secrets
            .iter()
            .all(|(_, verbs)| verbs == &vec!["get".to_owned()]),
        "{secrets:?}"
    );
    // The one cluster-wide binding: the console's token and access reviews (cluster-scoped by
    // nature), which grant no access to any object.
    let bindings: Vec<&str> = of_kind(&docs, "ClusterRoleBinding")
        .into_iter()
        .map(name)
        .collect();
    assert_eq!(
        bindings,
        vec!["quarry-console"],
        "cluster-wide bindings with watchNamespaces"
    );
    for role in of_kind(&docs, "ClusterRole") {
        if name(role) == "quarry-console" {
            assert_eq!(
                role["rules"],
                serde_json::json!([
                    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
                ])
            );
            continue;
        }
        assert!(
            ["quarry-view", "quarry-edit", "quarry-admin"].contains(&name(role)),
            "unexpected ClusterRole {}",
            name(role)
        );
        let text = role["rules"].to_string();
        assert!(!text.contains("secrets"), "{text}");
        // People read reports and event logs by name: get on ConfigMaps, never list or write.
        for rule in role["rules"].as_array().unwrap() {
            if rule["resources"].to_string().contains("configmaps") {
                assert_eq!(rule["verbs"], json!(["get"]), "{text}");
            }
        }
    }
    for ns in ["research", "team-b"] {
        let roles: Vec<&str> = of_kind(&docs, "Role")
            .into_iter()
            .filter(|r| r["metadata"]["namespace"] == ns)
            .map(name)
            .collect();
        assert_eq!(roles, vec!["quarry"], "the operator's Role alone in {ns}");
    }
    let operator = operator_container(&docs);
    assert!(
        operator["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--namespace=research,team-b")),
        "{}",
        operator["args"]
    );
    workers_hold_no_api_token(&docs);

    // The user-facing roles aggregate into view, edit and admin.
    let view = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| name(r) == "quarry-view")
        .unwrap();
    assert_eq!(
        view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"],
        "true"
    );
    let edit = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| name(r) == "quarry-edit")
        .unwrap();
    assert_eq!(
        edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"],
        "true"
    );
    assert!(edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"].is_null());
    // Who may configure what: editors write runs and schedules only; profiles and SearchEngines
    // (keys, hosts, spend caps, SearXNG settings) are quarry-admin's, aggregated into admin alone.
    let writes = |role: &Value, resource: &str| {
        role["rules"].as_array().unwrap().iter().any(|rule| {
            rule["resources"]
                .as_array()
                .unwrap()
                .contains(&json!(resource))
                && rule["verbs"].as_array().unwrap().iter().any(|v| {
                    [
                        "create",
                        "update",
                        "patch",
                        "delete",
                        "deletecollection",
                        "*",
                    ]
                    .contains(&v.as_str().unwrap_or_default())
                })
        })
    };
    for resource in ["researchruns", "researchschedules"] {
        assert!(writes(edit, resource), "quarry-edit writes {resource}");
    }
    for resource in ["researchprofiles", "searchengines"] {
        assert!(
            !writes(edit, resource),
            "quarry-edit must not write {resource}"
        );
    }
    let admin = of_kind(&docs, "ClusterRole")
        .into_iter()
        .find(|r| name(r) == "quarry-admin")
        .expect("quarry-admin");
    for resource in ["researchprofiles", "searchengines"] {
        assert!(writes(admin, resource), "quarry-admin writes {resource}");
    }
    let labels = &admin["metadata"]["labels"];
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
    assert!(labels["rbac.authorization.k8s.io/aggregate-to-edit"].is_null());
    assert!(labels["rbac.authorization.k8s.io/aggregate-to-view"].is_null());
}

/// Worker Pods fetch and parse untrusted pages: they mount no API token and no role names their
/// ServiceAccount. The API keys they need come with each task, sealed with the key the operator
/// and the workers both mount as a file from one Secret.
fn workers_hold_no_api_token(docs: &[Value]) {
    let worker = of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker")
        .expect("worker Deployment");
    let pod = &worker["spec"]["template"]["spec"];
    assert_eq!(pod["automountServiceAccountToken"], false);
    let account = pod["serviceAccountName"].as_str().unwrap();
    let sa = of_kind(docs, "ServiceAccount")
        .into_iter()
        .find(|a| name(a) == account)
        .expect("the workers' ServiceAccount");
    assert_eq!(sa["automountServiceAccountToken"], false);
    let bound: Vec<&str> = docs
        .iter()
        .filter(|d| kind(d) == "RoleBinding" || kind(d) == "ClusterRoleBinding")
        .filter(|b| {
            b["subjects"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["name"] == account)
        })
        .map(name)
        .collect();
    assert!(bound.is_empty(), "bindings of {account}: {bound:?}");
    let worker_roles: Vec<&str> = docs
        .iter()
        .filter(|d| kind(d) == "Role" || kind(d) == "ClusterRole")
        .map(name)
        .filter(|n| n.contains("worker"))
        .collect();
    assert!(worker_roles.is_empty(), "{worker_roles:?}");
    // The sealing key: one Secret, mounted read-only as the same file in both Pods.
    let sealing = of_kind(docs, "Secret")
        .into_iter()
        .find(|s| name(s) == "quarry-sealing-key")
        .expect("the sealing key Secret");
    let material = sealing["data"]["key"].as_str().expect("data.key");
    assert!(
        material.len() >= 44,
        "at least 32 bytes, base64: {material}"
    );
    let operator = of_kind(docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "operator")
        .expect("operator Deployment");
    for (who, deployment) in [("operator", operator), ("worker", worker)] {
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(
            env_value(container, "QUARRY_SEALING_KEY_FILE").as_deref(),
            Some("/etc/quarry/sealing/key"),
            "{who}"
        );
        let mount = container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["mountPath"] == "/etc/quarry/sealing")
            .unwrap_or_else(|| panic!("{who}: sealing key mount"));
        assert_eq!(mount["readOnly"], true, "{who}");
        let volume = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap_or_else(|| panic!("{who}: sealing key volume"));
        assert_eq!(
            volume["secret"]["secretName"], "quarry-sealing-key",
            "{who}"
        );
        assert_eq!(volume["secret"]["defaultMode"], 0o440, "{who}");
    }
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn an_existing_sealing_key_secret_is_mounted_instead_of_a_generated_one() {
    let helm = tool("helm");
    let docs = helm_template(
        &helm,
        &[
            "-f",
            ALL_FEATURES,
            "--set",
            "workers.sealingKey.existingSecret=team-sealing",
            "--set",
            "workers.sealingKey.key=material",
        ],
    )
    .expect("render");
    assert!(
        of_kind(&docs, "Secret")
            .iter()
            .all(|s| !name(s).contains("sealing")),
        "no generated sealing key"
    );
    let secret_names: Vec<(&str, &str)> = of_kind(&docs, "Deployment")
        .into_iter()
        .map(|d| {
            let volume = d["spec"]["template"]["spec"]["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == "sealing-key")
                .expect("sealing key volume");
            (
                volume["secret"]["secretName"].as_str().unwrap(),
                volume["secret"]["items"][0]["key"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        secret_names,
        vec![("team-sealing", "material"), ("team-sealing", "material")]
    );
    let operator = operator_container(&docs);
    assert_eq!(
        env_value(operator, "QUARRY_SEALING_KEY_FILE").as_deref(),
        Some("/etc/quarry/sealing/material")
    );
}

// ---------------------------------------------------------------- features

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn all_features_wire_workers_keda_monitoring_and_network_policy() {
    let helm = tool("helm");
    let docs = helm_template(&helm, &["-f", ALL_FEATURES]).expect("all-features render");
    let operator = operator_container(&docs);
    assert!(
        operator["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--workers"))
    );
    assert_eq!(
        env_value(operator, "QUARRY_REDIS_URL").as_deref(),
        Some("redis://redis.quarry-system.svc:6379/2")
    );
    assert_eq!(
        operator["image"],
        "registry.example.com/quarry@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    let worker = of_kind(&docs, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["labels"]["app.kubernetes.io/component"] == "worker")
        .expect("worker Deployment");
    let container = &worker["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["args"],
        json!([
            "worker",
            "--concurrency",
            "2",
            "--visibility-timeout",
            "30s"
        ])
    );
    assert!(env_value(container, "QUARRY_REDIS_URL").is_some());
    assert!(
        worker["spec"]["replicas"].is_null(),
        "KEDA owns the worker replica count"
    );

    let scaled = of_kind(&docs, "ScaledObject")[0];
    assert_eq!(scaled["spec"]["scaleTargetRef"]["name"], name(worker));
    let trigger = &scaled["spec"]["triggers"][0];
    assert_eq!(trigger["type"], "redis-streams");
    assert_eq!(trigger["metadata"]["stream"], "quarry:tasks");
    assert_eq!(trigger["metadata"]["consumerGroup"], "quarry-workers");
    assert_eq!(trigger["metadata"]["lagCount"], "3");
    assert_eq!(
        trigger["metadata"]["address"],
        "redis.quarry-system.svc:6379"
    );
    assert_eq!(trigger["metadata"]["databaseIndex"], "2");
    assert_eq!(trigger["authenticationRef"]["name"], "quarry-redis-auth");

    // The ServiceMonitor selects the operator Service by its labels and names its port.
    let service = of_kind(&docs, "Service")[0];
    let monitor = of_kind(&docs, "ServiceMonitor")[0];
    for (k, v) in monitor["spec"]["selector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(&service["metadata"]["labels"][k], v, "selector label {k}");
    }
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(monitor["spec"]["endpoints"][0]["path"], "/metrics");
    // The PrometheusRule carries the rules file's groups unchanged (tested against real metrics
    // by metrics_run), including Prometheus' own {{ $labels }} templates.
    let rules_file: Value = serde_yaml::from_str(
        &std::fs::read_to_string(
            repo_root()
                .join(CHART)
                .join("files/alerts/quarry-rules.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let rule = of_kind(&docs, "PrometheusRule")[0];
    assert_eq!(rule["spec"], rules_file["spec"]);
    assert_eq!(
        rule["metadata"]["labels"]["release"],
        "kube-prometheus-stack"
    );
    let dashboard = of_kind(&docs, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["labels"]["grafana_dashboard"] == "1")
        .expect("dashboard ConfigMap");
    assert_eq!(dashboard["metadata"]["namespace"], "monitoring");
    let shipped: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join(CHART).join("files/dashboards/quarry.json"))
            .unwrap(),
    )
    .unwrap();
    let rendered: Value = serde_json::from_str(dashboard["data"]["quarry.json"].as_str().unwrap())
        .expect("dashboard JSON");
    assert_eq!(rendered, shipped);

    // NetworkPolicy: egress to DNS, the API server, SearXNG, Redis, and public addresses only.
    let policy = of_kind(&docs, "NetworkPolicy")[0];
    let egress = policy["spec"]["egress"].as_array().unwrap();
    let ports_of = |rule: &Value| -> Vec<i64> {
        rule["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["port"].as_i64())
            .collect()
    };
    assert!(
        egress
            .iter()
            .any(|r| ports_of(r) == vec![53, 53] && r["to"].is_null())
    );
    let api = egress
        .iter()
        .find(|r| ports_of(r) == vec![443, 6443])
        .expect("API rule");
    assert_eq!(api["to"][0]["ipBlock"]["cidr"], "10.96.0.1/32");
    assert!(egress.iter().any(|r| {
        r["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "searxng"
            && ports_of(r) == vec![8080]
    }));
    let redis = egress
        .iter()
        .find(|r| ports_of(r) == vec![6379])
        .expect("Redis rule");
    assert_eq!(redis["to"][0]["ipBlock"]["cidr"], "10.0.12.0/24");
    let internet = egress
        .iter()
        .find(|r| r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0")
        .expect("internet rule");
    let except: Vec<&str> = internet["to"][0]["ipBlock"]["except"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for private in [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
    ] {
        assert!(except.contains(&private), "{private} not excluded");
    }
    assert!(
        egress.iter().any(|r| ports_of(r) == vec![11434]),
        "extraEgress rule"
    );
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"],
        worker["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/instance"]
    );

    // The default SearchEngine and the example profile are hooks (created after the CRDs).
    for k in ["SearchEngine", "ResearchProfile"] {
        let obj = of_kind(&docs, k)[0];
        assert_eq!(
            obj["metadata"]["annotations"]["helm.sh/hook"], "post-install,post-upgrade",
            "{k}"
        );
    }
    let profile = of_kind(&docs, "ResearchProfile")[0];
    assert_eq!(
        profile["spec"]["models"]["primary"]["provider"],
        "anthropic"
    );
    assert_eq!(
        profile["spec"]["search"]["searchEngineRef"]["name"],
        "default"
    );
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn crds_follow_crds_enabled_and_keep() {
    let helm = tool("helm");
    let keep = |docs: &[Value]| -> Vec<Value> {
        of_kind(docs, "CustomResourceDefinition")
            .into_iter()
            .map(|c| c["metadata"]["annotations"]["helm.sh/resource-policy"].clone())
            .collect()
    };
    let default = helm_template(&helm, &[]).unwrap();
    assert_eq!(keep(&default), vec![json!("keep"); 4]);
    let no_keep = helm_template(&helm, &["--set", "crds.keep=false"]).unwrap();
    assert_eq!(keep(&no_keep), vec![Value::Null; 4]);
    let none = helm_template(&helm, &["--set", "crds.enabled=false"]).unwrap();
    assert!(of_kind(&none, "CustomResourceDefinition").is_empty());
    // The chart has no crds/ folder: Helm would install it once and never upgrade it.
    assert!(!repo_root().join(CHART).join("crds").exists());
}

/// `selectableFields` (1.30+) makes older API servers refuse the CRD: the chart keeps it only
/// where the cluster knows it, and refuses clusters older than its declared minimum (1.25).
#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn crds_carry_selectable_fields_only_on_clusters_that_know_them() {
    let helm = tool("helm");
    let selectable = |version: &str| -> usize {
        let docs = helm_template(&helm, &["--kube-version", version]).unwrap();
        of_kind(&docs, "CustomResourceDefinition")
            .iter()
            .flat_map(|c| {
                c["spec"]["versions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|v| v.get("selectableFields").is_some())
            .count()
    };
    assert_eq!(selectable("1.25.0"), 0);
    assert_eq!(selectable("1.29.4"), 0);
    assert_eq!(
        selectable("1.30.0"),
        1,
        "ResearchRun selects by profileRef and phase"
    );
    assert_eq!(selectable("1.33.1"), 1);
    let too_old = helm_template(&helm, &["--kube-version", "1.24.9"]).unwrap_err();
    assert!(too_old.contains("kubeVersion"), "{too_old}");
}

// ---------------------------------------------------------------- values schema

/// Paths of the values schema that take a Kubernetes object verbatim (validated when rendered).
const PASS_THROUGH: [&str; 9] = [
    "operator.affinity",
    "operator.tolerations[]",
    "operator.topologySpreadConstraints[]",
    "operator.extraEnv[].valueFrom",
    "workers.affinity",
    "workers.tolerations[]",
    "workers.extraEnv[].valueFrom",
    "networkPolicy.extraEgress[]",
    "networkPolicy.ingressFrom[]",
];

fn strictness(schema: &Value, path: &str, loose: &mut Vec<String>) {
    if schema["type"] == "object" {
        if let Some(props) = schema["properties"].as_object() {
            if schema["additionalProperties"] != false {
                loose.push(format!(
                    "{path}: object without additionalProperties: false"
                ));
            }
            for (k, v) in props {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                strictness(v, &child, loose);
            }
        } else if schema["additionalProperties"].is_object() {
            // A map (labels, annotations, requests): its values are typed.
            strictness(&schema["additionalProperties"], &format!("{path}.*"), loose);
        } else if !PASS_THROUGH.contains(&path) {
            loose.push(format!("{path}: free-form object"));
        }
    }
    if schema["type"] == "array" {
        strictness(&schema["items"], &format!("{path}[]"), loose);
    }
}

#[test]
fn values_schema_is_closed_at_every_level_and_covers_values_yaml() {
    let dir = repo_root().join(CHART);
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("values.schema.json")).unwrap())
            .expect("values.schema.json is JSON");
    let mut loose = Vec::new();
    strictness(&schema, "", &mut loose);
    assert!(loose.is_empty(), "{}", loose.join("\n"));
    // Every key of values.yaml is in the schema (and the other way round for objects).
    fn keys(v: &Value, path: &str, out: &mut BTreeSet<String>) {
        if let Some(map) = v.as_object() {
            for (k, child) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                out.insert(p.clone());
                keys(child, &p, out);
            }
        }
    }
    fn schema_keys(s: &Value, path: &str, out: &mut BTreeSet<String>) {
        for (k, child) in s["properties"].as_object().into_iter().flatten() {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            out.insert(p.clone());
            schema_keys(child, &p, out);
        }
    }
    let values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(dir.join("values.yaml")).unwrap()).unwrap();
    let mut in_values = BTreeSet::new();
    keys(&values, "", &mut in_values);
    let mut in_schema = BTreeSet::new();
    schema_keys(&schema, "", &mut in_schema);
    // Maps with example keys (resources' requests and limits) are typed maps in the schema.
    let missing: Vec<&String> = in_values
        .iter()
        .filter(|k| !in_schema.contains(*k))
        .filter(|k| {
            !k.contains(".requests.")
                && !k.contains(".limits.")
                && !k.ends_with("grafana_dashboard")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "values.yaml keys missing from the schema: {missing:?}"
    );
    let undocumented: Vec<&String> = in_schema.difference(&in_values).collect();
    assert!(
        undocumented.is_empty(),
        "schema keys missing from values.yaml: {undocumented:?}"
    );
}

#[test]
#[ignore = "needs helm (scripts/install-kube-tools.sh)"]
fn bad_values_fail_helm_template() {
    let helm = tool("helm");
    let cases: [(&[&str], &str); 9] = [
        (&["--set", "bogus=1"], "bogus"),
        (&["--set", "operator.replica=2"], "replica"),
        (&["--set", "metrics.serviceMonitor.enable=true"], "enable"),
        (&["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
        (&["--set", "redis.url=http://redis:6379"], "url"),
        (&["--set", "operator.logFormat=yaml"], "logFormat"),
        (
            &["--set", "watchNamespaces[0]=Not_A_Namespace"],
            "watchNamespaces",
        ),
        (
            &["--set", "networkPolicy.apiServerCIDRs[0]=everywhere"],
            "apiServerCIDRs",
        ),
        // Not a schema error but a template guard: workers need Redis.
        (
            &["--set", "workers.enabled=true"],
            "workers.enabled needs Redis",
        ),
    ];
    for (args, expect) in cases {
        match helm_template(&helm, args) {
            Ok(_) => panic!("helm template {args:?} succeeded, must fail"),
            Err(stderr) => assert!(
                stderr.contains(expect),
                "helm template {args:?}: error does not mention {expect:?}:\n{stderr}"
            ),
        }
    }
    // The same keys with good values render.
    helm_template(
        &helm,
        &[
            "--set",
            "operator.replicas=2",
            "--set",
            "redis.url=rediss://r:6380/1",
            "--set",
            "workers.enabled=true",
        ],
    )
    .expect("good values render");
}

#[test]
fn all_features_file_sets_only_schema_keys_and_every_optional_part() {
    let path: PathBuf = repo_root().join(ALL_FEATURES);
    let values: Value = serde_yaml::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    for switch in [
        &values["workers"]["enabled"],
        &values["workers"]["keda"]["enabled"],
        &values["metrics"]["serviceMonitor"]["enabled"],
        &values["metrics"]["prometheusRule"]["enabled"],
        &values["metrics"]["dashboard"]["enabled"],
        &values["profile"]["create"],
    ] {
        assert_eq!(switch, &json!(true));
    }
    assert!(
        values["watchNamespaces"]
            .as_array()
            .is_some_and(|n| n.len() >= 2)
    );
}

/// The chart values named in `text` after each "chart value" / "chart values": the value paths
/// that follow (joined by "and" / "or"), up to the first other word or punctuation.
fn chart_values_named(text: &str) -> Vec<String> {
    let mut named = Vec::new();
    for (at, _) in text.match_indices("chart value") {
        let rest = text[at + "chart value".len()..].trim_start_matches('s');
        for word in rest.split_whitespace() {
            if matches!(word, "and" | "or") {
                continue;
            }
            let path = word.trim_end_matches([',', ')', ';', '.', '"', '\\']);
            let is_path = !path.is_empty()
                && path.starts_with(|c: char| c.is_ascii_lowercase())
                && path.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
            if !is_path {
                break;
            }
            named.push(path.to_owned());
            if path.len() != word.len() {
                break;
            }
        }
    }
    named
}

#[test]
fn every_chart_value_a_message_names_exists() {
    assert_eq!(
        chart_values_named(
            "grant it (chart values workers.enabled and rbac.create; in each namespace); the chart value searchEngine.allowedImages (operator flag)"
        ),
        [
            "workers.enabled",
            "rbac.create",
            "searchEngine.allowedImages"
        ]
    );
    let values: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("charts/quarry/values.yaml")).unwrap(),
    )
    .unwrap();
    let mut sources = Vec::new();
    let mut dirs = vec![repo_root().join("operator")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push(path);
            }
        }
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    for source in sources {
        let text = std::fs::read_to_string(&source).unwrap();
        for path in chart_values_named(&text) {
            checked += 1;
            let found = path
                .split('.')
                .try_fold(&values, |node, key| node.get(key))
                .is_some();
            if !found {
                missing.push(format!("{}: {path}", source.display()));
            }
        }
    }
    // The scan must find the messages at all (the sample above checks how it reads one).
    assert!(
        checked > 0,
        "no chart value named in operator/: the scan found nothing"
    );
    assert!(
        missing.is_empty(),
        "messages name chart values that charts/quarry/values.yaml lacks: {missing:?}"
    );
}
