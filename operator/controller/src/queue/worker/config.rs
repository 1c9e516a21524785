//! A worker's configuration: its flags and environment, its consumer name, and the keys it reads from the cluster.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;

use crate::engine_builder::ApiKey;
use crate::queue::protocol::reasons::SECRET_UNAVAILABLE;
use crate::research_run::{extract_key, secret_refs};
use quarry_api::{ResearchProfileSpec, SecretKeyRef};
use quarry_engine::research::machine::state::Failure;

/// Flags of `quarry worker`.
#[derive(clap::Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Redis URL of the work queue (also QUARRY_REDIS_URL); the search and page cache lives there too.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Researcher tasks run at once.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub concurrency: u32,
    /// A task whose worker stayed silent this long is taken over by another (e.g. 30s, 5m).
    /// Running tasks are refreshed three times per timeout however long they run, so it bounds
    /// only how long a killed worker's task waits; a Redis outage longer than it may have a live
    /// worker's task taken over (that worker then stops its copy).
    #[arg(long, default_value = "30s")]
    pub visibility_timeout: String,
    /// Consumer name in the group (default: $POD_NAME, else $HOSTNAME-<pid>).
    #[arg(long)]
    pub consumer: Option<String>,
    /// Address of /livez, /readyz and /metrics (default: the `bind` setting, 0.0.0.0:8080).
    #[arg(long)]
    pub listen: Option<String>,
    /// On SIGTERM, how long running tasks may take to finish before they are handed back.
    #[arg(long, default_value = "20s")]
    pub drain_timeout: String,
}

/// Validated configuration of a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    pub redis_url: String,
    pub concurrency: usize,
    pub visibility_timeout: Duration,
    pub consumer: String,
    pub listen: String,
    pub drain_timeout: Duration,
}

impl WorkerConfig {
    /// The configuration from flags, the layered settings' Redis URL and bind address.
    pub fn from_args(
        args: &WorkerArgs,
        redis_url: Option<String>,
        bind: SocketAddr,
    ) -> Result<Self, String> {
        let redis_url = redis_url.ok_or(
            "setting `redisUrl` is required: pass --redis-url redis://HOST:6379/0 or set QUARRY_REDIS_URL",
        )?;
        let duration = |flag: &str, v: &str| {
            quarry_api::values::parse_duration(v).map_err(|e| format!("--{flag}: {e}"))
        };
        let visibility_timeout = duration("visibility-timeout", &args.visibility_timeout)?;
        if visibility_timeout < Duration::from_secs(1) {
            return Err("--visibility-timeout: must be at least 1s".into());
        }
        let consumer = match &args.consumer {
            Some(c) => c.clone(),
            None => default_consumer(|k| std::env::var(k).ok()),
        };
        if consumer.is_empty() || consumer.len() > 200 {
            return Err("--consumer: must be 1..=200 characters".into());
        }
        Ok(Self {
            redis_url,
            concurrency: args.concurrency as usize,
            visibility_timeout,
            consumer,
            listen: args.listen.clone().unwrap_or_else(|| bind.to_string()),
            drain_timeout: duration("drain-timeout", &args.drain_timeout)?,
        })
    }
}

/// The consumer name: the pod's name in a cluster (stable for its life), else host and pid.
pub fn default_consumer(env: impl Fn(&str) -> Option<String>) -> String {
    if let Some(pod) = env("POD_NAME").filter(|p| !p.is_empty()) {
        return pod;
    }
    let host = env("HOSTNAME")
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_string());
    format!("{host}-{}", std::process::id())
}

/// Pure: the keys a standalone task needs from the worker's environment, and the first one
/// missing, as `quarry run` reads them: each model tier's `apiKeyEnv`, and `QUARRY_SECRET_*`
/// for every other Secret reference (search providers, sources).
pub fn missing_env_key(
    profile: &ResearchProfileSpec,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    for (tier, model) in profile.models.iter() {
        if let Some(name) = &model.api_key_env
            && env(name).is_none()
        {
            return Some((name.clone(), format!("models.{}.apiKeyEnv", tier.as_str())));
        }
    }
    secret_refs(profile)
        .into_iter()
        .filter(|(field, _)| !field.starts_with("models."))
        .map(|(field, r)| (crate::engine_builder::sources::secret_env_var(&r), field))
        .find(|(var, _)| env(var).is_none())
}

/// Reads every Secret the profile references in `namespace`, or says what the worker lacks.
pub async fn cluster_keys(
    client: &kube::Client,
    namespace: &str,
    profile_name: &str,
    profile: &ResearchProfileSpec,
    consumer: &str,
) -> Result<Vec<(SecretKeyRef, ApiKey)>, Failure> {
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace);
    let mut fetched: BTreeMap<String, Secret> = BTreeMap::new();
    let mut keys = Vec::new();
    for crate::research_run::SecretUse {
        field,
        key_ref: r,
        host,
    } in crate::research_run::secret_uses(profile)
    {
        let where_ = format!(
            "Secret \"{}\" in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" {field})",
            r.name
        );
        if !fetched.contains_key(&r.name) {
            let secret = api.get(&r.name).await.map_err(|e| {
                let message = match &e {
                    kube::Error::Api(s) if s.code == 403 => format!(
                        "worker {consumer} may not read {where_}: grant the worker's ServiceAccount `get` on secrets in namespace \"{namespace}\" (chart values workers.enabled and rbac.create; the chart grants it in each namespace of watchNamespaces, or in all when that is empty)"
                    ),
                    kube::Error::Api(s) if s.code == 404 => format!(
                        "worker {consumer} found no {where_}; create it with key \"{}\"",
                        r.key
                    ),
                    other => format!("worker {consumer} could not read {where_}: {other}"),
                };
                Failure::new(SECRET_UNAVAILABLE, message)
            })?;
            fetched.insert(r.name.clone(), secret);
        }
        let secret = &fetched[&r.name];
        // The same opt-in the operator checked before queueing: a worker never sends a Secret
        // that did not opt in for this host either.
        crate::research_run::opted_in(secret, &host, profile_name, &field)
            .map_err(|stall| Failure::new(SECRET_UNAVAILABLE, stall.message))?;
        let key = extract_key(secret, &r, profile_name, &field)
            .map_err(|stall| Failure::new(SECRET_UNAVAILABLE, stall.message))?;
        keys.push((r, key));
    }
    Ok(keys)
}
