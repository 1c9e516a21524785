//! The `quarry` binary: the operator, the standalone research CLI, the cluster CLI (also run as
//! `kubectl quarry`), the MCP server and the CRD generator.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use quarry::config::{ConfigError, Layer, Origin, Settings};
use quarry_engine::research::machine::state::{
    Limits, MAX_EXTRA_ROUNDS, OutputKind, TARGET_ROUNDS,
};

/// Quarry: a Kubernetes-native deep-research operator.
#[derive(Parser, Debug)]
#[command(name = "quarry", version, about)]
struct Cli {
    /// YAML config file (also QUARRY_CONFIG); layered as defaults < file < environment < flags.
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Log format: text or json.
    #[arg(long, global = true)]
    log_format: Option<String>,
    /// Log filter, e.g. `info` or `quarry=debug`.
    #[arg(long, global = true)]
    log_level: Option<String>,
    /// Hosts exempt from the egress guard, comma-separated (also QUARRY_EGRESS_EXEMPT_HOSTS),
    /// e.g. an in-cluster model server; loopback, private, metadata and cluster-internal
    /// addresses are refused for every other host.
    #[arg(long, global = true)]
    egress_exempt_hosts: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Research a question without a cluster and write the report to a Markdown file.
    Run(Box<RunArgs>),
    /// Print every CustomResourceDefinition as YAML.
    Crd,
    /// Run the Kubernetes operator (uses KUBECONFIG or the in-cluster config).
    Operator(OperatorArgs),
    /// Create a ResearchRun on the cluster from flags; --wait follows it to the end.
    Apply(Box<quarry::cli::runs::ApplyArgs>),
    /// Show one ResearchRun: phase, progress, cost, sources, age.
    Get(quarry::cli::runs::GetArgs),
    /// List ResearchRuns of a namespace (-A: all namespaces).
    List(quarry::cli::runs::ListArgs),
    /// Cancel a ResearchRun: its research stops and it ends Cancelled.
    Cancel(quarry::cli::runs::CancelArgs),
    /// Approve a ResearchRun's plan that waits for approval (--task replaces the agenda).
    Approve(quarry::cli::approval::ApproveArgs),
    /// Reject a ResearchRun's plan: the run is cancelled.
    Reject(quarry::cli::approval::RejectArgs),
    /// List ResearchSchedules, or show one with its runs: `quarry schedules [NAME]`.
    Schedules(quarry::cli::schedules::SchedulesArgs),
    /// Suspend a ResearchSchedule: no new runs until it is resumed.
    Suspend(quarry::cli::schedules::SuspendArgs),
    /// Resume a suspended ResearchSchedule.
    Resume(quarry::cli::schedules::SuspendArgs),
    /// Serve a web console for research runs (a cluster's, or standalone ones with --state-dir).
    Console(quarry::console::ConsoleArgs),
    /// Serve the Model Context Protocol on stdin/stdout for coding agents.
    Mcp(quarry::cli::mcp::McpArgs),
    /// Print a run's stored report: `quarry report NAME [-n NAMESPACE]`, or
    /// `quarry report --state-dir DIR` for a standalone run.
    Report(quarry::report_cli::ReportArgs),
    /// Run researcher tasks of scale-out mode from the Redis stream `quarry:tasks`.
    Worker(quarry_operator::queue::worker::WorkerArgs),
    /// Print a run's events; with -f, follow them live until the run ends.
    Logs(quarry::logs::LogsArgs),
    /// Run a JSONL question set through the standalone engine and score the reports.
    Eval(quarry::eval::EvalArgs),
}

#[derive(Args, Debug)]
struct OperatorArgs {
    /// Watch only these namespaces, comma-separated (default: all namespaces).
    #[arg(long, env = "QUARRY_NAMESPACE")]
    namespace: Option<String>,
    /// Redis URL for the search and page cache shared by replicas (env QUARRY_REDIS_URL).
    #[arg(long)]
    redis_url: Option<String>,
    /// Scale-out mode: researchers run on `quarry worker` processes through Redis.
    #[arg(long)]
    workers: bool,
    /// With --workers: file of the key runs' API keys are sealed with for the workers (the same
    /// file as theirs; the chart mounts it).
    #[arg(long, env = "QUARRY_SEALING_KEY_FILE")]
    sealing_key_file: Option<PathBuf>,
    /// Run without leader election (a single replica that needs no Lease permissions).
    #[arg(long, env = "QUARRY_NO_LEADER_ELECTION")]
    no_leader_election: bool,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = quarry_operator::leader_election::DEFAULT_LEASE_NAME)]
    lease_name: String,
    /// Namespace of the Lease (default: POD_NAMESPACE, else the kubeconfig's namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// Seconds a lease lasts unrenewed: a dead leader is replaced within this.
    #[arg(long, default_value_t = quarry_operator::leader_election::DEFAULT_LEASE_SECONDS, value_parser = clap::value_parser!(u64).range(2..=300))]
    lease_duration_seconds: u64,
    /// Object store for runs whose profile configures none (s3://bucket/prefix, gs://..., az://...);
    /// credentials from the environment (AWS_*, GOOGLE_*, AZURE_*).
    #[arg(long, env = "QUARRY_OBJECT_STORE_URL")]
    object_store_url: Option<String>,
    /// Image repositories a SearchEngine may run, comma-separated (any tag or digest of each;
    /// an entry ending in `/` allows everything under it); default SearXNG's own.
    #[arg(long, env = "QUARRY_ALLOWED_SEARCH_IMAGES", value_delimiter = ',')]
    allowed_search_images: Vec<String>,
    /// Serve the web console under /console on the same port (callers sign in with a bearer
    /// token; their own RBAC applies through SubjectAccessReviews).
    #[arg(long, env = "QUARRY_CONSOLE", default_value_t = true, action = clap::ArgAction::Set)]
    console: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The research question.
    query: String,
    /// ResearchProfile manifest (YAML) naming the model, search endpoint and fetch policy.
    #[arg(long)]
    profile: Option<String>,
    /// Report file, or a directory to write it in; by default a new file named after the
    /// question (see docs/usage.md).
    #[arg(long)]
    out: Option<PathBuf>,
    /// quick (one researcher) or deep (planner, rounds, evaluator).
    #[arg(long)]
    mode: Option<String>,
    /// Background text for the planner and researchers.
    #[arg(long)]
    context: Option<String>,
    /// Time limit, e.g. 30m.
    #[arg(long)]
    timeout: Option<String>,
    /// Cost limit in USD, e.g. 0.50.
    #[arg(long)]
    max_cost_usd: Option<String>,
    /// Directory for checkpoints; rerunning with the same directory resumes.
    #[arg(long)]
    state_dir: Option<String>,
    /// Redis URL for the search and page cache shared with other runs (env QUARRY_REDIS_URL).
    #[arg(long)]
    redis_url: Option<String>,
    /// Scale-out mode: researchers run on `quarry worker` processes through Redis.
    #[arg(long)]
    workers: bool,
    /// Print the planned agenda and its estimated cost, and ask before researching.
    #[arg(long)]
    approve: bool,
    /// The findings.json of an earlier run of this question: the report ends with what changed.
    #[arg(long, value_name = "FINDINGS_JSON")]
    compare_with: Option<std::path::PathBuf>,
    /// Outputs to produce, comma-separated: study, ideas, implementations (default study).
    #[arg(long, value_delimiter = ',', value_parser = parse_output)]
    outputs: Vec<OutputKind>,
    /// Items per ideas/implementations output (1..20).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    top_k: u32,
    /// Researchers running at once in deep mode.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=16))]
    max_concurrent_researchers: u32,
    /// Hard cap on rounds, including the evaluator's extra rounds (default targetRounds + 2).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10))]
    max_rounds: Option<u32>,
    /// Token limit (input + output) for the whole run.
    #[arg(long)]
    max_tokens: Option<u64>,
    /// `json`: stream the run's events to stdout as JSON lines (the last is `run_end`).
    #[arg(short = 'o', long, value_enum, default_value_t = RunOutput::Text)]
    output: RunOutput,
}

/// What `quarry run` prints on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RunOutput {
    /// Progress lines on stderr, the report path on stdout.
    Text,
    /// Event lines on stdout.
    Json,
}

fn parse_output(s: &str) -> Result<OutputKind, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "study" => Ok(OutputKind::Study),
        "ideas" | "idea" => Ok(OutputKind::Ideas),
        "implementations" | "implementation" => Ok(OutputKind::Implementations),
        other => Err(format!(
            "unknown output {other:?}: use study, ideas or implementations"
        )),
    }
}

fn settings(cli: &Cli) -> Result<Settings, ConfigError> {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut layers = vec![(Origin::Default, Layer::defaults())];
    let file = cli
        .config
        .clone()
        .or_else(|| env.get("QUARRY_CONFIG").map(PathBuf::from));
    if let Some(path) = file {
        layers.push((Origin::File, Layer::from_file(&path)?));
    }
    layers.push((Origin::Env, Layer::from_env(&env)));
    let mut flags = Layer {
        log_format: cli.log_format.clone(),
        log_level: cli.log_level.clone(),
        egress_exempt_hosts: cli.egress_exempt_hosts.clone(),
        ..Layer::default()
    };
    if let Command::Run(r) = &cli.command {
        flags.profile = r.profile.clone();
        flags.mode = r.mode.clone();
        flags.timeout = r.timeout.clone();
        flags.max_cost_usd = r.max_cost_usd.clone();
        flags.state_dir = r.state_dir.clone();
        flags.redis_url = r.redis_url.clone();
    }
    if let Command::Eval(e) = &cli.command {
        flags.profile = e.profile.clone();
        flags.mode = e.mode.clone();
        flags.timeout = e.timeout.clone();
        flags.max_cost_usd = e.max_cost_usd.clone();
    }
    if let Command::Operator(o) = &cli.command {
        flags.redis_url = o.redis_url.clone();
    }
    if let Command::Worker(w) = &cli.command {
        flags.redis_url = w.redis_url.clone();
    }
    if let Command::Mcp(m) = &cli.command {
        flags.profile = m.profile.clone();
    }
    layers.push((Origin::Flag, flags));
    Settings::resolve(&layers)
}

fn init_tracing(s: &Settings, console: bool) -> quarry_operator::tracing_setup::TelemetryGuard {
    match quarry_operator::tracing_setup::init_tracing(s.log_format, &s.log_level, console) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("quarry: logging: {e}");
            quarry_operator::tracing_setup::TelemetryGuard::default()
        }
    }
}

/// The hidden subcommand under which this binary runs as its own PDF helper.
const PDF_HELPER_COMMAND: &str = "__pdf-extract";

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|a| a == PDF_HELPER_COMMAND) {
        return quarry_engine::scrape::pdf_sandbox::helper_main(args);
    }
    // PDF text extraction runs in a child of this very binary, under memory and CPU limits.
    match std::env::current_exe() {
        Ok(exe) => {
            quarry_engine::scrape::pdf_sandbox::install(
                quarry_engine::scrape::pdf_sandbox::PdfSandbox::new(exe, &[PDF_HELPER_COMMAND]),
            );
        }
        Err(e) => eprintln!("quarry: PDF extraction stays in-process (no executable path: {e})"),
    }
    let cli = Cli::parse();
    let settings = match settings(&cli) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("quarry: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    // One egress policy for every outbound client of this process, from the operator's own
    // configuration: profiles can only narrow it.
    quarry_engine::egress::install(quarry_engine::egress::EgressPolicy::new(
        &settings.egress_exempt_hosts,
    ));
    match &cli.command {
        Command::Crd => match quarry_api::crds_yaml() {
            Ok(yaml) => {
                print!("{yaml}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("quarry: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Report(args) => quarry::report_cli::main(args),
        Command::Operator(args) => {
            let _traces = init_tracing(&settings, true);
            run_operator(args, &settings)
        }
        Command::Logs(args) => quarry::logs::main(args),
        Command::Apply(args) => quarry::cli::block_on(quarry::cli::runs::apply(*args.clone())),
        Command::Get(args) => quarry::cli::block_on(quarry::cli::runs::get(args.clone())),
        Command::List(args) => quarry::cli::block_on(quarry::cli::runs::list(args.clone())),
        Command::Cancel(args) => quarry::cli::block_on(quarry::cli::runs::cancel(args.clone())),
        Command::Approve(args) => {
            quarry::cli::block_on(quarry::cli::approval::approve(args.clone()))
        }
        Command::Console(args) => quarry::cli::block_on(quarry::console::serve(args.clone())),
        Command::Schedules(args) => {
            quarry::cli::block_on(quarry::cli::schedules::schedules(args.clone()))
        }
        Command::Suspend(args) => {
            quarry::cli::block_on(quarry::cli::schedules::set_suspend(args.clone(), true))
        }
        Command::Resume(args) => {
            quarry::cli::block_on(quarry::cli::schedules::set_suspend(args.clone(), false))
        }
        Command::Reject(args) => quarry::cli::block_on(quarry::cli::approval::reject(args.clone())),
        Command::Mcp(args) => {
            // stdout carries the protocol: logs (stderr) only when asked for.
            let console = std::env::var_os("QUARRY_LOG_LEVEL").is_some() || cli.log_level.is_some();
            let _traces = console.then(|| init_tracing(&settings, true));
            quarry::cli::block_on(quarry::cli::mcp::serve(args.clone(), settings))
        }
        Command::Run(args) => {
            // Standalone runs print progress lines; logs stay quiet unless asked for, while
            // spans still go to an OTLP endpoint when one is configured.
            let console = std::env::var_os("QUARRY_LOG_LEVEL").is_some() || cli.log_level.is_some();
            let otlp =
                std::env::var_os(quarry_operator::tracing_setup::OTLP_ENDPOINT_ENV).is_some();
            let _traces = (console || otlp).then(|| init_tracing(&settings, console));
            run_standalone(args, settings)
        }
        Command::Worker(args) => {
            let _traces = init_tracing(&settings, true);
            run_worker(args, &settings)
        }
        Command::Eval(args) => {
            // As `quarry run`: one line per question on stderr, logs only when asked for.
            let console = std::env::var_os("QUARRY_LOG_LEVEL").is_some() || cli.log_level.is_some();
            let otlp =
                std::env::var_os(quarry_operator::tracing_setup::OTLP_ENDPOINT_ENV).is_some();
            let _traces = (console || otlp).then(|| init_tracing(&settings, console));
            quarry::eval::main(args, settings.clone())
        }
    }
}

fn run_worker(args: &quarry_operator::queue::worker::WorkerArgs, settings: &Settings) -> ExitCode {
    let config = match quarry_operator::queue::worker::WorkerConfig::from_args(
        args,
        settings.redis_url.clone(),
        settings.bind,
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("quarry: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(quarry_operator::queue::worker::run_worker(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quarry: worker failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_operator(args: &OperatorArgs, settings: &Settings) -> ExitCode {
    let config = quarry_operator::startup::OperatorConfig {
        listen: settings.bind.to_string(),
        namespace: args.namespace.clone(),
        redis_url: settings.redis_url.clone(),
        workers: args.workers,
        sealing_key_file: args.sealing_key_file.clone(),
        leader: (!args.no_leader_election).then(|| quarry_operator::startup::LeaderSettings {
            lease_name: args.lease_name.clone(),
            namespace: args.lease_namespace.clone(),
            lease_seconds: args.lease_duration_seconds,
            // Renew a third of the way into the lease (every 5 s of the default 15 s): a renewal
            // then has until a sixth of the lease before expiry (the step-down margin) to land,
            // 7.5 s; with 2.5 s, a loaded API server made a healthy leader step down.
            grace_seconds: (args.lease_duration_seconds * 2 / 3).max(1),
        }),
        object_store_url: args.object_store_url.clone(),
        allowed_search_images: args.allowed_search_images.clone(),
        extra_routes: args.console.then(|| {
            let build: quarry_operator::startup::ExtraRoutes =
                std::sync::Arc::new(quarry::console::in_cluster);
            build
        }),
    };
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(quarry_operator::startup::run_operator(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("quarry: operator failed: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_standalone(args: &RunArgs, settings: Settings) -> ExitCode {
    let Some(profile) = settings.profile.clone() else {
        let message = "setting `profile` is required: pass --profile FILE or set QUARRY_PROFILE";
        if args.output == RunOutput::Json {
            println!("{}", quarry::cli::events::failure_json(message));
        }
        eprintln!("quarry: {message}");
        return ExitCode::from(2);
    };
    let limits = Limits {
        max_concurrent_researchers: args.max_concurrent_researchers,
        max_rounds: args.max_rounds.unwrap_or(TARGET_ROUNDS + MAX_EXTRA_ROUNDS),
        max_cost_pico_usd: settings
            .max_cost_usd
            .as_deref()
            .and_then(|v| quarry_api::values::parse_usd_micros(v).ok())
            .map(|m| m.saturating_mul(1_000_000)),
        max_tokens: args.max_tokens,
        timeout_secs: settings.timeout.map(|d| d.as_secs().max(1)),
    };
    let opts = quarry::standalone::StandaloneOptions {
        query: args.query.clone(),
        context: args.context.clone(),
        profile,
        out: args.out.clone(),
        mode: settings.mode,
        outputs: args.outputs.clone(),
        top_k: args.top_k,
        limits,
        state_dir: settings.state_dir.clone(),
        redis_url: settings.redis_url.clone(),
        workers: args.workers,
        approve: args.approve,
        compare_with: args.compare_with.clone(),
        events: (args.output == RunOutput::Json).then(quarry::cli::events::JsonEvents::stdout),
    };
    let events = opts.events.clone();
    let Some(runtime) = runtime() else {
        return ExitCode::FAILURE;
    };
    let result = runtime.block_on(quarry::standalone::run(opts));
    if let Some(events) = events {
        events.finish(&result);
    }
    match result {
        Ok(path) => {
            if args.output == RunOutput::Text {
                println!("{}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quarry: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The multi-threaded async runtime, or `None` after saying why it could not start.
fn runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("quarry: cannot start the async runtime: {e}");
            None
        }
    }
}
