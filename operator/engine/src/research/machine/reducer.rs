//! The pure state machine of a run: `reduce(state, event) -> (state, commands)`.
//!
//! No I/O, no clock, no randomness: the executor interprets the commands and feeds
//! their results back as events. Every transition of a run's phases lives here.

use serde::{Deserialize, Serialize};

use super::state::{
    Decision, Failure, FinalReport, LimitHit, Mode, Phase, ResearcherReport, RunState, Task,
    TaskState, UNITS_PER_RESEARCHER,
};
use crate::llm::Usage;
use crate::research::writing::report;
use quarry_vocab::reasons;

/// Something that happened to a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// The run was accepted and may begin.
    Start,
    /// The planner produced an agenda.
    PlanReady { tasks: Vec<String>, usage: Usage },
    /// Planning failed for good (after repair retries), or the query was refused.
    PlanFailed { failure: Failure, usage: Usage },
    /// A researcher used more of its budget: tool-call units so far and the usage of
    /// the model calls made since its last progress event. All researcher spend is accounted
    /// here, as it happens, so limits apply mid-task and aborted work is still paid for.
    ResearcherProgress {
        task_id: u32,
        units: u32,
        usage: Usage,
    },
    /// A researcher finished its task.
    ResearcherFinished { report: ResearcherReport },
    /// A researcher gave up (its spend was already accounted by progress events).
    ResearcherFailed { task_id: u32, failure: Failure },
    /// The lead evaluator decided.
    Evaluated { decision: Decision, usage: Usage },
    /// The final report is ready (not yet stored).
    Synthesized { report: FinalReport, usage: Usage },
    /// Synthesis failed for good.
    SynthesisFailed { failure: Failure, usage: Usage },
    /// The final report was stored.
    Published,
    /// The executor's clock says the time limit passed.
    TimeLimitReached,
    /// `spec.suspend` became true.
    Suspend,
    /// `spec.suspend` became false.
    Resume,
    /// The run was deleted or cancelled.
    Cancel,
    /// The run was restored from a checkpoint after a restart: in-flight work is redone.
    Recover,
    /// The provenance log of a restarted run records this much spend in all: calls answered
    /// after the checkpoint (by work that is now redone) were paid for too.
    SpendRecovered { usage: Usage },
    /// The executor's clock when the plan started waiting for approval (Unix seconds), and the
    /// research's estimated cost range in pico-USD.
    ApprovalWaitStarted {
        since: i64,
        estimate: Option<(u64, u64)>,
    },
    /// The approver said yes; `agenda`, when given, replaces the planned tasks.
    Approve { agenda: Option<Vec<String>> },
    /// The plan waited longer than `approval.timeout`.
    ApprovalTimedOut,
}

/// Work the executor must do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Ask the coordinator for an agenda.
    Plan,
    /// Run one researcher on one agenda task.
    StartResearcher { task_id: u32 },
    /// Ask the lead evaluator to decide after a round.
    Evaluate,
    /// Produce the final report; `partial` reports are assembled without a model call.
    Synthesize { partial: bool },
    /// Store the final report (exactly once).
    Publish,
    /// Abort every piece of work in flight.
    StopAll,
    /// Persist the state (paid work finished).
    Checkpoint,
}

/// Applies one event to a state, returning the next state and the commands to run.
pub fn reduce(mut state: RunState, event: Event) -> (RunState, Vec<Command>) {
    let mut cmds = Vec::new();
    if state.phase.is_terminal() {
        account_late_spend(&mut state, &event);
    } else {
        apply(&mut state, event, &mut cmds);
    }
    (state, normalize(cmds))
}

/// Work that was already in flight when the run ended was still paid for: its usage counts.
fn account_late_spend(state: &mut RunState, event: &Event) {
    match event {
        Event::ResearcherProgress { usage, .. }
        | Event::PlanReady { usage, .. }
        | Event::PlanFailed { usage, .. }
        | Event::Evaluated { usage, .. }
        | Event::Synthesized { usage, .. }
        | Event::SynthesisFailed { usage, .. } => state.usage.add(usage),
        _ => {}
    }
}

fn apply(state: &mut RunState, event: Event, cmds: &mut Vec<Command>) {
    match event {
        Event::Start => {
            if state.phase == Phase::Pending && !state.suspended {
                begin(state, cmds);
            }
        }
        Event::PlanReady { tasks, usage } => {
            state.usage.add(&usage);
            if state.phase != Phase::Planning {
                return;
            }
            if tasks.is_empty() {
                fail(
                    state,
                    cmds,
                    Failure::new(
                        reasons::PLAN_UNPARSEABLE,
                        "the planner returned an empty agenda",
                    ),
                );
                return;
            }
            state.round = 1;
            add_tasks(state, tasks);
            cmds.push(Command::Checkpoint);
            if needs_approval(state) {
                // The agenda is shown and nothing is searched until a person decides.
                state.approval.waiting = true;
                return;
            }
            state.phase = Phase::Researching;
            if !check_limits(state, cmds) && !state.suspended {
                start_ready(state, cmds);
            }
        }
        Event::PlanFailed { failure, usage } => {
            state.usage.add(&usage);
            if state.phase == Phase::Planning {
                match limit_of(&failure) {
                    Some(hit) => stop_at_limit(state, cmds, hit),
                    None => fail(state, cmds, failure),
                }
            }
        }
        Event::ResearcherProgress {
            task_id,
            units,
            usage,
        } => {
            state.usage.add(&usage);
            if let Some(t) = state.agenda.iter_mut().find(|t| t.id == task_id) {
                t.units = t.units.max(units);
            }
            if state.phase == Phase::Researching && usage != Usage::default() {
                check_limits(state, cmds);
            }
        }
        Event::ResearcherFinished { report } => {
            state.searches += report.searches;
            state.pages_fetched += report.fetched.len() as u32;
            for s in &report.fetched {
                state.fetched_urls.insert(s.url.clone());
            }
            let Some(task) = state.agenda.iter_mut().find(|t| t.id == report.task_id) else {
                return;
            };
            if task.state == TaskState::Done {
                return;
            }
            task.state = TaskState::Done;
            task.units = UNITS_PER_RESEARCHER;
            state.reports.push(report);
            cmds.push(Command::Checkpoint);
            after_researcher(state, cmds);
        }
        Event::ResearcherFailed { task_id, failure } => {
            let Some(task) = state.agenda.iter_mut().find(|t| t.id == task_id) else {
                return;
            };
            if task.state != TaskState::Running {
                return;
            }
            task.state = TaskState::Failed;
            task.error = Some(format!("{}: {}", failure.reason, failure.message));
            // The router refused a call that would pass a budget: the run stops at that limit.
            if let Some(hit) = limit_of(&failure) {
                if state.phase == Phase::Researching {
                    stop_at_limit(state, cmds, hit);
                }
                return;
            }
            if state.input.mode == Mode::Quick {
                fail(state, cmds, failure);
                return;
            }
            after_researcher(state, cmds);
        }
        Event::Evaluated { decision, usage } => {
            state.usage.add(&usage);
            if state.phase != Phase::Researching || !round_complete(state) {
                return;
            }
            cmds.push(Command::Checkpoint);
            if check_limits(state, cmds) {
                return;
            }
            match decision {
                Decision::Delegate { queries }
                    if !queries.is_empty() && state.round < state.input.limits.max_rounds =>
                {
                    state.round += 1;
                    add_tasks(state, queries);
                    if !state.suspended {
                        start_ready(state, cmds);
                    }
                }
                _ => synthesize(state, cmds, false),
            }
        }
        Event::Synthesized { report, usage } => {
            state.usage.add(&usage);
            if state.phase == Phase::Synthesizing && state.final_report.is_none() {
                state.final_report = Some(report);
                cmds.push(Command::Checkpoint);
                if !state.suspended {
                    cmds.push(Command::Publish);
                }
            }
        }
        Event::SynthesisFailed { failure, usage } => {
            state.usage.add(&usage);
            if state.phase == Phase::Synthesizing {
                match limit_of(&failure) {
                    // No budget left for the writer: assemble the partial report without a call.
                    Some(hit) if state.limit_hit.is_none() => stop_at_limit(state, cmds, hit),
                    _ => fail(state, cmds, failure),
                }
            }
        }
        Event::Published => {
            if state.phase == Phase::Synthesizing && state.final_report.is_some() {
                state.published = true;
                cmds.push(Command::Checkpoint);
                if state.final_report.as_ref().is_some_and(|r| r.aborted) {
                    // The honest report is stored, but the run found nothing: it did not succeed.
                    state.phase = Phase::Failed;
                    let message = if state.fetched_urls.is_empty() {
                        format!(
                            "no usable source was found after {} search(es); an honest \"unable to research\" report was stored instead of an invented one",
                            state.searches
                        )
                    } else {
                        format!(
                            "none of the {} page(s) read answers the question (after {} search(es)); an honest \"unable to research\" report listing what was searched and read was stored instead of an invented one",
                            state.fetched_urls.len(),
                            state.searches
                        )
                    };
                    state.failure = Some(Failure::new(reasons::NO_EVIDENCE, message));
                } else {
                    state.phase = Phase::Completed;
                }
            }
        }
        Event::TimeLimitReached => {
            stop_at_limit(state, cmds, LimitHit::Time);
        }
        Event::Suspend => {
            if !state.suspended {
                state.suspended = true;
                requeue_running(state);
                cmds.push(Command::StopAll);
                cmds.push(Command::Checkpoint);
            }
        }
        Event::Resume => {
            if state.suspended {
                state.suspended = false;
                continue_phase(state, cmds);
            }
        }
        Event::SpendRecovered { usage } => recover_spend(state, &usage),
        Event::ApprovalWaitStarted { since, estimate } => {
            if state.approval.waiting && state.approval.waiting_since.is_none() {
                state.approval.waiting_since = Some(since);
                state.approval.estimated_cost_pico = estimate;
                cmds.push(Command::Checkpoint);
            }
        }
        Event::Approve { agenda } => {
            state.approval.approved = true;
            if !state.approval.waiting {
                return;
            }
            state.approval.waiting = false;
            if let Some(agenda) = agenda.filter(|a| !a.is_empty()) {
                state.agenda.clear();
                state.budget_units = 0;
                add_tasks(state, agenda);
            }
            state.phase = Phase::Researching;
            cmds.push(Command::Checkpoint);
            if !check_limits(state, cmds) && !state.suspended {
                start_ready(state, cmds);
            }
        }
        Event::ApprovalTimedOut => {
            if state.approval.waiting {
                let after = state
                    .input
                    .approval
                    .and_then(|a| a.timeout_secs)
                    .map(|s| format!(" within {s} s"))
                    .unwrap_or_default();
                fail(
                    state,
                    cmds,
                    Failure::new(
                        reasons::APPROVAL_TIMEOUT,
                        format!("nobody approved the plan{after}; nothing was searched"),
                    ),
                );
            }
        }
        Event::Recover => {
            requeue_running(state);
            if !state.suspended {
                continue_phase(state, cmds);
            }
        }
        Event::Cancel => {
            state.phase = Phase::Cancelled;
            state.failure = Some(Failure::new(reasons::CANCELLED, "the run was cancelled"));
            requeue_running(state);
            cmds.push(Command::StopAll);
            cmds.push(Command::Checkpoint);
        }
    }
}

/// Raises the run's spend to what its journal recorded; the journal never undercounts (every
/// answer is on record before it is used), the checkpoint may lag it.
fn recover_spend(state: &mut RunState, journal: &Usage) {
    if journal.llm_calls > state.usage.llm_calls
        || (journal.llm_calls == state.usage.llm_calls
            && journal.cost_pico_usd > state.usage.cost_pico_usd)
    {
        state.usage = *journal;
    }
}

/// One checkpoint per transition is enough: it persists the state after the whole event.
fn normalize(cmds: Vec<Command>) -> Vec<Command> {
    let checkpoint = cmds.contains(&Command::Checkpoint);
    let mut out: Vec<Command> = Vec::with_capacity(cmds.len());
    if checkpoint {
        out.push(Command::Checkpoint);
    }
    for c in cmds {
        if c != Command::Checkpoint && !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Leaves Pending: quick mode goes straight to one researcher, deep mode plans.
fn begin(state: &mut RunState, cmds: &mut Vec<Command>) {
    match state.input.mode {
        Mode::Quick => {
            state.round = 1;
            let query = state.input.query.clone();
            add_tasks(state, vec![query]);
            if needs_approval(state) {
                // Quick mode's plan is the question itself; it waits like a planned agenda.
                state.phase = Phase::Planning;
                state.approval.waiting = true;
                cmds.push(Command::Checkpoint);
                return;
            }
            state.phase = Phase::Researching;
            start_ready(state, cmds);
        }
        Mode::Deep => {
            state.phase = Phase::Planning;
            cmds.push(Command::Plan);
        }
    }
}

/// True when the run requires approval and has none yet.
fn needs_approval(state: &RunState) -> bool {
    state.input.approval.is_some() && !state.approval.approved
}

/// Re-issues the work of the current phase (after resume or recovery).
fn continue_phase(state: &mut RunState, cmds: &mut Vec<Command>) {
    match state.phase {
        Phase::Pending => begin(state, cmds),
        // A plan waiting for approval is not made again.
        Phase::Planning if state.approval.waiting => {}
        Phase::Planning => cmds.push(Command::Plan),
        Phase::Researching => {
            if round_complete(state) {
                after_round(state, cmds);
            } else {
                start_ready(state, cmds);
            }
        }
        Phase::Synthesizing => match &state.final_report {
            Some(_) if !state.published => cmds.push(Command::Publish),
            Some(_) => {}
            None => cmds.push(Command::Synthesize {
                partial: state.limit_hit.is_some(),
            }),
        },
        Phase::Completed | Phase::Failed | Phase::Cancelled => {}
    }
}

fn add_tasks(state: &mut RunState, queries: Vec<String>) {
    let first_id = state.agenda.iter().map(|t| t.id + 1).max().unwrap_or(0);
    let round = state.round;
    for (id, query) in (first_id..).zip(queries) {
        state.agenda.push(Task {
            id,
            query,
            round,
            state: TaskState::Pending,
            units: 0,
            error: None,
        });
        state.budget_units += UNITS_PER_RESEARCHER;
    }
}

/// Starts pending tasks of the current round up to the concurrency limit.
fn start_ready(state: &mut RunState, cmds: &mut Vec<Command>) {
    let limit = state.input.limits.max_concurrent_researchers.max(1) as usize;
    let running = state
        .agenda
        .iter()
        .filter(|t| t.state == TaskState::Running)
        .count();
    let round = state.round;
    let free = limit.saturating_sub(running);
    for task in state
        .agenda
        .iter_mut()
        .filter(|t| t.round == round && t.state == TaskState::Pending)
        .take(free)
    {
        task.state = TaskState::Running;
        cmds.push(Command::StartResearcher { task_id: task.id });
    }
}

fn round_complete(state: &RunState) -> bool {
    state
        .agenda
        .iter()
        .filter(|t| t.round == state.round)
        .all(|t| matches!(t.state, TaskState::Done | TaskState::Failed))
}

fn after_researcher(state: &mut RunState, cmds: &mut Vec<Command>) {
    if state.phase != Phase::Researching || check_limits(state, cmds) || state.suspended {
        return;
    }
    if round_complete(state) {
        after_round(state, cmds);
    } else {
        start_ready(state, cmds);
    }
}

/// After a round: the error check (did every researcher fail?) is pure; the rest is the
/// evaluator's call. A later round whose researchers all failed ends research with what the
/// earlier rounds found: the 1.5B model's third round wrote nothing, and the run failed with
/// four researchers' reports in hand.
fn after_round(state: &mut RunState, cmds: &mut Vec<Command>) {
    let round = state.round;
    let all_failed = state
        .agenda
        .iter()
        .filter(|t| t.round == round)
        .all(|t| t.state == TaskState::Failed);
    if all_failed && !state.reports.is_empty() {
        synthesize(state, cmds, false);
        return;
    }
    if all_failed {
        let detail = state
            .agenda
            .iter()
            .filter(|t| t.round == round)
            .filter_map(|t| t.error.clone())
            .next()
            .unwrap_or_default();
        fail(
            state,
            cmds,
            Failure::new(
                reasons::ALL_RESEARCHERS_FAILED,
                format!("every researcher of round {round} failed; first error: {detail}"),
            ),
        );
        return;
    }
    match state.input.mode {
        Mode::Quick => synthesize(state, cmds, false),
        Mode::Deep if state.round >= state.input.limits.max_rounds => {
            synthesize(state, cmds, false)
        }
        Mode::Deep => cmds.push(Command::Evaluate),
    }
}

/// Enters Synthesizing; with no usable source the honest abort report replaces synthesis.
fn synthesize(state: &mut RunState, cmds: &mut Vec<Command>, partial: bool) {
    state.phase = Phase::Synthesizing;
    if state.fetched_urls.is_empty() || nothing_relevant_read(state) {
        state.final_report = Some(report::abort_report(state));
        cmds.push(Command::Checkpoint);
        cmds.push(Command::Publish);
    } else {
        cmds.push(Command::Synthesize { partial });
    }
}

/// True when researchers read pages but every one of them missed the task (its passages
/// matched nothing, or left out a subject the task names): a report made of them would answer
/// nothing, so the run ends with the honest report instead.
fn nothing_relevant_read(state: &RunState) -> bool {
    !state.reports.is_empty() && state.reports.iter().all(|r| !r.found_anything())
}

fn fail(state: &mut RunState, cmds: &mut Vec<Command>, failure: Failure) {
    state.phase = Phase::Failed;
    state.failure = Some(failure);
    requeue_running(state);
    cmds.push(Command::StopAll);
    cmds.push(Command::Checkpoint);
}

/// Work in flight is redone later, so running tasks go back to Pending.
fn requeue_running(state: &mut RunState) {
    for t in state
        .agenda
        .iter_mut()
        .filter(|t| t.state == TaskState::Running)
    {
        t.state = TaskState::Pending;
    }
}

/// Checks cost and token limits after usage changed; stops the run when one is passed.
fn check_limits(state: &mut RunState, cmds: &mut Vec<Command>) -> bool {
    if state.limit_hit.is_some() {
        return true;
    }
    let limits = &state.input.limits;
    let tokens = state.usage.input_tokens + state.usage.output_tokens;
    let hit = if limits
        .max_cost_pico_usd
        .is_some_and(|max| state.usage.cost_pico_usd >= max)
    {
        Some(LimitHit::Cost)
    } else if limits.max_tokens.is_some_and(|max| tokens >= max) {
        Some(LimitHit::Tokens)
    } else {
        None
    };
    match hit {
        Some(hit) => {
            stop_at_limit(state, cmds, hit);
            true
        }
        None => false,
    }
}

/// Stops cleanly at a limit: what was found so far becomes a partial report.
fn stop_at_limit(state: &mut RunState, cmds: &mut Vec<Command>, hit: LimitHit) {
    match state.phase {
        Phase::Pending | Phase::Planning => {
            state.limit_hit = Some(hit);
            fail(
                state,
                cmds,
                Failure::new(
                    hit.reason(),
                    format!(
                        "the run reached its {} limit before research began",
                        limit_name(hit)
                    ),
                ),
            );
        }
        Phase::Researching => {
            state.limit_hit = Some(hit);
            cmds.push(Command::Checkpoint);
            let had_running = state.agenda.iter().any(|t| t.state == TaskState::Running);
            requeue_running(state);
            if had_running {
                cmds.push(Command::StopAll);
            }
            if state.reports.is_empty() {
                fail(
                    state,
                    cmds,
                    Failure::new(
                        hit.reason(),
                        format!(
                            "the run reached its {} limit before any researcher finished",
                            limit_name(hit)
                        ),
                    ),
                );
            } else {
                synthesize(state, cmds, true);
            }
        }
        Phase::Synthesizing => {
            if state.limit_hit.is_none() && state.final_report.is_none() {
                state.limit_hit = Some(hit);
                cmds.push(Command::StopAll);
                cmds.push(Command::Synthesize { partial: true });
            }
        }
        Phase::Completed | Phase::Failed | Phase::Cancelled => {}
    }
}

/// The limit a failure reports, when the router refused a call for a budget.
fn limit_of(failure: &Failure) -> Option<LimitHit> {
    match failure.reason.as_str() {
        reasons::COST_LIMIT => Some(LimitHit::Cost),
        reasons::TOKEN_LIMIT => Some(LimitHit::Tokens),
        _ => None,
    }
}

fn limit_name(hit: LimitHit) -> &'static str {
    match hit {
        LimitHit::Cost => "cost",
        LimitHit::Tokens => "token",
        LimitHit::Time => "time",
    }
}

#[cfg(test)]
mod tests;
