//! `quarry mcp`: a Model Context Protocol server on stdin/stdout, so coding agents can use Quarry
//! as a research tool.
//!
//! Tools:
//! - `research`: runs standalone (a `quarry run --output json` child process) when the server
//!   was given a profile file, else creates a ResearchRun in the kube context's namespace; with
//!   `wait` it returns the report cut to the tool-output bound (50 KB / 2000 lines, head kept) and where
//!   the full report is;
//! - `get_report`: a finished run's report, same cut;
//! - `list_runs`: the namespace's runs and this server's standalone runs.
//!
//! Failures are tool errors (`isError`) whose text says what to do, so the agent can act on them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, watch};

use super::CliError;
use super::cluster::{self, Cluster, KubeArgs};
use super::runs;
use super::table;
use crate::config::Settings;
use quarry_api::run::{DEFAULT_PROFILE, MAX_QUERY_CHARS, MIN_QUERY_CHARS};
use quarry_api::values::parse_duration;
use quarry_api::{Mode, Output, Phase, ResearchRun, ResearchRunSpec};
use quarry_engine::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head};
use quarry_engine::store::ArtifactStore;

mod tools;
pub use tools::{
    GET_REPORT_TOOL, LIST_RUNS_TOOL, LIST_SCHEDULES_TOOL, RESEARCH_TOOL, input_schema, report_text,
    tools,
};
use tools::{GetReportInput, ListRunsInput, ListSchedulesInput, ResearchInput};

mod outcome;
pub use outcome::fetch_cluster_report;
use outcome::{Progress, cluster_outcome, follow_child, local_outcome, parse_args};

/// Flags of `quarry mcp`.
#[derive(clap::Args, Debug, Clone)]
pub struct McpArgs {
    /// ResearchProfile manifest (YAML) for standalone research (also QUARRY_PROFILE). Without
    /// one, `research` creates ResearchRuns on the cluster of the current kube context.
    #[arg(long)]
    pub profile: Option<String>,
    /// ResearchProfile on the cluster that new ResearchRuns use.
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub cluster_profile: String,
    /// Longest a `research` call with `wait` blocks before it returns; the run goes on.
    #[arg(long, default_value = "30m")]
    pub wait_timeout: String,
    /// Directory for standalone reports (default: chosen like `quarry run` does).
    #[arg(long)]
    pub reports_dir: Option<PathBuf>,
    #[command(flatten)]
    pub kube: KubeArgs,
}

// Tool arguments. The schemas agents see come from these types: one-line docs, plain enums,
// optional fields that are simply not required (no `null` alternatives).

/// Pure: the ResearchRun the `research` tool creates on a cluster.
fn cluster_run(
    input: &ResearchInput,
    default_mode: Mode,
    profile: &str,
) -> Result<ResearchRun, String> {
    let query = input.query.trim();
    let chars = query.chars().count();
    if chars < MIN_QUERY_CHARS as usize || chars > MAX_QUERY_CHARS as usize {
        return Err(format!(
            "the query must be {MIN_QUERY_CHARS} to {MAX_QUERY_CHARS} characters, not {chars}"
        ));
    }
    let mut spec: ResearchRunSpec =
        serde_json::from_value(serde_json::json!({ "query": query })).map_err(|e| e.to_string())?;
    spec.mode = input.mode(default_mode);
    let outputs = input.outputs();
    if !outputs.is_empty() {
        spec.outputs = outputs;
    }
    spec.profile_ref = profile.to_string();
    let mut run = ResearchRun::new("", spec);
    run.metadata.name = None;
    run.metadata.generate_name = Some(runs::generated_prefix(query));
    Ok(run)
}

/// What a standalone child run has reported so far.
#[derive(Debug, Clone, Default)]
struct LocalState {
    /// Phase from the last event line.
    phase: String,
    /// Progress from the last event line.
    progress: String,
    /// The `run_end` line, once seen.
    end: Option<serde_json::Value>,
    /// Why the child ended without a `run_end` line.
    crashed: Option<String>,
}

impl LocalState {
    fn done(&self) -> bool {
        self.end.is_some() || self.crashed.is_some()
    }
}

/// A standalone run started by this server.
#[derive(Debug, Clone)]
struct LocalRun {
    query: String,
    report: PathBuf,
    state: watch::Receiver<LocalState>,
}

/// What a standalone child run is started with.
struct StandaloneRun<'a> {
    query: &'a str,
    profile: &'a Path,
    mode: &'a str,
    report: &'a Path,
    outputs: &'a [&'a str],
    egress_exempt_hosts: &'a [String],
}

/// Pure: the arguments of the `quarry run` child, with this server's egress exemption passed on
/// as a flag (the child's own settings see only the environment it inherits).
fn standalone_run_args(run: &StandaloneRun<'_>) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec![
        "run".into(),
        run.query.into(),
        "--profile".into(),
        run.profile.into(),
        "--mode".into(),
        run.mode.into(),
        "--output".into(),
        "json".into(),
        "--out".into(),
        run.report.into(),
    ];
    if !run.outputs.is_empty() {
        args.push("--outputs".into());
        args.push(run.outputs.join(",").into());
    }
    if !run.egress_exempt_hosts.is_empty() {
        args.push("--egress-exempt-hosts".into());
        args.push(run.egress_exempt_hosts.join(",").into());
    }
    args
}

/// The MCP server.
#[derive(Clone)]
pub struct QuarryMcp {
    inner: Arc<Inner>,
}

struct Inner {
    profile: Option<PathBuf>,
    default_mode: Mode,
    cluster_profile: String,
    kube: KubeArgs,
    wait_timeout: Duration,
    wait_text: String,
    reports_dir: Option<PathBuf>,
    exe: PathBuf,
    /// The operator-level egress exemption of this server (flag, environment or file), handed
    /// to every child run: a child re-reads only the environment and its own flags.
    egress_exempt_hosts: Vec<String>,
    local: Mutex<BTreeMap<String, LocalRun>>,
}

/// A tool failure: text the agent can act on.
type ToolResult = Result<String, String>;

impl QuarryMcp {
    /// A server from the command's flags and the layered settings (profile, mode).
    pub fn new(args: McpArgs, settings: &Settings) -> Result<Self, CliError> {
        let wait_timeout = parse_duration(&args.wait_timeout)
            .map_err(|e| CliError::Usage(format!("--wait-timeout: {e}")))?;
        let exe = std::env::current_exe()
            .map_err(|e| CliError::Usage(format!("cannot locate the quarry binary: {e}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                profile: settings.profile.clone(),
                default_mode: match settings.mode {
                    quarry_engine::research::machine::state::Mode::Quick => Mode::Quick,
                    quarry_engine::research::machine::state::Mode::Deep => Mode::Deep,
                },
                cluster_profile: args.cluster_profile,
                kube: args.kube,
                wait_timeout,
                wait_text: args.wait_timeout,
                reports_dir: args.reports_dir,
                exe,
                egress_exempt_hosts: settings.egress_exempt_hosts.clone(),
                local: Mutex::new(BTreeMap::new()),
            }),
        })
    }

    fn local(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, LocalRun>> {
        self.inner.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn reports_dir(&self) -> PathBuf {
        self.inner.reports_dir.clone().unwrap_or_else(|| {
            let cwd = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
            let home = std::env::var_os("HOME").map(PathBuf::from);
            crate::standalone::report_dir(&cwd, home.as_deref(), &std::env::temp_dir())
        })
    }

    async fn cluster(&self, namespace: Option<&str>) -> Result<Cluster, String> {
        let mut args = self.inner.kube.clone();
        if let Some(ns) = namespace {
            args.namespace = Some(ns.to_string());
        }
        cluster::connect(&args).await.map_err(|e| match e {
            CliError::NoCluster { .. } if self.inner.profile.is_none() => format!(
                "{e}\n  Or start quarry mcp with --profile PROFILE.yaml (or QUARRY_PROFILE) to research without a cluster."
            ),
            e => e.to_string(),
        })
    }

    async fn research(&self, input: ResearchInput, ctx: &RequestContext<RoleServer>) -> ToolResult {
        let progress = Progress::new(ctx);
        match self.inner.profile.clone() {
            Some(profile) => self.research_standalone(&profile, input, progress).await,
            None => self.research_on_cluster(input, progress).await,
        }
    }

    /// Standalone research: a `quarry run --output json` child, its lines read as progress.
    async fn research_standalone(
        &self,
        profile: &Path,
        input: ResearchInput,
        progress: Progress,
    ) -> ToolResult {
        let query = input.query.trim().to_string();
        let chars = query.chars().count();
        if chars < MIN_QUERY_CHARS as usize || chars > MAX_QUERY_CHARS as usize {
            return Err(format!(
                "the query must be {MIN_QUERY_CHARS} to {MAX_QUERY_CHARS} characters, not {chars}"
            ));
        }
        let dir = self.reports_dir();
        // The report's name is reserved now, so a call that does not wait can say where it goes.
        let (report, _) = crate::standalone::create_report_file(&dir, &query, &mut rand::rng())
            .map_err(|e| {
                format!(
                    "cannot create a report file in {}: {e}; start quarry mcp with --reports-dir DIR",
                    dir.display()
                )
            })?;
        let report = std::fs::canonicalize(&report).unwrap_or(report);
        let name = report
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "research".into());
        let mode = input.mode(self.inner.default_mode);
        let wanted = input.outputs();
        let outputs: Vec<&str> = wanted.iter().map(|o| o.as_str()).collect();
        let mut command = tokio::process::Command::new(&self.inner.exe);
        command
            .args(standalone_run_args(&StandaloneRun {
                query: &query,
                profile,
                mode: mode.as_str(),
                report: &report,
                outputs: &outputs,
                egress_exempt_hosts: &self.inner.egress_exempt_hosts,
            }))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                // The reserved name would otherwise look like a run that never finishes.
                let _ = std::fs::remove_file(&report);
                return Err(format!("cannot start {}: {e}", self.inner.exe.display()));
            }
        };
        let (tx, rx) = watch::channel(LocalState::default());
        let stdout = child.stdout.take();
        tokio::spawn(follow_child(child, stdout, tx));
        self.local().insert(
            name.clone(),
            LocalRun {
                query: query.clone(),
                report: report.clone(),
                state: rx.clone(),
            },
        );
        if !input.wait {
            return Ok(format!(
                "Research started (standalone, {mode} mode) as run `{name}`. The report will be written to {}. Call get_report with name \"{name}\" when it is done; list_runs shows its progress.",
                report.display()
            ));
        }
        let mut rx = rx;
        let waited = tokio::time::timeout(self.inner.wait_timeout, async {
            loop {
                let state = rx.borrow_and_update().clone();
                progress.send(&state.phase, &state.progress).await;
                if state.done() {
                    return state;
                }
                if rx.changed().await.is_err() {
                    return rx.borrow().clone();
                }
            }
        })
        .await;
        match waited {
            Ok(state) => local_outcome(&name, &report, &state),
            Err(_) => {
                let state = rx.borrow().clone();
                Ok(format!(
                    "Still running after {}: run `{name}` is {} ({}). Call get_report with name \"{name}\" later; the report will be at {}.",
                    self.inner.wait_text,
                    state.phase,
                    state.progress,
                    report.display()
                ))
            }
        }
    }

    /// Cluster research: a ResearchRun in the context's namespace, watched when waiting.
    async fn research_on_cluster(&self, input: ResearchInput, progress: Progress) -> ToolResult {
        let run = cluster_run(&input, self.inner.default_mode, &self.inner.cluster_profile)?;
        let cluster = self.cluster(None).await?;
        runs::check_profile(&cluster, &self.inner.cluster_profile)
            .await
            .map_err(|e| match e {
                CliError::NoProfile { .. } => format!(
                    "{e}\n  quarry mcp uses the profile named by --cluster-profile (default \"default\")."
                ),
                e => e.to_string(),
            })?;
        let created = runs::create_run(&cluster, &run)
            .await
            .map_err(|e| e.to_string())?;
        let name = created.name_any();
        let ns = cluster.namespace.clone();
        if !input.wait {
            return Ok(format!(
                "Created ResearchRun {ns}/{name} (profile {}). It runs on the cluster; call get_report with name \"{name}\" when it is done; list_runs shows its progress.",
                self.inner.cluster_profile
            ));
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<(String, String)>();
        let forward = async {
            while let Some((phase, pct)) = rx.recv().await {
                progress.send(&phase, &pct).await;
            }
        };
        let watch = async {
            let result = runs::watch_until_end(
                &cluster,
                &name,
                self.inner.wait_timeout,
                &self.inner.wait_text,
                |r: &ResearchRun| {
                    let pct = r
                        .status
                        .as_ref()
                        .and_then(|s| s.progress.clone())
                        .unwrap_or_default();
                    let _ = tx.send((table::phase_label(r), pct));
                },
            )
            .await;
            drop(tx);
            result
        };
        let (result, ()) = tokio::join!(watch, forward);
        match result {
            Ok(run) => cluster_outcome(&cluster, &run).await,
            Err(CliError::WaitTimeout { phase, .. }) => Ok(format!(
                "Still running after {}: ResearchRun {ns}/{name} is {phase}. Call get_report with name \"{name}\" later.",
                self.inner.wait_text
            )),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn get_report(&self, input: GetReportInput) -> ToolResult {
        let local = self.local().get(&input.name).cloned();
        if let Some(run) = local {
            let state = run.state.borrow().clone();
            if !state.done() {
                return Ok(format!(
                    "Run `{}` is still {} ({}); its report will be at {}. Call get_report again later.",
                    input.name,
                    state.phase,
                    state.progress,
                    run.report.display()
                ));
            }
            return local_outcome(&input.name, &run.report, &state);
        }
        // A standalone report of an earlier session, by name, in the reports directory.
        if input.namespace.is_none() && !input.name.contains('/') {
            let path = self.reports_dir().join(format!("{}.md", input.name));
            if let Ok(text) = std::fs::read_to_string(&path)
                && !text.trim().is_empty()
            {
                return Ok(report_text(&text, &path.display().to_string()));
            }
        }
        let cluster = self.cluster(input.namespace.as_deref()).await?;
        let run = runs::get_run(&cluster, &input.name)
            .await
            .map_err(|e| e.to_string())?;
        if !run.is_finished() {
            let pct = run
                .status
                .as_ref()
                .and_then(|s| s.progress.clone())
                .unwrap_or_else(|| table::NONE.into());
            if table::phase_label(&run) == "AwaitingApproval" {
                let why = run
                    .status
                    .as_ref()
                    .and_then(|s| s.message.clone())
                    .unwrap_or_default();
                return Ok(format!(
                    "ResearchRun {}/{} waits for a person to approve its plan: {why}. Call get_report again once it is approved.",
                    cluster.namespace, input.name
                ));
            }
            return Ok(format!(
                "ResearchRun {}/{} is still {} ({pct}). Call get_report again later.",
                cluster.namespace,
                input.name,
                run.phase()
            ));
        }
        cluster_outcome(&cluster, &run).await
    }

    async fn list_schedules(&self, input: ListSchedulesInput) -> ToolResult {
        let cluster = self.cluster(input.namespace.as_deref()).await?;
        let api: kube::Api<quarry_api::ResearchSchedule> = if input.all_namespaces {
            kube::Api::all(cluster.client.clone())
        } else {
            kube::Api::namespaced(cluster.client.clone(), &cluster.namespace)
        };
        let mut found = api
            .list(&kube::api::ListParams::default())
            .await
            .map_err(|e| {
                cluster::classify(
                    e,
                    "list ResearchSchedules",
                    cluster::Target::Collection,
                    &cluster.namespace,
                    &cluster.url,
                )
                .to_string()
            })?
            .items;
        if found.is_empty() {
            return Ok(format!(
                "No ResearchSchedules in namespace {}.\n",
                cluster.namespace
            ));
        }
        found.sort_by(|a, b| {
            (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
                .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
        });
        Ok(super::schedules::schedules_table(
            &found,
            Timestamp::now(),
            false,
            input.all_namespaces,
        ))
    }

    async fn list(&self, input: ListRunsInput) -> ToolResult {
        let mut text = String::new();
        let local: Vec<(String, LocalRun)> = self
            .local()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match self.cluster(input.namespace.as_deref()).await {
            Ok(cluster) => {
                let all = input.all_namespaces;
                let found = runs::list_runs(&cluster, all, input.schedule.as_deref())
                    .await
                    .map_err(|e| e.to_string())?;
                if found.is_empty() {
                    text.push_str(&format!(
                        "No ResearchRuns in namespace {}.\n",
                        cluster.namespace
                    ));
                } else {
                    text.push_str(&table::runs_table(&found, Timestamp::now(), false, all));
                }
            }
            Err(e) if local.is_empty() => return Err(e),
            Err(_) => text.push_str("No cluster configured.\n"),
        }
        if !local.is_empty() {
            let rows: Vec<Vec<String>> = local
                .iter()
                .map(|(name, run)| {
                    let state = run.state.borrow().clone();
                    let phase = match (&state.end, &state.crashed) {
                        (Some(end), _) => end["phase"].as_str().unwrap_or("Failed").to_string(),
                        (None, Some(_)) => "Failed".to_string(),
                        (None, None) if state.phase.is_empty() => "Pending".to_string(),
                        (None, None) => state.phase.clone(),
                    };
                    vec![
                        name.clone(),
                        phase,
                        if state.progress.is_empty() {
                            table::NONE.into()
                        } else {
                            state.progress.clone()
                        },
                        run.report.display().to_string(),
                        run.query.clone(),
                    ]
                })
                .collect();
            text.push_str("\nStandalone runs of this session:\n");
            text.push_str(&table::render(
                &["NAME", "PHASE", "PROGRESS", "REPORT", "QUERY"],
                &rows,
            ));
        }
        Ok(text)
    }
}

impl ServerHandler for QuarryMcp {
    fn get_info(&self) -> ServerConfig {
        let mode = if self.inner.profile.is_some() {
            "Research runs on this machine with the configured profile."
        } else {
            "Research runs on the Kubernetes cluster of the current kube context as ResearchRuns."
        };
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("quarry", env!("CARGO_PKG_VERSION")).with_title("Quarry"),
            )
            .with_instructions(format!(
                "Quarry researches questions on the web and answers with cited Markdown reports. \
                 Call `research` with a self-contained question; `get_report` fetches a report by \
                 run name and `list_runs` shows runs. {mode}"
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = match request.name.as_ref() {
            RESEARCH_TOOL => match parse_args::<ResearchInput>(&request) {
                Ok(input) => self.research(input, &context).await,
                Err(e) => Err(e),
            },
            GET_REPORT_TOOL => match parse_args::<GetReportInput>(&request) {
                Ok(input) => self.get_report(input).await,
                Err(e) => Err(e),
            },
            LIST_RUNS_TOOL => match parse_args::<ListRunsInput>(&request) {
                Ok(input) => self.list(input).await,
                Err(e) => Err(e),
            },
            LIST_SCHEDULES_TOOL => match parse_args::<ListSchedulesInput>(&request) {
                Ok(input) => self.list_schedules(input).await,
                Err(e) => Err(e),
            },
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}: use research, get_report, list_runs or list_schedules"
                    ),
                    None,
                ));
            }
        };
        Ok(match result {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
        .into())
    }
}

/// `quarry mcp`: serves until the client closes stdin.
pub async fn serve(args: McpArgs, settings: Settings) -> Result<(), CliError> {
    let server = QuarryMcp::new(args, &settings)?;
    let service = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CliError::Output(format!("MCP initialisation failed: {e}")))?;
    service
        .waiting()
        .await
        .map_err(|e| CliError::Output(format!("MCP server stopped: {e}")))?;
    Ok(())
}

#[cfg(test)]
mod tests;
