//! End-to-end harness for Quarry: local services the tests start on 127.0.0.1 and stop themselves.

pub mod bench;
pub mod browser;
pub mod control_plane;
pub mod crd_admission;
pub mod critical_path;
pub mod dashboard;
pub mod deep_script;
pub mod doc_trees;
pub mod docs_server;
pub mod event_stream;
pub mod fake_apiserver;
pub mod kube_operator;
pub mod kube_tools;
pub mod mcp_inspector;
pub mod model_server;
pub mod node;
pub mod profiles;
pub mod prometheus;
pub mod quarry_bin;
pub mod real_model;
pub mod redis_server;
pub mod rotel;
pub mod s3_server;
pub mod searx;
pub mod slow_web;
pub mod worker;
