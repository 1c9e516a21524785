//! The executor: interprets the reducer's commands with real I/O and feeds results back as events.
//!
//! One executor drives one run. It owns the state; work runs in spawned tasks that report back
//! through a channel, so suspension, cancellation and the time limit are handled promptly.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tracing::{Instrument, info, warn};

use super::checkpoint::Writer as CheckpointWriter;
use super::dispatch::{self, ResearcherDispatch, ResearcherJob};
use super::journal::EventLog;
use crate::llm::router::{RESEARCH_TASK, SpendGuard};
use crate::llm::{ChatModel, Usage};
use crate::research::agents::lead;
use crate::research::agents::researcher::{ResearcherDeps, UrlPool};
use crate::research::machine::reducer::{Command, Event, reduce};
use crate::research::machine::state::{Failure, Phase, ResearcherReport, RunState};
use crate::research::writing::{merged, report};
use crate::scrape::Fetcher;
use crate::sources::{Gatherer, SpecialisedSources};
use crate::store::{ArtifactStore, StoreError};
use quarry_vocab::reasons;

pub use super::journal::MAX_EVENTS_BYTES;
use crate::research::agents::settings::EngineSettings;
use crate::store::keys::{EVENTS_KEY, FINDINGS_KEY, PROGRESS_KEY, REPORT_KEY};

/// The engine's ports and settings: everything a run talks to.
pub struct Engine {
    pub model: Arc<dyn ChatModel>,
    /// The profile's budget tier, asked when the primary's agenda is unusable.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    Run,
    Suspend,
    Cancel,
    /// Run, with the plan approved; `agenda`, when given, replaces the planned tasks.
    Approve {
        agenda: Option<Vec<String>>,
    },
}

impl Control {
    /// The events that bring a run in line with this control; `suspended` is where it stands
    /// (an approval of a suspended run also resumes it, a running one needs no resume event).
    fn events(&self, suspended: bool) -> Vec<Event> {
        match self {
            Control::Run => vec![Event::Resume],
            Control::Suspend => vec![Event::Suspend],
            Control::Cancel => vec![Event::Cancel],
            Control::Approve { agenda } => {
                let mut events = vec![Event::Approve {
                    agenda: agenda.clone(),
                }];
                if suspended {
                    events.push(Event::Resume);
                }
                events
            }
        }
    }
}

/// Unix seconds now (the approval clock; a clock before 1970 counts as 1970).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
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

/// Serializes a checkpoint (see [`super::checkpoint`]), for stores written by hand.
pub fn encode_checkpoint(state: &RunState) -> Result<Vec<u8>, serde_json::Error> {
    super::checkpoint::encode(state, 0).map(|(bytes, _)| bytes)
}

/// Parses and verifies one checkpoint.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<RunState, String> {
    super::checkpoint::decode(bytes).map(|(state, _)| state)
}

/// Loads the run's latest usable checkpoint from its store, if there is one (falling back to the
/// previous checkpoint when the latest fails its hash).
pub async fn load_checkpoint(store: &dyn ArtifactStore) -> Result<Option<RunState>, StoreError> {
    Ok(super::checkpoint::load(store).await?.map(|l| l.state))
}

struct Runner {
    engine: Arc<Engine>,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    tx: mpsc::UnboundedSender<Event>,
    pool: Arc<UrlPool>,
    work: Vec<AbortHandle>,
    /// The provenance log (and cost journal) of the run.
    events: Arc<EventLog>,
    checkpoints: CheckpointWriter,
    /// Researcher reports already in the progressive Markdown.
    progress_written: usize,
    /// Steering channels of running researchers, by task id.
    steering: std::collections::BTreeMap<u32, mpsc::UnboundedSender<ResearcherReport>>,
}

impl Drop for Runner {
    /// An executor dropped mid-run (its task aborted: leadership lost, shutdown) takes its work
    /// down with it, so no orphaned researcher keeps calling models.
    fn drop(&mut self) {
        for h in self.work.drain(..) {
            h.abort();
        }
    }
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
            // The journal is durable before anyone can see the run ended: an operator that
            // wrote the terminal status first and died during the journal's retries would
            // leave a finished run whose journal misses its last calls.
            if self.state.phase.is_terminal() {
                flush_journal(&self.events).await;
            }
        }
        self.observer.on_change(&self.state, &event);
        for cmd in cmds {
            self.execute(cmd).await;
        }
    }

    /// A finished report goes to every researcher still running (steering); a
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
                    // Reports of siblings that finished earlier are injected.
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
                    // Quick mode returns the researcher's report; partial reports cost nothing more.
                    let report =
                        report::compose(&self.state, &merged::merged_reports(&self.state), partial);
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
                // The progress report travels with the checkpoint (one request where the store
                // can): it changes exactly when a researcher's report joins the state.
                let progress = (self.state.reports.len() != self.progress_written)
                    .then(|| report::progress_markdown(&self.state));
                let extra: Vec<(&str, &[u8])> = progress
                    .as_deref()
                    .map(|m| vec![(PROGRESS_KEY, m.as_bytes())])
                    .unwrap_or_default();
                // Losing a checkpoint costs redone work after a crash, not correctness.
                match self
                    .checkpoints
                    .write_with(engine.store.as_ref(), &self.state, &extra)
                    .await
                {
                    Ok(_) => {
                        if progress.is_some() {
                            self.progress_written = self.state.reports.len();
                        }
                        super::failpoint::after_checkpoint(&self.state)
                    }
                    Err(e) => warn!(error = %e, "checkpoint not written"),
                }
                if let Err(e) = self.events.commit().await {
                    warn!(error = %e, "event log not written");
                }
            }
        }
    }
}

/// Stores the report, retrying briefly: the report is written exactly once, by this step only.
async fn publish(store: &dyn ArtifactStore, markdown: &str, findings: &str) -> Event {
    // A resumed run that already stored this very report (crash after the write, before the
    // checkpoint saying so) does not write it again.
    if let (Ok(Some(r)), Ok(Some(f))) = (store.get(REPORT_KEY).await, store.get(FINDINGS_KEY).await)
        && r == markdown.as_bytes()
        && f == findings.as_bytes()
    {
        return Event::Published;
    }
    let mut last = String::new();
    // About 20 s in all: long enough to outlast an API server restart (a run whose report met
    // one was failed after 3.5 s), short enough that a store that refuses for good is reported.
    for attempt in 0..8u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis((250 * 2u64.pow(attempt)).min(4000))).await;
        }
        // Findings first, then the report (one request where both share a ConfigMap).
        let result = store
            .put_many(&[
                (FINDINGS_KEY, findings.as_bytes()),
                (REPORT_KEY, markdown.as_bytes()),
            ])
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

/// Writes the calls not yet in the cost journal before the run ends, retried for about 20 s
/// like the report: the journal is what a resumed run and an audit trust, and its last write
/// may meet the same API-server restart the report's did (status then counted a call the
/// journal never got).
async fn flush_journal(events: &EventLog) {
    let mut last = String::new();
    for attempt in 0..8u32 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis((250 * 2u64.pow(attempt)).min(4000))).await;
        }
        match events.commit().await {
            Ok(_) => return,
            Err(e) => last = e.to_string(),
        }
    }
    warn!(error = %last, "cost journal not written at the end of the run");
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
    // Read even for a run with no checkpoint: quick mode writes its first checkpoint only after
    // its researcher, so an attempt killed mid-researcher leaves paid calls in the journal and
    // no checkpoint (seen on a real API server: a killed leader's calls vanished from usage).
    let earlier_events = engine
        .store
        .get(EVENTS_KEY)
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    // Calls answered after the checkpoint (the killed attempt's) are in the journal: the run
    // keeps paying for them, exactly once.
    let recovered = super::journal::recovered_spend(&earlier_events);
    if let Some(r) = &recovered {
        let (next, _) = reduce(state, Event::SpendRecovered { usage: r.total });
        state = next;
    }
    // The router refuses calls whose worst case would pass the run's limits; a resumed run
    // keeps what it already spent.
    engine.spend.configure(
        state.input.limits.max_cost_pico_usd,
        state.input.limits.max_tokens,
        &state.usage,
    );
    match recovered.and_then(|r| r.by_model) {
        Some(by_model) => engine.spend.restore_by_model(&by_model),
        None => engine.spend.restore_by_model(&state.usage_by_model),
    }
    let events = EventLog::attach(engine.store.clone(), engine.spend.clone(), earlier_events);
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
        events,
        checkpoints: CheckpointWriter::new(),
        progress_written: 0,
    };
    let initial = control.borrow_and_update().clone();
    match &initial {
        Control::Cancel => runner.apply(Event::Cancel).await,
        Control::Suspend => runner.apply(Event::Suspend).await,
        // Approved before the plan exists (a GitOps commit may approve with the run itself).
        Control::Approve { .. } => runner.apply(Event::Approve { agenda: None }).await,
        Control::Run => {}
    }
    runner.apply(first).await;
    // A checkpoint that waits for approval goes on when the owner approved it meanwhile.
    if let Control::Approve { agenda } = &initial {
        runner
            .apply(Event::Approve {
                agenda: agenda.clone(),
            })
            .await;
    }
    // A checkpoint taken while suspended, started by an owner that wants it running, resumes.
    if !matches!(initial, Control::Cancel | Control::Suspend) && runner.state.suspended {
        runner.apply(Event::Resume).await;
    }
    let mut control_open = true;
    let mut timed_out = false;
    while !runner.state.phase.is_terminal() {
        if runner.state.approval.waiting && runner.state.approval.waiting_since.is_none() {
            let settings = &runner.engine.settings;
            let estimate = crate::research::machine::state::estimate_cost(
                &runner.state.usage,
                runner.state.agenda.len(),
                settings.researcher.max_turns,
                settings.max_summaries,
                runner.state.input.limits.max_cost_pico_usd,
            );
            runner
                .apply(Event::ApprovalWaitStarted {
                    since: unix_now(),
                    estimate,
                })
                .await;
        }
        let sleep = async {
            match deadline {
                Some(d) if !timed_out => tokio::time::sleep_until(d).await,
                _ => std::future::pending().await,
            }
        };
        // The approval clock is the wall clock: a restarted operator keeps the original deadline.
        let approval = &runner.state.approval;
        let approval_left = match (
            approval.waiting,
            approval.waiting_since,
            runner.state.input.approval.and_then(|a| a.timeout_secs),
        ) {
            (true, Some(since), Some(timeout)) => {
                Some((since.saturating_add(timeout as i64) - unix_now()).max(0) as u64)
            }
            _ => None,
        };
        let approval_deadline = async move {
            match approval_left {
                Some(left) => tokio::time::sleep(Duration::from_secs(left)).await,
                None => std::future::pending().await,
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
                let wanted = control.borrow_and_update().clone();
                for event in wanted.events(runner.state.suspended) {
                    runner.apply(event).await;
                }
            }
            () = approval_deadline => runner.apply(Event::ApprovalTimedOut).await,
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
    flush_journal(&runner.events).await;
    let placeholder = RunState::new(runner.state.input.clone());
    std::mem::replace(&mut runner.state, placeholder)
}
