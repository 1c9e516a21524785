//! End-to-end test harness for Quarry: servers the tests start on 127.0.0.1.

pub mod model_server;
