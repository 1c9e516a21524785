//! The repository stands alone: no tracked file cites a document a person who clones it does not
//! have. Comments and docs say the reason itself instead of pointing at design notes, numbered
//! seeds, issue numbers or work stops kept elsewhere, or at files beside the repository.
//!
//! Every tracked text file is scanned (`git ls-files`, or a walk of the tree without `target/`,
//! `.work/` and `.git/` when git is not there). The few places that name a location outside the
//! repository as a *file to use*, not as a citation, are allowed below, each with its reason.
//! This file itself is exempt: it has to spell out what it forbids.

use std::path::{Path, PathBuf};

use quarry_e2e::kube_tools::repo_root;
use regex::Regex;

/// What counts as a reference to a document outside the repository.
fn patterns() -> Vec<(&'static str, Regex)> {
    let re = |p: &str| Regex::new(p).expect("pattern compiles");
    vec![
        ("a numbered seed", re(r"(?i)\bseeds?\s+\d")),
        ("an issue number", re(r"(?i)\bissues?\s+#?\d+")),
        ("a work stop", re(r"(?i)\bstops?\s+\d+\b")),
        ("the design notes", re(r"\bDESIGN\b")),
        // A numbered section sign cites a section of some document; the RFCs are public.
        ("a numbered section", re(r"\x{A7}\s*\d")),
        (
            "a path beside the repository",
            re(r"\.\./shared\b|/work/shared\b"),
        ),
        ("the shared folder", re(r"\bshared/(bench|k8s|design)\b")),
    ]
}

/// Text that names an outside location on purpose, by file, with the reason.
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "scripts/test.sh",
        "../shared/k8s/kube-apiserver.xz",
        "where the test command looks for a kube-apiserver when KUBE_APISERVER_BIN is unset \
         (the CI machine keeps one there); a file to use, not a document to read",
    ),
    (
        "tests/src/control_plane.rs",
        "../shared/k8s/kube-apiserver.xz",
        "the control plane harness looks in the same place as scripts/test.sh",
    ),
    (
        "scripts/bench-extraction.sh",
        "shared/bench/article-extraction",
        "where the extraction benchmark looks for its labelled pages when \
         QUARRY_EXTRACTION_BENCH is unset; the data set is not redistributed here",
    ),
    (
        "operator/engine/benches/extraction.rs",
        "shared/bench/article-extraction",
        "the benchmark looks in the same place as scripts/bench-extraction.sh",
    ),
    (
        "operator/engine/benches/README.md",
        "shared/bench/article-extraction",
        "documents where the benchmark looks for its data",
    ),
    (
        "scripts/test.sh",
        "../shared/k8s/node/node.sh",
        "where the test command looks for the one-node cluster's script when QUARRY_NODE_SH is unset",
    ),
    (
        "tests/src/node.rs",
        "../shared/k8s/node/node.sh",
        "the node harness looks in the same place as scripts/test.sh",
    ),
    (
        "docs/real-node.md",
        "../shared/k8s/node/node.sh",
        "documents where the node tests look for the node script",
    ),
    (
        "operator/engine/src/research/writing/evidence/tests.rs",
        "\u{a7} 20.5. Write Ahead Log",
        "test data: the breadcrumb of a PostgreSQL documentation passage, as the engine labels it",
    ),
    (
        "operator/engine/src/research/writing/evidence/tests.rs",
        "\u{a7} 27.2. Log-Shipping Standby Servers",
        "test data: the breadcrumb of a PostgreSQL documentation passage, as the engine labels it",
    ),
    (
        "operator/engine/src/research/agents/researcher/guided/tests.rs",
        "\u{a7} 8.5. Date/Time Types",
        "test data: the breadcrumb of a PostgreSQL documentation passage, as the engine labels it",
    ),
    (
        "operator/engine/src/scrape/robots.rs",
        "RFC 9309 \u{a7}",
        "a section of a public RFC",
    ),
];

/// Relative paths of the tracked files.
fn tracked_files(root: &Path) -> Vec<String> {
    let git = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output();
    if let Ok(out) = git
        && out.status.success()
    {
        return String::from_utf8_lossy(&out.stdout)
            .split('\0')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
    }
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if rel.as_os_str().is_empty() && ["target", ".work", ".git"].contains(&name.as_str()) {
                continue;
            }
            let path = rel.join(&name);
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            } else {
                out.push(path.to_string_lossy().to_string());
            }
        }
    }
    out
}

/// The lines of `text` (the file at `rel`) that cite something outside the repository, each as
/// `rel:line: what: the line`.
fn outside_references(rel: &str, text: &str) -> Vec<String> {
    let patterns = patterns();
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut line = line.to_string();
        for (file, needle, _) in ALLOWED {
            if *file == rel {
                line = line.replace(needle, "");
            }
        }
        // One finding per line, of the first kind that matches.
        if let Some((what, _)) = patterns.iter().find(|(_, p)| p.is_match(&line)) {
            let shown: String = line.trim().chars().take(140).collect();
            found.push(format!("{rel}:{}: {what}: {shown}", i + 1));
        }
    }
    found
}

#[test]
fn no_tracked_file_cites_a_document_outside_the_repository() {
    let root = repo_root();
    let this_file = "tests/tests/standalone.rs";
    let files = tracked_files(&root);
    assert!(files.len() > 100, "only {} files found", files.len());
    let mut found = Vec::new();
    let mut scanned = 0;
    for rel in files.iter().filter(|f| f.as_str() != this_file) {
        let Ok(bytes) = std::fs::read(root.join(rel)) else {
            continue; // tracked but deleted in the working tree
        };
        if bytes.contains(&0) {
            continue; // binary
        }
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        scanned += 1;
        found.extend(outside_references(rel, &text));
    }
    assert!(scanned > 100, "only {scanned} text files scanned");
    assert!(
        found.is_empty(),
        "{} references to documents outside the repository; say the reason itself instead:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn every_allowed_outside_reference_is_still_there() {
    // An allowance whose text is gone would silently allow a new reference in that file.
    let root = repo_root();
    for (file, needle, why) in ALLOWED {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(
            text.contains(needle),
            "{file} no longer holds {needle:?} ({why})"
        );
    }
}

#[test]
fn the_scanner_finds_each_kind_of_outside_reference() {
    let section = '\u{a7}';
    let samples = [
        "// Seed 000's budgets".to_string(),
        "/// (issue 14: the 0.5B model)".to_string(),
        "# on a full disk (stop 22)".to_string(),
        format!("//! CRD types (DESI{}N {section}2)", 'G'),
        format!("see BENCHMARKS.md {section}5"),
        "KUBE_APISERVER_BIN or ../shared/k8s".to_string(),
        "Data: `shared/bench/article-extraction/`".to_string(),
    ];
    for sample in &samples {
        assert_eq!(
            outside_references("x.rs", sample).len(),
            1,
            "not found in {sample:?}"
        );
    }
    // Words that only look alike, and the breadcrumb the passage ranker writes.
    for fine in [
        "a random seed for the test",
        "the run stops when the budget is spent",
        "the design of the reducer",
        "\u{a7} typing \u{203a} Special types",
        "issues the request",
    ] {
        assert!(outside_references("x.rs", fine).is_empty(), "{fine:?}");
    }
    // An allowance applies to its own file only.
    let line = "elif [ -f \"$repo/../shared/k8s/kube-apiserver.xz\" ]; then";
    assert!(outside_references("scripts/test.sh", line).is_empty());
    assert_eq!(outside_references("scripts/demo.sh", line).len(), 1);
}
