//! Unit tests of `egress`.

use super::*;

#[test]
fn narrowing_keeps_only_what_the_operator_exempts() {
    let p = EgressPolicy::new(["ollama.models.svc", "10.0.0.7"]);
    let asked: Vec<String> = ["169.254.169.254", "OLLAMA.models.svc.", "127.0.0.1"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(p.narrow(&asked), vec!["OLLAMA.models.svc.".to_string()]);
    assert!(EgressPolicy::default().narrow(&asked).is_empty());
}

#[test]
fn urls_are_refused_unless_public_or_exempt() {
    let p = EgressPolicy::new(["127.0.0.1"]);
    let check = |u: &str| p.check_url(&Url::parse(u).unwrap());
    assert!(check("https://api.openai.com/v1").is_ok());
    assert!(check("http://127.0.0.1:8080/v1").is_ok());
    for refused in [
        "http://169.254.169.254/latest/meta-data",
        "https://kubernetes.default.svc/api",
        "http://127.0.0.2:8080/",
        "http://[::1]:8080/",
        "http://10.0.0.1/",
        "http://localhost:11434/",
    ] {
        let e = check(refused).unwrap_err();
        assert!(e.contains("egress policy"), "{refused}: {e}");
    }
    assert!(check("file:///etc/passwd").is_err());
}
