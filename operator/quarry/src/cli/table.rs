//! Pure rendering of ResearchRuns for people: kubectl-style tables, ages and progress lines.

use k8s_openapi::jiff::Timestamp;

use quarry_api::{ResearchRun, condition_types, find_condition};

/// Shown for a value that is not known (yet).
pub const NONE: &str = "-";
/// Longest query shown in the wide table, in characters.
pub const WIDE_QUERY_CHARS: usize = 48;

/// kubectl's age format (`HumanDuration`): `45s`, `3m20s`, `17m`, `5h10m`, `30h`, `3d4h`, `20d`,
/// `2y30d`, `9y`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Renders rows under headers the way kubectl does: left-aligned columns three spaces apart,
/// the last column unpadded.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let columns = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows.iter()) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(columns) {
            line.push_str(cell);
            if i + 1 < columns {
                let pad = widths[i] - cell.chars().count() + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The cost as people read it: `$0.013630`, or [`NONE`].
fn cost(run: &ResearchRun) -> String {
    run.status
        .as_ref()
        .and_then(|s| s.usage.as_ref())
        .and_then(|u| u.cost_usd.clone())
        .map_or_else(|| NONE.to_string(), |c| format!("${c}"))
}

fn progress(run: &ResearchRun) -> String {
    run.status
        .as_ref()
        .and_then(|s| s.progress.clone())
        .unwrap_or_else(|| NONE.to_string())
}

fn sources(run: &ResearchRun) -> String {
    run.status
        .as_ref()
        .and_then(|s| s.report.as_ref())
        .map_or_else(|| NONE.to_string(), |r| r.sources.to_string())
}

fn tokens(run: &ResearchRun) -> String {
    run.status
        .as_ref()
        .and_then(|s| s.usage.as_ref())
        .map_or_else(
            || NONE.to_string(),
            |u| (u.input_tokens + u.output_tokens).to_string(),
        )
}

fn age(run: &ResearchRun, now: Timestamp) -> String {
    run.metadata.creation_timestamp.as_ref().map_or_else(
        || NONE.to_string(),
        |t| human_duration(now.as_second() - t.0.as_second()),
    )
}

/// The query cut to `max` characters with an ellipsis.
pub fn short_query(query: &str, max: usize) -> String {
    let flat: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let head: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{head}…")
    }
}

/// Pure: the table of `runs` as `quarry get`/`quarry list` print it. `all_namespaces` adds the
/// NAMESPACE column; `wide` adds MODE, PROFILE, TOKENS and QUERY. Rows keep the given order.
pub fn runs_table(
    runs: &[ResearchRun],
    now: Timestamp,
    wide: bool,
    all_namespaces: bool,
) -> String {
    let mut headers = vec![];
    if all_namespaces {
        headers.push("NAMESPACE");
    }
    headers.extend(["NAME", "PHASE", "PROGRESS", "COST", "SOURCES", "AGE"]);
    if wide {
        headers.extend(["MODE", "PROFILE", "TOKENS", "QUERY"]);
    }
    let rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let mut row = vec![];
            if all_namespaces {
                row.push(run.metadata.namespace.clone().unwrap_or_default());
            }
            row.extend([
                run.metadata.name.clone().unwrap_or_default(),
                phase_label(run),
                progress(run),
                cost(run),
                sources(run),
                age(run, now),
            ]);
            if wide {
                row.extend([
                    run.spec.mode.to_string(),
                    run.spec.profile_ref.clone(),
                    tokens(run),
                    short_query(&run.spec.query, WIDE_QUERY_CHARS),
                ]);
            }
            row
        })
        .collect();
    render(&headers, &rows)
}

/// Pure: the phase a person sees: `AwaitingApproval` while the plan waits for a decision (the
/// phase is still Planning then), else the phase.
pub fn phase_label(run: &ResearchRun) -> String {
    let waiting = find_condition(run.conditions(), condition_types::AWAITING_APPROVAL)
        .is_some_and(|c| c.status == "True");
    if waiting && !run.is_finished() {
        "AwaitingApproval".to_string()
    } else {
        run.phase().to_string()
    }
}

/// Pure: one progress line for a run being watched, e.g.
/// `[Researching] 40% | 3 searches, 2 pages read | 9413 tok | $0.013630 | research in progress`.
pub fn progress_line(run: &ResearchRun) -> String {
    let status = run.status.clone().unwrap_or_default();
    let usage = status.usage.clone().unwrap_or_default();
    let mut parts = vec![format!("[{}] {}", phase_label(run), progress(run))];
    if let Some(round) = status.round {
        parts.push(format!("round {round}"));
    }
    parts.push(format!(
        "{} searches, {} pages read",
        usage.searches, usage.pages_fetched
    ));
    parts.push(format!("{} tok", usage.input_tokens + usage.output_tokens));
    parts.push(cost(run));
    // A stalled run says why: that is what a person waiting needs to see.
    let stalled = find_condition(run.conditions(), condition_types::STALLED)
        .filter(|c| c.status == "True")
        .map(|c| format!("stalled ({}): {}", c.reason, c.message));
    if let Some(message) = stalled.or(status.message) {
        parts.push(short_query(&message, 160));
    }
    parts.join(" | ")
}

/// Pure: the closing line of a finished run, e.g.
/// `researchrun/r1 Completed: 3 sources, $0.013630; report in ConfigMap r1-report`.
pub fn outcome_line(run: &ResearchRun) -> String {
    let name = run.metadata.name.clone().unwrap_or_default();
    let status = run.status.clone().unwrap_or_default();
    let mut line = format!("researchrun/{name} {}", run.phase());
    let report = status.report.as_ref();
    let mut facts = vec![];
    if let Some(r) = report {
        facts.push(format!("{} sources", r.sources));
    }
    facts.push(cost(run));
    line.push_str(": ");
    line.push_str(&facts.join(", "));
    if let Some(r) = report {
        if let Some(cm) = &r.config_map {
            line.push_str(&format!(
                "; report in ConfigMap {cm} (quarry report {name})"
            ));
        } else if let Some(url) = &r.object_url {
            line.push_str(&format!("; report at {url} (quarry report {name})"));
        }
    }
    line
}

#[cfg(test)]
mod tests;
