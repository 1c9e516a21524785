//! Who may open a run's event stream on the operator's port: a caller with a bearer token the
//! API server accepts (TokenReview) and that may `get` ResearchRuns in the run's namespace
//! (SubjectAccessReview), as the web console checks its callers. The token comes in
//! `Authorization: Bearer` when the port is reached directly, or in [`TOKEN_HEADER`] through
//! the API server's service proxy, which removes `Authorization` once it has authenticated the
//! caller. Each caller holds at most [`StreamAuth::max_per_caller`] streams at once, so one
//! client cannot take every slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// Header carrying the caller's token through the API server's service proxy.
pub const TOKEN_HEADER: &str = "x-quarry-token";

/// Streams one caller may hold open at once, by default.
pub const DEFAULT_MAX_PER_CALLER: usize = 8;

/// Why a caller may not open a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No token, or one the API server did not accept (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller may not read runs there (403).
    #[error("{0}")]
    Forbidden(String),
    /// The caller holds as many streams as allowed (429).
    #[error("{0}")]
    TooMany(String),
    /// The API server could not review the request (503).
    #[error("{0}")]
    Unavailable(String),
}

/// Reviews callers with the operator's client (which needs `create` on tokenreviews and
/// subjectaccessreviews) and counts their open streams.
pub struct StreamAuth {
    client: kube::Client,
    max_per_caller: usize,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl std::fmt::Debug for StreamAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamAuth")
            .field("max_per_caller", &self.max_per_caller)
            .finish_non_exhaustive()
    }
}

/// One caller's open stream: counted until dropped.
#[derive(Debug)]
pub struct CallerSlot {
    caller: String,
    open: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for CallerSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.caller) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.caller);
            }
        }
    }
}

/// Pure: the caller's token from the request headers (`Authorization: Bearer` first).
pub fn token_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

impl StreamAuth {
    /// Reviews with `client`; each caller holds at most `max_per_caller` streams.
    pub fn new(client: kube::Client, max_per_caller: usize) -> Self {
        Self {
            client,
            max_per_caller: max_per_caller.max(1),
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Streams one caller may hold at once.
    pub fn max_per_caller(&self) -> usize {
        self.max_per_caller
    }

    /// A slot for `caller`'s next stream, unless they hold the most already.
    pub fn slot(&self, caller: &str) -> Result<CallerSlot, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(caller.to_string()).or_default();
        if *n >= self.max_per_caller {
            return Err(Refusal::TooMany(format!(
                "{caller} has {} event streams open, the most one caller may hold; close one or retry shortly",
                self.max_per_caller
            )));
        }
        *n += 1;
        Ok(CallerSlot {
            caller: caller.to_string(),
            open: self.open.clone(),
        })
    }

    /// The user a request's token stands for, once the API server said they may read the
    /// ResearchRuns of `namespace`.
    pub async fn admit(&self, headers: &HeaderMap, namespace: &str) -> Result<String, Refusal> {
        let Some(token) = token_of(headers) else {
            return Err(Refusal::Unauthenticated(format!(
                "run events need a Kubernetes bearer token: send `Authorization: Bearer TOKEN` (or `{TOKEN_HEADER}: TOKEN` through the API server's service proxy, as `quarry logs` does); a token for a ServiceAccount comes from `kubectl create token NAME -n NAMESPACE`"
            )));
        };
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let status = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                Refusal::Unavailable(format!("the API server could not review the token: {e}"))
            })?
            .status
            .unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(Refusal::Unauthenticated(
                "the API server did not accept this token".into(),
            ));
        }
        let user = status.user.unwrap_or_default();
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                uid: user.uid,
                groups: user.groups,
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("get".into()),
                    group: Some("quarry.dev".into()),
                    resource: Some("researchruns".into()),
                    namespace: Some(namespace.to_string()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let checks: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let allowed = checks
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| {
                Refusal::Unavailable(format!("the API server could not check access: {e}"))
            })?
            .status
            .is_some_and(|s| s.allowed);
        if !allowed {
            return Err(Refusal::Forbidden(format!(
                "{name} may not get researchruns.quarry.dev in namespace {namespace}, so may not read its runs' events. Ask a cluster admin to bind the quarry-view ClusterRole to you there."
            )));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests;
