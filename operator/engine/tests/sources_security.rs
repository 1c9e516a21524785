//! The security advisory sources (OSV, NVD, CISA KEV, GitHub) and the `SecuritySearch`
//! aggregator against local servers answering in each source's documented format.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::Method;
use serde_json::{Value, json};

use quarry_engine::sources::SourceError;
use quarry_engine::sources::http::Secret;
use quarry_engine::sources::security::{
    GhsaClient, KevCatalog, NvdClient, OsvClient, SecurityConfig, SecurityQuery, SecuritySearch,
};
use quarry_engine::sources::specialised::SecurityLookup;

mod replay;
use replay::{Log, reply, serve};

const T: Duration = Duration::from_secs(5);

/// OSV's documented `/v1/query` answer (one record, fields as in the OSV schema).
fn osv_answer() -> Value {
    json!({"vulns": [{
        "id": "GHSA-462w-v97r-4m45",
        "summary": "Jinja2 sandbox escape via string formatting",
        "details": "In Pallets Jinja before 2.10.1, `str.format_map` allows a sandbox escape.",
        "aliases": ["CVE-2019-10906", "PYSEC-2019-217"],
        "modified": "2024-09-23T20:39:08Z",
        "published": "2019-04-10T14:30:24Z",
        "database_specific": {"severity": "HIGH", "github_reviewed": true, "cwe_ids": ["CWE-693"]},
        "references": [
            {"type": "ADVISORY", "url": "https://nvd.nist.gov/vuln/detail/CVE-2019-10906"},
            {"type": "PACKAGE", "url": "https://github.com/pallets/jinja"}
        ],
        "affected": [{
            "package": {"name": "jinja2", "ecosystem": "PyPI", "purl": "pkg:pypi/jinja2"},
            "ranges": [{"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.10.1"}]}],
            "versions": ["2.0", "2.4.1", "2.10"],
            "database_specific": {"source": "https://github.com/github/advisory-database"}
        }],
        "schema_version": "1.6.0",
        "severity": [{"type": "CVSS_V3", "score": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:N/A:N"}]
    }]})
}

#[tokio::test]
async fn osv_posts_the_documented_query_and_reads_vulns() {
    let (base, log) = serve(|_| reply(200, osv_answer().to_string())).await;
    let osv = OsvClient::new(Some(&base), T).unwrap();
    let found = osv
        .query("jinja2", "PyPI", Some("2.4.1"), 10)
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let a = &found[0];
    assert_eq!(a.id, "GHSA-462w-v97r-4m45");
    assert_eq!(a.url, "https://osv.dev/vulnerability/GHSA-462w-v97r-4m45");
    assert_eq!(a.title, "Jinja2 sandbox escape via string formatting");
    assert_eq!(a.aliases, vec!["CVE-2019-10906", "PYSEC-2019-217"]);
    assert_eq!(
        a.severity.as_deref(),
        Some("HIGH; CVSS_V3 CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:N/A:N")
    );
    assert!(a.facts.contains(&("Fixed in".into(), "2.10.1".into())));
    assert_eq!(a.references.len(), 2);
    let r = log.lock().unwrap()[0].clone();
    assert_eq!(r.method, Method::POST);
    assert_eq!(r.path, "/v1/query");
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body).unwrap(),
        json!({"package": {"name": "jinja2", "ecosystem": "PyPI"}, "version": "2.4.1"})
    );
    // `{}` is "nothing known"; 400 names the problem.
    let (base, _) = serve(|_| reply(200, "{}")).await;
    let osv = OsvClient::new(Some(&base), T).unwrap();
    assert!(osv.query("x", "npm", None, 10).await.unwrap().is_empty());
    let (base, _) = serve(|_| reply(400, r#"{"code":3,"message":"Invalid ecosystem."}"#)).await;
    let osv = OsvClient::new(Some(&base), T).unwrap();
    let err = osv.query("x", "Nope", None, 10).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::Invalid { message, .. } if message == "Invalid ecosystem."),
        "{err:?}"
    );
}

/// NVD's documented CVE API 2.0 answer for one CVE.
fn nvd_answer(ids: &[&str]) -> Value {
    let vulns: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"cve": {
                "id": id,
                "sourceIdentifier": "security@apache.org",
                "published": "2021-12-10T10:15:09.143",
                "lastModified": "2024-07-24T17:08:24.167",
                "vulnStatus": "Analyzed",
                "cisaExploitAdd": "2021-12-10",
                "descriptions": [
                    {"lang": "es", "value": "Apache Log4j2 ... (español)"},
                    {"lang": "en", "value": "Apache Log4j2 2.0-beta9 through 2.15.0 JNDI features do not protect against attacker controlled LDAP."}
                ],
                "metrics": {
                    "cvssMetricV31": [{"source": "nvd@nist.gov", "type": "Primary",
                        "cvssData": {"version": "3.1", "vectorString": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H",
                                     "baseScore": 10.0, "baseSeverity": "CRITICAL"},
                        "exploitabilityScore": 3.9, "impactScore": 6.0}],
                    "cvssMetricV2": [{"source": "nvd@nist.gov", "type": "Primary",
                        "cvssData": {"version": "2.0", "baseScore": 9.3}, "baseSeverity": "HIGH"}]
                },
                "weaknesses": [{"source": "nvd@nist.gov", "type": "Primary", "description": [{"lang": "en", "value": "CWE-917"}]}],
                "references": [
                    {"url": "https://logging.apache.org/log4j/2.x/security.html", "source": "security@apache.org", "tags": ["Vendor Advisory"]},
                    {"url": "https://www.openwall.com/lists/oss-security/2021/12/10/1", "source": "security@apache.org"}
                ]
            }})
        })
        .collect();
    json!({"resultsPerPage": ids.len(), "startIndex": 0, "totalResults": ids.len(), "format": "NVD_CVE",
           "version": "2.0", "timestamp": "2024-08-01T12:00:00.000", "vulnerabilities": vulns})
}

#[tokio::test]
async fn nvd_queries_by_id_and_keyword_with_the_api_key_header() {
    let (base, log) = serve(|r| {
        let id = r.q("cveId").unwrap_or("CVE-2021-44228");
        reply(200, nvd_answer(&[id]).to_string())
    })
    .await;
    let nvd = NvdClient::new(Some(&base), Some(Secret::new("nvd-key")), T).unwrap();
    let found = nvd.by_cve("CVE-2021-44228").await.unwrap();
    assert_eq!(found.len(), 1);
    let a = &found[0];
    assert_eq!(a.url, "https://nvd.nist.gov/vuln/detail/CVE-2021-44228");
    assert_eq!(a.severity.as_deref(), Some("CVSS 3.1 10.0 CRITICAL"));
    assert!(
        a.details.starts_with("Apache Log4j2 2.0-beta9"),
        "English description: {}",
        a.details
    );
    assert_eq!(a.published.as_deref(), Some("2021-12-10T10:15:09.143"));
    assert_eq!(a.modified.as_deref(), Some("2024-07-24T17:08:24.167"));
    assert_eq!(
        a.references[0],
        "https://logging.apache.org/log4j/2.x/security.html"
    );
    nvd.keyword("log4j jndi", 7).await.unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log[0].method, Method::GET);
    assert_eq!(log[0].path, "/rest/json/cves/2.0");
    assert_eq!(log[0].q("cveId"), Some("CVE-2021-44228"));
    assert_eq!(log[0].header("apikey"), Some("nvd-key"));
    assert_eq!(log[1].q("keywordSearch"), Some("log4j jndi"));
    assert_eq!(log[1].q("resultsPerPage"), Some("7"));
    assert_eq!(log[1].q("cveId"), None);
}

#[tokio::test]
async fn nvd_rate_limits_itself_and_maps_403() {
    let (base, log) = serve(|_| reply(200, nvd_answer(&[]).to_string())).await;
    // Without a key NVD allows 5 requests per 30 s: the sixth is refused here.
    let nvd = NvdClient::new(Some(&base), None, T)
        .unwrap()
        .with_max_wait(Duration::from_secs(1));
    for _ in 0..5 {
        nvd.keyword("x", 5).await.unwrap();
    }
    let err = nvd.keyword("x", 5).await.unwrap_err();
    assert!(
        matches!(&err, SourceError::RateLimited { provider, retry_after: Some(d) } if provider == "nvd" && *d > Duration::from_secs(4)),
        "{err:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 5);
    assert!(log.lock().unwrap()[0].header("apikey").is_none());

    // NVD answers 403 when its own limit is hit, and explains bad keys in a `message` header.
    let (base, _) = serve(|_| reply(403, "")).await;
    let err = NvdClient::new(Some(&base), Some(Secret::new("k")), T)
        .unwrap()
        .by_cve("CVE-2021-44228")
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::RateLimited { .. }), "{err:?}");
    let (base, _) = serve(|_| reply(404, "").header("message", "Invalid apiKey")).await;
    let err = NvdClient::new(Some(&base), Some(Secret::new("k")), T)
        .unwrap()
        .by_cve("CVE-2021-44228")
        .await
        .unwrap_err();
    assert!(
        matches!(err, SourceError::Auth { status: 404, .. }),
        "{err:?}"
    );
    let (base, _) = serve(|_| reply(200, "{\"vulnerabilities\": ")).await;
    let err = NvdClient::new(Some(&base), None, T)
        .unwrap()
        .by_cve("CVE-2021-44228")
        .await
        .unwrap_err();
    assert!(matches!(err, SourceError::Malformed(_)), "{err:?}");
}

/// The documented KEV feed shape.
fn kev_feed() -> Value {
    json!({
        "title": "CISA Catalog of Known Exploited Vulnerabilities",
        "catalogVersion": "2024.08.01",
        "dateReleased": "2024-08-01T17:01:36.2405Z",
        "count": 2,
        "vulnerabilities": [
            {"cveID": "CVE-2021-44228", "vendorProject": "Apache", "product": "Log4j2",
             "vulnerabilityName": "Apache Log4j2 Remote Code Execution Vulnerability", "dateAdded": "2021-12-10",
             "shortDescription": "Apache Log4j2 contains a vulnerability where JNDI features do not protect against attacker-controlled JNDI-related endpoints.",
             "requiredAction": "For all affected software assets for which updates exist, apply updates per vendor instructions.",
             "dueDate": "2021-12-24", "knownRansomwareCampaignUse": "Known",
             "notes": "https://logging.apache.org/log4j/2.x/security.html; https://nvd.nist.gov/vuln/detail/CVE-2021-44228",
             "cwes": ["CWE-20", "CWE-400", "CWE-502"]},
            {"cveID": "CVE-2023-4966", "vendorProject": "Citrix", "product": "NetScaler ADC and NetScaler Gateway",
             "vulnerabilityName": "Citrix NetScaler ADC and NetScaler Gateway Buffer Overflow Vulnerability",
             "dateAdded": "2023-10-18", "shortDescription": "Citrix Bleed.", "requiredAction": "Apply mitigations.",
             "dueDate": "2023-11-08", "knownRansomwareCampaignUse": "Known", "notes": "", "cwes": ["CWE-119"]}
        ]
    })
}

#[tokio::test]
async fn kev_is_downloaded_once_cached_and_filtered_locally() {
    let (base, log) = serve(|_| reply(200, kev_feed().to_string())).await;
    let url = format!("{base}/feeds/known_exploited_vulnerabilities.json");
    let kev = KevCatalog::new(Some(&url), T, Duration::from_secs(3600)).unwrap();
    let found = kev.by_cve("cve-2021-44228").await.unwrap();
    assert_eq!(found.len(), 1);
    let a = &found[0];
    assert_eq!(a.id, "CVE-2021-44228");
    assert_eq!(
        a.url,
        "https://www.cisa.gov/known-exploited-vulnerabilities-catalog?search_api_fulltext=CVE-2021-44228"
    );
    assert!(
        a.facts
            .contains(&("Known ransomware use".into(), "Known".into()))
    );
    assert!(
        a.facts
            .contains(&("Remediation due (US agencies)".into(), "2021-12-24".into()))
    );
    assert_eq!(a.references.len(), 2);
    // Second and third lookups: no request.
    let by_keyword = kev.keyword("citrix netscaler", 5).await.unwrap();
    assert_eq!(by_keyword.len(), 1);
    assert!(kev.by_cve("CVE-2000-0001").await.unwrap().is_empty());
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 1, "the feed is downloaded once");
    assert_eq!(log[0].method, Method::GET);
    assert_eq!(log[0].path, "/feeds/known_exploited_vulnerabilities.json");
}

#[tokio::test]
async fn kev_refreshes_after_its_ttl_serves_stale_on_failure_and_bounds_the_feed() {
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    let (base, log) = serve(move |_| {
        let mut n = c.lock().unwrap();
        *n += 1;
        if *n == 1 {
            reply(200, kev_feed().to_string())
        } else {
            reply(503, "")
        }
    })
    .await;
    let kev = KevCatalog::new(Some(&format!("{base}/kev.json")), T, Duration::ZERO).unwrap();
    assert_eq!(kev.by_cve("CVE-2023-4966").await.unwrap().len(), 1);
    // TTL zero: the next lookup downloads again, fails, and serves the cached catalog.
    assert_eq!(kev.by_cve("CVE-2023-4966").await.unwrap().len(), 1);
    assert_eq!(log.lock().unwrap().len(), 2);

    let (base, _) = serve(|_| reply(200, kev_feed().to_string())).await;
    let kev = KevCatalog::new(
        Some(&format!("{base}/kev.json")),
        T,
        Duration::from_secs(60),
    )
    .unwrap()
    .with_max_bytes(512)
    .unwrap();
    let err = kev.by_cve("CVE-2023-4966").await.unwrap_err();
    assert!(
        matches!(&err, SourceError::TooLarge { provider, limit: 512 } if provider == "cisa-kev"),
        "{err:?}"
    );
    let (base, _) = serve(|_| reply(200, r#"{"title": "not the feed"}"#)).await;
    let kev = KevCatalog::new(Some(&base), T, Duration::from_secs(60)).unwrap();
    assert!(matches!(
        kev.keyword("x", 5).await,
        Err(SourceError::Malformed(_))
    ));
}

/// GitHub's documented global advisory list item.
fn ghsa_answer() -> Value {
    json!([{
        "ghsa_id": "GHSA-jfh8-c2jp-5v3q",
        "cve_id": "CVE-2021-44228",
        "url": "https://api.github.com/advisories/GHSA-jfh8-c2jp-5v3q",
        "html_url": "https://github.com/advisories/GHSA-jfh8-c2jp-5v3q",
        "repository_advisory_url": null,
        "summary": "Remote code injection in Log4j",
        "description": "Logging untrusted data with log4j versions 2.0-beta9 through 2.14.1 can result in a remote code execution.",
        "type": "reviewed",
        "severity": "critical",
        "source_code_location": "",
        "identifiers": [{"value": "GHSA-jfh8-c2jp-5v3q", "type": "GHSA"}, {"value": "CVE-2021-44228", "type": "CVE"}],
        "references": ["https://nvd.nist.gov/vuln/detail/CVE-2021-44228"],
        "published_at": "2021-12-10T00:40:56Z",
        "updated_at": "2024-04-22T21:25:26Z",
        "github_reviewed_at": "2021-12-10T00:40:41Z",
        "nvd_published_at": "2021-12-10T10:15:00Z",
        "withdrawn_at": null,
        "vulnerabilities": [{
            "package": {"ecosystem": "maven", "name": "org.apache.logging.log4j:log4j-core"},
            "vulnerable_version_range": ">= 2.13.0, < 2.15.0",
            "first_patched_version": "2.15.0",
            "vulnerable_functions": []
        }],
        "cvss": {"vector_string": "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", "score": 10.0},
        "cwes": [{"cwe_id": "CWE-502", "name": "Deserialization of Untrusted Data"}],
        "credits": []
    }])
}

#[tokio::test]
async fn github_advisories_request_headers_and_parsing() {
    let (base, log) = serve(|_| reply(200, ghsa_answer().to_string())).await;
    let gh = GhsaClient::new(Some(&base), Some(Secret::new("ghp_token")), T).unwrap();
    let found = gh.by_cve("CVE-2021-44228", 5).await.unwrap();
    assert_eq!(found.len(), 1);
    let a = &found[0];
    assert_eq!(a.id, "GHSA-jfh8-c2jp-5v3q");
    assert_eq!(a.url, "https://github.com/advisories/GHSA-jfh8-c2jp-5v3q");
    assert_eq!(a.severity.as_deref(), Some("critical"));
    assert_eq!(a.aliases, vec!["CVE-2021-44228"]);
    assert_eq!(
        a.facts,
        vec![(
            "Affected".to_string(),
            "org.apache.logging.log4j:log4j-core (maven) >= 2.13.0, < 2.15.0, first patched 2.15.0"
                .to_string()
        )]
    );
    gh.affecting("log4j-core", Some("2.14.1"), Some("maven"), 5)
        .await
        .unwrap();
    let log = log.lock().unwrap();
    let r = &log[0];
    assert_eq!(r.method, Method::GET);
    assert_eq!(r.path, "/advisories");
    assert_eq!(r.q("cve_id"), Some("CVE-2021-44228"));
    assert_eq!(r.header("accept"), Some("application/vnd.github+json"));
    assert_eq!(r.header("x-github-api-version"), Some("2022-11-28"));
    assert_eq!(r.header("authorization"), Some("Bearer ghp_token"));
    assert_eq!(log[1].q("affects"), Some("log4j-core@2.14.1"));
    assert_eq!(log[1].q("ecosystem"), Some("maven"));
}

#[tokio::test]
async fn github_rate_limits_and_auth_errors() {
    let reset = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let (base, _) = serve(move |_| {
        reply(
            403,
            r#"{"message":"API rate limit exceeded for 127.0.0.1.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"}"#,
        )
        .header("x-ratelimit-limit", "60")
        .header("x-ratelimit-remaining", "0")
        .header("x-ratelimit-reset", &reset.to_string())
    })
    .await;
    let gh = GhsaClient::new(Some(&base), None, T).unwrap();
    let err = gh.by_cve("CVE-2021-44228", 5).await.unwrap_err();
    match &err {
        SourceError::RateLimited {
            provider,
            retry_after: Some(d),
        } => {
            assert_eq!(provider, "github-advisories");
            assert!(
                *d > Duration::from_secs(100) && *d <= Duration::from_secs(120),
                "{d:?}"
            );
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    // Secondary limit: 403 with retry-after.
    let (base, _) = serve(|_| {
        reply(
            403,
            r#"{"message":"You have exceeded a secondary rate limit."}"#,
        )
        .header("retry-after", "60")
    })
    .await;
    let err = GhsaClient::new(Some(&base), None, T)
        .unwrap()
        .by_cve("CVE-2021-44228", 5)
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(60)));
    // A plain 403 or a 401 is the token.
    for status in [401, 403] {
        let (base, _) = serve(move |_| reply(status, r#"{"message":"Bad credentials"}"#)).await;
        let err = GhsaClient::new(Some(&base), Some(Secret::new("ghp_bad")), T)
            .unwrap()
            .by_cve("CVE-2021-44228", 5)
            .await
            .unwrap_err();
        assert!(matches!(err, SourceError::Auth { .. }), "{status}: {err:?}");
        assert!(!err.to_string().contains("ghp_bad"));
    }
    let (base, _) = serve(|_| reply(422, r#"{"message":"Validation Failed: ecosystem"}"#)).await;
    let err = GhsaClient::new(Some(&base), None, T)
        .unwrap()
        .affecting("x", None, Some("nope"), 5)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SourceError::Invalid { message, .. } if message.contains("ecosystem")),
        "{err:?}"
    );
}

/// One server playing all four sources, routed by path; `github_fails` makes GitHub rate limit.
async fn all_sources(github_fails: bool) -> (SecuritySearch, Log) {
    let (base, log) = serve(move |r| match r.path.as_str() {
        "/v1/query" => reply(200, osv_answer().to_string()),
        "/rest/json/cves/2.0" => reply(
            200,
            nvd_answer(&[r.q("cveId").unwrap_or("CVE-2021-44228")]).to_string(),
        ),
        "/kev.json" => reply(200, kev_feed().to_string()),
        "/advisories" if github_fails => {
            reply(429, r#"{"message":"rate limited"}"#).header("retry-after", "30")
        }
        "/advisories" => reply(200, ghsa_answer().to_string()),
        _ => reply(404, ""),
    })
    .await;
    let search = SecuritySearch::new(SecurityConfig {
        osv_base_url: Some(base.clone()),
        nvd_base_url: Some(base.clone()),
        nvd_api_key: Some(Secret::new("nvd-key")),
        kev_url: Some(format!("{base}/kev.json")),
        github_base_url: Some(base.clone()),
        github_token: None,
        timeout: T,
        ..SecurityConfig::default()
    })
    .unwrap();
    (search, log)
}

fn paths(log: &Log) -> Vec<String> {
    let mut p: Vec<String> = log.lock().unwrap().iter().map(|r| r.path.clone()).collect();
    p.sort();
    p
}

#[tokio::test]
async fn a_cve_goes_to_nvd_kev_and_github_and_one_failure_spares_the_rest() {
    let (search, log) = all_sources(true).await;
    let answer = search
        .lookup(&SecurityQuery::text(
            "Is CVE-2021-44228 exploited in the wild?",
        ))
        .await;
    assert_eq!(
        paths(&log),
        vec!["/advisories", "/kev.json", "/rest/json/cves/2.0"]
    );
    let urls: Vec<&str> = answer.hits.iter().map(|h| h.url.as_str()).collect();
    assert_eq!(
        urls,
        vec![
            "https://nvd.nist.gov/vuln/detail/CVE-2021-44228",
            "https://www.cisa.gov/known-exploited-vulnerabilities-catalog?search_api_fulltext=CVE-2021-44228",
        ]
    );
    assert!(
        answer.text.contains(
            "- GitHub: failed: github-advisories is rate limiting requests; retry after 30s"
        ),
        "{}",
        answer.text
    );
    assert!(
        answer.text.contains("- NVD: 1 advisories"),
        "{}",
        answer.text
    );
    assert!(answer.text.contains("CVSS 3.1 10.0 CRITICAL"));
    assert!(answer.text.contains("Known ransomware use: Known"));

    let (search, _) = all_sources(false).await;
    let answer = search.lookup(&SecurityQuery::text("CVE-2021-44228")).await;
    assert!(
        answer
            .hits
            .iter()
            .any(|h| h.url == "https://github.com/advisories/GHSA-jfh8-c2jp-5v3q")
    );
}

#[tokio::test]
async fn a_package_goes_to_osv_and_github_in_their_own_ecosystem_names() {
    let (search, log) = all_sources(false).await;
    let answer = search
        .lookup(&SecurityQuery {
            query: "jinja2 sandbox".into(),
            package: Some("jinja2".into()),
            ecosystem: Some("pip".into()),
            version: Some("2.4.1".into()),
        })
        .await;
    assert_eq!(paths(&log), vec!["/advisories", "/v1/query"]);
    let log = log.lock().unwrap();
    let osv = log.iter().find(|r| r.path == "/v1/query").unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&osv.body).unwrap()["package"]["ecosystem"],
        json!("PyPI")
    );
    let gh = log.iter().find(|r| r.path == "/advisories").unwrap();
    assert_eq!(gh.q("ecosystem"), Some("pip"));
    assert_eq!(gh.q("affects"), Some("jinja2@2.4.1"));
    assert!(answer.hits.iter().any(|h| h.url
        == "https://osv.dev/vulnerability/GHSA-462w-v97r-4m45"
        && h.engine == "osv"));
}

#[tokio::test]
async fn free_text_goes_to_nvd_keywords_and_kev() {
    let (search, log) = all_sources(false).await;
    let answer = search
        .lookup(&SecurityQuery::text("citrix netscaler"))
        .await;
    assert_eq!(paths(&log), vec!["/kev.json", "/rest/json/cves/2.0"]);
    assert_eq!(
        log.lock()
            .unwrap()
            .iter()
            .find(|r| r.path == "/rest/json/cves/2.0")
            .unwrap()
            .q("keywordSearch"),
        Some("citrix netscaler")
    );
    assert!(answer.hits.iter().any(|h| h.url.ends_with("CVE-2023-4966")));
}

#[tokio::test]
async fn the_model_text_stays_within_seed_002_limits() {
    let ids: Vec<String> = (0..300).map(|i| format!("CVE-2024-{i:05}")).collect();
    let answer_body = {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut v = nvd_answer(&refs);
        for vuln in v["vulnerabilities"].as_array_mut().unwrap() {
            vuln["cve"]["descriptions"][1]["value"] = json!("long description ".repeat(100));
        }
        v.to_string()
    };
    let (base, _) = serve(move |_| reply(200, answer_body.clone())).await;
    let search = SecuritySearch::new(SecurityConfig {
        nvd_base_url: Some(base.clone()),
        kev_url: Some(format!("{base}/kev.json")),
        timeout: T,
        per_source_limit: 300,
        ..SecurityConfig::default()
    })
    .unwrap();
    let answer = search
        .lookup(&SecurityQuery::text("long description"))
        .await;
    assert_eq!(answer.hits.len(), 300, "every hit is kept for citation");
    assert!(
        answer.text.len() <= 50 * 1024,
        "{} bytes",
        answer.text.len()
    );
    assert!(answer.text.lines().count() <= 2001);
    assert!(answer.text.contains("[Truncated"));
    // The source summary comes before the cut.
    assert!(
        answer.text.contains("- NVD: 300 advisories"),
        "{}",
        &answer.text[..600]
    );
}
