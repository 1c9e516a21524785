//! A real Kubernetes control plane for tests, the way controller-runtime's envtest does it: etcd
//! and kube-apiserver on free loopback ports, each test process with its own data directory,
//! CA, admin client certificate, static token file, service-account signing keys and audit log.
//!
//! Under nextest every test is a process of its own, so a control plane lives as long as the
//! test that started it (about 5 s to start on 2 cores) and is stopped by pid when dropped.
//! A shared server across processes would need a setup script and a cleanup no test owns; one
//! per test keeps namespaces, CRDs and audit logs unambiguous.
//!
//! Components (`scripts/install-test-deps.sh` installs etcd; the apiserver is the project's
//! shared binary):
//! - kube-apiserver: `KUBE_APISERVER_BIN`, else `../shared/k8s/kube-apiserver.xz` unpacked once
//!   into `<work dir>/kube-apiserver/` and checked against its sha256;
//! - etcd: `ETCD_BIN`, else `<work dir>/etcd/etcd`, else `etcd` on PATH;
//! - `openssl` for the certificates.
//!
//! Tests that need it are `#[ignore = "needs a kube-apiserver ..."]`: without the components they
//! show as skipped; `scripts/test.sh` runs them with `--run-ignored` when the apiserver is there,
//! and then a missing component is a failure, never a silent pass.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};
use serde::Deserialize;
use serde_json::{Value, json};

/// The reason string kube tests are ignored with (shown by nextest as the skip reason).
pub const NEEDS: &str =
    "needs a kube-apiserver and etcd (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)";

/// sha256 of the unpacked kube-apiserver the CI machine keeps, so a corrupt copy fails loudly.
const APISERVER_SHA256: &str = "892f096d3a391f435344f9f5782cb521a82e2dd728e954c9953692d6a3afd03d";

/// Field manager the harness applies with.
const FIELD_MANAGER: &str = "quarry-e2e";

/// CRD fields newer than the oldest server Quarry meets (1.25). They stay in `crds/` (real
/// clusters have them); the harness strips them only when installing on a server that lacks them.
/// `selectableFields` is 1.30+; `messageExpression`/`reason`/`fieldPath` on validation rules and
/// `optionalOldSelf` are 1.27-1.29.
pub const FIELDS_NEWER_THAN_1_25: [&str; 5] = [
    "selectableFields",
    "messageExpression",
    "reason",
    "fieldPath",
    "optionalOldSelf",
];

/// The audit policy: every request at Metadata level (verb, resource, user), as JSON lines.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// The repository root.
fn repo_root() -> PathBuf {
    crate::kube_tools::repo_root()
}

/// The project work directory (`QUARRY_WORK_DIR`, relative to the repo root, default `.work`).
fn work_dir() -> PathBuf {
    let work = PathBuf::from(std::env::var("QUARRY_WORK_DIR").unwrap_or_else(|_| ".work".into()));
    if work.is_absolute() {
        work
    } else {
        repo_root().join(work)
    }
}

/// The compressed apiserver the CI machine keeps beside this repository
/// (`../shared/k8s/kube-apiserver.xz`), used when `KUBE_APISERVER_BIN` is unset.
fn shared_apiserver_xz() -> PathBuf {
    repo_root().join("../shared/k8s/kube-apiserver.xz")
}

/// Whether an apiserver is available to this machine (the binary, or the shared archive).
/// `scripts/test.sh` asks the same question to decide whether CI must run the kube suite.
pub fn apiserver_available() -> bool {
    std::env::var_os("KUBE_APISERVER_BIN").is_some_and(|p| Path::new(&p).is_file())
        || shared_apiserver_xz().is_file()
}

fn sha256_of(path: &Path) -> Result<String, String> {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(|e| format!("running sha256sum: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .next()
        .map(str::to_string)
        .ok_or_else(|| format!("sha256sum printed nothing for {}", path.display()))
}

/// The kube-apiserver binary: `KUBE_APISERVER_BIN`, or the shared archive unpacked (once, checked
/// against its sha256) into the work directory.
pub fn apiserver_bin() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("KUBE_APISERVER_BIN") {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "KUBE_APISERVER_BIN={} is not a file",
                path.display()
            ))
        };
    }
    let xz = shared_apiserver_xz();
    if !xz.is_file() {
        return Err(format!(
            "no kube-apiserver: set KUBE_APISERVER_BIN or provide {}",
            xz.display()
        ));
    }
    let dir = work_dir().join("kube-apiserver");
    let bin = dir.join("kube-apiserver");
    if bin.is_file() && sha256_of(&bin)? == APISERVER_SHA256 {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    // Unpack to a file of this process's own, then rename: concurrent test processes may race.
    let part = dir.join(format!("kube-apiserver.{}.part", std::process::id()));
    let out =
        std::fs::File::create(&part).map_err(|e| format!("creating {}: {e}", part.display()))?;
    let status = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .stdout(out)
        .status()
        .map_err(|e| format!("running xz: {e}"))?;
    if !status.success() {
        return Err(format!("xz -dc {} failed with {status}", xz.display()));
    }
    let digest = sha256_of(&part)?;
    if digest != APISERVER_SHA256 {
        let _ = std::fs::remove_file(&part);
        return Err(format!(
            "{} unpacks to sha256 {digest}, expected {APISERVER_SHA256}",
            xz.display()
        ));
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", part.display()))?;
    std::fs::rename(&part, &bin).map_err(|e| format!("renaming to {}: {e}", bin.display()))?;
    Ok(bin)
}

/// The etcd binary: `ETCD_BIN`, the project's install (`<work dir>/etcd/etcd`), or PATH.
pub fn etcd_bin() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("ETCD_BIN") {
        return Ok(PathBuf::from(path));
    }
    let local = work_dir().join("etcd/etcd");
    if local.is_file() {
        return Ok(local);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("etcd"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| "no etcd: run scripts/install-test-deps.sh or set ETCD_BIN".to_string())
}

/// A free loopback port (bound and released; a race with another process is unlikely and would
/// show as a start failure, not a wrong result).
fn free_port() -> Result<u16, String> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(probe.local_addr().map_err(|e| e.to_string())?.port())
}

fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("running openssl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The CA, serving and admin certificates, the service-account key pair and the token file.
fn write_pki(pki: &Path) -> Result<(), String> {
    std::fs::create_dir_all(pki).map_err(|e| format!("creating {}: {e}", pki.display()))?;
    let step = |args: &[&str]| openssl(pki, args);
    step(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=quarry-test-ca",
    ])?;
    // Extensions make these v3 certificates: rustls refuses v1 ones (what `x509 -req` makes
    // without an extension file).
    std::fs::write(
        pki.join("serving.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes.default.svc\n\
         extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n",
    )
    .map_err(|e| e.to_string())?;
    std::fs::write(
        pki.join("admin.ext"),
        "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
    )
    .map_err(|e| e.to_string())?;
    for (name, subject) in [
        ("serving", "/CN=kube-apiserver"),
        ("admin", "/CN=admin/O=system:masters"),
    ] {
        step(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            subject,
        ])?;
        let mut args = vec![
            "x509".to_string(),
            "-req".into(),
            "-in".into(),
            format!("{name}.csr"),
            "-CA".into(),
            "ca.crt".into(),
            "-CAkey".into(),
            "ca.key".into(),
            "-CAcreateserial".into(),
            "-out".into(),
            format!("{name}.crt"),
            "-days".into(),
            "3650".into(),
        ];
        args.extend(["-extfile".into(), format!("{name}.ext")]);
        step(&args.iter().map(String::as_str).collect::<Vec<_>>())?;
    }
    step(&["genrsa", "-out", "sa.key", "2048"])?;
    step(&["rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub"])?;
    std::fs::write(
        pki.join("tokens.csv"),
        "admin-token,admin,admin,\"system:masters\"\n",
    )
    .map_err(|e| e.to_string())
}

/// A running etcd + kube-apiserver pair; both processes are killed when this is dropped.
pub struct ControlPlane {
    dir: tempfile::TempDir,
    etcd: Child,
    apiserver: Child,
    /// How the apiserver was started, to start it again on the same port and etcd.
    apiserver_bin: PathBuf,
    apiserver_args: Vec<String>,
    url: String,
    kubeconfig: PathBuf,
    client: Client,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("url", &self.url)
            .field("dir", &self.dir.path())
            .finish()
    }
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver, waits for `/readyz` (60 s) and installs Quarry's CRDs.
    /// An error says which component is missing or what the apiserver logged.
    pub async fn start() -> Result<ControlPlane, String> {
        // Free ports are found by binding port 0 and letting go: a parallel test may take one in
        // between (seen in CI: etcd's "bind: address already in use"). Such a start is retried
        // on new ports; any other failure is returned at once.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once().await {
                Err(e) if attempt < 3 && e.contains("address already in use") => {
                    eprintln!("control plane start raced for a port (attempt {attempt}), retrying");
                }
                other => return other,
            }
        }
    }

    /// One attempt of [`ControlPlane::start`].
    async fn start_once() -> Result<ControlPlane, String> {
        let apiserver_bin = apiserver_bin()?;
        let etcd_bin = etcd_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("quarry-control-plane-")
            .tempdir()
            .map_err(|e| format!("creating a temp dir: {e}"))?;
        let root = dir.path().to_path_buf();
        let pki = root.join("pki");
        {
            let pki = pki.clone();
            tokio::task::spawn_blocking(move || write_pki(&pki))
                .await
                .map_err(|e| e.to_string())??;
        }
        std::fs::write(root.join("audit-policy.yaml"), AUDIT_POLICY).map_err(|e| e.to_string())?;
        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let log = |name: &str| -> Result<std::fs::File, String> {
            std::fs::File::create(root.join(name)).map_err(|e| format!("creating {name}: {e}"))
        };
        let etcd = Command::new(&etcd_bin)
            .args(["--name", "test", "--log-level", "warn"])
            .arg("--data-dir")
            .arg(root.join("etcd-data"))
            .arg(format!("--listen-client-urls=http://127.0.0.1:{etcd_port}"))
            .arg(format!(
                "--advertise-client-urls=http://127.0.0.1:{etcd_port}"
            ))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"
            ))
            .arg(format!(
                "--initial-cluster=test=http://127.0.0.1:{peer_port}"
            ))
            // Keeps the data dir small: tests write little and never need history.
            .args(["--quota-backend-bytes", "1073741824", "--unsafe-no-fsync"])
            .stdin(Stdio::null())
            .stdout(log("etcd.log")?)
            .stderr(log("etcd.log")?)
            .spawn()
            .map_err(|e| format!("starting etcd {}: {e}", etcd_bin.display()))?;
        let p = |name: &str| pki.join(name).display().to_string();
        let apiserver_args: Vec<String> = [
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={api_port}"),
            format!("--tls-cert-file={}", p("serving.crt")),
            format!("--tls-private-key-file={}", p("serving.key")),
            format!("--client-ca-file={}", p("ca.crt")),
            format!("--token-auth-file={}", p("tokens.csv")),
            format!("--service-account-key-file={}", p("sa.pub")),
            format!("--service-account-signing-key-file={}", p("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--authorization-mode=RBAC".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--disable-admission-plugins=ServiceAccount".into(),
            "--enable-priority-and-fairness=false".into(),
            "--endpoint-reconciler-type=none".into(),
            // Alpha in this tree: without these the server silently drops every CEL rule and
            // accepts unknown fields.
            "--feature-gates=CustomResourceValidationExpressions=true,ServerSideFieldValidation=true".into(),
            format!("--audit-log-path={}", root.join("audit.log").display()),
            format!(
                "--audit-policy-file={}",
                root.join("audit-policy.yaml").display()
            ),
        ]
        .into();
        let apiserver = spawn_apiserver(&apiserver_bin, &apiserver_args, &root)?;
        let url = format!("https://127.0.0.1:{api_port}");
        let kubeconfig = root.join("kubeconfig");
        std::fs::write(&kubeconfig, admin_kubeconfig(&url, &pki)?).map_err(|e| e.to_string())?;
        // The client exists before the server answers; it is only used once /readyz says yes.
        let client = client_for(&kubeconfig).await?;
        let mut plane = ControlPlane {
            dir,
            etcd,
            apiserver,
            apiserver_bin,
            apiserver_args,
            url,
            kubeconfig,
            client,
        };
        plane.wait_ready(Duration::from_secs(90)).await?;
        install_crds(&plane.client).await?;
        Ok(plane)
    }

    async fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.apiserver.try_wait() {
                return Err(format!(
                    "kube-apiserver exited with {status}:\n{}",
                    self.log_tail("apiserver.log")
                ));
            }
            if let Ok(Some(status)) = self.etcd.try_wait() {
                return Err(format!(
                    "etcd exited with {status}:\n{}",
                    self.log_tail("etcd.log")
                ));
            }
            let ready = self
                .client
                .request_text(
                    http::Request::get("/readyz")
                        .body(Vec::new())
                        .map_err(|e| e.to_string())?,
                )
                .await;
            if matches!(ready, Ok(ref body) if body.trim() == "ok") {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "kube-apiserver not ready within {limit:?} ({ready:?}):\n{}",
                    self.log_tail("apiserver.log")
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Kills the apiserver (SIGKILL, mid-request for whoever is talking to it); etcd keeps the
    /// data. [`ControlPlane::start_apiserver`] starts it again.
    pub fn stop_apiserver(&mut self) {
        let _ = self.apiserver.kill();
        let _ = self.apiserver.wait();
    }

    /// Starts the apiserver again on the same port, certificates and etcd, and waits (90 s) until
    /// `/readyz` answers.
    pub async fn start_apiserver(&mut self) -> Result<(), String> {
        self.apiserver =
            spawn_apiserver(&self.apiserver_bin, &self.apiserver_args, self.dir.path())?;
        self.wait_ready(Duration::from_secs(90)).await
    }

    /// Stops etcd where it stands (SIGSTOP): its connections stay open and every request to it
    /// hangs, as on a stalled disk or a paused VM. [`ControlPlane::resume_etcd`] continues it.
    pub fn pause_etcd(&self) -> Result<(), String> {
        signal(self.etcd.id(), "STOP")
    }

    /// Continues a paused etcd (SIGCONT).
    pub fn resume_etcd(&self) -> Result<(), String> {
        signal(self.etcd.id(), "CONT")
    }

    /// The last 40 lines of one of the control plane's logs (`apiserver.log`, `etcd.log`).
    pub fn log_tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// An admin client (client certificate in `system:masters`).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin kubeconfig (contexts `admin` and `admin-token`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA certificate that signed the serving certificate.
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("pki/ca.crt")
    }

    /// The audit log: one JSON line per request (verb, objectRef, user).
    pub fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// A directory for the test's own files, removed with the control plane.
    pub fn scratch(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// Creates a fresh namespace `quarry-<label>-<random>` and returns its name.
    pub async fn namespace(&self, label: &str) -> Result<String, String> {
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .take(40)
            .collect();
        let name = format!("quarry-{label}-{:06x}", rand::random::<u32>() & 0xff_ffff);
        Api::<Namespace>::all(self.client.clone())
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Apply(
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                ),
            )
            .await
            .map_err(|e| format!("creating namespace {name}: {e}"))?;
        Ok(name)
    }

    /// Writes a kubeconfig that authenticates with `token` (e.g. a ServiceAccount token from
    /// [`ControlPlane::service_account_token`]) to `path`, namespace `namespace`.
    pub fn token_kubeconfig(
        &self,
        token: &str,
        namespace: &str,
        path: &Path,
    ) -> Result<(), String> {
        let ca = std::fs::read(self.ca_cert()).map_err(|e| e.to_string())?;
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "test", "cluster": {"server": self.url, "certificate-authority-data": b64(&ca)}}],
            "users": [{"name": "token", "user": {"token": token}}],
            "contexts": [{"name": "token", "context": {"cluster": "test", "user": "token", "namespace": namespace}}],
            "current-context": "token",
        });
        std::fs::write(
            path,
            serde_yaml::to_string(&config).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// A token for ServiceAccount `namespace/name` from the TokenRequest API (as `kubectl create
    /// token` mints it), valid for an hour. The ServiceAccount must exist.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, String> {
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
        let answer: Value = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("TokenRequest for {namespace}/{name}: {e}"))?;
        answer["status"]["token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| {
                format!("TokenRequest for {namespace}/{name} returned no token: {answer}")
            })
    }

    /// The audit log's entries, parsed (lines that are not JSON are skipped).
    pub fn audit_entries(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit_log())
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // apiserver first: it would log etcd connection errors for a while otherwise.
        let _ = self.apiserver.kill();
        let _ = self.apiserver.wait();
        let _ = self.etcd.kill();
        let _ = self.etcd.wait();
    }
}

/// Starts kube-apiserver with `args`, appending to `<root>/apiserver.log` (a restart keeps the
/// earlier process's lines).
fn spawn_apiserver(bin: &Path, args: &[String], root: &Path) -> Result<Child, String> {
    let log = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(root.join("apiserver.log"))
            .map_err(|e| format!("opening apiserver.log: {e}"))
    };
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log()?)
        .stderr(log()?)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", bin.display()))
}

/// Sends `SIG<name>` to process `pid` (kill(1): the harness needs no libc binding).
fn signal(pid: u32, name: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill -{name} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{name} {pid} failed with {status}"))
    }
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn admin_kubeconfig(url: &str, pki: &Path) -> Result<String, String> {
    let read = |name: &str| std::fs::read(pki.join(name)).map_err(|e| format!("{name}: {e}"));
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": url, "certificate-authority-data": b64(&read("ca.crt")?)}}],
        "users": [
            {"name": "admin", "user": {"client-certificate-data": b64(&read("admin.crt")?), "client-key-data": b64(&read("admin.key")?)}},
            {"name": "admin-token", "user": {"token": "admin-token"}},
        ],
        "contexts": [
            {"name": "admin", "context": {"cluster": "test", "user": "admin"}},
            {"name": "admin-token", "context": {"cluster": "test", "user": "admin-token"}},
        ],
        "current-context": "admin",
    });
    serde_yaml::to_string(&config).map_err(|e| e.to_string())
}

/// A client from a kubeconfig file.
pub async fn client_for(path: &Path) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?;
    Client::try_from(config).map_err(|e| format!("building client: {e}"))
}

/// Removes, recursively, every object key in [`FIELDS_NEWER_THAN_1_25`] that this server would
/// refuse. Only keys of validation rules are `reason`/`fieldPath`/`messageExpression`, so they are
/// removed only inside `x-kubernetes-validations` entries; `selectableFields` only at the version
/// level, where it lives.
pub fn strip_newer_crd_fields(crd: &mut Value) {
    fn walk(value: &mut Value, in_rule: bool) {
        match value {
            Value::Object(map) => {
                map.remove("selectableFields");
                if in_rule {
                    for key in [
                        "messageExpression",
                        "reason",
                        "fieldPath",
                        "optionalOldSelf",
                    ] {
                        map.remove(key);
                    }
                }
                for (key, child) in map.iter_mut() {
                    walk(child, key == "x-kubernetes-validations");
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, in_rule);
                }
            }
            _ => {}
        }
    }
    walk(crd, false);
}

/// Installs the CRDs of `crds/` (as shipped, with fields newer than this server stripped) and
/// waits until they are established.
pub async fn install_crds(client: &Client) -> Result<(), String> {
    for crd in shipped_crds()? {
        apply_crd(client, crd).await?;
    }
    Ok(())
}

/// Applies one CRD (given as JSON, with fields newer than this server stripped) and waits until
/// it is established. Tests use it to install an older or changed version of a shipped CRD.
pub async fn apply_crd(client: &Client, mut crd: Value) -> Result<(), String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd["metadata"]["name"]
        .as_str()
        .ok_or("a CRD without metadata.name")?
        .to_string();
    strip_newer_crd_fields(&mut crd);
    crds.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&crd),
    )
    .await
    .map_err(|e| format!("installing CRD {name}: {e}"))?;
    tokio::time::timeout(
        Duration::from_secs(30),
        await_condition(crds.clone(), &name, conditions::is_crd_established()),
    )
    .await
    .map_err(|_| format!("CRD {name} not established within 30s"))?
    .map_err(|e| format!("waiting for CRD {name}: {e}"))?;
    Ok(())
}

/// The CRDs exactly as shipped in `crds/`, as JSON values.
pub fn shipped_crds() -> Result<Vec<Value>, String> {
    let dir = repo_root().join("crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("reading {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc).map_err(|e| format!("{}: {e}", file.display()))?;
            if value.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
                out.push(value);
            }
        }
    }
    Ok(out)
}

/// Server-side applies `object` (any namespaced kind the server serves, status included) into
/// `namespace` and returns it as stored. Server-owned metadata (`uid`, `resourceVersion`,
/// `generation`, timestamps) is dropped first: the server assigns it, so tests read it back.
pub async fn apply_object(
    client: &Client,
    namespace: &str,
    mut object: Value,
) -> Result<Value, String> {
    let api_version = object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind);
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discovering {kind}: {e}"))?;
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or_else(|| format!("a {kind} without metadata.name"))?
        .to_string();
    if let Some(meta) = object["metadata"].as_object_mut() {
        for owned in [
            "uid",
            "resourceVersion",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
        ] {
            meta.remove(owned);
        }
        meta.insert("namespace".into(), json!(namespace));
    }
    let status = object.as_object_mut().and_then(|o| o.remove("status"));
    let api: Api<kube::core::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &resource);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let mut applied = api
        .patch(&name, &params, &Patch::Apply(&object))
        .await
        .map_err(|e| format!("applying {kind} {namespace}/{name}: {e}"))?;
    if let Some(status) = status {
        let body = json!({"apiVersion": api_version, "kind": kind, "status": status});
        applied = api
            .patch_status(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(|e| format!("applying the status of {kind} {namespace}/{name}: {e}"))?;
    }
    serde_json::to_value(applied).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
