//! The test control plane itself, on the real kube-apiserver: it starts, serves the CRDs with
//! their CEL rules enforced, mints ServiceAccount tokens whose identity RBAC judges, and writes
//! an audit log.

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use quarry_api::ResearchRun;
use quarry_e2e::control_plane::{ControlPlane, client_for};
use serde_json::json;

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn control_plane_enforces_cel_rules_rbac_and_writes_an_audit_log() {
    let started = std::time::Instant::now();
    let plane = ControlPlane::start().await.expect("control plane");
    eprintln!(
        "control plane ready in {:?} at {}",
        started.elapsed(),
        plane.url()
    );
    let ns = plane.namespace("control-plane").await.unwrap();

    // A valid run is admitted; a whitespace-only query is refused by a CEL rule with the
    // server's own message (the feature gate is on: without it the rule would be dropped).
    let runs: Api<ResearchRun> = Api::namespaced(plane.client(), &ns);
    let run = |name: &str, query: &str| {
        serde_json::from_value::<ResearchRun>(json!({
            "apiVersion": "quarry.dev/v1alpha1",
            "kind": "ResearchRun",
            "metadata": {"name": name},
            "spec": {"query": query, "mode": "quick"},
        }))
        .unwrap()
    };
    runs.create(&PostParams::default(), &run("ok", "What is VACUUM FULL?"))
        .await
        .expect("a valid run is admitted");
    let refused = runs
        .create(&PostParams::default(), &run("blank", "      "))
        .await
        .expect_err("a whitespace-only query must be refused");
    let text = refused.to_string();
    assert!(
        text.contains("Invalid") || text.contains("invalid"),
        "{text}"
    );

    // Strict field validation is on: an unknown field is an error, not silently dropped.
    let unknown = runs
        .patch(
            "ok",
            &PatchParams::apply("quarry-e2e").validation_strict(),
            &Patch::Apply(json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
                "metadata": {"name": "ok"},
                "spec": {"query": "What is VACUUM FULL?", "mode": "quick", "nonsense": 1},
            })),
        )
        .await
        .expect_err("an unknown field must be refused");
    assert!(unknown.to_string().contains("nonsense"), "{unknown}");

    // A ServiceAccount token from TokenRequest authenticates, and RBAC (no bindings) refuses it.
    let sas: Api<ServiceAccount> = Api::namespaced(plane.client(), &ns);
    sas.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "nobody"}})).unwrap(),
    )
    .await
    .unwrap();
    let token = plane.service_account_token(&ns, "nobody").await.unwrap();
    let path = plane.scratch().join("nobody.kubeconfig");
    plane.token_kubeconfig(&token, &ns, &path).unwrap();
    let as_nobody = client_for(&path).await.unwrap();
    let denied = Api::<ConfigMap>::namespaced(as_nobody, &ns)
        .list(&Default::default())
        .await
        .expect_err("an unbound ServiceAccount must be forbidden");
    assert!(
        denied.to_string().contains("forbidden"),
        "expected a 403, got {denied}"
    );

    // The audit log names the ServiceAccount's refused request.
    let user = format!("system:serviceaccount:{ns}:nobody");
    let entries = plane.audit_entries();
    assert!(
        entries
            .iter()
            .any(|e| e["user"]["username"] == user.as_str() && e["responseStatus"]["code"] == 403),
        "no 403 for {user} among {} audit entries",
        entries.len()
    );
}
