//! Unit tests of `providers`.

use super::*;

#[test]
fn providers_are_built_in_order_named_by_kind() {
    let config = || ProviderConfig::new(Secret::new("k"));
    let built = build_providers(vec![
        (ProviderKind::Tavily, config()),
        (ProviderKind::Brave, config()),
        (ProviderKind::Serper, config()),
    ])
    .unwrap();
    assert_eq!(
        built.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        vec!["tavily", "brave", "serper"]
    );
    let blank = vec![(ProviderKind::Brave, ProviderConfig::new(Secret::new(" ")))];
    assert!(matches!(
        build_providers(blank),
        Err(SourceError::Config(_))
    ));
    assert!(build_providers(Vec::new()).unwrap().is_empty());
}

#[test]
fn debug_output_never_shows_the_key() {
    let config = ProviderConfig::new(Secret::new("sk-very-secret"));
    let brave = BraveGatherer::new(config.clone()).unwrap();
    let tavily = TavilyGatherer::new(config.clone()).unwrap();
    let serper = SerperGatherer::new(config.clone()).unwrap();
    let shown = format!("{config:?} {brave:?} {tavily:?} {serper:?}");
    assert!(!shown.contains("sk-very-secret"), "{shown}");
    assert!(matches!(
        BraveGatherer::new(ProviderConfig::new(Secret::new(" "))),
        Err(SourceError::Config(_))
    ));
}
