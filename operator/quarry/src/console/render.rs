//! Pure: the console's pages as HTML. Every value is escaped here; the report is rendered by
//! [`super::markdown`]. Pages work without JavaScript; `console.js` only adds live updates.

use std::collections::BTreeSet;

use serde_json::Value;

use super::markdown::{Citations, render_report};
use super::model::{RunView, url_segment};
use super::source::{Artifacts, NewRun};

/// Phases offered by the filter.
pub const PHASES: [&str; 8] = [
    "Pending",
    "Planning",
    "AwaitingApproval",
    "Researching",
    "Synthesizing",
    "Completed",
    "Failed",
    "Cancelled",
];

/// Pure: `s` safe in HTML text and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What [`layout`] looks for in the header's source line to offer signing out.
pub const SIGNED_IN_MARK: &str = " · signed in as ";

/// The page around `body`.
pub fn layout(title: &str, source: &str, body: &str) -> String {
    let sign_out = if source.contains(SIGNED_IN_MARK) {
        " <a href=\"/console/logout\">Sign out</a>"
    } else {
        ""
    };
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>{title} · Quarry</title><link rel=\"stylesheet\" href=\"/console/static/console.css\">\
<script src=\"/console/static/console.js\" defer></script></head><body>\
<header><a class=\"brand\" href=\"/console\">Quarry</a> <span class=\"source\">{source}</span>\
<nav><a href=\"/console\">Runs</a> <a href=\"/console/new\">New run</a>{sign_out}</nav></header>\
<main>{body}</main></body></html>\n",
        title = esc(title),
        source = esc(source),
    )
}

/// The runs list's filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Filter {
    /// Namespace (empty: the default; `*`: all).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Phase (empty: any).
    #[serde(default)]
    pub phase: Option<String>,
}

fn row(run: &RunView) -> String {
    format!(
        "<tr data-run=\"{key}\"><td>{ns}</td><td><a href=\"{href}\">{name}</a></td><td>{mode}</td>\
<td data-field=\"phase\" class=\"phase phase-{phase}\">{phase}</td><td data-field=\"progress\">{progress}</td>\
<td data-field=\"cost\">{cost}</td><td data-field=\"tokens\">{tokens}</td><td>{age}</td><td data-field=\"report\">{report}</td></tr>",
        key = esc(&format!("{}/{}", run.namespace, run.name)),
        ns = esc(&run.namespace),
        href = esc(&run.href()),
        name = esc(&run.name),
        mode = esc(&run.mode),
        phase = esc(&run.phase),
        progress = esc(&run.progress),
        cost = esc(&run.cost),
        tokens = run.tokens,
        age = esc(&run.age),
        report = esc(&run.report),
    )
}

/// The runs list: filter form, table (live-updated by `console.js` from `/console/watch`).
pub fn runs_page(
    runs: &[RunView],
    filter: &Filter,
    namespace: Option<&str>,
    source: &str,
) -> String {
    let phase = filter.phase.clone().unwrap_or_default();
    let shown: Vec<&RunView> = runs
        .iter()
        .filter(|r| phase.is_empty() || r.phase == phase)
        .collect();
    let options: String = std::iter::once(String::from("<option value=\"\">any phase</option>"))
        .chain(PHASES.iter().map(|p| {
            format!(
                "<option{}>{p}</option>",
                if *p == phase { " selected" } else { "" }
            )
        }))
        .collect();
    let rows: String = shown.iter().map(|r| row(r)).collect();
    let empty = if shown.is_empty() {
        "<p class=\"empty\">No runs here yet. <a href=\"/console/new\">Create one</a>.</p>"
    } else {
        ""
    };
    let watch = format!(
        "/console/watch?namespace={}&phase={}",
        url_segment(namespace.unwrap_or("*")),
        url_segment(&phase)
    );
    let body = format!(
        "<h1>Research runs</h1>\
<form class=\"filter\" method=\"get\" action=\"/console\"><label>Namespace <input name=\"namespace\" value=\"{ns}\" placeholder=\"* for all\"></label> \
<label>Phase <select name=\"phase\">{options}</select></label> <button type=\"submit\">Filter</button></form>\
<table id=\"runs\" data-watch=\"{watch}\"><thead><tr><th>Namespace</th><th>Name</th><th>Mode</th><th>Phase</th><th>Progress</th><th>Cost (USD)</th><th>Tokens</th><th>Age</th><th>Report</th></tr></thead>\
<tbody>{rows}</tbody></table>{empty}",
        ns = esc(namespace.unwrap_or("*")),
        watch = esc(&watch),
    );
    layout("Runs", source, &body)
}

/// Sources of a run for the table: (url, title, read, (supported, checked) claims).
fn sources(findings: &Value, citations: &Citations) -> Vec<(String, String, bool, (usize, usize))> {
    let read: BTreeSet<String> = findings["researcherReports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["fetched"].as_array().into_iter().flatten())
        .filter_map(|u| u.as_str().map(str::to_string))
        .chain(
            findings["citedUrls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|u| u.as_str().map(str::to_string)),
        )
        .collect();
    findings["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let url = s["url"].as_str()?.to_string();
            let title = s["title"].as_str().unwrap_or_default().to_string();
            let counts = citations.counts(&url);
            Some((url.clone(), title, read.contains(&url), counts))
        })
        .collect()
}

/// Pure: calls, tokens and cost (micro-USD) per role (`purpose`: planner, researcher, writer...)
/// from the `modelCall` events of a run's log, in order of first call.
pub fn cost_by_role(events: &[Value]) -> Vec<(String, u64, u64, u64)> {
    let mut out: Vec<(String, u64, u64, u64)> = Vec::new();
    for e in events.iter().filter(|e| e["type"] == "modelCall") {
        let role = e["purpose"].as_str().unwrap_or("other").to_string();
        let tokens =
            e["inputTokens"].as_u64().unwrap_or(0) + e["outputTokens"].as_u64().unwrap_or(0);
        let micros = e["costUSD"]
            .as_str()
            .and_then(|c| quarry_api::values::parse_usd_micros(c).ok())
            .unwrap_or(0);
        match out.iter_mut().find(|r| r.0 == role) {
            Some(r) => {
                r.1 += 1;
                r.2 += tokens;
                r.3 += micros;
            }
            None => out.push((role, 1, tokens, micros)),
        }
    }
    out
}

/// A run's page: status, agenda, cost, the report with its citations marked, sources, events.
pub fn run_page(
    run: &RunView,
    artifacts: &Artifacts,
    csrf: &str,
    writable: bool,
    live_log: bool,
    source: &str,
) -> String {
    let mut body = format!(
        "<h1>{name}</h1><p class=\"query\">{query}</p>\
<dl class=\"facts\" id=\"run\" data-watch=\"/console/watch?namespace={wns}&amp;name={wname}\" data-finished=\"{finished}\">\
<dt>Namespace</dt><dd>{ns}</dd><dt>Mode</dt><dd>{mode}</dd>\
<dt>Phase</dt><dd data-field=\"phase\" class=\"phase phase-{phase}\">{phase}</dd>\
<dt>Progress</dt><dd data-field=\"progress\">{progress}</dd><dt>Cost (USD)</dt><dd data-field=\"cost\">{cost}</dd>\
<dt>Tokens</dt><dd data-field=\"tokens\">{tokens}</dd><dt>Report</dt><dd data-field=\"report\">{report}</dd></dl>",
        name = esc(&run.name),
        query = esc(&run.query),
        wns = url_segment(&run.namespace),
        wname = url_segment(&run.name),
        finished = run.finished,
        ns = esc(&run.namespace),
        mode = esc(&run.mode),
        phase = esc(&run.phase),
        progress = esc(&run.progress),
        cost = esc(&run.cost),
        tokens = run.tokens,
        report = esc(&run.report),
    );
    body.push_str(&format!(
        "<p class=\"message\" data-field=\"message\">{}</p>",
        esc(&run.message)
    ));
    if writable && run.phase == "AwaitingApproval" {
        let estimate = run
            .estimate
            .as_ref()
            .map(|e| format!(" Estimated cost: {}.", esc(e)))
            .unwrap_or_default();
        body.push_str(&format!(
            "<section class=\"approval\"><p>The plan below waits for your decision; nothing is searched until then.{estimate}</p>\
<form method=\"post\" action=\"{href}/approve\" class=\"approve\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\">Approve plan</button></form> \
<form method=\"post\" action=\"{href}/cancel\" class=\"reject\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><button type=\"submit\">Reject plan</button></form></section>",
            href = esc(&run.href()),
            csrf = esc(csrf)
        ));
    }
    if writable && !run.finished {
        body.push_str(&format!(
            "<form method=\"post\" action=\"{}/cancel\" class=\"cancel\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
<button type=\"submit\">Cancel run</button></form>",
            esc(&run.href()),
            esc(csrf)
        ));
    }
    if !run.agenda.is_empty() {
        body.push_str("<h2>Agenda</h2><table id=\"agenda\"><thead><tr><th>Task</th><th>State</th></tr></thead><tbody>");
        for t in &run.agenda {
            body.push_str(&format!(
                "<tr><td>{}</td><td class=\"task-{}\">{}</td></tr>",
                esc(&t.query),
                esc(&t.state),
                esc(&t.state)
            ));
        }
        body.push_str("</tbody></table>");
    }
    if !run.by_model.is_empty() {
        body.push_str("<h2>Cost by model</h2><table><thead><tr><th>Model</th><th>Calls</th><th>Tokens</th><th>Cost (USD)</th></tr></thead><tbody>");
        for m in &run.by_model {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&m.model),
                m.calls,
                m.tokens,
                esc(&m.cost_usd)
            ));
        }
        body.push_str("</tbody></table>");
    }
    let roles = cost_by_role(&artifacts.events);
    if !roles.is_empty() {
        body.push_str("<h2>Cost by role</h2><table id=\"roles\"><thead><tr><th>Role</th><th>Calls</th><th>Tokens</th><th>Cost (USD)</th></tr></thead><tbody>");
        for (role, calls, tokens, micros) in roles {
            body.push_str(&format!(
                "<tr><td>{}</td><td>{calls}</td><td>{tokens}</td><td>{}.{:06}</td></tr>",
                esc(&role),
                micros / 1_000_000,
                micros % 1_000_000
            ));
        }
        body.push_str("</tbody></table>");
    }
    let findings = artifacts.findings.clone().unwrap_or(Value::Null);
    let citations = Citations::from_findings(&findings);
    match &artifacts.report {
        Some(report) => {
            body.push_str(&format!(
                "<h2>Report</h2><p class=\"downloads\"><a href=\"{href}/report.md\" download>report.md</a>{findings}</p>\
<p class=\"legend\">Citations: <span class=\"cite cite-verified\">verified</span> a cited claim is supported by the page read · \
<span class=\"cite cite-unsupported\">unsupported</span> the page does not support the claim · \
<span class=\"cite cite-read\">source read</span> read, no claim checked · <span class=\"cite cite-unchecked\">unchecked</span></p>\
<article class=\"report\">{html}</article>",
                href = esc(&run.href()),
                findings = if artifacts.findings.is_some() {
                    format!(" · <a href=\"{}/findings.json\" download>findings.json</a>", esc(&run.href()))
                } else {
                    String::new()
                },
                html = render_report(report, &citations),
            ));
            if !citations.removed.is_empty() {
                body.push_str("<h3>Removed citations</h3><p>The evidence gate removed these links: the run neither read nor saw them.</p><ul class=\"removed\">");
                for url in &citations.removed {
                    body.push_str(&format!(
                        "<li><span class=\"cite cite-removed\">removed</span> {}</li>",
                        esc(url)
                    ));
                }
                body.push_str("</ul>");
            }
        }
        None if run.finished => body.push_str("<h2>Report</h2><p>No report was stored.</p>"),
        None => body.push_str(
            "<h2>Report</h2><p class=\"pending\">The report is written when the run completes.</p>",
        ),
    }
    let table = sources(&findings, &citations);
    if !table.is_empty() {
        body.push_str("<h2>Sources</h2><table id=\"sources\"><thead><tr><th>Source</th><th>Read</th><th>Claims supported</th></tr></thead><tbody>");
        for (url, title, read, (ok, checked)) in table {
            let shown = if title.is_empty() { url.clone() } else { title };
            body.push_str(&format!(
                "<tr><td><a href=\"{}\" rel=\"noopener noreferrer nofollow\">{}</a></td><td>{}</td><td>{}</td></tr>",
                esc(&safe_href(&url)),
                esc(&shown),
                if read { "yes" } else { "no" },
                if checked == 0 { "-".to_string() } else { format!("{ok} of {checked}") }
            ));
        }
        body.push_str("</tbody></table>");
    }
    // A running run's log is followed live where the console serves the event stream (in the
    // cluster); the stored log is shown once the run has ended.
    let stream = if live_log && !run.finished {
        format!(" data-stream=\"{}/log\"", esc(&run.href()))
    } else {
        String::new()
    };
    body.push_str(&format!(
        "<h2>Events</h2><ol id=\"events\" class=\"events\"{stream}>"
    ));
    for e in &artifacts.events {
        body.push_str(&format!("<li>{}</li>", esc(&crate::logs::render(e))));
    }
    body.push_str("</ol>");
    if artifacts.events.is_empty() && stream.is_empty() {
        body.push_str("<p class=\"empty\">The event log is stored when the run ends; <code>quarry logs -f NAME</code> follows a running one.</p>");
    }
    layout(&run.name, source, &body)
}

/// Pure: `url` when it is http(s), else `#` (a source URL is data from the web).
pub fn safe_href(url: &str) -> String {
    let lower = url.trim_start().to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        url.to_string()
    } else {
        "#".to_string()
    }
}

/// The form that creates a run.
pub fn new_run_page(
    form: &NewRun,
    namespace: &str,
    csrf: &str,
    error: Option<&str>,
    writable: bool,
    source: &str,
) -> String {
    let mut body = String::from("<h1>New research run</h1>");
    if !writable {
        body.push_str("<p class=\"error\">This console shows standalone runs and cannot start one: use <code>quarry run --state-dir DIR</code>.</p>");
        return layout("New run", source, &body);
    }
    if let Some(e) = error {
        body.push_str(&format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e)));
    }
    let mode = |m: &str| if form.mode == m { " selected" } else { "" };
    body.push_str(&format!(
        "<form method=\"post\" action=\"/console/runs\" class=\"new\"><input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
<label>Question <textarea name=\"query\" required minlength=\"3\" maxlength=\"4000\">{query}</textarea></label>\
<label>Namespace <input name=\"namespace\" value=\"{ns}\" required></label>\
<label>Mode <select name=\"mode\"><option value=\"quick\"{q}>quick</option><option value=\"deep\"{d}>deep</option></select></label>\
<label>Profile <input name=\"profile\" value=\"{profile}\" placeholder=\"default\"></label>\
<label>Outputs <input name=\"outputs\" value=\"{outputs}\" placeholder=\"study, ideas, implementations\"></label>\
<label>Cost limit (USD) <input name=\"max_cost_usd\" value=\"{cost}\" placeholder=\"0.50\"></label>\
<label>Time limit <input name=\"timeout\" value=\"{timeout}\" placeholder=\"30m\"></label>\
<button type=\"submit\">Start research</button></form>",
        csrf = esc(csrf),
        query = esc(&form.query),
        ns = esc(namespace),
        q = mode("quick"),
        d = mode("deep"),
        profile = esc(&form.profile),
        outputs = esc(&form.outputs),
        cost = esc(&form.max_cost_usd),
        timeout = esc(&form.timeout),
    ));
    layout("New run", source, &body)
}

/// A page saying what went wrong and what to do.
pub fn error_page(title: &str, message: &str, source: &str) -> String {
    layout(
        title,
        source,
        &format!(
            "<h1>{}</h1><p class=\"error\" role=\"alert\">{}</p><p><a href=\"/console\">Back to the runs</a></p>",
            esc(title),
            esc(message)
        ),
    )
}

/// The sign-in page of the in-cluster console: a Kubernetes bearer token.
pub fn login_page(csrf: &str, error: Option<&str>) -> String {
    let error = error
        .map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e)))
        .unwrap_or_default();
    layout(
        "Sign in",
        "in-cluster console",
        &format!(
            "<h1>Sign in</h1>{error}<p>Paste a Kubernetes bearer token (for example <code>kubectl create token NAME</code>). \
Your own RBAC permissions decide what you see and do.</p>\
<form method=\"post\" action=\"/console/login\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
<label>Token <input type=\"password\" name=\"token\" autocomplete=\"off\" required></label><button type=\"submit\">Sign in</button></form>",
            esc(csrf)
        ),
    )
}

/// The sign-out page of the in-cluster console: one button (a POST with the CSRF token).
pub fn logout_page(csrf: &str) -> String {
    layout(
        "Sign out",
        "in-cluster console",
        &format!(
            "<h1>Sign out</h1><p>This browser forgets your token; sign in again to continue.</p>\
<form method=\"post\" action=\"/console/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
<button type=\"submit\">Sign out</button></form>",
            esc(csrf)
        ),
    )
}

#[cfg(test)]
mod tests;
