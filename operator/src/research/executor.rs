//! The executor: interprets the reducer's commands with real I/O and feeds results back as events.
//!
//! One executor drives one run. It owns the state; work runs in spawned tasks that report back
//! through a channel, so suspension, cancellation and the time limit are handled promptly.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tracing::{Instrument, info, warn};

use super::dispatch::{self, ResearcherDispatch, ResearcherJob};
use super::lead;
use super::reducer::{Command, Event, reduce};
use super::report;
use super::researcher::{ResearcherDeps, ResearcherSettings, UrlPool};
use super::state::{Failure, Phase, ResearcherReport, RunState, reasons};
use crate::llm::router::{RESEARCH_TASK, SpendGuard};
use crate::llm::{ChatModel, Usage};
use crate::scrape::Fetcher;
use crate::sources::{Gatherer, SpecialisedSources};
use crate::store::{ArtifactStore, StoreError};

/// Artifact key of the engine checkpoint.
pub const CHECKPOINT_KEY: &str = "checkpoint.json";
/// Artifact key of the final Markdown report.
pub const REPORT_KEY: &str = "report.md";
/// Artifact key of the machine-readable findings.
pub const FINDINGS_KEY: &str = "findings.json";
/// Artifact key of the provenance log: one JSON line per model call (DESIGN §4).
pub const EVENTS_KEY: &str = "events.jsonl";
/// Largest provenance log written, in bytes; older lines are dropped first (about 10k calls,
/// a few hundred KB once the ConfigMap store gzips it).
pub const MAX_EVENTS_BYTES: usize = 4 * 1024 * 1024;

/// Tunables of the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    pub researcher: ResearcherSettings,
    /// Output cap of planner and evaluator calls.
    pub lead_max_tokens: u32,
    /// Output cap of each synthesis (output) call.
    pub synthesis_max_tokens: u32,
    /// Summarize every page read before synthesis (seed 004's compressor, deep mode).
    pub summarize_sources: bool,
    /// Pages summarized at most; the rest reach synthesis through the researchers' reports.
    pub max_summaries: usize,
    /// Summary and judge calls in flight at once.
    pub summary_concurrency: usize,
    /// Output cap of a summary call.
    pub summary_max_tokens: u32,
    /// Let the model judge each cited claim after the lexical check.
    pub model_judge: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            researcher: ResearcherSettings::default(),
            lead_max_tokens: 1024,
            synthesis_max_tokens: 4096,
            summarize_sources: true,
            max_summaries: 24,
            summary_concurrency: 4,
            summary_max_tokens: 400,
            model_judge: false,
        }
    }
}

/// The engine's ports and settings: everything a run talks to.
pub struct Engine {
    pub model: Arc<dyn ChatModel>,
    /// The profile's budget tier, asked when the primary's agenda is unusable (seed 001).
    pub budget_model: Option<Arc<dyn ChatModel>>,
    /// The run's budget as the model router enforces it (configured when the run starts).
    pub spend: Arc<SpendGuard>,
    pub gatherer: Arc<dyn Gatherer>,
    /// Security advisories and Stack Exchange for researchers; `None` offers neither tool.
    pub specialised: Option<Arc<SpecialisedSources>>,
    pub fetcher: Arc<dyn Fetcher>,
    pub store: Arc<dyn ArtifactStore>,
    pub settings: EngineSettings,
    /// Where researchers run; `None` runs them in this process.
    pub dispatch: Option<Arc<dyn ResearcherDispatch>>,
}

/// What the owner of a run wants it to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    Run,
    Suspend,
    Cancel,
}

/// Receives every state change (status writers, progress printers, metrics).
pub trait RunObserver: Send + Sync {
    /// Called after each event was applied.
    fn on_change(&self, state: &RunState, event: &Event);
}

/// An observer that ignores everything.
pub struct NoopObserver;

impl RunObserver for NoopObserver {
    fn on_change(&self, _state: &RunState, _event: &Event) {}
}

/// Serializes a checkpoint: the SHA-256 of the state JSON on the first line, the JSON after it.
pub fn encode_checkpoint(state: &RunState) -> Result<Vec<u8>, serde_json::Error> {
    let json = serde_json::to_vec(state)?;
    let digest = hex::encode(Sha256::digest(&json));
    let mut out = Vec::with_capacity(json.len() + 65);
    out.extend_from_slice(digest.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&json);
    Ok(out)
}

/// Parses and verifies a checkpoint written by [`encode_checkpoint`].
pub fn decode_checkpoint(bytes: &[u8]) -> Result<RunState, String> {
    let split = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("no digest line")?;
    let (digest, json) = (&bytes[..split], &bytes[split + 1..]);
    let actual = hex::encode(Sha256::digest(json));
    if digest != actual.as_bytes() {
        return Err("sha256 mismatch: the checkpoint was altered or truncated".to_string());
    }
    serde_json::from_slice(json).map_err(|e| format!("checkpoint JSON: {e}"))
}

/// Loads the run's last checkpoint from its store, if there is one.
pub async fn load_checkpoint(store: &dyn ArtifactStore) -> Result<Option<RunState>, StoreError> {
    match store.get(CHECKPOINT_KEY).await? {
        None => Ok(None),
        Some(bytes) => decode_checkpoint(&bytes)
            .map(Some)
            .map_err(|message| StoreError::Corrupt {
                key: CHECKPOINT_KEY.to_string(),
                message,
            }),
    }
}

struct Runner {
    engine: Arc<Engine>,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    tx: mpsc::UnboundedSender<Event>,
    pool: Arc<UrlPool>,
    work: Vec<AbortHandle>,
    /// The provenance log a resumed run found in its store.
    earlier_events: Vec<u8>,
    /// Steering channels of running researchers, by task id (seed 000).
    steering: std::collections::BTreeMap<u32, mpsc::UnboundedSender<ResearcherReport>>,
}

impl Runner {
    async fn apply(&mut self, event: Event) {
        self.steer(&event);
        let before = self.state.phase;
        let placeholder = RunState::new(self.state.input.clone());
        let (next, cmds) = reduce(
            std::mem::replace(&mut self.state, placeholder),
            event.clone(),
        );
        self.state = next;
        // The router's per-model ledger is the source of truth for usage by model.
        let by_model = self.engine.spend.by_model();
        if !by_model.is_empty() {
            self.state.usage_by_model = by_model;
        }
        if before != self.state.phase {
            info!(from = %before, to = %self.state.phase, "phase changed");
        }
        self.observer.on_change(&self.state, &event);
        for cmd in cmds {
            self.execute(cmd).await;
        }
    }

    /// A finished report goes to every researcher still running (seed 000's steering); a
    /// researcher that ended leaves the steering list.
    fn steer(&mut self, event: &Event) {
        match event {
            Event::ResearcherFinished { report } => {
                self.steering.remove(&report.task_id);
                self.steering
                    .retain(|_, tx| tx.send(report.clone()).is_ok());
            }
            Event::ResearcherFailed { task_id, .. } => {
                self.steering.remove(task_id);
            }
            _ => {}
        }
    }

    /// Spawns work inside its own span (a child of the run's span).
    fn spawn_in<F>(&mut self, span: tracing::Span, fut: F)
    where
        F: std::future::Future<Output = Event> + Send + 'static,
    {
        self.spawn(fut.instrument(span));
    }

    fn spawn<F>(&mut self, fut: F)
    where
        F: std::future::Future<Output = Event> + Send + 'static,
    {
        let tx = self.tx.clone();
        // Work runs in the run's span so its logs carry the run's fields.
        let handle = tokio::spawn(
            async move {
                let event = fut.await;
                let _ = tx.send(event);
            }
            .in_current_span(),
        );
        self.work.retain(|h| !h.is_finished());
        self.work.push(handle.abort_handle());
    }

    async fn execute(&mut self, cmd: Command) {
        let engine = self.engine.clone();
        match cmd {
            Command::Plan => {
                let state = self.state.clone();
                self.spawn_in(tracing::info_span!("plan"), async move {
                    lead::plan(
                        engine.model.as_ref(),
                        engine.budget_model.as_deref(),
                        &state,
                        engine.settings.lead_max_tokens,
                    )
                    .await
                });
            }
            Command::StartResearcher { task_id } => {
                let Some((task, round)) = self
                    .state
                    .agenda
                    .iter()
                    .find(|t| t.id == task_id)
                    .map(|t| (t.query.clone(), t.round))
                else {
                    return;
                };
                let job = ResearcherJob {
                    task_id,
                    round,
                    query: task,
                    input: self.state.input.clone(),
                    // Reports of siblings that finished earlier are injected (seed 000).
                    injected: self.state.reports.clone(),
                    spent: self.state.usage,
                };
                let (steer_tx, steer_rx) = mpsc::unbounded_channel();
                self.steering.insert(task_id, steer_tx);
                let events = self.tx.clone();
                // Remote researchers (scale-out mode) or in-process ones (the default).
                let work = match &engine.dispatch {
                    Some(dispatch) => dispatch.start(job, steer_rx, events),
                    None => {
                        let deps = ResearcherDeps {
                            model: engine.model.clone(),
                            gatherer: engine.gatherer.clone(),
                            fetcher: engine.fetcher.clone(),
                            pool: self.pool.clone(),
                            settings: engine.settings.researcher.clone(),
                            specialised: engine.specialised.clone(),
                        };
                        dispatch::in_process(deps, job, steer_rx, events)
                    }
                };
                let span = tracing::info_span!("researcher", task_id, round = self.state.round);
                // The task id marks the researcher's lines in the provenance log.
                self.spawn_in(span, RESEARCH_TASK.scope(task_id, work));
            }
            Command::Evaluate => {
                let state = self.state.clone();
                let span = tracing::info_span!("evaluate", round = self.state.round);
                self.spawn_in(span, async move {
                    lead::evaluate(
                        engine.model.as_ref(),
                        &state,
                        engine.settings.lead_max_tokens,
                    )
                    .await
                });
            }
            Command::Synthesize { partial } => {
                if partial || lead::synthesis_is_free(&self.state) {
                    // Quick mode returns the researcher's report (seed 000); partial reports cost nothing more.
                    let report =
                        report::compose(&self.state, &lead::merged_reports(&self.state), partial);
                    let _ = self.tx.send(Event::Synthesized {
                        report,
                        usage: Usage::default(),
                    });
                } else {
                    let state = self.state.clone();
                    self.spawn_in(tracing::info_span!("synthesize"), async move {
                        lead::synthesize(engine.model.as_ref(), &state, &engine.settings).await
                    });
                }
            }
            Command::Publish => {
                let Some(report) = self.state.final_report.clone() else {
                    return;
                };
                self.spawn(async move {
                    publish(
                        engine.store.as_ref(),
                        &report.markdown,
                        &report.findings_json,
                    )
                    .await
                });
            }
            Command::StopAll => {
                for h in self.work.drain(..) {
                    h.abort();
                }
                self.steering.clear();
            }
            Command::Checkpoint => {
                match encode_checkpoint(&self.state) {
                    Ok(bytes) => {
                        if let Err(e) = engine.store.put(CHECKPOINT_KEY, &bytes).await {
                            // Losing a checkpoint costs redone work after a crash, not correctness.
                            warn!(error = %e, "checkpoint not written");
                        }
                    }
                    Err(e) => warn!(error = %e, "checkpoint not serialized"),
                }
                // The provenance log travels with the checkpoints (coalesced the same way).
                let (calls, _) = engine.spend.calls();
                let sources = engine.spend.sources();
                if !calls.is_empty() || !sources.is_empty() {
                    // A resumed run keeps the log of the calls made before the restart.
                    let mut log = self.earlier_events.clone();
                    // Model calls and searches/reads interleaved by time (RFC 3339 in UTC with
                    // fixed precision sorts as text).
                    let mut lines: Vec<(&str, serde_json::Result<Vec<u8>>)> = calls
                        .iter()
                        .map(|c| (c.time.as_str(), serde_json::to_vec(c)))
                        .chain(
                            sources
                                .iter()
                                .map(|r| (r.time.as_str(), serde_json::to_vec(r))),
                        )
                        .collect();
                    lines.sort_by(|a, b| a.0.cmp(b.0));
                    for (_, line) in lines {
                        if let Ok(line) = line {
                            log.extend_from_slice(&line);
                            log.push(b'\n');
                        }
                    }
                    if log.len() > MAX_EVENTS_BYTES {
                        // Keep the newest lines, cut at a line boundary.
                        let cut = log.len() - MAX_EVENTS_BYTES;
                        let start = log[cut..]
                            .iter()
                            .position(|b| *b == b'\n')
                            .map_or(log.len(), |p| cut + p + 1);
                        log.drain(..start);
                    }
                    if let Err(e) = engine.store.put(EVENTS_KEY, &log).await {
                        warn!(error = %e, "event log not written");
                    }
                }
            }
        }
    }
}

/// Stores the report, retrying briefly: the report is written exactly once, by this step only.
async fn publish(store: &dyn ArtifactStore, markdown: &str, findings: &str) -> Event {
    let mut last = String::new();
    for attempt in 0..4u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(250 * 2u64.pow(attempt))).await;
        }
        let result = async {
            store.put(FINDINGS_KEY, findings.as_bytes()).await?;
            store.put(REPORT_KEY, markdown.as_bytes()).await
        }
        .await;
        match result {
            Ok(()) => return Event::Published,
            Err(e) => last = e.to_string(),
        }
    }
    Event::SynthesisFailed {
        failure: Failure::new(
            reasons::REPORT_STORE_FAILED,
            format!("the report could not be stored: {last}"),
        ),
        usage: Usage::default(),
    }
}

/// Drives a run to a terminal phase (or until cancelled) and returns its final state.
///
/// A state in phase Pending starts; any other non-terminal state is recovered from its
/// checkpoint: finished work is kept, work that was in flight is redone.
pub async fn run(
    engine: Arc<Engine>,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    mut control: watch::Receiver<Control>,
) -> RunState {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut state = state;
    if let Some(trace_id) = crate::telemetry::trace_id_of(&tracing::Span::current()) {
        state.trace_id = Some(trace_id);
    }
    // The router refuses calls whose worst case would pass the run's limits; a resumed run
    // keeps what it already spent.
    engine.spend.configure(
        state.input.limits.max_cost_pico_usd,
        state.input.limits.max_tokens,
        &state.usage,
    );
    engine.spend.restore_by_model(&state.usage_by_model);
    let earlier_events = if state.phase == Phase::Pending {
        Vec::new()
    } else {
        engine
            .store
            .get(EVENTS_KEY)
            .await
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    let pool = Arc::new(UrlPool::with(state.fetched_urls.iter().cloned()));
    let first = if state.phase == Phase::Pending {
        Event::Start
    } else {
        Event::Recover
    };
    let deadline = state
        .input
        .limits
        .timeout_secs
        .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    let mut runner = Runner {
        engine,
        state,
        observer,
        tx,
        pool,
        work: Vec::new(),
        steering: Default::default(),
        earlier_events,
    };
    let initial = *control.borrow_and_update();
    match initial {
        Control::Cancel => runner.apply(Event::Cancel).await,
        Control::Suspend => runner.apply(Event::Suspend).await,
        Control::Run => {}
    }
    runner.apply(first).await;
    // A checkpoint taken while suspended, started by an owner that wants it running, resumes.
    if initial == Control::Run && runner.state.suspended {
        runner.apply(Event::Resume).await;
    }
    let mut control_open = true;
    let mut timed_out = false;
    while !runner.state.phase.is_terminal() {
        let sleep = async {
            match deadline {
                Some(d) if !timed_out => tokio::time::sleep_until(d).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            Some(event) = rx.recv() => runner.apply(event).await,
            changed = control.changed(), if control_open => {
                if changed.is_err() {
                    // The owner went away; keep running to completion.
                    control_open = false;
                    continue;
                }
                let event = match *control.borrow_and_update() {
                    Control::Run => Event::Resume,
                    Control::Suspend => Event::Suspend,
                    Control::Cancel => Event::Cancel,
                };
                runner.apply(event).await;
            }
            () = sleep => {
                timed_out = true;
                runner.apply(Event::TimeLimitReached).await;
            }
        }
    }
    for h in runner.work.drain(..) {
        h.abort();
    }
    // Events already sent by stopped work still carry spend that must be counted.
    while let Ok(event) = rx.try_recv() {
        runner.apply(event).await;
    }
    runner.state
}
