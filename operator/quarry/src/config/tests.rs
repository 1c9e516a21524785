//! Unit tests of `config`.

use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn egress_exemptions_come_from_the_operators_own_settings() {
    let env_layer = Layer::from_env(&env(&[(
        "QUARRY_EGRESS_EXEMPT_HOSTS",
        "127.0.0.1, ollama.models.svc,[::1]",
    )]));
    let s = Settings::resolve(&[
        (Origin::Default, Layer::defaults()),
        (Origin::Env, env_layer),
    ])
    .unwrap();
    assert_eq!(
        s.egress_exempt_hosts,
        vec!["127.0.0.1", "ollama.models.svc", "[::1]"]
    );
    let none = Settings::resolve(&[(Origin::Default, Layer::defaults())]).unwrap();
    assert!(none.egress_exempt_hosts.is_empty());
    let flags = Layer {
        egress_exempt_hosts: Some("http://10.0.0.1:8080".into()),
        ..Layer::default()
    };
    assert!(matches!(
        Settings::resolve(&[(Origin::Flag, flags)]),
        Err(ConfigError::Invalid { setting, .. }) if setting == "egressExemptHosts"
    ));
}

#[test]
fn later_layers_win() {
    let file = Layer {
        log_format: Some("json".into()),
        mode: Some("quick".into()),
        bind: Some("127.0.0.1:9000".into()),
        ..Layer::default()
    };
    let env_layer = Layer::from_env(&env(&[
        ("QUARRY_MODE", "deep"),
        ("QUARRY_BIND", "127.0.0.1:9100"),
    ]));
    let flags = Layer {
        bind: Some("127.0.0.1:9200".into()),
        ..Layer::default()
    };
    let s = Settings::resolve(&[
        (Origin::Default, Layer::defaults()),
        (Origin::File, file),
        (Origin::Env, env_layer),
        (Origin::Flag, flags),
    ])
    .unwrap();
    assert_eq!(s.log_format, LogFormat::Json);
    assert_eq!(s.mode, quarry_engine::research::machine::state::Mode::Deep);
    assert_eq!(s.bind, "127.0.0.1:9200".parse().unwrap());
}

#[test]
fn errors_name_the_setting_and_its_source() {
    let env_layer = Layer::from_env(&env(&[("QUARRY_LOG_FORMAT", "xml")]));
    let err = Settings::resolve(&[
        (Origin::Default, Layer::defaults()),
        (Origin::Env, env_layer),
    ])
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "setting `logFormat` (from environment variable QUARRY_LOG_FORMAT): `xml` is not one of text, json"
    );
    let flags = Layer {
        max_cost_usd: Some("lots".into()),
        ..Layer::default()
    };
    let err = Settings::resolve(&[(Origin::Flag, flags)]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("setting `maxCostUsd` (from flag --max-cost-usd): "),
        "{err}"
    );
    let file = Layer {
        timeout: Some("soon".into()),
        ..Layer::default()
    };
    let err = Settings::resolve(&[(Origin::File, file)]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("setting `timeout` (from the config file key `timeout`): "),
        "{err}"
    );
}

#[test]
fn config_file_rejects_unknown_keys() {
    let dir = std::env::temp_dir().join(format!("quarry-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("c.yaml");
    std::fs::write(&p, "logFormat: json\nmdoe: quick\n").unwrap();
    let err = Layer::from_file(&p).unwrap_err();
    assert!(err.to_string().contains("unknown field `mdoe`"), "{err}");
    std::fs::write(&p, "logFormat: json\ntimeout: 10m\n").unwrap();
    assert_eq!(
        Layer::from_file(&p).unwrap().timeout.as_deref(),
        Some("10m")
    );
    let _ = std::fs::remove_dir_all(dir);
}
