//! Unit tests of `approval`.

use super::*;

#[test]
fn the_approve_patch_carries_the_edited_agenda_only_when_given() {
    assert_eq!(
        approve_patch(&[]),
        serde_json::json!({"spec": {"approval": {"approved": true}}})
    );
    assert_eq!(
        approve_patch(&["json.loads".into()]),
        serde_json::json!({"spec": {"approval": {"approved": true, "agenda": ["json.loads"]}}})
    );
}

#[test]
fn edited_agendas_are_checked_before_the_server_sees_them() {
    assert!(check_tasks(&[]).is_ok());
    assert!(check_tasks(&["How json.loads decodes".into()]).is_ok());
    assert!(matches!(
        check_tasks(&["no".into()]),
        Err(CliError::Usage(_))
    ));
    let many: Vec<String> = (0..11).map(|i| format!("task {i}")).collect();
    assert!(matches!(check_tasks(&many), Err(CliError::Usage(_))));
}
