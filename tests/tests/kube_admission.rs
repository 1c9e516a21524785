//! The admission matrix against a real Kubernetes API server: every case of
//! `tests/tests/admission/cases.yaml` is refused with its HTTP code and message.
//!
//! Runs on a control plane of its own (`quarry_e2e::control_plane`: etcd and the real
//! kube-apiserver); `#[ignore]`d, so shown as skipped, where there is none. The CRDs installed are
//! those of `crds/*.yaml`, less the fields this 1.25 server does not know. Each
//! case is sent as a create with `dryRun=All&fieldValidation=Strict`, so nothing is stored; a
//! transition case first creates its `old` spec for real, then sends the update as a dry run.
//! The client-side twin of this test is `tests/tests/admission_matrix.rs`.

use std::collections::BTreeMap;

use kube::Client;
use quarry_e2e::control_plane::ControlPlane;
use quarry_e2e::crd_admission::{self, Case};
use serde_json::{Value, json};

fn plural(kind: &str) -> Result<&'static str, String> {
    match kind {
        "ResearchRun" => Ok("researchruns"),
        "ResearchProfile" => Ok("researchprofiles"),
        "SearchEngine" => Ok("searchengines"),
        other => Err(format!("unknown kind {other}")),
    }
}

fn object(case: &Case, spec: &Value, resource_version: Option<&str>) -> Value {
    let mut metadata = json!({"name": case.name});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv);
    }
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": case.kind, "metadata": metadata, "spec": spec})
}

/// Sends `body` with `method` to `path`; the API server's answer as text, or its Status.
async fn send(
    client: &Client,
    method: &str,
    path: String,
    body: &Value,
) -> Result<String, kube::Error> {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
        .map_err(kube::Error::HttpError)?;
    client.request_text(request).await
}

/// Why the API server's answer to one case is wrong, or `None` when it refused as expected.
async fn run_case(client: &Client, namespace: &str, case: &Case) -> Result<Option<String>, String> {
    let collection = format!(
        "/apis/quarry.dev/v1alpha1/namespaces/{namespace}/{}",
        plural(&case.kind)?
    );
    let dry_run = "dryRun=All&fieldValidation=Strict";
    let answer = match &case.old {
        None => {
            send(
                client,
                "POST",
                format!("{collection}?{dry_run}"),
                &object(case, &case.spec, None),
            )
            .await
        }
        Some(old) => {
            let created = send(client, "POST", collection.clone(), &object(case, old, None))
                .await
                .map_err(|e| format!("{}: creating its old spec: {e}", case.name))?;
            let created: Value = serde_json::from_str(&created).map_err(|e| e.to_string())?;
            let rv = created["metadata"]["resourceVersion"].as_str();
            send(
                client,
                "PUT",
                format!("{collection}/{}?{dry_run}", case.name),
                &object(case, &case.spec, rv),
            )
            .await
        }
    };
    Ok(match answer {
        Ok(_) => Some("accepted, but must be refused".to_owned()),
        Err(kube::Error::Api(status)) => {
            if status.code != case.code {
                Some(format!(
                    "HTTP {} instead of {}: {}",
                    status.code, case.code, status.message
                ))
            } else if !status.message.contains(&case.expect) {
                Some(format!(
                    "message lacks {:?}: {}",
                    case.expect, status.message
                ))
            } else {
                None
            }
        }
        Err(other) => return Err(format!("{}: {other}", case.name)),
    })
}

async fn scenario(client: &Client, namespace: &str) -> Result<(), String> {
    let matrix = crd_admission::matrix().map_err(|e| format!("cases.yaml: {e}"))?;
    let mut failures = Vec::new();
    let mut per_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for case in &matrix.cases {
        *per_kind.entry(case.kind.as_str()).or_default() += 1;
        match run_case(client, namespace, case).await? {
            None => println!("ok   {:<16} {}", case.kind, case.name),
            Some(why) => {
                println!("FAIL {} {}: {why}", case.kind, case.name);
                failures.push(format!("{} ({}): {why}", case.name, case.kind));
            }
        }
    }
    println!("admission cases per kind: {per_kind:?}");
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} admission cases failed on the API server:\n{}",
            failures.len(),
            matrix.cases.len(),
            failures.join("\n")
        ))
    }
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn api_server_refuses_every_admission_case_with_its_message() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let namespace = plane.namespace("admission").await.unwrap();
    if let Err(message) = scenario(&plane.client(), &namespace).await {
        panic!("{message}");
    }
}
