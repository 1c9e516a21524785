//! Unit tests of `evidence::local`.

use super::*;

const PAGE: &str = "Resource Consumption
§ Resource Consumption › hash_mem_multiplier (floating point)
Higher settings may be effective where work_mem has already been increased to 40MB or more. The default value is 2.0.

§ Resource Consumption › maintenance_work_mem (integer)
Note that when autovacuum runs, this memory may be allocated several times, so be careful not to set the default value too high.

§ Connections › max_connections (integer)
Determines the maximum number of concurrent connections. The default is typically 100 connections.

§ Connections › superuser_reserved_connections (integer)
Determines the number of connection slots reserved for superusers. The default value is three connections.
";

#[test]
fn a_subject_and_a_number_from_two_passages_of_a_page_are_no_support() {
    let asked = "What is the default of maintenance_work_mem?";
    let claim = "The default value of maintenance_work_mem is 40MB.";
    // The page as a whole names the subject and holds the number.
    assert!(check_support(claim, PAGE, asked).supported);
    let v = check_by_passage(claim, PAGE, asked);
    assert!(!v.supported, "{v:?}");
    // One passage saying it is support.
    let v = check_by_passage(
        "The default value of hash_mem_multiplier is 2.0.",
        PAGE,
        asked,
    );
    assert!(v.supported, "{v:?}");
}

#[test]
fn a_sentence_whose_clauses_two_passages_say_is_supported() {
    let claim = "The default value of max_connections is 100 connections, and three connection slots are reserved for superusers.";
    let v = check_by_passage(claim, PAGE, "What are the connection defaults?");
    assert!(v.supported, "{v:?}");
}

#[test]
fn a_page_is_split_into_its_passages_each_under_the_title() {
    let parts = passages(PAGE);
    assert_eq!(parts.len(), 4);
    assert!(
        parts[1].starts_with("Resource Consumption\n§ Resource Consumption › maintenance_work_mem")
    );
    assert_eq!(passages("no marks here"), ["no marks here"]);
}

#[test]
fn a_sentence_splits_into_clauses_at_semicolons_and_joined_commas() {
    assert_eq!(
        clauses("A is 100 connections, and three slots are reserved; B is off, as documented."),
        [
            "A is 100 connections",
            "and three slots are reserved",
            "B is off, as documented."
        ]
    );
    assert_eq!(
        clauses("One clause, with a comma."),
        ["One clause, with a comma."]
    );
}
