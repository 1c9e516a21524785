//! Runs the scripted OpenAI-compatible model server as a process, for `quarry run` subprocess tests.
//!
//! Usage: `scripted-model SCRIPT.json [--addr 127.0.0.1:0] [--log requests.jsonl]`
//! Prints the base URL (`http://127.0.0.1:<port>/v1`) as the first stdout line, then serves until
//! killed or interrupted. With `--log`, every request is appended as one JSON line.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use quarry_e2e::model_server::{Script, ScriptedModel};

const USAGE: &str = "usage: scripted-model SCRIPT.json [--addr 127.0.0.1:0] [--log requests.jsonl]";

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scripted-model: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut script_path: Option<PathBuf> = None;
    let mut addr: SocketAddr = "127.0.0.1:0".parse().map_err(|e| format!("{e}"))?;
    let mut log: Option<PathBuf> = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--addr" => {
                let v = args.next().ok_or(USAGE)?;
                addr = v.parse().map_err(|e| format!("--addr `{v}`: {e}"))?;
            }
            "--log" => log = Some(PathBuf::from(args.next().ok_or(USAGE)?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if script_path.is_none() => script_path = Some(PathBuf::from(arg)),
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}")),
        }
    }
    let script_path = script_path.ok_or(USAGE)?;
    let text = std::fs::read_to_string(&script_path)
        .map_err(|e| format!("cannot read {}: {e}", script_path.display()))?;
    let script: Script = serde_json::from_str(&text)
        .map_err(|e| format!("invalid script {}: {e}", script_path.display()))?;
    let handle = ScriptedModel::start_on(script, addr, log)
        .await
        .map_err(|e| format!("cannot start server: {e}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "{}", handle.base_url())
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())?;
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| format!("cannot wait for ctrl-c: {e}"))?;
    Ok(())
}
