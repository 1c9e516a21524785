//! `kubectl quarry ...`: kubectl runs any `kubectl-NAME` program on PATH as `kubectl NAME`. This
//! one runs the `quarry` binary installed beside it (else the one on PATH) with the same
//! arguments, so `cargo install --path operator/quarry` provides both and they never drift apart.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

/// The `quarry` binary next to this program, else `quarry` from PATH.
fn quarry_program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("quarry")))
        .filter(|path| path.is_file())
        .unwrap_or_else(|| PathBuf::from("quarry"))
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let program = quarry_program();
    let mut command = Command::new(&program);
    command.args(&args);
    // Help and usage then read `kubectl quarry ...`.
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let error = command.arg0("kubectl quarry").exec();
        eprintln!(
            "kubectl-quarry: cannot run {}: {error}; install both binaries with: cargo install --path operator/quarry",
            program.display()
        );
        ExitCode::from(127)
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(error) => {
            eprintln!(
                "kubectl-quarry: cannot run {}: {error}; install both binaries with: cargo install --path operator/quarry",
                program.display()
            );
            ExitCode::from(127)
        }
    }
}
