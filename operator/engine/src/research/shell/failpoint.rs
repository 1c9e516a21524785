//! Crash points for the kill tests: with `QUARRY_FAILPOINT=<name>` the process aborts right
//! after the named checkpoint is durable, as a SIGKILL at that instant would. Points between two
//! steps that no model call separates (synthesis stored, report published) cannot be reached by
//! holding a model call, so the tests name them here. Unset, it costs one environment lookup per
//! checkpoint.

use crate::research::machine::state::RunState;

/// Environment variable naming the crash point.
pub const FAILPOINT_ENV: &str = "QUARRY_FAILPOINT";

/// The crash point a checkpoint of `state` reaches, if it is one.
pub fn point_of(state: &RunState) -> Option<&'static str> {
    match (&state.final_report, state.published) {
        (Some(_), false) => Some("synthesized"),
        (Some(_), true) => Some("published"),
        _ => None,
    }
}

/// Aborts the process when `QUARRY_FAILPOINT` names the point `state` just reached.
pub fn after_checkpoint(state: &RunState) {
    if let Some(point) = point_of(state)
        && std::env::var(FAILPOINT_ENV).is_ok_and(|v| v == point)
    {
        eprintln!("quarry: failpoint {point}: aborting");
        std::process::abort();
    }
}
