//! Unit tests of `earlier_run`.

use super::findings_url;

#[test]
fn findings_sit_beside_the_report_in_the_object_store() {
    assert_eq!(
        findings_url("s3://reports/quarry/ns/weekly-1/what-changed-b3.md").as_deref(),
        Some("s3://reports/quarry/ns/weekly-1/findings.json")
    );
    assert_eq!(findings_url("no-slash"), None);
}
