//! The earlier run a scheduled run is compared with: its findings, read from its report
//! ConfigMap, become the new run's `RunInput::earlier` (its report then ends with what changed).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use tracing::warn;

use crate::store::configmap::{configmap_value, report_configmap_name};
use quarry_api::ResearchRun;
use quarry_engine::research::state::Earlier;
use quarry_engine::store::keys::FINDINGS_KEY;

/// The findings of run `name` in `namespace`, or `None` (logged) when they cannot be read: a
/// comparison is a bonus, never a reason for the new run to fail. Reports kept in an object
/// store are not compared (their bucket is the profile's, read by the run's own store).
pub async fn earlier_findings(client: &Client, namespace: &str, name: &str) -> Option<Earlier> {
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), namespace);
    let earlier = match runs.get_opt(name).await {
        Ok(Some(run)) => run,
        Ok(None) => return None,
        Err(e) => {
            warn!(run = %name, error = %e, "reading the run to compare with");
            return None;
        }
    };
    let date = earlier
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| format!("run {name}"));
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = match configmaps.get_opt(&report_configmap_name(name)).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return None,
        Err(e) => {
            warn!(run = %name, error = %e, "reading the report to compare with");
            return None;
        }
    };
    let bytes = configmap_value(&cm, FINDINGS_KEY, FINDINGS_KEY)
        .ok()
        .flatten()?;
    let findings: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(Earlier::from_findings(&findings, &date))
}
