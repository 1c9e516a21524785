//! The Kubernetes operator around the engine: the ResearchRun and SearchEngine controllers, the
//! ConfigMap and object stores, leader election, the HTTP server (metrics, health, events), the
//! Redis scale-out queue and the Redis-backed cache and event stream, and the wiring that turns a
//! ResearchProfile into an engine.

pub mod controller;
pub mod queue;
pub mod redis;
pub mod server;
pub mod store;
pub mod subscriber;
pub mod wiring;
