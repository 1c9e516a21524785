//! The critical path of a run, derived from its own provenance log (`events.jsonl`).
//!
//! Every model call, search and page read is one line with `time` (when it ended), `durationMs`
//! and, for a researcher's work, `task` (its agenda task). The dependencies between them follow
//! from how the engine works:
//! - a run is a sequence of stages: planning, one research round, an evaluation, the next round,
//!   ..., page summaries, the written outputs, the optional claim judge;
//! - within a round, each researcher (a `task`) is one branch; branches run side by side on
//!   `researcher_slots` slots (the run's `maxConcurrentResearchers`). Within a branch, calls are
//!   sequential except the pages of one batch, which are read at once, so a branch's length is
//!   the union of its intervals (the sum, when nothing overlaps);
//! - summaries (and judge calls) are independent calls on `summary_slots` slots;
//! - planner, evaluator and writer calls are sequential.
//!
//! The length of a slotted stage is its makespan when its branches are started in the order
//! they really started, each on the first free slot (greedy list scheduling): with at least as
//! many slots as branches, that is the longest branch. The critical path is the sum of the
//! stage lengths. It is what the logged latencies alone impose; wall time above it is
//! orchestration overhead (engine CPU, scheduling, waits the dependencies do not require).

use std::collections::BTreeMap;

use serde_json::Value;

/// One line of the log, as the derivation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    /// `modelCall`, `search` or `fetch`.
    pub kind: String,
    /// Model calls: `plan`, `research`, `evaluate`, `summarize`, `synthesize`, `classify`.
    pub purpose: Option<String>,
    /// The researcher's agenda task.
    pub task: Option<u32>,
    /// Start, in milliseconds since the Unix epoch (end minus duration).
    pub start_ms: i64,
    /// End, in milliseconds since the Unix epoch.
    pub end_ms: i64,
}

impl Span {
    fn duration(&self) -> i64 {
        self.end_ms - self.start_ms
    }
}

/// Parses `events.jsonl`; lines of other kinds are skipped, malformed lines are errors.
pub fn parse(log: &str) -> Result<Vec<Span>, String> {
    let mut out = Vec::new();
    for (n, line) in log
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        if !matches!(kind.as_str(), "modelCall" | "search" | "fetch") {
            continue;
        }
        let time = v["time"]
            .as_str()
            .ok_or_else(|| format!("line {}: no time", n + 1))?;
        let end_ms = chrono::DateTime::parse_from_rfc3339(time)
            .map_err(|e| format!("line {}: time {time}: {e}", n + 1))?
            .timestamp_millis();
        let duration = v["durationMs"]
            .as_i64()
            .ok_or_else(|| format!("line {}: no durationMs", n + 1))?;
        out.push(Span {
            kind,
            purpose: v["purpose"].as_str().map(str::to_string),
            task: v["task"].as_u64().and_then(|t| u32::try_from(t).ok()),
            start_ms: end_ms - duration,
            end_ms,
        });
    }
    Ok(out)
}

/// How the run was configured, as far as the derivation needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    /// Round of each agenda task (from the run's final state).
    pub round_of: BTreeMap<u32, u32>,
    /// Researchers running at once at most.
    pub researcher_slots: usize,
    /// Summary (and judge) calls in flight at once at most.
    pub summary_slots: usize,
}

/// One stage's contribution to the critical path.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// E.g. `plan`, `round 1 (3 researchers)`, `summarize (9 calls)`.
    pub name: String,
    /// Milliseconds it adds to the critical path.
    pub ms: i64,
    /// When it started (for ordering the breakdown).
    pub first_start_ms: i64,
}

/// The critical path and its stages.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticalPath {
    pub total_ms: i64,
    pub stages: Vec<Stage>,
}

/// Length of the union of intervals.
fn union_len(mut intervals: Vec<(i64, i64)>) -> i64 {
    intervals.sort();
    let mut total = 0;
    let mut current: Option<(i64, i64)> = None;
    for (s, e) in intervals {
        match current {
            Some((cs, ce)) if s <= ce => current = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                current = Some((s, e));
            }
            None => current = Some((s, e)),
        }
    }
    if let Some((cs, ce)) = current {
        total += ce - cs;
    }
    total
}

/// Makespan of jobs `(start order key, length)` on `slots` slots, started in key order, each on
/// the slot that frees first.
fn makespan(mut jobs: Vec<(i64, i64)>, slots: usize) -> i64 {
    jobs.sort();
    let mut free_at = vec![0i64; slots.max(1)];
    for (_, len) in jobs {
        if let Some(slot) = free_at.iter_mut().min() {
            *slot += len;
        }
    }
    free_at.into_iter().max().unwrap_or(0)
}

/// Derives the critical path (see the module documentation).
pub fn derive(spans: &[Span], shape: &Shape) -> CriticalPath {
    #[derive(Default)]
    struct Acc {
        first: Option<i64>,
        sequential: i64,
        /// Branch -> intervals (researchers) or one job per call (pools).
        branches: BTreeMap<i64, Vec<(i64, i64)>>,
        calls: usize,
    }
    // Stage key: (kind of stage, round); the name comes later.
    let mut stages: BTreeMap<(u8, u32), Acc> = BTreeMap::new();
    for (i, s) in spans.iter().enumerate() {
        let (key, branch) = match (s.task, s.purpose.as_deref()) {
            (Some(t), _) => (
                (1, shape.round_of.get(&t).copied().unwrap_or(0)),
                Some(t as i64),
            ),
            (None, Some("plan")) => ((0, 0), None),
            (None, Some("evaluate")) => ((2, 0), None),
            (None, Some("summarize")) => ((3, 0), Some(i as i64)),
            (None, Some("synthesize")) => ((4, 0), None),
            (None, Some("classify")) => ((5, 0), Some(i as i64)),
            // Anything else (a researcher's call without a task) counts as sequential work.
            (None, _) => ((6, 0), None),
        };
        let acc = stages.entry(key).or_default();
        acc.first = Some(acc.first.map_or(s.start_ms, |f| f.min(s.start_ms)));
        acc.calls += 1;
        match branch {
            Some(b) => acc
                .branches
                .entry(b)
                .or_default()
                .push((s.start_ms, s.end_ms)),
            None => acc.sequential += s.duration(),
        }
    }
    let mut out: Vec<Stage> = stages
        .into_iter()
        .map(|((kind, round), acc)| {
            let first_start_ms = acc.first.unwrap_or(0);
            let (name, ms) = match kind {
                1 => {
                    let n = acc.branches.len();
                    let jobs = acc
                        .branches
                        .into_values()
                        .map(|iv| (iv.iter().map(|i| i.0).min().unwrap_or(0), union_len(iv)))
                        .collect();
                    (
                        format!("round {round} ({n} researchers, {} calls)", acc.calls),
                        makespan(jobs, shape.researcher_slots),
                    )
                }
                3 | 5 => {
                    let jobs = acc
                        .branches
                        .into_values()
                        .flatten()
                        .map(|(s, e)| (s, e - s))
                        .collect();
                    let what = if kind == 3 { "summarize" } else { "judge" };
                    (
                        format!("{what} ({} calls)", acc.calls),
                        makespan(jobs, shape.summary_slots),
                    )
                }
                0 => ("plan".to_string(), acc.sequential),
                2 => (format!("evaluate ({} calls)", acc.calls), acc.sequential),
                4 => (format!("write ({} calls)", acc.calls), acc.sequential),
                _ => (format!("other ({} calls)", acc.calls), acc.sequential),
            };
            Stage {
                name,
                ms,
                first_start_ms,
            }
        })
        .collect();
    out.sort_by_key(|s| s.first_start_ms);
    CriticalPath {
        total_ms: out.iter().map(|s| s.ms).sum(),
        stages: out,
    }
}

#[cfg(test)]
mod tests;
