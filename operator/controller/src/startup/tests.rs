//! Unit tests of `startup`.

use super::watch_scopes;
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
