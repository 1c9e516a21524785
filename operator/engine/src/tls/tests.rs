//! Unit tests of `tls`.

use super::*;

#[test]
fn clients_build_on_the_shared_configuration() {
    // A configuration reqwest does not recognise would fail `build`.
    for _ in 0..2 {
        with_shared_tls(reqwest::Client::builder()).build().unwrap();
    }
    if let Some(config) = SHARED.get().and_then(Option::as_ref) {
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(config.enable_sni);
    }
}
