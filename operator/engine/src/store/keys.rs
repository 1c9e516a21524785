//! The artifact keys of a run: what each artifact is called in every store (ConfigMap, object
//! store, local directory). The stores group and route artifacts by these names.

/// The final Markdown report.
pub const REPORT_KEY: &str = "report.md";
/// The machine-readable findings.
pub const FINDINGS_KEY: &str = "findings.json";
/// The progressive Markdown: finished researcher reports, readable before synthesis.
pub const PROGRESS_KEY: &str = "progress.md";
/// The provenance log (one JSON line per model call, search and page read).
pub const EVENTS_KEY: &str = "events.jsonl";
/// The pointer to the latest checkpoint (a whole checkpoint in older versions).
pub const CHECKPOINT_KEY: &str = "checkpoint.json";
/// The two checkpoint slots, written alternately.
pub const CHECKPOINT_SLOTS: [&str; 2] = ["checkpoint-a.json", "checkpoint-b.json"];
