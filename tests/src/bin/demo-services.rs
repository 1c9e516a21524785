//! Starts the local demo services (docs server, searx over the docs index, the real small model)
//! on 127.0.0.1, writes a ResearchProfile for them and keeps them up until interrupted.
//!
//! Usage: `demo-services PROFILE_OUT [--scripted-model]`. Used by `scripts/demo.sh`.

use std::process::ExitCode;

use quarry_e2e::real_model::{MODEL_NAME, RealModel};
use quarry_e2e::searx::SearchStack;

fn profile_yaml(model_url: &str, model: &str, searx_url: &str) -> String {
    format!(
        r#"# Written by demo-services: the local demo stack. Everything runs on 127.0.0.1.
apiVersion: quarry.dev/v1alpha1
kind: ResearchProfile
metadata:
  name: local-demo
spec:
  models:
    primary:
      baseURL: "{model_url}"
      model: {model}
      # The 0.5B model has no native tool calling: use the JSON action protocol.
      toolMode: jsonAction
      jsonMode: true
      temperature: 0
      # A 2-core machine needs minutes to read a long prompt.
      timeoutSeconds: 900
      contextWindow: 8192
      maxOutputTokens: 400
  search:
    url: "{searx_url}"
  fetch:
    allowedHosts: ["127.0.0.1"]
    # Small models read slowly: cap each page.
    pageCharsForModel: 1500
"#
    )
}

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
    eprintln!("demo-services: docs at {}, searx at {}", stack.docs.base_url(), stack.searx.base_url());
    eprintln!("demo-services: loading the model (this takes a little while on 2 cores)...");
    let model = match RealModel::start().await {
        Ok(m) => m,
        Err(e) => {
            eprintln!("demo-services: model server: {e}");
            return ExitCode::FAILURE;
        }
    };
    let yaml = profile_yaml(&model.base_url(), MODEL_NAME, stack.searx.base_url());
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
