//! The workspace's layering, checked: the engine crate reaches no Kubernetes, axum or Redis crate,
//! the crates depend on each other only downwards, no crate has an import circle between its
//! modules, and no source file grows past ~800 lines.
//!
//! The crate graph comes from `cargo metadata` (normal dependencies only: a test's local HTTP
//! server is not the engine's dependency). Module imports are read from the sources: every
//! `crate::`, `super::` and `self::` path outside comments, resolved to the longest module path
//! it names; a circle is a strongly connected component of more than one module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Package name → names of its normal (non-dev, non-build) dependencies, for the whole lock.
fn normal_dependency_graph() -> BTreeMap<String, BTreeSet<String>> {
    let rustc = std::process::Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc names its host");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // This platform's graph only: the crates of others are not downloaded (and not built here).
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve") {
        let from = names[node["id"].as_str().unwrap()].to_string();
        let entry = graph.entry(from).or_default();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                entry.insert(names[dep["pkg"].as_str().unwrap()].to_string());
            }
        }
    }
    graph
}

/// Every package `root` reaches through normal dependencies, itself excluded.
fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, root: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(p) = todo.pop() {
        for d in graph.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn crates_depend_only_downwards_and_the_engine_knows_no_kubernetes() {
    let graph = normal_dependency_graph();
    let forbidden_in_engine = [
        "kube",
        "kube-client",
        "kube-core",
        "kube-runtime",
        "k8s-openapi",
        "axum",
        "redis",
        "quarry-api",
        "quarry-operator",
        "quarry",
    ];
    let engine = reachable(&graph, "quarry-engine");
    assert!(engine.contains("reqwest"), "the graph was read: {engine:?}");
    let found: Vec<_> = forbidden_in_engine
        .iter()
        .filter(|f| engine.contains(**f))
        .collect();
    assert!(found.is_empty(), "quarry-engine depends on {found:?}");

    let vocab = reachable(&graph, "quarry-vocab");
    assert!(vocab.is_empty(), "quarry-vocab depends on {vocab:?}");

    let api = reachable(&graph, "quarry-api");
    for f in [
        "quarry-engine",
        "quarry-operator",
        "quarry",
        "axum",
        "redis",
    ] {
        assert!(!api.contains(f), "quarry-api depends on {f}");
    }
    assert!(api.contains("quarry-vocab") && api.contains("k8s-openapi"));

    let operator = reachable(&graph, "quarry-operator");
    assert!(
        !operator.contains("quarry"),
        "quarry-operator depends on the CLI"
    );
    for needed in ["quarry-engine", "quarry-api", "kube", "axum", "redis"] {
        assert!(operator.contains(needed), "quarry-operator lacks {needed}");
    }
    let cli = reachable(&graph, "quarry");
    assert!(cli.contains("quarry-operator"));
}

/// A crate's modules, by path (`research::machine::reducer`; the root is ""), each with its source file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                // src/bin holds separate crates.
                if path.file_name().is_some_and(|n| n != "bin") {
                    walk(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.last().is_some_and(|p| p == "mod") {
            parts.pop();
        }
        if parts == ["main"] {
            continue; // the binary's own crate root
        }
        if parts == ["lib"] {
            parts.clear();
        }
        out.insert(parts.join("::"), file);
    }
    out
}

/// Import edges between the modules of one crate (a module's use of its own ancestors excluded:
/// that is the module tree, not an import).
fn import_edges(mods: &BTreeMap<String, PathBuf>) -> BTreeMap<String, BTreeSet<String>> {
    let path_re = Regex::new(
        r"\b(crate|super|self)((?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))*)(?:::\{([^;{}]*)\})?",
    )
    .unwrap();
    let resolve = |segs: &[String]| -> Option<String> {
        (0..=segs.len())
            .rev()
            .map(|i| segs[..i].join("::"))
            .find(|c| mods.contains_key(c))
    };
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in mods {
        let text = std::fs::read_to_string(file).unwrap();
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let here: Vec<String> = if module.is_empty() {
            Vec::new()
        } else {
            module.split("::").map(String::from).collect()
        };
        for cap in path_re.captures_iter(&code) {
            let mut base: Vec<String> = match &cap[1] {
                "crate" => Vec::new(),
                "self" => here.clone(),
                _ => here[..here.len().saturating_sub(1)].to_vec(),
            };
            let mut rest: Vec<&str> = cap[2].split("::").filter(|s| !s.is_empty()).collect();
            while rest.first() == Some(&"super") {
                base.pop();
                rest.remove(0);
            }
            let mut targets = vec![
                base.iter()
                    .cloned()
                    .chain(rest.iter().map(|s| s.to_string()))
                    .collect::<Vec<_>>(),
            ];
            if let Some(group) = cap.get(3) {
                for item in group.as_str().split(',') {
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    if item.is_empty() || item == "self" || item == "*" {
                        continue;
                    }
                    let mut t = targets[0].clone();
                    t.extend(item.split("::").map(String::from));
                    targets.push(t);
                }
            }
            for t in targets {
                if let Some(target) = resolve(&t) {
                    let ancestor = target.is_empty()
                        || *module == target
                        || module.starts_with(&format!("{target}::"));
                    if !ancestor {
                        edges.entry(module.clone()).or_default().insert(target);
                    }
                }
            }
        }
    }
    edges
}

/// Strongly connected components with more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<String, usize>,
        low: BTreeMap<String, usize>,
        stack: Vec<String>,
        on_stack: BTreeSet<String>,
        out: Vec<Vec<String>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: &str) {
            let i = self.index.len();
            self.index.insert(v.to_string(), i);
            self.low.insert(v.to_string(), i);
            self.stack.push(v.to_string());
            self.on_stack.insert(v.to_string());
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(&w);
                    let done = w == v;
                    component.push(w);
                    if done {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    let nodes: Vec<&String> = edges.keys().collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// The source roots checked: every crate of the workspace.
fn source_roots() -> Vec<PathBuf> {
    let root = repo_root();
    let mut roots: Vec<PathBuf> = std::fs::read_dir(root.join("operator"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    roots.push(root.join("tests/src"));
    roots.sort();
    assert!(roots.len() >= 6, "{roots:?}");
    roots
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    for src in source_roots() {
        let mods = modules(&src);
        let edges = import_edges(&mods);
        assert!(
            !edges.is_empty() || mods.len() < 3,
            "no imports read in {src:?}"
        );
        for circle in circles(&edges) {
            found.push(format!("{}: {}", src.display(), circle.join(" <-> ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_controllers_stores_know_none_of_its_controllers() {
    let mods = modules(&repo_root().join("operator/controller/src"));
    let edges = import_edges(&mods);
    assert!(edges.keys().any(|m| m.starts_with("store::")), "{edges:?}");
    let up: Vec<String> = edges
        .iter()
        .filter(|(module, _)| module.starts_with("store"))
        .flat_map(|(module, targets)| {
            targets
                .iter()
                .filter(|t| {
                    ["research_run", "search_engine", "schedule"]
                        .contains(&t.split("::").next().unwrap_or_default())
                })
                .map(move |t| format!("{module} -> {t}"))
        })
        .collect();
    assert!(up.is_empty(), "a store imports a controller: {up:?}");
}

#[test]
fn the_checker_finds_a_circle() {
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&edges), vec![vec!["a", "b", "c"]]);
}

/// Lines a source file may have; test files (one concern: the cases) are exempt.
const MAX_LINES: usize = 820;

#[test]
fn no_source_file_grows_past_about_800_lines() {
    let mut long = Vec::new();
    for src in source_roots() {
        for file in modules(&src).values() {
            let name = file.file_name().unwrap().to_string_lossy();
            if name == "tests.rs" || name.ends_with("_tests.rs") {
                continue;
            }
            let lines = std::fs::read_to_string(file).unwrap().lines().count();
            if lines > MAX_LINES {
                long.push(format!("{} ({lines} lines)", file.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "split these by concern:\n{}",
        long.join("\n")
    );
}

/// Test sources of the workspace: integration tests and the harness.
fn test_sources() -> Vec<PathBuf> {
    let root = repo_root();
    let mut files = Vec::new();
    let mut dirs = vec![root.join("tests/tests"), root.join("tests/src")];
    for krate in std::fs::read_dir(root.join("operator")).unwrap().flatten() {
        dirs.push(krate.path().join("tests"));
        dirs.push(krate.path().join("src"));
    }
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

#[test]
fn a_test_without_its_component_is_skipped_never_passed() {
    // A test that needs something optional says so in #[ignore = "needs ..."], which
    // scripts/ignored-tests.py reads to leave it out where the component is missing; it never
    // prints "skipped" and returns, which nextest would count as a pass that checked nothing.
    let early_return = Regex::new(r#"eprintln!\(\s*"SKIP"#).unwrap();
    let mut found = Vec::new();
    let mut ignored = 0;
    for file in test_sources() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            if trimmed.starts_with("#[ignore") {
                ignored += 1;
                if !trimmed.starts_with("#[ignore = \"needs ") {
                    found.push(format!(
                        "{}:{}: #[ignore] without \"needs ...\"",
                        file.display(),
                        i + 1
                    ));
                }
            }
        }
        if early_return.is_match(&text) {
            found.push(format!("{}: prints SKIP and returns", file.display()));
        }
    }
    assert!(ignored >= 60, "the ignored tests were read: {ignored}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn tests_follow_one_convention() {
    // Unit tests sit in a `tests.rs` beside their module (`#[cfg(test)] mod tests;`), helpers
    // shared by test binaries in the e2e crate's library: no inline test modules, and no test
    // reaching into another crate's files through `#[path]`.
    let mut found = Vec::new();
    let mut files = 0;
    for file in test_sources() {
        files += 1;
        let text = std::fs::read_to_string(&file).unwrap();
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            let inline_tests =
                trimmed.starts_with("mod tests {") || trimmed.starts_with("mod tests{");
            if trimmed.starts_with("#[path") || inline_tests {
                found.push(format!("{}:{}: {}", file.display(), i + 1, trimmed));
            }
        }
    }
    assert!(files >= 200, "the sources were read: {files}");
    assert!(found.is_empty(), "{}", found.join("\n"));
}
