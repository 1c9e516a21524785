//! `SearchEngine`: a SearXNG instance the operator manages as shared search infrastructure
//! (started lazily, shared by every run, alive while used).

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::values::{DURATION_PATTERN, IMAGE_PATTERN};

/// Default SearXNG image; pin a dated tag in production (`spec.image`).
pub const DEFAULT_SEARXNG_IMAGE: &str = "docker.io/searxng/searxng:latest";
/// Default time without active runs before the instance scales to zero.
pub const DEFAULT_IDLE_TIMEOUT: &str = "10m";
/// Port SearXNG listens on inside its container and Service.
pub const SEARXNG_PORT: i32 = 8080;
/// Pattern of a SearXNG engine name (`google`, `duckduckgo`, `stackexchange`, `arch linux wiki`).
pub const ENGINE_NAME_PATTERN: &str = r"^[a-z0-9][a-z0-9 ._-]{0,62}$";

/// A SearXNG instance the operator runs for ResearchRuns: Deployment, Service, settings
/// ConfigMap and secret-key Secret, scaled from zero while runs use it.
// Several printcolumns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "quarry.dev",
    version = "v1alpha1",
    kind = "SearchEngine",
    plural = "searchengines",
    namespaced,
    shortname = "se",
    category = "quarry",
    status = "SearchEngineStatus",
    derive = "PartialEq",
    doc = "A SearXNG instance Quarry manages for its ResearchRuns, scaled from zero while used.",
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".status.readyReplicas"
    ),
    printcolumn(name = "Active", type_ = "integer", json_path = ".status.activeRuns"),
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct SearchEngineSpec {
    /// SearXNG container image (no whitespace: the Deployment would be refused later).
    #[serde(default = "default_image")]
    #[schemars(length(min = 1, max = 512), regex(pattern = IMAGE_PATTERN))]
    pub image: String,
    /// Replicas while at least one active run uses the engine (0 while idle).
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 1, max = 20))]
    pub replicas: i32,
    /// Time without active runs before scaling to zero, like "10m" or "1h".
    #[serde(default = "default_idle_timeout")]
    #[schemars(regex(pattern = DURATION_PATTERN), length(max = 32))]
    pub idle_timeout: String,
    /// Engines to keep from SearXNG's defaults, with per-engine settings; empty keeps the list
    /// shipped in `config/searxng/settings.yml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 128))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["name".into()]))]
    pub engines: Vec<EngineSpec>,
    /// Settings merged over the rendered settings.yml (objects merge key by key; other values
    /// replace). `search.formats` keeps `json` and the limiter stays off whatever is set here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub settings_overrides: Option<serde_json::Value>,
    /// Resources of the SearXNG container (defaults: 100m CPU, 256Mi memory; limit 1Gi).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// One engine of SearXNG's catalogue.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EngineSpec {
    /// Engine name as SearXNG spells it.
    #[schemars(regex(pattern = ENGINE_NAME_PATTERN))]
    pub name: String,
    /// Keep the engine configured but do not query it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Per-engine timeout in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.5, max = 30.0))]
    pub timeout: Option<f64>,
    /// Weight of the engine's results in SearXNG's ranking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 10.0))]
    pub weight: Option<f64>,
}

/// Observed state of a SearchEngine.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SearchEngineStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (plus `Reconciling` and `Stalled` for kstatus).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Replicas the Deployment is asked for now (0 while idle).
    #[serde(default)]
    pub replicas: i32,
    /// Replicas that pass their readiness probe.
    #[serde(default)]
    pub ready_replicas: i32,
    /// In-cluster URL of the instance (`http://<name>-searxng.<namespace>.svc:8080`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Non-terminal ResearchRuns whose profile uses this engine.
    #[serde(default)]
    pub active_runs: i32,
    /// Last time an active run used the engine; idle time counts from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_time: Option<Time>,
    /// Health of each engine as the operator's searches saw it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<EngineHealthStatus>,
}

/// Health of one SearXNG engine.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct EngineHealthStatus {
    /// Engine name.
    pub name: String,
    /// `Healthy`, `Captcha`, `Suspended`, `Timeout`, `Empty` or `Error`.
    pub state: String,
    /// Answers in a row in which the engine failed.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// The last failure message, as SearXNG reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When the engine entered its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

fn default_image() -> String {
    DEFAULT_SEARXNG_IMAGE.to_string()
}

fn default_replicas() -> i32 {
    1
}

fn default_idle_timeout() -> String {
    DEFAULT_IDLE_TIMEOUT.to_string()
}

/// An object whose fields the API server keeps as given (SearXNG's settings are open-ended).
fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

impl SearchEngine {
    /// Name of the Deployment, Service, ConfigMap and Secret of this engine.
    pub fn child_name(name: &str) -> String {
        format!("{name}-searxng")
    }

    /// The in-cluster base URL of the engine `name` in `namespace`.
    pub fn service_url(name: &str, namespace: &str) -> String {
        format!(
            "http://{}.{namespace}.svc:{SEARXNG_PORT}",
            Self::child_name(name)
        )
    }
}

#[cfg(test)]
mod tests;
