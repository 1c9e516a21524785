//! Connecting to the cluster the way kubectl does (KUBECONFIG, `~/.kube/config`, in-cluster), and
//! turning Kubernetes client errors into [`CliError`]s that say what to do.

use std::path::PathBuf;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::CliError;

/// Field manager of the objects the CLI creates and edits.
pub const FIELD_MANAGER: &str = "quarry-cli";

/// Which cluster and namespace a command talks to.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// Namespace (default: the kubeconfig context's namespace, else `default`).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long = "kube-context", value_name = "CONTEXT")]
    pub kube_context: Option<String>,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then the in-cluster config).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// A connected client with the namespace commands default to.
#[derive(Clone)]
pub struct Cluster {
    /// The Kubernetes client.
    pub client: Client,
    /// `-n`, else the context's namespace, else `default`.
    pub namespace: String,
    /// The API server URL, for error messages.
    pub url: String,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .field("url", &self.url)
            .finish()
    }
}

/// Loads the client configuration without contacting the cluster.
pub async fn config(args: &KubeArgs) -> Result<Config, CliError> {
    let options = KubeConfigOptions {
        context: args.kube_context.clone(),
        ..KubeConfigOptions::default()
    };
    let loaded = match &args.kubeconfig {
        Some(path) => match Kubeconfig::read_from(path) {
            Ok(kc) => Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        },
        None if args.kube_context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| e.to_string()),
        None => Config::infer().await.map_err(|e| e.to_string()),
    };
    loaded.map_err(|e| CliError::NoCluster {
        detail: no_cluster_detail(args, &e),
    })
}

/// Says where the configuration was looked for.
fn no_cluster_detail(args: &KubeArgs, error: &str) -> String {
    if let Some(path) = &args.kubeconfig {
        return format!("--kubeconfig {}: {error}", path.display());
    }
    if let Some(value) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return format!("KUBECONFIG={}: {error}", value.to_string_lossy());
    }
    let home_config = std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".kube/config"))
        .filter(|p| p.exists());
    match home_config {
        None => "KUBECONFIG is not set, ~/.kube/config does not exist and this is not a pod".into(),
        Some(path) => format!("{}: {error}", path.display()),
    }
}

/// Connects: configuration, namespace and client (no request is made yet).
pub async fn connect(args: &KubeArgs) -> Result<Cluster, CliError> {
    let config = config(args).await?;
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let url = config.cluster_url.to_string();
    let client = Client::try_from(config).map_err(|e| CliError::NoCluster {
        detail: format!("the kubeconfig cannot be used: {e}"),
    })?;
    Ok(Cluster {
        client,
        namespace,
        url,
    })
}

/// What a request was about, to word its failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A ResearchRun by name.
    Run(&'a str),
    /// A ResearchProfile by name.
    Profile(&'a str),
    /// A ResearchSchedule by name.
    Schedule(&'a str),
    /// A list or a create: a 404 means the API itself is missing.
    Collection,
}

/// Pure: the [`CliError`] for a failed request `action` on `target` in `namespace`.
pub fn classify(
    error: kube::Error,
    action: &str,
    target: Target<'_>,
    namespace: &str,
    url: &str,
) -> CliError {
    match &error {
        kube::Error::Api(status) => {
            let named = status.details.as_ref().is_some_and(|d| !d.name.is_empty());
            match (status.code, target) {
                // A 404 without the object's name is the API server not knowing the resource.
                (404, Target::Run(name)) if named => CliError::UnknownRun {
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                },
                (404, Target::Schedule(name)) if named => CliError::UnknownSchedule {
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                },
                (404, Target::Profile(name)) if named => CliError::NoProfile {
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                    known: String::new(),
                },
                (404, _) => CliError::CrdMissing,
                (401 | 403, _) => CliError::Forbidden {
                    action: action.to_string(),
                    message: status.message.clone(),
                    namespace: namespace.to_string(),
                },
                (409, Target::Run(name)) => CliError::AlreadyExists {
                    name: name.to_string(),
                    namespace: namespace.to_string(),
                },
                (400 | 422, _) => CliError::Invalid {
                    message: status.message.clone(),
                },
                _ => CliError::Kube {
                    action: action.to_string(),
                    source: error,
                },
            }
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => CliError::Unreachable {
            url: url.to_string(),
            detail: error_chain(&error),
        },
        _ => CliError::Kube {
            action: action.to_string(),
            source: error,
        },
    }
}

/// An error with its sources, joined (connection errors hide the useful part in a source).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests;
