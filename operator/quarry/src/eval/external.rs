//! Scoring reports another system wrote (`quarry eval QUESTIONS --external DIR`): the same
//! scores as Quarry's own reports, from `DIR/reports/<id>.md` and `DIR/runs/<id>.json` (format
//! in tests/eval/README.md), with no research run.
//!
//! Pure: the shell fetches the cited pages and hands their text in. Citations are judged as
//! Quarry's evidence gate judges its own: a cited URL is invented when it is neither among the
//! run's fetched nor its searched URLs, and a cited sentence is supported when
//! [`quarry_engine::research::writing::evidence::check_claims`] passes against the cited page's text.

use std::collections::BTreeMap;

use quarry_engine::llm::format_pico_usd;
use quarry_engine::research::writing::evidence::{EvidenceBase, check_claims, gate_links};
use quarry_engine::research::writing::links::normalize_url;
use quarry_vocab::reasons;
use serde::Deserialize;

use super::score::{
    Expect, NOT_FINISHED, Outcome, Question, QuestionResult, mark_stated, match_facts, n,
    normalise, own_words, report_body, states_no_answer,
};

/// How an external run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExternalOutcome {
    /// It wrote its report.
    Completed,
    /// It stopped with an error.
    Failed,
    /// It was stopped by the benchmark's time limit: a runaway.
    Timeout,
}

/// `DIR/runs/<id>.json`: what the benchmark recorded about one external run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExternalRun {
    /// The question's id.
    pub id: String,
    pub outcome: ExternalOutcome,
    /// Wall time of the run.
    #[serde(default)]
    pub seconds: f64,
    /// Model input tokens, when the system reports them.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Model output tokens, when the system reports them.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Pages the run fetched (read).
    #[serde(default)]
    pub fetched_urls: Vec<String>,
    /// Search results the run saw.
    #[serde(default)]
    pub searched_urls: Vec<String>,
    /// The error of a failed run.
    #[serde(default)]
    pub error: Option<String>,
}

impl ExternalRun {
    /// Pure: parses `runs/<id>.json`, which must name question `id`.
    pub fn parse(text: &str, id: &str) -> Result<Self, String> {
        let run: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if run.id != id {
            return Err(format!("names question {:?}, not {id:?}", run.id));
        }
        Ok(run)
    }

    /// The outcome in Quarry's terms: `Completed`, `Failed(Error)` or `Failed(TimeLimit)`.
    pub fn outcome(&self) -> Outcome {
        let message = self.error.clone().unwrap_or_default();
        match self.outcome {
            ExternalOutcome::Completed => Outcome::completed(),
            ExternalOutcome::Failed => Outcome::failed("Error", message),
            ExternalOutcome::Timeout => Outcome::failed(reasons::TIME_LIMIT, message),
        }
    }
}

/// Headings that open a report's list of sources (compared lowercase, without `#`s and `:`).
pub const REFERENCE_HEADINGS: [&str; 5] = [
    "sources",
    "references",
    "bibliography",
    "works cited",
    "citations",
];

/// Pure: the part of an external report that can state facts and make claims: [`report_body`]
/// cut before its last reference-list heading (`## References`, `### Sources`, ...), so source
/// titles count as neither facts nor claims.
pub fn external_body(report: &str, question: &str) -> String {
    let body = report_body(report, question);
    let mut cut = body.len();
    let mut at = 0;
    for line in body.split_inclusive('\n') {
        let heading = line.trim();
        if heading.starts_with('#') {
            let title = heading
                .trim_start_matches('#')
                .trim()
                .trim_end_matches(':')
                .trim()
                .to_lowercase();
            if REFERENCE_HEADINGS.contains(&title.as_str()) {
                cut = at;
            }
        }
        at += line.len();
    }
    body[..cut].to_string()
}

/// The URLs a report cites, split by provenance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Citations {
    /// Cited URLs the run fetched or saw in search results (as the run recorded them).
    pub known: Vec<String>,
    /// Cited URLs the run neither fetched nor saw: invented (normalised).
    pub invented: Vec<String>,
    /// Of `known`, those the run fetched.
    pub fetched: Vec<String>,
}

impl Citations {
    /// Every cited URL: the pages whose text the claims are checked against.
    pub fn all(&self) -> impl Iterator<Item = &String> {
        self.known.iter().chain(&self.invented)
    }
}

/// Pure: the URLs `report` cites anywhere (its reference list included: an invented URL there is
/// still invented), against what `run` fetched and searched.
pub fn citations(report: &str, run: &ExternalRun) -> Citations {
    let mut provenance = EvidenceBase::default();
    for u in &run.fetched_urls {
        provenance.add_page(u, "", "");
    }
    for u in &run.searched_urls {
        provenance.add_seen(u, "", "");
    }
    let gated = gate_links(report, &provenance);
    let fetched = gated
        .cited
        .iter()
        .filter(|u| provenance.was_fetched(u))
        .cloned()
        .collect();
    Citations {
        known: gated.cited,
        invented: gated.unverified,
        fetched,
    }
}

/// The text of a cited page, as the scorer fetched and extracted it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageText {
    /// The page title.
    pub title: String,
    /// Its main content (Markdown).
    pub text: String,
}

/// What the shell found for one question in `DIR`.
#[derive(Debug, Clone)]
pub struct ExternalInput<'a> {
    /// `runs/<id>.json`, or why it is missing or unreadable.
    pub run: Result<&'a ExternalRun, String>,
    /// `reports/<id>.md`, if present.
    pub report: Option<&'a str>,
    /// Where the report file is.
    pub report_path: Option<String>,
}

/// Pure: the body the key facts are matched in (and the judge reads): [`external_body`] of the
/// report, `None` without one.
pub fn external_answer(q: &Question, input: &ExternalInput<'_>) -> Option<String> {
    input.report.map(|r| external_body(r, &q.question))
}

/// Pure: scores one question of an external system. `pages` holds the text of every cited page
/// the scorer could fetch, keyed by [`normalize_url`]; a cited page missing there supports none of
/// the sentences citing it. A missing run file, or a completed run without its report, is a
/// question that did not finish (`Failed(NotFinished)`).
pub fn score_external(
    q: &Question,
    input: &ExternalInput<'_>,
    pages: &BTreeMap<String, PageText>,
) -> QuestionResult {
    let expect = q.expects();
    let run = input.run.as_ref().ok().copied();
    let outcome = match (&input.run, input.report) {
        (Err(why), _) => Outcome::failed(NOT_FINISHED, why.clone()),
        (Ok(run), None) if run.outcome == ExternalOutcome::Completed => {
            Outcome::failed(NOT_FINISHED, format!("reports/{}.md is missing", q.id))
        }
        (Ok(run), _) => run.outcome(),
    };
    let answer = external_answer(q, input).unwrap_or_default();
    let mut facts = match_facts(q, &normalise(&answer));
    mark_stated(q, &mut facts, &normalise(&own_words(&answer)));
    let (cited, checks) = match (run, input.report) {
        (Some(run), Some(report)) => {
            let cited = citations(report, run);
            let mut texts = EvidenceBase::default();
            for url in cited.all() {
                let page = pages.get(&normalize_url(url)).cloned().unwrap_or_default();
                texts.add_page(url, &page.title, &page.text);
            }
            let checks = check_claims(&answer, &texts, &q.question);
            (cited, checks)
        }
        _ => (Citations::default(), Vec::new()),
    };
    let supported = checks.iter().filter(|c| c.supported).count();
    let (honest, invented) = if expect == Expect::NoAnswer {
        (
            Some(states_no_answer(&normalise(&answer))),
            Some(outcome.is_completed() && !checks.is_empty()),
        )
    } else {
        (None, None)
    };
    let tokens = |t: Option<u64>| t.unwrap_or(0);
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
        partial: false,
        claims: n(checks.len()),
        supported_claims: n(supported),
        unsupported_claims: n(checks.len() - supported),
        citation_precision: (!checks.is_empty())
            .then(|| ((supported as f64 / checks.len() as f64) * 1000.0).round() / 1000.0),
        cited_urls: n(cited.known.len() + cited.invented.len()),
        cited_fetched: n(cited.fetched.len()),
        removed_citations: n(cited.invented.len()),
        input_tokens: tokens(run.and_then(|r| r.input_tokens)),
        output_tokens: tokens(run.and_then(|r| r.output_tokens)),
        cost_usd: format_pico_usd(0),
        cost_pico_usd: 0,
        wall_seconds: run.map_or(0.0, |r| (r.seconds * 10.0).round() / 10.0),
        model_calls: 0,
        model_seconds: 0.0,
        report: input.report_path.clone(),
    }
}

#[cfg(test)]
mod tests;
