//! The TLS configuration every HTTP client of the process shares.
//!
//! reqwest builds a fresh rustls configuration for each client, and on Linux that loads and parses
//! every CA certificate of the system: about 100 KiB and a few milliseconds per client. A run
//! builds three clients (model, search, pages), so a thousand concurrent runs held about 300 MiB
//! of identical root stores (BENCHMARKS.md, scale). The configuration is built once here, the same
//! one reqwest builds (its crypto provider, TLS 1.3 and 1.2, the platform verifier, SNI, ALPN
//! http/1.1 as HTTP/2 is not enabled), and each client gets a clone, which shares the root store.

use std::sync::{Arc, OnceLock};

static SHARED: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();

fn build() -> Option<rustls::ClientConfig> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone()).ok()?;
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .ok()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Some(config)
}

/// `builder` with the shared TLS configuration. When the platform's roots cannot be loaded, the
/// builder is left alone: reqwest then tries itself and reports the problem as before.
pub fn with_shared_tls(builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
    match SHARED.get_or_init(build) {
        Some(config) => builder.tls_backend_preconfigured(config.clone()),
        None => builder,
    }
}

#[cfg(test)]
mod tests;
