//! Unit tests of `source`.

use super::*;

#[test]
fn the_form_becomes_a_run_the_api_server_validates() {
    let form = NewRun {
        query: "  What does VACUUM FULL lock?  ".into(),
        mode: "quick".into(),
        profile: "default".into(),
        outputs: "study, ideas".into(),
        max_cost_usd: "0.50".into(),
        timeout: String::new(),
    };
    let run = form.to_run("team").unwrap();
    assert_eq!(
        run.metadata.generate_name.as_deref(),
        Some("what-does-vacuum-full-lock-")
    );
    assert_eq!(run.metadata.namespace.as_deref(), Some("team"));
    assert_eq!(run.spec.query, "What does VACUUM FULL lock?");
    assert_eq!(run.spec.profile_ref, "default");
    let spec = serde_json::to_value(&run.spec).unwrap();
    assert_eq!(spec["outputs"], serde_json::json!(["study", "ideas"]));
    assert_eq!(spec["limits"]["maxCostUSD"], "0.50");
    assert!(matches!(
        NewRun {
            query: "a".into(),
            ..NewRun::default()
        }
        .to_run("team"),
        Err(SourceError::Invalid(_))
    ));
}
