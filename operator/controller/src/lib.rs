//! The Kubernetes operator around the engine, one folder a controller:
//! [`research_run`] (ResearchRuns onto research tasks, their progress back onto status),
//! [`search_engine`] (managed SearXNG) and [`schedule`] (runs from ResearchSchedules); beside them
//! the process around them: [`startup`], [`leader_election`], the HTTP [`server`] (metrics,
//! health, run events); the artifact [`store`]s, the Redis scale-out [`queue`] and the
//! Redis-backed cache and event stream ([`redis`]), and [`engine_builder`], the one place a
//! ResearchProfile becomes an engine.

pub mod engine_builder;
pub mod error;
pub mod leader_election;
pub mod queue;
pub mod redis;
pub mod research_run;
pub mod schedule;
pub mod search_engine;
pub mod server;
pub mod startup;
pub mod store;
pub mod tracing_setup;

pub use error::Error;

/// Name the operator reports Events under.
pub const CONTROLLER_NAME: &str = "quarry-operator";
