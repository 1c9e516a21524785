//! The pure part of `quarry eval`: parse a question set, score one finished run, totals, the
//! table, and what to resume.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::standalone::StandaloneError;
use quarry_engine::llm::format_pico_usd;
use quarry_engine::research::machine::state::{Phase, RunState};
use quarry_engine::research::writing::links::normalize_url;
use quarry_vocab::reasons;

/// What a question expects from a faithful report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// The corpus answers it: the key facts should be in the report.
    #[default]
    Answer,
    /// The corpus does not: the report should say so instead of inventing an answer.
    NoAnswer,
}

/// One key fact of an answerable question.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeyFact {
    /// The fact in words.
    pub fact: String,
    /// Strings any of which, found in the normalised report, counts the fact as covered.
    #[serde(rename = "match", default)]
    pub matches: Vec<String>,
    /// URL path of the page stating it.
    #[serde(default)]
    pub page: Option<String>,
    /// The supporting quote from that page.
    #[serde(default)]
    pub quote: Option<String>,
}

/// One line of the question set. Unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: String,
    #[serde(default)]
    pub kind: Option<String>,
    pub question: String,
    /// Missing: `no-answer` when `kind` is `no-answer`, else `answer`.
    #[serde(default)]
    pub expect: Option<Expect>,
    #[serde(default)]
    pub key_facts: Vec<KeyFact>,
    #[serde(default)]
    pub pages: Vec<String>,
    #[serde(default)]
    pub absent_terms: Vec<String>,
}

impl Question {
    /// The expectation, defaulted from `kind`.
    pub fn expects(&self) -> Expect {
        self.expect
            .unwrap_or(if self.kind.as_deref() == Some("no-answer") {
                Expect::NoAnswer
            } else {
                Expect::Answer
            })
    }
}

/// Pure: the questions of a JSONL text. Blank lines and `//` or `#` comment lines are skipped;
/// every error names its line.
pub fn parse_questions(text: &str) -> Result<Vec<Question>, String> {
    let mut out: Vec<Question> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") || line.starts_with('#') {
            continue;
        }
        let q: Question = serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))?;
        let id_ok = !q.id.is_empty()
            && !q.id.starts_with('.')
            && q.id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !id_ok {
            return Err(format!(
                "line {n}: id {:?} must be letters, digits, '-', '_' or '.' (it names a file)",
                q.id
            ));
        }
        if !seen.insert(q.id.clone()) {
            return Err(format!("line {n}: id {:?} is used twice", q.id));
        }
        if q.question.trim().is_empty() {
            return Err(format!("line {n} ({}): the question is empty", q.id));
        }
        if q.expects() == Expect::Answer {
            if q.key_facts.is_empty() {
                return Err(format!(
                    "line {n} ({}): an answerable question needs keyFacts",
                    q.id
                ));
            }
            if let Some(f) = q
                .key_facts
                .iter()
                .find(|f| f.matches.iter().all(|m| normalise(m).is_empty()))
            {
                return Err(format!(
                    "line {n} ({}): key fact {:?} has no match strings",
                    q.id, f.fact
                ));
            }
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err("the question set holds no questions".into());
    }
    Ok(out)
}

/// Pure: the questions `--only` names (in file order; an unknown id is an error), then the first
/// `limit` of them.
pub fn select(
    questions: Vec<Question>,
    only: &[String],
    limit: Option<usize>,
) -> Result<Vec<Question>, String> {
    let wanted: BTreeSet<&str> = only
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    let unknown: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|w| !questions.iter().any(|q| q.id == *w))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "--only names ids not in the question set: {}",
            unknown.join(", ")
        ));
    }
    let mut picked: Vec<Question> = questions
        .into_iter()
        .filter(|q| wanted.is_empty() || wanted.contains(q.id.as_str()))
        .collect();
    if let Some(limit) = limit {
        picked.truncate(limit);
    }
    Ok(picked)
}

/// Pure: the part of a stored report that the run's model wrote: the generated title line
/// (`# <question>`) and everything from the generated `## Sources` section on (source titles,
/// citation-check notes) are cut, so they cannot count as facts.
pub fn report_body(report: &str, question: &str) -> String {
    let mut body = report;
    if let Some(i) = body.rfind("\n## Sources\n") {
        body = &body[..i];
    }
    if let Some(first) = body.lines().next()
        && let Some(title) = first.strip_prefix("# ")
        && normalise(title) == normalise(question)
    {
        body = &body[first.len()..];
    }
    body.to_string()
}

/// Phrases (normalised) by which a report says its sources do not answer the question.
pub const NO_ANSWER_PHRASES: [&str; 20] = [
    "do not answer",
    "does not answer",
    "don't answer",
    "doesn't answer",
    "not answered by",
    "do not mention",
    "does not mention",
    "don't mention",
    "doesn't mention",
    "not mentioned in",
    "do not cover",
    "does not cover",
    "do not contain",
    "does not contain",
    "no information about",
    "no information on",
    "could not find",
    "did not find",
    "unable to find",
    "unable to research",
];

/// Pure: whether a (normalised) text says the sources do not answer.
pub fn states_no_answer(normalised: &str) -> bool {
    let text = normalised.replace(['\u{2019}', '`'], "'");
    NO_ANSWER_PHRASES.iter().any(|p| text.contains(p))
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// `Completed`, `Failed` or `Cancelled` (or the phase a run stopped in).
    pub phase: String,
    /// The failure's reason (`NoEvidence`, `ModelUnreachable`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Outcome {
    /// A completed run.
    pub fn completed() -> Self {
        Self {
            phase: Phase::Completed.to_string(),
            reason: None,
            message: None,
        }
    }

    /// A failed run.
    pub fn failed(reason: &str, message: impl Into<String>) -> Self {
        Self {
            phase: Phase::Failed.to_string(),
            reason: Some(reason.to_string()),
            message: Some(message.into()),
        }
    }

    /// True for Completed.
    pub fn is_completed(&self) -> bool {
        self.phase == "Completed"
    }

    /// True for Failed(NoEvidence): the honest "unable to research" report.
    pub fn is_no_evidence(&self) -> bool {
        self.phase == "Failed" && self.reason.as_deref() == Some(reasons::NO_EVIDENCE)
    }

    /// True when the run was stopped by its time limit: a runaway.
    pub fn is_runaway(&self) -> bool {
        self.phase != "Completed" && self.reason.as_deref() == Some(reasons::TIME_LIMIT)
    }

    /// `Completed`, `Failed(NoEvidence)`, `Failed(ModelUnreachable)`, `Cancelled`.
    pub fn label(&self) -> String {
        match &self.reason {
            Some(r) if !self.is_completed() && *r != self.phase => format!("{}({r})", self.phase),
            _ => self.phase.clone(),
        }
    }

    /// Pure: the outcome from the run's last checkpoint, or from the error when it has none.
    pub fn of(state: Option<&RunState>, result: &Result<PathBuf, StandaloneError>) -> Self {
        if let Some(s) = state.filter(|s| s.phase.is_terminal()) {
            let failure = s.failure.as_ref().filter(|_| s.phase != Phase::Completed);
            return Self {
                phase: s.phase.to_string(),
                reason: failure.map(|f| f.reason.clone()),
                message: failure.map(|f| f.message.clone()),
            };
        }
        match result {
            Ok(_) => Self::completed(),
            Err(StandaloneError::NoEvidence { message, .. }) => {
                Self::failed(reasons::NO_EVIDENCE, message.clone())
            }
            Err(StandaloneError::RunFailed { reason, message }) => {
                Self::failed(reason, message.clone())
            }
            Err(StandaloneError::Cancelled) => Self {
                phase: Phase::Cancelled.to_string(),
                reason: Some(reasons::CANCELLED.into()),
                message: None,
            },
            Err(e @ StandaloneError::ReportNotStored { .. }) => {
                Self::failed(reasons::REPORT_STORE_FAILED, e.to_string())
            }
            Err(e) => {
                let phase = state.map_or("Failed".to_string(), |s| s.phase.to_string());
                Self {
                    phase,
                    reason: Some("Error".into()),
                    message: Some(e.to_string()),
                }
            }
        }
    }
}

/// Tokens and cost of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spend {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_pico_usd: u64,
}

impl Spend {
    /// The `usage` of a findings.json (cost from its six-decimal `costUSD`).
    pub fn from_findings(findings: &Value) -> Self {
        let u = &findings["usage"];
        let cost_pico_usd = u["costUSD"]
            .as_str()
            .and_then(|v| quarry_api::values::parse_usd_micros(v).ok())
            .map_or(0, |m| m.saturating_mul(1_000_000));
        Self {
            input_tokens: u["inputTokens"].as_u64().unwrap_or(0),
            output_tokens: u["outputTokens"].as_u64().unwrap_or(0),
            cost_pico_usd,
        }
    }
}

/// What one finished run left behind, as scored.
#[derive(Debug, Clone, Default)]
pub struct FinishedRun<'a> {
    pub outcome: Option<Outcome>,
    /// The stored report (`report.md` of the state directory).
    pub report: Option<&'a str>,
    /// The stored `findings.json`.
    pub findings: Option<&'a Value>,
    pub spend: Spend,
    pub wall_seconds: f64,
    /// Where the report file was written.
    pub report_path: Option<String>,
}

/// A model judge's answer to "does the report state this fact?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The report states the fact.
    Yes,
    /// It does not (also the verdict, without a model call, when there is no report to read).
    No,
    /// The judge's answer could not be understood, or the call failed.
    Unknown,
}

/// Whether one key fact was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FactResult {
    pub fact: String,
    /// Found by normalised string match.
    pub found: bool,
    /// The match string found first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matched: Option<String>,
    /// The model judge's verdict (`quarry eval --judge`); absent when not judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Verdict>,
    /// Found in the report's own words ([`own_words`]), not only in a passage it quotes.
    #[serde(default)]
    pub stated: bool,
}

/// A claim made false on purpose ([`crate::eval::judge::claims::falsified`]) and the judge's
/// verdict on it: the judge's precision means something only when it says no to these.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeControl {
    /// The falsified claim.
    pub claim: String,
    /// The page the true claim cites.
    pub url: String,
    /// The judge's verdict; absent when its call failed.
    pub judge: Option<Verdict>,
}

/// One cited claim of a run put to the model judge: does the page it cites support it?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimVerdict {
    /// The sentence, as the run checked it.
    pub claim: String,
    /// The page it cites.
    pub url: String,
    /// The run's own check (findings.json's `supported`).
    pub supported: bool,
    /// The judge's verdict; absent when its call failed (asked again on the next run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<Verdict>,
    /// The page states the claim word for word: its verdict is yes with no model call.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verbatim: bool,
}

impl ClaimVerdict {
    /// Whether the judge said yes or no and the run's check said the opposite.
    pub fn disagrees(&self) -> bool {
        matches!(
            (self.judge, self.supported),
            (Some(Verdict::Yes), false) | (Some(Verdict::No), true)
        )
    }
}

/// Tokens and cost the judge spent on one question (or all of them): never part of the run's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JudgeSpend {
    /// Model calls made (a fact with no report to read needs none).
    pub calls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_pico_usd: u64,
}

impl JudgeSpend {
    /// Adds another record to this one.
    pub fn add(&mut self, other: &JudgeSpend) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_pico_usd += other.cost_pico_usd;
    }
}

/// The score of one question (`DIR/results/<id>.json`, and a row of `eval.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionResult {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub question: String,
    pub expect: Expect,
    pub outcome: Outcome,
    /// Key facts whose match strings occur in the report body (answerable questions).
    pub key_facts_found: u32,
    /// Of those, found in the report's own words (see [`own_words`]).
    #[serde(default)]
    pub key_facts_stated: u32,
    pub key_facts: u32,
    #[serde(default)]
    pub facts: Vec<FactResult>,
    /// Key facts the model judge says the report states (`--judge`; absent when not judged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_facts_judged: Option<u32>,
    /// Key facts on which the judge (yes or no) and the string match agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_agreement: Option<u32>,
    /// What the judge spent on this question (not in `inputTokens`, `outputTokens` or the cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_spend: Option<JudgeSpend>,
    /// The judge's verdict on each cited claim (`--judge`; empty when not judged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_verdicts: Vec<ClaimVerdict>,
    /// One of its claims falsified and put to the judge as a control (`--judge`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_control: Option<JudgeControl>,
    /// No-answer questions: the run ended NoEvidence or its report says the sources do not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub honest: Option<bool>,
    /// No-answer questions: the run completed with cited claims.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invented: Option<bool>,
    /// The report was cut short by a limit.
    #[serde(default)]
    pub partial: bool,
    /// Cited claims checked against the text of the page they cite.
    pub claims: u32,
    pub supported_claims: u32,
    pub unsupported_claims: u32,
    /// `supportedClaims / claims`, as findings.json states it; `null` without claims.
    pub citation_precision: Option<f64>,
    /// URLs the report cites.
    pub cited_urls: u32,
    /// Of those, pages the run fetched (not only saw in search results).
    pub cited_fetched: u32,
    /// Cited URLs the run neither read nor saw: invented. Quarry removes them from its report
    /// (findings.json's `unverifiedReferences`); an external report still holds them.
    pub removed_citations: u32,
    /// The run was stopped by its time limit (`TimeLimit`, or an external run's `timeout`).
    #[serde(default)]
    pub runaway: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: String,
    pub cost_pico_usd: u64,
    pub wall_seconds: f64,
    /// Model calls the run made, from its events (0 when unknown).
    #[serde(default)]
    pub model_calls: u32,
    /// Seconds those calls took, summed (parallel calls overlap: the sum can exceed the wall time).
    #[serde(default)]
    pub model_seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// Pure: the model calls in a run's JSON-lines events (`"type":"model_call"`) and the seconds
/// they took, summed; lines that are not such events are skipped.
pub fn model_time(events: &str) -> (u32, f64) {
    let mut calls = 0u32;
    let mut ms = 0u64;
    for line in events.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["type"] == "model_call" {
            calls += 1;
            ms += v["durationMs"].as_u64().unwrap_or(0);
        }
    }
    (calls, (ms as f64 / 100.0).round() / 10.0)
}

fn count(v: &Value) -> u32 {
    v.as_array()
        .map_or(0, |a| u32::try_from(a.len()).unwrap_or(u32::MAX))
}

/// A `usize` count as `u32`, saturating.
pub(crate) fn n(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// Pure: the text of a report that can state facts, not yet normalised: [`report_body`], or
/// `None` without a report or when the run was aborted (the honest "unable to research" report
/// restates the question and the searches, so it states no facts).
pub fn answer_body(
    q: &Question,
    outcome: &Outcome,
    report: Option<&str>,
    aborted: bool,
) -> Option<String> {
    match report {
        Some(report) if !aborted && !outcome.is_no_evidence() => {
            Some(report_body(report, &q.question))
        }
        _ => None,
    }
}

/// Pure: scores one finished run of `q`.
pub fn score(q: &Question, run: &FinishedRun<'_>) -> QuestionResult {
    let outcome = run
        .outcome
        .clone()
        .unwrap_or_else(|| Outcome::failed("NoReport", "the run left no checkpoint"));
    let null = Value::Null;
    let findings = run.findings.unwrap_or(&null);
    let aborted = findings["aborted"].as_bool().unwrap_or(false);
    let raw_body = answer_body(q, &outcome, run.report, aborted).unwrap_or_default();
    let body = normalise(&raw_body);
    let expect = q.expects();
    let mut facts = match_facts(q, &body);
    mark_stated(q, &mut facts, &normalise(&own_words(&raw_body)));
    let claims = findings["claims"].as_array().cloned().unwrap_or_default();
    let supported = claims
        .iter()
        .filter(|c| c["supported"].as_bool() == Some(true))
        .count();
    let fetched: BTreeSet<String> = findings["researcherReports"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["fetched"].as_array().into_iter().flatten())
        .filter_map(|s| s["url"].as_str().map(normalize_url))
        .collect();
    let cited: Vec<String> = findings["citedUrls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(str::to_string))
        .collect();
    let cited_fetched = cited
        .iter()
        .filter(|u| fetched.contains(&normalize_url(u)))
        .count();
    let precision = findings["citationPrecision"]
        .as_f64()
        .or_else(|| (!claims.is_empty()).then(|| supported as f64 / claims.len() as f64));
    let (honest, invented) = if expect == Expect::NoAnswer {
        let said = run
            .report
            .is_some_and(|r| states_no_answer(&normalise(&report_body(r, &q.question))));
        (
            Some(outcome.is_no_evidence() || said),
            Some(outcome.is_completed() && !claims.is_empty()),
        )
    } else {
        (None, None)
    };
    QuestionResult {
        id: q.id.clone(),
        kind: q.kind.clone(),
        question: q.question.clone(),
        expect,
        runaway: outcome.is_runaway(),
        outcome,
        key_facts_found: n(facts.iter().filter(|f| f.found).count()),
        key_facts_stated: n(facts.iter().filter(|f| f.stated).count()),
        key_facts: n(facts.len()),
        facts,
        key_facts_judged: None,
        judge_agreement: None,
        judge_spend: None,
        claim_verdicts: Vec::new(),
        judge_control: None,
        honest,
        invented,
        partial: findings["partial"].as_bool().unwrap_or(false),
        claims: n(claims.len()),
        supported_claims: n(supported),
        unsupported_claims: n(claims.len() - supported),
        citation_precision: precision,
        cited_urls: n(cited.len()),
        cited_fetched: n(cited_fetched),
        removed_citations: count(&findings["unverifiedReferences"]),
        input_tokens: run.spend.input_tokens,
        output_tokens: run.spend.output_tokens,
        cost_usd: format_pico_usd(run.spend.cost_pico_usd),
        cost_pico_usd: run.spend.cost_pico_usd,
        wall_seconds: (run.wall_seconds * 10.0).round() / 10.0,
        model_calls: 0,
        model_seconds: 0.0,
        report: run.report_path.clone(),
    }
}

/// What to do with one selected question.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Its result is on disk already: reuse it.
    Skip(Box<QuestionResult>),
    /// Run it.
    Run,
}

/// The reason of an external question whose run or report file is missing.
pub const NOT_FINISHED: &str = "NotFinished";

/// Pure: resume. A question whose result is in `done` is skipped unless `fresh` or it was not
/// finished (an external system's files were missing: they may be there now).
pub fn plan(
    questions: &[Question],
    done: &BTreeMap<String, QuestionResult>,
    fresh: bool,
) -> Vec<Plan> {
    questions
        .iter()
        .map(|q| match done.get(&q.id) {
            Some(r)
                if !fresh && r.id == q.id && r.outcome.reason.as_deref() != Some(NOT_FINISHED) =>
            {
                Plan::Skip(Box::new(r.clone()))
            }
            _ => Plan::Run,
        })
        .collect()
}

mod matching;
mod totals;

pub use matching::*;
pub use totals::*;

#[cfg(test)]
mod tests;
