//! Locates (building if needed) the `quarry` and `kubectl-quarry` binaries for subprocess tests.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Path of the `quarry` binary of this workspace, built once per test process with cargo.
///
/// Integration tests of another package cannot use `CARGO_BIN_EXE_quarry`, so this asks cargo
/// to build it (a no-op when fresh) and finds it next to the test executable's `deps/` directory.
pub fn quarry_bin() -> Result<PathBuf, String> {
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let profile_dir = exe
            .parent()
            .and_then(|deps| deps.parent())
            .ok_or_else(|| format!("unexpected test executable location {}", exe.display()))?
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
        let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
        let status = Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "quarry",
                "--bin",
                "quarry",
                "--bin",
                "kubectl-quarry",
                "--manifest-path",
                manifest,
            ])
            .status()
            .map_err(|e| format!("cannot run cargo to build quarry: {e}"))?;
        if !status.success() {
            return Err(format!("cargo build -p quarry failed with {status}"));
        }
        let bin = profile_dir.join("quarry");
        if bin.exists() {
            Ok(bin)
        } else {
            Err(format!("quarry binary not found at {}", bin.display()))
        }
    })
    .clone()
}

/// The arguments of a standalone run writing `<dir>/report.md` and keeping its state in
/// `<dir>/state`: `run QUERY --mode MODE --profile PROFILE --out ... --state-dir ...`.
pub fn run_args(
    query: &str,
    mode: &str,
    profile: &std::path::Path,
    dir: &std::path::Path,
) -> Vec<String> {
    vec![
        "run".into(),
        query.into(),
        "--mode".into(),
        mode.into(),
        "--profile".into(),
        profile.display().to_string(),
        "--out".into(),
        dir.join("report.md").display().to_string(),
        "--state-dir".into(),
        dir.join("state").display().to_string(),
    ]
}

/// Runs `quarry ARGS` with `env` on a blocking thread (the test servers' loopback address
/// exempt from the egress guard unless `env` says otherwise); resolves to its output.
pub fn spawn_quarry(
    args: Vec<String>,
    env: Vec<(String, String)>,
) -> tokio::task::JoinHandle<std::process::Output> {
    tokio::task::spawn_blocking(move || {
        let bin = quarry_bin().unwrap_or_else(|e| panic!("{e}"));
        Command::new(bin)
            .args(&args)
            .env(EGRESS_EXEMPT_ENV.0, EGRESS_EXEMPT_ENV.1)
            .envs(env)
            .output()
            .unwrap_or_else(|e| panic!("cannot run quarry: {e}"))
    })
}

/// Path of the `kubectl-quarry` plugin binary, built with `quarry` by [`quarry_bin`].
pub fn kubectl_quarry_bin() -> Result<PathBuf, String> {
    let quarry = quarry_bin()?;
    let plugin = quarry.with_file_name("kubectl-quarry");
    if plugin.exists() {
        Ok(plugin)
    } else {
        Err(format!("kubectl-quarry not found at {}", plugin.display()))
    }
}

/// The operator-level egress exemption of every test run of the binary: the stand-in model,
/// search and page servers listen on 127.0.0.1, which the egress guard refuses otherwise.
pub const EGRESS_EXEMPT_ENV: (&str, &str) = ("QUARRY_EGRESS_EXEMPT_HOSTS", "127.0.0.1");

/// `command` (a `quarry` process) with the test servers' loopback address exempt from the
/// egress guard at operator level.
pub fn exempt_loopback(mut command: std::process::Command) -> std::process::Command {
    command.env(EGRESS_EXEMPT_ENV.0, EGRESS_EXEMPT_ENV.1);
    command
}

/// [`exempt_loopback`] for a tokio command.
pub fn exempt_loopback_async(mut command: tokio::process::Command) -> tokio::process::Command {
    command.env(EGRESS_EXEMPT_ENV.0, EGRESS_EXEMPT_ENV.1);
    command
}
