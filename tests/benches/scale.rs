//! Scale: many concurrent quick runs in one process, against a baseline of single runs measured
//! in the same process first.
//!
//! Run with `cargo bench -p quarry-e2e --bench scale` (`QUARRY_BENCH_RUNS`, default 1000).
//! The scripted services (model answering after 100 ms, searx after 50 ms, pages after 20 ms) run
//! in a child process (this binary with `--serve-scripted`), so the figures of this process are
//! Quarry's alone: peak RSS (`VmHWM`), CPU seconds (`/proc/self/stat`) and store writes (each
//! run's `MemoryStore` counts them).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use quarry_api::ResearchProfile;
use quarry_e2e::bench::{cpu_seconds, machine_note, researcher_route, status_kib};
use quarry_e2e::model_server::{Script, ScriptedModel};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::slow_web::SlowWeb;
use quarry_engine::research::machine::state::{Mode, Phase, RunInput, RunState};
use quarry_engine::research::shell::executor::{self, Control, NoopObserver};
use quarry_engine::store::memory::MemoryStore;
use quarry_operator::engine_builder;

const MODEL_MS: u64 = 100;
const SEARCH_MS: u64 = 50;
const FETCH_MS: u64 = 20;
const QUESTION: &str = "How does the json decoder report errors";
/// Single runs of the baseline, one after another.
const BASELINE_RUNS: usize = 10;

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Child mode: serve the scripted model and the slow web until stdin closes.
fn serve_scripted() -> BenchResult<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let web = SlowWeb::start(
            Duration::from_millis(SEARCH_MS),
            Duration::from_millis(FETCH_MS),
        )
        .await?;
        // One by-turn route for every request: any number of runs share the script.
        let script =
            Script::default().with_route(researcher_route("quick", QUESTION, &web, MODEL_MS));
        let model = ScriptedModel::start(script).await?;
        println!("{} {}", model.base_url(), web.base_url());
        // The parent closes stdin (or dies): then stop.
        tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        })
        .await?;
        drop(model);
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

/// The services' child process; killed when dropped.
struct Services {
    child: Child,
    model_url: String,
    web_url: String,
}

impl Drop for Services {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_services() -> BenchResult<Services> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--serve-scripted")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout of the services")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (Some(model_url), Some(web_url)) = (parts.next(), parts.next()) else {
        let _ = child.kill();
        return Err(format!("the services said {line:?}").into());
    };
    Ok(Services {
        model_url: model_url.to_string(),
        web_url: web_url.to_string(),
        child,
    })
}

/// CPU seconds of the services' process.
fn child_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    quarry_e2e::bench::cpu_seconds_of(&stat, quarry_e2e::bench::clock_ticks())
}

/// What one run left behind.
struct RunOutcome {
    completed: bool,
    writes: usize,
    by_key: BTreeMap<String, usize>,
}

async fn one_run(profile: Arc<ResearchProfile>) -> RunOutcome {
    let store = Arc::new(MemoryStore::new());
    let key = |_: &quarry_api::ModelTier| Some("sk-bench".to_string());
    let engine = match engine_builder::build_engine(&profile.spec, &key, store.clone(), None) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("engine not built: {e}");
            return RunOutcome {
                completed: false,
                writes: 0,
                by_key: BTreeMap::new(),
            };
        }
    };
    let (_tx, rx) = watch::channel(Control::Run);
    let state = executor::run(
        Arc::new(engine),
        RunState::new(RunInput::new(QUESTION, Mode::Quick)),
        Arc::new(NoopObserver),
        rx,
    )
    .await;
    if state.phase != Phase::Completed {
        eprintln!("a run ended {:?}: {:?}", state.phase, state.failure);
    }
    let writes = store.writes();
    let mut by_key = BTreeMap::new();
    for k in &writes {
        *by_key.entry(k.clone()).or_insert(0) += 1;
    }
    RunOutcome {
        completed: state.phase == Phase::Completed,
        writes: writes.len(),
        by_key,
    }
}

/// Figures of one batch of runs.
struct Batch {
    runs: usize,
    completed: usize,
    wall_s: f64,
    cpu_s: f64,
    services_cpu_s: f64,
    writes: usize,
    by_key: BTreeMap<String, usize>,
    hwm_kib: u64,
}

fn add(into: &mut Batch, run: RunOutcome) {
    into.completed += usize::from(run.completed);
    into.writes += run.writes;
    for (k, n) in run.by_key {
        *into.by_key.entry(k).or_insert(0) += n;
    }
}

async fn batch(profile: &Arc<ResearchProfile>, runs: usize, concurrent: bool, pid: u32) -> Batch {
    let mut b = Batch {
        runs,
        completed: 0,
        wall_s: 0.0,
        cpu_s: 0.0,
        services_cpu_s: 0.0,
        writes: 0,
        by_key: BTreeMap::new(),
        hwm_kib: 0,
    };
    let cpu0 = cpu_seconds().unwrap_or(0.0);
    let child0 = child_cpu_seconds(pid).unwrap_or(0.0);
    let started = Instant::now();
    if concurrent {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..runs {
            set.spawn(one_run(profile.clone()));
        }
        while let Some(r) = set.join_next().await {
            match r {
                Ok(run) => add(&mut b, run),
                Err(e) => eprintln!("a run panicked: {e}"),
            }
        }
    } else {
        for _ in 0..runs {
            let run = one_run(profile.clone()).await;
            add(&mut b, run);
        }
    }
    b.wall_s = started.elapsed().as_secs_f64();
    b.cpu_s = cpu_seconds().unwrap_or(0.0) - cpu0;
    b.services_cpu_s = child_cpu_seconds(pid).unwrap_or(0.0) - child0;
    b.hwm_kib = status_kib("VmHWM").unwrap_or(0);
    b
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    if std::env::args().any(|a| a == "--serve-scripted") {
        if let Err(e) = serve_scripted() {
            eprintln!("services failed: {e}");
            std::process::exit(1);
        }
        return;
    }
    let result = tokio::runtime::Runtime::new()
        .map_err(|e| Box::new(e) as Box<dyn std::error::Error>)
        .and_then(|rt| rt.block_on(bench()));
    if let Err(e) = result {
        eprintln!("the scale benchmark failed: {e}");
        std::process::exit(1);
    }
}

async fn bench() -> BenchResult<()> {
    let runs = std::env::var("QUARRY_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1000usize)
        .max(1);
    println!("# Scale: {runs} concurrent quick runs in one process\n");
    println!("machine: {}", machine_note());
    println!(
        "latencies: model {MODEL_MS} ms per call, search {SEARCH_MS} ms, page {FETCH_MS} ms (services in a child process)"
    );
    let services = start_services()?;
    let profile = Arc::new(ResearchProfile::from_yaml(
        &scripted_profile(&services.model_url, &services.web_url)
            .replace("perHostConcurrency: 8", "perHostConcurrency: 16"),
    )?);
    let pid = services.child.id();
    let start_hwm = status_kib("VmHWM").unwrap_or(0);
    let single = batch(&profile, BASELINE_RUNS, false, pid).await;
    let many = batch(&profile, runs, true, pid).await;
    let rss_now = status_kib("VmRSS").unwrap_or(0);
    println!("\npeak RSS before any run: {:.1} MiB", mib(start_hwm));
    println!(
        "| | {} single runs, one at a time (baseline) | {runs} concurrent runs |",
        BASELINE_RUNS
    );
    println!("|---|---|---|");
    println!(
        "| completed | {}/{} | {}/{} |",
        single.completed, single.runs, many.completed, many.runs
    );
    println!(
        "| wall time | {:.2} s ({:.0} ms per run) | {:.2} s |",
        single.wall_s,
        single.wall_s * 1000.0 / single.runs as f64,
        many.wall_s
    );
    println!(
        "| peak RSS (VmHWM) after | {:.1} MiB | {:.1} MiB |",
        mib(single.hwm_kib),
        mib(many.hwm_kib)
    );
    println!(
        "| peak RSS growth per run | | {:.1} KiB |",
        (many.hwm_kib.saturating_sub(single.hwm_kib)) as f64 / runs as f64
    );
    println!(
        "| CPU seconds per run (Quarry) | {:.4} | {:.4} |",
        single.cpu_s / single.runs as f64,
        many.cpu_s / many.runs as f64
    );
    println!(
        "| CPU seconds per run (services) | {:.4} | {:.4} |",
        single.services_cpu_s / single.runs as f64,
        many.services_cpu_s / many.runs as f64
    );
    println!(
        "| store writes per run | {:.1} | {:.1} |",
        single.writes as f64 / single.runs as f64,
        many.writes as f64 / many.runs as f64
    );
    let per_key = |b: &Batch| {
        b.by_key
            .iter()
            .map(|(k, n)| format!("{k} {:.1}", *n as f64 / b.runs as f64))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "| writes per run by key | {} | {} |",
        per_key(&single),
        per_key(&many)
    );
    println!("\nRSS after the runs ended: {:.1} MiB", mib(rss_now));
    let rss_ok = mib(many.hwm_kib) < 256.0;
    let writes_ok = (many.writes as f64 / many.runs as f64) < 30.0;
    println!(
        "targets: peak RSS < 256 MiB: {}; store writes per run < 30: {}",
        if rss_ok { "met" } else { "MISSED" },
        if writes_ok { "met" } else { "MISSED" }
    );
    drop(services);
    Ok(())
}
