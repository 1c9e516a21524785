//! A real searx instance (Debian's `searx` package, SearXNG's predecessor with the same JSON API)
//! on 127.0.0.1, searching only an offline SQLite FTS5 index of HTML documentation trees
//! (by default Debian's Python and PostgreSQL docs; see [`crate::doc_trees`]), started and
//! stopped by the tests themselves.
//!
//! The index (built by `tests/tools/build_docs_index.py`, see `scripts/install-test-deps.sh`)
//! stores each page's URL path (below `/usr/share/doc` for the Debian trees); the docs server's
//! port is only known at run time, so the settings written here bake the docs base URL into the
//! engine's SQL (`'<base>/' || path AS url`). One index thus serves any port.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use crate::doc_trees::{DocTrees, DocTreesError};
use crate::docs_server::{DocsServer, DocsServerError};

/// Debian's interpreter: the one `python3-searx` is installed for (a pyenv `python3` may come
/// first on PATH and has no searx).
pub const SYSTEM_PYTHON: &str = "/usr/bin/python3";
/// Where Debian's `python3-searx` installs the package.
pub const SEARX_PACKAGE_DIR: &str = "/usr/lib/python3/dist-packages/searx";
/// Debian's location of searx's templates and static files (not inside the Python package).
pub const SEARX_SHARE_DIR: &str = "/usr/share/python3-searx";
/// Name of the searx engine (and the `engine` field of every result).
pub const ENGINE_NAME: &str = "docs";
/// Results per page; searx's sqlite engine appends `LIMIT <limit> OFFSET (pageno-1)*limit`.
pub const PAGE_SIZE: u32 = 10;
/// File name of the index of the default trees inside the work directory (other tree sets:
/// [`DocTrees::index_file_name`]).
pub const INDEX_FILE: &str = crate::doc_trees::DEFAULT_INDEX_FILE;
/// What to tell a person whose machine lacks the stack.
pub const INSTALL_HINT: &str = "run scripts/install-test-deps.sh";

/// Upper bound on searx's start-up (it loads in ~2 s here; a busy 2-core CI machine is slower).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of searx's stderr an error message carries.
const STDERR_TAIL_BYTES: u64 = 6000;
/// Attempts when the free port picked for searx was taken in between (searx binds it itself).
const PORT_ATTEMPTS: usize = 3;

/// Errors starting the local search stack.
#[derive(Debug, thiserror::Error)]
pub enum SearxError {
    /// A package or the index is not installed.
    #[error("{what} is missing: {INSTALL_HINT}")]
    Missing {
        /// What exactly is missing.
        what: String,
    },
    /// Preparing files or spawning the process failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// searx exited before it answered a search.
    #[error("searx exited before answering ({status}); its stderr:\n{stderr}")]
    Exited {
        /// Exit status as printed by the OS.
        status: String,
        /// Tail of searx's stderr.
        stderr: String,
    },
    /// searx kept running but never answered a JSON search in time.
    #[error(
        "searx at {base_url} did not answer /search?q=x&format=json within {waited:?} (last attempt: {last}); its stderr:\n{stderr}"
    )]
    NotReady {
        /// The instance's base URL.
        base_url: String,
        /// How long we waited.
        waited: Duration,
        /// What the last attempt saw.
        last: String,
        /// Tail of searx's stderr.
        stderr: String,
    },
    /// searx runs but its docs engine fails (unreadable index, bad SQL).
    #[error("searx's {ENGINE_NAME} engine fails: {detail}; searx's stderr:\n{stderr}")]
    EngineFailed {
        /// searx's `unresponsive_engines` entry.
        detail: String,
        /// Tail of searx's stderr (holds the Python traceback).
        stderr: String,
    },
    /// The docs server could not start.
    #[error("docs server: {0}")]
    Docs(#[from] DocsServerError),
    /// The configured list of documentation trees is unusable.
    #[error("{0}")]
    Trees(#[from] DocTreesError),
}

/// The index path used when none is given for the default trees (see [`index_path_for`]).
pub fn default_index_path() -> PathBuf {
    index_path_for(&DocTrees::default_trees())
}

/// The index path of `trees`: `$QUARRY_DOCS_INDEX`, else `$QUARRY_WORK_DIR/<name>`, else
/// `<repo>/.work/<name>` (what `scripts/install-test-deps.sh` writes), where `<name>` is
/// [`DocTrees::index_file_name`] (`docs-index.sqlite` for the default trees). Relative paths are
/// taken from the repository root.
pub fn index_path_for(trees: &DocTrees) -> PathBuf {
    let repo = repo_root();
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let name = trees.index_file_name();
    let path = from_env("QUARRY_DOCS_INDEX")
        .or_else(|| from_env("QUARRY_WORK_DIR").map(|dir| dir.join(&name)))
        .unwrap_or_else(|| PathBuf::from(".work").join(&name));
    if path.is_absolute() {
        path
    } else {
        repo.join(path)
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The index builder, `tests/tools/build_docs_index.py`.
pub fn index_builder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/build_docs_index.py")
}

/// Why the index at `index_path` is not a current index of `trees` (`None` when it is, or when
/// there is no index file to ask about: [`missing_dependencies`] reports that). The builder
/// answers (`--check`), so the rule lives in one place: same version, doc root and trees.
pub fn index_mismatch(index_path: &Path, trees: &DocTrees) -> Option<String> {
    if !index_path.is_file() || !Path::new(SYSTEM_PYTHON).is_file() {
        return None;
    }
    let output = Command::new(SYSTEM_PYTHON)
        .arg(index_builder())
        .arg("--check")
        .arg("--out")
        .arg(index_path)
        .args(trees.builder_args())
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "docs index {} for the trees {:?} ({}; build it with {}={} set)",
            index_path.display(),
            trees.url_paths(),
            String::from_utf8_lossy(&out.stdout).trim(),
            crate::doc_trees::DOC_TREES_ENV,
            trees.url_paths().join(":"),
        )),
        Err(e) => Some(format!(
            "a check of docs index {} ({SYSTEM_PYTHON} {}: {e})",
            index_path.display(),
            index_builder().display()
        )),
    }
}

/// What searx itself needs that is not on this machine (empty when all is there): Debian's
/// python3 and searx packages, and the index file.
pub fn missing_dependencies(index_path: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    if !Path::new(SYSTEM_PYTHON).is_file() {
        missing.push(format!("{SYSTEM_PYTHON} (Debian's python3)"));
    }
    if !Path::new(SEARX_PACKAGE_DIR).join("webapp.py").is_file()
        || !Path::new(SEARX_SHARE_DIR).join("templates").is_dir()
    {
        missing.push("Debian package searx".to_string());
    }
    if !index_path.is_file() {
        missing.push(format!("docs index {}", index_path.display()));
    }
    missing
}

/// Doc packages of the default trees that are not installed (empty when all are).
pub fn missing_doc_trees() -> Vec<String> {
    DocTrees::default_trees().missing()
}

/// Panics, naming what is missing and how to install it, when `missing` is not empty. Tests that
/// need the local search stack are `#[ignore = "needs searx ..."]`: they run only when asked for
/// (`scripts/test.sh` asks), and then a missing install is a failure, never a silent pass.
pub fn require_installed(test: &str, missing: &[String]) {
    if !missing.is_empty() {
        panic!(
            "{test}: the local search stack is not installed ({} missing); {INSTALL_HINT}",
            missing.join(", ")
        );
    }
}

/// The engine's SQL. searx binds the user's query as `:query` and appends
/// `LIMIT n OFFSET m`. The query is turned into an FTS5 expression of quoted terms joined by OR
/// (quoting makes FTS5 syntax characters in user text harmless; OR plus bm25 ranks pages
/// matching more and rarer terms first, as a web engine would, instead of dropping a page for one
/// missing word). Titles weigh 10 times body text; `content` is a short query-dependent snippet.
pub fn query_str(docs_base_url: &str) -> String {
    let base = docs_base_url.trim_end_matches('/').replace('\'', "''");
    format!(
        "SELECT '{base}/' || path AS url, title, \
         replace(snippet(docs, 2, '', '', '…', 32), char(10), ' ') AS content \
         FROM docs \
         WHERE docs MATCH '\"' || replace(replace(trim(:query), '\"', ' '), ' ', '\" OR \"') || '\"' \
         ORDER BY bm25(docs, 0.0, 10.0, 1.0)"
    )
}

/// A complete searx settings file (searx 1.x has no defaults file in Debian's package, so every
/// section webapp.py reads is present). It is JSON, which PyYAML reads as YAML, so no value
/// needs YAML quoting rules.
pub fn settings(port: u16, secret_key: &str, index_path: &Path, docs_base_url: &str) -> Value {
    json!({
        "use_default_settings": false,
        "general": {
            "debug": false,
            "instance_name": "quarry-test-searx",
            "contact_url": false,
            "enable_stats": false
        },
        "brand": {
            "git_url": "", "git_branch": "", "issue_url": "", "docs_url": "",
            "public_instances": "", "wiki_url": "", "twitter_url": ""
        },
        "search": {
            "safe_search": 0,
            // No autocomplete backend: it would call out to the internet.
            "autocomplete": "",
            "default_lang": "",
            // An engine error must not ban the only engine for the next queries of a test.
            "ban_time_on_fail": 0,
            "max_ban_time_on_fail": 0,
            "prefer_configured_language": false
        },
        "server": {
            "port": port,
            "bind_address": "127.0.0.1",
            "secret_key": secret_key,
            "base_url": false,
            "image_proxy": false,
            "http_protocol_version": "1.0",
            "method": "GET",
            "default_http_headers": {}
        },
        "ui": {
            "autofocus": false,
            "archive_today": false,
            "static_path": format!("{SEARX_SHARE_DIR}/static"),
            "templates_path": format!("{SEARX_SHARE_DIR}/templates"),
            "default_theme": "oscar",
            "default_locale": "",
            "theme_args": { "oscar_style": "logicodev" }
        },
        "outgoing": {
            "request_timeout": 5.0,
            "useragent_suffix": "",
            "pool_connections": 1,
            "pool_maxsize": 1
        },
        "enabled_plugins": [],
        "result_proxy": {},
        "locales": { "en": "English" },
        "doi_resolvers": { "doi.org": "https://doi.org/" },
        "default_doi_resolver": "doi.org",
        "engines": [{
            "name": ENGINE_NAME,
            "engine": "sqlite",
            "shortcut": ENGINE_NAME,
            "categories": "general",
            "database": index_path.to_string_lossy(),
            "query_str": query_str(docs_base_url),
            "result_template": "default.html",
            "limit": PAGE_SIZE,
            "timeout": 5.0,
            "disabled": false
        }]
    })
}

/// A running searx process; killed when dropped.
#[derive(Debug)]
pub struct SearxInstance {
    child: Child,
    base_url: String,
    stderr_path: PathBuf,
    // Holds settings.yml and the logs; removed after the process is gone (field order).
    _dir: tempfile::TempDir,
}

impl SearxInstance {
    /// Writes settings for an instance searching `index_path` whose results link under
    /// `docs_base_url`, starts `/usr/bin/python3 -m searx.webapp` on a free 127.0.0.1 port and
    /// waits (bounded) until a JSON search answers.
    pub async fn start(index_path: &Path, docs_base_url: &str) -> Result<Self, SearxError> {
        Self::start_with_engines(index_path, docs_base_url, Vec::new()).await
    }

    /// Like [`SearxInstance::start`], with `extra_engines` (searx engine settings objects) after
    /// the docs engine, e.g. a `json_engine` pointed at a test server that misbehaves.
    pub async fn start_with_engines(
        index_path: &Path,
        docs_base_url: &str,
        extra_engines: Vec<Value>,
    ) -> Result<Self, SearxError> {
        let missing = missing_dependencies(index_path);
        if !missing.is_empty() {
            return Err(SearxError::Missing {
                what: missing.join(", "),
            });
        }
        let index_path = index_path.canonicalize().map_err(|source| SearxError::Io {
            context: format!("resolving {}", index_path.display()),
            source,
        })?;
        let mut attempt = 1;
        loop {
            match Self::start_once(&index_path, docs_base_url, &extra_engines).await {
                Err(SearxError::Exited { stderr, .. })
                    if attempt < PORT_ATTEMPTS && stderr.contains("Address already in use") =>
                {
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn start_once(
        index_path: &Path,
        docs_base_url: &str,
        extra_engines: &[Value],
    ) -> Result<Self, SearxError> {
        let io = |context: String| move |source| SearxError::Io { context, source };
        let dir = tempfile::Builder::new()
            .prefix("quarry-searx-")
            .tempdir()
            .map_err(io("creating a temp dir for searx".into()))?;
        let port = free_port().map_err(io("finding a free port".into()))?;
        let secret: String = rand::rng()
            .sample_iter(rand::distr::Alphanumeric)
            .take(40)
            .map(char::from)
            .collect();
        let settings_path = dir.path().join("settings.yml");
        let mut settings = settings(port, &secret, index_path, docs_base_url);
        if let Some(engines) = settings["engines"].as_array_mut() {
            engines.extend(extra_engines.iter().cloned());
        }
        let text = serde_json::to_string_pretty(&settings).map_err(|e| SearxError::Io {
            context: "serialising settings".into(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(&settings_path, text)
            .map_err(io(format!("writing {}", settings_path.display())))?;
        let stderr_path = dir.path().join("searx.stderr");
        let stdout_path = dir.path().join("searx.stdout");
        let stderr = File::create(&stderr_path).map_err(io("creating searx.stderr".into()))?;
        let stdout = File::create(&stdout_path).map_err(io("creating searx.stdout".into()))?;
        let child = Command::new(SYSTEM_PYTHON)
            .args(["-m", "searx.webapp"])
            .current_dir(dir.path())
            .env("SEARX_SETTINGS_PATH", &settings_path)
            .env("SEARX_DEBUG", "0")
            .env("PYTHONNOUSERSITE", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // A pyenv or virtualenv environment must not leak into Debian's interpreter.
            .env_remove("PYTHONPATH")
            .env_remove("PYTHONHOME")
            .env_remove("PYTHONSTARTUP")
            .env_remove("VIRTUAL_ENV")
            .env_remove("SEARX_SECRET")
            .env_remove("SEARX_BIND_ADDRESS")
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(io(format!("spawning {SYSTEM_PYTHON} -m searx.webapp")))?;
        let mut instance = Self {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            stderr_path,
            _dir: dir,
        };
        instance.wait_ready().await?;
        Ok(instance)
    }

    async fn wait_ready(&mut self) -> Result<(), SearxError> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| SearxError::Io {
                context: "building an HTTP client".into(),
                source: std::io::Error::other(e),
            })?;
        // Only the docs engine: extra engines a test adds may fail on purpose, and a probe must
        // not trip (and suspend) them before the test looks.
        let url = format!(
            "{}/search?q=x&format=json&engines={ENGINE_NAME}",
            self.base_url
        );
        let started = Instant::now();
        let mut last: String;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(SearxError::Exited {
                    status: status.to_string(),
                    stderr: self.stderr_tail(),
                });
            }
            match client.get(&url).send().await {
                Ok(response) if response.status().is_success() => {
                    match response.json::<Value>().await {
                        Ok(body) if body.get("results").is_some_and(Value::is_array) => {
                            // An engine error still answers 200 with empty results; a stack
                            // that cannot search must not pass for one that found nothing.
                            return match body.get("unresponsive_engines") {
                                Some(Value::Array(failed)) if !failed.is_empty() => {
                                    Err(SearxError::EngineFailed {
                                        detail: Value::Array(failed.clone()).to_string(),
                                        stderr: self.stderr_tail(),
                                    })
                                }
                                _ => Ok(()),
                            };
                        }
                        Ok(body) => last = format!("JSON without results: {body}"),
                        Err(e) => last = format!("unreadable body: {e}"),
                    }
                }
                Ok(response) => last = format!("HTTP {}", response.status()),
                Err(e) => last = format!("request failed: {e}"),
            }
            if started.elapsed() >= READY_TIMEOUT {
                return Err(SearxError::NotReady {
                    base_url: self.base_url.clone(),
                    waited: started.elapsed(),
                    last,
                    stderr: self.stderr_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The OS process id of searx.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last few KiB of what searx wrote to stderr (its log), for failure messages.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr_path, STDERR_TAIL_BYTES)
    }
}

impl SearxInstance {
    /// Kills the process now (a test of searx going down); dropping it later is harmless.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for SearxInstance {
    fn drop(&mut self) {
        // Only this child is signalled, by its own handle; wait() reaps it so no zombie is left.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The docs server plus a searx instance whose results link into it.
#[derive(Debug)]
pub struct SearchStack {
    /// Serves `/usr/share/doc`.
    pub docs: DocsServer,
    /// Searches the docs index.
    pub searx: SearxInstance,
}

impl SearchStack {
    /// Starts both with the configured trees ([`DocTrees::from_env`]) and their index (see
    /// [`index_path_for`]).
    pub async fn start() -> Result<Self, SearxError> {
        Self::start_with_engines(Vec::new()).await
    }

    /// Starts both, with `extra_engines` configured in searx after the docs engine.
    pub async fn start_with_engines(extra_engines: Vec<Value>) -> Result<Self, SearxError> {
        Self::start_with_trees(&DocTrees::from_env()?, extra_engines).await
    }

    /// Starts both over `trees`: the docs server serves their doc root and mounts the trees
    /// outside it, and searx searches their index, which must be current (see [`index_mismatch`]).
    pub async fn start_with_trees(
        trees: &DocTrees,
        extra_engines: Vec<Value>,
    ) -> Result<Self, SearxError> {
        let index = index_path_for(trees);
        let mut missing = missing_dependencies(&index);
        missing.extend(trees.missing());
        if missing.is_empty() {
            missing.extend(index_mismatch(&index, trees));
        }
        if !missing.is_empty() {
            return Err(SearxError::Missing {
                what: missing.join(", "),
            });
        }
        let docs = DocsServer::start_with_trees(trees).await?;
        let searx =
            SearxInstance::start_with_engines(&index, &docs.base_url(), extra_engines).await?;
        Ok(Self { docs, searx })
    }

    /// For tests: starts the stack, or panics naming what is missing (see [`require_installed`]).
    pub async fn start_for(test: &str) -> Self {
        Self::start_with_engines_for(test, Vec::new()).await
    }

    /// [`SearchStack::start_for`] with extra searx engines.
    pub async fn start_with_engines_for(test: &str, extra_engines: Vec<Value>) -> Self {
        match Self::start_with_engines(extra_engines).await {
            Ok(stack) => stack,
            Err(SearxError::Missing { what }) => {
                require_installed(test, &[what]);
                unreachable!("require_installed panics on a missing dependency")
            }
            Err(e) => panic!("{test}: cannot start the local search stack: {e}"),
        }
    }
}

/// True when the `CI` environment variable is set to anything but empty, `0` or `false`.
pub fn running_in_ci() -> bool {
    std::env::var("CI")
        .map(|v| !matches!(v.trim().to_ascii_lowercase().as_str(), "" | "0" | "false"))
        .unwrap_or(false)
}

/// Asks the OS for a free port; the server binds it itself a moment later (searx: hence the
/// retry above).
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

fn tail(path: &Path, max: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return String::from("(no stderr captured)");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut bytes = Vec::new();
    let _ = file.take(max).read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
mod tests;
