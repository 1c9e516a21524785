use super::*;

const TYPES: &str = "Index Types\n§ Index Types\nPostgreSQL provides several index types: B-tree, Hash, GiST, SP-GiST, GIN, BRIN, and the extension bloom. Each index type uses a different algorithm. By default, the `CREATE\n   INDEX` command creates B-tree indexes, which fit the most common situations.";
const ASKED: &str = "Which index type does PostgreSQL's CREATE INDEX create by default?";

#[test]
fn a_default_the_evidence_states_of_another_value_is_unstated() {
    assert!(unstated_default(
        "PostgreSQL's CREATE INDEX creates Hash indexes by default.",
        TYPES,
        ASKED
    ));
    assert!(!unstated_default(
        "PostgreSQL's CREATE INDEX creates B-tree indexes by default.",
        TYPES,
        ASKED
    ));
    // A sentence without "by default" is not judged here.
    assert!(!unstated_default(
        "PostgreSQL provides Hash indexes.",
        TYPES,
        ASKED
    ));
}

#[test]
fn evidence_stating_no_default_backs_no_by_default_claim() {
    let hash = "Index Types\n§ Index Types › Hash\nHash indexes store only a 32-bit hash code derived from the value of the indexed column.";
    assert!(unstated_default(
        "Hash indexes store a 32-bit hash code by default.",
        hash,
        ASKED
    ));
}
