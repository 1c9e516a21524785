//! Leader election (kube-lease-manager): one Lease in the operator's namespace, owner-referenced
//! to the operator's Deployment. Only the holder runs research and writes status; a replica that
//! loses the lease aborts every run's executor at once (no final write: the new leader owns the
//! runs now and resumes them from their checkpoints) and exits, as does one whose lease task
//! dies; Kubernetes restarts it as a standby.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

/// Name of the Lease.
pub const DEFAULT_LEASE_NAME: &str = "quarry-operator";
/// How long a lease lasts without renewal: a dead leader is replaced within this.
pub const DEFAULT_LEASE_SECONDS: u64 = 15;
/// How long before expiry the holder renews (a third of the way into the lease).
pub const DEFAULT_GRACE_SECONDS: u64 = 10;
/// Environment variable naming the operator's Deployment (the Lease's owner).
pub const OWNER_ENV: &str = "QUARRY_OPERATOR_DEPLOYMENT";

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be created or watched.
    #[error("leader election on Lease {namespace}/{name}: {message}")]
    Lease {
        namespace: String,
        name: String,
        message: String,
    },
    /// Another replica took the lease while this one led.
    #[error("lost the leader lease {0} to another replica; exiting so that it alone runs research")]
    Lost(String),
    /// The task renewing the lease ended.
    #[error("the leader lease task ended ({0}); exiting")]
    TaskDied(String),
}

/// Settings of the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub namespace: String,
    /// This replica's identity (its Pod name in a cluster).
    pub identity: String,
    pub lease_seconds: u64,
    pub grace_seconds: u64,
}

impl LeaderConfig {
    /// Defaults for `namespace`, the identity from `POD_NAME` (else host name and process id).
    pub fn new(namespace: impl Into<String>) -> Self {
        let identity = std::env::var("POD_NAME").unwrap_or_else(|_| {
            let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "quarry".into());
            format!("{host}-{}", std::process::id())
        });
        Self {
            lease_name: DEFAULT_LEASE_NAME.into(),
            namespace: namespace.into(),
            identity,
            lease_seconds: DEFAULT_LEASE_SECONDS,
            grace_seconds: DEFAULT_GRACE_SECONDS,
        }
    }
}

/// Whether this replica may write: checked before every status write, so nothing is written
/// between losing the lease and the process exiting. Cheap to clone; `leading()` without election.
#[derive(Debug, Clone)]
pub struct Fence(Arc<AtomicBool>);

impl Fence {
    /// A fence that allows writes (single replica, no election).
    pub fn leading() -> Self {
        Self(Arc::new(AtomicBool::new(true)))
    }
    /// A fence that allows nothing until leadership is won.
    pub fn standby() -> Self {
        Self(Arc::new(AtomicBool::new(false)))
    }
    /// Whether writes are allowed now.
    pub fn is_open(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    fn set(&self, open: bool) {
        self.0.store(open, Ordering::Release);
    }
}

/// The owner reference of the operator's Deployment named by [`OWNER_ENV`], if it is set and
/// readable (outside a cluster there is none, and the Lease simply has no owner).
pub async fn deployment_owner(client: &Client, namespace: &str) -> Option<OwnerReference> {
    let name = std::env::var(OWNER_ENV).ok().filter(|n| !n.is_empty())?;
    match Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(&name)
        .await
    {
        Ok(d) => d.controller_owner_ref(&()).map(|mut r| {
            // The Deployment owns the Lease for garbage collection only, it does not control it.
            r.controller = None;
            r.block_owner_deletion = None;
            r
        }),
        Err(e) => {
            warn!(deployment = %name, error = %e, "cannot read the operator Deployment; the Lease gets no owner");
            None
        }
    }
}

/// Creates the Lease (metadata only, Server-Side Apply) so it carries the owner reference; the
/// lease manager owns its spec.
pub async fn ensure_lease(
    client: &Client,
    config: &LeaderConfig,
    owner: Option<OwnerReference>,
) -> Result<(), LeaderError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
    let mut meta = serde_json::json!({
        "name": config.lease_name,
        "labels": {"app.kubernetes.io/managed-by": "quarry", "app.kubernetes.io/component": "leader-election"},
    });
    if let Some(owner) = owner {
        meta["ownerReferences"] = serde_json::json!([owner]);
    }
    let body = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
    });
    api.patch(
        &config.lease_name,
        &PatchParams::apply(crate::store::configmap::FIELD_MANAGER),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
    .map_err(|e| lease_error(config, e.to_string()))
}

fn lease_error(config: &LeaderConfig, message: String) -> LeaderError {
    LeaderError::Lease {
        namespace: config.namespace.clone(),
        name: config.lease_name.clone(),
        message,
    }
}

/// A running election: the leadership flag and the task that renews the lease.
pub struct Leadership {
    lease: String,
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_seconds: u64,
    grace_seconds: u64,
    rx: watch::Receiver<bool>,
    task: JoinHandle<Result<LeaseManager, kube_lease_manager::LeaseManagerError>>,
    fence: Fence,
}

impl Leadership {
    /// Starts competing for the lease (the Lease must exist: see [`ensure_lease`]).
    pub async fn start(client: Client, config: &LeaderConfig) -> Result<Self, LeaderError> {
        let api = Api::namespaced(client.clone(), &config.namespace);
        let manager = LeaseManagerBuilder::new(client, &config.lease_name)
            .with_namespace(&config.namespace)
            .with_identity(&config.identity)
            .with_duration(config.lease_seconds)
            .with_grace(config.grace_seconds)
            .with_field_manager(format!("quarry-lease-{}", config.identity))
            .build()
            .await
            .map_err(|e| lease_error(config, e.to_string()))?;
        let (rx, task) = manager.watch().await;
        Ok(Self {
            lease: format!("{}/{}", config.namespace, config.lease_name),
            api,
            name: config.lease_name.clone(),
            identity: config.identity.clone(),
            lease_seconds: config.lease_seconds,
            grace_seconds: config.grace_seconds,
            rx,
            task,
            fence: Fence::standby(),
        })
    }

    /// The write fence this election opens and closes.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Waits until this replica holds the lease, and the lease is valid for longer than the
    /// step-down margin of [`Leadership::lead`].
    ///
    /// A process restarted under the same name (the kubelet keeps the pod name) finds the lease
    /// already in its own name, and the lease manager reports it as held at once, with the
    /// killed predecessor's renewal time. If that has lapsed (the restart took longer than the
    /// lease, or etcd stood still), the manager renews at once, but leading before that
    /// renewal lands would step down on the first check: a run would be started and aborted
    /// over and over. So leadership begins only once a read shows a lease good for more than
    /// the margin.
    pub async fn acquired(&mut self) -> Result<(), LeaderError> {
        loop {
            let held = *self.rx.borrow_and_update();
            if held && self.lease_valid().await {
                self.fence.set(true);
                info!(lease = %self.lease, "leader lease acquired");
                return Ok(());
            }
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return Err(LeaderError::TaskDied("its channel closed".into()));
                    }
                }
                ended = &mut self.task => return Err(LeaderError::TaskDied(describe(ended))),
                // Held but not yet renewed: look again shortly.
                _ = tokio::time::sleep(Duration::from_millis(200)), if held => {}
            }
        }
    }

    /// The step-down margin: a leader steps down this long before its lease would lapse (half
    /// the renewal grace, at most a sixth of the lease), so a renewal has the rest of the grace
    /// to land.
    fn margin_ms(&self) -> i64 {
        (self.grace_seconds as i64 * 1000 / 2).min(self.lease_seconds as i64 * 1000 / 6)
    }

    /// Whether the Lease, read now, is this replica's and valid beyond the step-down margin.
    async fn lease_valid(&self) -> bool {
        let read = tokio::time::timeout(Duration::from_secs(2), self.api.get(&self.name)).await;
        let Ok(Ok(lease)) = read else {
            return false;
        };
        let spec = lease.spec.unwrap_or_default();
        let (Some(holder), Some(renewed)) = (spec.holder_identity, spec.renew_time) else {
            return false;
        };
        let seconds = spec
            .lease_duration_seconds
            .map_or(self.lease_seconds as i64, i64::from);
        holder == self.identity
            && renewed.0.as_millisecond() + seconds * 1000 - self.margin_ms() > now_millis()
    }

    /// Runs `work` while this replica leads. Losing the lease, or the lease task dying, closes
    /// the fence, calls `on_lost` (which aborts the executors) and returns the error at once.
    ///
    /// The lease manager only reports changes it could read; a leader cut off from the API
    /// would never hear that its lease ran out. So the lease is also checked here, and a leader
    /// that cannot see a valid lease of its own steps down before any standby may take it
    /// (client-go's renew deadline). The manager renews `grace` before expiry; the leader waits
    /// for that renewal until the margin before expiry, to the millisecond. Stepping down at the
    /// renewal moment itself (or at the whole second before it) raced the renewal: a healthy
    /// leader, and most often one restarted under the same name (it inherits the killed
    /// process's renewal time and renews on its schedule), read its lease a moment before its
    /// own renewal landed and exited.
    pub async fn lead<F, T>(&mut self, work: F, on_lost: impl FnOnce()) -> Result<T, LeaderError>
    where
        F: std::future::Future<Output = T>,
    {
        let (api, name, identity) = (self.api.clone(), self.name.clone(), self.identity.clone());
        let duration_ms = self.lease_seconds as i64 * 1000;
        let grace_ms = self.grace_seconds.min(self.lease_seconds / 2) as i64 * 1000;
        let margin_ms = self.margin_ms();
        let lease_label = self.lease.clone();
        let confirm = async move {
            // Until the lease is read, the leader trusts it for `grace` only.
            let mut valid_until = now_millis() + grace_ms + margin_ms;
            let every = (grace_ms / 2).clamp(250, 2000);
            loop {
                // A read that hangs (etcd stalled behind the API server) must not hold the
                // deadline check back: it gets until the deadline.
                let left = valid_until - margin_ms - now_millis();
                if left <= 0 {
                    return LeaderError::Lost(format!("{lease_label} (not renewed in time)"));
                }
                let read = tokio::time::timeout(Duration::from_millis(left as u64), api.get(&name));
                match read.await {
                    Err(_) => continue,
                    Ok(Ok(lease)) => {
                        let spec = lease.spec.unwrap_or_default();
                        if spec.holder_identity.as_deref() != Some(identity.as_str()) {
                            return LeaderError::Lost(lease_label);
                        }
                        if let Some(renewed) = spec.renew_time {
                            let seconds = spec
                                .lease_duration_seconds
                                .map_or(duration_ms, |s| i64::from(s) * 1000);
                            valid_until = renewed.0.as_millisecond() + seconds;
                        }
                    }
                    Ok(Err(e)) => warn!(error = %e, "cannot confirm the leader lease"),
                }
                let left = valid_until - margin_ms - now_millis();
                if left <= 0 {
                    return LeaderError::Lost(format!("{lease_label} (not renewed in time)"));
                }
                // Read again ever sooner as the deadline nears (half the time left, at least
                // 50 ms): the renewal may land a moment after a read, and the leader must see it
                // before concluding it has none. Sleeping to the deadline itself stepped down a
                // process restarted under the same name whose first read came just before the
                // manager's immediate renewal of the lease it inherited.
                let nap = (left / 2).max(50).min(every);
                tokio::time::sleep(Duration::from_millis(nap as u64)).await;
            }
        };
        let lost = async {
            loop {
                tokio::select! {
                    changed = self.rx.changed() => {
                        if changed.is_err() {
                            return LeaderError::TaskDied("its channel closed".into());
                        }
                        if !*self.rx.borrow_and_update() {
                            return LeaderError::Lost(self.lease.clone());
                        }
                    }
                    ended = &mut self.task => return LeaderError::TaskDied(describe(ended)),
                }
            }
        };
        let lost = async {
            tokio::select! {
                err = lost => err,
                err = confirm => err,
            }
        };
        tokio::select! {
            out = work => Ok(out),
            err = lost => {
                self.fence.set(false);
                on_lost();
                warn!(error = %err, "leadership ended; research stopped");
                Err(err)
            }
        }
    }

    /// Gives the lease up (graceful shutdown), so a standby takes over at once.
    pub async fn release(self) {
        self.fence.set(false);
        // Dropping the receiver makes the manager release the lease and end.
        drop(self.rx);
        match tokio::time::timeout(Duration::from_secs(5), self.task).await {
            Ok(Ok(Ok(_))) => info!("leader lease released"),
            Ok(other) => warn!(outcome = %describe(other), "leader lease not released cleanly"),
            Err(_) => warn!("leader lease release timed out"),
        }
    }
}

fn now_millis() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

fn describe(
    ended: Result<
        Result<LeaseManager, kube_lease_manager::LeaseManagerError>,
        tokio::task::JoinError,
    >,
) -> String {
    match ended {
        Ok(Ok(_)) => "it stopped".into(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    }
}

/// The name an owner reference gives, for logs.
pub fn owner_name(owner: &Option<OwnerReference>) -> String {
    owner
        .as_ref()
        .map_or_else(|| "none".into(), |o| format!("{}/{}", o.kind, o.name))
}

/// The namespace the operator runs in: `POD_NAMESPACE`, else the client's default namespace.
pub fn operator_namespace(client: &Client) -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| client.default_namespace().to_string())
}
