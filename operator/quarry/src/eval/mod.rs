//! `quarry eval QUESTIONS.jsonl --profile P`: runs a question set (tests/eval/README.md) through
//! the standalone engine and scores each report: key facts found, honesty on questions the corpus
//! cannot answer, citation precision, removed citations, tokens, cost and time.
//!
//! The scoring is pure (parse, score one finished run, totals, table) and unit-tested here; the
//! shell at the bottom runs each question with [`crate::standalone::run`] and writes
//! `DIR/results/<id>.json` as each one finishes, so a rerun skips what is done.
//!
//! Key facts are matched by normalised string match and, with `--judge`, separately by a model
//! judge ([`judge`]), so each audits the other. `--external DIR` scores reports another system
//! wrote the same way ([`external`]), running no research.

pub mod external;
pub mod judge;
mod score;
mod table;

pub use score::*;
pub use table::*;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quarry_engine::llm::ChatModel;
use serde::Serialize;
use serde_json::Value;

use crate::config::Settings;
use crate::standalone::StandaloneError;
use external::{ExternalInput, ExternalRun, PageText};
use judge::JudgeSettings;

/// The `eval.json` document.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvalDoc<'a> {
    /// Whose reports were scored: `quarry`, or the `--system` of an external run.
    pub system: &'a str,
    /// The question set file.
    pub questions: &'a str,
    /// The profile file (absent when scoring an external system without a judge).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<&'a str>,
    /// The profile whose primary model judged the key facts (`--judge`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub judge_profile: Option<&'a str>,
    /// The external system's directory (`--external`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<&'a str>,
    /// `quick` or `deep` (Quarry's runs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'a str>,
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
    /// Match the key facts of the results already on disk again against their stored reports
    /// (after a change to the matching rules); nothing is run again.
    #[arg(long, conflicts_with = "fresh")]
    pub rescore: bool,
    /// Time limit per question, e.g. 10m.
    #[arg(long)]
    pub timeout: Option<String>,
    /// Cost limit per question in USD, e.g. 0.20.
    #[arg(long)]
    pub max_cost_usd: Option<String>,
    /// Also ask a model whether each key fact is stated (the profile's primary model, or
    /// --judge-profile's); its verdicts sit beside the string match, its tokens apart.
    #[arg(long)]
    pub judge: bool,
    /// ResearchProfile whose primary model judges (implies --judge).
    #[arg(long, value_name = "FILE")]
    pub judge_profile: Option<PathBuf>,
    /// With --judge: judge only the cited claims, not the key facts (a fact's call reads the
    /// whole report, a claim's only the part of its page about it: far cheaper on a small model).
    #[arg(long)]
    pub judge_claims_only: bool,
    /// Score the reports another system wrote in DIR (reports/<id>.md, runs/<id>.json; format:
    /// tests/eval/README.md) instead of running research; results go to DIR.
    #[arg(long, value_name = "DIR")]
    pub external: Option<PathBuf>,
    /// The system's name in the table and eval.json (default: quarry, or DIR's name).
    #[arg(long, value_name = "NAME")]
    pub system: Option<String>,
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

/// The model that judges key facts: a profile's primary tier.
struct Judge {
    model: Arc<dyn ChatModel>,
    settings: JudgeSettings,
    profile: String,
}

impl Judge {
    /// Builds the client of `path`'s primary model.
    fn from_profile(path: &Path) -> Result<Self, EvalError> {
        use quarry_engine::llm::anthropic::AnthropicClient;
        use quarry_engine::llm::openai::OpenAiClient;
        let bad = |e: String| EvalError::Usage(format!("judge profile {}: {e}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let profile =
            quarry_api::ResearchProfile::from_yaml(&text).map_err(|e| bad(e.to_string()))?;
        let tier = &profile.spec.models.primary;
        let api_key =
            match &tier.api_key_env {
                Some(name) => Some(std::env::var(name).map_err(|_| {
                    bad(format!("the primary model's key variable {name} is unset"))
                })?),
                None => None,
            };
        let config = quarry_operator::engine_builder::model_config(&profile.spec, tier, api_key)
            .map_err(|e| bad(e.to_string()))?;
        let settings = JudgeSettings {
            context_window: config.context_window,
            max_output_tokens: tier
                .max_output_tokens
                .map_or(judge::DEFAULT_MAX_OUTPUT_TOKENS, u64::from),
            json_mode: config.json_mode,
        };
        let model: Arc<dyn ChatModel> = match tier.provider {
            quarry_api::Provider::Anthropic => {
                Arc::new(AnthropicClient::new(config).map_err(|e| bad(e.to_string()))?)
            }
            _ => Arc::new(OpenAiClient::new(config).map_err(|e| bad(e.to_string()))?),
        };
        Ok(Self {
            model,
            settings,
            profile: path.display().to_string(),
        })
    }

    /// Judges the facts of `r` still without a verdict and says so on stderr.
    async fn judge(&self, q: &Question, body: Option<&str>, r: &mut QuestionResult) {
        let failed = judge::judge_result(self.model.as_ref(), &self.settings, q, body, r).await;
        let judged = r.facts.iter().filter(|f| f.judge.is_some()).count();
        let failed = if failed > 0 {
            format!(", {failed} failed (judged again on the next run)")
        } else {
            String::new()
        };
        eprintln!(
            "    {} judged: {} of {judged} facts stated (string match: {}), {} calls{failed}",
            r.id,
            r.key_facts_judged.unwrap_or(0),
            r.facts
                .iter()
                .filter(|f| f.judge.is_some() && f.found)
                .count(),
            r.judge_spend.map_or(0, |s| s.calls)
        );
    }
}

impl Judge {
    /// Judges the cited claims of `r` still without a verdict against `pages` and says so on
    /// stderr, with every claim on which the judge and the run's check disagree.
    async fn judge_claims(
        &self,
        r: &mut QuestionResult,
        pages: &BTreeMap<String, PageText>,
        unreachable: &BTreeSet<String>,
    ) {
        if r.claim_verdicts.is_empty() {
            return;
        }
        let failed =
            judge::claims::judge_claims(self.model.as_ref(), &self.settings, r, pages, unreachable)
                .await;
        let judged: Vec<&ClaimVerdict> = r
            .claim_verdicts
            .iter()
            .filter(|c| c.judge.is_some())
            .collect();
        let failed = if failed > 0 {
            format!(", {failed} failed (judged again on the next run)")
        } else {
            String::new()
        };
        eprintln!(
            "    {} claims judged: {} of {} supported by the judge (run's check: {}){failed}",
            r.id,
            judged
                .iter()
                .filter(|c| c.judge == Some(Verdict::Yes))
                .count(),
            judged.len(),
            judged.iter().filter(|c| c.supported).count(),
        );
        for line in judge::claims::disagreement_lines(std::slice::from_ref(r)) {
            eprintln!("      disagreement: {line}");
        }
    }
}

/// The report text a Quarry result's facts were matched in, read again from the run's state
/// (`state/<id>/report.md`, else `reports/<id>.md`) for judging.
fn quarry_answer(out: &Path, q: &Question, r: &QuestionResult) -> Option<String> {
    let state = out.join("state").join(&q.id);
    let report = std::fs::read_to_string(state.join("report.md"))
        .or_else(|_| std::fs::read_to_string(out.join("reports").join(format!("{}.md", q.id))))
        .ok();
    let aborted = std::fs::read_to_string(state.join("findings.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|f| f["aborted"].as_bool().unwrap_or(false));
    answer_body(q, &r.outcome, report.as_deref(), aborted)
}

fn write_result(out: &Path, r: &QuestionResult) -> Result<(), EvalError> {
    let bytes = serde_json::to_vec_pretty(r).unwrap_or_default();
    write_atomic(&out.join("results").join(format!("{}.json", r.id)), &bytes)
}

async fn eval(args: &EvalArgs, settings: Settings) -> Result<String, EvalError> {
    let text = std::fs::read_to_string(&args.questions).map_err(io_err(&args.questions))?;
    let questions = parse_questions(&text)
        .map_err(|e| EvalError::Usage(format!("{}: {e}", args.questions.display())))?;
    let questions = select(questions, &args.only, args.limit).map_err(EvalError::Usage)?;
    let judge_profile = match (&args.judge_profile, args.judge) {
        (Some(p), _) => Some(p.clone()),
        (None, true) => Some(settings.profile.clone().ok_or_else(|| {
            EvalError::Usage(
                "--judge needs a profile: pass --profile FILE, --judge-profile FILE or set QUARRY_PROFILE"
                    .into(),
            )
        })?),
        (None, false) => None,
    };
    let judge = judge_profile
        .as_deref()
        .map(Judge::from_profile)
        .transpose()?;
    if let Some(dir) = &args.external {
        return eval_external(args, dir, &questions, judge.as_ref()).await;
    }
    let Some(profile) = settings.profile.clone() else {
        return Err(EvalError::Usage(
            "setting `profile` is required: pass --profile FILE or set QUARRY_PROFILE".into(),
        ));
    };
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
    let limits = quarry_engine::research::machine::state::Limits {
        max_cost_pico_usd: settings
            .max_cost_usd
            .as_deref()
            .and_then(|v| quarry_api::values::parse_usd_micros(v).ok())
            .map(|m| m.saturating_mul(1_000_000)),
        timeout_secs: settings.timeout.map(|d| d.as_secs().max(1)),
        ..quarry_engine::research::machine::state::Limits::default()
    };
    let http = page_client()?;
    let mut cache: BTreeMap<String, Option<PageText>> = BTreeMap::new();
    let total = questions.len();
    let mut results = Vec::with_capacity(total);
    for (i, (q, p)) in questions.iter().zip(plans).enumerate() {
        let mut result = match p {
            Plan::Skip(mut r) => {
                if args.rescore {
                    let answer = quarry_answer(out, q, &r);
                    rematch(q, answer.as_deref(), &mut r);
                    write_result(out, &r)?;
                }
                eprintln!("{}", skipped_line(i + 1, total, &q.id));
                *r
            }
            Plan::Run => {
                eprintln!("[{}/{total}] {}: {}", i + 1, q.id, q.question.trim());
                let r = run_one(q, &profile, &settings, &limits, out, args.fresh).await?;
                write_result(out, &r)?;
                eprintln!("{}", progress_line(i + 1, total, &r));
                r
            }
        };
        // A result scored without a judge (or before --judge was asked for) is judged now,
        // from the report on disk: the research is not run again.
        let pending = if args.judge_claims_only {
            judge::claims::needs_claim_judge(&result)
        } else {
            judge::needs_judge(&result)
        };
        if let Some(judge) = &judge
            && pending
        {
            let answer = quarry_answer(out, q, &result);
            if !args.judge_claims_only && result.facts.iter().any(|f| f.judge.is_none()) {
                judge.judge(q, answer.as_deref(), &mut result).await;
            }
            let findings =
                std::fs::read_to_string(out.join("state").join(&q.id).join("findings.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                    .unwrap_or(Value::Null);
            let listed = judge::claims::findings_claims(&findings);
            result.claim_verdicts = judge::claims::merge_claims(&result, listed);
            let (pages, unreachable) = cited_pages(&http, &mut cache, &result.claim_verdicts).await;
            judge.judge_claims(&mut result, &pages, &unreachable).await;
            write_result(out, &result)?;
        }
        results.push(result);
    }
    let system = args.system.clone().unwrap_or_else(|| "quarry".into());
    let t = totals(&results);
    let doc = EvalDoc {
        system: &system,
        questions: &args.questions.display().to_string(),
        profile: Some(&profile.display().to_string()),
        judge_profile: judge.as_ref().map(|j| j.profile.as_str()),
        external: None,
        mode: Some(&format!("{:?}", settings.mode).to_lowercase()),
        results: &results,
        totals: &t,
    };
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    write_atomic(&out.join("eval.json"), &bytes)?;
    Ok(render_table(&system, &results, &t))
}

/// Per-page time limit when fetching a cited page to check the sentences citing it.
const PAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether a cited URL is one the scorer fetches: a page on this machine (127.0.0.1 or
/// localhost), where the benchmark's corpus is served. Anything else counts as unreadable.
pub fn fetchable(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| {
        let host = r.split(['/', '?', '#']).next().unwrap_or("");
        let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
        host == "127.0.0.1" || host == "localhost"
    })
}

/// The HTTP client that fetches cited pages for checking.
fn page_client() -> Result<reqwest::Client, EvalError> {
    reqwest::Client::builder()
        .timeout(PAGE_TIMEOUT)
        .connect_timeout(PAGE_TIMEOUT)
        .build()
        .map_err(|e| EvalError::Usage(format!("HTTP client: {e}")))
}

/// The pages cited by claims without a verdict, fetched once per eval (`cache`; `None` marks a
/// page that could not be read, or one off this machine), keyed by [`judge::claims::page_key`];
/// beside them, the keys of pages whose server did not answer at all (not cached: tried again
/// for the next question).
async fn cited_pages(
    http: &reqwest::Client,
    cache: &mut BTreeMap<String, Option<PageText>>,
    claims: &[ClaimVerdict],
) -> (BTreeMap<String, PageText>, BTreeSet<String>) {
    let mut pages = BTreeMap::new();
    let mut unreachable = BTreeSet::new();
    for c in claims.iter().filter(|c| c.judge.is_none()) {
        let key = judge::claims::page_key(&c.url);
        if !cache.contains_key(&key) && !unreachable.contains(&key) {
            let page = if fetchable(&c.url) {
                fetch_page(http, &c.url).await
            } else {
                Ok(None)
            };
            match page {
                Ok(page) => {
                    cache.insert(key.clone(), page);
                }
                Err(e) => {
                    eprintln!("    cannot reach {}: {e}; its claims stay unjudged", c.url);
                    unreachable.insert(key.clone());
                }
            }
        }
        if let Some(Some(page)) = cache.get(&key) {
            pages.insert(key, page.clone());
        }
    }
    (pages, unreachable)
}

/// Fetches and extracts one cited page: `Ok(None)` when the server answers without it (an
/// invented or moved URL supports nothing), `Err` when no server answers.
async fn fetch_page(http: &reqwest::Client, url: &str) -> Result<Option<PageText>, reqwest::Error> {
    let target = url.split('#').next().unwrap_or(url);
    let response = http.get(target).send().await?;
    if !response.status().is_success() {
        return Ok(None);
    }
    let Ok(html) = response.text().await else {
        return Ok(None);
    };
    let page = quarry_engine::scrape::extract_markdown(&html, target);
    Ok(Some(PageText {
        title: page.title,
        text: page.markdown,
    }))
}

/// `quarry eval --external DIR`: scores `DIR/reports/<id>.md` with `DIR/runs/<id>.json` for every
/// selected question, writing `DIR/results/<id>.json` and `DIR/eval.json`.
async fn eval_external(
    args: &EvalArgs,
    dir: &Path,
    questions: &[Question],
    judge: Option<&Judge>,
) -> Result<String, EvalError> {
    if !dir.is_dir() {
        return Err(EvalError::Usage(format!(
            "--external {}: not a directory",
            dir.display()
        )));
    }
    let results_dir = dir.join("results");
    std::fs::create_dir_all(&results_dir).map_err(io_err(&results_dir))?;
    let done = load_done(&results_dir);
    let plans = plan(questions, &done, args.fresh);
    let http = page_client()?;
    // Each cited page is fetched once per eval; `None` marks one that could not be read.
    let mut cache: BTreeMap<String, Option<PageText>> = BTreeMap::new();
    let total = questions.len();
    let mut results = Vec::with_capacity(total);
    for (i, (q, p)) in questions.iter().zip(plans).enumerate() {
        let report_path = dir.join("reports").join(format!("{}.md", q.id));
        let report = std::fs::read_to_string(&report_path).ok();
        let run_path = dir.join("runs").join(format!("{}.json", q.id));
        let run = match std::fs::read_to_string(&run_path) {
            Ok(text) => {
                ExternalRun::parse(&text, &q.id).map_err(|e| format!("runs/{}.json: {e}", q.id))
            }
            Err(e) => Err(format!("runs/{}.json: {e}", q.id)),
        };
        let input = ExternalInput {
            run: run.as_ref().map_err(Clone::clone),
            report: report.as_deref(),
            report_path: report
                .is_some()
                .then(|| std::fs::canonicalize(&report_path).unwrap_or(report_path.clone()))
                .map(|p| p.display().to_string()),
        };
        let mut result = match p {
            Plan::Skip(mut r) => {
                if args.rescore {
                    rematch(q, external::external_answer(q, &input).as_deref(), &mut r);
                    write_result(dir, &r)?;
                }
                eprintln!("{}", skipped_line(i + 1, total, &q.id));
                *r
            }
            Plan::Run => {
                let mut pages = BTreeMap::new();
                if let (Ok(run), Some(report)) = (&run, report.as_deref()) {
                    for url in external::citations(report, run).all() {
                        let key = quarry_engine::research::writing::links::normalize_url(url);
                        if !cache.contains_key(&key) {
                            let page = if fetchable(url) {
                                fetch_page(&http, url).await.ok().flatten()
                            } else {
                                None
                            };
                            cache.insert(key.clone(), page);
                        }
                        if let Some(Some(page)) = cache.get(&key) {
                            pages.insert(key, page.clone());
                        }
                    }
                }
                let r = external::score_external(q, &input, &pages);
                write_result(dir, &r)?;
                eprintln!("{}", progress_line(i + 1, total, &r));
                r
            }
        };
        if let Some(judge) = judge
            && judge::needs_judge(&result)
        {
            let answer = external::external_answer(q, &input);
            judge.judge(q, answer.as_deref(), &mut result).await;
            write_result(dir, &result)?;
        }
        results.push(result);
    }
    let system = args.system.clone().unwrap_or_else(|| {
        std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "external".into())
    });
    let t = totals(&results);
    let doc = EvalDoc {
        system: &system,
        questions: &args.questions.display().to_string(),
        profile: None,
        judge_profile: judge.map(|j| j.profile.as_str()),
        external: Some(&dir.display().to_string()),
        mode: None,
        results: &results,
        totals: &t,
    };
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    write_atomic(&dir.join("eval.json"), &bytes)?;
    Ok(render_table(&system, &results, &t))
}

/// Runs one question with the standalone engine (state in `out/state/<id>`, so a killed eval
/// resumes the run) and scores what it left.
async fn run_one(
    q: &Question,
    profile: &Path,
    settings: &Settings,
    limits: &quarry_engine::research::machine::state::Limits,
    out: &Path,
    fresh: bool,
) -> Result<QuestionResult, EvalError> {
    use quarry_engine::research::shell::executor::load_checkpoint;
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
    let mut scored = score(q, &run);
    let events_text = std::fs::read_to_string(&events_path).unwrap_or_default();
    (scored.model_calls, scored.model_seconds) = model_time(&events_text);
    Ok(scored)
}

#[cfg(test)]
mod tests;
