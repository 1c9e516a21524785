//! A run's limits, and how they layer over its profile's (a run may only lower them).

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::DEFAULT_MAX_CONCURRENT_RESEARCHERS;
use crate::ApiError;
use crate::values::{DURATION_PATTERN, USD_PATTERN, parse_duration, parse_usd_micros};

/// Limits of a run; the same shape serves as the profile's defaults.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct RunLimits {
    /// Researchers running in parallel (built-in default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_concurrent_researchers: Option<u32>,
    /// Maximum research rounds (deep mode; default: the evaluator's target rounds + 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub max_rounds: Option<u32>,
    /// Maximum cost in USD as a decimal string, e.g. "2.50".
    #[serde(
        rename = "maxCostUSD",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 16), regex(pattern = USD_PATTERN))]
    pub max_cost_usd: Option<String>,
    /// Maximum input + output tokens over all model calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u64>,
    /// Wall-clock limit such as "30m" or "1h30m".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), regex(pattern = DURATION_PATTERN))]
    pub timeout: Option<String>,
}

/// Limits after layering run over profile over built-in defaults, parsed into usable values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectiveLimits {
    /// Researchers running in parallel.
    pub max_concurrent_researchers: u32,
    /// Maximum rounds, if capped.
    pub max_rounds: Option<u32>,
    /// Maximum cost in micro-USD, if capped.
    pub max_cost_micro_usd: Option<u64>,
    /// Maximum tokens, if capped.
    pub max_tokens: Option<u64>,
    /// Wall-clock limit, if capped.
    pub timeout: Option<Duration>,
}

impl RunLimits {
    /// Field-wise `self` where set, else `fallback`.
    pub fn or(&self, fallback: &RunLimits) -> RunLimits {
        RunLimits {
            max_concurrent_researchers: self
                .max_concurrent_researchers
                .or(fallback.max_concurrent_researchers),
            max_rounds: self.max_rounds.or(fallback.max_rounds),
            max_cost_usd: self
                .max_cost_usd
                .clone()
                .or_else(|| fallback.max_cost_usd.clone()),
            max_tokens: self.max_tokens.or(fallback.max_tokens),
            timeout: self.timeout.clone().or_else(|| fallback.timeout.clone()),
        }
    }

    /// Parses the limits, filling `maxConcurrentResearchers` with the built-in default.
    pub fn effective(&self) -> Result<EffectiveLimits, ApiError> {
        Ok(EffectiveLimits {
            max_concurrent_researchers: self
                .max_concurrent_researchers
                .unwrap_or(DEFAULT_MAX_CONCURRENT_RESEARCHERS),
            max_rounds: self.max_rounds,
            max_cost_micro_usd: self
                .max_cost_usd
                .as_deref()
                .map(parse_usd_micros)
                .transpose()?,
            max_tokens: self.max_tokens,
            timeout: self.timeout.as_deref().map(parse_duration).transpose()?,
        })
    }
}

/// The smaller of two caps, `None` meaning uncapped.
pub(super) fn stricter<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A limit a run sets above its profile's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitAbove {
    /// Field name under `limits`, e.g. `maxCostUSD`.
    pub field: &'static str,
    /// The run's value, as written.
    pub run: String,
    /// The profile's value, as written.
    pub profile: String,
}
