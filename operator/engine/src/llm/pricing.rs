//! Exact model pricing: decimal USD-per-million-token strings to integer pico-USD per token.
//!
//! A price of `P` USD per million tokens is `P / 1e6` USD = `P * 1e6` pico-USD per token, so a
//! decimal string with at most six fractional digits maps exactly to an integer number of pico-USD
//! per token (`"0.15"` -> 150,000). Costs are then `tokens * pico_per_token`, exact integers that
//! sum without rounding drift.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Fractional digits of USD-per-million that map to whole pico-USD per token.
const MAX_FRACTION_DIGITS: usize = 6;
/// Largest accepted price per million tokens (USD); guards against typos and overflow.
const MAX_USD_PER_MILLION: u64 = 1_000_000;
/// Largest price-table file read from disk.
const MAX_TABLE_BYTES: u64 = 1024 * 1024;

/// Errors parsing prices or loading a price table.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// The price string is not a plain non-negative decimal.
    #[error("invalid price `{value}`: {reason} (expected USD per million tokens like \"0.15\")")]
    Invalid { value: String, reason: String },
    /// The price table file could not be read.
    #[error("cannot read price table {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The price table is not valid YAML of the expected shape.
    #[error("invalid price table {origin}: {source}")]
    Yaml {
        origin: String,
        #[source]
        source: serde_yaml::Error,
    },
}

/// A decimal amount of USD per million tokens, stored exactly as pico-USD per token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UsdPerMillion {
    pico_per_token: u64,
}

impl UsdPerMillion {
    /// Zero (e.g. a local model).
    pub const ZERO: UsdPerMillion = UsdPerMillion { pico_per_token: 0 };

    /// Parses a decimal string such as `"0.15"`, `"2.5"`, `"10"` or `"0.000001"`.
    pub fn parse(value: &str) -> Result<Self, PriceError> {
        let invalid = |reason: &str| PriceError::Invalid {
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let s = value.trim();
        if s.is_empty() {
            return Err(invalid("empty"));
        }
        let (int_part, frac_part) = match s.split_once('.') {
            Some((i, f)) => (i, f),
            None => (s, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(invalid("no digits"));
        }
        if !int_part.chars().all(|c| c.is_ascii_digit())
            || !frac_part.chars().all(|c| c.is_ascii_digit())
        {
            return Err(invalid("only digits and one decimal point are allowed"));
        }
        let frac_trimmed = frac_part.trim_end_matches('0');
        if frac_trimmed.len() > MAX_FRACTION_DIGITS {
            return Err(invalid(
                "more than 6 fractional digits cannot be represented exactly",
            ));
        }
        let whole: u64 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| invalid("too large"))?
        };
        if whole > MAX_USD_PER_MILLION {
            return Err(invalid("larger than 1000000 USD per million tokens"));
        }
        let mut frac: u64 = 0;
        for (i, c) in frac_trimmed.chars().enumerate() {
            // Infallible: checked to be an ASCII digit above.
            let digit = u64::from(c.to_digit(10).unwrap_or(0));
            frac += digit * 10u64.pow((MAX_FRACTION_DIGITS - 1 - i) as u32);
        }
        Ok(UsdPerMillion {
            pico_per_token: whole * 1_000_000 + frac,
        })
    }

    /// Pico-USD per token.
    pub fn pico_usd_per_token(&self) -> u64 {
        self.pico_per_token
    }

    /// Exact cost of `tokens` tokens in pico-USD (saturating at `u64::MAX`, ~18 million USD).
    pub fn cost_pico_usd(&self, tokens: u64) -> u64 {
        let cost = u128::from(tokens) * u128::from(self.pico_per_token);
        u64::try_from(cost).unwrap_or(u64::MAX)
    }
}

impl fmt::Display for UsdPerMillion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.pico_per_token / 1_000_000;
        let frac = self.pico_per_token % 1_000_000;
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let digits = format!("{frac:06}");
        write!(f, "{whole}.{}", digits.trim_end_matches('0'))
    }
}

impl Serialize for UsdPerMillion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for UsdPerMillion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Strings are exact; bare YAML numbers are accepted through their shortest decimal
        // representation, which is the text the user wrote for any sane price.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Str(String),
            Int(u64),
            Float(f64),
        }
        let text = match Raw::deserialize(deserializer)? {
            Raw::Str(s) => s,
            Raw::Int(i) => i.to_string(),
            Raw::Float(x) => x.to_string(),
        };
        UsdPerMillion::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Input and output price of one model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Price of prompt tokens.
    pub input: UsdPerMillion,
    /// Price of completion tokens.
    pub output: UsdPerMillion,
    /// Price of prompt tokens served from the provider's cache (the input price when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<UsdPerMillion>,
}

impl Price {
    /// A free model (local inference).
    pub const FREE: Price = Price {
        input: UsdPerMillion::ZERO,
        output: UsdPerMillion::ZERO,
        cached_input: None,
    };

    /// Parses input and output prices from USD-per-million decimal strings.
    pub fn parse(input: &str, output: &str) -> Result<Price, PriceError> {
        Ok(Price {
            input: UsdPerMillion::parse(input)?,
            output: UsdPerMillion::parse(output)?,
            cached_input: None,
        })
    }

    /// Sets the cached-input price from a USD-per-million decimal string.
    pub fn with_cached_input(mut self, cached: &str) -> Result<Price, PriceError> {
        self.cached_input = Some(UsdPerMillion::parse(cached)?);
        Ok(self)
    }

    /// Exact cost in pico-USD when `cached` of the input tokens came from the prompt cache.
    pub fn cost_with_cache_pico_usd(
        &self,
        input_tokens: u64,
        cached: u64,
        output_tokens: u64,
    ) -> u64 {
        let cached = cached.min(input_tokens);
        let cached_price = self.cached_input.unwrap_or(self.input);
        self.input
            .cost_pico_usd(input_tokens - cached)
            .saturating_add(cached_price.cost_pico_usd(cached))
            .saturating_add(self.output.cost_pico_usd(output_tokens))
    }

    /// Exact cost in pico-USD of a call with these token counts.
    pub fn cost_pico_usd(&self, input_tokens: u64, output_tokens: u64) -> u64 {
        self.input
            .cost_pico_usd(input_tokens)
            .saturating_add(self.output.cost_pico_usd(output_tokens))
    }
}

/// The default price table shipped in `config/prices.yaml` (compiled in; a profile's own prices win).
pub fn default_prices() -> &'static PriceTable {
    static TABLE: std::sync::LazyLock<PriceTable> = std::sync::LazyLock::new(|| {
        // Checked by the `the_shipped_table_parses` test; an empty table is the safe fallback.
        PriceTable::from_yaml_str(
            include_str!("../../../../config/prices.yaml"),
            "config/prices.yaml",
        )
        .unwrap_or_default()
    });
    &TABLE
}

/// Model name -> price, loaded from YAML (see `config/prices.yaml`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable {
    /// When the list prices were recorded, e.g. `"2025-06-01"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// Where the prices come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Prices by model name.
    pub models: BTreeMap<String, Price>,
}

impl PriceTable {
    /// Parses a table from YAML text; `origin` names it in errors.
    pub fn from_yaml_str(yaml: &str, origin: &str) -> Result<PriceTable, PriceError> {
        serde_yaml::from_str(yaml).map_err(|source| PriceError::Yaml {
            origin: origin.to_string(),
            source,
        })
    }

    /// Loads a table from a YAML file (at most 1 MiB).
    pub fn load(path: &Path) -> Result<PriceTable, PriceError> {
        use std::io::Read;
        let read_err = |source| PriceError::Read {
            path: path.display().to_string(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read_err)?;
        let mut text = String::new();
        file.take(MAX_TABLE_BYTES)
            .read_to_string(&mut text)
            .map_err(read_err)?;
        Self::from_yaml_str(&text, &path.display().to_string())
    }

    /// Price of `model`: an exact match, else the longest table key that prefixes the model name
    /// followed by `-` (so `gpt-4o-mini-2024-07-18` finds `gpt-4o-mini`, not `gpt-4o`).
    pub fn get(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.models.get(model) {
            return Some(*p);
        }
        self.models
            .iter()
            .filter(|(k, _)| {
                model.len() > k.len()
                    && model.starts_with(k.as_str())
                    && model[k.len()..].starts_with('-')
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
    }
}

#[cfg(test)]
mod tests;
