//! The `quarry` command: the CLI over the cluster (`apply`, `get`, `list`, `cancel`, `logs`,
//! `report`), standalone runs (`quarry run`), the MCP server and `quarry eval`.

pub mod cli;
pub mod config;
pub mod console;
pub mod eval;
pub mod logs;
pub mod report_cli;
pub mod standalone;
