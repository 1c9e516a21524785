//! `quarry eval QUESTIONS.jsonl --profile P`: runs a question set (tests/eval/README.md) through
//! the standalone engine and scores each report: key facts found, honesty on questions the corpus
//! cannot answer, citation precision, removed citations, tokens, cost and time.
//!
//! The scoring is pure (parse, score one finished run, totals, table) and unit-tested here; the
//! shell at the bottom runs each question with [`crate::standalone::run`] and writes
//! `DIR/results/<id>.json` as each one finishes, so a rerun skips what is done.
//!
//! There is no model judge: facts are scored by normalised string match only.

mod score;

pub use score::*;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;

use crate::config::Settings;
use crate::standalone::StandaloneError;

/// The `eval.json` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalDoc<'a> {
    /// The question set file.
    pub questions: &'a str,
    /// The profile file.
    pub profile: &'a str,
    /// `quick` or `deep`.
    pub mode: &'a str,
    /// One per selected question, in file order (skipped ones as stored).
    pub results: &'a [QuestionResult],
    pub totals: &'a Totals,
}

// ---------------------------------------------------------------------------------------------
// The shell: runs questions and writes files.

/// Arguments of `quarry eval`.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalArgs {
    /// Question set, one JSON object per line (format: tests/eval/README.md).
    pub questions: PathBuf,
    /// ResearchProfile manifest (YAML) every question runs with.
    #[arg(long)]
    pub profile: Option<String>,
    /// Output directory: eval.json, results/<id>.json, reports/, state/, events/.
    #[arg(long, default_value = "eval-results")]
    pub out: PathBuf,
    /// quick or deep (default: as `quarry run`).
    #[arg(long)]
    pub mode: Option<String>,
    /// Only the first N questions (after --only).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only these question ids, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Run every selected question again, ignoring results/ and state/ from earlier runs.
    #[arg(long)]
    pub fresh: bool,
    /// Time limit per question, e.g. 10m.
    #[arg(long)]
    pub timeout: Option<String>,
    /// Cost limit per question in USD, e.g. 0.20.
    #[arg(long)]
    pub max_cost_usd: Option<String>,
}

/// Why an eval stopped before the end.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("{0}")]
    Usage(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The engine cannot start with this profile: every question would fail the same way.
    #[error("{0}")]
    Setup(StandaloneError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> EvalError + '_ {
    move |source| EvalError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes `bytes` to `path` through a temporary file, so a kill never leaves half a result.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EvalError> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_err(path))
}

/// The results already in `dir/results` (unreadable files are ignored and run again).
fn load_done(dir: &Path) -> BTreeMap<String, QuestionResult> {
    let mut done = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return done;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        if path.extension().is_some_and(|x| x == "json")
            && let Ok(text) = std::fs::read_to_string(&path)
            && let Ok(r) = serde_json::from_str::<QuestionResult>(&text)
        {
            done.insert(r.id.clone(), r);
        }
    }
    done
}

/// `quarry eval`: exit 0 when every selected question has a result, 2 for usage errors.
pub fn main(args: &EvalArgs, settings: Settings) -> ExitCode {
    let Some(runtime) = crate::cli::command_runtime() else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(eval(args, settings)) {
        Ok(table) => {
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("quarry: {e}");
            match e {
                EvalError::Usage(_) | EvalError::Setup(_) => ExitCode::from(2),
                EvalError::Io { .. } => ExitCode::FAILURE,
            }
        }
    }
}

async fn eval(args: &EvalArgs, settings: Settings) -> Result<String, EvalError> {
    let Some(profile) = settings.profile.clone() else {
        return Err(EvalError::Usage(
            "setting `profile` is required: pass --profile FILE or set QUARRY_PROFILE".into(),
        ));
    };
    let text = std::fs::read_to_string(&args.questions).map_err(io_err(&args.questions))?;
    let questions = parse_questions(&text)
        .map_err(|e| EvalError::Usage(format!("{}: {e}", args.questions.display())))?;
    let questions = select(questions, &args.only, args.limit).map_err(EvalError::Usage)?;
    // A profile that cannot be read would fail every question the same way: say so up front.
    let bad_profile = |e: String| EvalError::Usage(format!("profile {}: {e}", profile.display()));
    let manifest = std::fs::read_to_string(&profile).map_err(|e| bad_profile(e.to_string()))?;
    quarry_api::ResearchProfile::from_yaml(&manifest).map_err(|e| bad_profile(e.to_string()))?;
    let out = &args.out;
    for sub in ["results", "reports", "state", "events"] {
        let d = out.join(sub);
        std::fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    let done = load_done(&out.join("results"));
    let plans = plan(&questions, &done, args.fresh);
    let limits = quarry_engine::research::state::Limits {
        max_cost_pico_usd: settings
            .max_cost_usd
            .as_deref()
            .and_then(|v| quarry_api::values::parse_usd_micros(v).ok())
            .map(|m| m.saturating_mul(1_000_000)),
        timeout_secs: settings.timeout.map(|d| d.as_secs().max(1)),
        ..quarry_engine::research::state::Limits::default()
    };
    let total = questions.len();
    let mut results = Vec::with_capacity(total);
    for (i, (q, p)) in questions.iter().zip(plans).enumerate() {
        let result = match p {
            Plan::Skip(r) => {
                eprintln!(
                    "[{}/{total}] {} skipped: results/{}.json exists",
                    i + 1,
                    q.id,
                    q.id
                );
                *r
            }
            Plan::Run => {
                eprintln!("[{}/{total}] {}: {}", i + 1, q.id, q.question.trim());
                let r = run_one(q, &profile, &settings, &limits, out, args.fresh).await?;
                let bytes = serde_json::to_vec_pretty(&r).unwrap_or_default();
                write_atomic(&out.join("results").join(format!("{}.json", q.id)), &bytes)?;
                eprintln!("{}", progress_line(i + 1, total, &r));
                r
            }
        };
        results.push(result);
    }
    let t = totals(&results);
    let doc = EvalDoc {
        questions: &args.questions.display().to_string(),
        profile: &profile.display().to_string(),
        mode: &format!("{:?}", settings.mode).to_lowercase(),
        results: &results,
        totals: &t,
    };
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    write_atomic(&out.join("eval.json"), &bytes)?;
    Ok(render_table(&results, &t))
}

/// Runs one question with the standalone engine (state in `out/state/<id>`, so a killed eval
/// resumes the run) and scores what it left.
async fn run_one(
    q: &Question,
    profile: &Path,
    settings: &Settings,
    limits: &quarry_engine::research::state::Limits,
    out: &Path,
    fresh: bool,
) -> Result<QuestionResult, EvalError> {
    use quarry_engine::research::executor::load_checkpoint;
    use quarry_engine::store::ArtifactStore;
    use quarry_engine::store::keys::{FINDINGS_KEY, REPORT_KEY};

    let state_dir = out.join("state").join(&q.id);
    let report_path = out.join("reports").join(format!("{}.md", q.id));
    let events_path = out.join("events").join(format!("{}.jsonl", q.id));
    if fresh {
        let _ = std::fs::remove_dir_all(&state_dir);
        let _ = std::fs::remove_file(&report_path);
    }
    // The run's events as JSON lines in a file; the terminal shows one line per question.
    let events_file = std::fs::OpenOptions::new()
        .create(true)
        .append(!fresh)
        .write(true)
        .truncate(fresh)
        .open(&events_path)
        .map_err(io_err(&events_path))?;
    let events = crate::cli::events::JsonEvents::to_writer(Box::new(events_file));
    let opts = crate::standalone::StandaloneOptions {
        query: q.question.clone(),
        context: None,
        profile: profile.to_path_buf(),
        out: Some(report_path.clone()),
        mode: settings.mode,
        outputs: Vec::new(),
        top_k: 5,
        limits: limits.clone(),
        state_dir: Some(state_dir.clone()),
        redis_url: settings.redis_url.clone(),
        workers: false,
        approve: false,
        compare_with: None,
        events: Some(events.clone()),
    };
    let started = Instant::now();
    let result = crate::standalone::run(opts).await;
    let wall_seconds = started.elapsed().as_secs_f64();
    events.finish(&result);
    if let Err(
        e @ (StandaloneError::Profile { .. }
        | StandaloneError::MissingKey { .. }
        | StandaloneError::Wiring { .. }
        | StandaloneError::WorkQueue { .. }),
    ) = result
    {
        return Err(EvalError::Setup(e));
    }
    let store = quarry_engine::store::local::LocalStore::new(&state_dir);
    let state = load_checkpoint(&store).await.ok().flatten();
    let text = |bytes: Option<Vec<u8>>| bytes.map(|b| String::from_utf8_lossy(&b).into_owned());
    let report = text(store.get(REPORT_KEY).await.ok().flatten());
    let findings: Option<Value> = text(store.get(FINDINGS_KEY).await.ok().flatten())
        .and_then(|t| serde_json::from_str(&t).ok());
    let spend = match (&state, &findings) {
        (Some(s), _) => Spend {
            input_tokens: s.usage.input_tokens,
            output_tokens: s.usage.output_tokens,
            cost_pico_usd: s.usage.cost_pico_usd,
        },
        (None, Some(f)) => Spend::from_findings(f),
        (None, None) => Spend::default(),
    };
    let run = FinishedRun {
        outcome: Some(Outcome::of(state.as_ref(), &result)),
        report: report.as_deref(),
        findings: findings.as_ref(),
        spend,
        wall_seconds,
        report_path: std::fs::canonicalize(&report_path)
            .ok()
            .map(|p| p.display().to_string()),
    };
    Ok(score(q, &run))
}
