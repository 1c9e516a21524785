//! The documentation a newcomer reads: README.md stays short and keeps the two commands first,
//! every relative link in README.md and docs/*.md reaches a file (and a heading, when it names
//! one), every docs page is reachable from the README, every `quarry` command and flag the docs
//! show exists in the binary, and `scripts/test.sh` refuses to run without cargo-nextest rather
//! than fall back to `cargo test`, which would skip ignored tests.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use quarry_e2e::kube_tools::repo_root;

/// The README is read in five minutes; the rest lives in docs/.
const README_MAX_LINES: usize = 250;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and every Markdown page of docs/.
fn doc_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// The targets of inline Markdown links and images (`[text](target)`), outside code.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        // Code spans may hold `[..](..)` that is no link.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].trim().to_string());
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut in_fence = false;
    let mut out = BTreeSet::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('#') {
            out.insert(anchor_of(line.trim_start_matches('#')));
        }
    }
    out
}

/// Broken relative links in `file`: each as `target: why`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = read(file);
    let dir = file.parent().expect("a file has a directory");
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            dir.join(path)
        };
        if !resolved.exists() {
            broken.push(format!("{target}: no such file"));
            continue;
        }
        if let Some(anchor) = anchor
            && resolved.extension().is_some_and(|e| e == "md")
            && !anchors(&read(&resolved)).contains(anchor)
        {
            broken.push(format!("{target}: no such heading"));
        }
    }
    broken
}

#[test]
fn readme_is_read_in_five_minutes() {
    let readme = read(&repo_root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move detail into docs/"
    );
}

#[test]
fn readme_starts_with_the_demo_then_the_test_command() {
    let readme = read(&repo_root().join("README.md"));
    let blocks: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap_or_default().trim())
        .collect();
    assert!(blocks.len() >= 2, "{blocks:?}");
    assert!(
        blocks[0].starts_with("scripts/demo.sh \"") && blocks[0].ends_with('"'),
        "the first command is the demo: {}",
        blocks[0]
    );
    assert_eq!(
        blocks[1], "scripts/test.sh",
        "the second command runs the tests"
    );
    let prerequisites = readme
        .split("## The two commands")
        .nth(1)
        .and_then(|s| s.split("```sh").next())
        .expect("README has the two commands with their prerequisites");
    for needed in [
        "Rust toolchain",
        "Node.js",
        "python3",
        "cargo-nextest",
        "apt-get",
    ] {
        assert!(
            prerequisites.contains(needed),
            "the prerequisites name {needed}"
        );
    }
    assert!(
        readme.contains("## Security"),
        "README keeps a Security section"
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let files = doc_files();
    assert!(files.len() > 10, "{files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        checked += link_targets(&read(file)).len();
        for b in broken_links(file) {
            broken.push(format!("{}: {b}", file.display()));
        }
    }
    assert!(
        checked > 30,
        "only {checked} links found: is the parser reading them?"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let readme = read(&repo_root().join("README.md"));
    let linked: BTreeSet<String> = link_targets(&readme).into_iter().collect();
    let orphans: Vec<String> = doc_files()
        .iter()
        .skip(1)
        .map(|p| {
            format!(
                "docs/{}",
                p.file_name().unwrap_or_default().to_string_lossy()
            )
        })
        .filter(|page| !linked.contains(page))
        .collect();
    assert!(
        orphans.is_empty(),
        "docs pages the README does not link: {orphans:?}"
    );
}

#[test]
fn the_link_checker_finds_a_broken_link_and_a_missing_heading() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("b.md"),
        "# Page\n\n## A heading, with `code`\n",
    )
    .unwrap();
    let a = dir.path().join("a.md");
    std::fs::write(
        &a,
        "[ok](b.md) [ok](b.md#a-heading-with-code) [gone](c.md) [bad](b.md#nope) \
         [web](https://example.org/x.md) `[code](d.md)`\n```\n[fenced](e.md)\n```\n",
    )
    .unwrap();
    assert_eq!(
        broken_links(&a),
        vec!["c.md: no such file", "b.md#nope: no such heading"]
    );
}

/// A directory holding a copy of scripts/test.sh and stand-ins for what it calls: `cargo`, which
/// logs its arguments and knows nextest only once `cargo install` succeeded (when `install_ok`),
/// and the two install scripts, which leave a mark when run.
fn test_script_sandbox(install_ok: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("scripts")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(
        repo_root().join("scripts/test.sh"),
        root.join("scripts/test.sh"),
    )
    .unwrap();
    std::fs::copy(
        repo_root().join("scripts/ignored-tests.py"),
        root.join("scripts/ignored-tests.py"),
    )
    .unwrap();
    let cargo = format!(
        r#"#!/bin/sh
echo "$*" >> "{log}"
case "$1" in
  nextest) [ -f "{installed}" ] || exit 101
    # The JUnit report of a run, when the test gave one.
    if [ "$2" = run ] && [ -f "{junit}" ]; then mkdir -p "{ci}" && cp "{junit}" "{ci}/"; fi
    exit 0 ;;
  install) {install} ;;
  *) exit 0 ;;
esac
"#,
        log = root.join("cargo.log").display(),
        installed = root.join("nextest-installed").display(),
        junit = root.join("junit.xml").display(),
        ci = root.join("target/nextest/ci").display(),
        install = if install_ok {
            format!(
                "touch \"{}\"; exit 0",
                root.join("nextest-installed").display()
            )
        } else {
            "echo 'error: could not reach crates.io' >&2; exit 101".to_string()
        },
    );
    let deps = format!("#!/bin/sh\ntouch \"{}\"\n", root.join("deps-ran").display());
    for (path, body) in [
        ("bin/cargo", cargo.as_str()),
        ("scripts/install-test-deps.sh", deps.as_str()),
        ("scripts/install-real-model.sh", deps.as_str()),
    ] {
        std::fs::write(root.join(path), body).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(root.join(path))
            .status()
            .expect("chmod");
    }
    dir
}

fn run_test_script(dir: &Path) -> std::process::Output {
    std::process::Command::new("bash")
        .arg(dir.join("scripts/test.sh"))
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", dir.join("bin").display()),
        )
        .env("QUARRY_REAL_MODEL", "0")
        .env_remove("KUBE_APISERVER_BIN")
        .env_remove("CI")
        .output()
        .expect("bash runs scripts/test.sh")
}

#[test]
fn test_script_stops_when_nextest_cannot_be_installed() {
    let sandbox = test_script_sandbox(false);
    let out = run_test_script(sandbox.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("needs cargo-nextest"), "{stderr}");
    let log = read(&sandbox.path().join("cargo.log"));
    assert!(log.contains("install --locked cargo-nextest"), "{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("test")),
        "never falls back to cargo test: {log}"
    );
    assert!(
        !sandbox.path().join("deps-ran").exists(),
        "stops before installing anything else"
    );
}

#[test]
fn test_script_installs_nextest_and_runs_the_ignored_tests_with_it() {
    let sandbox = test_script_sandbox(true);
    let out = run_test_script(sandbox.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let log = read(&sandbox.path().join("cargo.log"));
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.contains(&"install --locked cargo-nextest"), "{log}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("nextest run --workspace --profile ci --run-ignored all -E ")),
        "{log}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("test")), "{log}");
}

/// Under CI, on a machine whose node can start and with the real model installed, the test
/// command fails unless the node suite's real-model run ran (a JUnit report without it, then with it).
#[test]
fn under_ci_the_test_script_requires_the_real_model_run_on_the_node() {
    let sandbox = test_script_sandbox(true);
    let root = sandbox.path();
    // Root (the node's condition) and a node.sh, with stand-ins for the node's install and images.
    let stand_ins = [
        ("bin/id", "#!/bin/sh\necho 0\n"),
        ("node.sh", "#!/bin/sh\nexit 0\n"),
        ("scripts/install-node-deps.sh", "#!/bin/sh\nexit 0\n"),
        ("scripts/build-images.sh", "#!/bin/sh\nexit 0\n"),
    ];
    for (path, body) in stand_ins {
        std::fs::write(root.join(path), body).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(root.join(path))
            .status()
            .expect("chmod");
    }
    let junit = |cases: &[&str]| {
        let cases: String = cases
            .iter()
            .map(|c| format!("<testcase name=\"{c}\"/>"))
            .collect();
        std::fs::write(
            root.join("junit.xml"),
            format!("<testsuites><testsuite name=\"quarry-e2e::kube_node\">{cases}</testsuite></testsuites>"),
        )
        .unwrap();
    };
    let run = || {
        std::process::Command::new("bash")
            .arg(root.join("scripts/test.sh"))
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", root.join("bin").display()),
            )
            .env("QUARRY_NODE_SH", root.join("node.sh"))
            .env("CI", "true")
            .env_remove("QUARRY_REAL_MODEL")
            .env_remove("KUBE_APISERVER_BIN")
            .output()
            .expect("bash runs scripts/test.sh")
    };
    junit(&["helm_install_runs_a_ready_operator_that_leads_and_serves_metrics"]);
    let out = run();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the real-model run in a Pod did not run"),
        "{stderr}"
    );
    junit(&[
        "helm_install_runs_a_ready_operator_that_leads_and_serves_metrics",
        "a_quick_run_in_a_pod_with_the_real_model_completes_or_fails_honestly",
    ]);
    let out = run();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every `quarry SUBCOMMAND ... --flag` the docs show (in shell blocks and code spans), as the
/// subcommand and its long flags.
fn documented_invocations() -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let mut out: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    let mut add = |command: &str| {
        let words: Vec<&str> = command.split_whitespace().collect();
        if words.first() != Some(&"quarry") {
            return;
        }
        let Some(sub) = words
            .get(1)
            .filter(|w| w.chars().all(|c| c.is_ascii_lowercase()))
        else {
            return;
        };
        let flags = out.entry((*sub).to_string()).or_default();
        for word in &words[2..] {
            if let Some(flag) = word.strip_prefix("--") {
                let name: String = flag
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect();
                if !name.is_empty() {
                    flags.insert(format!("--{name}"));
                }
            }
        }
    };
    for file in doc_files() {
        let text = read(&file);
        let mut in_shell = false;
        let mut in_fence = false;
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("```") {
                in_shell = !in_fence && (trimmed == "```sh" || trimmed == "```bash");
                in_fence = !in_fence;
                continue;
            }
            if in_shell {
                add(line.split(" #").next().unwrap_or_default().trim());
            } else if !in_fence {
                for (i, span) in line.split('`').enumerate() {
                    if i % 2 == 1 {
                        add(span);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_documented_quarry_command_and_flag_exists() {
    let invocations = documented_invocations();
    assert!(
        invocations.len() >= 10,
        "only {} subcommands found in the docs: {invocations:?}",
        invocations.len()
    );
    let quarry = quarry_e2e::quarry_bin::quarry_bin().expect("quarry builds");
    let mut wrong = Vec::new();
    for (sub, flags) in &invocations {
        let out = std::process::Command::new(&quarry)
            .args([sub.as_str(), "--help"])
            .output()
            .expect("quarry runs");
        if !out.status.success() {
            wrong.push(format!("quarry {sub}: no such command"));
            continue;
        }
        let help = String::from_utf8_lossy(&out.stdout);
        for flag in flags {
            let known = help.match_indices(flag.as_str()).any(|(at, _)| {
                !help[at + flag.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            });
            if !known {
                wrong.push(format!("quarry {sub} {flag}: no such flag"));
            }
        }
    }
    assert!(wrong.is_empty(), "the docs show:\n{}", wrong.join("\n"));
}
