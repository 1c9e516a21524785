//! Unit tests of `startup`.

use super::{sealing_key, watch_scopes};
use crate::error::Error;
use crate::leader_election;

#[test]
fn every_metric_reason_is_zeroed_at_start_and_names_its_variant() {
    let serde = serde_json::from_str::<u8>("x").unwrap_err();
    let errors = [
        Error::MissingMetadata("uid"),
        Error::Serialize {
            what: "status",
            source: serde,
        },
        Error::Config("none".into()),
        Error::NotLeader,
        Error::Leader(leader_election::LeaderError::Lost("l".into())),
        Error::ArtifactCleanup("x".into()),
    ];
    let zeroed = Error::metric_reasons();
    for error in &errors {
        assert!(
            zeroed.contains(&error.metric_reason()),
            "{} is not zeroed at start",
            error.metric_reason()
        );
    }
    assert_eq!(errors[1].metric_reason(), "Serialization");
    assert_eq!(
        zeroed,
        [
            "KubeApi",
            "MissingMetadata",
            "Serialization",
            "Server",
            "Config",
            "NotLeader",
            "LeaderElection",
            "TemplateRefused",
            "ArtifactCleanup",
            "StoredSpecInvalid",
        ],
        "the labels dashboards and alerts already use"
    );
}

#[test]
fn watch_scopes_split_a_namespace_list() {
    assert_eq!(watch_scopes(None), vec![None]);
    assert_eq!(watch_scopes(Some("")), vec![None]);
    assert_eq!(
        watch_scopes(Some("research")),
        vec![Some("research".to_owned())]
    );
    assert_eq!(
        watch_scopes(Some("research, team-b,research,")),
        vec![Some("research".to_owned()), Some("team-b".to_owned())]
    );
}

#[test]
fn scale_out_mode_needs_a_usable_sealing_key_file() {
    let missing = sealing_key(None).unwrap_err().to_string();
    assert!(
        missing.contains("scale-out mode (--workers) needs a sealing key")
            && missing.contains("QUARRY_SEALING_KEY_FILE"),
        "{missing}"
    );
    let dir = std::env::temp_dir().join(format!("quarry-sealing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let short = dir.join("short");
    std::fs::write(&short, "tiny\n").unwrap();
    let refused = sealing_key(Some(&short)).unwrap_err().to_string();
    assert!(
        refused.contains("has 4 bytes; it needs at least 32"),
        "{refused}"
    );
    let good = dir.join("good");
    std::fs::write(&good, "x".repeat(48)).unwrap();
    assert_eq!(sealing_key(Some(&good)).unwrap().id().len(), 16);
    std::fs::remove_dir_all(&dir).unwrap();
}
