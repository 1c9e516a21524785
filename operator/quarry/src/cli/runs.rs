//! `quarry apply`, `get`, `list` and `cancel`: ResearchRuns on a cluster, kubectl-style.

use std::io::Write;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde::de::DeserializeOwned;

use super::cluster::{self, Cluster, FIELD_MANAGER, KubeArgs, Target};
use super::table;
use super::{CliError, OutputFormat, ProgressMode, Resolved};
use quarry_api::run::{DEFAULT_PROFILE, MAX_QUERY_CHARS, MIN_QUERY_CHARS};
use quarry_api::values::{parse_duration, parse_usd_micros};
use quarry_api::{
    Mode, Output, Phase, ReportKind, ReportTarget, ResearchProfile, ResearchRun, ResearchRunSpec,
    RunLimits, SourceKind,
};

/// Longest generated name prefix; the API server appends five characters. Run names also label
/// the run's ConfigMaps, and label values are at most 63 characters.
pub const GENERATED_PREFIX_CHARS: usize = 40;
/// Longest run name accepted (a label value).
pub const MAX_NAME_CHARS: usize = 63;
/// Consecutive watch failures after which `--wait` gives up.
const MAX_WATCH_ERRORS: u32 = 5;

/// Parses an API enum from its wire name (`quick`, `objectStore`, ...).
fn wire<T: DeserializeOwned>(value: &str, allowed: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(value.trim().to_string()))
        .map_err(|_| format!("unknown value {value:?}: use {allowed}"))
}

fn parse_mode(v: &str) -> Result<Mode, String> {
    wire(v, "quick or deep")
}

fn parse_output(v: &str) -> Result<Output, String> {
    wire(v, "study, ideas or implementations")
}

fn parse_source(v: &str) -> Result<SourceKind, String> {
    wire(v, "web, security or stackexchange")
}

fn parse_report_kind(v: &str) -> Result<ReportKind, String> {
    wire(v, "configMap or objectStore")
}

/// Flags of `quarry apply`.
#[derive(clap::Args, Debug, Clone)]
pub struct ApplyArgs {
    /// The research question.
    pub query: String,
    /// Name of the ResearchRun (default: generated from the question).
    #[arg(long)]
    pub name: Option<String>,
    /// ResearchProfile in the run's namespace: models, search and fetch policy.
    #[arg(long, default_value = DEFAULT_PROFILE)]
    pub profile: String,
    /// quick (one researcher) or deep (planner, rounds, evaluator; the CRD's default).
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<Mode>,
    /// Outputs, comma-separated: study, ideas, implementations (default study).
    #[arg(long, value_delimiter = ',', value_parser = parse_output)]
    pub outputs: Vec<Output>,
    /// Items per ideas/implementations output (1..20, default 5).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub top_k: Option<u32>,
    /// Gatherers researchers may use, comma-separated: web, security, stackexchange (default all).
    #[arg(long, value_delimiter = ',', value_parser = parse_source)]
    pub sources: Vec<SourceKind>,
    /// Background text for the planner and researchers.
    #[arg(long)]
    pub context: Option<String>,
    /// Researchers running at once (1..10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub max_concurrent_researchers: Option<u32>,
    /// Cap on research rounds (1..10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub max_rounds: Option<u32>,
    /// Cost limit in USD, e.g. 0.50.
    #[arg(long)]
    pub max_cost_usd: Option<String>,
    /// Token limit (input + output) for the whole run.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_tokens: Option<u64>,
    /// Time limit of the run, e.g. 30m or 1h30m.
    #[arg(long)]
    pub timeout: Option<String>,
    /// Report store: configMap (default) or objectStore.
    #[arg(long, value_parser = parse_report_kind)]
    pub report: Option<ReportKind>,
    /// Key prefix in the object store (with --report objectStore).
    #[arg(long)]
    pub report_prefix: Option<String>,
    /// Delete the run this many seconds after it finished.
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
    pub ttl_seconds_after_finished: Option<i64>,
    /// Wait until the run finishes, showing its progress; exit non-zero unless it completes.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this long (the run goes on).
    #[arg(long, default_value = "2h")]
    pub wait_timeout: String,
    /// Progress while waiting: auto (live on a terminal, quiet otherwise), lines, none.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Print the created (or, with --wait, the finished) object: json or yaml.
    #[arg(short = 'o', long, value_enum)]
    pub output: Option<OutputFormat>,
    /// Print the ResearchRun (YAML unless -o json) without creating it; needs no cluster.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Pure: whether `name` is a DNS-1123 subdomain (what Kubernetes accepts as an object name).
fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    !name.is_empty() && name.len() <= 253 && name.split('.').all(label_ok)
}

/// Pure: the `generateName` prefix for a question: its words, lowercased and dash-joined.
pub fn generated_prefix(query: &str) -> String {
    let stem = quarry_engine::store::sanitize_query(query);
    let cut: String = stem.chars().take(GENERATED_PREFIX_CHARS).collect();
    format!("{}-", cut.trim_end_matches('-'))
}

/// Pure: the ResearchRun `quarry apply` creates from its flags, checked as far as the CRD's
/// rules can be without a cluster.
pub fn build_run(args: &ApplyArgs, namespace: Option<&str>) -> Result<ResearchRun, CliError> {
    let query = args.query.trim();
    let chars = query.chars().count();
    if chars < MIN_QUERY_CHARS as usize || chars > MAX_QUERY_CHARS as usize {
        return Err(CliError::Usage(format!(
            "the question must be {MIN_QUERY_CHARS} to {MAX_QUERY_CHARS} characters, not {chars}"
        )));
    }
    if let Some(name) = &args.name
        && (!is_dns1123_subdomain(name) || name.len() > MAX_NAME_CHARS)
    {
        return Err(CliError::Usage(format!(
            "--name {name:?} is not a valid run name: use at most {MAX_NAME_CHARS} lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        )));
    }
    if !is_dns1123_subdomain(&args.profile) {
        return Err(CliError::Usage(format!(
            "--profile {:?} is not a valid ResearchProfile name",
            args.profile
        )));
    }
    if let Some(usd) = &args.max_cost_usd {
        parse_usd_micros(usd).map_err(|e| CliError::Usage(format!("--max-cost-usd: {e}")))?;
    }
    if let Some(timeout) = &args.timeout {
        parse_duration(timeout).map_err(|e| CliError::Usage(format!("--timeout: {e}")))?;
    }
    let kind = args.report.unwrap_or_default();
    if args.report_prefix.is_some() && kind != ReportKind::ObjectStore {
        return Err(CliError::Usage(
            "--report-prefix needs --report objectStore".into(),
        ));
    }
    let mut spec: ResearchRunSpec = serde_json::from_value(serde_json::json!({ "query": query }))
        .map_err(|e| CliError::Usage(e.to_string()))?;
    spec.context = args.context.clone();
    if let Some(mode) = args.mode {
        spec.mode = mode;
    }
    if !args.outputs.is_empty() {
        let mut outputs = args.outputs.clone();
        outputs.sort();
        outputs.dedup();
        spec.outputs = outputs;
    }
    if let Some(top_k) = args.top_k {
        spec.top_k = top_k;
    }
    spec.profile_ref = args.profile.clone();
    if !args.sources.is_empty() {
        let mut sources = args.sources.clone();
        sources.sort();
        sources.dedup();
        spec.sources = sources;
    }
    let limits = RunLimits {
        max_concurrent_researchers: args.max_concurrent_researchers,
        max_rounds: args.max_rounds,
        max_cost_usd: args.max_cost_usd.clone(),
        max_tokens: args.max_tokens,
        timeout: args.timeout.clone(),
    };
    spec.limits = (limits != RunLimits::default()).then_some(limits);
    spec.report = ReportTarget {
        kind,
        prefix: args.report_prefix.clone(),
    };
    spec.ttl_seconds_after_finished = args.ttl_seconds_after_finished;
    let mut run = ResearchRun::new(args.name.as_deref().unwrap_or_default(), spec);
    if args.name.is_none() {
        run.metadata.name = None;
        run.metadata.generate_name = Some(generated_prefix(query));
    }
    run.metadata.namespace = namespace.map(str::to_string);
    Ok(run)
}

/// Prints a Kubernetes object as JSON or YAML, without `managedFields` (as kubectl does).
pub fn print_object<T: serde::Serialize>(object: &T, format: OutputFormat) -> Result<(), CliError> {
    let mut value = serde_json::to_value(object).map_err(|e| CliError::Output(e.to_string()))?;
    strip_managed_fields(&mut value);
    let text = match format {
        OutputFormat::Yaml => {
            serde_yaml::to_string(&value).map_err(|e| CliError::Output(e.to_string()))?
        }
        _ => {
            let mut s = serde_json::to_string_pretty(&value)
                .map_err(|e| CliError::Output(e.to_string()))?;
            s.push('\n');
            s
        }
    };
    write_stdout(&text)
}

fn strip_managed_fields(value: &mut serde_json::Value) {
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    if let Some(items) = value.get_mut("items").and_then(|i| i.as_array_mut()) {
        items.iter_mut().for_each(strip_managed_fields);
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a message.
pub(crate) fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::Output(e.to_string())),
    }
}

fn parse_wait(text: &str) -> Result<Duration, CliError> {
    parse_duration(text).map_err(|e| CliError::Usage(format!("--wait-timeout: {e}")))
}

/// `quarry apply`: creates a ResearchRun from flags, optionally waiting for it to finish.
pub async fn apply(args: ApplyArgs) -> Result<(), CliError> {
    let wait_timeout = parse_wait(&args.wait_timeout)?;
    if args.dry_run {
        // The namespace comes from the kubeconfig when there is one; no request is made.
        let namespace = match &args.kube.namespace {
            Some(ns) => Some(ns.clone()),
            None => cluster::config(&args.kube)
                .await
                .ok()
                .map(|c| c.default_namespace),
        };
        let run = build_run(&args, namespace.as_deref())?;
        return print_object(&run, args.output.unwrap_or(OutputFormat::Yaml));
    }
    let cluster = cluster::connect(&args.kube).await?;
    let run = build_run(&args, Some(&cluster.namespace))?;
    check_profile(&cluster, &args.profile).await?;
    let created = create_run(&cluster, &run).await?;
    let name = created.name_any();
    if !args.wait {
        return match args.output {
            Some(f @ (OutputFormat::Json | OutputFormat::Yaml)) => print_object(&created, f),
            _ => write_stdout(&format!("researchrun.quarry.dev/{name} created\n")),
        };
    }
    if !matches!(args.output, Some(OutputFormat::Json | OutputFormat::Yaml)) {
        write_stdout(&format!("researchrun.quarry.dev/{name} created\n"))?;
    }
    let finished = wait_for_end(
        &cluster,
        &name,
        wait_timeout,
        &args.wait_timeout,
        args.progress.resolve(),
    )
    .await?;
    match args.output {
        Some(f @ (OutputFormat::Json | OutputFormat::Yaml)) => print_object(&finished, f)?,
        _ => write_stdout(&format!("{}\n", table::outcome_line(&finished)))?,
    }
    ended_ok(&finished)
}

/// Creates `run` in the cluster's namespace; the API server fills in defaults and the name.
pub async fn create_run(cluster: &Cluster, run: &ResearchRun) -> Result<ResearchRun, CliError> {
    let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let name = run.metadata.name.clone().unwrap_or_default();
    api.create(&params, run).await.map_err(|e| {
        let target = if name.is_empty() {
            Target::Collection
        } else {
            Target::Run(&name)
        };
        cluster::classify(
            e,
            "create a ResearchRun",
            target,
            &cluster.namespace,
            &cluster.url,
        )
    })
}

/// Fails early, naming the profiles that exist, when the run's profile is missing: a run without
/// its profile would only stall.
pub async fn check_profile(cluster: &Cluster, profile: &str) -> Result<(), CliError> {
    let api: Api<ResearchProfile> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let found = api.get_opt(profile).await.map_err(|e| {
        cluster::classify(
            e,
            &format!("read ResearchProfile {profile}"),
            Target::Profile(profile),
            &cluster.namespace,
            &cluster.url,
        )
    })?;
    if found.is_some() {
        return Ok(());
    }
    // Naming what exists turns a typo into a one-step fix; listing may be forbidden, so best effort.
    let known = match api.list(&ListParams::default()).await {
        Ok(list) if !list.items.is_empty() => {
            let names: Vec<String> = list.items.iter().map(|p| p.name_any()).collect();
            format!("; it has: {}", names.join(", "))
        }
        Ok(_) => "; it has none".to_string(),
        Err(_) => String::new(),
    };
    Err(CliError::NoProfile {
        name: profile.to_string(),
        namespace: cluster.namespace.clone(),
        known,
    })
}

/// Ok for a Completed run; the failure reason and message otherwise.
pub fn ended_ok(run: &ResearchRun) -> Result<(), CliError> {
    if run.phase() == Phase::Completed {
        return Ok(());
    }
    let succeeded =
        quarry_api::find_condition(run.conditions(), quarry_api::condition_types::SUCCEEDED);
    Err(CliError::RunEnded {
        name: run.name_any(),
        phase: run.phase().to_string(),
        reason: succeeded.map(|c| c.reason.clone()).unwrap_or_default(),
        message: run
            .status
            .as_ref()
            .and_then(|s| s.message.clone())
            .unwrap_or_default(),
    })
}

/// Shows progress lines while a run is watched.
struct ProgressView {
    mode: Resolved,
    last: Option<String>,
    last_phase: Option<Phase>,
    open: bool,
}

impl ProgressView {
    fn new(mode: Resolved) -> Self {
        Self {
            mode,
            last: None,
            last_phase: None,
            open: false,
        }
    }

    fn show(&mut self, run: &ResearchRun) {
        let line = table::progress_line(run);
        if self.last.as_ref() == Some(&line) {
            return;
        }
        let mut err = std::io::stderr().lock();
        match self.mode {
            Resolved::Quiet => {}
            Resolved::Lines => {
                let _ = writeln!(err, "{line}");
            }
            Resolved::Live => {
                // A new phase keeps the previous line on screen as history.
                if self.open && self.last_phase != Some(run.phase()) {
                    let _ = writeln!(err);
                }
                let width = std::env::var("COLUMNS")
                    .ok()
                    .and_then(|c| c.parse::<usize>().ok())
                    .unwrap_or(120)
                    .saturating_sub(1);
                let shown: String = line.chars().take(width).collect();
                let _ = write!(err, "\r\x1b[2K{shown}");
                let _ = err.flush();
                self.open = true;
            }
        }
        self.last = Some(line);
        self.last_phase = Some(run.phase());
    }

    fn finish(&mut self) {
        if self.open {
            let _ = writeln!(std::io::stderr());
            self.open = false;
        }
    }
}

/// Watches run `name` until it reaches a terminal phase, showing progress; at most `timeout`.
pub async fn wait_for_end(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
    timeout_text: &str,
    progress: Resolved,
) -> Result<ResearchRun, CliError> {
    let mut view = ProgressView::new(progress);
    let result = watch_until_end(cluster, name, timeout, timeout_text, |run| view.show(run)).await;
    view.finish();
    result
}

/// Watches run `name` (a list, then a watch, resumed after disconnects) until it ends; calls
/// `on_change` with every version seen.
pub async fn watch_until_end(
    cluster: &Cluster,
    name: &str,
    timeout: Duration,
    timeout_text: &str,
    mut on_change: impl FnMut(&ResearchRun),
) -> Result<ResearchRun, CliError> {
    let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let stream = watcher(api, config).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let deadline = tokio::time::sleep(timeout);
    let mut deadline = std::pin::pin!(deadline);
    let mut last: Option<ResearchRun> = None;
    let mut errors = 0u32;
    loop {
        let item = tokio::select! {
            () = &mut deadline => {
                return Err(CliError::WaitTimeout {
                    waited: timeout_text.to_string(),
                    name: name.to_string(),
                    namespace: cluster.namespace.clone(),
                    phase: last.as_ref().map_or(Phase::Pending, ResearchRun::phase).to_string(),
                });
            }
            item = stream.next() => item,
        };
        match item {
            None => {
                return Err(CliError::Unreachable {
                    url: cluster.url.clone(),
                    detail: "the watch ended".into(),
                });
            }
            Some(Ok(watcher::Event::Apply(run) | watcher::Event::InitApply(run))) => {
                errors = 0;
                on_change(&run);
                if run.is_finished() {
                    return Ok(run);
                }
                last = Some(run);
            }
            Some(Ok(watcher::Event::Delete(_))) => {
                return Err(CliError::Deleted {
                    name: name.to_string(),
                    namespace: cluster.namespace.clone(),
                });
            }
            Some(Ok(watcher::Event::InitDone)) if last.is_none() => {
                return Err(CliError::UnknownRun {
                    name: name.to_string(),
                    namespace: cluster.namespace.clone(),
                });
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                errors += 1;
                let fatal = match &e {
                    watcher::Error::InitialListFailed(kube::Error::Api(s))
                    | watcher::Error::WatchStartFailed(kube::Error::Api(s)) => {
                        matches!(s.code, 401 | 403 | 404)
                    }
                    _ => false,
                };
                if fatal || errors >= MAX_WATCH_ERRORS {
                    return Err(watch_error(e, cluster, name));
                }
            }
        }
    }
}

fn watch_error(e: watcher::Error, cluster: &Cluster, name: &str) -> CliError {
    let action = format!("watch ResearchRun {name}");
    match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => cluster::classify(
            k,
            &action,
            Target::Collection,
            &cluster.namespace,
            &cluster.url,
        ),
        other => CliError::Unreachable {
            url: cluster.url.clone(),
            detail: other.to_string(),
        },
    }
}

/// Flags of `quarry get`.
#[derive(clap::Args, Debug, Clone)]
pub struct GetArgs {
    /// Name of the ResearchRun.
    pub name: String,
    /// Output: table (default), wide, json, yaml.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Reads one run, with errors that name what to do.
pub async fn get_run(cluster: &Cluster, name: &str) -> Result<ResearchRun, CliError> {
    let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
    api.get(name).await.map_err(|e| {
        cluster::classify(
            e,
            &format!("read ResearchRun {name}"),
            Target::Run(name),
            &cluster.namespace,
            &cluster.url,
        )
    })
}

/// `quarry get NAME`.
pub async fn get(args: GetArgs) -> Result<(), CliError> {
    let cluster = cluster::connect(&args.kube).await?;
    let run = get_run(&cluster, &args.name).await?;
    match args.output {
        OutputFormat::Table | OutputFormat::Wide => write_stdout(&table::runs_table(
            &[run],
            Timestamp::now(),
            args.output == OutputFormat::Wide,
            false,
        )),
        f => print_object(&run, f),
    }
}

/// Flags of `quarry list`.
#[derive(clap::Args, Debug, Clone)]
pub struct ListArgs {
    /// Runs of every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Only the runs a ResearchSchedule made.
    #[arg(long, value_name = "SCHEDULE")]
    pub schedule: Option<String>,
    /// Output: table (default), wide, json, yaml.
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// Lists runs of the namespace (or all), sorted by namespace and name.
pub async fn list_runs(
    cluster: &Cluster,
    all_namespaces: bool,
    schedule: Option<&str>,
) -> Result<Vec<ResearchRun>, CliError> {
    let api: Api<ResearchRun> = if all_namespaces {
        Api::all(cluster.client.clone())
    } else {
        Api::namespaced(cluster.client.clone(), &cluster.namespace)
    };
    let params = match schedule {
        Some(name) => ListParams::default()
            .labels(&format!("{}={name}", quarry_api::schedule::SCHEDULE_LABEL)),
        None => ListParams::default(),
    };
    let list = api.list(&params).await.map_err(|e| {
        cluster::classify(
            e,
            "list ResearchRuns",
            Target::Collection,
            &cluster.namespace,
            &cluster.url,
        )
    })?;
    let mut runs = list.items;
    runs.sort_by(|a, b| {
        (a.metadata.namespace.as_deref(), a.metadata.name.as_deref())
            .cmp(&(b.metadata.namespace.as_deref(), b.metadata.name.as_deref()))
    });
    Ok(runs)
}

/// `quarry list`.
pub async fn list(args: ListArgs) -> Result<(), CliError> {
    let cluster = cluster::connect(&args.kube).await?;
    let runs = list_runs(&cluster, args.all_namespaces, args.schedule.as_deref()).await?;
    match args.output {
        OutputFormat::Table | OutputFormat::Wide => {
            if runs.is_empty() {
                // kubectl says this on stderr, so scripts reading stdout see no rows.
                if args.all_namespaces {
                    eprintln!("No resources found");
                } else {
                    eprintln!("No resources found in {} namespace.", cluster.namespace);
                }
                return Ok(());
            }
            write_stdout(&table::runs_table(
                &runs,
                Timestamp::now(),
                args.output == OutputFormat::Wide,
                args.all_namespaces,
            ))
        }
        f => print_object(
            &serde_json::json!({
                "apiVersion": "v1", "kind": "List", "items": runs,
                "metadata": {"resourceVersion": ""}
            }),
            f,
        ),
    }
}

/// Flags of `quarry cancel`.
#[derive(clap::Args, Debug, Clone)]
pub struct CancelArgs {
    /// Name of the ResearchRun.
    pub name: String,
    /// Wait until the run has stopped.
    #[arg(long)]
    pub wait: bool,
    /// Give up waiting after this long.
    #[arg(long, default_value = "5m")]
    pub wait_timeout: String,
    /// Progress while waiting: auto, lines, none.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    #[command(flatten)]
    pub kube: KubeArgs,
}

/// The merge patch that cancels a run (`kubectl patch rr NAME --type merge -p` does the same).
pub fn cancel_patch() -> serde_json::Value {
    serde_json::json!({"spec": {"cancel": true}})
}

/// `quarry cancel NAME`: sets `spec.cancel`; the operator stops the research and the run ends
/// `Cancelled`.
pub async fn cancel(args: CancelArgs) -> Result<(), CliError> {
    let wait_timeout = parse_wait(&args.wait_timeout)?;
    let cluster = cluster::connect(&args.kube).await?;
    let run = get_run(&cluster, &args.name).await?;
    if run.is_finished() {
        return write_stdout(&format!(
            "researchrun.quarry.dev/{} already {}; nothing to cancel\n",
            args.name,
            run.phase()
        ));
    }
    if !run.spec.cancel {
        let api: Api<ResearchRun> = Api::namespaced(cluster.client.clone(), &cluster.namespace);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        api.patch(&args.name, &params, &Patch::Merge(cancel_patch()))
            .await
            .map_err(|e| {
                cluster::classify(
                    e,
                    &format!("cancel ResearchRun {}", args.name),
                    Target::Run(&args.name),
                    &cluster.namespace,
                    &cluster.url,
                )
            })?;
    }
    write_stdout(&format!(
        "researchrun.quarry.dev/{} cancel requested\n",
        args.name
    ))?;
    if !args.wait {
        return Ok(());
    }
    let finished = wait_for_end(
        &cluster,
        &args.name,
        wait_timeout,
        &args.wait_timeout,
        args.progress.resolve(),
    )
    .await?;
    // It may have finished on its own just before the cancel took effect.
    write_stdout(&format!("{}\n", table::outcome_line(&finished)))
}

#[cfg(test)]
mod tests;
