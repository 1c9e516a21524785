//! Shared pieces of the benchmarks in `tests/benches/` (see BENCHMARKS.md): scripted
//! conversations against [`crate::slow_web::SlowWeb`], and process figures from `/proc`.

use serde_json::json;

use quarry_engine::research::machine::state::Mode;

use crate::model_server::{Route, Script, Step};
use crate::slow_web::SlowWeb;

/// Pages one scripted researcher reads (one batch, fetched at once).
pub const PAGES_PER_RESEARCHER: usize = 3;

/// A researcher's conversation, answered by turn after `latency_ms` each: search `query`, take
/// the scrape handshake, read the first three results in one batch, report citing them.
pub fn researcher_steps(web: &SlowWeb, query: &str, latency_ms: u64) -> Vec<Step> {
    let urls: Vec<String> = (0..PAGES_PER_RESEARCHER)
        .map(|i| web.result_url(query, i))
        .collect();
    let topic = query.to_lowercase();
    let mut report = format!(
        "## Summary\nThe {topic} module reads its input, validates every field and returns a structured value ([docs]({})).\n\n## Key findings\n",
        urls[0]
    );
    for u in &urls {
        report.push_str(&format!(
            "- Errors carry the position of the problem so the caller can report it ([docs]({u})).\n"
        ));
    }
    let slow = |s: Step| Step::delay(latency_ms, s);
    vec![
        slow(Step::tool_call("search", json!({"queries": [query]})).with_usage(1000, 10)),
        slow(Step::tool_call("scrape", json!({"urls": [urls[0]]})).with_usage(1200, 10)),
        slow(Step::tool_call("scrape", json!({"urls": urls})).with_usage(1400, 12)),
        slow(Step::text(report).with_usage(3000, 120)),
    ]
}

/// A by-turn route for the researcher of `task` (its first prompt names the task).
pub fn researcher_route(name: &str, task: &str, web: &SlowWeb, latency_ms: u64) -> Route {
    Route::new(
        name,
        format!("Research task: {task}\n"),
        researcher_steps(web, task, latency_ms),
    )
    .by_turn()
}

/// The question of [`scripted_run`]'s quick run.
pub const QUICK_QUESTION: &str = "How does the json decoder report errors";
/// The question of [`scripted_run`]'s deep run.
pub const DEEP_QUESTION: &str = "How do Python's serialization modules compare";
/// The deep run's planned tasks.
pub const DEEP_TASKS: [&str; 3] = [
    "json decoding in Python",
    "pickle serialization protocols",
    "csv reader dialects",
];
/// The task the deep run's evaluator delegates after the first round.
pub const DELEGATED_TASK: &str = "marshal internal format";

/// The scripted model of one run against `web`, every answer after `model_ms` (a fresh server
/// per run: the evaluator's answers are consumed). Quick: one researcher. Deep: a plan of
/// [`DEEP_TASKS`], an evaluation that delegates [`DELEGATED_TASK`], a second round, a final
/// evaluation, page summaries and the written study.
pub fn scripted_run(web: &SlowWeb, mode: Mode, model_ms: u64) -> Script {
    let slow = |s: Step| Step::delay(model_ms, s);
    if mode == Mode::Quick {
        return Script::default().with_route(researcher_route(
            "quick",
            QUICK_QUESTION,
            web,
            model_ms,
        ));
    }
    let plan =
        json!({"intent": "RESEARCH_REQUIRED", "complexity": 2, "tasks": DEEP_TASKS}).to_string();
    let first_page = web.result_url(DEEP_TASKS[0], 0);
    let study = format!(
        "<research_result>\n# Serialization modules\n\n## Key Takeaways\n1. The json decoding in python module reads its input, validates every field and returns a structured value ([json]({first_page})).\n</research_result>"
    );
    let mut script = Script::default()
        .with_route(Route::new(
            "planner",
            "You are the research coordinator",
            vec![slow(Step::text(plan).with_usage(300, 40))],
        ))
        .with_route(
            Route::new(
                "evaluator",
                "You are the lead evaluator",
                vec![slow(
                    Step::text(format!(
                        r#"{{"action": "delegate", "queries": ["{DELEGATED_TASK}"]}}"#
                    ))
                    .with_usage(2000, 20),
                )],
            )
            .with_fallback(slow(
                Step::text(r#"{"action": "synthesize"}"#).with_usage(2500, 10),
            )),
        )
        .with_route(
            Route::new("summarizer", "You condense one web page", vec![]).with_fallback(slow(
                Step::text("- The page documents how the module validates its input.")
                    .with_usage(800, 30),
            )),
        )
        .with_route(
            Route::new("study", "Mode: study", vec![])
                .with_fallback(slow(Step::text(study).with_usage(5000, 400))),
        );
    for (i, task) in DEEP_TASKS.iter().chain([&DELEGATED_TASK]).enumerate() {
        script = script.with_route(researcher_route(&format!("r{i}"), task, web, model_ms));
    }
    script
}

/// User plus system CPU seconds of this process so far (`/proc/self/stat`).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_seconds_of(&stat, clock_ticks())
}

/// utime + stime of a `/proc/<pid>/stat` text, in seconds.
pub fn cpu_seconds_of(stat: &str, ticks_per_second: f64) -> Option<f64> {
    // The command name (field 2) may hold spaces and parentheses: fields are counted after the
    // last ')'; utime and stime are fields 14 and 15, so 12th and 13th after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks_per_second)
}

/// Clock ticks per second of `/proc` times (`getconf CLK_TCK`; USER_HZ is 100 on Linux's
/// mainstream architectures, the fallback).
pub fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// A `kB` field of `/proc/self/status`, e.g. `VmHWM` (peak RSS) or `VmRSS`, in KiB.
pub fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status_kib_of(&status, field)
}

/// A `kB` field of a `/proc/<pid>/status` text, in KiB.
pub fn status_kib_of(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Median of a non-empty list (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The first `model name` of `/proc/cpuinfo`, for the machine note.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

/// One line describing the machine: CPU model, cores and the load average when the bench started
/// (other work on the machine skews timings).
pub fn machine_note() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    format!("{} | {cores} cores | load average {load}", cpu_model())
}

#[cfg(test)]
mod tests;
