//! The run's provenance log (`events.jsonl`, one JSON line per call, search and read), which doubles as its
//! cost journal.
//!
//! Every model call, search and page read is one JSON line. The router waits for the log to be
//! durable after each answered call ([`crate::llm::router::CallJournal`]), and each call line
//! carries the run's cumulative spend (`runTotal`), so a run resumed after a crash recovers
//! exactly what it paid, the killed attempt's calls included, even though its checkpoint is
//! older. Concurrent calls share one write (group commit): a run costs one store write per
//! answered call at most.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Mutex;
use tracing::warn;

use crate::llm::Usage;
use crate::llm::router::{CallJournal, RunTotal, SpendGuard};
use crate::store::{ArtifactStore, StoreError};

use crate::store::keys::EVENTS_KEY;
/// Largest provenance log written, in bytes; older lines are dropped first (about 10k calls,
/// a few hundred KB once the ConfigMap store gzips it).
pub const MAX_EVENTS_BYTES: usize = 4 * 1024 * 1024;

/// The log of one run attempt on top of what earlier attempts wrote.
pub struct EventLog {
    store: Arc<dyn ArtifactStore>,
    spend: Arc<SpendGuard>,
    /// The log as a resumed run found it.
    earlier: Vec<u8>,
    /// The spend guard's record count last written.
    written: Mutex<u64>,
}

impl EventLog {
    /// A log over `earlier` (empty for a new run) that journals `spend`'s calls into `store`.
    pub fn attach(
        store: Arc<dyn ArtifactStore>,
        spend: Arc<SpendGuard>,
        earlier: Vec<u8>,
    ) -> Arc<Self> {
        let log = Arc::new(Self {
            store,
            spend: spend.clone(),
            earlier,
            written: Mutex::new(0),
        });
        let journal: Arc<dyn CallJournal> = log.clone();
        spend.set_journal(Arc::downgrade(&journal));
        log
    }

    /// Writes the log when records were added since the last write; returns whether it wrote.
    pub async fn commit(&self) -> Result<bool, StoreError> {
        // Callers queue here; the first one writes everything logged by then for all of them.
        let mut written = self.written.lock().await;
        let logged = self.spend.logged();
        if logged == *written {
            return Ok(false);
        }
        let log = self.render();
        self.store.put(EVENTS_KEY, &log).await?;
        *written = logged;
        Ok(true)
    }

    /// The whole log: earlier attempts' lines, then this attempt's, interleaved by time.
    pub fn render(&self) -> Vec<u8> {
        let (calls, _) = self.spend.calls();
        let sources = self.spend.sources();
        let mut log = self.earlier.clone();
        // RFC 3339 in UTC with fixed precision sorts as text.
        let mut lines: Vec<(&str, serde_json::Result<Vec<u8>>)> = calls
            .iter()
            .map(|c| (c.time.as_str(), serde_json::to_vec(c)))
            .chain(
                sources
                    .iter()
                    .map(|r| (r.time.as_str(), serde_json::to_vec(r))),
            )
            .collect();
        lines.sort_by(|a, b| a.0.cmp(b.0));
        for (_, line) in lines {
            if let Ok(line) = line {
                log.extend_from_slice(&line);
                log.push(b'\n');
            }
        }
        trim_oldest(&mut log, MAX_EVENTS_BYTES);
        log
    }
}

#[async_trait::async_trait]
impl CallJournal for EventLog {
    async fn sync(&self) {
        if let Err(e) = self.commit().await {
            // A failed write costs exactness after a crash, never the run.
            warn!(error = %e, "provenance log not written");
        }
    }
}

/// Keeps the newest `max` bytes of a JSONL log, cut at a line boundary.
fn trim_oldest(log: &mut Vec<u8>, max: usize) {
    if log.len() > max {
        let cut = log.len() - max;
        let start = log[cut..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(log.len(), |p| cut + p + 1);
        log.drain(..start);
    }
}

/// What a run had spent according to its provenance log.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recovered {
    /// The newest `runTotal`: all answered calls of every attempt.
    pub total: Usage,
    /// Spend per model, when the log still holds every call line (it is trimmed past
    /// [`MAX_EVENTS_BYTES`]).
    pub by_model: Option<BTreeMap<String, Usage>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallLine {
    kind: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default, rename = "costPicoUSD")]
    cost_pico_usd: u64,
    #[serde(default)]
    run_total: Option<RunTotal>,
}

/// Reads the spend recorded in a provenance log; `None` when it records no call with a total
/// (a new run, or a log written before totals existed). Unreadable lines are skipped.
pub fn recovered_spend(log: &[u8]) -> Option<Recovered> {
    let mut total: Option<RunTotal> = None;
    let mut by_model: BTreeMap<String, Usage> = BTreeMap::new();
    let mut ok_calls = 0u64;
    for line in log.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(call) = serde_json::from_slice::<CallLine>(line) else {
            continue;
        };
        if call.kind != "modelCall" {
            continue;
        }
        if let Some(t) = call.run_total {
            // The line's total is taken before its own call settles for failed calls and
            // after it for answered ones; the largest is the newest.
            if total.is_none_or(|best| {
                t.llm_calls > best.llm_calls
                    || (t.llm_calls == best.llm_calls && t.cost_pico_usd > best.cost_pico_usd)
            }) {
                total = Some(t);
            }
        }
        if call.outcome == "ok" {
            ok_calls += 1;
            by_model.entry(call.model).or_default().add(&Usage {
                input_tokens: call.input_tokens,
                cached_input_tokens: call.cached_input_tokens,
                output_tokens: call.output_tokens,
                cost_pico_usd: call.cost_pico_usd,
                llm_calls: 1,
            });
        }
    }
    let total: Usage = total?.into();
    let complete = ok_calls == total.llm_calls;
    Some(Recovered {
        total,
        by_model: complete.then_some(by_model),
    })
}

#[cfg(test)]
mod tests;
