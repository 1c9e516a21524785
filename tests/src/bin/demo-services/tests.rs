//! Unit tests of `demo-services`.

use super::*;

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn doc_tree_flags_repeat_and_the_profile_is_required() {
    assert_eq!(
        parse_args(&args(&[
            "p.yaml",
            "--doc-tree",
            "git-doc",
            "--doc-tree=/opt/m"
        ])),
        Ok((
            "p.yaml".to_string(),
            vec!["git-doc".to_string(), "/opt/m".to_string()]
        ))
    );
    assert_eq!(
        parse_args(&args(&["p.yaml"])),
        Ok(("p.yaml".to_string(), vec![]))
    );
    assert!(parse_args(&args(&["--doc-tree", "git-doc"])).is_err());
    assert!(parse_args(&args(&["p.yaml", "--doc-tree"])).is_err());
    assert!(parse_args(&args(&["p.yaml", "--scripted-model"])).is_err());
    assert!(parse_args(&args(&["a", "b"])).is_err());
}
