//! The Grafana dashboard's queries as Grafana sends them to Prometheus, and what a plausible
//! answer is for each panel after a scripted scenario (`tests/tests/prometheus.rs`).
//!
//! Variables: `$namespace` is the test's namespace (one value picked), `$model` is All (`.*`, its
//! `allValue`), `$__rate_interval` is Grafana's max(step + scrape interval, 4 × scrape interval) =
//! 4 s for a 1 s scrape and step, `$__range` the time range in seconds. Stat panels are instant
//! queries at the range's end; time series are range queries over it with a 1 s step.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::prometheus::{Prometheus, Series};

/// What the dashboard must show, from the runs as the API server has them.
#[derive(Debug, Default)]
pub struct Facts {
    /// The test's namespace (the `$namespace` picked).
    pub namespace: String,
    /// Start of the test, start and end of the measured round (Unix seconds).
    pub t0: f64,
    pub t1: f64,
    pub t2: f64,
    /// Cost of the runs of the measured round, and of all runs.
    pub window_cost: f64,
    pub total_cost: f64,
    /// What each run that finished in the measured round cost.
    pub run_costs: Vec<f64>,
    /// Longest run, start to completion, in seconds.
    pub longest_run: f64,
    /// Runs by phase now (`AwaitingApproval` for a plan waiting).
    pub phases: BTreeMap<String, f64>,
    /// Completed among the runs that finished, in the measured round and over the whole test.
    pub window_success: f64,
    pub total_success: f64,
    /// Changes the schedule's runs found, in the measured round and over the whole test.
    pub window_changes: f64,
    pub total_changes: f64,
}

/// One query of a panel.
#[derive(Debug, Clone)]
pub struct Target {
    pub title: String,
    /// `stat` or `timeseries`.
    pub kind: String,
    pub ref_id: String,
    pub expr: String,
}

/// Every panel query of the dashboard.
pub fn targets(dashboard: &Value) -> Vec<Target> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push(Target {
                title: panel["title"].as_str().unwrap_or_default().to_string(),
                kind: panel["type"].as_str().unwrap_or_default().to_string(),
                ref_id: target["refId"].as_str().unwrap_or_default().to_string(),
                expr: target["expr"].as_str().unwrap_or_default().to_string(),
            });
        }
    }
    out
}

/// `expr` with the dashboard's variables as Grafana substitutes them.
pub fn grafana(expr: &str, namespace: &str, range_secs: f64) -> String {
    expr.replace("$__rate_interval", "4s")
        .replace("$__range", &format!("{}s", range_secs.round()))
        .replace("$namespace", &regex_value(namespace))
        .replace("$model", ".*")
}

/// A variable's value in a regex matcher as Grafana writes it: regex metacharacters escaped with
/// a backslash, itself escaped in the PromQL string.
fn regex_value(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

/// The bucket of `quarry_run_cost_usd` (upper bounds 0.0001 × 2.5^k) holding `cost`.
fn cost_bucket(cost: f64) -> (f64, f64) {
    let mut lower = 0.0;
    let mut upper = 0.0001;
    while cost > upper && upper < 1000.0 {
        lower = upper;
        upper *= 2.5;
    }
    (lower, upper)
}

/// The series whose labels include all of `labels`.
fn find<'a>(series: &'a [Series], labels: &[(&str, &str)]) -> Result<&'a Series, String> {
    series
        .iter()
        .find(|s| labels.iter().all(|(k, v)| s.label(k) == *v))
        .ok_or_else(|| format!("no series with {labels:?}"))
}

/// Some value of the series with `labels` is above zero.
fn positive(series: &[Series], labels: &[(&str, &str)]) -> Result<(), String> {
    let s = find(series, labels)?;
    match s.max() {
        Some(v) if v > 0.0 => Ok(()),
        other => Err(format!("{labels:?} never above zero (max {other:?})")),
    }
}

/// Every finite value of every series lies in `lo..=hi`, and there is one.
fn within(series: &[Series], lo: f64, hi: f64) -> Result<(), String> {
    let values: Vec<f64> = series.iter().flat_map(Series::finite).collect();
    if values.is_empty() {
        return Err("no finite value".into());
    }
    match values.iter().find(|v| **v < lo || **v > hi) {
        Some(v) => Err(format!("{v} outside {lo}..={hi}")),
        None => Ok(()),
    }
}

/// The series with `labels` is `value` throughout.
fn constant(series: &[Series], labels: &[(&str, &str)], value: f64) -> Result<(), String> {
    let s = find(series, labels)?;
    match s.values.iter().find(|(_, v)| *v != value) {
        Some((t, v)) => Err(format!("{labels:?} is {v} at {t}, not {value}")),
        None => Ok(()),
    }
}

/// The one value of an instant query with `labels`.
fn instant(series: &[Series], labels: &[(&str, &str)]) -> Result<f64, String> {
    find(series, labels)?
        .last()
        .ok_or_else(|| format!("{labels:?} has no value"))
}

fn near(what: &str, got: f64, want: f64, tolerance: f64) -> Result<(), String> {
    if (got - want).abs() <= tolerance {
        Ok(())
    } else {
        Err(format!("{what}: {got}, expected {want} (±{tolerance})"))
    }
}

/// The checks of one panel query's answer over the measured round.
fn check(target: &Target, series: &[Series], f: &Facts) -> Result<(), String> {
    let ns = f.namespace.as_str();
    let (p, fb, sc) = ("scripted", "scripted-fallback", "scripted-schedule");
    match (target.title.as_str(), target.ref_id.as_str()) {
        ("Spend per hour by namespace and model", "A") => {
            for model in [p, fb, sc] {
                positive(series, &[("namespace", ns), ("model", model)])?;
            }
            // A per-second rate never exceeds what the whole round cost.
            within(series, 0.0, f.window_cost * 3600.0)
        }
        ("Spend in range", "A") => near("spend", instant(series, &[])?, f.window_cost, 0.01),
        ("Runs by phase", "A") => {
            let shown: BTreeMap<String, f64> = series
                .iter()
                .filter(|s| s.last().is_some_and(|v| v != 0.0))
                .map(|s| (s.label("phase").to_string(), s.last().unwrap_or_default()))
                .collect();
            if shown == f.phases {
                Ok(())
            } else {
                Err(format!(
                    "runs by phase {shown:?}, the API server has {:?}",
                    f.phases
                ))
            }
        }
        ("Spend per run (p50, p95)", _) => {
            // A quantile lies in a bucket that holds a cost observed (a rejected plan's is 0).
            let stray = series.iter().flat_map(Series::finite).find(|v| {
                !f.run_costs.iter().any(|c| {
                    let (lo, hi) = cost_bucket(*c);
                    (lo..=hi).contains(v)
                })
            });
            match (stray, series.iter().any(|s| !s.finite().is_empty())) {
                (None, true) => Ok(()),
                (None, false) => Err("no finite value".into()),
                (Some(v), _) => Err(format!("{v} in no bucket of the costs {:?}", f.run_costs)),
            }
        }
        // increase() extrapolates a series that spans the range to its ends (by ~1/60 here).
        ("Run success rate", "A") => near(
            "success rate",
            instant(series, &[])?,
            f.window_success,
            0.02,
        ),
        ("Run duration by mode (p50, p95)", _) => {
            find(series, &[("mode", "quick")])?;
            // Buckets double from 1 s: a quantile is at most twice the longest run (or 1 s).
            within(series, f64::MIN_POSITIVE, (2.0 * f.longest_run).max(1.0))
        }
        ("Tokens per second by model and kind", "A") => {
            for model in [p, fb, sc] {
                positive(series, &[("model", model), ("kind", "input")])?;
                positive(series, &[("model", model), ("kind", "output")])?;
            }
            constant(series, &[("model", p), ("kind", "cached")], 0.0)
        }
        ("Model requests by outcome", "A") => {
            positive(series, &[("model", p), ("outcome", "ok")])?;
            positive(series, &[("model", p), ("outcome", "unavailable")])?;
            positive(series, &[("model", fb), ("outcome", "ok")])
        }
        ("Model error rate", "A") => {
            positive(series, &[("model", p)])?;
            within(series, 0.0, 1.0)?;
            // The fallback and the schedule's model never failed: a model without error series
            // has no line (the division has nothing to divide).
            match series.iter().find(|s| s.label("model") != p) {
                Some(s) => Err(format!("errors of a model that had none: {s:?}")),
                None => Ok(()),
            }
        }
        ("Fallback rate", "A") => {
            positive(series, &[("model", p)])?;
            constant(series, &[("model", fb)], 0.0)
        }
        ("Model latency (p50, p95)", _) => {
            find(series, &[("model", p)])?;
            // Under the tier's 30 s timeout.
            within(series, f64::MIN_POSITIVE, 30.0)
        }
        ("Circuit breakers (0 closed, 1 half-open, 2 open)", "A") => {
            if find(series, &[("model", p)])?.max() != Some(2.0) {
                return Err("the primary's breaker never showed open".into());
            }
            constant(series, &[("model", fb)], 0.0)?;
            constant(series, &[("model", sc)], 0.0)?;
            let odd = series
                .iter()
                .flat_map(|s| s.values.iter())
                .find(|(_, v)| ![0.0, 1.0, 2.0].contains(v));
            odd.map_or(Ok(()), |v| Err(format!("breaker state {v:?}")))
        }
        ("Rate-limit waits", _) => {
            positive(series, &[("model", p)])?;
            constant(series, &[("model", fb)], 0.0)
        }
        ("Search and fetch health", _) => positive(series, &[("outcome", "ok")]),
        ("Reconciles", "A") => positive(series, &[("result", "success")]),
        ("Reconciles", "B") => constant(series, &[], 0.0),
        ("Reconciles", "C") => within(series, f64::MIN_POSITIVE, 10.0),
        ("Search backends by outcome (failover)", "A") => {
            positive(series, &[("backend", "searxng"), ("outcome", "ok")])
        }
        ("Search backends by outcome (failover)", "B") => {
            constant(series, &[("backend", "searxng")], 0.0)
        }
        ("SearXNG engines not healthy", "A") => {
            let mut shown: Vec<(String, String)> = series
                .iter()
                .map(|s| (s.label("engine").to_string(), s.label("state").to_string()))
                .collect();
            shown.sort();
            let want = [("bing", "Captcha"), ("duckduckgo", "Suspended")]
                .map(|(e, s)| (e.to_string(), s.to_string()));
            if shown != want {
                return Err(format!("engines not healthy: {shown:?}"));
            }
            constant(series, &[("engine", "bing")], 1.0)?;
            constant(series, &[("engine", "duckduckgo")], 1.0)
        }
        ("Cache hit ratio", "A") => {
            positive(series, &[("kind", "page")])?;
            within(series, 0.0, 1.0)
        }
        ("Plans awaiting approval", "A") => near(
            "plans waiting",
            instant(series, &[("namespace", ns)])?,
            1.0,
            0.0,
        ),
        ("Schedule changes found", "A") => near(
            "changes found",
            instant(series, &[("namespace", ns)])?,
            f.window_changes,
            1e-9,
        ),
        ("Scheduled runs by decision", "A") => positive(series, &[("decision", "Created")]),
        // The schedule whose template the API server refuses fails every 15 s.
        ("Scheduled runs by decision", "B") => positive(series, &[]),
        (title, ref_id) => Err(format!("no check for panel {title:?} query {ref_id}")),
    }
}

/// The stat panels over the whole test, where every series appeared within the range: the
/// increase of a series that was not there at the range's start is its whole value.
fn check_whole_test(target: &Target, series: &[Series], f: &Facts) -> Result<(), String> {
    match target.title.as_str() {
        "Spend in range" => near(
            "spend over the whole test",
            instant(series, &[])?,
            f.total_cost,
            0.01,
        ),
        "Run success rate" => near(
            "success rate over the whole test",
            instant(series, &[])?,
            f.total_success,
            1e-9,
        ),
        "Schedule changes found" => near(
            "changes over the whole test",
            instant(series, &[("namespace", &f.namespace)])?,
            f.total_changes,
            1e-9,
        ),
        _ => Ok(()),
    }
}

/// Evaluates every query of `dashboard` (its JSON) on `prometheus` and checks each answer;
/// returns what the stat panels show, for the test's output.
pub async fn evaluate(
    prometheus: &Prometheus,
    dashboard: &str,
    f: &Facts,
) -> Result<Vec<String>, String> {
    let dashboard: Value = serde_json::from_str(dashboard).map_err(|e| e.to_string())?;
    let targets = targets(&dashboard);
    if targets.len() < 25 {
        return Err(format!(
            "only {} queries read from the dashboard",
            targets.len()
        ));
    }
    let mut failures = Vec::new();
    let mut shown = Vec::new();
    for target in &targets {
        let expr = grafana(&target.expr, &f.namespace, f.t2 - f.t1);
        if expr.contains('$') {
            failures.push(format!("{}: a variable is left in {expr}", target.title));
            continue;
        }
        let answer = if target.kind == "stat" {
            prometheus.query(&expr, f.t2).await
        } else {
            prometheus.query_range(&expr, f.t1, f.t2, 1.0).await
        };
        let result = answer.and_then(|series| {
            if target.kind == "stat" {
                let values: Vec<String> = series
                    .iter()
                    .map(|s| format!("{:?} {:?}", s.labels, s.last()))
                    .collect();
                shown.push(format!("{}: {}", target.title, values.join(", ")));
            }
            check(target, &series, f).map_err(|e| format!("{e}\n    answer: {series:?}"))
        });
        if target.kind == "stat" && result.is_ok() {
            let whole = grafana(&target.expr, &f.namespace, f.t2 - f.t0);
            let answer = prometheus.query(&whole, f.t2).await;
            if let Err(e) = answer.and_then(|series| {
                check_whole_test(target, &series, f)
                    .map_err(|e| format!("{e}\n    answer: {series:?}"))
            }) {
                failures.push(format!(
                    "{} {} (whole test): {e}\n    query: {whole}",
                    target.title, target.ref_id
                ));
            }
        }
        if let Err(e) = result {
            failures.push(format!(
                "{} {}: {e}\n    query: {expr}",
                target.title, target.ref_id
            ));
        }
    }
    // The variables' queries, as Grafana asks them (label values of a metric).
    for var in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(query) = var["query"]["query"].as_str() else {
            continue;
        };
        let args = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.split_once(", "))
            .ok_or_else(|| format!("variable query {query}"))?;
        let values = prometheus.label_values(args.1, args.0, f.t1, f.t2).await?;
        let want: &[&str] = match args.1 {
            "namespace" => &[f.namespace.as_str()],
            "model" => &["scripted", "scripted-fallback", "scripted-schedule"],
            other => return Err(format!("unexpected variable label {other}")),
        };
        if !want.iter().all(|w| values.iter().any(|v| v == w)) {
            failures.push(format!("variable {query}: {values:?}, expected {want:?}"));
        }
    }
    if failures.is_empty() {
        Ok(shown)
    } else {
        Err(format!(
            "{} of {} dashboard queries:\n{}",
            failures.len(),
            targets.len(),
            failures.join("\n")
        ))
    }
}
