//! Validated scalar formats shared by the CRDs: name patterns, decimal USD amounts, durations.
//!
//! The regular expressions here are emitted into the CRD schemas (so the API server rejects bad
//! values at admission) and the parsers below accept exactly what the patterns accept, so code
//! reading a stored object never meets a value the schema would have refused.

use std::time::Duration;

use super::ApiError;

/// DNS-1123 subdomain (the format of Kubernetes object names such as ResearchProfile and Secret).
pub const DNS1123_SUBDOMAIN_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Key inside a Secret's `data` (the format Kubernetes accepts for ConfigMap and Secret keys).
pub const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// Name of an environment variable (POSIX portable form).
pub const ENV_VAR_PATTERN: &str = r"^[A-Za-z_][A-Za-z0-9_]*$";

/// Non-negative decimal amount of US dollars with at most 6 fractional digits, e.g. `2.50`.
pub const USD_PATTERN: &str = r"^[0-9]{1,9}(\.[0-9]{1,6})?$";

/// Duration such as `30m`, `1h30m`, `90s` or `500ms` (a sequence of integer + unit pairs).
pub const DURATION_PATTERN: &str = r"^([0-9]{1,7}(ms|s|m|h))+$";

/// A host name (labels of letters, digits, `-` and `_`, optionally dot-terminated), an IPv4
/// literal, or an IPv6 literal with or without brackets: what the fetch policy's host and domain
/// lists compare against. No scheme, port, path or wildcard, so an entry cannot silently match
/// nothing (a deny list that never denies) or normalize to empty (an allow list that lifts itself).
pub const HOST_PATTERN: &str = r"^(\[?[0-9A-Fa-f]*:[0-9A-Fa-f:.]*\]?|[A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9_]*[A-Za-z0-9])?)*\.?)$";

/// A container image reference: anything without whitespace (the registry checks the rest).
pub const IMAGE_PATTERN: &str = r"^\S+$";

/// An absolute http(s) URL without whitespace.
pub const HTTP_URL_PATTERN: &str = r"^https?://[^\s/?#]+[^\s]*$";

/// Micro-dollars per dollar: decimal USD strings are parsed into integer micro-USD.
const MICROS_PER_USD: u64 = 1_000_000;

/// Parses a decimal USD string (see [`USD_PATTERN`]) into integer micro-dollars.
///
/// Integer micro-dollars keep cost sums exact; `"2.5"` becomes `2_500_000`.
pub fn parse_usd_micros(value: &str) -> Result<u64, ApiError> {
    let invalid = || ApiError::InvalidUsd {
        value: value.to_owned(),
    };
    let (whole, frac) = match value.split_once('.') {
        Some((whole, frac)) => (whole, frac),
        None => (value, ""),
    };
    let digits_only = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || whole.len() > 9
        || frac.len() > 6
        || (value.contains('.') && frac.is_empty())
        || !digits_only(whole)
        || !digits_only(frac)
    {
        return Err(invalid());
    }
    let whole: u64 = whole.parse().map_err(|_| invalid())?;
    let mut frac_micros: u64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        // 6 - 1 - i >= 0 because frac.len() <= 6.
        frac_micros += u64::from(b - b'0') * 10u64.pow(5 - i as u32);
    }
    Ok(whole * MICROS_PER_USD + frac_micros)
}

/// Formats micro-dollars as a decimal USD string with six fractional digits, trailing zeros
/// trimmed to at least two (`2_500_000` becomes `"2.50"`, `1_234` becomes `"0.001234"`).
pub fn format_usd_micros(micros: u64) -> String {
    let whole = micros / MICROS_PER_USD;
    let frac = format!("{:06}", micros % MICROS_PER_USD);
    let trimmed = frac.trim_end_matches('0');
    let frac = if trimmed.len() < 2 {
        &frac[..2]
    } else {
        trimmed
    };
    format!("{whole}.{frac}")
}

/// Parses a duration string (see [`DURATION_PATTERN`]) such as `1h30m` into a [`Duration`].
pub fn parse_duration(value: &str) -> Result<Duration, ApiError> {
    let invalid = || ApiError::InvalidDuration {
        value: value.to_owned(),
    };
    if value.is_empty() {
        return Err(invalid());
    }
    let bytes = value.as_bytes();
    let mut total = Duration::ZERO;
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i - start > 7 {
            return Err(invalid());
        }
        let amount: u64 = value[start..i].parse().map_err(|_| invalid())?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let part = match &value[unit_start..i] {
            "ms" => Duration::from_millis(amount),
            "s" => Duration::from_secs(amount),
            "m" => Duration::from_secs(amount * 60),
            "h" => Duration::from_secs(amount * 3600),
            _ => return Err(invalid()),
        };
        total = total.checked_add(part).ok_or_else(invalid)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
