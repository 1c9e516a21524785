//! What a worker tells the leader while and after it runs a task: heartbeats, progress, the result, and polling whether the run still wants it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::streams::StreamReadReply;
use tokio::sync::{mpsc, watch};
use tracing::warn;

use super::{KEEPALIVE, POLL_EVERY, PUBLISH_TRIES, Stop};
use crate::queue::protocol::{
    self, GROUP, Origin, ResultMessage, RunKeys, TASKS_STREAM, WireCall, WireSource,
};
use crate::queue::{COMMAND_TIMEOUT, QueueError, field_bytes, timed};
use quarry_engine::llm::Usage;
use quarry_engine::llm::router::SpendGuard;
use quarry_engine::research::machine::state::ResearcherReport;

/// Keeps the entry claimed while the task runs; says `Lost` when another consumer has it.
pub(super) async fn heartbeat(
    mut conn: ConnectionManager,
    consumer: String,
    id: String,
    every: Duration,
    stop: watch::Sender<Option<Stop>>,
) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let kept: Result<i64, QueueError> = timed(
            "heartbeat",
            COMMAND_TIMEOUT,
            redis::cmd("EVAL")
                .arg(KEEPALIVE)
                .arg(1)
                .arg(TASKS_STREAM)
                .arg(GROUP)
                .arg(&consumer)
                .arg(&id)
                .query_async(&mut conn),
        )
        .await;
        match kept {
            Ok(1) => {}
            Ok(_) => {
                let _ = stop.send(Some(Stop::Lost));
                return;
            }
            // A missed beat or two is within the visibility timeout.
            Err(e) => warn!(error = %e, "heartbeat failed"),
        }
    }
}

/// Feeds steered sibling reports to the researcher and watches the run's cancellation.
pub(super) async fn poll_run(
    mut conn: ConnectionManager,
    keys: RunKeys,
    task_id: u32,
    attempt: String,
    inbox: mpsc::UnboundedSender<ResearcherReport>,
    stop: watch::Sender<Option<Stop>>,
) {
    let stream = keys.steer(task_id);
    // From the stream's start: a reclaiming worker gets what was steered to its predecessor.
    let mut last = "0-0".to_string();
    loop {
        let reply: Result<(Option<StreamReadReply>, bool, bool), QueueError> = timed(
            "poll run",
            COMMAND_TIMEOUT,
            redis::pipe()
                .cmd("XREAD")
                .arg("COUNT")
                .arg(16)
                .arg("STREAMS")
                .arg(&stream)
                .arg(&last)
                .cmd("EXISTS")
                .arg(&keys.done)
                .cmd("SISMEMBER")
                .arg(&keys.cancelled)
                .arg(&attempt)
                .query_async(&mut conn),
        )
        .await;
        match reply {
            Ok((reports, done, cancelled)) => {
                for entry in reports.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
                    last = entry.id.clone();
                    match field_bytes(&entry.map, "m").map(|b| protocol::decode_steer(&b)) {
                        Some(Ok(report)) => {
                            let _ = inbox.send(report);
                        }
                        _ => warn!(entry = %entry.id, "unreadable steering entry"),
                    }
                }
                if done || cancelled {
                    let _ = stop.send(Some(Stop::Cancelled));
                    return;
                }
            }
            Err(e) => warn!(error = %e, "cannot poll the run"),
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Turns the worker's ledger into messages for the run: usage, per-model usage and provenance
/// lines not sent yet.
pub(super) struct Reporter {
    pub(super) keys: RunKeys,
    pub(super) base: Origin,
    pub(super) spend: Arc<SpendGuard>,
    pub(super) sent_calls: usize,
    pub(super) sent_sources: usize,
    pub(super) sent_by_model: BTreeMap<String, Usage>,
}

impl Reporter {
    pub(super) fn next_origin(&mut self) -> Origin {
        self.base.seq += 1;
        self.base.clone()
    }

    /// The next progress message, or `None` when there is nothing to report; `queued` says
    /// the researcher reported since the last one.
    pub(super) fn progress(
        &mut self,
        units: u32,
        queued: bool,
        usage: Usage,
    ) -> Option<ResultMessage> {
        let (calls, _) = self.spend.calls();
        let sources = self.spend.sources();
        let by_model_now = self.spend.by_model();
        let by_model = protocol::usage_delta(&by_model_now, &self.sent_by_model);
        let new_calls: Vec<WireCall> = calls
            .iter()
            .skip(self.sent_calls)
            .take(protocol::MAX_LINES_PER_MESSAGE)
            .map(WireCall::from)
            .collect();
        let new_sources: Vec<WireSource> = sources
            .iter()
            .skip(self.sent_sources)
            .take(protocol::MAX_LINES_PER_MESSAGE)
            .map(WireSource::from)
            .collect();
        if !queued
            && usage == Usage::default()
            && by_model.is_empty()
            && new_calls.is_empty()
            && new_sources.is_empty()
        {
            return None;
        }
        self.sent_calls += new_calls.len();
        self.sent_sources += new_sources.len();
        self.sent_by_model = by_model_now;
        Some(ResultMessage::Progress {
            origin: self.next_origin(),
            units,
            usage,
            by_model,
            calls: new_calls,
            sources: new_sources,
        })
    }
}

/// Publishes progress in order, coalescing what queued up meanwhile; when the researcher is
/// done, sends what is left of the ledger (failed calls, last reads) and hands the reporter back.
pub(super) async fn publish_progress(
    mut conn: ConnectionManager,
    mut reporter: Reporter,
    mut rx: mpsc::UnboundedReceiver<(u32, Usage)>,
) -> Reporter {
    let mut units = 0;
    loop {
        let first = rx.recv().await;
        let closed = first.is_none();
        let mut usage = Usage::default();
        let mut any = false;
        if let Some((u, used)) = first {
            units = units.max(u);
            usage.add(&used);
            any = true;
        }
        while let Ok((u, used)) = rx.try_recv() {
            units = units.max(u);
            usage.add(&used);
            any = true;
        }
        // Lines past one message's bound follow in further messages.
        while let Some(message) = reporter.progress(units, any, usage) {
            usage = Usage::default();
            any = false;
            if let Err(e) = send_result(&mut conn, &reporter.keys, &message).await {
                warn!(error = %e, "progress not published; its usage is missing from the run");
            }
        }
        if closed {
            return reporter;
        }
    }
}

pub(super) async fn send_result(
    conn: &mut ConnectionManager,
    keys: &RunKeys,
    message: &ResultMessage,
) -> Result<(), QueueError> {
    let bytes = protocol::encode_result(message)?;
    let mut last = None;
    for n in 0..PUBLISH_TRIES {
        if n > 0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let sent: Result<(), QueueError> = timed(
            "XADD results",
            COMMAND_TIMEOUT,
            redis::pipe()
                .cmd("XADD")
                .arg(&keys.results)
                .arg("*")
                .arg("m")
                .arg(&bytes)
                .ignore()
                .cmd("EXPIRE")
                .arg(&keys.results)
                .arg(protocol::RUN_KEY_TTL.as_secs())
                .ignore()
                .query_async(conn),
        )
        .await;
        match sent {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| QueueError::Config("no publish attempt".into())))
}
