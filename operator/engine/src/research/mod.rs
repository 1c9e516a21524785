//! The research engine: a pure reducer at the core, an executor shell around it.
//!
//! Knows nothing about Kubernetes.

pub mod budget;
pub mod changes;
pub mod checkpoint;
pub mod dispatch;
pub mod evidence;
pub mod executor;
pub mod failpoint;
pub mod grounded;
pub mod journal;
pub mod lead;
pub mod links;
pub mod outputs;
pub mod passages;
pub mod prompts;
pub mod queries;
pub mod reducer;
pub mod report;
pub mod researcher;
pub mod scoring;
pub mod settings;
pub mod state;
