//! Unit tests of `run`.

use super::*;
use std::time::Duration;

fn spec(yaml: &str) -> ResearchRunSpec {
    serde_yaml::from_str(yaml).unwrap()
}

#[test]
fn minimal_spec_gets_design_defaults() {
    let s = spec("query: what is CEL?");
    assert_eq!(s.mode, Mode::Deep);
    assert_eq!(s.outputs, vec![Output::Study]);
    assert_eq!(s.top_k, 5);
    assert_eq!(s.profile_ref, "default");
    assert_eq!(
        s.sources,
        vec![
            SourceKind::Web,
            SourceKind::Security,
            SourceKind::Stackexchange
        ]
    );
    assert_eq!(
        s.report,
        ReportTarget {
            kind: ReportKind::ConfigMap,
            prefix: None
        }
    );
    assert!(!s.suspend);
    assert!(!s.cancel);
    assert_eq!(s.limits, None);
    assert_eq!(s.ttl_seconds_after_finished, None);
    assert!(s.wants(Output::Study) && !s.wants(Output::Ideas));
    assert!(s.uses(SourceKind::Security));
}

#[test]
fn wire_names_are_camel_case() {
    let s = spec(
        "query: q?!\nmode: quick\noutputs: [ideas, implementations]\ntopK: 7\nprofileRef: p\n\
             sources: [stackexchange]\nlimits: {maxConcurrentResearchers: 2, maxCostUSD: \"2.50\", timeout: 30m}\n\
             report: {kind: objectStore, prefix: runs/}\nsuspend: true\nttlSecondsAfterFinished: 60\n",
    );
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        v,
        serde_json::json!({
            "query": "q?!", "mode": "quick", "outputs": ["ideas", "implementations"], "topK": 7,
            "profileRef": "p", "sources": ["stackexchange"],
            "limits": {"maxConcurrentResearchers": 2, "maxCostUSD": "2.50", "timeout": "30m"},
            "report": {"kind": "objectStore", "prefix": "runs/"}, "suspend": true,
            "cancel": false, "ttlSecondsAfterFinished": 60
        })
    );
}

#[test]
fn unknown_mode_is_rejected_by_serde_too() {
    assert!(serde_yaml::from_str::<ResearchRunSpec>("query: abc\nmode: fast\n").is_err());
    assert!(serde_yaml::from_str::<ResearchRunSpec>("query: abc\noutputs: [essay]\n").is_err());
}

#[test]
fn limits_layer_run_over_profile_over_builtin() {
    let s = spec("query: abc\nlimits: {maxRounds: 4, timeout: 1h30m}\n");
    let profile = RunLimits {
        max_concurrent_researchers: Some(5),
        max_rounds: Some(6),
        max_cost_usd: Some("1.25".into()),
        max_tokens: Some(100_000),
        timeout: Some("2h".into()),
    };
    assert_eq!(
        s.effective_limits(Some(&profile)).unwrap(),
        EffectiveLimits {
            max_concurrent_researchers: 5,
            max_rounds: Some(4),
            max_cost_micro_usd: Some(1_250_000),
            max_tokens: Some(100_000),
            timeout: Some(Duration::from_secs(5400)),
        }
    );
    assert_eq!(s.limits_above_profile(Some(&profile)).unwrap(), vec![]);
    assert_eq!(
        s.effective_limits(None).unwrap(),
        EffectiveLimits {
            max_concurrent_researchers: 3,
            max_rounds: Some(4),
            max_cost_micro_usd: None,
            max_tokens: None,
            timeout: Some(Duration::from_secs(5400)),
        }
    );
    assert_eq!(
        s.limits_or_default(),
        RunLimits {
            max_concurrent_researchers: Some(3),
            max_rounds: Some(4),
            timeout: Some("1h30m".into()),
            ..RunLimits::default()
        }
    );
}

#[test]
fn a_run_cannot_raise_its_profiles_limits() {
    let s = spec(
        "query: abc\nlimits: {maxConcurrentResearchers: 9, maxRounds: 8, maxCostUSD: \"999999999\", maxTokens: 5000000, timeout: 24h}\n",
    );
    let profile = RunLimits {
        max_concurrent_researchers: Some(2),
        max_rounds: Some(3),
        max_cost_usd: Some("5.00".into()),
        max_tokens: Some(200_000),
        timeout: Some("30m".into()),
    };
    // Every limit is the stricter of the two: the profile's here.
    assert_eq!(
        s.effective_limits(Some(&profile)).unwrap(),
        EffectiveLimits {
            max_concurrent_researchers: 2,
            max_rounds: Some(3),
            max_cost_micro_usd: Some(5_000_000),
            max_tokens: Some(200_000),
            timeout: Some(Duration::from_secs(1800)),
        }
    );
    let above = s.limits_above_profile(Some(&profile)).unwrap();
    assert_eq!(
        above
            .iter()
            .map(|a| (a.field, a.run.as_str(), a.profile.as_str()))
            .collect::<Vec<_>>(),
        vec![
            ("maxConcurrentResearchers", "9", "2"),
            ("maxRounds", "8", "3"),
            ("maxCostUSD", "999999999", "5.00"),
            ("maxTokens", "5000000", "200000"),
            ("timeout", "24h", "30m"),
        ]
    );
    // Compared as values, not text: "5" equals "5.00", 1800s equals 30m.
    let same = spec("query: abc\nlimits: {maxCostUSD: \"5\", timeout: 1800s}\n");
    assert_eq!(same.limits_above_profile(Some(&profile)).unwrap(), vec![]);
    // A profile without limits caps nothing; a run without limits asks for nothing more.
    assert_eq!(s.limits_above_profile(None).unwrap(), vec![]);
    assert_eq!(
        spec("query: abc")
            .limits_above_profile(Some(&profile))
            .unwrap(),
        vec![]
    );
    // Fields the profile leaves unset stay the run's own.
    let partial = RunLimits {
        max_cost_usd: Some("5.00".into()),
        ..RunLimits::default()
    };
    let eff = s.effective_limits(Some(&partial)).unwrap();
    assert_eq!(eff.max_cost_micro_usd, Some(5_000_000));
    assert_eq!(eff.max_rounds, Some(8));
    assert_eq!(eff.max_concurrent_researchers, 9);
}

#[test]
fn invalid_limit_strings_are_reported() {
    let s = spec("query: abc\nlimits: {maxCostUSD: \"two\"}\n");
    assert!(matches!(
        s.effective_limits(None),
        Err(ApiError::InvalidUsd { value }) if value == "two"
    ));
}

#[test]
fn phase_display_and_finished() {
    assert_eq!(Phase::Synthesizing.to_string(), "Synthesizing");
    let mut run = ResearchRun::new("r", spec("query: abc"));
    assert_eq!(run.phase(), Phase::Pending);
    assert!(!run.is_finished());
    for (phase, finished) in [
        (Phase::Planning, false),
        (Phase::Researching, false),
        (Phase::Synthesizing, false),
        (Phase::Completed, true),
        (Phase::Failed, true),
        (Phase::Cancelled, true),
    ] {
        run.status = Some(ResearchRunStatus {
            phase: Some(phase),
            ..Default::default()
        });
        assert_eq!(run.is_finished(), finished, "{phase}");
    }
}

#[test]
fn status_serializes_compactly() {
    let status = ResearchRunStatus {
        phase: Some(Phase::Researching),
        progress: Some("exploring".into()),
        usage: Some(RunUsage {
            input_tokens: 10,
            cost_usd: Some("0.01".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        serde_json::json!({
            "phase": "Researching", "progress": "exploring",
            "usage": {"inputTokens": 10, "outputTokens": 0, "costUSD": "0.01", "llmCalls": 0,
                      "searches": 0, "pagesFetched": 0}
        })
    );
}
