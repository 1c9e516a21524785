//! Unit tests of `fake_apiserver`.

use super::*;

#[test]
fn merge_patches_follow_rfc_7386() {
    let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
    merge_patch(&mut target, &json!({"a": "z", "c": {"f": null}}));
    assert_eq!(target, json!({"a": "z", "c": {"d": "e"}}));
    merge_patch(&mut target, &json!({"spec": {"cancel": true}}));
    assert_eq!(target["spec"], json!({"cancel": true}));
}

#[test]
fn paths_and_queries_are_parsed() {
    assert_eq!(
        route("/apis/quarry.dev/v1alpha1/namespaces/ns/researchruns/r1"),
        Some((
            "quarry.dev/v1alpha1".into(),
            Some("ns".into()),
            "researchruns".into(),
            Some("r1".into())
        ))
    );
    assert_eq!(
        route("/apis/quarry.dev/v1alpha1/researchruns"),
        Some((
            "quarry.dev/v1alpha1".into(),
            None,
            "researchruns".into(),
            None
        ))
    );
    assert_eq!(
        query_param(
            "&fieldSelector=metadata.name%3Dr1&watch=true",
            "fieldSelector"
        ),
        Some("metadata.name=r1".into())
    );
    assert_eq!(
        proxied_service("/api/v1/namespaces/ns/services/quarry:http/proxy/api/v1/x"),
        Some("quarry")
    );
    assert_eq!(
        proxied_service("/api/v1/namespaces/ns/services/quarry"),
        None
    );
}
