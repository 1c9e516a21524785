//! Look up and validate: the profile, its Secrets and the SearchEngine a run needs, turned into a launch request or a stall a person can act on (the pure parts first).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{Api, ResourceExt};
use tracing::warn;

use super::{Context, LaunchRequest, SEARCH_ENGINE_WAIT, artifacts, now};
use crate::engine_builder::ApiKey;
use crate::error::{Error, kube_err};
use crate::search_engine;
use crate::store::routed::ReportSlot;
use quarry_api::{
    CREDENTIAL_HOSTS_ANNOTATION, CREDENTIAL_LABEL, ReportKind, ResearchProfile,
    ResearchProfileSpec, ResearchRun, ResearchRunSpec, SearchEngine, SearchProviderKind,
    SearchTarget, SecretKeyRef, reasons,
};
use quarry_engine::research::machine::state::{ApprovalPolicy, Mode, OutputKind, RunInput};

/// A reason the run cannot progress, with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// Condition reason.
    pub reason: &'static str,
    /// Actionable message naming objects and keys (never values).
    pub message: String,
}

/// Pure: the API key named by `key_ref` in `secret`, or why it is unusable. `field` is where the
/// profile references it, e.g. `models.primary.apiKeySecretRef`.
pub fn extract_key(
    secret: &Secret,
    key_ref: &SecretKeyRef,
    profile: &str,
    field: &str,
) -> Result<ApiKey, Stall> {
    let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    let missing = || Stall {
        reason: reasons::SECRET_KEY_MISSING,
        message: format!(
            "Secret \"{}\" in namespace \"{namespace}\" has no key \"{}\" (ResearchProfile \"{profile}\" {field}.key); add the key to the Secret or fix the reference",
            key_ref.name, key_ref.key
        ),
    };
    let raw = secret
        .data
        .as_ref()
        .and_then(|d| d.get(&key_ref.key))
        .map(|b| b.0.clone());
    let raw = raw.or_else(|| {
        secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(&key_ref.key))
            .map(|s| s.clone().into_bytes())
    });
    let Some(raw) = raw else {
        return Err(missing());
    };
    let value = String::from_utf8(raw).map_err(|_| Stall {
        reason: reasons::SECRET_KEY_MISSING,
        message: format!(
            "Secret \"{}\" key \"{}\" is not UTF-8 text; store the API key as text",
            key_ref.name, key_ref.key
        ),
    })?;
    let value = value.trim();
    if value.is_empty() {
        return Err(Stall {
            reason: reasons::SECRET_KEY_MISSING,
            message: format!(
                "Secret \"{}\" key \"{}\" in namespace \"{namespace}\" is empty; put the API key in it",
                key_ref.name, key_ref.key
            ),
        });
    }
    Ok(ApiKey::new(value))
}

/// A Secret key a profile uses, where it holds the reference, and the host the key is sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretUse {
    /// Where the profile references it, e.g. `models.primary.apiKeySecretRef`.
    pub field: String,
    /// The reference.
    pub key_ref: SecretKeyRef,
    /// The host the key is sent to (from the referencing block's URL, or its public default).
    pub host: String,
}

/// Pure: the host of `url`, lower-cased (the URL itself when it has none: the schema only
/// admits http(s) URLs, so this is for messages only).
pub fn url_host(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str()
                .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
        })
        .unwrap_or_else(|| url.to_string())
}

/// Pure: every Secret key a profile uses, with the host each is sent to: model tiers (their
/// `baseURL`), search providers and specialised sources (their base URL, or the public API's).
pub fn secret_uses(profile: &ResearchProfileSpec) -> Vec<SecretUse> {
    use quarry_engine::sources::providers::{brave, serper, tavily};
    use quarry_engine::sources::security::{ghsa, nvd};
    use quarry_engine::sources::stackexchange;
    let host = |url: Option<&String>, default: &str| url_host(url.map_or(default, |u| u.as_str()));
    let tiers: BTreeMap<String, String> = profile
        .models
        .iter()
        .map(|(tier, model)| (tier.as_str().to_string(), url_host(&model.base_url)))
        .collect();
    let providers = profile.search_providers();
    let security = profile.sources().and_then(|s| s.security.as_ref());
    let stack = profile.sources().and_then(|s| s.stack_exchange.as_ref());
    secret_refs(profile)
        .into_iter()
        .map(|(field, key_ref)| {
            let host = if let Some(tier) = field
                .strip_prefix("models.")
                .and_then(|f| f.strip_suffix(".apiKeySecretRef"))
            {
                tiers.get(tier).cloned().unwrap_or_default()
            } else if let Some(i) = field
                .strip_prefix("search.providers[")
                .and_then(|f| f.split(']').next())
                .and_then(|i| i.parse::<usize>().ok())
            {
                providers.get(i).map_or_else(String::new, |p| {
                    let default = match p.kind {
                        SearchProviderKind::Brave => brave::DEFAULT_BASE_URL,
                        SearchProviderKind::Tavily => tavily::DEFAULT_BASE_URL,
                        SearchProviderKind::Serper => serper::DEFAULT_BASE_URL,
                    };
                    host(p.base_url.as_ref(), default)
                })
            } else if field.ends_with("nvdApiKeySecretRef") {
                host(
                    security.and_then(|s| s.nvd_base_url.as_ref()),
                    nvd::DEFAULT_BASE_URL,
                )
            } else if field.ends_with("githubTokenSecretRef") {
                host(
                    security.and_then(|s| s.github_base_url.as_ref()),
                    ghsa::DEFAULT_BASE_URL,
                )
            } else {
                host(
                    stack.and_then(|s| s.base_url.as_ref()),
                    stackexchange::DEFAULT_BASE_URL,
                )
            };
            SecretUse {
                field,
                key_ref,
                host,
            }
        })
        .collect()
}

/// Pure: whether a credentials-hosts entry covers `host` (the host itself or a parent domain).
fn host_covered(entry: &str, host: &str) -> bool {
    let entry = entry.trim().trim_end_matches('.').to_ascii_lowercase();
    !entry.is_empty()
        && (host == entry
            || host
                .strip_suffix(entry.as_str())
                .is_some_and(|rest| rest.ends_with('.')))
}

/// Pure: whether `secret` opted in to being sent to `host` by Quarry, or the stall saying
/// exactly how to opt it in. A Secret is used only when labelled [`CREDENTIAL_LABEL`]`: "true"`
/// and annotated [`CREDENTIAL_HOSTS_ANNOTATION`] with hosts that cover `host`: whoever may edit
/// a profile (and so its URLs) cannot have Quarry send any other Secret of the namespace, nor a
/// credential to a host it was not made for.
pub fn opted_in(secret: &Secret, host: &str, profile: &str, field: &str) -> Result<(), Stall> {
    let name = secret.metadata.name.as_deref().unwrap_or_default();
    let namespace = secret.metadata.namespace.as_deref().unwrap_or_default();
    let labelled = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CREDENTIAL_LABEL))
        .is_some_and(|v| v == "true");
    let hosts = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CREDENTIAL_HOSTS_ANNOTATION));
    let covered = hosts.is_some_and(|h| h.split(',').any(|e| host_covered(e, host)));
    if labelled && covered {
        return Ok(());
    }
    let listed: Vec<&str> = hosts
        .map(|h| {
            h.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut wanted = listed.clone();
    wanted.push(host);
    let label = format!("kubectl -n {namespace} label secret {name} {CREDENTIAL_LABEL}=true");
    let annotate = format!(
        "kubectl -n {namespace} annotate --overwrite secret {name} {CREDENTIAL_HOSTS_ANNOTATION}={}",
        wanted.join(",")
    );
    let (why, how) = match (labelled, covered) {
        (false, true) => (format!("has no label {CREDENTIAL_LABEL}=true"), label),
        (true, false) if !listed.is_empty() => (
            format!(
                "is for {} ({CREDENTIAL_HOSTS_ANNOTATION}), not {host}",
                listed.join(",")
            ),
            annotate,
        ),
        (true, _) => (
            format!("names no host in the annotation {CREDENTIAL_HOSTS_ANNOTATION}"),
            annotate,
        ),
        (false, false) => (
            "has not opted in to use by Quarry".to_string(),
            format!("{label} && {annotate}"),
        ),
    };
    Err(Stall {
        reason: reasons::SECRET_NOT_OPTED_IN,
        message: format!(
            "Secret \"{name}\" in namespace \"{namespace}\" (ResearchProfile \"{profile}\" {field}) {why}, so Quarry will not send it to {host}. If that is what the Secret is for, opt it in: {how}"
        ),
    })
}

/// Pure: every Secret reference of a profile with the field that holds it: model tiers, search
/// providers and specialised sources.
pub fn secret_refs(profile: &ResearchProfileSpec) -> Vec<(String, SecretKeyRef)> {
    let mut refs: Vec<(String, SecretKeyRef)> = profile
        .models
        .iter()
        .filter_map(|(tier, model)| {
            model
                .api_key_secret_ref
                .clone()
                .map(|r| (format!("models.{}.apiKeySecretRef", tier.as_str()), r))
        })
        .collect();
    for (i, p) in profile.search_providers().iter().enumerate() {
        refs.push((
            format!("search.providers[{i}].apiKeySecretRef"),
            p.api_key_secret_ref.clone(),
        ));
    }
    if let Some(sources) = profile.sources() {
        if let Some(security) = &sources.security {
            if let Some(r) = &security.nvd_api_key_secret_ref {
                refs.push((
                    "search.sources.security.nvdApiKeySecretRef".into(),
                    r.clone(),
                ));
            }
            if let Some(r) = &security.github_token_secret_ref {
                refs.push((
                    "search.sources.security.githubTokenSecretRef".into(),
                    r.clone(),
                ));
            }
        }
        if let Some(r) = sources
            .stack_exchange
            .as_ref()
            .and_then(|s| s.key_secret_ref.as_ref())
        {
            refs.push((
                "search.sources.stackExchange.keySecretRef".into(),
                r.clone(),
            ));
        }
    }
    refs
}

/// Pure: why a run may not start with the limits it asks for: a run may only lower its
/// profile's limits, so one set above them is refused, naming each limit and both values.
/// (The engine would use the stricter value anyway; refusing says so before anything is paid.)
pub fn limits_stall(
    spec: &ResearchRunSpec,
    profile_name: &str,
    profile: &ResearchProfileSpec,
) -> Option<Stall> {
    let above = match spec.limits_above_profile(profile.limits.as_ref()) {
        Ok(above) => above,
        Err(e) => {
            return Some(Stall {
                reason: reasons::PROFILE_INVALID,
                message: format!("invalid limits: {e}"),
            });
        }
    };
    if above.is_empty() {
        return None;
    }
    let list = above
        .iter()
        .map(|a| {
            format!(
                "spec.limits.{} \"{}\" is above ResearchProfile \"{profile_name}\" limits.{} \"{}\"",
                a.field, a.run, a.field, a.profile
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Some(Stall {
        reason: reasons::LIMITS_ABOVE_PROFILE,
        message: format!(
            "{list}. A run may only lower its profile's limits: recreate the run with values at most the profile's (or without them, to use the profile's), or have whoever manages the ResearchProfile raise them"
        ),
    })
}

/// Pure: the engine input for `spec` under `profile`'s default limits.
pub fn run_input(spec: &ResearchRunSpec, profile: &ResearchProfileSpec) -> Result<RunInput, Stall> {
    use quarry_api::{Mode as ApiMode, Output};
    let limits = spec
        .effective_limits(profile.limits.as_ref())
        .map_err(|e| Stall {
            reason: reasons::PROFILE_INVALID,
            message: format!("invalid limits: {e}"),
        })?;
    Ok(RunInput {
        query: spec.query.clone(),
        context: spec.context.clone(),
        mode: match spec.mode {
            ApiMode::Quick => Mode::Quick,
            ApiMode::Deep => Mode::Deep,
        },
        outputs: spec
            .outputs
            .iter()
            .map(|o| match o {
                Output::Study => OutputKind::Study,
                Output::Ideas => OutputKind::Ideas,
                Output::Implementations => OutputKind::Implementations,
            })
            .collect(),
        top_k: spec.top_k,
        limits: crate::engine_builder::limits(&limits),
        approval: approval_policy(spec)?,
        earlier: None,
    })
}

/// Pure: the engine's approval policy for `spec.approval` (`None` when not required).
fn approval_policy(spec: &ResearchRunSpec) -> Result<Option<ApprovalPolicy>, Stall> {
    let Some(approval) = spec.approval.as_ref().filter(|a| a.required) else {
        return Ok(None);
    };
    let timeout_secs = approval
        .timeout
        .as_deref()
        .map(quarry_api::values::parse_duration)
        .transpose()
        .map_err(|e| Stall {
            reason: reasons::PROFILE_INVALID,
            message: format!("invalid spec.approval.timeout: {e}"),
        })?
        .map(|d| d.as_secs());
    Ok(Some(ApprovalPolicy { timeout_secs }))
}

/// Pure: what to do with a finished run given its TTL: `None` keep it, `Some(ZERO)` delete now,
/// else wait that long.
pub fn ttl_wait(run: &ResearchRun, now: &Time) -> Option<Duration> {
    let ttl = u64::try_from(run.spec.ttl_seconds_after_finished?).unwrap_or(0);
    let finished = run.status.as_ref()?.completion_time.as_ref()?;
    let deadline = finished
        .0
        .as_second()
        .saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX));
    let left = deadline.saturating_sub(now.0.as_second());
    Some(Duration::from_secs(u64::try_from(left).unwrap_or(0)))
}

/// Looks up the profile and its Secrets and validates them into a launch request.
pub(super) async fn resolve(
    ctx: &Context,
    run: &Arc<ResearchRun>,
    namespace: &str,
) -> Result<Result<LaunchRequest, Stall>, Error> {
    let profile_name = run.spec.profile_ref.clone();
    let profiles: Api<ResearchProfile> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(profile) = profiles
        .get_opt(&profile_name)
        .await
        .map_err(kube_err(format!(
            "reading ResearchProfile {namespace}/{profile_name}"
        )))?
    else {
        return Ok(Err(Stall {
            reason: reasons::PROFILE_NOT_FOUND,
            message: format!(
                "ResearchProfile \"{profile_name}\" not found in namespace \"{namespace}\" (spec.profileRef); create it and the run will start"
            ),
        }));
    };
    // Before any Secret is read: a run asking for more than its profile allows does not start.
    if let Some(stall) = limits_stall(&run.spec, &profile_name, &profile.spec) {
        return Ok(Err(stall));
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut fetched: BTreeMap<String, Secret> = BTreeMap::new();
    let mut api_keys = Vec::new();
    for SecretUse {
        field,
        key_ref,
        host,
    } in secret_uses(&profile.spec)
    {
        if !fetched.contains_key(&key_ref.name) {
            let secret = secrets
                .get_opt(&key_ref.name)
                .await
                .map_err(kube_err(format!(
                    "reading Secret {namespace}/{}",
                    key_ref.name
                )))?;
            let Some(secret) = secret else {
                return Ok(Err(Stall {
                    reason: reasons::SECRET_NOT_FOUND,
                    message: format!(
                        "Secret \"{}\" not found in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" {field}); create it with key \"{}\"",
                        key_ref.name, key_ref.key
                    ),
                }));
            };
            fetched.insert(key_ref.name.clone(), secret);
        }
        let secret = &fetched[&key_ref.name];
        if let Err(stall) = opted_in(secret, &host, &profile_name, &field) {
            return Ok(Err(stall));
        }
        match extract_key(secret, &key_ref, &profile_name, &field) {
            Ok(key) => api_keys.push((key_ref.clone(), key)),
            Err(stall) => return Ok(Err(stall)),
        }
    }
    let object_store = match artifacts::resolve_object_store(ctx, &profile, namespace).await? {
        Ok(object_store) => object_store,
        Err(stall) => return Ok(Err(stall)),
    };
    if let (Some(config), Some(uid)) = (&object_store, run.uid()) {
        ctx.launched_stores.remember(&uid, config);
    }
    if run.spec.report.kind == ReportKind::ObjectStore && object_store.is_none() {
        return Ok(Err(Stall {
            reason: reasons::OBJECT_STORE_NOT_CONFIGURED,
            message: format!(
                "spec.report.kind is objectStore, but ResearchProfile \"{profile_name}\" has no objectStore and the operator has no default (--object-store-url); add spec.objectStore to the profile"
            ),
        }));
    }
    let input = match run_input(&run.spec, &profile.spec) {
        Ok(input) => input,
        Err(stall) => return Ok(Err(stall)),
    };
    let managed_search = match profile.spec.search_target() {
        SearchTarget::Url(_) => None,
        SearchTarget::Engine(engine_name) => {
            let engines: Api<SearchEngine> = Api::namespaced(ctx.client.clone(), namespace);
            let engine = engines
                .get_opt(engine_name)
                .await
                .map_err(kube_err(format!(
                    "reading SearchEngine {namespace}/{engine_name}"
                )))?;
            let Some(engine) = engine else {
                return Ok(Err(Stall {
                    reason: reasons::SEARCH_ENGINE_NOT_FOUND,
                    message: format!(
                        "SearchEngine \"{engine_name}\" not found in namespace \"{namespace}\" (ResearchProfile \"{profile_name}\" search.searchEngineRef); create it, or set search.url to an external SearXNG"
                    ),
                }));
            };
            if let Some(wait) = search_engine_wait(&engine, run, &now()) {
                return Ok(Err(wait));
            }
            Some(crate::engine_builder::ManagedSearch {
                backend: search_engine::backend_key(namespace, engine_name),
                url: SearchEngine::service_url(engine_name, namespace),
            })
        }
    };
    Ok(Ok(LaunchRequest {
        run: run.clone(),
        profile_name,
        profile: profile.spec,
        api_keys,
        input,
        managed_search,
        artifacts: artifacts::ArtifactTarget {
            object_store,
            report: ReportSlot::default(),
        },
    }))
}

/// Pure: whether a run should wait for its SearchEngine (no ready replica yet, and the run is
/// younger than [`SEARCH_ENGINE_WAIT`]); the wait's reason and message.
pub fn search_engine_wait(engine: &SearchEngine, run: &ResearchRun, now: &Time) -> Option<Stall> {
    let ready = engine.status.as_ref().map_or(0, |s| s.ready_replicas);
    if ready > 0 {
        return None;
    }
    let age = run
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(0, |t| now.0.as_second() - t.0.as_second());
    if age >= SEARCH_ENGINE_WAIT.as_secs() as i64 {
        warn!(run = %run.name_any(), search_engine = %engine.name_any(), "SearchEngine still not ready; starting anyway");
        return None;
    }
    Some(Stall {
        reason: reasons::WAITING_FOR_SEARCH_ENGINE,
        message: format!(
            "waiting for SearchEngine \"{}\" to scale up from zero (no ready replica yet); the run starts when it is ready, or after {}s with its API search providers",
            engine.name_any(),
            SEARCH_ENGINE_WAIT.as_secs()
        ),
    })
}
