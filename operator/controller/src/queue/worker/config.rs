//! A worker's configuration: its flags and environment, its consumer name, and the keys it opens from a task.

use std::net::SocketAddr;
use std::time::Duration;

use crate::engine_builder::ApiKey;
use crate::queue::protocol::reasons::SECRET_UNAVAILABLE;
use crate::queue::seal::{SEALING_KEY_ENV, SealError, SealingKey};
use crate::research_run::secret_refs;
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
    /// File of the key the operator seals operator runs' API keys with (the chart mounts it);
    /// without it the worker runs standalone runs' tasks only.
    #[arg(long, env = "QUARRY_SEALING_KEY_FILE")]
    pub sealing_key_file: Option<std::path::PathBuf>,
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
    pub sealing_key_file: Option<std::path::PathBuf>,
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
            sealing_key_file: args.sealing_key_file.clone(),
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

/// Pure: the API keys the operator sealed for an operator run's task, or what the worker must
/// be given. `raw` is the task message exactly as read from the stream (the keys are sealed
/// over it). The operator checked each Secret's opt-in and hosts before sealing, and a task
/// changed since does not open, so the worker uses them as they are.
pub fn sealed_keys(
    sealing: Option<&SealingKey>,
    sealed: Option<&[u8]>,
    raw: &[u8],
    namespace: &str,
    consumer: &str,
) -> Result<Vec<(SecretKeyRef, ApiKey)>, Failure> {
    let unavailable = |message: String| Failure::new(SECRET_UNAVAILABLE, message);
    let what =
        format!("the API keys the operator sealed for this task of namespace \"{namespace}\"");
    let Some(sealing) = sealing else {
        return Err(unavailable(format!(
            "worker {consumer} cannot open {what}: it has no sealing key; set {SEALING_KEY_ENV} (or --sealing-key-file) to a file holding the operator's sealing key (the chart mounts its Secret in the operator and worker Pods with workers.enabled)"
        )));
    };
    let Some(sealed) = sealed else {
        return Err(unavailable(format!(
            "worker {consumer} got no sealed API keys with this task of namespace \"{namespace}\"; run the operator and the workers at the same version"
        )));
    };
    sealing.open(sealed, raw).map_err(|e| {
        unavailable(match e {
            SealError::WrongKey { sealed_with, have } => format!(
                "worker {consumer} cannot open {what}: they were sealed with sealing key {sealed_with}, but this worker's key ({SEALING_KEY_ENV}={}) is {have}; set {SEALING_KEY_ENV} to a file holding the operator's sealing key (with the chart, the operator and workers mount the same Secret, workers.sealingKey.existingSecret if set)",
                sealing.source()
            ),
            other => format!("worker {consumer} cannot open {what}: {other}"),
        })
    })
}
