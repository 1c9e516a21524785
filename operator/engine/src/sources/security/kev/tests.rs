//! Unit tests of `kev`.

use super::*;
use serde_json::json;

#[test]
fn search_matches_every_keyword_newest_first() {
    let feed = json!({"vulnerabilities": [
        {"cveID": "CVE-2021-44228", "vendorProject": "Apache", "product": "Log4j2",
         "vulnerabilityName": "Apache Log4j2 Remote Code Execution Vulnerability", "dateAdded": "2021-12-10"},
        {"cveID": "CVE-2023-22518", "vendorProject": "Atlassian", "product": "Confluence",
         "vulnerabilityName": "Atlassian Confluence Improper Authorization", "dateAdded": "2023-10-31"},
        {"cveID": "cve-2021-45046", "vendorProject": "Apache", "product": "Log4j2",
         "vulnerabilityName": "Apache Log4j2 Deserialization", "dateAdded": "2023-05-01"},
        {"vendorProject": "no id"}
    ]});
    let catalog = parse(&feed).unwrap();
    assert_eq!(catalog.entries.len(), 3);
    let ids = |v: Vec<&KevEntry>| v.into_iter().map(|e| e.cve_id.clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(catalog.search("apache LOG4J2", 10)),
        vec!["CVE-2021-45046", "CVE-2021-44228"]
    );
    assert_eq!(
        ids(catalog.search("log4j2 confluence", 10)),
        Vec::<String>::new()
    );
    assert_eq!(ids(catalog.search("", 10)), Vec::<String>::new());
    assert!(catalog.by_cve("cve-2021-45046").is_some());
    assert!(matches!(
        parse(&json!({"count": 0})),
        Err(SourceError::Malformed(_))
    ));
}
