//! Standalone mode: `quarry run "question"` runs the same engine with no cluster,
//! stores artifacts on the local filesystem and writes the report to a file.

use quarry_engine::store::ArtifactStore;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::sync::watch;
use tracing::Instrument;

use quarry_api::ResearchProfile;
use quarry_engine::events::publish::{Observers, StreamPublisher};
use quarry_engine::llm::format_pico_usd;
use quarry_engine::llm::router::SpendGuard;
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::Earlier;
use quarry_engine::research::machine::state::{
    ApprovalPolicy, Decision, Limits, Mode, OutputKind, Phase, RunInput, RunState,
};
use quarry_engine::research::shell::executor::{self, Control, RunObserver};
use quarry_engine::store::local::LocalStore;
use quarry_engine::store::{report_file_name, sanitize_query};
use quarry_operator::engine_builder;
use quarry_operator::engine_builder::sources::secret_env_var;

pub mod error;
mod prompt;

pub use error::StandaloneError;
use prompt::ApprovalPrompt;

/// Largest earlier findings.json read (a report's findings are a few hundred KB).
const MAX_EARLIER_BYTES: u64 = 16 * 1024 * 1024;

/// Reads an earlier run's findings.json; its date is when the file was written.
pub fn read_earlier(path: &Path) -> Result<Earlier, StandaloneError> {
    let fail = |message: String| StandaloneError::Earlier {
        path: path.display().to_string(),
        message,
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if meta.len() > MAX_EARLIER_BYTES {
        return Err(fail(format!(
            "{} bytes; findings.json files are at most {MAX_EARLIER_BYTES}",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let findings: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| fail(format!("not a findings.json (invalid JSON: {e})")))?;
    if !findings["claims"].is_array() || !findings["sources"].is_array() {
        return Err(fail(
            "not a findings.json (no claims and sources): pass the findings.json of a quarry run"
                .into(),
        ));
    }
    let date = meta
        .modified()
        .map(|t| {
            chrono::DateTime::<chrono::Utc>::from(t)
                .format("%Y-%m-%d %H:%M UTC")
                .to_string()
        })
        .unwrap_or_else(|_| "an earlier run".into());
    Ok(Earlier::from_findings(&findings, &date))
}

/// Subdirectories that receive reports, in priority order, matched case-insensitively.
pub const REPORT_SUBDIRS: [&str; 6] = ["research", "docs", "doc", "ref", "references", "notes"];

/// What `quarry run` was asked to do.
#[derive(Debug, Clone)]
pub struct StandaloneOptions {
    pub query: String,
    pub context: Option<String>,
    pub profile: PathBuf,
    pub out: Option<PathBuf>,
    pub mode: Mode,
    /// Requested outputs; empty means the study report.
    pub outputs: Vec<OutputKind>,
    /// Items per idea/implementation output.
    pub top_k: u32,
    pub limits: Limits,
    /// Where checkpoints are kept; a run started again with the same directory resumes.
    pub state_dir: Option<PathBuf>,
    /// Redis for the search and page cache shared with other processes (`None`: in-memory).
    pub redis_url: Option<String>,
    /// Scale-out mode: researchers run on `quarry worker` processes through `redis_url`.
    pub workers: bool,
    /// `--approve`: the plan is printed and researched only when the user says yes.
    pub approve: bool,
    /// `--compare-with`: an earlier run's findings.json; the report ends with what changed.
    pub compare_with: Option<PathBuf>,
    /// `--output json`: the run's events go to these JSON lines instead of progress lines.
    pub events: Option<Arc<crate::cli::events::JsonEvents>>,
}

fn is_system_dir(dir: &Path) -> bool {
    const EXACT: [&str; 3] = ["/", "/var", "/home"];
    const TREES: [&str; 10] = [
        "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/proc", "/sys", "/dev", "/boot",
    ];
    EXACT.iter().any(|e| dir == Path::new(e)) || TREES.iter().any(|t| dir.starts_with(t))
}

/// The directory a report goes to: home or system directory → temp dir;
/// a recognised subdirectory → there; otherwise the working directory.
pub fn report_dir(cwd: &Path, home: Option<&Path>, temp: &Path) -> PathBuf {
    if home.is_some_and(|h| h == cwd) || is_system_dir(cwd) {
        return temp.to_path_buf();
    }
    if let Ok(entries) = std::fs::read_dir(cwd) {
        let dirs: Vec<(String, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| (e.file_name().to_string_lossy().to_lowercase(), e.path()))
            .collect();
        for wanted in REPORT_SUBDIRS {
            if let Some((_, path)) = dirs
                .iter()
                .filter(|(name, _)| name == wanted)
                .min_by(|a, b| a.1.cmp(&b.1))
            {
                return path.clone();
            }
        }
    }
    cwd.to_path_buf()
}

/// Creates `<sanitized-query>-<letter><digit>.md` exclusively in `dir`, redrawing the suffix on collision.
pub fn create_report_file(
    dir: &Path,
    query: &str,
    rng: &mut impl Rng,
) -> std::io::Result<(PathBuf, std::fs::File)> {
    // 260 suffixes exist; after that many collisions the directory is hopeless.
    for _ in 0..1000 {
        let letter = (b'a' + rng.random_range(0..26u8)) as char;
        let digit = rng.random_range(0..10u8);
        let path = dir.join(report_file_name(query, letter, digit));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "no free report file name",
    ))
}

/// How long `quarry run` stays quiet at most: after this long without a line, it prints a
/// heartbeat saying it is still working (a small model on 2 cores can take minutes per call).
pub const HEARTBEAT_AFTER: Duration = Duration::from_secs(15);

/// Decides when a heartbeat is due. Pure: the caller passes the time and the provenance log's
/// version ([`quarry_engine::llm::router::SpendGuard::logged`], bumped by every model answer, search and
/// page read).
#[derive(Debug, Clone, Copy)]
pub struct Heartbeat {
    /// When the last line (progress or heartbeat) was printed.
    last_line: Instant,
    /// When the run last showed a sign of life: an event, or a record logged.
    last_activity: Instant,
    /// The provenance log's version at `last_activity`.
    logged: u64,
}

impl Heartbeat {
    pub fn new(now: Instant) -> Self {
        Self {
            last_line: now,
            last_activity: now,
            logged: 0,
        }
    }

    /// A progress line was printed.
    pub fn printed(&mut self, now: Instant) {
        self.last_line = now;
        self.last_activity = now;
    }

    /// The run moved on without a line worth printing (a per-call usage update).
    pub fn activity(&mut self, now: Instant) {
        self.last_activity = now;
    }

    /// Called about every second: when nothing was printed for [`HEARTBEAT_AFTER`], returns how
    /// long the run has been waiting on its current step (and counts the heartbeat as a line).
    pub fn tick(&mut self, now: Instant, logged: u64) -> Option<Duration> {
        if logged != self.logged {
            self.logged = logged;
            self.last_activity = now;
        }
        if now.saturating_duration_since(self.last_line) < HEARTBEAT_AFTER {
            return None;
        }
        self.last_line = now;
        Some(now.saturating_duration_since(self.last_activity))
    }
}

/// The text of a heartbeat line, after the run's status. `waiting` is how long ago the last model
/// call, search or page read ended: the step in flight since then is nearly always a model call
/// (the only slow one on a local model), but the log cannot tell.
pub fn heartbeat_text(waiting: Duration) -> String {
    let secs = waiting.as_secs();
    if waiting >= HEARTBEAT_AFTER {
        format!("still working: a model call (or a search or page read) in flight for {secs} s")
    } else {
        format!("still working: the last model call, search or page read ended {secs} s ago")
    }
}

/// The status every progress line starts with: `[Researching]       10% | 1520 tok | $0.000000 | `.
fn status_prefix(state: &RunState) -> String {
    format!(
        "[{:>9}] {:>9} | {} tok | ${} | ",
        state.phase.to_string(),
        state.progress(),
        state.usage.input_tokens + state.usage.output_tokens,
        format_pico_usd(state.usage.cost_pico_usd)
    )
}

/// Prints one progress line per meaningful event to stderr, and a heartbeat when the run has
/// been quiet for [`HEARTBEAT_AFTER`] (see [`spawn_heartbeat`]).
pub struct ProgressPrinter {
    printed_units: Mutex<std::collections::BTreeMap<u32, u32>>,
    /// The status of the last event's state, for heartbeat lines (none before the first event).
    status: Mutex<Option<String>>,
    heartbeat: Mutex<Heartbeat>,
}

impl Default for ProgressPrinter {
    fn default() -> Self {
        Self {
            printed_units: Mutex::default(),
            status: Mutex::default(),
            heartbeat: Mutex::new(Heartbeat::new(Instant::now())),
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ProgressPrinter {
    /// Records an event at `now` and returns its progress line, if it deserves one.
    pub fn observe(&self, state: &RunState, event: &Event, now: Instant) -> Option<String> {
        let line = self.line(state, event);
        *locked(&self.status) = Some(status_prefix(state));
        let mut heartbeat = locked(&self.heartbeat);
        match line {
            Some(_) => heartbeat.printed(now),
            None => heartbeat.activity(now),
        }
        line
    }

    /// The heartbeat line due at `now`, if any; `logged` is the provenance log's version.
    pub fn heartbeat(&self, now: Instant, logged: u64) -> Option<String> {
        let status = locked(&self.status).clone()?;
        let waiting = locked(&self.heartbeat).tick(now, logged)?;
        Some(format!("{status}{}", heartbeat_text(waiting)))
    }

    /// The progress line for an event, if it deserves one.
    pub fn line(&self, state: &RunState, event: &Event) -> Option<String> {
        let text = match event {
            Event::Start => match state.phase {
                Phase::Planning => "planning the agenda".to_string(),
                Phase::Researching => "researching with 1 researcher".to_string(),
                _ => return None,
            },
            Event::PlanReady { tasks, .. } => {
                let list: Vec<String> = tasks
                    .iter()
                    .enumerate()
                    .map(|(i, t)| format!("  {}. {t}", i + 1))
                    .collect();
                format!("agenda of {} tasks:\n{}", tasks.len(), list.join("\n"))
            }
            Event::PlanFailed { failure, .. } => format!("planning failed: {}", failure.message),
            Event::ResearcherProgress { task_id, units, .. } => {
                let mut printed = locked(&self.printed_units);
                // One line per tool call; per-call usage updates alone are not worth a line.
                if printed.insert(*task_id, *units) == Some(*units) {
                    return None;
                }
                format!("researcher {task_id}: {units} tool calls")
            }
            Event::ResearcherFinished { report } => format!(
                "researcher {} finished: {} searches, {} pages read",
                report.task_id,
                report.searches,
                report.fetched.len()
            ),
            Event::ResearcherFailed {
                task_id, failure, ..
            } => format!(
                "researcher {task_id} failed ({}): {}",
                failure.reason, failure.message
            ),
            Event::Evaluated {
                decision: Decision::Synthesize,
                ..
            } => "evaluator: synthesize".to_string(),
            Event::Evaluated {
                decision: Decision::Delegate { queries },
                ..
            } => format!("evaluator: another round with {} tasks", queries.len()),
            Event::Synthesized { .. } => "report written".to_string(),
            Event::SynthesisFailed { failure, .. } => {
                format!("synthesis failed: {}", failure.message)
            }
            Event::Published => "report stored".to_string(),
            Event::TimeLimitReached => "time limit reached".to_string(),
            Event::Suspend | Event::Resume | Event::Cancel | Event::Recover => {
                format!("{event:?}").to_lowercase()
            }
            Event::SpendRecovered { usage } => {
                format!("resumed: {} model calls already paid for", usage.llm_calls)
            }
            Event::ApprovalWaitStarted { estimate, .. } => {
                let cost = estimate
                    .map(|(min, max)| {
                        format!(
                            " (estimated cost {} to {} USD)",
                            format_pico_usd(min),
                            format_pico_usd(max)
                        )
                    })
                    .unwrap_or_default();
                format!("the plan waits for approval{cost}")
            }
            Event::Approve { .. } if state.approval.approved => "plan approved".to_string(),
            Event::Approve { .. } => return None,
            Event::ApprovalTimedOut => "nobody approved the plan in time".to_string(),
        };
        Some(format!("{}{text}", status_prefix(state)))
    }
}

impl RunObserver for ProgressPrinter {
    fn on_change(&self, state: &RunState, event: &Event) {
        if let Some(line) = self.observe(state, event, Instant::now()) {
            eprintln!("{line}");
        }
    }
}

/// Stops the heartbeat task when the run is over (or its future dropped).
struct HeartbeatTask(tokio::task::JoinHandle<()>);

impl Drop for HeartbeatTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Checks every second whether `printer` is due a heartbeat and prints it to stderr, so a long
/// model call never leaves the terminal silent for more than [`HEARTBEAT_AFTER`].
fn spawn_heartbeat(printer: Arc<ProgressPrinter>, spend: Arc<SpendGuard>) -> HeartbeatTask {
    HeartbeatTask(tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Some(line) = printer.heartbeat(Instant::now(), spend.logged()) {
                eprintln!("{line}");
            }
        }
    }))
}

/// Key in the state directory recording where the report file went, so a rerun that resumes
/// (or finds the run finished) writes that file again instead of a second one.
pub const REPORT_PATH_KEY: &str = "report-path";
/// Namespace of standalone runs in the event stream.
pub const LOCAL_NAMESPACE: &str = "local";

/// The event stream name of a standalone run of `query`.
pub fn run_ref(query: &str) -> quarry_engine::events::RunRef {
    let uid: String = (0..16)
        .map(|_| char::from_digit(rand::rng().random_range(0..16u32), 16).unwrap_or('0'))
        .collect();
    quarry_engine::events::RunRef::new(LOCAL_NAMESPACE, sanitize_query(query), uid)
}

/// Runs one research question to a report file and returns its path.
pub async fn run(opts: StandaloneOptions) -> Result<PathBuf, StandaloneError> {
    let events = Arc::new(quarry_engine::events::memory::MemoryEvents::default());
    run_with_events(opts, events).await
}

/// [`run`], publishing the run's events (namespace [`LOCAL_NAMESPACE`], named after the
/// question) to `events` as well as printing progress lines.
pub async fn run_with_events(
    opts: StandaloneOptions,
    events: Arc<dyn quarry_engine::events::RunEvents>,
) -> Result<PathBuf, StandaloneError> {
    let path_text = opts.profile.display().to_string();
    let text = std::fs::read_to_string(&opts.profile).map_err(|e| StandaloneError::Profile {
        path: path_text.clone(),
        message: e.to_string(),
    })?;
    let profile = ResearchProfile::from_yaml(&text).map_err(|e| StandaloneError::Profile {
        path: path_text.clone(),
        message: e.to_string(),
    })?;
    // Every tier's key variable must be set (a key-less local server names none).
    for (_, tier) in profile.spec.models.iter() {
        if let Some(name) = &tier.api_key_env
            && std::env::var(name).is_err()
        {
            return Err(StandaloneError::MissingKey { name: name.clone() });
        }
    }
    let api_key = |tier: &quarry_api::ModelTier| {
        tier.api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
    };
    let state_dir = opts.state_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join("quarry-runs").join(format!(
            "{}-{}",
            sanitize_query(&opts.query),
            std::process::id()
        ))
    });
    let store = Arc::new(LocalStore::new(&state_dir));
    let services =
        quarry_operator::startup::services(opts.redis_url.as_deref(), None).map_err(|e| {
            StandaloneError::Wiring {
                path: path_text.clone(),
                source: engine_builder::WiringError {
                    field: "redisUrl".into(),
                    message: e.to_string(),
                },
            }
        })?;
    let secret = |r: &quarry_api::SecretKeyRef| std::env::var(secret_env_var(r)).ok();
    let inputs = engine_builder::Inputs {
        api_key: &api_key,
        secret: &secret,
        services: &services,
        managed_search: None,
        specialised_filter: None,
    };
    let mut engine = engine_builder::build_engine_with(&profile.spec, &inputs, store.clone(), None)
        .map_err(|source| StandaloneError::Wiring {
            path: path_text,
            source,
        })?;
    let mut input = RunInput::new(opts.query.clone(), opts.mode);
    input.context = opts.context.clone();
    input.limits = opts.limits.clone();
    if !opts.outputs.is_empty() {
        input.outputs = opts.outputs.clone();
    }
    input.top_k = opts.top_k.clamp(1, 20);
    if opts.approve {
        input.approval = Some(ApprovalPolicy::default());
    }
    if let Some(path) = &opts.compare_with {
        input = input.with_earlier(read_earlier(path)?);
    }
    // Same state directory, same question: resume instead of paying twice. A run that already
    // finished (killed after storing its report, before writing the file) only writes the file.
    let (state, finished) = match executor::load_checkpoint(store.as_ref()).await {
        Ok(Some(s)) if s.input.query == input.query && !s.phase.is_terminal() => {
            eprintln!("resuming from {}", state_dir.display());
            (s, false)
        }
        Ok(Some(s))
            if s.input.query == input.query && s.phase == Phase::Completed && s.published =>
        {
            eprintln!("already completed in {}", state_dir.display());
            (s, true)
        }
        _ => (RunState::new(input), false),
    };
    let final_state = if finished {
        state
    } else {
        let resuming = state.phase != Phase::Pending;
        let dispatch = if opts.workers {
            let dispatch =
                Arc::new(scale_out(&opts, &profile, &engine, store.as_ref(), resuming).await?);
            engine.dispatch = Some(dispatch.clone());
            Some(dispatch)
        } else {
            None
        };
        let (control_tx, control_rx) = watch::channel(Control::Run);
        let control_tx = Arc::new(control_tx);
        let run_name = sanitize_query(&opts.query);
        let span =
            tracing::info_span!("research_run", run = %run_name, namespace = LOCAL_NAMESPACE);
        engine.spend.set_run(LOCAL_NAMESPACE, &run_name);
        let publisher = Arc::new(StreamPublisher::new(events, run_ref(&opts.query)));
        engine.spend.set_tap(publisher.clone());
        // `--output json` prints the run's events as JSON lines instead of progress lines.
        let mut heartbeat = None;
        let printer: Arc<dyn RunObserver> = match &opts.events {
            Some(json) => {
                json.attach(engine.spend.clone());
                json.clone()
            }
            None => {
                let progress = Arc::new(ProgressPrinter::default());
                heartbeat = Some(spawn_heartbeat(progress.clone(), engine.spend.clone()));
                progress
            }
        };
        let mut observers = vec![printer, publisher.clone()];
        if opts.approve {
            observers.push(Arc::new(ApprovalPrompt::new(control_tx.clone())));
        }
        let observers = Observers(observers);
        let final_state = executor::run(Arc::new(engine), state, Arc::new(observers), control_rx)
            .instrument(span)
            .await;
        drop(heartbeat);
        publisher.finish(&final_state);
        if let Some(dispatch) = dispatch {
            dispatch.finish().await;
        }
        final_state
    };
    // A rerun writes the same report file as the first attempt, never a second one.
    let out = match opts.out.clone() {
        Some(out) => Some(out),
        None => store
            .get(REPORT_PATH_KEY)
            .await
            .ok()
            .flatten()
            .and_then(|b| String::from_utf8(b).ok())
            .map(PathBuf::from),
    };
    let opts = StandaloneOptions { out, ..opts };
    let record_path = |path: &Path| {
        let store = store.clone();
        let text = path.display().to_string();
        async move {
            if let Err(e) = store.put(REPORT_PATH_KEY, text.as_bytes()).await {
                tracing::warn!(error = %e, "report path not recorded");
            }
        }
    };
    eprintln!(
        "usage: {} input + {} output tokens in {} model calls, cost ${}, {} searches, {} pages read",
        final_state.usage.input_tokens,
        final_state.usage.output_tokens,
        final_state.usage.llm_calls,
        format_pico_usd(final_state.usage.cost_pico_usd),
        final_state.searches,
        final_state.pages_fetched
    );
    match final_state.phase {
        Phase::Completed => {}
        // Nothing usable was found: the honest report is written, and the exit status says so.
        Phase::Failed
            if final_state
                .final_report
                .as_ref()
                .is_some_and(|r| r.aborted && final_state.published) =>
        {
            let message = final_state
                .failure
                .as_ref()
                .map(|f| f.message.clone())
                .unwrap_or_default();
            let markdown = final_state
                .final_report
                .as_ref()
                .map(|r| r.markdown.clone())
                .unwrap_or_default();
            let path = write_report(opts.out.as_deref(), &opts.query, &markdown)?;
            record_path(&path).await;
            return Err(StandaloneError::NoEvidence { path, message });
        }
        Phase::Cancelled => return Err(StandaloneError::Cancelled),
        _ => {
            let f = final_state.failure.unwrap_or_else(|| {
                quarry_engine::research::machine::state::Failure::new(
                    "Unknown",
                    "the run stopped without a report",
                )
            });
            // Only storing failed: the report exists and was paid for.
            if f.reason == quarry_vocab::reasons::REPORT_STORE_FAILED
                && let Some(report) = final_state
                    .final_report
                    .as_ref()
                    .filter(|r| !r.markdown.trim().is_empty())
            {
                return Err(StandaloneError::ReportNotStored {
                    message: f.message,
                    saved: save_or_print(opts.out.as_deref(), &opts.query, &report.markdown),
                });
            }
            return Err(StandaloneError::RunFailed {
                reason: f.reason,
                message: f.message,
            });
        }
    }
    let Some(report) = final_state.final_report else {
        return Err(StandaloneError::RunFailed {
            reason: "NoReport".into(),
            message: "the run completed without a report".into(),
        });
    };
    match write_report(opts.out.as_deref(), &opts.query, &report.markdown) {
        Ok(path) => {
            record_path(&path).await;
            Ok(path)
        }
        Err(e) => Err(StandaloneError::ReportNotStored {
            message: e.to_string(),
            saved: save_or_print(None, &opts.query, &report.markdown),
        }),
    }
}

/// Artifact key of a standalone run's key in the work queue (kept so a resumed run keeps it).
const RUN_KEY_ARTIFACT: &str = "work-queue-run-key";

/// The Redis dispatcher of a standalone run in scale-out mode. Workers take API keys from their
/// own environment, as this process does.
async fn scale_out(
    opts: &StandaloneOptions,
    profile: &ResearchProfile,
    engine: &quarry_engine::research::shell::executor::Engine,
    store: &dyn quarry_engine::store::ArtifactStore,
    resuming: bool,
) -> Result<quarry_operator::queue::dispatch::RedisDispatch, StandaloneError> {
    let fail = |message: String| StandaloneError::WorkQueue { message };
    let url = opts.redis_url.as_deref().ok_or_else(|| {
        fail("it needs Redis: pass --redis-url redis://HOST:6379/0 or set QUARRY_REDIS_URL".into())
    })?;
    // A resumed run keeps its key (results of its running tasks still count); a new run in the
    // same directory gets its own.
    let stored = if resuming {
        store.get(RUN_KEY_ARTIFACT).await.ok().flatten()
    } else {
        None
    };
    let run = match stored {
        Some(key)
            if quarry_operator::queue::protocol::valid_run_key(&String::from_utf8_lossy(&key)) =>
        {
            String::from_utf8_lossy(&key).into_owned()
        }
        _ => {
            let key = quarry_operator::queue::dispatch::new_run_key();
            store
                .put(RUN_KEY_ARTIFACT, key.as_bytes())
                .await
                .map_err(|e| fail(format!("cannot record the run's key: {e}")))?;
            key
        }
    };
    let header = quarry_operator::queue::protocol::RunHeader {
        run,
        namespace: None,
        profile_name: profile
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "standalone".into()),
        profile: profile.spec.clone(),
        managed_search: None,
        specialised: None,
    };
    quarry_operator::queue::dispatch::RedisDispatch::connect(url, header, engine.spend.clone())
        .await
        .map_err(|e| fail(e.to_string()))
}

/// Saves a report that could not be stored with the run: to `out` (or the default report
/// directory), else prints it on stdout. Says where it went.
fn save_or_print(out: Option<&Path>, query: &str, markdown: &str) -> String {
    match write_report(out, query, markdown) {
        Ok(path) => format!("saved to {}", path.display()),
        Err(e) => {
            println!("{markdown}");
            format!("printed on stdout ({e})")
        }
    }
}

/// Whether `--out` names a directory: one that exists, or a path written with a trailing `/`
/// (created, as `mkdir -p` would).
pub fn out_is_directory(out: &Path) -> bool {
    if out.is_dir() {
        return true;
    }
    let written = out.as_os_str().to_string_lossy();
    written.ends_with(std::path::MAIN_SEPARATOR) && std::fs::create_dir_all(out).is_ok()
}

/// Writes the report to `out` (a file, or a directory to write it inside) or to the default
/// report directory, and says where it went.
fn write_report(
    out: Option<&Path>,
    query: &str,
    markdown: &str,
) -> Result<PathBuf, StandaloneError> {
    let werr = |path: &Path, source| StandaloneError::Write {
        path: path.display().to_string(),
        source,
    };
    let (path, mut file) = match out {
        // A directory given as `--out` is where the report goes, under its usual name.
        Some(dir) if out_is_directory(dir) => {
            create_report_file(dir, query, &mut rand::rng()).map_err(|e| werr(dir, e))?
        }
        Some(p) => (
            p.to_path_buf(),
            std::fs::File::create(p).map_err(|e| werr(p, e))?,
        ),
        None => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let dir = report_dir(&cwd, home.as_deref(), &std::env::temp_dir());
            create_report_file(&dir, query, &mut rand::rng()).map_err(|e| werr(&dir, e))?
        }
    };
    let full = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let body = format!(
        "{}\n\n---\n_Saved to {}_\n",
        markdown.trim_end(),
        full.display()
    );
    file.write_all(body.as_bytes())
        .map_err(|e| werr(&path, e))?;
    Ok(full)
}

#[cfg(test)]
mod tests;
