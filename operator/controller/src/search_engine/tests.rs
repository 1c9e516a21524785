//! Unit tests of `search_engine`.

use super::*;
use quarry_engine::sources::health::{AnswerReport, EngineState};

fn engine(spec: Value) -> SearchEngine {
    serde_json::from_value(json!({
        "apiVersion": "quarry.dev/v1alpha1",
        "kind": "SearchEngine",
        "metadata": {"name": "default", "namespace": "ns", "uid": "se-1", "generation": 2},
        "spec": spec,
    }))
    .unwrap()
}

fn t(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).unwrap())
}

fn yaml(s: &str) -> Value {
    serde_yaml::from_str(s).unwrap()
}

#[test]
fn base_settings_keep_json_and_turn_the_limiter_off() {
    let rendered = yaml(&render_settings(&engine(json!({}))).unwrap());
    assert_eq!(rendered["server"]["limiter"], json!(false));
    assert!(
        rendered["search"]["formats"]
            .as_array()
            .unwrap()
            .contains(&json!("json"))
    );
    assert!(rendered["server"].get("secret_key").is_none());
    let keep = rendered["use_default_settings"]["engines"]["keep_only"]
        .as_array()
        .unwrap();
    assert!(keep.contains(&json!("wikipedia")));
    assert!(!keep.contains(&json!("google")), "CAPTCHA-prone by default");
}

#[test]
fn the_engine_list_and_overrides_are_rendered_but_cannot_break_json_output() {
    let e = engine(json!({
        "engines": [
            {"name": "wikipedia", "weight": 2.0},
            {"name": "github", "disabled": true, "timeout": 6.0}
        ],
        "settingsOverrides": {
            "search": {"formats": ["html"], "safe_search": 1},
            "server": {"limiter": true, "secret_key": "leak"},
            "outgoing": {"proxies": {"all://": ["http://proxy:3128"]}}
        }
    }));
    let rendered = yaml(&render_settings(&e).unwrap());
    assert_eq!(
        rendered["use_default_settings"]["engines"]["keep_only"],
        json!(["wikipedia", "github"])
    );
    assert_eq!(
        rendered["engines"],
        json!([
            {"name": "wikipedia", "weight": 2.0},
            {"name": "github", "disabled": true, "timeout": 6.0}
        ])
    );
    assert_eq!(rendered["search"]["formats"], json!(["html", "json"]));
    assert_eq!(rendered["search"]["safe_search"], json!(1));
    assert_eq!(rendered["search"]["default_lang"], json!("en"), "merged");
    assert_eq!(rendered["server"]["limiter"], json!(false));
    assert!(rendered["server"].get("secret_key").is_none());
    assert_eq!(
        rendered["outgoing"]["proxies"]["all://"],
        json!(["http://proxy:3128"])
    );
    assert_eq!(rendered["outgoing"]["request_timeout"], json!(4.0));
}

#[test]
fn scaling_follows_activity_and_the_idle_timeout() {
    let idle = Duration::from_secs(600);
    // Never used: stays at zero.
    assert_eq!(
        scale(2, 0, None, idle, &t(0)),
        Scale {
            replicas: 0,
            last_activity: None,
            requeue: None
        }
    );
    // A run appears: scale from zero, activity now.
    let up = scale(2, 1, None, idle, &t(0));
    assert_eq!(up.replicas, 2);
    assert_eq!(up.last_activity, Some(t(0)));
    // Still active 30 s later: the recorded time is kept (no status churn).
    assert_eq!(
        scale(2, 1, Some(&t(0)), idle, &t(30)).last_activity,
        Some(t(0))
    );
    assert_eq!(
        scale(2, 1, Some(&t(0)), idle, &t(90)).last_activity,
        Some(t(90))
    );
    // Run gone: stays up until the idle timeout, then zero.
    let waiting = scale(2, 0, Some(&t(90)), idle, &t(100));
    assert_eq!(waiting.replicas, 2);
    assert_eq!(waiting.requeue, Some(Duration::from_secs(590)));
    let down = scale(2, 0, Some(&t(90)), idle, &t(690));
    assert_eq!(down.replicas, 0);
    assert_eq!(down.last_activity, Some(t(90)));
}

#[test]
fn children_are_owned_by_the_engine_and_need_no_secret() {
    let e = engine(json!({"image": "searxng/searxng:2025.1.1"}));
    let owner = e.controller_owner_ref(&()).unwrap();
    let c = desired_children(&e, &owner, "x: 1\n", 3).unwrap();
    for obj in [&c.config_map, &c.service, &c.deployment] {
        assert_eq!(obj["metadata"]["name"], "default-searxng");
        assert_eq!(
            obj["metadata"]["ownerReferences"][0]["kind"],
            "SearchEngine"
        );
        assert_eq!(obj["metadata"]["ownerReferences"][0]["uid"], "se-1");
        assert_eq!(obj["metadata"]["ownerReferences"][0]["controller"], true);
    }
    assert_eq!(c.config_map["data"]["settings.yml"], "x: 1\n");
    let d = &c.deployment["spec"];
    assert_eq!(d["replicas"], 3);
    let pod = &d["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "searxng/searxng:2025.1.1");
    assert_eq!(
        container["env"][1],
        json!({"name": "SEARXNG_SECRET", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}})
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(
        d["template"]["metadata"]["annotations"][SETTINGS_HASH_ANNOTATION],
        hex::encode(Sha256::digest(b"x: 1\n"))
    );
    assert_eq!(d["selector"]["matchLabels"], c.service["spec"]["selector"]);
}

#[test]
fn runs_count_as_active_only_through_a_profile_using_the_engine() {
    let profile = |name: &str, search: Value| -> ResearchProfile {
        serde_json::from_value(json!({
                "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchProfile",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"models": {"primary": {"baseURL": "http://m/v1", "model": "m"}}, "search": search}
            }))
            .unwrap()
    };
    let run = |name: &str, profile: &str, phase: Option<&str>, suspend: bool| -> ResearchRun {
        let mut v = json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"query": "q", "profileRef": profile, "suspend": suspend}
        });
        if let Some(p) = phase {
            v["status"] = json!({"phase": p});
        }
        serde_json::from_value(v).unwrap()
    };
    let profiles = vec![
        profile("managed", json!({"searchEngineRef": {"name": "default"}})),
        profile("external", json!({"url": "http://searx.example"})),
        profile("other", json!({"searchEngineRef": {"name": "other"}})),
    ];
    let runs = vec![
        run("a", "managed", Some("Researching"), false),
        run("b", "managed", None, false),
        run("c", "managed", Some("Completed"), false),
        run("d", "managed", None, true),
        run("e", "external", None, false),
        run("f", "other", None, false),
        run("g", "missing", None, false),
    ];
    assert_eq!(active_runs("default", &runs, &profiles), 2);
    assert_eq!(active_runs("other", &runs, &profiles), 1);
}

#[test]
fn status_reports_url_readiness_and_engine_health() {
    let e = engine(json!({}));
    let book = HealthBook::new();
    book.observe(
        "ns/default",
        &AnswerReport {
            results_by_engine: [("wikipedia".to_string(), 2)].into(),
            unresponsive: vec![("bing".into(), "CAPTCHA required".into())],
        },
        std::time::SystemTime::UNIX_EPOCH,
    );
    let up = Scale {
        replicas: 1,
        last_activity: Some(t(0)),
        requeue: None,
    };
    let s = desired_status(
        &e,
        &up,
        1,
        0,
        health_status(&book, "ns/default"),
        None,
        &t(0),
    );
    assert_eq!(s.url.as_deref(), Some("http://default-searxng.ns.svc:8080"));
    assert_eq!(s.observed_generation, Some(2));
    let ready = &s.conditions[0];
    assert_eq!(
        (
            ready.type_.as_str(),
            ready.status.as_str(),
            ready.reason.as_str()
        ),
        ("Ready", "False", "Starting")
    );
    assert_eq!(s.engines.len(), 2);
    assert_eq!(s.engines[0].name, "bing");
    assert_eq!(s.engines[0].state, EngineState::Captcha.as_str());
    let s = desired_status(&e, &up, 1, 1, vec![], None, &t(0));
    assert_eq!(s.conditions[0].reason, "Ready");
    let idle = Scale {
        replicas: 0,
        last_activity: None,
        requeue: None,
    };
    let s = desired_status(&e, &idle, 0, 0, vec![], None, &t(0));
    assert_eq!(
        (
            s.conditions[0].status.as_str(),
            s.conditions[0].reason.as_str()
        ),
        ("True", "Idle")
    );
    let s = desired_status(
        &e,
        &idle,
        0,
        0,
        vec![],
        Some(&SpecError::settings("bad")),
        &t(0),
    );
    assert_eq!(s.conditions[2].type_, "Stalled");
    assert_eq!(s.conditions[2].status, "True");
}

#[test]
fn images_are_allowed_by_repository_with_any_tag_or_digest() {
    let allowed = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let default = allowed(DEFAULT_ALLOWED_IMAGES);
    for ok in [
        "docker.io/searxng/searxng:latest",
        "docker.io/searxng/searxng:2025.1.1-abc",
        "searxng/searxng",
        "searxng/searxng:2024.5.10",
        "index.docker.io/searxng/searxng:1",
        "docker.io/searxng/searxng@sha256:0123456789abcdef",
        "docker.io/searxng/searxng:1@sha256:0123456789abcdef",
    ] {
        assert!(image_allowed(ok, &default), "{ok}");
    }
    for refused in [
        "docker.io/searxng/searxng-evil:latest",
        "docker.io/searxng/searxngx",
        "ghcr.io/searxng/searxng:latest",
        "evil.example/docker.io/searxng/searxng:1",
        "searxng",
        "localhost:5000/searxng/searxng:1",
    ] {
        assert!(!image_allowed(refused, &default), "{refused}");
    }
    // A registry with a port, and a prefix entry.
    let mirror = allowed(&["registry.internal:5000/mirror/"]);
    assert!(image_allowed(
        "registry.internal:5000/mirror/searxng:1",
        &mirror
    ));
    assert!(!image_allowed(
        "registry.internal:5000/other/searxng:1",
        &mirror
    ));
    assert!(!image_allowed(
        "registry.internal:5000/mirrorx/searxng:1",
        &mirror
    ));
    assert!(!image_allowed(
        "docker.io/searxng/searxng:1",
        &allowed(&[""])
    ));
    assert_eq!(normalize_image("nginx"), "docker.io/library/nginx");
    assert!(image_refusal("searxng/searxng:1", &default).is_none());
    let refusal = image_refusal("ghcr.io/x/y:1", &default).unwrap();
    assert_eq!(refusal.reason, reasons::IMAGE_NOT_ALLOWED);
}

#[test]
fn a_spec_error_keeps_the_serde_error_as_its_source_and_its_detail_says_both() {
    let yaml = serde_yaml::from_str::<serde_json::Value>("a: [").unwrap_err();
    let said = yaml.to_string();
    let e = SpecError::settings_from("config/searxng/settings.yml is not YAML", yaml);
    let source = std::error::Error::source(&e).expect("the serde error is the source");
    assert_eq!(source.to_string(), said);
    assert_eq!(e.to_string(), "config/searxng/settings.yml is not YAML");
    assert_eq!(
        e.detail(),
        format!("config/searxng/settings.yml is not YAML: {said}")
    );
    assert!(std::error::Error::source(&SpecError::settings("bad")).is_none());
    assert_eq!(SpecError::settings("bad").detail(), "bad");
}
