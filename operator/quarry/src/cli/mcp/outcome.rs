//! What a finished research tool call returns: a local run followed to its end, a cluster run's report fetched, progress sent as MCP notifications.

use super::*;

/// Reads a standalone child's JSON lines into its state until it exits.
pub(super) async fn follow_child(
    mut child: tokio::process::Child,
    stdout: Option<tokio::process::ChildStdout>,
    tx: watch::Sender<LocalState>,
) {
    if let Some(stdout) = stdout {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            tx.send_modify(|state| {
                if let Some(phase) = value["phase"].as_str() {
                    state.phase = phase.to_string();
                }
                if let Some(progress) = value["progress"].as_str() {
                    state.progress = progress.to_string();
                }
                if value["type"] == "run_end" {
                    state.end = Some(value.clone());
                }
            });
        }
    }
    let status = child.wait().await;
    tx.send_modify(|state| {
        if state.end.is_none() {
            state.crashed = Some(match status {
                Ok(s) => format!("quarry run exited with {s} before finishing"),
                Err(e) => format!("quarry run could not be waited for: {e}"),
            });
        }
    });
}

/// The tool answer for a finished standalone run.
pub(super) fn local_outcome(name: &str, report: &Path, state: &LocalState) -> ToolResult {
    if let Some(reason) = &state.crashed {
        return Err(format!(
            "research run `{name}` failed: {reason}; the MCP server's stderr has its messages"
        ));
    }
    let end = state.end.clone().unwrap_or_default();
    let location = report.display().to_string();
    if end["ok"] == true {
        let text = std::fs::read_to_string(report)
            .map_err(|e| format!("the report {location} cannot be read: {e}"))?;
        return Ok(report_text(&text, &location));
    }
    let error = end["error"].as_str().unwrap_or("the run failed");
    // NoEvidence stores an honest "unable to research" report: show it with the failure.
    match end["report"].as_str().map(std::fs::read_to_string) {
        Some(Ok(text)) if !text.trim().is_empty() => Err(format!(
            "research run `{name}` failed: {error}\n\n{}",
            report_text(&text, &location)
        )),
        _ => Err(format!("research run `{name}` failed: {error}")),
    }
}

/// The tool answer for a finished cluster run: its report, or why there is none.
pub(super) async fn cluster_outcome(cluster: &Cluster, run: &ResearchRun) -> ToolResult {
    let name = run.name_any();
    let report = fetch_cluster_report(cluster, run).await;
    match (run.phase(), report) {
        (Phase::Completed, Ok((text, location))) => Ok(report_text(&text, &location)),
        (Phase::Completed, Err(e)) => Err(e),
        (_, report) => {
            let mut message = runs::ended_ok(run)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_else(|| format!("ResearchRun {name} ended {}", run.phase()));
            if let Ok((text, location)) = report {
                message.push_str("\n\n");
                message.push_str(&report_text(&text, &location));
            }
            Err(message)
        }
    }
}

/// Reads a finished cluster run's report and says where it lives. ConfigMap reports are read
/// here; other stores are named for `quarry report`.
pub async fn fetch_cluster_report(
    cluster: &Cluster,
    run: &ResearchRun,
) -> Result<(String, String), String> {
    let name = run.name_any();
    let ns = cluster.namespace.clone();
    let Some(report) = run.status.as_ref().and_then(|s| s.report.clone()) else {
        return Err(format!(
            "ResearchRun {ns}/{name} has no stored report ({}); see `quarry get {name} -n {ns} -o yaml` for its conditions",
            run.phase()
        ));
    };
    let Some(config_map) = report.config_map else {
        let url = report.object_url.unwrap_or_default();
        return Err(format!(
            "the report of ResearchRun {ns}/{name} is in the object store at {url}; print it with `quarry report {name} -n {ns}`"
        ));
    };
    let owner = run.controller_owner_ref(&()).unwrap_or_default();
    let store = quarry_operator::store::configmap::ConfigMapStore::new(
        cluster.client.clone(),
        &ns,
        &name,
        owner,
    );
    let location =
        format!("ConfigMap {ns}/{config_map}, key report.md (quarry report {name} -n {ns})");
    match store.get(quarry_engine::store::keys::REPORT_KEY).await {
        Ok(Some(bytes)) => Ok((String::from_utf8_lossy(&bytes).into_owned(), location)),
        Ok(None) => Err(format!("{location} holds no report.md")),
        Err(e) => Err(format!("reading {location}: {e}")),
    }
}

/// Progress notifications for one tool call, when the client asked for them.
pub(super) struct Progress {
    pub(super) target: Option<(rmcp::model::ProgressToken, rmcp::Peer<RoleServer>)>,
    pub(super) sent: Mutex<(f64, String)>,
}
pub(super) fn parse_args<T: serde::de::DeserializeOwned>(
    request: &CallToolRequestParams,
) -> Result<T, String> {
    let args = serde_json::Value::Object(request.arguments.clone().unwrap_or_default());
    serde_json::from_value(args).map_err(|e| {
        format!(
            "invalid arguments for {}: {e}; see the tool's input schema",
            request.name
        )
    })
}

impl Progress {
    pub(super) fn new(ctx: &RequestContext<RoleServer>) -> Self {
        Self {
            target: ctx
                .meta
                .get_progress_token()
                .map(|token| (token, ctx.peer.clone())),
            sent: Mutex::new((0.0, String::new())),
        }
    }

    /// Notifies `phase (progress)` once per change; the number only grows.
    pub(super) async fn send(&self, phase: &str, progress: &str) {
        let Some((token, peer)) = &self.target else {
            return;
        };
        let message = format!("{phase} {progress}").trim().to_string();
        let value = {
            let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
            if sent.1 == message || message.is_empty() {
                return;
            }
            let pct = progress
                .trim_end_matches('%')
                .parse::<f64>()
                .unwrap_or(sent.0);
            // Notifications must increase even when the percentage does not.
            sent.0 = if pct > sent.0 { pct } else { sent.0 + 0.001 };
            sent.1 = message.clone();
            sent.0
        };
        let _ = peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), value)
                    .with_total(100.0)
                    .with_message(message),
            )
            .await;
    }
}
