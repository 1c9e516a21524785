//! The real `helm` and `kubectl` binaries for the chart and Kustomize tests, installed by
//! `scripts/install-kube-tools.sh` into `<work dir>/kube-tools/bin`, and their output as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// Where install-kube-tools.sh puts the binaries (`QUARRY_WORK_DIR` as the scripts read it).
fn install_dir() -> PathBuf {
    let work = std::env::var("QUARRY_WORK_DIR").unwrap_or_else(|_| ".work".into());
    let work = PathBuf::from(work);
    let work = if work.is_absolute() {
        work
    } else {
        repo_root().join(work)
    };
    work.join("kube-tools/bin")
}

/// The path of `name` (`helm` or `kubectl`): the project-local install first, then `PATH`; a
/// panic saying how to install it when absent (tests that need one are
/// `#[ignore = "needs helm ..."]` and run only when asked for).
pub fn tool(name: &str) -> PathBuf {
    let local = install_dir().join(name);
    if local.is_file() {
        return local;
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "{name} not found: run scripts/install-kube-tools.sh (it installs helm and kubectl into {})",
                install_dir().display()
            )
        })
}

/// Runs a tool and returns (success, stdout, stderr).
pub fn run(tool: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(tool)
        .args(args)
        .current_dir(repo_root())
        // helm keeps caches and config under HOME; keep the tests away from the user's.
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("quarry-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("quarry-helm-config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("quarry-helm-data"),
        )
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", tool.display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every non-empty document of a multi-document YAML stream, as JSON.
pub fn yaml_docs(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| {
            let value: Value = serde::Deserialize::deserialize(doc).expect("valid YAML document");
            value
        })
        .filter(|v| !v.is_null())
        .collect()
}
