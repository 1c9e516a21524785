//! `ResearchProfile`: how to research (models, prices, search endpoint, limits, fetch policy).
//!
//! The same manifest drives standalone mode (`quarry run --profile profile.yaml`), so every
//! default is a serde default too: a plain YAML file deserializes to the same values the API
//! server would store.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ApiError;
use super::run::RunLimits;
use super::values::{
    DNS1123_SUBDOMAIN_PATTERN, ENV_VAR_PATTERN, HOST_PATTERN, HTTP_URL_PATTERN, SECRET_KEY_PATTERN,
    USD_PATTERN, parse_usd_micros,
};

/// CEL rule on `spec.search`: exactly one of `searchEngineRef` and `url`, except that a block
/// configuring only `providers` or `sources` may name neither (SearXNG is then the SearchEngine
/// named `default`).
pub const SEARCH_EXACTLY_ONE_RULE: &str = "has(self.searchEngineRef) ? !has(self.url) : (has(self.url) || has(self.providers) || has(self.sources))";
/// Message for [`SEARCH_EXACTLY_ONE_RULE`].
pub const SEARCH_EXACTLY_ONE_MESSAGE: &str = "exactly one of searchEngineRef or url must be set (both may be left out only when providers or sources are set)";
/// Name-shaped Stack Exchange site parameter (`stackoverflow`, `serverfault`, `unix`,
/// `math.stackexchange`); the engine checks the same pattern at run time.
pub use quarry_vocab::patterns::STACK_EXCHANGE_SITE as STACK_EXCHANGE_SITE_PATTERN;

/// Default per-call model timeout, in seconds (a 2-core machine needs minutes for 8k tokens).
pub const DEFAULT_MODEL_TIMEOUT_SECONDS: u32 = 120;
/// Default context window assumed for a model, in tokens.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8192;
/// Default cap on page characters handed to the model per page.
pub const DEFAULT_PAGE_CHARS_FOR_MODEL: u32 = 6000;
/// Default cap on fetched page bytes.
pub const DEFAULT_MAX_PAGE_BYTES: u64 = 2 * 1024 * 1024;
/// Default cap on requests in flight to one host.
pub const DEFAULT_PER_HOST_CONCURRENCY: u32 = 2;
/// Default least time between request starts to one host, in milliseconds.
pub const DEFAULT_POLITENESS_DELAY_MILLIS: u32 = 500;
/// Name of the SearchEngine used when a profile names no search endpoint.
pub const DEFAULT_SEARCH_ENGINE: &str = "default";

/// How to research: model tiers, price table, search endpoint, default limits, fetch policy.
// Several printcolumns share `type_ = "string"`; clippy reads them as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "quarry.dev",
    version = "v1alpha1",
    kind = "ResearchProfile",
    plural = "researchprofiles",
    namespaced,
    shortname = "rp",
    category = "quarry",
    status = "ResearchProfileStatus",
    derive = "PartialEq",
    doc = "How Quarry researches: models, prices, search endpoint, limits and fetch policy.",
    printcolumn(
        name = "Model",
        type_ = "string",
        json_path = ".spec.models.primary.model"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ResearchProfileSpec {
    /// Model tiers tried in order: primary, then fallback; budget as the cost limit nears.
    pub models: ModelTiers,
    /// USD prices per million tokens, per model name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["model".into()]))]
    pub prices: Vec<ModelPrice>,
    /// Search endpoint; unset means the SearchEngine named `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search: Option<SearchEndpoint>,
    /// Default limits for runs using this profile (a run's own limits win field by field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<RunLimits>,
    /// What researchers may fetch and how much of it.
    #[serde(default)]
    pub fetch: FetchPolicy,
    /// How synthesis weighs evidence: per-source summaries and the optional model judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<EvidencePolicy>,
    /// Object storage for reports and artifacts: used by runs with `report.kind: objectStore`,
    /// and by any run for an artifact too large for a ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreSpec>,
}

/// Object-store URL: `s3://`, `gs://` or `az://` followed by a bucket (container) and an optional
/// key prefix.
pub const OBJECT_STORE_URL_PATTERN: &str = r"^(s3|gs|az)://[A-Za-z0-9][-A-Za-z0-9._]*(/[^\s]*)?$";

/// Where a profile's runs keep reports and artifacts in object storage (S3 and S3-compatible
/// servers, GCS, Azure Blob Storage).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStoreSpec {
    /// `s3://bucket/prefix`, `gs://bucket/prefix` or `az://container/prefix`. A run's objects are
    /// `<prefix>/<run report prefix>/<namespace>/<run>/`.
    #[schemars(length(min = 6, max = 1024), regex(pattern = OBJECT_STORE_URL_PATTERN))]
    pub url: String,
    /// Endpoint of an S3-compatible server (MinIO, Ceph RGW, Garage) or of an Azure-compatible one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub endpoint: Option<String>,
    /// Region (S3); S3-compatible servers usually accept any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub region: Option<String>,
    /// Allow a plain-HTTP `endpoint` (an S3-compatible server inside the cluster).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_http: bool,
    /// Secret in the profile's namespace whose keys are `object_store` options, e.g.
    /// `aws_access_key_id` and `aws_secret_access_key`, `google_service_account_key`, or
    /// `azure_storage_account_name` and `azure_storage_account_key`. Without it the store is
    /// reached without credentials (workload identity is not supported yet). The Secret must opt
    /// in: label `quarry.dev/credential: "true"`, annotation `quarry.dev/credential-hosts` naming
    /// the endpoint's host (or `amazonaws.com`, `storage.googleapis.com`, `blob.core.windows.net`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<SecretRef>,
}

/// Reference to a whole Secret in the profile's namespace (opted in like [`SecretKeyRef`]'s).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub name: String,
}

/// How synthesis treats evidence (per-page summaries before writing; the evidence gate's model judge).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EvidencePolicy {
    /// Summarize every page read, in parallel, before deep-mode synthesis (one call per page).
    #[serde(default = "default_true")]
    pub summarize_sources: bool,
    /// Ask the model whether each cited page supports its claim, after the lexical check (one
    /// small call per cited claim, at most 40).
    #[serde(default)]
    pub model_judge: bool,
}

/// The model tiers of a profile.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ModelTiers {
    /// Used for every call unless it fails or the budget nears.
    pub primary: ModelTier,
    /// Used when the primary fails after retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<ModelTier>,
    /// Used as `maxCostUSD` nears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<ModelTier>,
    /// Per-role primaries: a role listed here uses its own model first, then the tiers above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<RoleModels>,
}

/// Per-role model overrides.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RoleModels {
    /// The coordinator that plans the agenda.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planner: Option<ModelTier>,
    /// The agent researchers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub researcher: Option<ModelTier>,
    /// The lead evaluator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator: Option<ModelTier>,
    /// Per-document summaries and the citation judge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarizer: Option<ModelTier>,
    /// The final outputs (study, ideas, implementations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<ModelTier>,
}

/// Name of a model tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TierName {
    /// `models.primary`.
    Primary,
    /// `models.fallback`.
    Fallback,
    /// `models.budget`.
    Budget,
    /// `models.roles.planner`.
    Planner,
    /// `models.roles.researcher`.
    Researcher,
    /// `models.roles.evaluator`.
    Evaluator,
    /// `models.roles.summarizer`.
    Summarizer,
    /// `models.roles.writer`.
    Writer,
}

impl TierName {
    /// The field name in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Fallback => "fallback",
            Self::Budget => "budget",
            Self::Planner => "roles.planner",
            Self::Researcher => "roles.researcher",
            Self::Evaluator => "roles.evaluator",
            Self::Summarizer => "roles.summarizer",
            Self::Writer => "roles.writer",
        }
    }
}

impl ModelTiers {
    /// The configured tiers in router order (primary, fallback, budget), then the role overrides.
    pub fn iter(&self) -> impl Iterator<Item = (TierName, &ModelTier)> {
        let roles = self.roles.as_ref();
        let role = |name: TierName, pick: fn(&RoleModels) -> Option<&ModelTier>| {
            roles.and_then(pick).map(|t| (name, t))
        };
        [
            Some((TierName::Primary, &self.primary)),
            self.fallback.as_ref().map(|t| (TierName::Fallback, t)),
            self.budget.as_ref().map(|t| (TierName::Budget, t)),
            role(TierName::Planner, |r| r.planner.as_ref()),
            role(TierName::Researcher, |r| r.researcher.as_ref()),
            role(TierName::Evaluator, |r| r.evaluator.as_ref()),
            role(TierName::Summarizer, |r| r.summarizer.as_ref()),
            role(TierName::Writer, |r| r.writer.as_ref()),
        ]
        .into_iter()
        .flatten()
    }
}

/// API dialect of a model endpoint.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum Provider {
    /// OpenAI-compatible chat completions (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM, OpenRouter).
    #[default]
    Openai,
    /// Azure OpenAI: deployment in the path, `api-version` query, `api-key` header.
    AzureOpenai,
    /// Anthropic's native Messages API.
    Anthropic,
}

/// How tools are offered to the model.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ToolMode {
    /// Native `tools` / `tool_calls` of the chat API.
    #[default]
    Native,
    /// Prompt-level protocol: the model answers with one JSON action (small local models).
    JsonAction,
}

/// Label a Secret carries, with value `"true"`, to opt in to being used by Quarry: a Secret a
/// profile names without it is refused (`SecretNotOptedIn`).
pub const CREDENTIAL_LABEL: &str = "quarry.dev/credential";
/// Annotation of an opted-in Secret: comma-separated hosts its keys may be sent to (an entry
/// also covers its subdomains), e.g. `api.openai.com`. A profile pointing the Secret at any
/// other host is refused.
pub const CREDENTIAL_HOSTS_ANNOTATION: &str = "quarry.dev/credential-hosts";

/// Reference to a key in a Secret in the profile's namespace.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyRef {
    /// Secret name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// Key within the Secret's data.
    #[schemars(length(min = 1, max = 253), regex(pattern = SECRET_KEY_PATTERN))]
    pub key: String,
}

/// CEL rule on a model tier: Azure OpenAI needs its `apiVersion`.
pub const AZURE_API_VERSION_RULE: &str =
    "!has(self.provider) || self.provider != 'azureOpenai' || has(self.apiVersion)";
/// Message for [`AZURE_API_VERSION_RULE`].
pub const AZURE_API_VERSION_MESSAGE: &str =
    "provider azureOpenai needs apiVersion (e.g. 2024-10-21); model is the deployment name";

/// One model endpoint.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[x_kube(validation = Rule::new(AZURE_API_VERSION_RULE).message(AZURE_API_VERSION_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct ModelTier {
    /// API dialect.
    #[serde(default)]
    pub provider: Provider,
    /// Azure OpenAI's `api-version` (required for `azureOpenai`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub api_version: Option<String>,
    /// Base URL of the API, e.g. `https://api.openai.com/v1`.
    #[serde(rename = "baseURL")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub base_url: String,
    /// Model name sent in requests.
    #[schemars(length(min = 1, max = 256))]
    pub model: String,
    /// Secret holding the API key (cluster mode); local servers need none. The Secret must opt
    /// in: label `quarry.dev/credential: "true"`, annotation `quarry.dev/credential-hosts` naming
    /// the host of `baseURL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_secret_ref: Option<SecretKeyRef>,
    /// Environment variable holding the API key (standalone mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = ENV_VAR_PATTERN))]
    pub api_key_env: Option<String>,
    /// Native tool calls or the JSON action protocol.
    #[serde(default)]
    pub tool_mode: ToolMode,
    /// Ask for JSON output (`response_format`) where a JSON answer is expected.
    #[serde(default)]
    pub json_mode: bool,
    /// Per-call timeout in seconds.
    #[serde(default = "default_model_timeout")]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_seconds: u32,
    /// Context window in tokens (drives page truncation and the 55% scrape rule).
    #[serde(default = "default_context_window")]
    #[schemars(range(min = 512, max = 10_000_000))]
    pub context_window: u32,
    /// Output cap sent with every call (`max_tokens`); unset lets the client pick a safe cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_output_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 2.0))]
    pub temperature: Option<f64>,
    /// Stream answers (lets the client stop degenerate repetition early).
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Requests per minute the endpoint accepts; every run of the operator shares this limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000))]
    pub requests_per_minute: Option<u32>,
    /// Tokens (input and output) per minute the endpoint accepts, shared like the requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1_000_000_000))]
    pub tokens_per_minute: Option<u64>,
    /// Retries of one call on timeouts, 429 and 5xx (exponential backoff with jitter, honouring
    /// `Retry-After`) before the router moves to the next tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 10))]
    pub max_retries: Option<u32>,
    /// When the endpoint's circuit breaker opens and closes (default 5 failures, 60 s, 2 successes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuit_breaker: Option<CircuitBreakerSpec>,
}

/// Circuit breaker thresholds of a model endpoint.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CircuitBreakerSpec {
    /// Consecutive failures that open the circuit.
    #[serde(default = "default_failure_threshold")]
    #[schemars(range(min = 1, max = 100))]
    pub failure_threshold: u32,
    /// Seconds an open circuit refuses calls before trial calls.
    #[serde(default = "default_open_seconds")]
    #[schemars(range(min = 1, max = 3600))]
    pub open_seconds: u32,
    /// Successful trial calls that close the circuit again.
    #[serde(default = "default_success_threshold")]
    #[schemars(range(min = 1, max = 100))]
    pub success_threshold: u32,
}

fn default_failure_threshold() -> u32 {
    5
}

fn default_open_seconds() -> u32 {
    60
}

fn default_success_threshold() -> u32 {
    2
}

fn default_model_timeout() -> u32 {
    DEFAULT_MODEL_TIMEOUT_SECONDS
}

fn default_context_window() -> u32 {
    DEFAULT_CONTEXT_WINDOW
}

fn default_true() -> bool {
    true
}

/// Price of one model.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct ModelPrice {
    /// Model name as sent in requests.
    #[schemars(length(min = 1, max = 256))]
    pub model: String,
    /// USD per million input tokens, decimal string.
    #[serde(rename = "inputUSDPerMillion")]
    #[schemars(length(max = 16), regex(pattern = USD_PATTERN))]
    pub input_usd_per_million: String,
    /// USD per million output tokens, decimal string.
    #[serde(rename = "outputUSDPerMillion")]
    #[schemars(length(max = 16), regex(pattern = USD_PATTERN))]
    pub output_usd_per_million: String,
    /// USD per million input tokens served from the provider's prompt cache (default: the input
    /// price).
    #[serde(
        rename = "cachedInputUSDPerMillion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 16), regex(pattern = USD_PATTERN))]
    pub cached_input_usd_per_million: Option<String>,
}

impl ModelPrice {
    /// Input and output prices in micro-USD per million tokens.
    pub fn micro_usd_per_million(&self) -> Result<(u64, u64), ApiError> {
        Ok((
            parse_usd_micros(&self.input_usd_per_million)?,
            parse_usd_micros(&self.output_usd_per_million)?,
        ))
    }
}

/// Reference to a SearchEngine in the profile's namespace.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
pub struct SearchEngineRef {
    /// SearchEngine name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub name: String,
}

/// The search endpoint: a managed SearchEngine or an external SearXNG-compatible URL.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[x_kube(validation = Rule::new(SEARCH_EXACTLY_ONE_RULE).message(SEARCH_EXACTLY_ONE_MESSAGE))]
#[serde(rename_all = "camelCase")]
pub struct SearchEndpoint {
    /// A SearchEngine managed by the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_engine_ref: Option<SearchEngineRef>,
    /// Base URL of an external SearXNG (JSON API at `/search?format=json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub url: Option<String>,
    /// Search APIs tried in this order after SearXNG, one entry per kind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 3))]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["kind".into()]))]
    pub providers: Vec<SearchProvider>,
    /// Specialised sources researchers may query with their own tools; unset means both are
    /// enabled with their public endpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<SourcesSpec>,
}

/// Kind of a search API.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
pub enum SearchProviderKind {
    /// Brave Search API (`X-Subscription-Token`).
    Brave,
    /// Tavily (`Authorization: Bearer`).
    Tavily,
    /// Serper, Google results (`X-API-KEY`).
    Serper,
}

impl SearchProviderKind {
    /// The wire form, also the `engine` of the hits it returns.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Brave => "brave",
            Self::Tavily => "tavily",
            Self::Serper => "serper",
        }
    }
}

/// One search API used after SearXNG.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SearchProvider {
    /// Which API.
    pub kind: SearchProviderKind,
    /// Secret holding the API key; it must opt in like a model tier's (label
    /// `quarry.dev/credential: "true"`, annotation `quarry.dev/credential-hosts` naming the API's
    /// host).
    pub api_key_secret_ref: SecretKeyRef,
    /// Base URL of the API (a proxy, or a test server); unset means the provider's public one.
    #[serde(rename = "baseURL", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub base_url: Option<String>,
    /// Requests per minute this operator sends to the API (the plan's limit); unset means no
    /// client-side limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100_000))]
    pub requests_per_minute: Option<u32>,
}

/// The specialised sources of a profile.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SourcesSpec {
    /// Security advisories: OSV, NVD, CISA KEV and GitHub; unset means enabled with defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security: Option<SecuritySourcesSpec>,
    /// Stack Exchange questions; unset means enabled with defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_exchange: Option<StackExchangeSpec>,
}

/// Endpoints and credentials of the security advisory sources.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SecuritySourcesSpec {
    /// Offer the `security_search` tool.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// OSV API base URL (default `https://api.osv.dev`).
    #[serde(
        rename = "osvBaseURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub osv_base_url: Option<String>,
    /// NVD API base URL (default `https://services.nvd.nist.gov`).
    #[serde(
        rename = "nvdBaseURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub nvd_base_url: Option<String>,
    /// Secret holding an NVD API key (raises NVD's limit from 5 to 50 requests per 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvd_api_key_secret_ref: Option<SecretKeyRef>,
    /// URL of the CISA KEV JSON feed (default: CISA's public feed).
    #[serde(rename = "kevURL", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub kev_url: Option<String>,
    /// GitHub API base URL (default `https://api.github.com`).
    #[serde(
        rename = "githubBaseURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub github_base_url: Option<String>,
    /// Secret holding a GitHub token (raises GitHub's limit from 60 to 5000 requests per hour).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_token_secret_ref: Option<SecretKeyRef>,
}

impl Default for SecuritySourcesSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            osv_base_url: None,
            nvd_base_url: None,
            nvd_api_key_secret_ref: None,
            kev_url: None,
            github_base_url: None,
            github_token_secret_ref: None,
        }
    }
}

/// Endpoint and key of the Stack Exchange API.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StackExchangeSpec {
    /// Offer the `stackexchange` tool.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// API base URL (default `https://api.stackexchange.com`).
    #[serde(rename = "baseURL", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048), regex(pattern = HTTP_URL_PATTERN))]
    pub base_url: Option<String>,
    /// Site searched when the model names none (default `stackoverflow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = STACK_EXCHANGE_SITE_PATTERN))]
    pub default_site: Option<String>,
    /// Secret holding a Stack Apps key (raises the daily quota from 300 to 10,000 requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_secret_ref: Option<SecretKeyRef>,
}

impl Default for StackExchangeSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            base_url: None,
            default_site: None,
            key_secret_ref: None,
        }
    }
}

/// The resolved search endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SearchTarget<'a> {
    /// A SearchEngine by name.
    Engine(&'a str),
    /// An external URL.
    Url(&'a str),
}

/// What researchers may fetch.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct FetchPolicy {
    /// Hosts (exact names or IP literals) whose pages may be fetched even when they resolve to
    /// loopback/private/link-local addresses (an in-cluster service), among the hosts the
    /// operator exempts from its egress guard (egressExemptHosts): a profile can narrow the
    /// operator's exemptions, never add one, so metadata, loopback, private and
    /// cluster-internal hosts the operator does not exempt stay refused. This only lifts the
    /// guard; it does not restrict other hosts (see allowedDomains). Entries are bare host
    /// names or IP literals: no scheme, port or path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 256),
        inner(length(min = 1, max = 253), regex(pattern = HOST_PATTERN))
    )]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub allowed_hosts: Vec<String>,
    /// When non-empty, the only domains (and their subdomains) fetched; every other host,
    /// redirect targets included, is refused. This restricts and never lifts the address
    /// guard (see allowedHosts); deniedDomains wins over it. Entries are bare domains such as
    /// `example.org` (no scheme, port, path or wildcard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 1024),
        inner(length(min = 1, max = 253), regex(pattern = HOST_PATTERN))
    )]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub allowed_domains: Vec<String>,
    /// Domains (and their subdomains) never fetched, redirect targets included. Entries are bare
    /// domains such as `example.org` (no scheme, port, path or wildcard).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 1024),
        inner(length(min = 1, max = 253), regex(pattern = HOST_PATTERN))
    )]
    #[x_kube(merge_strategy = ListMerge::Set)]
    pub denied_domains: Vec<String>,
    /// Honour robots.txt (user-agent token `quarry`): disallowed URLs are refused, and a
    /// robots.txt that cannot be read because of a server error blocks its host for a minute.
    #[serde(default = "default_true")]
    pub respect_robots: bool,
    /// Requests in flight to one host at most, shared by every run of the operator.
    #[serde(default = "default_per_host_concurrency")]
    #[schemars(range(min = 1, max = 16))]
    pub per_host_concurrency: u32,
    /// Least milliseconds between request starts to one host (0 disables); a robots.txt
    /// Crawl-delay raises it for that host.
    #[serde(default = "default_politeness_delay")]
    #[schemars(range(min = 0, max = 60_000))]
    pub politeness_delay_millis: u32,
    /// Largest page body read, in bytes (after decompression).
    #[serde(default = "default_max_page_bytes")]
    #[schemars(range(min = 1024, max = 67_108_864))]
    pub max_page_bytes: u64,
    /// Characters of a page's extracted text handed to the model.
    #[serde(default = "default_page_chars")]
    #[schemars(range(min = 500, max = 200_000))]
    pub page_chars_for_model: u32,
}

fn default_max_page_bytes() -> u64 {
    DEFAULT_MAX_PAGE_BYTES
}

fn default_page_chars() -> u32 {
    DEFAULT_PAGE_CHARS_FOR_MODEL
}

fn default_per_host_concurrency() -> u32 {
    DEFAULT_PER_HOST_CONCURRENCY
}

fn default_politeness_delay() -> u32 {
    DEFAULT_POLITENESS_DELAY_MILLIS
}

impl Default for FetchPolicy {
    fn default() -> Self {
        Self {
            allowed_hosts: Vec::new(),
            allowed_domains: Vec::new(),
            denied_domains: Vec::new(),
            respect_robots: true,
            per_host_concurrency: DEFAULT_PER_HOST_CONCURRENCY,
            politeness_delay_millis: DEFAULT_POLITENESS_DELAY_MILLIS,
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
            page_chars_for_model: DEFAULT_PAGE_CHARS_FOR_MODEL,
        }
    }
}

/// Observed state of a profile.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResearchProfileStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

impl ResearchProfileSpec {
    /// The price entry of `model`, if listed.
    pub fn price_for(&self, model: &str) -> Option<&ModelPrice> {
        self.prices.iter().find(|p| p.model == model)
    }

    /// The API search providers, in the order they are tried after SearXNG.
    pub fn search_providers(&self) -> &[SearchProvider] {
        self.search.as_ref().map_or(&[], |s| s.providers.as_slice())
    }

    /// The specialised sources block, if the profile has one.
    pub fn sources(&self) -> Option<&SourcesSpec> {
        self.search.as_ref().and_then(|s| s.sources.as_ref())
    }

    /// The search endpoint, defaulting to the SearchEngine named `default`.
    pub fn search_target(&self) -> SearchTarget<'_> {
        match &self.search {
            Some(SearchEndpoint {
                url: Some(url),
                search_engine_ref: None,
                ..
            }) => SearchTarget::Url(url),
            Some(SearchEndpoint {
                search_engine_ref: Some(r),
                ..
            }) => SearchTarget::Engine(&r.name),
            _ => SearchTarget::Engine(DEFAULT_SEARCH_ENGINE),
        }
    }
}

impl ResearchProfile {
    /// Parses a ResearchProfile manifest (YAML or JSON), checking apiVersion and kind.
    ///
    /// Standalone mode reads profiles with this; the schema's patterns are not re-checked here,
    /// but values are parsed where they are used (prices, limits) and errors name the value.
    pub fn from_yaml(text: &str) -> Result<Self, ApiError> {
        use kube::Resource;
        let value: serde_yaml::Value = serde_yaml::from_str(text)?;
        // The derived Deserialize ignores apiVersion/kind, so check them separately.
        let types: kube::core::TypeMeta = serde_yaml::from_value(value.clone())?;
        let expected_api = Self::api_version(&());
        let expected_kind = Self::kind(&());
        if types.api_version != expected_api || types.kind != expected_kind {
            return Err(ApiError::WrongKind {
                expected: format!("{expected_api}/{expected_kind}"),
                found: format!("{}/{}", types.api_version, types.kind),
            });
        }
        let profile: ResearchProfile = serde_yaml::from_value(value)?;
        Ok(profile)
    }
}

#[cfg(test)]
mod tests;
