//! Unit tests of `stackexchange`.

use super::*;

#[test]
fn sites_are_validated() {
    for ok in [
        "stackoverflow",
        "serverfault",
        "unix",
        "superuser",
        "math.stackexchange",
    ] {
        assert!(valid_site(ok), "{ok}");
    }
    for bad in [
        "",
        "Stackoverflow",
        "so&key=x",
        "a b",
        "1site",
        &"a".repeat(65),
    ] {
        assert!(!valid_site(bad), "{bad}");
    }
    assert!(matches!(
        StackExchange::new(StackExchangeConfig {
            default_site: Some("x y".into()),
            ..StackExchangeConfig::default()
        }),
        Err(SourceError::Config(_))
    ));
}
