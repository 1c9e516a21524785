//! The official MCP Inspector's CLI mode (npm `@modelcontextprotocol/inspector`, installed by
//! `scripts/install-test-deps.sh`) as a real MCP client: it starts the server command over stdio,
//! initialises, sends one request and prints the result as JSON.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The launcher script inside the installed package.
const LAUNCHER: &str =
    "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js";

/// Where `scripts/install-test-deps.sh` installs the Inspector (`$QUARRY_WORK_DIR/mcp-inspector`,
/// default `<repo>/.work/mcp-inspector`).
pub fn inspector_dir() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let work = std::env::var_os("QUARRY_WORK_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".work"));
    let work = if work.is_absolute() {
        work
    } else {
        repo.join(work)
    };
    work.join("mcp-inspector")
}

/// The Inspector's launcher, or a panic saying how to install it (tests that need it are
/// `#[ignore = "needs the MCP Inspector ..."]` and run only when asked).
pub fn inspector_for(test: &str) -> PathBuf {
    let launcher = inspector_dir().join(LAUNCHER);
    assert!(
        launcher.is_file(),
        "{test}: the MCP Inspector is not installed at {}; run scripts/install-test-deps.sh",
        launcher.display()
    );
    launcher
}

/// What one Inspector invocation printed.
#[derive(Debug)]
pub struct InspectorOutput {
    /// Exit status code.
    pub code: Option<i32>,
    /// stdout parsed as JSON (`Null` when it is not JSON).
    pub json: Value,
    /// stdout as text.
    pub stdout: String,
    /// stderr as text.
    pub stderr: String,
}

/// One Inspector CLI call: `server` is the stdio server command, `env` the variables the server
/// gets (the Inspector passes only these and a few defaults such as PATH and HOME), `args` the
/// method and its options. `home` isolates the Inspector's catalog file.
pub fn inspect(
    launcher: &Path,
    home: &Path,
    server: &[String],
    env: &[(&str, String)],
    args: &[&str],
) -> std::io::Result<InspectorOutput> {
    let mut command = Command::new("node");
    command.arg(launcher).arg("--cli");
    for (k, v) in env {
        command.arg("-e").arg(format!("{k}={v}"));
    }
    command
        .args(args)
        .arg("--")
        .args(server)
        .env("HOME", home)
        .env("MCP_CATALOG_PATH", home.join("mcp-catalog.json"))
        .env_remove("KUBECONFIG");
    let out = command.output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Ok(InspectorOutput {
        code: out.status.code(),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}
