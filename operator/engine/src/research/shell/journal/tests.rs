//! Unit tests of `journal`.

use super::*;
use crate::llm::router::CallRecord;
use crate::store::memory::MemoryStore;

fn call(model: &str, cost: u64, outcome: &'static str, time: &str) -> CallRecord {
    CallRecord {
        time: time.into(),
        kind: "modelCall",
        tier: "primary".into(),
        provider: "openai".into(),
        model: model.into(),
        purpose: crate::llm::CallPurpose::Research,
        outcome,
        input_tokens: 100,
        cached_input_tokens: 0,
        output_tokens: 10,
        cost_usd: String::new(),
        duration_ms: 5,
        trace_id: None,
        task: Some(1),
        cost_pico_usd: cost,
        run_total: RunTotal::default(),
    }
}

fn settle(spend: &SpendGuard, model: &str, cost: u64, time: &str) {
    let used = Usage {
        input_tokens: 100,
        cached_input_tokens: 0,
        output_tokens: 10,
        cost_pico_usd: cost,
        llm_calls: 1,
    };
    let r = spend.reserve(0, 0).unwrap();
    spend.settle(r, &used);
    spend.log_call(call(model, cost, "ok", time));
}

#[tokio::test]
async fn every_call_line_carries_the_running_total_and_a_resumed_attempt_continues_it() {
    let store: Arc<dyn ArtifactStore> = Arc::new(MemoryStore::new());
    let spend = Arc::new(SpendGuard::default());
    let log = EventLog::attach(store.clone(), spend.clone(), Vec::new());
    settle(&spend, "m1", 700, "2026-01-01T00:00:01.000Z");
    spend.log_call(call("m1", 0, "timeout", "2026-01-01T00:00:02.000Z"));
    settle(&spend, "m2", 300, "2026-01-01T00:00:03.000Z");
    assert!(log.commit().await.unwrap());
    assert!(!log.commit().await.unwrap(), "nothing new: no write");
    let first = store.get(EVENTS_KEY).await.unwrap().unwrap();
    let r = recovered_spend(&first).unwrap();
    assert_eq!((r.total.llm_calls, r.total.cost_pico_usd), (2, 1000));
    assert_eq!(r.by_model.as_ref().unwrap()["m1"].cost_pico_usd, 700);

    // The next attempt starts from the recovered total and appends to the same log.
    let spend2 = Arc::new(SpendGuard::default());
    spend2.configure(None, None, &r.total);
    let log2 = EventLog::attach(store.clone(), spend2.clone(), first);
    settle(&spend2, "m1", 50, "2026-01-01T00:01:00.000Z");
    log2.commit().await.unwrap();
    let r = recovered_spend(&store.get(EVENTS_KEY).await.unwrap().unwrap()).unwrap();
    assert_eq!((r.total.llm_calls, r.total.cost_pico_usd), (3, 1050));
    assert_eq!(r.by_model.unwrap()["m1"].cost_pico_usd, 750);
}

#[tokio::test]
async fn the_router_hook_writes_through_the_journal() {
    let store: Arc<dyn ArtifactStore> = Arc::new(MemoryStore::new());
    let spend = Arc::new(SpendGuard::default());
    let _log = EventLog::attach(store.clone(), spend.clone(), Vec::new());
    settle(&spend, "m1", 5, "2026-01-01T00:00:01.000Z");
    spend.sync_journal().await;
    assert!(store.get(EVENTS_KEY).await.unwrap().is_some());
}

#[test]
fn a_trimmed_log_keeps_the_total_but_not_the_per_model_split() {
    let mut lines = Vec::new();
    for (n, cost) in [(1u64, 10u64), (2, 30)] {
        let mut c = call("m", 20, "ok", "t");
        c.run_total = RunTotal {
            llm_calls: n,
            cost_pico_usd: cost,
            ..RunTotal::default()
        };
        lines.push(serde_json::to_string(&c).unwrap());
    }
    // Only the newest line survived trimming.
    let r = recovered_spend(format!("{}\n", lines[1]).as_bytes()).unwrap();
    assert_eq!((r.total.llm_calls, r.total.cost_pico_usd), (2, 30));
    assert_eq!(r.by_model, None);
    assert_eq!(recovered_spend(b"not json\n{\"kind\":\"search\"}\n"), None);
}

#[test]
fn trimming_cuts_at_line_boundaries() {
    let mut log = b"aaaa\nbbbb\ncccc\n".to_vec();
    trim_oldest(&mut log, 8);
    assert_eq!(log, b"cccc\n");
}
