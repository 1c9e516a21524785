//! The operator's egress policy: one address guard for every outbound client (models, search,
//! API providers, pages).
//!
//! Base URLs of models and search come from tenant-written profiles, as do the pages a run
//! reads, so each of them could otherwise point the operator at the cloud metadata service, the
//! Kubernetes API or anything on its loopback and pod network. Every client of the engine refuses
//! hosts whose addresses are not public ([`guard::blocked_reason`], checked after DNS resolution
//! by [`GuardedResolver`] and before connecting for IP literals and cluster-internal names),
//! except the hosts the operator exempts in its own configuration (an in-cluster model server,
//! a local demo). A profile can only narrow those exemptions for its page fetches
//! ([`EgressPolicy::narrow`]), never add to them.
//!
//! The binary that embeds the engine installs the policy once per process ([`install`]); the
//! `quarry` binary always does. Without an installed policy (a library user, the engine's own
//! tests), clients keep the exemptions they are given directly.

use std::sync::{Arc, OnceLock};

use url::Url;

use crate::scrape::guard::{self, GuardedResolver, HostRules};

/// Hosts exempt from the address guard, set by the operator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    /// Normalised host names or IP literals (lower case, no brackets or trailing dot).
    exempt: Vec<String>,
}

/// Lower-case host without IPv6 brackets or a trailing dot.
fn normalize(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

impl EgressPolicy {
    /// A policy exempting `hosts` (exact names or IP literals) from the address guard.
    pub fn new<S: AsRef<str>>(hosts: impl IntoIterator<Item = S>) -> Self {
        let mut exempt: Vec<String> = hosts
            .into_iter()
            .map(|h| normalize(h.as_ref()))
            .filter(|h| !h.is_empty())
            .collect();
        exempt.sort();
        exempt.dedup();
        Self { exempt }
    }

    /// The exempt hosts.
    pub fn exempt_hosts(&self) -> &[String] {
        &self.exempt
    }

    /// The same policy also exempting `host` (a URL the operator resolved itself, such as the
    /// Service of a SearchEngine it manages).
    pub fn with_exempt(&self, host: &str) -> Self {
        Self::new(self.exempt.iter().map(String::as_str).chain([host]))
    }

    /// The exemptions a profile asked for that the operator grants: `requested` narrowed to
    /// this policy's hosts. A profile can drop exemptions, never add one.
    pub fn narrow(&self, requested: &[String]) -> Vec<String> {
        requested
            .iter()
            .filter(|h| self.exempt.contains(&normalize(h)))
            .cloned()
            .collect()
    }

    /// The guard's rules for this policy.
    pub fn rules(&self) -> Arc<HostRules> {
        Arc::new(HostRules::new(&self.exempt, &[]))
    }

    /// Checks a URL before any connection: http or https, and a host that is public, or exempt.
    /// Names are checked again, by address, when they are resolved ([`Self::guard`]).
    pub fn check_url(&self, url: &Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("scheme {} is not http or https", url.scheme()));
        }
        let host = url.host().ok_or_else(|| format!("{url} has no host"))?;
        guard::check_host(&self.rules(), &host).map_err(|reason| {
            format!(
                "{reason}; the operator's egress policy refuses it (an operator can exempt the host with egressExemptHosts)"
            )
        })
    }

    /// Installs the guarded resolver on a client: every name it looks up is refused when it
    /// resolves only to non-public addresses, unless exempt. Proxies are not used, as a proxy
    /// would resolve names out of the guard's sight.
    pub fn guard(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        builder
            .dns_resolver(GuardedResolver::new(self.rules()))
            .no_proxy()
    }
}

static PROCESS: OnceLock<EgressPolicy> = OnceLock::new();

/// Makes `policy` the egress policy of every client built afterwards in this process; the first
/// call wins (returns false when a policy was installed already).
pub fn install(policy: EgressPolicy) -> bool {
    PROCESS.set(policy).is_ok()
}

/// The installed policy, if any.
pub fn installed() -> Option<&'static EgressPolicy> {
    PROCESS.get()
}

/// Whether an error, or one it wraps, is the guard refusing a resolved address.
pub fn refused_by_guard(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(b) = s.downcast_ref::<guard::BlockedAddress>() {
            return Some(b.to_string());
        }
        source = s.source();
    }
    None
}

#[cfg(test)]
mod tests;
