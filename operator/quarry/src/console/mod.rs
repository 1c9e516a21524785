//! `quarry console`: a web page for research runs. Locally it reads the cluster as the user's
//! kubeconfig identity (RBAC applies to every request) or a tree of standalone `quarry run`
//! state directories; in the cluster the operator serves it on its port, callers sign in with a
//! bearer token and each action is checked for them with a SubjectAccessReview.
//!
//! Server-rendered HTML (no Node build), one stylesheet and a small script embedded in the
//! binary; pages read with JavaScript off, and the script only adds live updates (SSE from a
//! Kubernetes watch, no polling).

pub mod auth;
pub mod local;
pub mod markdown;
pub mod model;
pub mod render;
pub mod server;
pub mod source;

use std::path::PathBuf;
use std::sync::Arc;

use crate::cli::CliError;
use crate::cli::cluster::{self, KubeArgs};

/// Flags of `quarry console`.
#[derive(clap::Args, Debug, Clone)]
pub struct ConsoleArgs {
    /// Show standalone runs: a `quarry run --state-dir` directory, or a directory of them.
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Address to listen on (keep it on loopback: the page acts with your identity).
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub listen: String,
    /// Another `host:port` the browser may use to reach this console (besides 127.0.0.1,
    /// localhost and [::1] on the listening port); requests naming any other Host are refused.
    #[arg(long, value_name = "HOST:PORT")]
    pub allow_host: Vec<String>,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// The console the operator serves in the cluster: its own client reads after the caller's
/// token and permissions were checked; writes go to the API server with the caller's own token.
pub fn in_cluster(
    client: kube::Client,
    events: Option<quarry_operator::server::run_events::EventsApi>,
) -> axum::Router {
    in_cluster_with(client, None, events)
}

/// [`in_cluster`], reaching the API server as a signed-in person the way `people` says
/// (`None`: as `kube::Config::infer` finds it, like the operator's own client).
pub fn in_cluster_with(
    client: kube::Client,
    people: Option<kube::Config>,
    events: Option<quarry_operator::server::run_events::EventsApi>,
) -> axum::Router {
    // The first watched namespace, else the operator's own (`*` in the filter shows all).
    let namespace = std::env::var("QUARRY_NAMESPACE")
        .ok()
        .and_then(|ns| {
            ns.split(',')
                .map(str::trim)
                .find(|n| !n.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| client.default_namespace().to_string());
    let source = source::KubeSource::new(client.clone(), "in-cluster console".into(), namespace)
        .for_people(people);
    let mut console = server::Console::new(
        Arc::new(source),
        Some(Arc::new(auth::Authorizer::new(client))),
    );
    if let Some(events) = events {
        console = console.with_events(events);
    }
    server::router(console)
}

/// The console's router for `quarry console` (no sign-in: the identity is the user's own).
pub async fn local_router(args: &ConsoleArgs) -> Result<axum::Router, CliError> {
    let source: Arc<dyn source::RunSource> = match &args.state_dir {
        Some(dir) => Arc::new(source::LocalSource::new(dir)),
        None => {
            let cluster = cluster::connect(&args.kube).await?;
            let label = format!("cluster {} · namespace {}", cluster.url, cluster.namespace);
            Arc::new(source::KubeSource::new(
                cluster.client.clone(),
                label,
                cluster.namespace.clone(),
            ))
        }
    };
    Ok(server::router(server::Console::new(source, None)))
}

/// `quarry console`: serves until Ctrl-C.
pub async fn serve(args: ConsoleArgs) -> Result<(), CliError> {
    let router = local_router(&args).await?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| CliError::Output(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::Output(e.to_string()))?;
    // Only this launch's browser tab gets in: the printed address carries a one-time key that
    // becomes a cookie, and requests naming another Host (DNS rebinding) are refused.
    let guard = local::LocalGuard::random(addr.port(), &args.allow_host);
    eprintln!(
        "Quarry console on {} (Ctrl-C stops it)",
        guard.launch_url(addr)
    );
    axum::serve(listener, guard.protect(router))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| CliError::Output(format!("the console stopped: {e}")))
}

#[cfg(test)]
mod tests;
