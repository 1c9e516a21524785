//! Leader election at the request level: two replicas' elections (the production
//! `leader_election` code over kube-lease-manager) against one in-process Lease API that keeps
//! Server-Side Apply's field ownership, so a second holder conflicts exactly as on a real API
//! server. Only one replica leads; a leader cut off from the API steps down before the other
//! takes over (no moment with two leaders), and the other takes over within the lease duration.
//! The kube end-to-end suite runs the same with two operator processes on a real API server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

use quarry_operator::leader_election::{LeaderConfig, LeaderError, Leadership, ensure_lease};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/quarry-system/leases";

#[derive(Default)]
struct LeaseStore {
    lease: Option<Value>,
    /// Field manager owning `spec.holderIdentity` (Server-Side Apply's managed fields).
    holder_owner: Option<String>,
    version: u64,
}

/// One replica's view of the shared API: `cut` makes every request of that replica fail, as a
/// network partition would.
#[derive(Clone)]
struct Replica {
    store: Arc<Mutex<LeaseStore>>,
    cut: Arc<AtomicBool>,
    /// Every request of that replica hangs unanswered, as when etcd stalls behind the server.
    stall: Arc<AtomicBool>,
    /// Milliseconds each write (PATCH) of that replica takes before it lands.
    write_delay_ms: Arc<std::sync::atomic::AtomicU64>,
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()});
    Response::builder()
        .status(code)
        .body(Body::from(serde_json::to_vec(&body).unwrap()))
        .unwrap()
}

fn ok(value: &Value) -> Response<Body> {
    Response::builder()
        .body(Body::from(serde_json::to_vec(value).unwrap()))
        .unwrap()
}

fn query(req: &Request<Body>, key: &str) -> Option<String> {
    url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes())
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
}

/// Merges `patch` into `target` (JSON merge semantics: null deletes).
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

impl Replica {
    /// A replica reaching `store` with nothing cut, stalled or delayed.
    fn new(store: &Arc<Mutex<LeaseStore>>) -> Self {
        Self {
            store: store.clone(),
            cut: Arc::new(AtomicBool::new(false)),
            stall: Arc::new(AtomicBool::new(false)),
            write_delay_ms: Default::default(),
        }
    }

    async fn handle(self, req: Request<Body>) -> Result<Response<Body>, std::convert::Infallible> {
        if self.stall.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let delay = self.write_delay_ms.load(Ordering::SeqCst);
        if req.method() == http::Method::PATCH && delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if self.cut.load(Ordering::SeqCst) {
            return Ok(status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "partitioned",
            ));
        }
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let manager = query(&req, "fieldManager").unwrap_or_default();
        let force = query(&req, "force").as_deref() == Some("true");
        let apply = req
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap_or("").contains("apply-patch"));
        let bytes = req.into_body().collect_bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let mut s = self.store.lock().unwrap();
        let name_path = format!("{LEASES}/quarry-operator");
        let response = match (method.as_str(), path.as_str()) {
            ("GET", p) if p == name_path => match &s.lease {
                Some(l) => ok(l),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "leases \"quarry-operator\" not found",
                ),
            },
            ("POST", p) if p == LEASES => {
                if s.lease.is_some() {
                    status(StatusCode::CONFLICT, "AlreadyExists", "exists")
                } else {
                    s.version += 1;
                    let mut lease = body.clone();
                    lease["metadata"]["resourceVersion"] = json!(s.version.to_string());
                    s.lease = Some(lease.clone());
                    ok(&lease)
                }
            }
            ("PATCH", p) if p == name_path => {
                let new_holder = body.pointer("/spec/holderIdentity").cloned();
                let current = s
                    .lease
                    .as_ref()
                    .and_then(|l| l.pointer("/spec/holderIdentity").cloned());
                if apply
                    && !force
                    && new_holder.as_ref().is_some_and(|h| !h.is_null())
                    && s.holder_owner.as_ref().is_some_and(|o| *o != manager)
                    && current
                        .as_ref()
                        .is_some_and(|c| Some(c) != new_holder.as_ref())
                {
                    status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        "Apply failed with 1 conflict: conflict with another manager using apiVersion coordination.k8s.io/v1: .spec.holderIdentity",
                    )
                } else {
                    let mut lease = s.lease.take().unwrap_or_else(|| {
                        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "quarry-operator", "namespace": "quarry-system"}})
                    });
                    merge(&mut lease, &body);
                    match new_holder {
                        Some(Value::Null) => s.holder_owner = None,
                        Some(_) => s.holder_owner = Some(manager),
                        None => {}
                    }
                    s.version += 1;
                    lease["metadata"]["resourceVersion"] = json!(s.version.to_string());
                    s.lease = Some(lease.clone());
                    ok(&lease)
                }
            }
            _ => status(
                StatusCode::NOT_FOUND,
                "NotFound",
                &format!("{method} {path}"),
            ),
        };
        Ok(response)
    }

    fn client(&self) -> Client {
        let replica = self.clone();
        let service = tower::service_fn(move |req| replica.clone().handle(req));
        Client::new(service, "quarry-system")
    }
}

fn holder(store: &Arc<Mutex<LeaseStore>>) -> Option<String> {
    store
        .lock()
        .unwrap()
        .lease
        .as_ref()
        .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
}

/// A lease store with one replica, `a`, reaching it.
fn one_replica() -> (Arc<Mutex<LeaseStore>>, Replica) {
    let store = Arc::new(Mutex::new(LeaseStore::default()));
    let a = Replica::new(&store);
    (store, a)
}

/// `a` creates the Lease, starts its election and waits until it leads.
async fn leading(a: &Replica) -> Leadership {
    ensure_lease(&a.client(), &config("a"), None).await.unwrap();
    let mut la = Leadership::start(a.client(), &config("a")).await.unwrap();
    la.acquired().await.unwrap();
    la
}

/// What a predecessor of `a` left: the Lease held by `a`, renewed at `renewed`, with a's field
/// manager owning the holder.
fn held_by_a(store: &Arc<Mutex<LeaseStore>>, renewed: k8s_openapi::jiff::Timestamp, seconds: u64) {
    let mut s = store.lock().unwrap();
    let lease = s.lease.as_mut().unwrap();
    lease["spec"] = json!({
        "holderIdentity": "a",
        "acquireTime": renewed.to_string(),
        "renewTime": renewed.to_string(),
        "leaseDurationSeconds": seconds,
        "leaseTransitions": 3,
    });
    s.holder_owner = Some("quarry-lease-a".into());
}

/// The Lease's `spec.renewTime`.
fn renew_time(store: &Arc<Mutex<LeaseStore>>) -> k8s_openapi::jiff::Timestamp {
    store.lock().unwrap().lease.as_ref().unwrap()["spec"]["renewTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn config(identity: &str) -> LeaderConfig {
    let mut c = LeaderConfig::new("quarry-system");
    c.identity = identity.into();
    c.lease_seconds = 4;
    c.grace_seconds = 1;
    c
}

#[tokio::test]
async fn one_replica_leads_and_a_cut_off_leader_steps_down_before_the_other_takes_over() {
    let (store, a) = one_replica();
    let b = Replica::new(&store);

    // The Lease carries the operator Deployment as owner.
    let owner = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "quarry".into(),
        uid: "d-123".into(),
        ..OwnerReference::default()
    };
    ensure_lease(&a.client(), &config("a"), Some(owner))
        .await
        .unwrap();
    let lease = store.lock().unwrap().lease.clone().unwrap();
    assert_eq!(
        lease["metadata"]["ownerReferences"][0]["kind"],
        "Deployment"
    );
    assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "d-123");

    let mut la = Leadership::start(a.client(), &config("a")).await.unwrap();
    la.acquired().await.unwrap();
    assert!(la.fence().is_open());
    assert_eq!(holder(&store).as_deref(), Some("a"));
    let mut lb = Leadership::start(b.client(), &config("b")).await.unwrap();
    // The standby does not get the lease while the leader renews it (three lease periods).
    assert!(
        tokio::time::timeout(Duration::from_secs(12), lb.acquired())
            .await
            .is_err(),
        "two leaders at once"
    );
    assert!(!lb.fence().is_open());
    assert_eq!(holder(&store).as_deref(), Some("a"));

    // The leader's research runs until it is cut off from the API.
    let stopped = Arc::new(AtomicBool::new(false));
    let flag = stopped.clone();
    let cut = a.cut.clone();
    let leader = tokio::spawn(async move {
        let out = la
            .lead(std::future::pending::<()>(), move || {
                flag.store(true, Ordering::SeqCst)
            })
            .await;
        (out, la.fence().is_open(), std::time::Instant::now())
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let cut_at = std::time::Instant::now();
    cut.store(true, Ordering::SeqCst);
    lb.acquired().await.unwrap();
    let b_at = std::time::Instant::now();
    let (out, fence_open, a_stopped_at) = leader.await.unwrap();
    assert!(matches!(out, Err(LeaderError::Lost(_))), "{:?}", out.err());
    assert!(stopped.load(Ordering::SeqCst), "the executors were stopped");
    assert!(!fence_open, "the old leader writes nothing more");
    assert!(
        a_stopped_at < b_at,
        "the old leader stopped before the new one started"
    );
    // Handed over within the lease duration (plus the standby's retry backoff).
    let handover = b_at - cut_at;
    assert!(handover <= Duration::from_secs(4 + 4), "{handover:?}");
    assert_eq!(holder(&store).as_deref(), Some("b"));
    assert!(lb.fence().is_open());
}

#[tokio::test]
async fn a_leader_whose_lease_is_taken_stops_at_once() {
    let (store, a) = one_replica();
    let mut la = leading(&a).await;
    let stopped = Arc::new(AtomicBool::new(false));
    let flag = stopped.clone();
    let thief = store.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // An administrator (or a buggy peer) rewrites the holder.
        let mut s = thief.lock().unwrap();
        let lease = s.lease.as_mut().unwrap();
        lease["spec"]["holderIdentity"] = json!("intruder");
        lease["spec"]["renewTime"] = json!(k8s_openapi::jiff::Timestamp::now().to_string());
    });
    let started = std::time::Instant::now();
    let out = la
        .lead(std::future::pending::<()>(), move || {
            flag.store(true, Ordering::SeqCst)
        })
        .await;
    assert!(matches!(out, Err(LeaderError::Lost(_))));
    assert!(stopped.load(Ordering::SeqCst));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

/// Leads with pending work for `periods` lease periods and returns how it ended: `None` when it
/// still led at the end (what a healthy leader does), else the error that made it step down.
async fn lead_for(la: &mut Leadership, periods: u64) -> Option<LeaderError> {
    let work = tokio::time::sleep(Duration::from_secs(4 * periods));
    la.lead(work, || {}).await.err()
}

#[tokio::test]
async fn a_leader_keeps_its_lease_across_many_renewals() {
    let (store, a) = one_replica();
    let mut la = leading(&a).await;
    // Every period has a renewal; a leader must never see its own renewal as too late.
    let lost = lead_for(&mut la, 3).await;
    assert!(lost.is_none(), "a healthy leader stepped down: {lost:?}");
    assert!(la.fence().is_open());
    assert_eq!(holder(&store).as_deref(), Some("a"));
}

#[tokio::test]
async fn a_process_restarted_under_the_same_name_keeps_the_lease_its_predecessor_held() {
    let (store, a) = one_replica();
    ensure_lease(&a.client(), &config("a"), None).await.unwrap();
    // What a SIGKILLed holder leaves: its identity, renewed 1.3 s ago (a fraction of a second
    // past a whole second, as real renewals are), with its field manager owning the holder.
    let renewed =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_millis(1300);
    held_by_a(&store, renewed, 4);
    // The kubelet restarts the container: same pod name, so the lease is its own at once.
    let mut la = Leadership::start(a.client(), &config("a")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), la.acquired())
        .await
        .expect("the lease held under its own name is taken at once")
        .unwrap();
    let lost = lead_for(&mut la, 3).await;
    assert!(
        lost.is_none(),
        "the restarted leader stepped down: {lost:?}"
    );
    assert_eq!(holder(&store).as_deref(), Some("a"));
}

#[tokio::test]
async fn a_leader_whose_reads_hang_steps_down_before_its_lease_expires() {
    let (store, a) = one_replica();
    let mut la = leading(&a).await;
    let stall = a.stall.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stall.store(true, Ordering::SeqCst);
    });
    let lost = lead_for(&mut la, 3).await;
    let stepped_down = k8s_openapi::jiff::Timestamp::now();
    assert!(
        matches!(lost, Some(LeaderError::Lost(_))),
        "a leader that cannot read its lease kept leading: {lost:?}"
    );
    assert!(!la.fence().is_open());
    // Before a standby could take the lease: its last renewal plus the lease duration.
    let renewed = renew_time(&store);
    let expires = renewed + k8s_openapi::jiff::SignedDuration::from_secs(4);
    assert!(
        stepped_down < expires,
        "stepped down at {stepped_down}, the lease expired at {expires}"
    );
}

#[tokio::test]
async fn a_process_restarted_after_its_own_lease_lapsed_leads_once_it_has_renewed_it() {
    let (store, a) = one_replica();
    ensure_lease(&a.client(), &config("a"), None).await.unwrap();
    // The predecessor was killed 10 s ago (or etcd stood still that long): the lease is in this
    // pod's name but lapsed.
    let lapsed =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(10);
    held_by_a(&store, lapsed, 4);
    let mut la = Leadership::start(a.client(), &config("a")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(4), la.acquired())
        .await
        .expect("the lapsed lease is renewed and taken")
        .unwrap();
    let renewed = renew_time(&store);
    assert!(renewed > lapsed, "leading on the lapsed lease");
    let lost = lead_for(&mut la, 2).await;
    assert!(
        lost.is_none(),
        "the restarted leader stepped down: {lost:?}"
    );
}

#[tokio::test]
async fn a_restarted_leader_sees_the_renewal_that_lands_after_its_first_read() {
    let (store, a) = one_replica();
    // The shipped timing: a 15 s lease renewed 5 s before it expires, read every 2 s.
    let config = |identity: &str| {
        let mut c = LeaderConfig::new("quarry-system");
        c.identity = identity.into();
        c.lease_seconds = 15;
        c.grace_seconds = 5;
        c
    };
    ensure_lease(&a.client(), &config("a"), None).await.unwrap();
    // The predecessor renewed 11 s ago: 1.5 s before the step-down deadline (2.5 s before
    // expiry), past its renewal moment, so the new manager renews at once.
    let renewed =
        k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(11);
    held_by_a(&store, renewed, 15);
    // That renewal lands 300 ms late (a loaded API server): the leader's first read still
    // shows the inherited renewal time.
    a.write_delay_ms.store(300, Ordering::SeqCst);
    let mut la = Leadership::start(a.client(), &config("a")).await.unwrap();
    la.acquired().await.unwrap();
    let work = tokio::time::sleep(Duration::from_secs(4));
    let lost = la.lead(work, || {}).await.err();
    assert!(
        lost.is_none(),
        "the restarted leader stepped down: {lost:?}"
    );
    let now = renew_time(&store);
    assert!(now > renewed, "the lease was never renewed");
}
