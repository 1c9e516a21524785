//! Unit tests of `routed`.

use super::*;

#[test]
fn routing_follows_report_kind_and_configuration() {
    assert_eq!(routing(ReportKind::ObjectStore, true), Routing::ObjectStore);
    assert_eq!(
        routing(ReportKind::ConfigMap, true),
        Routing::ConfigMap { overflow: true }
    );
    assert_eq!(
        routing(ReportKind::ConfigMap, false),
        Routing::ConfigMap { overflow: false }
    );
}

#[test]
fn writes_fit_in_configmaps_until_the_limit() {
    let no_overflow = Routing::ConfigMap { overflow: false };
    let overflow = Routing::ConfigMap { overflow: true };
    assert_eq!(place(no_overflow, 10), Ok(Placement::ConfigMap));
    assert_eq!(place(overflow, CONFIGMAP_LIMIT), Ok(Placement::ConfigMap));
    assert_eq!(
        place(overflow, CONFIGMAP_LIMIT + 1),
        Ok(Placement::ObjectStore)
    );
    assert_eq!(place(no_overflow, CONFIGMAP_LIMIT + 1), Err(Overflow));
    // With kind objectStore even the smallest artifact goes to the object store.
    assert_eq!(place(Routing::ObjectStore, 0), Ok(Placement::ObjectStore));
}

#[test]
fn the_overflow_error_names_the_object_store_option() {
    let text = too_large_message("r1-report", 1_234_567);
    assert_eq!(
        text,
        "ConfigMap r1-report would hold 1234567 bytes, over the 1000000-byte ConfigMap limit even after gzip; configure object storage (spec.objectStore in the run's ResearchProfile, or the operator's --object-store-url) and large artifacts go there automatically, or set the run's spec.report.kind to objectStore"
    );
}

#[test]
fn the_report_slot_is_shared() {
    let slot = ReportSlot::default();
    let seen = slot.clone();
    assert_eq!(seen.get(), None);
    slot.set(ReportLocation::Object("s3://b/k.md".into()));
    assert_eq!(
        seen.get(),
        Some(ReportLocation::Object("s3://b/k.md".into()))
    );
}
