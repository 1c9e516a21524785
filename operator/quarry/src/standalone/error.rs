//! What can stop a standalone run, each error naming what to fix.

use std::path::PathBuf;

use quarry_operator::engine_builder;

/// Errors of a standalone run, each naming what to fix.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    #[error("profile {path}: {message}")]
    Profile { path: String, message: String },
    #[error("the profile names environment variable {name} for the API key, but it is not set")]
    MissingKey { name: String },
    #[error("profile {path}: {source}")]
    Wiring {
        path: String,
        source: engine_builder::WiringError,
    },
    #[error("writing the report to {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("the run failed ({reason}): {message}")]
    RunFailed { reason: String, message: String },
    #[error("the run failed (NoEvidence): {message}; the honest \"unable to research\" report is at {}", path.display())]
    NoEvidence { path: PathBuf, message: String },
    #[error("the run was cancelled")]
    Cancelled,
    /// `--compare-with` names no usable findings.json.
    #[error("--compare-with {path}: {message}")]
    Earlier { path: String, message: String },
    /// Scale-out mode (`--workers`) could not start.
    #[error("scale-out mode (--workers): {message}")]
    WorkQueue { message: String },
    /// The run's state directory could not take the report (disk full, read-only): the report
    /// was saved to `--out` or, failing that, printed on stdout, so nothing paid for is lost.
    #[error("the run failed (ReportStoreFailed): {message}; the report was {saved}")]
    ReportNotStored { message: String, saved: String },
}
