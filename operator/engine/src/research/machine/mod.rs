//! The pure state machine of a run: its state and `reduce(state, event) -> (state, commands)`.
//! No I/O, no clock, no randomness.

pub mod reducer;
pub mod state;
