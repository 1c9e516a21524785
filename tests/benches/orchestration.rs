//! Orchestration overhead: wall time of a run against the critical path its latencies impose.
//!
//! Run with `cargo bench -p quarry-e2e --bench orchestration` (`QUARRY_BENCH_REPS`, default 5).
//! A scripted model answers every call after 200 ms, a fake searx answers after 50 ms and a page
//! server after 20 ms (all on 127.0.0.1, in this process). A quick run and a deep run (plan of
//! three tasks, three researchers at once, an evaluation that delegates a fourth task, a second
//! round, a final evaluation, page summaries, the written study) run in-process through
//! `quarry_operator::engine_builder::build_engine` and `quarry_engine::research::shell::executor::run`. The critical path, the
//! baseline, is derived from each run's own `events.jsonl` (see `quarry_e2e::critical_path`),
//! so it is measured in the same run as the wall time it is compared with.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use quarry_api::ResearchProfile;
use quarry_e2e::bench::{DEEP_QUESTION, QUICK_QUESTION, machine_note, median, scripted_run};
use quarry_e2e::critical_path::{self, CriticalPath, Shape, Span};
use quarry_e2e::model_server::ScriptedModel;
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::slow_web::SlowWeb;
use quarry_engine::research::agents::settings::EngineSettings;
use quarry_engine::research::machine::state::{Mode, Phase, RunInput, RunState};
use quarry_engine::research::shell::executor::{self, Control, NoopObserver};
use quarry_engine::store::keys::EVENTS_KEY;
use quarry_engine::store::memory::MemoryStore;
use quarry_operator::engine_builder;

const MODEL_MS: u64 = 200;
const SEARCH_MS: u64 = 50;
const FETCH_MS: u64 = 20;
type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// One measured run.
struct Measured {
    wall_ms: f64,
    build_ms: f64,
    path: CriticalPath,
    nominal: CriticalPath,
    model_calls: usize,
    logged_calls: usize,
    searches: usize,
    fetches: usize,
    rounds: u32,
    writes: usize,
}

async fn one_run(web: &SlowWeb, mode: Mode) -> BenchResult<Measured> {
    let model = ScriptedModel::start(scripted_run(web, mode, MODEL_MS)).await?;
    let profile =
        ResearchProfile::from_yaml(&scripted_profile(&model.base_url(), &web.base_url()))?;
    let store = Arc::new(MemoryStore::new());
    let key = |_: &quarry_api::ModelTier| Some("sk-bench".to_string());
    let built = Instant::now();
    let engine = engine_builder::build_engine(&profile.spec, &key, store.clone(), None)?;
    let build_ms = built.elapsed().as_secs_f64() * 1000.0;
    let summary_slots = engine.settings.summary_concurrency;
    let question = if mode == Mode::Quick {
        QUICK_QUESTION
    } else {
        DEEP_QUESTION
    };
    let (_tx, rx) = watch::channel(Control::Run);
    let started = Instant::now();
    let state = executor::run(
        Arc::new(engine),
        RunState::new(RunInput::new(question, mode)),
        Arc::new(NoopObserver),
        rx,
    )
    .await;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    if state.phase != Phase::Completed {
        return Err(format!(
            "the {mode:?} run ended {:?}: {:?}",
            state.phase, state.failure
        )
        .into());
    }
    let log = store
        .text(EVENTS_KEY)
        .ok_or("the run wrote no events.jsonl")?;
    // QUARRY_BENCH_SHOW_LOG=1 prints every run's provenance log (to check the derivation).
    if std::env::var_os("QUARRY_BENCH_SHOW_LOG").is_some() {
        eprintln!("{log}");
    }
    let spans = critical_path::parse(&log)?;
    let shape = Shape {
        round_of: state.agenda.iter().map(|t| (t.id, t.round)).collect(),
        researcher_slots: state.input.limits.max_concurrent_researchers as usize,
        summary_slots,
    };
    // The same chain with every call at exactly its configured latency: what the scripted
    // services alone impose, without the client-side time inside each logged duration.
    let nominal_spans: Vec<Span> = spans
        .iter()
        .map(|s| {
            let ms = match s.kind.as_str() {
                "modelCall" => MODEL_MS,
                "search" => SEARCH_MS,
                _ => FETCH_MS,
            } as i64;
            Span {
                end_ms: s.start_ms + ms,
                ..s.clone()
            }
        })
        .collect();
    let count = |k: &str| spans.iter().filter(|s| s.kind == k).count();
    Ok(Measured {
        wall_ms,
        build_ms,
        path: critical_path::derive(&spans, &shape),
        nominal: critical_path::derive(&nominal_spans, &shape),
        model_calls: model.request_count(),
        logged_calls: count("modelCall"),
        searches: count("search"),
        fetches: count("fetch"),
        rounds: state.round,
        writes: store.writes().len(),
    })
}

async fn bench_mode(web: &SlowWeb, mode: Mode, reps: usize) -> BenchResult<f64> {
    println!("\n## {mode:?} run ({reps} repetitions after one warm-up)\n");
    // The first run of the process pays one-time costs (robots.txt, lazily built statics).
    let warm = one_run(web, mode).await?;
    println!(
        "warm-up: wall {:.0} ms, critical path {} ms, ratio {:.3}",
        warm.wall_ms,
        warm.path.total_ms,
        warm.wall_ms / warm.path.total_ms as f64
    );
    println!(
        "| rep | wall ms | critical path ms | wall / path | overhead ms | nominal path ms | wall / nominal | engine build ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut runs = Vec::new();
    for rep in 1..=reps {
        let m = one_run(web, mode).await?;
        if m.logged_calls != m.model_calls {
            println!(
                "warning: the log holds {} model calls, the model server answered {}",
                m.logged_calls, m.model_calls
            );
        }
        println!(
            "| {rep} | {:.0} | {} | {:.3} | {:.0} | {} | {:.3} | {:.1} |",
            m.wall_ms,
            m.path.total_ms,
            m.wall_ms / m.path.total_ms as f64,
            m.wall_ms - m.path.total_ms as f64,
            m.nominal.total_ms,
            m.wall_ms / m.nominal.total_ms as f64,
            m.build_ms,
        );
        runs.push(m);
    }
    let ratios: Vec<f64> = runs
        .iter()
        .map(|m| m.wall_ms / m.path.total_ms as f64)
        .collect();
    let ratio = median(&ratios);
    let nominal_ratio = median(
        &runs
            .iter()
            .map(|m| m.wall_ms / m.nominal.total_ms as f64)
            .collect::<Vec<_>>(),
    );
    // The breakdown of the run closest to the median.
    let Some(typical) = runs.iter().min_by(|a, b| {
        let d = |m: &Measured| (m.wall_ms / m.path.total_ms as f64 - ratio).abs();
        d(a).total_cmp(&d(b))
    }) else {
        return Err("no repetitions".into());
    };
    println!(
        "\n{} model calls, {} searches, {} page reads, {} round(s), {} store writes per run",
        typical.model_calls, typical.searches, typical.fetches, typical.rounds, typical.writes
    );
    println!("critical path of a typical run:");
    for s in &typical.path.stages {
        println!("  {:>6} ms  {}", s.ms, s.name);
    }
    println!(
        "median wall / critical path: {ratio:.3} (target <= 1.05: {}); wall / nominal path: {nominal_ratio:.3}",
        if ratio <= 1.05 { "met" } else { "MISSED" }
    );
    Ok(ratio)
}

#[tokio::main]
async fn main() {
    let reps = std::env::var("QUARRY_BENCH_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5usize)
        .max(1);
    println!("# Orchestration overhead\n");
    println!("machine: {}", machine_note());
    println!(
        "latencies: model {MODEL_MS} ms per call, search {SEARCH_MS} ms, page {FETCH_MS} ms; {} summary slots",
        EngineSettings::default().summary_concurrency
    );
    let web = match SlowWeb::start(
        Duration::from_millis(SEARCH_MS),
        Duration::from_millis(FETCH_MS),
    )
    .await
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cannot start the page server: {e}");
            std::process::exit(1);
        }
    };
    for mode in [Mode::Quick, Mode::Deep] {
        if let Err(e) = bench_mode(&web, mode, reps).await {
            eprintln!("the {mode:?} benchmark failed: {e}");
            std::process::exit(1);
        }
    }
}
