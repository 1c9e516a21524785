//! End-to-end harness for Quarry: local services the tests start and stop themselves.

pub mod docs_server;
pub mod searx;
