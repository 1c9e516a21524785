//! The address guard against server-side request forgery.
//!
//! Addresses are checked after DNS resolution by [`GuardedResolver`], which is installed as the
//! HTTP client's resolver: the address that is checked is the address that is connected to, so
//! a name that resolves differently on a second lookup (DNS rebinding) cannot slip through.
//! IP-literal hosts never reach a resolver and are checked by [`check_host`], which also refuses
//! names only a cluster's or machine's own resolver answers (see [`internal_name`]).

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Why an address may not be fetched, or `None` when it is public.
pub fn blocked_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => blocked_v4(v4),
        IpAddr::V6(v6) => blocked_v6(v6),
    }
}

fn blocked_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        return Some("cloud metadata address");
    }
    if ip.is_unspecified() || o[0] == 0 {
        return Some("unspecified address");
    }
    if ip.is_loopback() {
        return Some("loopback address");
    }
    if ip.is_private() {
        return Some("private address");
    }
    if ip.is_link_local() {
        return Some("link-local address");
    }
    if o[0] == 100 && (o[1] & 0xc0) == 64 {
        return Some("shared (CGNAT) address");
    }
    if ip.is_broadcast() {
        return Some("broadcast address");
    }
    if ip.is_multicast() {
        return Some("multicast address");
    }
    // 240.0.0.0/4 is reserved and never a public web server; 192.0.0.0/24 is IETF protocol
    // assignments; 198.18.0.0/15 is benchmarking.
    if o[0] >= 240
        || (o[0] == 192 && o[1] == 0 && o[2] == 0)
        || (o[0] == 198 && (o[1] & 0xfe) == 18)
    {
        return Some("reserved address");
    }
    None
}

fn blocked_v6(ip: Ipv6Addr) -> Option<&'static str> {
    // IPv4-mapped (::ffff:a.b.c.d) and the deprecated IPv4-compatible (::a.b.c.d) forms reach
    // the IPv4 host, so they are judged as IPv4.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return blocked_v4(v4);
    }
    let s = ip.segments();
    if s[..6] == [0, 0, 0, 0, 0, 0] && !ip.is_loopback() && !ip.is_unspecified() {
        return blocked_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    // NAT64 (64:ff9b::/96) embeds an IPv4 address the gateway will connect to.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return blocked_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        return Some("cloud metadata address");
    }
    if ip.is_unspecified() {
        return Some("unspecified address");
    }
    if ip.is_loopback() {
        return Some("loopback address");
    }
    if (s[0] & 0xfe00) == 0xfc00 {
        return Some("unique local (private) address");
    }
    if (s[0] & 0xffc0) == 0xfe80 {
        return Some("link-local address");
    }
    if (s[0] & 0xffc0) == 0xfec0 {
        return Some("site-local address");
    }
    if ip.is_multicast() {
        return Some("multicast address");
    }
    None
}

/// Which hosts may be fetched regardless of their address, and which domains by name.
#[derive(Debug, Clone, Default)]
pub struct HostRules {
    /// Lower-case host names or IP literals exempt from the address guard.
    allowed: HashSet<String>,
    /// Lower-case domains refused together with their subdomains.
    denied: Vec<String>,
    /// Lower-case domains that, when any are listed, are the only ones fetched (with subdomains).
    only: Vec<String>,
}

impl HostRules {
    /// Builds the rules from the policy's lists (case and IPv6 brackets ignored).
    pub fn new(allowed_hosts: &[String], denied_domains: &[String]) -> Self {
        let norm = |h: &String| {
            h.trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim_end_matches('.')
                .to_ascii_lowercase()
        };
        Self {
            allowed: allowed_hosts
                .iter()
                .map(norm)
                .filter(|h| !h.is_empty())
                .collect(),
            denied: denied_domains
                .iter()
                .map(norm)
                .filter(|h| !h.is_empty())
                .collect(),
            only: Vec::new(),
        }
    }

    /// Restricts fetching to `domains` and their subdomains (no restriction when empty).
    ///
    /// Unlike the allowed hosts, this never lifts the address guard; deny still wins.
    pub fn with_allowed_domains(mut self, domains: &[String]) -> Self {
        self.only = domains
            .iter()
            .map(|d| normalize_host(d.trim()))
            .filter(|d| !d.is_empty())
            .collect();
        self
    }

    /// Whether the host is exempt from the address guard.
    pub fn is_allowed(&self, host: &str) -> bool {
        self.allowed.contains(&normalize_host(host))
    }

    /// The denied domain that covers `host`, if any.
    pub fn denied_by(&self, host: &str) -> Option<&str> {
        let h = normalize_host(host);
        self.denied
            .iter()
            .find(|d| in_domain(&h, d))
            .map(String::as_str)
    }

    /// Whether an allowed-domain list is set and `host` is outside every domain on it.
    pub fn outside_allowed_domains(&self, host: &str) -> bool {
        let h = normalize_host(host);
        !self.only.is_empty() && !self.only.iter().any(|d| in_domain(&h, d))
    }

    /// The allowed-domain list, for refusal messages.
    pub fn allowed_domains(&self) -> &[String] {
        &self.only
    }

    /// Why `host` is refused by name (denied, or outside the allowed domains), if it is.
    pub fn refused_by_name(&self, host: &str) -> Option<String> {
        if let Some(d) = self.denied_by(host) {
            return Some(format!("host {host} is in the denied domain {d}"));
        }
        if self.outside_allowed_domains(host) {
            return Some(format!(
                "host {host} is not in the allowed domains ({})",
                self.only.join(", ")
            ));
        }
        None
    }
}

/// Whether normalized `host` is `domain` or one of its subdomains.
fn in_domain(host: &str, domain: &str) -> bool {
    host == domain
        || (host.len() > domain.len()
            && host.ends_with(domain)
            && host.as_bytes()[host.len() - domain.len() - 1] == b'.')
}

/// Lower-case host without IPv6 brackets or a trailing dot.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Suffixes of names that only the cluster's or the machine's own resolver answers.
const INTERNAL_SUFFIXES: [(&str, &str); 7] = [
    ("localhost", "loopback name"),
    ("svc", "cluster-service name"),
    ("cluster.local", "cluster-service name"),
    ("internal", "private-use name"),
    ("local", "link-local (mDNS) name"),
    ("home.arpa", "private-use name"),
    ("localdomain", "loopback name"),
];

/// Why a normalized host name is internal whatever it resolves to, or `None`.
///
/// The resolver's address check already refuses these when they resolve to private addresses;
/// naming them refuses them even in a cluster whose service range is not a private one.
/// Single-label names are only ever completed by a resolver's search domains (in a pod:
/// `<svc>.<namespace>.svc.cluster.local`), so they are internal too.
pub fn internal_name(host: &str) -> Option<&'static str> {
    if !host.contains('.') {
        return Some(if host == "localhost" {
            "loopback name"
        } else {
            "single-label name (completed by the resolver's search domains)"
        });
    }
    INTERNAL_SUFFIXES
        .iter()
        .find(|(suffix, _)| in_domain(host, suffix))
        .map(|(_, reason)| *reason)
}

/// Checks a URL host before connecting: denied domains, and IP literals (which bypass DNS).
///
/// Returns the reason for a refusal.
pub fn check_host(rules: &HostRules, host: &url::Host<&str>) -> Result<(), String> {
    let name = host.to_string();
    // Deny wins over the allowed domains, and both over the address guard's allow-list.
    if let Some(reason) = rules.refused_by_name(&name) {
        return Err(reason);
    }
    if rules.is_allowed(&name) {
        return Ok(());
    }
    let ip = match host {
        url::Host::Ipv4(v4) => IpAddr::V4(*v4),
        url::Host::Ipv6(v6) => IpAddr::V6(*v6),
        url::Host::Domain(d) => {
            return match internal_name(&normalize_host(d)) {
                Some(reason) => Err(format!("{name} is a {reason}")),
                None => Ok(()),
            };
        }
    };
    match blocked_reason(ip) {
        Some(reason) => Err(format!("{ip} is a {reason}")),
        None => Ok(()),
    }
}

/// Error returned by [`GuardedResolver`] when a name resolves only to refused addresses.
#[derive(Debug, thiserror::Error)]
#[error("{name} resolves only to refused addresses ({detail})")]
pub struct BlockedAddress {
    /// The name that was resolved.
    pub name: String,
    /// Each refused address with its reason.
    pub detail: String,
}

/// A replacement for the system's name lookup: the addresses of a host name, or an error.
///
/// Tests use it to make public-looking names resolve to private addresses without touching
/// real DNS; production uses the system resolver.
pub type Lookup = Arc<dyn Fn(&str) -> std::io::Result<Vec<IpAddr>> + Send + Sync>;

/// A DNS resolver that drops non-public addresses unless the name is allow-listed.
#[derive(Clone)]
pub struct GuardedResolver {
    rules: Arc<HostRules>,
    /// Where addresses come from: the system resolver when `None`.
    lookup: Option<Lookup>,
}

impl std::fmt::Debug for GuardedResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedResolver")
            .field("rules", &self.rules)
            .field("lookup", &self.lookup.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl GuardedResolver {
    /// A resolver enforcing `rules` over the system resolver.
    pub fn new(rules: Arc<HostRules>) -> Self {
        Self {
            rules,
            lookup: None,
        }
    }

    /// A resolver enforcing `rules` over `lookup` instead of the system resolver.
    pub fn with_lookup(rules: Arc<HostRules>, lookup: Lookup) -> Self {
        Self {
            rules,
            lookup: Some(lookup),
        }
    }
}

/// Keeps the public addresses of a lookup; errors when none is left.
pub fn filter_addrs(
    rules: &HostRules,
    name: &str,
    addrs: Vec<SocketAddr>,
) -> Result<Vec<SocketAddr>, BlockedAddress> {
    if rules.is_allowed(name) {
        return Ok(addrs);
    }
    let mut refused = Vec::new();
    let kept: Vec<SocketAddr> = addrs
        .into_iter()
        .filter(|a| match blocked_reason(a.ip()) {
            Some(r) => {
                refused.push(format!("{} is a {r}", a.ip()));
                false
            }
            None => true,
        })
        .collect();
    if kept.is_empty() {
        let detail = if refused.is_empty() {
            "no addresses".to_string()
        } else {
            refused.join(", ")
        };
        return Err(BlockedAddress {
            name: name.to_string(),
            detail,
        });
    }
    Ok(kept)
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rules = Arc::clone(&self.rules);
        let lookup = self.lookup.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            if let Some(reason) = rules.refused_by_name(&host) {
                return Err(Box::new(BlockedAddress {
                    name: host.clone(),
                    detail: reason,
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            // Port 0 is a placeholder: the connector replaces it with the URL's port.
            let addrs: Vec<SocketAddr> = match lookup {
                Some(lookup) => lookup(&host)?
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, 0))
                    .collect(),
                None => tokio::net::lookup_host((host.as_str(), 0)).await?.collect(),
            };
            let kept = filter_addrs(&rules, &host, addrs)?;
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests;
