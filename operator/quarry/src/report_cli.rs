//! `quarry report`: prints a run's stored report from wherever it lives: the run's
//! ConfigMap (gzip `binaryData` included), an object store (credentials from the profile's
//! Secret, or the environment for the operator-wide store), or a standalone run's state directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

use quarry_api::{ResearchProfile, ResearchRun};
use quarry_engine::research::shell::executor::load_checkpoint;
use quarry_engine::store::keys::REPORT_KEY;
use quarry_engine::store::local::LocalStore;
use quarry_engine::store::{ArtifactStore, StoreError};
use quarry_operator::research_run::artifacts::{SecretLookup, credentials, object_store_config};
use quarry_operator::store::configmap::configmap_value;
use quarry_operator::store::object::{Bucket, ObjectStoreConfig, parse_url};

/// Arguments of `quarry report`.
#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// The ResearchRun's name, or the path of a standalone run's state directory.
    pub name: Option<String>,
    /// Namespace of the run (default: the current kubeconfig context's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// A standalone run's state directory (`quarry run --state-dir DIR`).
    #[arg(long, conflicts_with_all = ["name", "namespace"])]
    pub state_dir: Option<PathBuf>,
}

/// Why a report could not be printed; each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Neither a run name nor a state directory was given.
    #[error(
        "name a run (quarry report NAME [-n NAMESPACE]) or a standalone state directory (quarry report --state-dir DIR)"
    )]
    Usage,
    /// No cluster could be reached.
    #[error(
        "cannot reach a Kubernetes cluster: {0}; set KUBECONFIG or its current context, or print a standalone run's report with --state-dir DIR"
    )]
    NoCluster(String),
    /// The run does not exist.
    #[error(
        "ResearchRun \"{name}\" not found in namespace \"{namespace}\"; list the runs with: kubectl get researchruns -n {namespace}"
    )]
    UnknownRun { namespace: String, name: String },
    /// The run has not stored its report yet.
    #[error(
        "ResearchRun {namespace}/{name} is still {phase}{progress}; its report is stored when it completes (watch it with: kubectl get researchrun {name} -n {namespace} -w)"
    )]
    NotFinished {
        namespace: String,
        name: String,
        phase: String,
        progress: String,
    },
    /// The run ended without a report.
    #[error("ResearchRun {namespace}/{name} ended {phase} without a report: {message}")]
    NoReport {
        namespace: String,
        name: String,
        phase: String,
        message: String,
    },
    /// The status names a report that is not where it says.
    #[error(
        "the report of ResearchRun {namespace}/{name} should be at {location}, but it is not there"
    )]
    Missing {
        namespace: String,
        name: String,
        location: String,
    },
    /// A Kubernetes call failed.
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The profile's object store cannot be used.
    #[error("{0}")]
    ObjectStore(String),
    /// Reading a store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The state directory holds no report.
    #[error("{0}")]
    StateDir(String),
}

/// `quarry report`: prints the report on stdout, or the reason on stderr.
pub fn main(args: &ReportArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("quarry: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(report(args)) {
        Ok(markdown) => {
            print!("{markdown}");
            if !markdown.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quarry: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The report `args` name, as text.
pub async fn report(args: &ReportArgs) -> Result<String, ReportError> {
    if let Some(dir) = &args.state_dir {
        return standalone_report(dir).await;
    }
    let Some(name) = &args.name else {
        return Err(ReportError::Usage);
    };
    // A path names a standalone state directory.
    if args.namespace.is_none() && (name.contains('/') || Path::new(name).is_dir()) {
        return standalone_report(Path::new(name)).await;
    }
    let client = Client::try_default()
        .await
        .map_err(|e| ReportError::NoCluster(e.to_string()))?;
    cluster_report(&client, args.namespace.as_deref(), name).await
}

/// The report of a standalone run from its state directory.
pub async fn standalone_report(dir: &Path) -> Result<String, ReportError> {
    let store = LocalStore::new(dir);
    if let Some(bytes) = store.get(REPORT_KEY).await? {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    let shown = dir.display();
    match load_checkpoint(&store).await? {
        Some(state) => Err(ReportError::StateDir(format!(
            "the run in {shown} ({:?}) is {} with no report yet; run the same `quarry run` with --state-dir {shown} to resume it",
            state.input.query, state.phase
        ))),
        None => Err(ReportError::StateDir(format!(
            "{shown} holds no Quarry run (no {REPORT_KEY}, no checkpoint); pass the --state-dir of a `quarry run`"
        ))),
    }
}

fn kube_error(action: String) -> impl FnOnce(kube::Error) -> ReportError {
    move |source| match source {
        kube::Error::Api(_) => ReportError::Kube { action, source },
        other => ReportError::NoCluster(other.to_string()),
    }
}

/// The report of cluster run `name` (namespace: `namespace`, else the client's default).
pub async fn cluster_report(
    client: &Client,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, ReportError> {
    let namespace = namespace.unwrap_or(client.default_namespace()).to_string();
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &namespace);
    let run = runs
        .get_opt(name)
        .await
        .map_err(kube_error(format!(
            "reading ResearchRun {namespace}/{name}"
        )))?
        .ok_or_else(|| ReportError::UnknownRun {
            namespace: namespace.clone(),
            name: name.to_string(),
        })?;
    let status = run.status.clone().unwrap_or_default();
    let phase = run.phase();
    let Some(report) = status.report else {
        return Err(if phase.is_terminal() {
            ReportError::NoReport {
                namespace,
                name: name.to_string(),
                phase: phase.to_string(),
                message: status.message.unwrap_or_default(),
            }
        } else {
            ReportError::NotFinished {
                namespace,
                name: name.to_string(),
                phase: phase.to_string(),
                progress: status
                    .progress
                    .map(|p| format!(" ({p})"))
                    .unwrap_or_default(),
            }
        });
    };
    let missing = |location: String| ReportError::Missing {
        namespace: namespace.clone(),
        name: name.to_string(),
        location,
    };
    if let Some(url) = &report.object_url {
        let config = object_store_for(client, &run, &namespace, url).await?;
        let bucket =
            Bucket::connect(&config).map_err(|e| ReportError::ObjectStore(e.to_string()))?;
        let bytes = bucket
            .read_url(url)
            .await?
            .ok_or_else(|| missing(url.clone()))?;
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    let cm_name = report
        .config_map
        .clone()
        .unwrap_or_else(|| quarry_operator::store::configmap::report_configmap_name(name));
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let cm = configmaps
        .get_opt(&cm_name)
        .await
        .map_err(kube_error(format!(
            "reading ConfigMap {namespace}/{cm_name}"
        )))?
        .ok_or_else(|| missing(format!("ConfigMap {cm_name}")))?;
    let bytes = configmap_value(&cm, REPORT_KEY, REPORT_KEY)?
        .ok_or_else(|| missing(format!("ConfigMap {cm_name} key {REPORT_KEY}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The object store holding `url`: the run's profile's (credentials from its Secret, read with
/// the caller's own permissions), else the operator-wide one (credentials from this process's
/// environment, like the operator's).
async fn object_store_for(
    client: &Client,
    run: &ResearchRun,
    namespace: &str,
    url: &str,
) -> Result<ObjectStoreConfig, ReportError> {
    let profiles: Api<ResearchProfile> = Api::namespaced(client.clone(), namespace);
    let profile_name = &run.spec.profile_ref;
    let profile = profiles
        .get_opt(profile_name)
        .await
        .map_err(kube_error(format!(
            "reading ResearchProfile {namespace}/{profile_name}"
        )))?;
    if let Some(profile) = profile
        && let Some(spec) = &profile.spec.object_store
    {
        let data = credentials(client, spec, namespace, profile_name)
            .await
            .map_err(|e| match e {
                SecretLookup::Kube(source) => ReportError::Kube {
                    action: format!(
                        "reading the objectStore credentials Secret of ResearchProfile {namespace}/{profile_name} (you need read access to it)"
                    ),
                    source,
                },
                SecretLookup::Missing(stall) => ReportError::ObjectStore(stall.message),
            })?;
        return object_store_config(spec, data.as_ref(), profile_name)
            .map_err(|stall| ReportError::ObjectStore(stall.message));
    }
    let (_, parsed, _) = parse_url(url).map_err(ReportError::ObjectStore)?;
    let bucket = format!(
        "{}://{}",
        parsed.scheme(),
        parsed.host_str().unwrap_or_default()
    );
    Ok(ObjectStoreConfig::from_env(
        &bucket,
        format!("the operator-wide object store {bucket} (credentials from this environment)"),
    ))
}

#[cfg(test)]
mod tests;
