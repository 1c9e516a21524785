//! Unit tests of `store`.

use super::*;

#[test]
fn queries_become_safe_file_stems() {
    assert_eq!(
        sanitize_query("How does json.loads() work?"),
        "how-does-json-loads-work"
    );
    assert_eq!(sanitize_query("../../etc/passwd"), "etc-passwd");
    assert_eq!(sanitize_query("???"), "research");
    assert!(sanitize_query(&"a b ".repeat(100)).len() <= 60);
}
