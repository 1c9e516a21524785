//! Unit tests of `runs`.

use super::*;
use clap::Parser;

#[derive(clap::Parser)]
struct Wrap {
    #[command(flatten)]
    args: ApplyArgs,
}

fn parse(args: &[&str]) -> ApplyArgs {
    Wrap::try_parse_from(std::iter::once("apply").chain(args.iter().copied()))
        .unwrap()
        .args
}

#[test]
fn flags_become_the_spec() {
    let args = parse(&[
        "What does VACUUM FULL lock?",
        "--mode",
        "quick",
        "--outputs",
        "ideas,study,ideas",
        "--top-k",
        "7",
        "--profile",
        "fast",
        "--sources",
        "web",
        "--max-cost-usd",
        "0.50",
        "--timeout",
        "30m",
        "--report",
        "objectStore",
        "--report-prefix",
        "runs/",
        "--ttl-seconds-after-finished",
        "3600",
    ]);
    let run = build_run(&args, Some("team-a")).unwrap();
    assert_eq!(
        serde_json::to_value(&run).unwrap(),
        serde_json::json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"generateName": "what-does-vacuum-full-lock-", "namespace": "team-a"},
            "spec": {
                "query": "What does VACUUM FULL lock?", "mode": "quick",
                "outputs": ["study", "ideas"], "topK": 7, "profileRef": "fast",
                "sources": ["web"], "limits": {"maxCostUSD": "0.50", "timeout": "30m"},
                "report": {"kind": "objectStore", "prefix": "runs/"}, "suspend": false, "cancel": false,
                "ttlSecondsAfterFinished": 3600
            }
        })
    );
}

#[test]
fn defaults_are_the_crds_and_a_name_can_be_given() {
    let run = build_run(&parse(&["abc?", "--name", "r1"]), None).unwrap();
    assert_eq!(
        serde_json::to_value(&run).unwrap(),
        serde_json::json!({
            "apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun",
            "metadata": {"name": "r1"},
            "spec": {
                "query": "abc?", "mode": "deep", "outputs": ["study"], "topK": 5,
                "profileRef": "default", "sources": ["web", "security", "stackexchange"],
                "report": {"kind": "configMap"}, "suspend": false, "cancel": false
            }
        })
    );
}

#[test]
fn bad_flags_are_refused_before_any_request() {
    let err = |args: &[&str]| build_run(&parse(args), None).unwrap_err().to_string();
    assert_eq!(
        err(&["ab"]),
        "the question must be 3 to 4000 characters, not 2"
    );
    assert!(
        err(&["abc", "--name", "Bad_Name"])
            .starts_with("--name \"Bad_Name\" is not a valid run name")
    );
    assert!(
        err(&["abc", "--max-cost-usd", "two"])
            .starts_with("--max-cost-usd: invalid USD amount \"two\"")
    );
    assert!(err(&["abc", "--timeout", "soon"]).starts_with("--timeout: "));
    assert_eq!(
        err(&["abc", "--report-prefix", "x/"]),
        "--report-prefix needs --report objectStore"
    );
    assert!(
        Wrap::try_parse_from(["apply", "abc", "--mode", "fast"])
            .err()
            .unwrap()
            .to_string()
            .contains("unknown value \"fast\": use quick or deep")
    );
}

#[test]
fn generated_names_are_valid_and_short() {
    assert_eq!(
        generated_prefix("How do I decode JSON?"),
        "how-do-i-decode-json-"
    );
    let long = generated_prefix(&"word ".repeat(40));
    assert!(long.len() <= GENERATED_PREFIX_CHARS + 1, "{long}");
    assert!(is_dns1123_subdomain(long.trim_end_matches('-')));
    assert!(!long.trim_end_matches('-').ends_with('-'));
}

#[test]
fn the_cancel_patch_sets_only_spec_cancel() {
    assert_eq!(
        cancel_patch(),
        serde_json::json!({"spec": {"cancel": true}})
    );
}
