//! Pure: the next step for a run, from the run as stored and what this process holds for it.

use quarry_api::{ResearchRun, ResearchRunSpec};

use super::registry::{Presence, Signal};

/// What reconcile does with a run next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// The run is being deleted: drop what this process holds for it.
    Forget,
    /// The run finished: delete it once its TTL has passed.
    Finished,
    /// Research runs here: hand the spec's signal to the task.
    Signal(Signal),
    /// The task ended: its status writer lands the final status (nothing else writes it, so it
    /// is never written twice).
    TaskEnded,
    /// Nothing runs for it here and it is cancelled: it ends Cancelled as it stands, keeping
    /// the usage already recorded.
    Cancel,
    /// Nothing runs for it here and it is suspended.
    Suspend,
    /// Nothing runs for it here (new, stalled, resumed, or after a restart): look up its
    /// profile and start research.
    Start,
}

/// Pure: the next step for `run`, given the presence of its task.
pub fn next(run: &ResearchRun, presence: Presence) -> Next {
    if run.metadata.deletion_timestamp.is_some() {
        return Next::Forget;
    }
    if run.is_finished() {
        return Next::Finished;
    }
    match presence {
        Presence::Active => return Next::Signal(control_signal(&run.spec)),
        Presence::Finished => return Next::TaskEnded,
        Presence::Absent | Presence::Stopped => {}
    }
    if run.spec.cancel {
        Next::Cancel
    } else if run.spec.suspend {
        Next::Suspend
    } else {
        Next::Start
    }
}

/// Pure: what the executor of a run with this spec should do (cancel wins over suspend).
pub fn control_signal(spec: &ResearchRunSpec) -> Signal {
    if spec.cancel {
        Signal::Cancel
    } else if spec.suspend {
        Signal::Suspend
    } else if let Some(approval) = spec.approval.as_ref().filter(|a| a.required && a.approved) {
        Signal::Approve {
            agenda: approval.agenda.clone(),
        }
    } else {
        Signal::Run
    }
}

#[cfg(test)]
mod tests;
