//! `quarry worker` processes for the scale-out tests: started on 127.0.0.1 with their own health
//! and metrics port, stderr kept in a file, killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::quarry_bin::quarry_bin;
use crate::searx::free_port;

/// A running `quarry worker`.
pub struct WorkerProcess {
    child: Child,
    /// Its consumer name in the group.
    pub name: String,
    port: u16,
    stderr: PathBuf,
}

impl WorkerProcess {
    /// Starts a worker named `name` on `redis_url` with `args` added (e.g. `--concurrency 2`) and
    /// `env` set; its stderr goes to `<dir>/<name>.log`.
    pub fn start(
        dir: &Path,
        redis_url: &str,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> std::io::Result<Self> {
        let bin = quarry_bin().map_err(std::io::Error::other)?;
        Self::spawn(Command::new(bin), dir, redis_url, name, args, env)
    }

    /// As [`WorkerProcess::start`], with no way to reach a Kubernetes API: no `KUBECONFIG`, no
    /// in-cluster service variables, and a fresh `HOME` without `~/.kube` (as a worker Pod
    /// without a ServiceAccount token).
    pub fn start_without_cluster(
        dir: &Path,
        redis_url: &str,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> std::io::Result<Self> {
        let bin = quarry_bin().map_err(std::io::Error::other)?;
        let home = dir.join(format!("{name}-home"));
        std::fs::create_dir_all(&home)?;
        let mut command = Command::new(bin);
        command
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env("HOME", &home);
        Self::spawn(command, dir, redis_url, name, args, env)
    }

    fn spawn(
        command: Command,
        dir: &Path,
        redis_url: &str,
        name: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> std::io::Result<Self> {
        let port = free_port()?;
        let stderr = dir.join(format!("{name}.log"));
        let child = crate::quarry_bin::exempt_loopback(command)
            .args(["worker", "--redis-url", redis_url, "--consumer", name])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .env("QUARRY_LOG_LEVEL", "info,quarry=debug")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr)?)
            .spawn()?;
        Ok(Self {
            child,
            name: name.to_string(),
            port,
            stderr,
        })
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `GET /<path>` on its health and metrics port: status and body (None when it does not answer).
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let url = format!("http://127.0.0.1:{}/{path}", self.port);
        let response = reqwest::Client::new()
            .get(url)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// Waits (bounded) until `/readyz` answers 200.
    pub async fn wait_ready(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if matches!(self.get("readyz").await, Some((200, _))) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// SIGKILL: the process dies mid-whatever, as on an OOM kill or a lost node.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits (bounded) for the exit; the exit status, if it exited.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The value of an unlabelled metric (or of the first series of the name) in an OpenMetrics body.
pub fn metric(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
