//! Quarry: a Kubernetes-native deep-research operator.
//!
//! Layout follows DESIGN §1: `research` is the pure core, everything else is a shell around it.

pub mod api;
pub mod cache;
pub mod cli;
pub mod config;
pub mod controller;
pub mod eval;
pub mod events;
pub mod llm;
pub mod logs;
pub mod queue;
pub mod report_cli;
pub mod research;
pub mod scrape;
pub mod server;
pub mod sources;
pub mod standalone;
pub mod store;
pub mod telemetry;
pub mod tls;
pub mod wiring;
