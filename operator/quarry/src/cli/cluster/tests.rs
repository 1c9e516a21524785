//! Unit tests of `cluster`.

use super::*;
use kube::core::Status;

fn api(code: u16, message: &str, name: Option<&str>) -> kube::Error {
    let mut value = serde_json::json!({"status": "Failure", "code": code, "message": message, "reason": "NotFound"});
    if let Some(name) = name {
        value["details"] =
            serde_json::json!({"name": name, "group": "quarry.dev", "kind": "researchruns"});
    }
    let status: Status = serde_json::from_value(value).unwrap();
    kube::Error::Api(Box::new(status))
}

#[test]
fn a_missing_object_and_a_missing_api_are_told_apart() {
    let e = classify(
        api(404, "researchruns.quarry.dev \"r9\" not found", Some("r9")),
        "reading ResearchRun r9",
        Target::Run("r9"),
        "team-a",
        "https://k",
    );
    assert_eq!(
        e.to_string(),
        "ResearchRun \"r9\" not found in namespace \"team-a\".\n  List the runs with: quarry list -n team-a   (or quarry list -A for every namespace)"
    );
    let e = classify(
        api(404, "404 page not found", None),
        "reading ResearchRun r9",
        Target::Run("r9"),
        "team-a",
        "https://k",
    );
    assert!(matches!(e, CliError::CrdMissing), "{e}");
    assert!(e.to_string().contains("quarry crd | kubectl apply -f -"));
}

#[test]
fn refusals_and_conflicts_say_what_to_do() {
    let e = classify(
        api(
            403,
            "researchruns.quarry.dev is forbidden: User \"bob\" cannot create resource",
            None,
        ),
        "create a ResearchRun",
        Target::Collection,
        "team-a",
        "https://k",
    );
    assert_eq!(
        e.to_string(),
        "the API server refused to create a ResearchRun: researchruns.quarry.dev is forbidden: User \"bob\" cannot create resource\n  Your user needs the quarry-edit ClusterRole (quarry-view to read) bound in namespace \"team-a\"."
    );
    let e = classify(
        api(409, "already exists", Some("r1")),
        "create",
        Target::Run("r1"),
        "team-a",
        "https://k",
    );
    assert!(matches!(e, CliError::AlreadyExists { .. }), "{e}");
    let e = classify(
        api(
            422,
            "spec.query: Invalid value: \"ab\": spec.query in body should be at least 3 chars long",
            None,
        ),
        "create",
        Target::Collection,
        "team-a",
        "https://k",
    );
    assert_eq!(
        e.to_string(),
        "the API server rejected the ResearchRun: spec.query: Invalid value: \"ab\": spec.query in body should be at least 3 chars long"
    );
}
