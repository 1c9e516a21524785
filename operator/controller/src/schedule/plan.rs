//! Pure: what a schedule should do now, given its runs and the clock (injected, so every rule is
//! tested with exact times). Follows CronJob: at most one run for the latest missed time, and
//! none when that time is older than the starting deadline.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;

use quarry_api::ConcurrencyPolicy;

/// Most scheduled times walked to find the latest missed one (a schedule down for years with a
/// per-minute pattern does not loop forever; CronJob gives up at 100 as well).
const MAX_MISSED: usize = 100;

/// A parsed schedule: its pattern in its time zone.
#[derive(Debug, Clone)]
pub struct When {
    cron: Cron,
    tz: Tz,
}

/// Why a schedule cannot be used, for a person to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// The cron pattern does not parse.
    #[error("spec.schedule {pattern:?} is not a cron pattern: {message}")]
    Pattern { pattern: String, message: String },
    /// The time zone is unknown.
    #[error("spec.timeZone {zone:?} is not an IANA time zone (such as Europe/Berlin or UTC)")]
    Zone { zone: String },
}

impl When {
    /// Parses `pattern` in `zone` (default UTC).
    pub fn parse(pattern: &str, zone: Option<&str>) -> Result<Self, WhenError> {
        let cron = pattern.parse::<Cron>().map_err(|e| WhenError::Pattern {
            pattern: pattern.to_string(),
            message: e.to_string(),
        })?;
        let tz = match zone {
            Some(z) => z.parse::<Tz>().map_err(|_| WhenError::Zone {
                zone: z.to_string(),
            })?,
            None => Tz::UTC,
        };
        Ok(Self { cron, tz })
    }

    /// The first scheduled time strictly after `t`.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.tz), false)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }
}

/// A run of the schedule as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// Its name.
    pub name: String,
    /// The scheduled time it stands for.
    pub scheduled_at: DateTime<Utc>,
    /// `None` while it runs; `Some(true)` once completed, `Some(false)` once failed or cancelled.
    pub succeeded: Option<bool>,
}

/// What the schedule's spec asks, as far as planning goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub concurrency: ConcurrencyPolicy,
    pub starting_deadline_secs: Option<i64>,
    pub suspend: bool,
    pub keep_successful: usize,
    pub keep_failed: usize,
}

/// The decisions of one reconcile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Create the run for this scheduled time.
    pub create: Option<DateTime<Utc>>,
    /// Cancel these running runs first (`Replace`).
    pub cancel: Vec<String>,
    /// Delete these finished runs (history limits).
    pub delete: Vec<String>,
    /// A due time skipped: too late (past the deadline) or `Forbid` with a run still going.
    pub skipped: Option<(DateTime<Utc>, &'static str)>,
    /// The new `lastScheduleTime` (the due time created or skipped).
    pub last_schedule: Option<DateTime<Utc>>,
    /// The next time a run is due.
    pub next: Option<DateTime<Utc>>,
}

/// The latest scheduled time in `(after, now]`, if any.
fn latest_due(when: &When, after: DateTime<Utc>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let mut due = None;
    let mut t = after;
    for _ in 0..MAX_MISSED {
        match when.next_after(t) {
            Some(next) if next <= now => {
                due = Some(next);
                t = next;
            }
            _ => return due,
        }
    }
    // More than MAX_MISSED times were missed: jump to the latest one before now.
    let mut t = now - chrono::Duration::days(366);
    t = t.max(after);
    let mut latest = due;
    while let Some(next) = when.next_after(t) {
        if next > now {
            break;
        }
        latest = Some(next);
        t = next;
    }
    latest
}

/// What to do at `now`. `last_schedule` is the status' `lastScheduleTime`, `created` the
/// schedule's creation time (nothing is due before it).
pub fn plan(
    when: &When,
    policy: &Policy,
    runs: &[Run],
    last_schedule: Option<DateTime<Utc>>,
    created: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Plan {
    let mut out = Plan {
        last_schedule,
        next: when.next_after(now),
        ..Plan::default()
    };
    // History: the newest finished runs are kept, per outcome.
    let mut finished: Vec<&Run> = runs.iter().filter(|r| r.succeeded.is_some()).collect();
    finished.sort_by_key(|r| std::cmp::Reverse(r.scheduled_at));
    let (mut ok, mut failed) = (0, 0);
    for r in finished {
        let keep = if r.succeeded == Some(true) {
            ok += 1;
            ok <= policy.keep_successful
        } else {
            failed += 1;
            failed <= policy.keep_failed
        };
        if !keep {
            out.delete.push(r.name.clone());
        }
    }
    if policy.suspend {
        return out;
    }
    let since = last_schedule.unwrap_or(created).max(created);
    let Some(due) = latest_due(when, since, now) else {
        return out;
    };
    // A run for this time exists already (made before a status write was lost): nothing to do.
    if runs.iter().any(|r| r.scheduled_at == due) {
        out.last_schedule = Some(due);
        return out;
    }
    out.last_schedule = Some(due);
    if let Some(deadline) = policy.starting_deadline_secs
        && (now - due).num_seconds() > deadline
    {
        out.skipped = Some((due, "missed its starting deadline"));
        return out;
    }
    let running: Vec<&Run> = runs.iter().filter(|r| r.succeeded.is_none()).collect();
    match policy.concurrency {
        ConcurrencyPolicy::Forbid if !running.is_empty() => {
            out.skipped = Some((due, "a run of an earlier time is still going (Forbid)"));
        }
        ConcurrencyPolicy::Replace => {
            out.cancel = running.iter().map(|r| r.name.clone()).collect();
            out.create = Some(due);
        }
        _ => out.create = Some(due),
    }
    out
}

/// The name of the run for scheduled time `at`: the schedule's name and the minute, so a
/// reconcile that runs twice creates it once.
pub fn run_name(schedule: &str, at: DateTime<Utc>) -> String {
    let minute = at.timestamp() / 60;
    let suffix = format!("-{minute}");
    let keep = 63usize.saturating_sub(suffix.len());
    let base: String = schedule.chars().take(keep).collect();
    format!("{}{suffix}", base.trim_end_matches(['-', '.']))
}

#[cfg(test)]
mod tests;
