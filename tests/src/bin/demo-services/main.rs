//! Starts the local demo services (docs server, searx over the docs index, the real small model)
//! on 127.0.0.1, writes a ResearchProfile for them and keeps them up until interrupted.
//!
//! Usage: `demo-services PROFILE_OUT [--doc-tree TREE]...`. Used by `scripts/demo.sh`.
//! `--doc-tree` (repeatable) names the documentation trees to serve and search, relative to
//! `/usr/share/doc` or absolute; without it `$QUARRY_DOC_TREES` (`:`-separated), else Debian's
//! Python 3.11 and PostgreSQL 15 docs. Their index must have been built
//! (`QUARRY_DOC_TREES=... scripts/install-test-deps.sh --demo`).

use std::process::ExitCode;

use quarry_e2e::doc_trees::DocTrees;
use quarry_e2e::profiles::demo_profile;
use quarry_e2e::real_model::{MODEL_NAME, RealModel};
use quarry_e2e::searx::SearchStack;

const USAGE: &str = "usage: demo-services PROFILE_OUT [--doc-tree TREE]...";

/// The profile path and the `--doc-tree` values, or what is wrong with the arguments.
fn parse_args(args: &[String]) -> Result<(String, Vec<String>), String> {
    let mut out = None;
    let mut trees = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--doc-tree" {
            let tree = rest.next().ok_or("--doc-tree needs a value")?;
            trees.push(tree.clone());
        } else if let Some(tree) = arg.strip_prefix("--doc-tree=") {
            trees.push(tree.to_string());
        } else if arg.starts_with('-') {
            return Err(format!("unknown option {arg}"));
        } else if out.replace(arg.clone()).is_some() {
            return Err(format!("unexpected argument {arg}"));
        }
    }
    let out = out.ok_or("PROFILE_OUT is missing")?;
    Ok((out, trees))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (out, tree_flags) = match parse_args(&args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("demo-services: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let trees = match DocTrees::from_flags_or_env(&tree_flags) {
        Ok(trees) => trees,
        Err(e) => {
            eprintln!("demo-services: {e}");
            return ExitCode::from(2);
        }
    };
    let stack = match SearchStack::start_with_trees(&trees, Vec::new()).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("demo-services: search stack: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "demo-services: docs at {} (trees {}), searx at {}",
        stack.docs.base_url(),
        trees.url_paths().join(", "),
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

#[cfg(test)]
mod tests;
