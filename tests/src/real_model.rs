//! The real local model for end-to-end tests: Qwen2.5-Coder-0.5B-Instruct served OpenAI-compatibly by
//! `tools/llm-server/server.mjs` (node-llama-cpp), started as a child process on a free 127.0.0.1 port.
//!
//! Install it first with `scripts/install-real-model.sh`. Paths follow the install script: the model
//! in `$QUARRY_MODEL_DIR` (default `<repo>/.work/model`), node-llama-cpp in `$QUARRY_LLM_SERVER_DIR`
//! (default `<repo>/.work/llm-server`).

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// File name of the GGUF model the install script produces.
pub const MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// Name the server reports for the model (`GET /v1/models`, `model` in responses).
pub const MODEL_NAME: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m";

/// File name of the larger model (`QUARRY_REAL_MODEL_VARIANT=1.5b` in the install script).
pub const MODEL_FILE_1_5B: &str = "qwen2.5-coder-1.5b-instruct.gguf";

/// Name the server reports for the larger model.
pub const MODEL_NAME_1_5B: &str = "qwen2.5-coder-1.5b-instruct";

/// Default wait for the model to load; a 2-core machine under load needs tens of seconds.
const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(180);

/// Lines of server stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 40;

/// Why the real model server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum RealModelError {
    /// A file the server needs is missing: the install script has not run (or ran elsewhere).
    #[error("{what} not found at {path}; run scripts/install-real-model.sh")]
    NotInstalled {
        /// What is missing (the model, node-llama-cpp, the server script).
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// `node` could not be spawned.
    #[error("could not start `{node}` for the model server: {source}")]
    Spawn {
        /// The node executable that was tried.
        node: String,
        /// The spawn error.
        source: std::io::Error,
    },
    /// The server process ended before it became healthy.
    #[error("model server exited with {status} before becoming healthy; stderr:\n{stderr}")]
    Exited {
        /// Exit status as printed by the OS.
        status: String,
        /// Last lines of the server's stderr.
        stderr: String,
    },
    /// The server did not report its port or become healthy in time.
    #[error("model server not healthy after {waited:?} ({stage}); stderr:\n{stderr}")]
    Timeout {
        /// How long we waited.
        waited: Duration,
        /// What we were waiting for.
        stage: &'static str,
        /// Last lines of the server's stderr.
        stderr: String,
    },
    /// The HTTP client for health checks could not be built.
    #[error("building the health-check HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Where the server, the model and node-llama-cpp live, and how long to wait for the model to load.
#[derive(Debug, Clone)]
pub struct RealModelConfig {
    /// The `.gguf` model file.
    pub model_path: PathBuf,
    /// Directory whose `node_modules` holds node-llama-cpp.
    pub modules_dir: PathBuf,
    /// `tools/llm-server/server.mjs`.
    pub server_script: PathBuf,
    /// The `node` executable.
    pub node: String,
    /// How long to wait for `/health` to answer 200.
    pub start_timeout: Duration,
}

impl RealModelConfig {
    /// The defaults of `scripts/install-real-model.sh`, honouring `QUARRY_MODEL_DIR`,
    /// `QUARRY_LLM_SERVER_DIR`, `QUARRY_NODE` and `QUARRY_REAL_MODEL_START_TIMEOUT` (seconds).
    pub fn from_env() -> Self {
        Self::from_env_for(MODEL_FILE)
    }

    /// [`RealModelConfig::from_env`] for another model file in the same directory.
    pub fn from_env_for(model_file: &str) -> Self {
        let root = repo_root();
        let model_dir = std::env::var_os("QUARRY_MODEL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".work").join("model"));
        let modules_dir = std::env::var_os("QUARRY_LLM_SERVER_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".work").join("llm-server"));
        let start_timeout = std::env::var("QUARRY_REAL_MODEL_START_TIMEOUT")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_START_TIMEOUT);
        Self {
            model_path: model_dir.join(model_file),
            modules_dir,
            server_script: root.join("tools").join("llm-server").join("server.mjs"),
            node: std::env::var("QUARRY_NODE").unwrap_or_else(|_| "node".to_owned()),
            start_timeout,
        }
    }

    /// Checks that the model, node-llama-cpp and the server script are where they should be.
    pub fn check_installed(&self) -> Result<(), RealModelError> {
        let checks: [(&'static str, PathBuf); 3] = [
            ("the model file", self.model_path.clone()),
            (
                "node-llama-cpp",
                self.modules_dir.join("node_modules").join("node-llama-cpp"),
            ),
            ("the server script", self.server_script.clone()),
        ];
        for (what, path) in checks {
            if !path.exists() {
                return Err(RealModelError::NotInstalled { what, path });
            }
        }
        Ok(())
    }
}

/// The repository root (the parent of this crate's manifest directory).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// A running model server; the child process is killed when this is dropped.
#[derive(Debug)]
pub struct RealModel {
    child: Child,
    port: u16,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl RealModel {
    /// Starts the server with [`RealModelConfig::from_env`].
    pub async fn start() -> Result<Self, RealModelError> {
        Self::start_with(RealModelConfig::from_env()).await
    }

    /// Starts the server on a free 127.0.0.1 port and waits until `/health` answers 200.
    pub async fn start_with(cfg: RealModelConfig) -> Result<Self, RealModelError> {
        cfg.check_installed()?;
        let mut child = Command::new(&cfg.node)
            .arg(&cfg.server_script)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .arg("--model")
            .arg(&cfg.model_path)
            .arg("--modules")
            .arg(&cfg.modules_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| RealModelError::Spawn {
                node: cfg.node.clone(),
                source,
            })?;

        // Drain both pipes on threads so the server never blocks on a full pipe.
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_LINES)));
        if let Some(pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == STDERR_TAIL_LINES {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            });
        }
        let (port_tx, port_rx) = mpsc::channel::<u16>();
        if let Some(pipe) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    if let Some(port) = parse_listening_port(&line) {
                        // The receiver may be gone after a timeout; nothing to do then.
                        let _ = port_tx.send(port);
                    }
                }
            });
        }

        // From here on, dropping `server` kills the child on every error path.
        let mut server = RealModel {
            child,
            port: 0,
            stderr,
        };
        let started = Instant::now();
        let deadline = started + cfg.start_timeout;

        server.port = loop {
            server.check_alive()?;
            if let Ok(port) = port_rx.try_recv() {
                break port;
            }
            if Instant::now() >= deadline {
                return Err(server.timeout(started, "waiting for the listening line"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };

        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?;
        let health = format!("{}/health", server.root_url());
        loop {
            server.check_alive()?;
            let healthy = match client.get(&health).send().await {
                Ok(resp) => resp.status().is_success(),
                Err(_) => false,
            };
            if healthy {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                return Err(server.timeout(started, "waiting for /health while the model loads"));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// OpenAI base URL, ending in `/v1` (so requests go to `{base_url}/chat/completions`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.root_url())
    }

    /// `http://127.0.0.1:PORT`, where `/health` lives.
    pub fn root_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The last lines the server wrote to stderr (it logs one line per completion).
    pub fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    fn check_alive(&mut self) -> Result<(), RealModelError> {
        match self.child.try_wait() {
            Ok(Some(status)) => {
                // Give the stderr thread a moment to collect the final message.
                std::thread::sleep(Duration::from_millis(100));
                Err(RealModelError::Exited {
                    status: status.to_string(),
                    stderr: self.stderr_tail(),
                })
            }
            Ok(None) | Err(_) => Ok(()),
        }
    }

    fn timeout(&self, started: Instant, stage: &'static str) -> RealModelError {
        RealModelError::Timeout {
            waited: started.elapsed(),
            stage,
            stderr: self.stderr_tail(),
        }
    }
}

impl Drop for RealModel {
    fn drop(&mut self) {
        // Already exited is fine; otherwise kill and reap so no zombie or orphan is left.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// Port from the server's `quarry-llm-server listening on http://HOST:PORT` line.
fn parse_listening_port(line: &str) -> Option<u16> {
    let rest = line.strip_prefix("quarry-llm-server listening on http://")?;
    rest.rsplit_once(':')?.1.trim().parse().ok()
}

#[cfg(test)]
mod tests;
