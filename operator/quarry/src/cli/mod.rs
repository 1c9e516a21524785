//! The `quarry` command line for people and agents: `apply`, `get`, `list`, `cancel` against a
//! cluster, the JSON event stream of `quarry run --output json`, and `quarry mcp`.
//!
//! Pure parts (building a ResearchRun from flags, tables, progress lines, JSON events, report
//! truncation) are separate from the thin Kubernetes and terminal glue so they are unit-tested.

pub mod approval;
pub mod cluster;
pub mod events;
pub mod mcp;
pub mod runs;
pub mod schedules;
pub mod table;

use std::io::IsTerminal;
use std::process::ExitCode;

/// Errors of the cluster commands, each saying what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No kubeconfig and not in a pod.
    #[error(
        "no Kubernetes cluster is configured ({detail}).\n  To use a cluster: point KUBECONFIG (or --kubeconfig) at its kubeconfig and check it with `kubectl cluster-info`.\n  To research without a cluster: quarry run \"QUESTION\" --profile PROFILE.yaml"
    )]
    NoCluster {
        /// Why no configuration was found.
        detail: String,
    },
    /// The API server did not answer.
    #[error(
        "cannot reach the Kubernetes API server at {url}: {detail}\n  Check that the cluster is running and that `kubectl cluster-info` works with the same kubeconfig."
    )]
    Unreachable {
        /// The cluster URL from the kubeconfig.
        url: String,
        /// The connection error.
        detail: String,
    },
    /// The run does not exist.
    #[error(
        "ResearchRun \"{name}\" not found in namespace \"{namespace}\".\n  List the runs with: quarry list -n {namespace}   (or quarry list -A for every namespace)"
    )]
    UnknownRun {
        /// Run name asked for.
        name: String,
        /// Namespace looked in.
        namespace: String,
    },
    /// The schedule does not exist.
    #[error(
        "ResearchSchedule \"{name}\" not found in namespace \"{namespace}\".\n  List the schedules with: quarry schedules -n {namespace}   (or quarry schedules -A)"
    )]
    UnknownSchedule {
        /// Schedule name asked for.
        name: String,
        /// Namespace looked in.
        namespace: String,
    },
    /// The profile a new run would use does not exist.
    #[error(
        "ResearchProfile \"{name}\" not found in namespace \"{namespace}\"{known}.\n  Create one (deploy/examples/profile-openai.yaml is a start) with kubectl apply -f PROFILE.yaml, or name an existing one with --profile NAME."
    )]
    NoProfile {
        /// Profile name asked for.
        name: String,
        /// Namespace looked in.
        namespace: String,
        /// `"; it has: a, b"` or empty.
        known: String,
    },
    /// The CRDs are not installed.
    #[error(
        "the ResearchRun API (quarry.dev/v1alpha1) is not installed on this cluster.\n  Install the CRDs: quarry crd | kubectl apply -f -   (or the Helm chart in charts/quarry)"
    )]
    CrdMissing,
    /// RBAC refused the request.
    #[error(
        "the API server refused to {action}: {message}\n  Your user needs the quarry-edit ClusterRole (quarry-view to read) bound in namespace \"{namespace}\"."
    )]
    Forbidden {
        /// What was attempted.
        action: String,
        /// The API server's message.
        message: String,
        /// Namespace of the request.
        namespace: String,
    },
    /// A run of that name exists already.
    #[error(
        "ResearchRun \"{name}\" already exists in namespace \"{namespace}\".\n  Choose another --name, or leave --name out for a generated one."
    )]
    AlreadyExists {
        /// The name taken.
        name: String,
        /// Its namespace.
        namespace: String,
    },
    /// The API server refused the object (admission rules).
    #[error("the API server rejected the ResearchRun: {message}")]
    Invalid {
        /// The API server's message, naming the field.
        message: String,
    },
    /// Any other API failure.
    #[error("{action}: {source}")]
    Kube {
        /// What was attempted.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A flag value is unusable.
    #[error("{0}")]
    Usage(String),
    /// `--wait` ran out of time; the run goes on.
    #[error(
        "gave up waiting after {waited} for ResearchRun \"{name}\" (phase {phase}); it keeps running.\n  Follow it with: quarry get {name} -n {namespace}"
    )]
    WaitTimeout {
        /// The wait limit as given.
        waited: String,
        /// Run name.
        name: String,
        /// Its namespace.
        namespace: String,
        /// Phase when the wait ended.
        phase: String,
    },
    /// The run disappeared while being watched.
    #[error("ResearchRun \"{name}\" in namespace \"{namespace}\" was deleted while waiting")]
    Deleted {
        /// Run name.
        name: String,
        /// Its namespace.
        namespace: String,
    },
    /// The run ended but not Completed.
    #[error("ResearchRun \"{name}\" ended {phase} ({reason}): {message}")]
    RunEnded {
        /// Run name.
        name: String,
        /// Failed or Cancelled.
        phase: String,
        /// Condition reason.
        reason: String,
        /// Status message.
        message: String,
    },
    /// Printing the result failed.
    #[error("printing the result: {0}")]
    Output(String),
}

impl CliError {
    /// Exit status: 2 for usage and configuration problems, 1 for everything else.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) | CliError::NoCluster { .. } => ExitCode::from(2),
            _ => ExitCode::FAILURE,
        }
    }
}

/// How a command prints its result (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    /// A table like kubectl's (the default).
    #[default]
    Table,
    /// The table with more columns.
    Wide,
    /// The object(s) as JSON.
    Json,
    /// The object(s) as YAML.
    Yaml,
}

/// When live progress is shown while waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressMode {
    /// A line updated in place when stderr is a terminal; nothing otherwise.
    #[default]
    Auto,
    /// One plain line on stderr per change, terminal or not (for logs and CI).
    Lines,
    /// Nothing.
    None,
}

impl ProgressMode {
    /// The effective mode: `Auto` becomes live on a terminal and `None` elsewhere.
    pub fn resolve(self) -> Resolved {
        match self {
            ProgressMode::Auto if std::io::stderr().is_terminal() => Resolved::Live,
            ProgressMode::Auto | ProgressMode::None => Resolved::Quiet,
            ProgressMode::Lines => Resolved::Lines,
        }
    }
}

/// Progress display after resolving [`ProgressMode::Auto`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// One line rewritten in place.
    Live,
    /// One line per change.
    Lines,
    /// Nothing.
    Quiet,
}

/// A multi-threaded runtime for one command; `None` (the reason printed) when it cannot start.
pub fn command_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("quarry: cannot start the async runtime: {e}");
            None
        }
    }
}

/// Runs an async command on a fresh runtime and turns its error into an exit status.
pub fn block_on<F>(fut: F) -> ExitCode
where
    F: std::future::Future<Output = Result<(), CliError>>,
{
    let Some(runtime) = command_runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quarry: {e}");
            e.exit_code()
        }
    }
}
