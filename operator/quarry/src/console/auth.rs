//! The in-cluster console's authentication and authorisation, as the Kubernetes dashboard does
//! it: the caller's bearer token is checked with a TokenReview, and every action with a
//! SubjectAccessReview for that user, so the caller's own RBAC decides (not the operator's).
//! The local `quarry console` needs none of this: it talks to the API server as the user.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use sha2::{Digest, Sha256};

use super::source::SourceError;

/// How long a reviewed token is trusted before it is reviewed again.
const REVIEW_TTL: Duration = Duration::from_secs(60);
/// Most reviewed tokens remembered.
const MAX_CACHED: usize = 1024;

/// Who is calling, as the API server's TokenReview said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// User name.
    pub user: String,
    /// UID.
    pub uid: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// The bearer token they signed in with: the console's writes are sent with it, so the API
    /// server authorizes, admits and audits the person, not the operator.
    pub token: Option<BearerToken>,
}

/// A caller's bearer token; never printed (its `Debug` says only that there is one).
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }

    /// The token itself, for an `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

/// One action on a resource, as a SubjectAccessReview asks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action<'a> {
    /// get, list, watch, create, patch.
    pub verb: &'a str,
    /// API group (`quarry.dev`, or `""` for the core group).
    pub group: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Namespace (`None`: all namespaces).
    pub namespace: Option<&'a str>,
}

/// Reviews tokens and decisions with the operator's client.
pub struct Authorizer {
    client: Client,
    reviewed: Mutex<HashMap<[u8; 32], (Caller, Instant)>>,
}

impl Authorizer {
    /// An authorizer using `client` (which needs `create` on tokenreviews and
    /// subjectaccessreviews).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            reviewed: Mutex::new(HashMap::new()),
        }
    }

    /// The caller a bearer token stands for, or why it is refused.
    pub async fn review(&self, token: &str) -> Result<Caller, SourceError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Ok(cache) = self.reviewed.lock()
            && let Some((caller, at)) = cache.get(&key)
            && at.elapsed() < REVIEW_TTL
        {
            return Ok(caller.clone());
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answered = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                SourceError::Unavailable(format!("the API server could not review the token: {e}"))
            })?;
        let status = answered.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(SourceError::Forbidden(format!(
                "the API server did not accept this token{}",
                status.error.map(|e| format!(": {e}")).unwrap_or_default()
            )));
        }
        let user = status.user.unwrap_or_default();
        let caller = Caller {
            user: user.username.unwrap_or_default(),
            uid: user.uid,
            groups: user.groups.unwrap_or_default(),
            token: Some(BearerToken::new(token)),
        };
        if let Ok(mut cache) = self.reviewed.lock() {
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
            cache.insert(key, (caller.clone(), Instant::now()));
        }
        Ok(caller)
    }

    /// Whether `caller` may do `action`; a refusal names what is missing.
    pub async fn allow(&self, caller: &Caller, action: Action<'_>) -> Result<(), SourceError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(caller.user.clone()),
                uid: caller.uid.clone(),
                groups: Some(caller.groups.clone()),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(action.verb.to_string()),
                    group: Some(action.group.to_string()),
                    resource: Some(action.resource.to_string()),
                    namespace: action.namespace.map(str::to_string),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answered = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                SourceError::Unavailable(format!("the API server could not check access: {e}"))
            })?;
        if answered.status.as_ref().is_some_and(|s| s.allowed) {
            return Ok(());
        }
        let scope = action
            .namespace
            .map(|ns| format!("in namespace {ns}"))
            .unwrap_or_else(|| "in all namespaces".into());
        let resource = if action.group.is_empty() {
            action.resource.to_string()
        } else {
            format!("{}.{}", action.resource, action.group)
        };
        Err(SourceError::Forbidden(format!(
            "{} may not {} {resource} {scope}. Ask a cluster admin to bind the quarry-view ClusterRole (to read runs) or quarry-edit (to create and cancel them) to you there.",
            caller.user, action.verb
        )))
    }
}
