//! Unit tests of `guard`.

use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn refuses_every_non_public_range() {
    for (addr, reason) in [
        ("127.0.0.1", "loopback address"),
        ("127.8.9.10", "loopback address"),
        ("10.0.0.1", "private address"),
        ("172.16.5.4", "private address"),
        ("192.168.1.1", "private address"),
        ("169.254.1.1", "link-local address"),
        ("169.254.169.254", "cloud metadata address"),
        ("100.100.100.200", "cloud metadata address"),
        ("100.64.0.1", "shared (CGNAT) address"),
        ("100.127.255.254", "shared (CGNAT) address"),
        ("0.0.0.0", "unspecified address"),
        ("0.1.2.3", "unspecified address"),
        ("255.255.255.255", "broadcast address"),
        ("224.0.0.1", "multicast address"),
        ("::1", "loopback address"),
        ("::", "unspecified address"),
        ("fc00::1", "unique local (private) address"),
        ("fd12:3456::1", "unique local (private) address"),
        ("fd00:ec2::254", "cloud metadata address"),
        ("fe80::1", "link-local address"),
        ("ff02::1", "multicast address"),
        ("::ffff:127.0.0.1", "loopback address"),
        ("::ffff:10.1.2.3", "private address"),
        ("::ffff:169.254.169.254", "cloud metadata address"),
        ("::127.0.0.1", "loopback address"),
        ("64:ff9b::a9fe:a9fe", "cloud metadata address"),
    ] {
        assert_eq!(blocked_reason(ip(addr)), Some(reason), "{addr}");
    }
}

#[test]
fn accepts_public_addresses() {
    for addr in [
        "93.184.215.14",
        "8.8.8.8",
        "100.63.255.255",
        "100.128.0.1",
        "172.32.0.1",
        "2606:4700::1111",
        "::ffff:8.8.8.8",
    ] {
        assert_eq!(blocked_reason(ip(addr)), None, "{addr}");
    }
}

#[test]
fn host_rules_allow_and_deny_by_name() {
    let rules = HostRules::new(
        &["127.0.0.1".into(), "[::1]".into(), "Intranet.Local".into()],
        &["evil.example".into()],
    );
    assert!(rules.is_allowed("127.0.0.1"));
    assert!(rules.is_allowed("[::1]"));
    assert!(rules.is_allowed("intranet.local."));
    assert!(!rules.is_allowed("127.0.0.2"));
    assert_eq!(rules.denied_by("a.b.EVIL.example"), Some("evil.example"));
    assert_eq!(rules.denied_by("evil.example"), Some("evil.example"));
    assert_eq!(rules.denied_by("notevil.example"), None);
    assert!(check_host(&rules, &url::Host::Ipv4(Ipv4Addr::LOCALHOST)).is_ok());
    assert_eq!(
        check_host(&rules, &url::Host::Ipv4(Ipv4Addr::new(10, 0, 0, 1))),
        Err("10.0.0.1 is a private address".to_string())
    );
    assert!(check_host(&rules, &url::Host::Domain("sub.evil.example")).is_err());
}

#[test]
fn allowed_domains_restrict_by_name_and_deny_wins() {
    let rules = HostRules::new(&["127.0.0.1".into()], &["bad.example.org".into()])
        .with_allowed_domains(&["Example.org".into(), "127.0.0.1".into()]);
    assert!(!rules.outside_allowed_domains("example.org"));
    assert!(!rules.outside_allowed_domains("docs.example.org."));
    assert!(rules.outside_allowed_domains("notexample.org"));
    assert!(rules.outside_allowed_domains("example.net"));
    assert_eq!(
        check_host(&rules, &url::Host::Domain("example.net")),
        Err("host example.net is not in the allowed domains (example.org, 127.0.0.1)".into())
    );
    assert_eq!(
        check_host(&rules, &url::Host::Domain("x.bad.example.org")),
        Err("host x.bad.example.org is in the denied domain bad.example.org".into())
    );
    assert!(check_host(&rules, &url::Host::Ipv4(Ipv4Addr::LOCALHOST)).is_ok());
    // The allowed domains never lift the address guard.
    let rules = HostRules::new(&[], &[]).with_allowed_domains(&["10.0.0.1".into()]);
    assert!(check_host(&rules, &url::Host::Ipv4(Ipv4Addr::new(10, 0, 0, 1))).is_err());
    assert!(!HostRules::new(&[], &[]).outside_allowed_domains("anything.example"));
}

#[test]
fn cluster_and_machine_names_are_refused_unless_allow_listed() {
    let rules = HostRules::new(&["docs.quarry.svc".into()], &[]);
    for (host, reason) in [
        ("kubernetes.default.svc", "cluster-service name"),
        ("kubernetes.default.svc.", "cluster-service name"),
        ("api.ns.svc.cluster.local", "cluster-service name"),
        ("metadata.google.internal", "private-use name"),
        ("printer.local", "link-local (mDNS) name"),
        ("localhost", "loopback name"),
        ("app.localhost", "loopback name"),
        (
            "kubernetes",
            "single-label name (completed by the resolver's search domains)",
        ),
    ] {
        assert_eq!(
            check_host(&rules, &url::Host::Domain(host)),
            Err(format!("{host} is a {reason}")),
            "{host}"
        );
    }
    assert!(check_host(&rules, &url::Host::Domain("docs.quarry.svc")).is_ok());
    for public in [
        "example.com",
        "svc.example.com",
        "internal.example.org",
        "local.news",
    ] {
        assert!(
            check_host(&rules, &url::Host::Domain(public)).is_ok(),
            "{public}"
        );
    }
}

#[test]
fn resolver_filter_keeps_public_and_errors_when_none_is_left() {
    let rules = HostRules::new(&["localhost".into()], &[]);
    let public: SocketAddr = "8.8.8.8:0".parse().unwrap();
    let private: SocketAddr = "10.0.0.1:0".parse().unwrap();
    assert_eq!(
        filter_addrs(&rules, "mixed.example", vec![private, public]).unwrap(),
        vec![public]
    );
    let err = filter_addrs(&rules, "rebind.example", vec![private]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "rebind.example resolves only to refused addresses (10.0.0.1 is a private address)"
    );
    let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
    assert_eq!(
        filter_addrs(&rules, "localhost", vec![lo]).unwrap(),
        vec![lo]
    );
}
