//! Unit tests of `prompt`.

use super::*;
use quarry_engine::research::machine::state::{Mode, RunInput};

#[test]
fn only_a_yes_approves() {
    assert_eq!(decide(Some("y\n")), Control::Approve { agenda: None });
    assert_eq!(decide(Some(" YES ")), Control::Approve { agenda: None });
    assert_eq!(decide(Some("n\n")), Control::Cancel);
    assert_eq!(decide(Some("\n")), Control::Cancel);
    assert_eq!(decide(None), Control::Cancel);
}

#[test]
fn the_question_lists_the_agenda_and_the_estimate() {
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    state
        .agenda
        .push(quarry_engine::research::machine::state::Task {
            id: 0,
            query: "json.loads".into(),
            round: 1,
            state: quarry_engine::research::machine::state::TaskState::Pending,
            units: 0,
            error: None,
        });
    state.approval.estimated_cost_pico = Some((1_000_000, 20_000_000));
    let q = question(&state);
    assert!(q.contains("1. json.loads"), "{q}");
    assert!(q.contains("0.000001 to 0.000020 USD"), "{q}");
    assert!(q.ends_with("[y/N] "), "{q}");
}
