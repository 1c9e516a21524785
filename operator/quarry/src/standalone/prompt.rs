//! `quarry run --approve`: the planned agenda and its estimated cost on the terminal, and a
//! question; research starts only on a yes, anything else cancels the run.

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use quarry_engine::llm::format_pico_usd;
use quarry_engine::research::machine::reducer::Event;
use quarry_engine::research::machine::state::RunState;
use quarry_engine::research::shell::executor::{Control, RunObserver};
use tokio::sync::watch;

/// Asks once, when the plan starts waiting, on its own thread (stdin blocks).
pub struct ApprovalPrompt {
    control: Arc<watch::Sender<Control>>,
    asked: AtomicBool,
}

impl ApprovalPrompt {
    /// A prompt that answers through `control`.
    pub fn new(control: Arc<watch::Sender<Control>>) -> Self {
        Self {
            control,
            asked: AtomicBool::new(false),
        }
    }
}

/// Pure: the question printed for a waiting plan.
pub fn question(state: &RunState) -> String {
    let mut text = String::from("\nThe plan:\n");
    for (i, task) in state.agenda.iter().enumerate() {
        text.push_str(&format!("  {}. {}\n", i + 1, task.query));
    }
    match state.approval.estimated_cost_pico {
        Some((min, max)) => text.push_str(&format!(
            "Estimated cost: {} to {} USD.\n",
            format_pico_usd(min),
            format_pico_usd(max)
        )),
        None => text.push_str("Estimated cost: not known yet (no priced call was made).\n"),
    }
    text.push_str("Research this plan? [y/N] ");
    text
}

/// Pure: the control for an answer (`None`: no answer, the input ended).
pub fn decide(answer: Option<&str>) -> Control {
    match answer.map(|a| a.trim().to_ascii_lowercase()) {
        Some(a) if a == "y" || a == "yes" => Control::Approve { agenda: None },
        _ => Control::Cancel,
    }
}

impl RunObserver for ApprovalPrompt {
    fn on_change(&self, state: &RunState, event: &Event) {
        if !matches!(event, Event::ApprovalWaitStarted { .. }) || !state.approval.waiting {
            return;
        }
        if self.asked.swap(true, Ordering::SeqCst) {
            return;
        }
        let text = question(state);
        let control = self.control.clone();
        std::thread::spawn(move || {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
            drop(err);
            let mut line = String::new();
            let answer = match std::io::stdin().lock().read_line(&mut line) {
                Ok(n) if n > 0 => Some(line),
                _ => None,
            };
            let decision = decide(answer.as_deref());
            if decision == Control::Cancel {
                eprintln!("not approved: the run is cancelled, nothing was searched");
            }
            let _ = control.send(decision);
        });
    }
}

#[cfg(test)]
mod tests;
