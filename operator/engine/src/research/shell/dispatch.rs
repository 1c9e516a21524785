//! The dispatch port of researcher work: where one researcher task runs.
//!
//! The executor keeps the run's state and the pure reducer; only the researcher may run elsewhere.
//! In-process dispatch (the default) runs it on this process's runtime. The Redis dispatcher
//! (`quarry_operator::queue::dispatch`) publishes it to `quarry worker` processes and turns what they report
//! back into the same events.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc;

use crate::research::agents::researcher::{ResearcherDeps, SteeringInbox, run_researcher};
use crate::research::machine::reducer::Event;
use crate::research::machine::state::{ResearcherReport, RunInput};

/// One researcher task as the executor hands it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResearcherJob {
    pub task_id: u32,
    /// The round the task belongs to: with the task id, the key of its one accepted result.
    pub round: u32,
    /// The agenda task.
    pub query: String,
    pub input: RunInput,
    /// Reports of siblings that finished before this task started.
    pub injected: Vec<ResearcherReport>,
    /// What the run had spent when the task started (a remote budget guard starts there).
    pub spent: crate::llm::Usage,
}

/// A researcher task in flight: resolves to `ResearcherFinished` or `ResearcherFailed`.
pub type ResearcherWork = Pin<Box<dyn Future<Output = Event> + Send + 'static>>;

/// Runs researcher tasks somewhere.
pub trait ResearcherDispatch: Send + Sync {
    /// Starts `job`. Called in command order, so tasks are handed out in agenda order. Usage goes
    /// to `events` as `ResearcherProgress` as it is spent; `steering` delivers sibling reports that
    /// finish while the task runs. Dropping the returned work abandons the task.
    fn start(
        &self,
        job: ResearcherJob,
        steering: SteeringInbox,
        events: mpsc::UnboundedSender<Event>,
    ) -> ResearcherWork;
}

/// Runs `job` on this process's runtime with `deps` (today's behaviour).
pub fn in_process(
    deps: ResearcherDeps,
    job: ResearcherJob,
    steering: SteeringInbox,
    events: mpsc::UnboundedSender<Event>,
) -> ResearcherWork {
    Box::pin(async move {
        let task_id = job.task_id;
        let progress = move |units: u32, usage: crate::llm::Usage| {
            let _ = events.send(Event::ResearcherProgress {
                task_id,
                units,
                usage,
            });
        };
        match run_researcher(
            &deps,
            &job.input,
            task_id,
            &job.query,
            &job.injected,
            Some(steering),
            &progress,
        )
        .await
        {
            Ok(report) => Event::ResearcherFinished { report },
            Err(failure) => Event::ResearcherFailed { task_id, failure },
        }
    })
}
