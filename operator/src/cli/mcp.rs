//! `quarry mcp`: a Model Context Protocol server on stdin/stdout for coding agents (seed 000 is a
//! research tool for the agent of seed 002).
//!
//! Tools:
//! - `research`: runs standalone (a `quarry run --output json` child process) when the server
//!   was given a profile file, else creates a ResearchRun in the kube context's namespace; with
//!   `wait` it returns the report cut per seed 002 (50 KB / 2000 lines, head kept) and where
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
use crate::api::run::{DEFAULT_PROFILE, MAX_QUERY_CHARS, MIN_QUERY_CHARS};
use crate::api::values::parse_duration;
use crate::api::{Mode, Output, Phase, ResearchRun, ResearchRunSpec};
use crate::config::Settings;
use crate::scrape::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, truncate_head};
use crate::store::ArtifactStore;

/// Name of the research tool.
pub const RESEARCH_TOOL: &str = "research";
/// Name of the report tool.
pub const GET_REPORT_TOOL: &str = "get_report";
/// Name of the listing tool.
pub const LIST_RUNS_TOOL: &str = "list_runs";

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum ModeArg {
    Quick,
    Deep,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum OutputArg {
    Study,
    Ideas,
    Implementations,
}

fn wait_default() -> bool {
    true
}

/// Arguments of the `research` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResearchInput {
    /// The research question, self-contained (3 to 4000 characters).
    query: String,
    /// quick: one researcher, fast and cheap; deep: planner, parallel researchers, evaluator.
    #[serde(default)]
    #[schemars(with = "ModeArg")]
    mode: Option<ModeArg>,
    /// What to produce: study (a cited report, the default), ideas, implementations.
    #[serde(default)]
    #[schemars(with = "Vec<OutputArg>")]
    outputs: Option<Vec<OutputArg>>,
    /// Wait for the report and return it; false returns at once with the run's name.
    #[serde(default = "wait_default")]
    wait: bool,
}

impl ResearchInput {
    fn mode(&self, default: Mode) -> Mode {
        match self.mode {
            Some(ModeArg::Quick) => Mode::Quick,
            Some(ModeArg::Deep) => Mode::Deep,
            None => default,
        }
    }

    /// The requested outputs, sorted and without repeats (empty: the default study).
    fn outputs(&self) -> Vec<Output> {
        let mut outputs: Vec<Output> = self
            .outputs
            .iter()
            .flatten()
            .map(|o| match o {
                OutputArg::Study => Output::Study,
                OutputArg::Ideas => Output::Ideas,
                OutputArg::Implementations => Output::Implementations,
            })
            .collect();
        outputs.sort();
        outputs.dedup();
        outputs
    }
}

/// Arguments of the `get_report` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct GetReportInput {
    /// The run's name, as research or list_runs gave it.
    name: String,
    /// Namespace of a cluster run (default: the kube context's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    namespace: Option<String>,
}

/// Arguments of the `list_runs` tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ListRunsInput {
    /// Namespace to list (default: the kube context's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    namespace: Option<String>,
    /// List the runs of every namespace.
    #[serde(default)]
    all_namespaces: bool,
}

/// Pure: the JSON Schema of a tool's arguments (draft 2020-12, subschemas inlined for clients
/// that do not follow `$ref`; no top-level title or description).
pub fn input_schema<T: JsonSchema>() -> Arc<JsonObject> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    };
    object.remove("title");
    object.remove("description");
    object.remove("$schema");
    Arc::new(object)
}

/// The tools this server offers.
pub fn tools() -> Vec<Tool> {
    let research = Tool::new(
        RESEARCH_TOOL,
        "Research a question on the web and return a cited Markdown report. Every citation is \
         checked against the pages actually read. Quick mode takes about a minute with a fast \
         model; deep mode several. Long reports are cut to 50 KB / 2000 lines and the text says \
         where the full report is.",
        input_schema::<ResearchInput>(),
    )
    .with_title("Research a question")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(true),
    );
    let get_report = Tool::new(
        GET_REPORT_TOOL,
        "Return the report of a finished research run by name (cut to 50 KB / 2000 lines with \
         its full location), or say how far the run is.",
        input_schema::<GetReportInput>(),
    )
    .with_title("Get a research report")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false));
    let list_runs = Tool::new(
        LIST_RUNS_TOOL,
        "List research runs with phase, progress, cost and sources: the cluster namespace's \
         ResearchRuns and the standalone runs this server started.",
        input_schema::<ListRunsInput>(),
    )
    .with_title("List research runs")
    .with_annotations(ToolAnnotations::new().read_only(true).open_world(false));
    vec![research, get_report, list_runs]
}

/// Pure: what an agent receives for a report: the head within seed 002's budget (50 KB / 2000
/// lines, the notice included) and, always, where the full report is.
pub fn report_text(markdown: &str, location: &str) -> String {
    let total_lines = markdown.lines().count();
    let footer_reserve = format!(
        "\n\n[Report truncated: showing lines 1-{total_lines} of {total_lines} ({} of {} bytes). Full report: {location}]",
        markdown.len(),
        markdown.len()
    )
    .len();
    let cut = truncate_head(
        markdown,
        DEFAULT_MAX_BYTES.saturating_sub(footer_reserve),
        DEFAULT_MAX_LINES - 2,
    );
    if !cut.truncated {
        return format!("{}\n\n---\nFull report: {location}", markdown.trim_end());
    }
    let head = markdown
        .get(..cut.kept_bytes)
        .unwrap_or_default()
        .trim_end();
    format!(
        "{head}\n\n[Report truncated: showing lines 1-{} of {} ({} of {} bytes). Full report: {location}]",
        cut.kept_lines, cut.total_lines, cut.kept_bytes, cut.total_bytes
    )
}

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
                    crate::research::state::Mode::Quick => Mode::Quick,
                    crate::research::state::Mode::Deep => Mode::Deep,
                },
                cluster_profile: args.cluster_profile,
                kube: args.kube,
                wait_timeout,
                wait_text: args.wait_timeout,
                reports_dir: args.reports_dir,
                exe,
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
        let mut command = tokio::process::Command::new(&self.inner.exe);
        command
            .arg("run")
            .arg(&query)
            .arg("--profile")
            .arg(profile)
            .args(["--mode", mode.as_str(), "--output", "json", "--out"])
            .arg(&report)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let outputs = input.outputs();
        if !outputs.is_empty() {
            let list: Vec<&str> = outputs.iter().map(|o| o.as_str()).collect();
            command.arg("--outputs").arg(list.join(","));
        }
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
                    let _ = tx.send((r.phase().to_string(), pct));
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
            return Ok(format!(
                "ResearchRun {}/{} is still {} ({pct}). Call get_report again later.",
                cluster.namespace,
                input.name,
                run.phase()
            ));
        }
        cluster_outcome(&cluster, &run).await
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
                let found = runs::list_runs(&cluster, all)
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

/// Reads a standalone child's JSON lines into its state until it exits.
async fn follow_child(
    mut child: tokio::process::Child,
    stdout: Option<tokio::process::ChildStdout>,
    tx: watch::Sender<LocalState>,
) {
    if let Some(stdout) = stdout {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            tx.send_modify(|state| {
                if let Some(phase) = value["phase"].as_str() {
                    state.phase = phase.to_string();
                }
                if let Some(progress) = value["progress"].as_str() {
                    state.progress = progress.to_string();
                }
                if value["type"] == "run_end" {
                    state.end = Some(value.clone());
                }
            });
        }
    }
    let status = child.wait().await;
    tx.send_modify(|state| {
        if state.end.is_none() {
            state.crashed = Some(match status {
                Ok(s) => format!("quarry run exited with {s} before finishing"),
                Err(e) => format!("quarry run could not be waited for: {e}"),
            });
        }
    });
}

/// The tool answer for a finished standalone run.
fn local_outcome(name: &str, report: &Path, state: &LocalState) -> ToolResult {
    if let Some(reason) = &state.crashed {
        return Err(format!(
            "research run `{name}` failed: {reason}; the MCP server's stderr has its messages"
        ));
    }
    let end = state.end.clone().unwrap_or_default();
    let location = report.display().to_string();
    if end["ok"] == true {
        let text = std::fs::read_to_string(report)
            .map_err(|e| format!("the report {location} cannot be read: {e}"))?;
        return Ok(report_text(&text, &location));
    }
    let error = end["error"].as_str().unwrap_or("the run failed");
    // NoEvidence stores an honest "unable to research" report: show it with the failure.
    match end["report"].as_str().map(std::fs::read_to_string) {
        Some(Ok(text)) if !text.trim().is_empty() => Err(format!(
            "research run `{name}` failed: {error}\n\n{}",
            report_text(&text, &location)
        )),
        _ => Err(format!("research run `{name}` failed: {error}")),
    }
}

/// The tool answer for a finished cluster run: its report, or why there is none.
async fn cluster_outcome(cluster: &Cluster, run: &ResearchRun) -> ToolResult {
    let name = run.name_any();
    let report = fetch_cluster_report(cluster, run).await;
    match (run.phase(), report) {
        (Phase::Completed, Ok((text, location))) => Ok(report_text(&text, &location)),
        (Phase::Completed, Err(e)) => Err(e),
        (_, report) => {
            let mut message = runs::ended_ok(run)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| format!("ResearchRun {name} ended {}", run.phase()));
            if let Ok((text, location)) = report {
                message.push_str("\n\n");
                message.push_str(&report_text(&text, &location));
            }
            Err(message)
        }
    }
}

/// Reads a finished cluster run's report and says where it lives. ConfigMap reports are read
/// here; other stores are named for `quarry report`.
pub async fn fetch_cluster_report(
    cluster: &Cluster,
    run: &ResearchRun,
) -> Result<(String, String), String> {
    let name = run.name_any();
    let ns = cluster.namespace.clone();
    let Some(report) = run.status.as_ref().and_then(|s| s.report.clone()) else {
        return Err(format!(
            "ResearchRun {ns}/{name} has no stored report ({}); see `quarry get {name} -n {ns} -o yaml` for its conditions",
            run.phase()
        ));
    };
    let Some(config_map) = report.config_map else {
        let url = report.object_url.unwrap_or_default();
        return Err(format!(
            "the report of ResearchRun {ns}/{name} is in the object store at {url}; print it with `quarry report {name} -n {ns}`"
        ));
    };
    let owner = run.controller_owner_ref(&()).unwrap_or_default();
    let store =
        crate::store::configmap::ConfigMapStore::new(cluster.client.clone(), &ns, &name, owner);
    let location =
        format!("ConfigMap {ns}/{config_map}, key report.md (quarry report {name} -n {ns})");
    match store.get(crate::research::executor::REPORT_KEY).await {
        Ok(Some(bytes)) => Ok((String::from_utf8_lossy(&bytes).into_owned(), location)),
        Ok(None) => Err(format!("{location} holds no report.md")),
        Err(e) => Err(format!("reading {location}: {e}")),
    }
}

/// Progress notifications for one tool call, when the client asked for them.
struct Progress {
    target: Option<(rmcp::model::ProgressToken, rmcp::Peer<RoleServer>)>,
    sent: Mutex<(f64, String)>,
}

impl Progress {
    fn new(ctx: &RequestContext<RoleServer>) -> Self {
        Self {
            target: ctx
                .meta
                .get_progress_token()
                .map(|token| (token, ctx.peer.clone())),
            sent: Mutex::new((0.0, String::new())),
        }
    }

    /// Notifies `phase (progress)` once per change; the number only grows.
    async fn send(&self, phase: &str, progress: &str) {
        let Some((token, peer)) = &self.target else {
            return;
        };
        let message = format!("{phase} {progress}").trim().to_string();
        let value = {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            if sent.1 == message || message.is_empty() {
                return;
            }
            let pct = progress
                .trim_end_matches('%')
                .parse::<f64>()
                .unwrap_or(sent.0);
            // Notifications must increase even when the percentage does not.
            sent.0 = if pct > sent.0 { pct } else { sent.0 + 0.001 };
            sent.1 = message.clone();
            sent.0
        };
        let _ = peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), value)
                    .with_total(100.0)
                    .with_message(message),
            )
            .await;
    }
}

fn parse_args<T: serde::de::DeserializeOwned>(
    request: &CallToolRequestParams,
) -> Result<T, String> {
    let args = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
    serde_json::from_value(args).map_err(|e| {
        format!(
            "invalid arguments for {}: {e}; see the tool's input schema",
            request.name
        )
    })
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
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {other:?}: use research, get_report or list_runs"),
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
mod tests {
    use super::*;

    #[test]
    fn short_reports_come_whole_with_their_location() {
        assert_eq!(
            report_text("# Title\n\nBody.\n", "/r/x.md"),
            "# Title\n\nBody.\n\n---\nFull report: /r/x.md"
        );
    }

    #[test]
    fn long_reports_keep_the_head_within_seed_002s_budget() {
        let long: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
        let text = report_text(&long, "ConfigMap ns/r1-report");
        assert!(text.len() <= DEFAULT_MAX_BYTES, "{}", text.len());
        assert!(text.lines().count() <= DEFAULT_MAX_LINES);
        assert!(text.starts_with("line 1\nline 2\n"));
        assert!(
            text.ends_with(
                "\n\n[Report truncated: showing lines 1-1998 of 5000 (18873 of 48893 bytes). Full report: ConfigMap ns/r1-report]"
            ),
            "{}",
            &text[text.len() - 200..]
        );
        let wide = "x".repeat(200_000);
        let text = report_text(&wide, "/r/x.md");
        assert!(text.len() <= DEFAULT_MAX_BYTES);
        assert!(
            text.contains("[Report truncated: showing lines 1-1 of 1 ("),
            "{}",
            &text[text.len() - 120..]
        );
    }

    #[test]
    fn tool_schemas_are_objects_with_documented_fields() {
        let tools = tools();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, [RESEARCH_TOOL, GET_REPORT_TOOL, LIST_RUNS_TOOL]);
        let research = serde_json::Value::Object(tools[0].input_schema.as_ref().clone());
        assert_eq!(research["type"], "object");
        assert_eq!(research["required"], serde_json::json!(["query"]));
        assert_eq!(research["additionalProperties"], false);
        assert_eq!(
            research["properties"],
            serde_json::json!({
                "query": {"type": "string", "description": "The research question, self-contained (3 to 4000 characters)."},
                "mode": {"type": "string", "enum": ["quick", "deep"],
                         "description": "quick: one researcher, fast and cheap; deep: planner, parallel researchers, evaluator."},
                "outputs": {"type": "array", "items": {"type": "string", "enum": ["study", "ideas", "implementations"]},
                            "description": "What to produce: study (a cited report, the default), ideas, implementations."},
                "wait": {"type": "boolean", "default": true,
                         "description": "Wait for the report and return it; false returns at once with the run's name."}
            })
        );
    }

    #[test]
    fn cluster_runs_take_the_tools_arguments() {
        let input: ResearchInput = serde_json::from_value(serde_json::json!({
            "query": "  How does VACUUM FULL lock?  ", "mode": "quick", "outputs": ["ideas", "study"]
        }))
        .unwrap();
        let run = cluster_run(&input, Mode::Deep, "fast").unwrap();
        assert_eq!(
            run.metadata.generate_name.as_deref(),
            Some("how-does-vacuum-full-lock-")
        );
        assert_eq!(run.spec.query, "How does VACUUM FULL lock?");
        assert_eq!(run.spec.mode, Mode::Quick);
        assert_eq!(run.spec.outputs, vec![Output::Study, Output::Ideas]);
        assert!(input.wait);
        assert_eq!(run.spec.profile_ref, "fast");
        let bad: ResearchInput =
            serde_json::from_value(serde_json::json!({"query": "ab"})).unwrap();
        assert_eq!(
            cluster_run(&bad, Mode::Deep, "default").unwrap_err(),
            "the query must be 3 to 4000 characters, not 2"
        );
        assert!(
            serde_json::from_value::<ResearchInput>(
                serde_json::json!({"query": "abc", "depth": 3})
            )
            .is_err()
        );
    }
}
