//! Starts the local demo services (docs server, searx over the docs index, the real small model)
//! on 127.0.0.1, writes a ResearchProfile for them and keeps them up until interrupted.
//!
//! Usage: `demo-services PROFILE_OUT [--scripted-model]`. Used by `scripts/demo.sh`.

use std::process::ExitCode;

use quarry_e2e::profiles::demo_profile;
use quarry_e2e::real_model::{MODEL_NAME, RealModel};
use quarry_e2e::searx::SearchStack;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: demo-services PROFILE_OUT");
        return ExitCode::from(2);
    };
    let stack = match SearchStack::start().await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("demo-services: search stack: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "demo-services: docs at {}, searx at {}",
        stack.docs.base_url(),
        stack.searx.base_url()
    );
    eprintln!("demo-services: loading the model (this takes a little while on 2 cores)...");
    let model = match RealModel::start().await {
        Ok(m) => m,
        Err(e) => {
            eprintln!("demo-services: model server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let yaml = demo_profile(&model.base_url(), MODEL_NAME, stack.searx.base_url());
    if let Err(e) = std::fs::write(&out, yaml) {
        eprintln!("demo-services: writing {out}: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!("demo-services: ready; profile written to {out}");
    let _ = tokio::signal::ctrl_c().await;
    drop(model);
    drop(stack);
    ExitCode::SUCCESS
}
