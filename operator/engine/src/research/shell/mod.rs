//! The imperative shell that runs the state machine: the executor interprets its commands with
//! real I/O, dispatches researchers, writes checkpoints and the run's journal.

pub mod checkpoint;
pub mod dispatch;
pub mod executor;
pub mod failpoint;
pub mod journal;
