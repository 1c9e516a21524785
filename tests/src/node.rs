//! A real one-node cluster for the installation tests: `../shared/k8s/node/node.sh` (etcd,
//! kube-apiserver, controller-manager, scheduler, kubelet with containerd + runc, CNI bridge,
//! kube-proxy), the images built by `scripts/build-images.sh` (Quarry around this workspace's
//! binary, and Debian's searx behind SearXNG's interface) and imported into containerd, cluster
//! DNS (dnsmasq on the node address, answering `<svc>.<ns>.svc.cluster.local` from a hosts file
//! this harness rewrites from the Services every second), and the README's install commands.
//!
//! The node is one per machine (fixed addresses and ports), so its tests run one at a time (the
//! `kube_` test group) and each brings it up and down. Components: root, containerd, runc, the
//! CNI plugins, iptables, conntrack, debootstrap, buildah and dnsmasq (`scripts/install-node-deps.sh`),
//! etcd and kubectl/helm (`scripts/install-test-deps.sh`). Without them the tests are skipped:
//! they are `#[ignore = "needs a node ..."]` and `scripts/test.sh` leaves them out only when
//! [`unavailable`] says why.

use std::net::{Ipv4Addr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::control_plane::{client_for, etcd_bin};
use crate::kube_tools::{repo_root, tool};

/// The reason string node tests are ignored with.
pub const NEEDS: &str =
    "needs a node (root, containerd: scripts/install-node-deps.sh, QUARRY_NODE_SH)";

/// The node's address: the kubelet points pods' DNS here, and pods reach host processes on it.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 255, 254);

/// `node.sh`: `QUARRY_NODE_SH`, else the shared one beside this repository.
pub fn node_script() -> PathBuf {
    std::env::var_os("QUARRY_NODE_SH")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/k8s/node/node.sh"))
}

fn on_path(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
        || ["/usr/sbin", "/sbin"]
            .iter()
            .any(|dir| Path::new(dir).join(name).is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Why this machine cannot start the node, or `None` when it can. `scripts/test.sh` asks the same
/// questions (root, node.sh, the commands) to decide whether the node suite runs.
pub fn unavailable() -> Option<String> {
    if !is_root() {
        return Some("not root (the node's kubelet and containerd need it)".into());
    }
    if !node_script().is_file() {
        return Some(format!("no {}", node_script().display()));
    }
    let missing: Vec<&str> = [
        "containerd",
        "runc",
        "ctr",
        "iptables",
        "conntrack",
        "debootstrap",
        "buildah",
        "dnsmasq",
    ]
    .into_iter()
    .filter(|c| !on_path(c))
    .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "missing {} (scripts/install-node-deps.sh installs them)",
            missing.join(", ")
        )
    })
}

/// The project work directory (`QUARRY_WORK_DIR`, default `<repo>/.work`).
fn work_dir() -> PathBuf {
    let work = PathBuf::from(std::env::var("QUARRY_WORK_DIR").unwrap_or_else(|_| ".work".into()));
    if work.is_absolute() {
        work
    } else {
        repo_root().join(work)
    }
}

/// An image `scripts/build-images.sh` built (or found in its cache): its name and the OCI
/// archive to import.
#[derive(Debug, Clone)]
pub struct Image {
    /// `localhost/<name>:<hash of the inputs>`.
    pub name: String,
    /// The OCI archive in the image cache.
    pub archive: PathBuf,
}

/// The images of the node tests.
#[derive(Debug, Clone)]
pub struct Images {
    /// Quarry: the Dockerfile's `prebuilt` target around this workspace's `quarry`.
    pub quarry: Image,
    /// The search engine: Debian's searx behind SearXNG's interface (tests/images/searx).
    pub searx: Image,
    /// Redis for the workers: Debian's redis-server (tests/images/redis).
    pub redis: Image,
}

impl Image {
    /// The repository part of the name (before the tag).
    pub fn repository(&self) -> &str {
        self.name.rsplit_once(':').map_or(&self.name, |(r, _)| r)
    }

    /// The tag part of the name.
    pub fn tag(&self) -> &str {
        self.name.rsplit_once(':').map_or("", |(_, t)| t)
    }
}

/// Runs `scripts/build-images.sh` with this workspace's `quarry` (built by cargo when needed, as
/// for every test that runs the binary), so the image holds the code under test and takes
/// seconds to make (a cache hit, under a second).
pub fn build_images() -> Result<Images, String> {
    let started = std::time::Instant::now();
    let binary = crate::quarry_bin::quarry_bin()?;
    let out = Command::new(repo_root().join("scripts/build-images.sh"))
        .env("QUARRY_BINARY", &binary)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("running scripts/build-images.sh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("scripts/build-images.sh failed: {text}"));
    }
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
            .ok_or_else(|| format!("scripts/build-images.sh printed no {key}=: {text}"))
    };
    let images = Images {
        quarry: Image {
            name: field("image")?,
            archive: PathBuf::from(field("archive")?),
        },
        searx: Image {
            name: field("searx_image")?,
            archive: PathBuf::from(field("searx_archive")?),
        },
        redis: Image {
            name: field("redis_image")?,
            archive: PathBuf::from(field("redis_archive")?),
        },
    };
    eprintln!(
        "images {} and {} ready in {:?}",
        images.quarry.name,
        images.searx.name,
        started.elapsed()
    );
    Ok(images)
}

/// A running node with cluster DNS; stopped (`node.sh down`) when dropped.
pub struct Node {
    dir: PathBuf,
    kubeconfig: PathBuf,
    client: Client,
    dns: Child,
    dns_sync: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node").field("dir", &self.dir).finish()
    }
}

/// PATH with the project's kubectl/helm first (node.sh waits for the node with kubectl).
fn tool_path() -> String {
    let kube_tools = tool("kubectl")
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    format!(
        "{}:{}",
        kube_tools.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

impl Node {
    /// `node.sh up` in `<work dir>/node`, then dnsmasq on the node address. An error carries the
    /// script's output.
    pub async fn up() -> Result<Node, String> {
        if let Some(why) = unavailable() {
            return Err(format!("the node cannot start here: {why}"));
        }
        let dir = work_dir().join("node");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // The physical path: `node.sh down` unmounts what /proc/mounts lists under DIR, and a
        // worktree's `.work` is a symlink (its pods' mounts were left behind under the link's path).
        let dir = std::fs::canonicalize(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // node.sh adds the node address to lo unless `ip addr show dev lo | grep -q` finds it;
        // under its `pipefail` grep's early exit can fail that check while the address is there,
        // and `ip addr add` then stops the script ("Address already assigned"). Seen on the second
        // `up` of a machine: removing the address first leaves only the path that works.
        let _ = Command::new("ip")
            .args(["addr", "del", &format!("{NODE_IP}/32"), "dev", "lo"])
            .stderr(Stdio::null())
            .status();
        let started = std::time::Instant::now();
        let out = Command::new(node_script())
            .args(["up", &dir.to_string_lossy()])
            .env("ETCD_BIN", etcd_bin()?)
            .env("PATH", tool_path())
            .output()
            .map_err(|e| format!("running node.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "node.sh up failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        eprintln!("node Ready in {:?}", started.elapsed());
        // Until the Node exists (its Drop stops the cluster), a failure stops it here.
        let kubeconfig = v3_admin_kubeconfig(&dir).inspect_err(|_| down(&dir))?;
        let client = client_for(&kubeconfig).await.inspect_err(|_| down(&dir))?;
        let (dns, dns_sync) = start_dns(&dir, client.clone()).inspect_err(|_| down(&dir))?;
        let node = Node {
            dir,
            kubeconfig,
            client,
            dns,
            dns_sync,
        };
        // The `kubernetes` Service is there from the start: once it resolves, DNS serves.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match resolve("kubernetes.default.svc.cluster.local") {
                Ok(Some(_)) => break,
                other if std::time::Instant::now() > deadline => {
                    return Err(format!(
                        "cluster DNS does not answer: {other:?}; dnsmasq: {}",
                        crate::kube_operator::tail(&node.dir.join("logs/dns.log"))
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
        Ok(node)
    }

    /// A cluster-admin client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The node's state directory (logs under `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Imports an OCI archive into containerd's `k8s.io` namespace (what the kubelet runs from).
    pub fn import(&self, archive: &Path) -> Result<(), String> {
        let sock = self.dir.join("containerd/containerd.sock");
        let out = Command::new("ctr")
            .arg("--address")
            .arg(&sock)
            .args(["-n", "k8s.io", "images", "import"])
            .arg(archive)
            .output()
            .map_err(|e| format!("running ctr: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "ctr images import {}: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Runs helm or kubectl against the node: (success, stdout, stderr).
    pub fn run(&self, name: &str, args: &[&str]) -> (bool, String, String) {
        let mut all = vec!["--kubeconfig", self.kubeconfig.to_str().unwrap_or_default()];
        all.extend_from_slice(args);
        crate::kube_tools::run(&tool(name), &all)
    }

    /// What to print when a wait fails: pods, events and the node's component logs.
    pub fn diagnostics(&self, namespace: &str) -> String {
        let (_, pods, _) = self.run("kubectl", &["-n", namespace, "get", "pods", "-o", "wide"]);
        let (_, describe, _) = self.run("kubectl", &["-n", namespace, "describe", "pods"]);
        let (_, events, _) = self.run(
            "kubectl",
            &["-n", namespace, "get", "events", "--sort-by=.lastTimestamp"],
        );
        let (_, logs, _) = self.run(
            "kubectl",
            &[
                "-n",
                namespace,
                "logs",
                "--all-containers",
                "--prefix",
                "-l",
                "app.kubernetes.io/name",
                "--tail=40",
            ],
        );
        format!(
            "pods:\n{pods}\ndescribe:\n{describe}\nevents:\n{events}\nlogs:\n{logs}\nkubelet:\n{}",
            crate::kube_operator::tail(&self.dir.join("logs/kubelet.log"))
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.dns_sync.abort();
        let _ = self.dns.kill();
        let _ = self.dns.wait();
        down(&self.dir);
    }
}

/// `node.sh down DIR`: stops every process of the node.
fn down(dir: &Path) {
    let _ = Command::new(node_script())
        .args(["down", &dir.to_string_lossy()])
        .env("PATH", tool_path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// node.sh's admin certificate is X.509 v1 (`openssl x509 -req` without extensions), which rustls,
/// kube's TLS stack, refuses ("UnsupportedCertVersion"; kubectl and helm accept it). A v3 client
/// certificate for the same identity, signed by the node's CA, in `admin-v3.kubeconfig`.
fn v3_admin_kubeconfig(dir: &Path) -> Result<PathBuf, String> {
    let pki = dir.join("pki");
    std::fs::write(
        pki.join("admin-v3.ext"),
        "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n",
    )
    .map_err(|e| e.to_string())?;
    for args in [
        "req -newkey rsa:2048 -nodes -keyout admin-v3.key -out admin-v3.csr -subj /CN=admin/O=system:masters",
        "x509 -req -in admin-v3.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin-v3.crt -days 3650 -extfile admin-v3.ext",
    ] {
        let out = Command::new("openssl")
            .args(args.split(' '))
            .current_dir(&pki)
            .output()
            .map_err(|e| format!("running openssl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "openssl {args}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    let original = dir.join("admin.kubeconfig");
    let text =
        std::fs::read_to_string(&original).map_err(|e| format!("{}: {e}", original.display()))?;
    let path = dir.join("admin-v3.kubeconfig");
    std::fs::write(&path, text.replace("/pki/admin.", "/pki/admin-v3."))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The hosts file of the Services: `<clusterIP> <svc>.<ns>.svc.cluster.local <svc>.<ns>.svc`.
pub fn hosts_file(services: &[Service]) -> String {
    let mut lines: Vec<String> = services
        .iter()
        .filter_map(|svc| {
            let name = svc.metadata.name.as_deref()?;
            let ns = svc.metadata.namespace.as_deref()?;
            let ip = svc.spec.as_ref()?.cluster_ip.as_deref()?;
            (ip != "None" && !ip.is_empty())
                .then(|| format!("{ip} {name}.{ns}.svc.cluster.local {name}.{ns}.svc"))
        })
        .collect();
    lines.sort();
    lines.join("\n") + "\n"
}

/// dnsmasq on NODE_IP:53 with only the Services' names (no upstream: pods have no route out),
/// and the task keeping its hosts directory current (dnsmasq rereads it on inotify).
fn start_dns(dir: &Path, client: Client) -> Result<(Child, tokio::task::JoinHandle<()>), String> {
    let hosts = dir.join("dns-hosts");
    std::fs::create_dir_all(&hosts).map_err(|e| format!("{}: {e}", hosts.display()))?;
    // A dnsmasq an earlier, killed test left holding the port.
    let pid_file = dir.join("dns.pid");
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = Command::new("kill")
            .arg(pid.trim())
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(300));
    }
    let log = std::fs::File::create(dir.join("logs/dns.log")).map_err(|e| e.to_string())?;
    let child = Command::new("dnsmasq")
        .args([
            "--keep-in-foreground",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            &format!("--listen-address={NODE_IP}"),
            "--port=53",
            "--local=/cluster.local/",
            "--user=root",
            "--log-facility=-",
        ])
        .arg(format!("--hostsdir={}", hosts.display()))
        .arg(format!("--pid-file={}", pid_file.display()))
        .stdout(log.try_clone().map_err(|e| e.to_string())?)
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting dnsmasq: {e}"))?;
    let target = hosts.join("services");
    let staging = dir.join("dns-hosts.tmp");
    let sync = tokio::spawn(async move {
        let services: Api<Service> = Api::all(client);
        let mut last = String::new();
        loop {
            if let Ok(list) = services.list(&ListParams::default()).await {
                let text = hosts_file(&list.items);
                // Written aside and renamed in, so dnsmasq never reads half a file.
                if text != last
                    && std::fs::write(&staging, &text).is_ok()
                    && std::fs::rename(&staging, &target).is_ok()
                {
                    last = text;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    Ok((child, sync))
}

/// Asks the node's DNS server for `name`'s A record (one UDP query, 2 s timeout): the address,
/// `None` for NXDOMAIN or no answer record.
pub fn resolve(name: &str) -> Result<Option<Ipv4Addr>, String> {
    let mut query = vec![0x51, 0x52, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.trim_end_matches('.').split('.') {
        query.push(label.len() as u8);
        query.extend_from_slice(label.as_bytes());
    }
    query.extend_from_slice(&[0, 0, 1, 0, 1]);
    let socket = UdpSocket::bind("0.0.0.0:0").map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    socket
        .send_to(&query, (NODE_IP, 53))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).map_err(|e| e.to_string())?;
    let answer = &buf[..n];
    if n < 12 || answer[0..2] != [0x51, 0x52] {
        return Err(format!("malformed reply: {answer:?}"));
    }
    let rcode = answer[3] & 0x0f;
    let answers = u16::from_be_bytes([answer[6], answer[7]]);
    if rcode != 0 || answers == 0 {
        return Ok(None);
    }
    // The first answer of an A query: its last 4 bytes are the address (one name, one record).
    Ok(Some(Ipv4Addr::new(
        answer[n - 4],
        answer[n - 3],
        answer[n - 2],
        answer[n - 1],
    )))
}

/// The commands of the README's "Install on a cluster" section, as a user copies them: every
/// line of its `sh` blocks, continuations joined, comments dropped, split into words (double
/// quotes grouped). The node tests run these, so the README cannot drift from what works.
pub fn readme_install_commands() -> Result<Vec<Vec<String>>, String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md"))
        .map_err(|e| format!("README.md: {e}"))?;
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Install on a cluster"))
        .ok_or("README.md has no \"## Install on a cluster\" section")?;
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut current = String::new();
    for line in section.lines() {
        if line.starts_with("```") {
            in_block = !in_block && line.trim() == "```sh";
            continue;
        }
        if !in_block {
            continue;
        }
        // A ` #` outside quotes starts a comment (the README's commands quote no `#`).
        let code = line.split(" #").next().unwrap_or_default().trim_end();
        match code.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(code);
                let words = shell_words(&current);
                if !words.is_empty() {
                    commands.push(words);
                }
                current.clear();
            }
        }
    }
    Ok(commands)
}

/// Splits a command line into words: whitespace separates, double quotes group (and go).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// The README command whose first words are `prefix` (e.g. `["helm", "install"]`).
pub fn readme_command(commands: &[Vec<String>], prefix: &[&str]) -> Result<Vec<String>, String> {
    commands
        .iter()
        .find(|c| c.len() >= prefix.len() && c.iter().zip(prefix).all(|(w, p)| w == p))
        .cloned()
        .ok_or_else(|| {
            format!(
                "the README's install section has no `{}` command",
                prefix.join(" ")
            )
        })
}

#[cfg(test)]
mod tests;
