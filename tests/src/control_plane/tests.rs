//! Unit tests of `control_plane`.

use super::*;

#[test]
fn shipped_crds_carry_the_newer_fields_and_stripping_removes_only_those() {
    let crds = shipped_crds().unwrap();
    assert_eq!(crds.len(), 4, "four CRDs in crds/");
    let text = serde_json::to_string(&crds).unwrap();
    // Real clusters get the fields: they stay in crds/.
    assert!(
        text.contains("\"selectableFields\""),
        "crds/ lost selectableFields"
    );
    let mut stripped = crds.clone();
    for crd in &mut stripped {
        strip_newer_crd_fields(crd);
    }
    let after = serde_json::to_string(&stripped).unwrap();
    assert!(!after.contains("\"selectableFields\""));
    // The CEL rules themselves survive.
    assert_eq!(
        text.matches("\"rule\"").count(),
        after.matches("\"rule\"").count()
    );
    // A property named `reason` (condition schemas have one) is a schema property, not a
    // rule's key: it is kept.
    assert_eq!(
        text.matches("\"reason\":{").count(),
        after.matches("\"reason\":{").count()
    );
}
