use super::*;
use crate::research::writing::evidence::check_support;

const HASH_MEM: &str = "Server Configuration\n§ Resource Consumption › Memory › hash_mem_multiplier (floating point)\nUsed to compute the maximum amount of memory that hash-based operations can use. The final limit is determined by multiplying `work_mem` by `hash_mem_multiplier`. The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.\n";

const WORK_MEM: &str = "Server Configuration\n§ Resource Consumption › Memory › work_mem (integer)\nSets the base maximum amount of memory to be used by a query operation before writing to temporary disk files. The default value is four megabytes (4MB).\n";

const POOL: &str = "concurrent.futures\n§ concurrent.futures › ThreadPoolExecutor › class concurrent.futures.ThreadPoolExecutor(max_workers=None)\nIf max_workers is None or not given, it will default to min(32, os.cpu_count() + 4).\n";

const WORK_MEM_Q: &str = "What is the default value of PostgreSQL's work_mem?";

#[test]
fn the_entry_is_the_first_name_of_the_last_heading() {
    assert_eq!(entry(HASH_MEM).as_deref(), Some("hash_mem_multiplier"));
    assert_eq!(
        entry(POOL).as_deref(),
        Some("concurrent.futures.threadpoolexecutor")
    );
    assert_eq!(entry("T\n§ Resource Consumption\nText 2.\n"), None);
    let page = format!("{HASH_MEM}{}", WORK_MEM.split_once('\n').unwrap().1);
    assert_eq!(entry(&page), None, "a whole page documents no one entry");
}

#[test]
fn a_default_given_to_a_name_the_entry_only_mentions_is_unsupported() {
    let claim = "The default value of PostgreSQL's work_mem is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.";
    assert!(number_of_another_entry(claim, HASH_MEM, &[]));
    let verdict = check_support(claim, HASH_MEM, WORK_MEM_Q);
    assert!(!verdict.supported, "{verdict:?}");
    // The passage's sentence copied names `work_mem` after the number: said as the page says it.
    let copied = "The default value is 2.0, which makes hash-based operations use twice the usual `work_mem` base amount.";
    assert!(!number_of_another_entry(copied, HASH_MEM, &[]));
}

#[test]
fn the_entrys_own_number_and_a_name_before_the_number_pass() {
    let own = "The default value of hash_mem_multiplier is 2.0, twice the usual `work_mem` amount.";
    assert!(!number_of_another_entry(own, HASH_MEM, &[]));
    assert!(check_support(own, HASH_MEM, "What is the default of hash_mem_multiplier?").supported);
    // The sentence holding the number names max_workers before it: said of max_workers.
    let param = "max_workers defaults to min(32, os.cpu_count() + 4).";
    assert!(!number_of_another_entry(param, POOL, &[]));
    // The entry written by its last part.
    let short =
        "ThreadPoolExecutor uses at most 32 workers by default, min(32, os.cpu_count() + 4).";
    assert!(!number_of_another_entry(short, POOL, &[]));
    // A product's name is no other entry: the product has the entry's default.
    let product = "PostgreSQL allows 100 connections by default.";
    let max_connections = "T\n§ Connection Settings › max_connections (integer)\nDetermines the maximum number of concurrent connections. The default is typically 100 connections.\n";
    assert!(!number_of_another_entry(product, max_connections, &[]));
    // The entry named by its class, and a name the page escapes ("max\_workers"): the
    // page's own note, quoted (a tuning report's lead).
    let note = "T\n§ concurrent.futures › class concurrent.futures.ThreadPoolExecutor(max_workers=None)\nChanged in version 3.5: If *max\\_workers* is `None` or not given, it will default to the number of processors on the machine, multiplied by `5`, assuming that `ThreadPoolExecutor` is often used to overlap I/O.\n";
    let quoted = "“Changed in version 3.5: If *max_workers* is `None` or not given, it will default to the number of processors on the machine, multiplied by `5`, assuming that `ThreadPoolExecutor` is often used to overlap I/O”";
    assert!(!number_of_another_entry(quoted, note, &[]));
    let unnamed = quoted.replace("`ThreadPoolExecutor`", "the pool");
    assert!(!number_of_another_entry(&unnamed, note, &[]));
    // Its own entry's default.
    let right = "The default value of work_mem is 4MB.";
    assert!(!number_of_another_entry(right, WORK_MEM, &[]));
    assert!(check_support(right, WORK_MEM, WORK_MEM_Q).supported);
}

#[test]
fn claims_without_names_numbers_or_entries_are_left_to_the_other_checks() {
    let plain = "Hash-based operations can use twice the base amount, 2.0 times.";
    assert!(!number_of_another_entry(plain, HASH_MEM, &[]));
    let no_number = "The final limit multiplies `work_mem` by a factor.";
    assert!(!number_of_another_entry(no_number, HASH_MEM, &[]));
    let section = "T\n§ Resource Consumption\nThe default value is 2.0, said of `work_mem`.\n";
    assert!(!number_of_another_entry(
        "The default of work_mem is 2.0.",
        section,
        &[]
    ));
    let restated = "In PostgreSQL, `work_mem` is 15 times multiplied for hashes.";
    let passage = "T\n§ A › hash_mem_multiplier\nIn 15 releases the limit is multiplied.\n";
    assert!(!number_of_another_entry(
        restated,
        passage,
        &["15".to_string()]
    ));
    assert!(number_of_another_entry(restated, passage, &[]));
}
