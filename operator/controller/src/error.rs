//! The operator's error: what reconcile of any of the three controllers, and start-up, can fail with.

use strum::IntoEnumIterator;

/// Errors of reconcile and of the operator.
#[derive(Debug, thiserror::Error, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(ErrorReason),
    doc = "The kind of an [`Error`], named as its `quarry_reconcile_errors_total` reason label.",
    derive(strum::EnumIter, strum::IntoStaticStr)
)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API call failed while {action}: {source}")]
    #[strum_discriminants(strum(serialize = "KubeApi"))]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    /// The object lacks metadata the API server always sets.
    #[error("ResearchRun is missing metadata.{0}")]
    MissingMetadata(&'static str),
    /// Serializing a patch failed.
    #[error("serializing {what}: {source}")]
    #[strum_discriminants(strum(serialize = "Serialization"))]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    /// The HTTP server failed.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    /// No Kubernetes client could be configured.
    #[error("cannot configure a Kubernetes client (set KUBECONFIG or run in a cluster): {0}")]
    Config(String),
    /// This replica does not hold the leader lease (any more).
    #[error("not the leader: another replica owns the runs")]
    NotLeader,
    /// Leader election failed or leadership was lost.
    #[error(transparent)]
    #[strum_discriminants(strum(serialize = "LeaderElection"))]
    Leader(#[from] crate::leader_election::LeaderError),
    /// The API server refused the run a ResearchSchedule's template makes (schema, CEL rules).
    #[error("{0}")]
    TemplateRefused(String),
    /// A deleted run's object-store artifacts could not be deleted yet.
    #[error("{0}")]
    ArtifactCleanup(String),
    /// The API server refuses every write to the run (422): its stored spec fails validation
    /// added after it was stored (no validation ratcheting before Kubernetes 1.28).
    #[error("ResearchRun {namespace}/{name} cannot be written: {message}")]
    StoredSpecInvalid {
        namespace: String,
        name: String,
        message: String,
    },
}

impl Error {
    /// The bounded `reason` label of `quarry_reconcile_errors_total` for this error: its
    /// variant's [`ErrorReason`].
    pub fn metric_reason(&self) -> &'static str {
        ErrorReason::from(self).into()
    }

    /// Every value [`Error::metric_reason`] returns, one per variant: the `reason` series of
    /// `quarry_reconcile_errors_total` are created at zero from it at start, so dashboards and
    /// alerts find the family before the first error.
    pub fn metric_reasons() -> Vec<&'static str> {
        ErrorReason::iter().map(Into::into).collect()
    }

    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(status), .. } if status.code == 404)
    }
}

pub(crate) fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let action = action.into();
    move |source| Error::Kube { action, source }
}
