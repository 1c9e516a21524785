//! The earlier run a scheduled run is compared with: its findings, read from where its report is
//! (its report ConfigMap or the object store), become the new run's `RunInput::earlier` (its
//! report then ends with what changed).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};
use tracing::warn;

use crate::store::configmap::{configmap_value, report_configmap_name};
use crate::store::object::{Bucket, object_name};
use quarry_api::ResearchRun;
use quarry_engine::research::machine::state::Earlier;
use quarry_engine::store::keys::FINDINGS_KEY;

/// Pure: the URL of `findings.json` beside a report stored at `report_url` (both live in the
/// run's directory of the object store).
pub fn findings_url(report_url: &str) -> Option<String> {
    let (dir, _) = report_url.rsplit_once('/')?;
    Some(format!("{dir}/{}", object_name(FINDINGS_KEY, "")))
}

/// The findings of run `name` in `namespace`, or `None` (logged) when they cannot be read: a
/// comparison is a bonus, never a reason for the new run to fail. `bucket` is the new run's
/// object store (a schedule's runs share their profile, so the earlier report is in it).
pub async fn earlier_findings(
    client: &Client,
    namespace: &str,
    name: &str,
    bucket: Option<&Bucket>,
) -> Option<Earlier> {
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
    let report = earlier.status.as_ref().and_then(|s| s.report.clone());
    let bytes = match findings_from_configmap(client, namespace, name).await {
        Some(bytes) => bytes,
        None => {
            let url = report
                .as_ref()?
                .object_url
                .as_deref()
                .and_then(findings_url)?;
            let Some(bucket) = bucket else {
                warn!(run = %name, url = %url, "the earlier report is in an object store this run has none of");
                return None;
            };
            match bucket.read_url(&url).await {
                Ok(found) => found?,
                Err(e) => {
                    warn!(run = %name, error = %e, "reading the findings to compare with");
                    return None;
                }
            }
        }
    };
    let findings: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(Earlier::from_findings(&findings, &date))
}

/// `findings.json` from the run's report ConfigMap, when it is there.
async fn findings_from_configmap(client: &Client, namespace: &str, name: &str) -> Option<Vec<u8>> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let cm = match configmaps.get_opt(&report_configmap_name(name)).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return None,
        Err(e) => {
            warn!(run = %name, error = %e, "reading the report to compare with");
            return None;
        }
    };
    configmap_value(&cm, FINDINGS_KEY, FINDINGS_KEY)
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests;
