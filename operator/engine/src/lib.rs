//! The research engine: the pure reducer that plans, researches and reports, and the
//! ports it works through (models, search, pages, artifact stores, events), with the
//! implementations that need nothing of Kubernetes, axum or Redis.
//!
//! This crate depends on no kube, k8s-openapi, axum or redis crate; `tests/layering.rs` of the
//! workspace checks it.

pub mod cache;
pub mod egress;
pub mod events;
pub mod llm;
pub mod research;
pub mod scrape;
pub mod sources;
pub mod store;
pub mod telemetry;
pub mod tls;
