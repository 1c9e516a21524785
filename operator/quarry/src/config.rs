//! Layered configuration: defaults < config file < environment < flags.
//!
//! Every layer is a [`Layer`] of optional values; [`Settings::resolve`] merges them in order and
//! validates the result, naming the setting and the layer that supplied a bad value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Prefix of every environment variable Quarry reads.
pub const ENV_PREFIX: &str = "QUARRY_";

/// A configuration error that names the setting and where its value came from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("setting `{setting}` (from {origin}): {message}")]
    Invalid {
        setting: String,
        origin: String,
        message: String,
    },
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
}

pub use quarry_operator::tracing_setup::LogFormat;

/// One layer of settings: every value optional, as given by one source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layer {
    /// `text` or `json`.
    pub log_format: Option<String>,
    /// A tracing filter such as `info` or `quarry=debug`.
    pub log_level: Option<String>,
    /// Address of the HTTP server (metrics, health).
    pub bind: Option<String>,
    /// Standalone: the ResearchProfile manifest to use.
    pub profile: Option<String>,
    /// Standalone: where checkpoints and artifacts of runs are kept.
    pub state_dir: Option<String>,
    /// Standalone: `quick` or `deep`.
    pub mode: Option<String>,
    /// Standalone: a time limit such as `30m`.
    pub timeout: Option<String>,
    /// Standalone: a cost limit in USD such as `0.50`.
    pub max_cost_usd: Option<String>,
    /// Redis URL (`redis://host:6379/0`) for the shared search and page cache.
    pub redis_url: Option<String>,
    /// Hosts (exact names or IP literals, comma-separated) exempt from the egress guard that
    /// refuses loopback, private, link-local, metadata and cluster-internal addresses for every
    /// outbound call (models, search, providers, pages); e.g. an in-cluster model server.
    pub egress_exempt_hosts: Option<String>,
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Default,
    File,
    Env,
    Flag,
}

/// Validated settings of the binary.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub log_format: LogFormat,
    pub log_level: String,
    pub bind: SocketAddr,
    pub profile: Option<PathBuf>,
    pub state_dir: Option<PathBuf>,
    pub mode: quarry_engine::research::machine::state::Mode,
    pub timeout: Option<Duration>,
    pub max_cost_usd: Option<String>,
    pub redis_url: Option<String>,
    /// Hosts exempt from the egress guard (profiles can only narrow this for page fetches).
    pub egress_exempt_hosts: Vec<String>,
}

impl Layer {
    /// The built-in defaults.
    pub fn defaults() -> Self {
        Self {
            log_format: Some("text".into()),
            log_level: Some("info".into()),
            bind: Some("0.0.0.0:8080".into()),
            mode: Some("deep".into()),
            ..Self::default()
        }
    }

    /// Reads a YAML config file; unknown keys are errors so typos do not pass silently.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str(&text).map_err(|e| ConfigError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// Reads `QUARRY_*` variables from the given environment (e.g. `QUARRY_LOG_FORMAT`).
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        let get = |name: &str| {
            env.get(&format!("{ENV_PREFIX}{name}"))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        Self {
            log_format: get("LOG_FORMAT"),
            log_level: get("LOG_LEVEL"),
            bind: get("BIND"),
            profile: get("PROFILE"),
            state_dir: get("STATE_DIR"),
            mode: get("MODE"),
            timeout: get("TIMEOUT"),
            max_cost_usd: get("MAX_COST_USD"),
            redis_url: get("REDIS_URL"),
            egress_exempt_hosts: get("EGRESS_EXEMPT_HOSTS"),
        }
    }
}

/// Environment variable name of a setting, for messages.
fn env_name(setting: &str) -> String {
    let mut out = String::from(ENV_PREFIX);
    for c in setting.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

fn origin_text(origin: Origin, setting: &str) -> String {
    match origin {
        Origin::Default => "the built-in default".to_string(),
        Origin::File => format!("the config file key `{setting}`"),
        Origin::Env => format!("environment variable {}", env_name(setting)),
        Origin::Flag => format!("flag --{}", kebab(setting)),
    }
}

fn kebab(setting: &str) -> String {
    let mut out = String::new();
    for c in setting.chars() {
        if c.is_ascii_uppercase() {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

impl Settings {
    /// Merges the layers in order (later wins) and validates the result.
    pub fn resolve(layers: &[(Origin, Layer)]) -> Result<Self, ConfigError> {
        let pick = |f: fn(&Layer) -> &Option<String>| -> Option<(String, Origin)> {
            layers
                .iter()
                .rev()
                .find_map(|(o, l)| f(l).clone().map(|v| (v, *o)))
        };
        let invalid = |setting: &str, origin: Origin, message: String| ConfigError::Invalid {
            setting: setting.to_string(),
            origin: origin_text(origin, setting),
            message,
        };
        let log_format = match pick(|l| &l.log_format) {
            None => LogFormat::Text,
            Some((v, o)) => match v.as_str() {
                "text" => LogFormat::Text,
                "json" => LogFormat::Json,
                other => {
                    return Err(invalid(
                        "logFormat",
                        o,
                        format!("`{other}` is not one of text, json"),
                    ));
                }
            },
        };
        let log_level = pick(|l| &l.log_level)
            .map(|(v, _)| v)
            .unwrap_or_else(|| "info".into());
        let bind = match pick(|l| &l.bind) {
            None => SocketAddr::from(([0, 0, 0, 0], 8080)),
            Some((v, o)) => v.parse().map_err(|e| {
                invalid(
                    "bind",
                    o,
                    format!("`{v}` is not an address like 0.0.0.0:8080 ({e})"),
                )
            })?,
        };
        let mode = match pick(|l| &l.mode) {
            None => quarry_engine::research::machine::state::Mode::Deep,
            Some((v, o)) => match v.as_str() {
                "quick" => quarry_engine::research::machine::state::Mode::Quick,
                "deep" => quarry_engine::research::machine::state::Mode::Deep,
                other => {
                    return Err(invalid(
                        "mode",
                        o,
                        format!("`{other}` is not one of quick, deep"),
                    ));
                }
            },
        };
        let timeout = match pick(|l| &l.timeout) {
            None => None,
            Some((v, o)) => Some(
                quarry_api::values::parse_duration(&v)
                    .map_err(|e| invalid("timeout", o, e.to_string()))?,
            ),
        };
        let max_cost_usd = match pick(|l| &l.max_cost_usd) {
            None => None,
            Some((v, o)) => {
                quarry_api::values::parse_usd_micros(&v)
                    .map_err(|e| invalid("maxCostUsd", o, e.to_string()))?;
                Some(v)
            }
        };
        let redis_url = match pick(|l| &l.redis_url) {
            None => None,
            Some((v, o)) => {
                if !(v.starts_with("redis://") || v.starts_with("rediss://")) {
                    return Err(invalid(
                        "redisUrl",
                        o,
                        format!("{v:?} is not a redis:// or rediss:// URL"),
                    ));
                }
                Some(v)
            }
        };
        let egress_exempt_hosts = match pick(|l| &l.egress_exempt_hosts) {
            None => Vec::new(),
            Some((v, o)) => {
                let hosts: Vec<String> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(str::to_string)
                    .collect();
                if let Some(bad) = hosts
                    .iter()
                    .find(|h| h.contains(['/', ':', '@', ' ']) && !h.starts_with('['))
                {
                    return Err(invalid(
                        "egressExemptHosts",
                        o,
                        format!(
                            "{bad:?} is not a bare host name or IP literal (no scheme, port or path)"
                        ),
                    ));
                }
                hosts
            }
        };
        Ok(Self {
            egress_exempt_hosts,
            redis_url,
            log_format,
            log_level,
            bind,
            profile: pick(|l| &l.profile).map(|(v, _)| PathBuf::from(v)),
            state_dir: pick(|l| &l.state_dir).map(|(v, _)| PathBuf::from(v)),
            mode,
            timeout,
            max_cost_usd,
        })
    }
}

#[cfg(test)]
mod tests;
