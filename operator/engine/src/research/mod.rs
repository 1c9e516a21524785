//! The research engine: a pure state machine at the core, a shell that runs it, the model
//! conversations it drives, and the pure libraries they use to read pages and write the answer.
//!
//! Knows nothing about Kubernetes. Dependencies point inwards: `machine` decides, `shell`
//! carries out its commands, `agents` are the model calls the shell runs, `reading` and
//! `writing` are pure functions the others call.

pub mod agents;
pub mod machine;
pub mod reading;
pub mod shell;
pub mod writing;
