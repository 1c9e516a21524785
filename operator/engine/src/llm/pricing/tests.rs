//! Unit tests of `pricing`.

use super::*;

#[test]
fn one_million_tokens_at_015_is_exactly_015_usd() {
    let p = UsdPerMillion::parse("0.15").unwrap();
    assert_eq!(p.pico_usd_per_token(), 150_000);
    assert_eq!(p.cost_pico_usd(1_000_000), 150_000_000_000);
    assert_eq!(
        crate::llm::format_pico_usd(p.cost_pico_usd(1_000_000)),
        "0.150000"
    );
}

#[test]
fn parse_forms() {
    let cases = [
        ("0", 0),
        ("10", 10_000_000),
        ("2.5", 2_500_000),
        ("2.50", 2_500_000),
        (".5", 500_000),
        ("3.", 3_000_000),
        ("0.000001", 1),
        ("0.0000010", 1),
        (" 1.1 ", 1_100_000),
        ("15", 15_000_000),
    ];
    for (s, want) in cases {
        assert_eq!(
            UsdPerMillion::parse(s).unwrap().pico_usd_per_token(),
            want,
            "{s}"
        );
    }
}

#[test]
fn parse_rejects() {
    for s in [
        "",
        ".",
        "-1",
        "1e3",
        "0.0000001",
        "abc",
        "1.2.3",
        "2000000",
        "1,5",
    ] {
        let err = UsdPerMillion::parse(s).unwrap_err();
        assert!(err.to_string().contains(&format!("`{s}`")), "{s}: {err}");
    }
}

#[test]
fn display_round_trips() {
    for s in ["0", "0.15", "2.5", "10", "0.000001", "1234.56"] {
        assert_eq!(UsdPerMillion::parse(s).unwrap().to_string(), s);
    }
}

#[test]
fn call_cost_is_exact() {
    let price = Price::parse("0.15", "0.60").unwrap();
    // 1234 * 150_000 + 567 * 600_000
    assert_eq!(price.cost_pico_usd(1234, 567), 185_100_000 + 340_200_000);
    assert_eq!(Price::FREE.cost_pico_usd(10_000, 10_000), 0);
}

#[test]
fn cost_saturates() {
    let p = UsdPerMillion::parse("1000000").unwrap();
    assert_eq!(p.cost_pico_usd(u64::MAX), u64::MAX);
}

#[test]
fn yaml_table_strings_and_numbers() {
    let yaml = r#"
as_of: "2025-06-01"
models:
  gpt-4o-mini: { input: "0.15", output: "0.60" }
  gpt-4o: { input: 2.5, output: 10 }
"#;
    let t = PriceTable::from_yaml_str(yaml, "inline").unwrap();
    assert_eq!(t.as_of.as_deref(), Some("2025-06-01"));
    assert_eq!(
        t.get("gpt-4o-mini"),
        Some(Price::parse("0.15", "0.6").unwrap())
    );
    assert_eq!(t.get("gpt-4o"), Some(Price::parse("2.5", "10").unwrap()));
    assert_eq!(
        t.get("gpt-4o-mini-2024-07-18"),
        Some(Price::parse("0.15", "0.6").unwrap())
    );
    assert_eq!(
        t.get("gpt-4o-2024-08-06"),
        Some(Price::parse("2.5", "10").unwrap())
    );
    assert_eq!(t.get("gpt-4"), None);
    assert_eq!(t.get("gpt-4omni"), None);
}

#[test]
fn yaml_bad_price_names_value() {
    let yaml = "models:\n  m: { input: \"0.1234567\", output: \"1\" }\n";
    let err = PriceTable::from_yaml_str(yaml, "prices.yaml").unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("prices.yaml") && msg.contains("0.1234567"),
        "{msg}"
    );
}

#[test]
fn shipped_table_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/prices.yaml");
    let t = PriceTable::load(&path).unwrap();
    assert!(t.as_of.is_some());
    assert_eq!(
        t.get("gpt-4o-mini"),
        Some(
            Price::parse("0.15", "0.60")
                .unwrap()
                .with_cached_input("0.075")
                .unwrap()
        )
    );
    assert_eq!(t.get("qwen2.5-coder-0.5b-instruct"), Some(Price::FREE));
}

#[test]
fn the_shipped_table_is_compiled_in_with_cached_input_prices() {
    let table = default_prices();
    assert!(table.models.len() >= 10);
    let p = table.get("gpt-4.1-mini-2025-04-14").unwrap();
    assert_eq!(
        p,
        Price::parse("0.40", "1.60")
            .unwrap()
            .with_cached_input("0.10")
            .unwrap()
    );
    // 1000 input of which 800 cached, 100 output: 200 × 0.40 + 800 × 0.10 + 100 × 1.60 µUSD.
    assert_eq!(p.cost_with_cache_pico_usd(1000, 800, 100), 320_000_000);
    assert_eq!(
        table.get("qwen2.5-coder-0.5b-instruct-q4_k_m"),
        Some(Price::FREE)
    );
}
