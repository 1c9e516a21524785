//! The coordinator (planning), the lead evaluator and the synthesizer: the model calls of deep mode.
//!
//! Parsing is pure and tolerant ([`parse_plan`], [`parse_decision`]); the async functions only
//! talk to the model and map its answers onto reducer events.

use std::sync::Arc;

use futures::future::join_all;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::prompts;
use super::researcher::{failure_from_llm, guides};
use super::settings::EngineSettings;
use crate::llm::json_extract::{extract_json_object, strip_think};
use crate::llm::{CallPurpose, ChatModel, ChatRequest, Message, Usage};
use crate::research::machine::reducer::Event;
use crate::research::machine::state::{
    Decision, Failure, Mode, OutputKind, PageExtract, RunState, TaskState,
};
use crate::research::reading::agenda::{aspects, covering, follow_ups};
use crate::research::reading::queries::anchored_tasks;
use crate::research::writing::evidence::{ClaimCheck, EvidenceBase};
use crate::research::writing::merged::{merged_answers, merged_reports};
use crate::research::writing::outputs::{self, ParsedOutput};
use crate::research::writing::report::{self, Draft, SourceNote};
use crate::scrape::truncate_page;
use quarry_vocab::reasons;

mod answers;
pub use answers::{
    PlanOutcome, parse_decision, parse_plan, parse_plan_strict, tasks_for_complexity,
};

fn request(
    messages: Vec<Message>,
    json_mode: bool,
    max_tokens: u32,
    purpose: CallPurpose,
) -> ChatRequest {
    ChatRequest {
        messages,
        tools: vec![],
        json_mode,
        json_schema: None,
        max_tokens,
        purpose,
    }
}

/// How long planning may take before the run goes on with [`fallback_agenda`]: a small model on
/// busy cores can spend minutes on one planning call, and deep mode's whole run should take a
/// few minutes.
pub const PLAN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(90);

/// Pure: the agenda when the planner gives none: the question's aspects ([`aspects`]: "What
/// does the MERGE command introduced in PostgreSQL 15 do, and when was PostgreSQL 15
/// released?" becomes two tasks, and a question of two products one task for each), or the
/// question itself when it asks one thing.
pub fn fallback_agenda(query: &str) -> Vec<String> {
    let parts = aspects(query);
    if parts.len() >= 2 {
        parts
    } else {
        vec![query.trim().to_string()]
    }
}

/// Runs the coordinator within [`PLAN_DEADLINE`] ([`plan_within`]).
pub async fn plan(
    model: &dyn ChatModel,
    budget: Option<&dyn ChatModel>,
    state: &RunState,
    max_tokens: u32,
) -> Event {
    plan_within(model, budget, state, max_tokens, PLAN_DEADLINE).await
}

/// Runs the coordinator: one repair retry quoting the parse error, then the budget tier (when the
/// profile has one) with its own repair retry. An answer that is still no agenda, a model call
/// that timed out or gave output the engine could not use (degenerate, malformed), or planning
/// that outlasts `deadline` gives the deterministic [`fallback_agenda`] rather than failing or
/// waiting; a refusal or another model error fails.
/// A planned agenda is made to cover each aspect of the question ([`covering`]).
pub async fn plan_within(
    model: &dyn ChatModel,
    budget: Option<&dyn ChatModel>,
    state: &RunState,
    max_tokens: u32,
    deadline: std::time::Duration,
) -> Event {
    let mut usage = Usage::default();
    let planned = tokio::time::timeout(deadline, async {
        let first = plan_with(model, state, max_tokens, &mut usage).await;
        match (first, budget) {
            (Err(PlanError::Unparseable(_)), Some(budget)) => {
                tracing::info!("the planner's answer was unusable; asking the budget tier");
                plan_with(budget, state, max_tokens, &mut usage).await
            }
            (other, _) => other,
        }
    })
    .await;
    let outcome = planned.unwrap_or_else(|_| {
        Err(PlanError::Slow(format!(
            "planning took longer than {} s",
            deadline.as_secs()
        )))
    });
    match outcome {
        Ok(PlanOutcome::Agenda(tasks)) => Event::PlanReady {
            tasks: anchored_tasks(&state.input.query, &covering(&state.input.query, &tasks)),
            usage,
        },
        Ok(PlanOutcome::Refused) => Event::PlanFailed {
            failure: Failure::new(
                reasons::POLICY_REFUSED,
                "the question was classified as a request to cause harm; no search was made",
            ),
            usage,
        },
        Err(PlanError::Model(failure)) => Event::PlanFailed { failure, usage },
        Err(PlanError::Unparseable(why) | PlanError::Slow(why)) => {
            let tasks = anchored_tasks(&state.input.query, &fallback_agenda(&state.input.query));
            tracing::warn!(
                reason = %why,
                tasks = tasks.len(),
                "no agenda from the planner; researching the question's own parts"
            );
            Event::PlanReady { tasks, usage }
        }
    }
}

enum PlanError {
    Model(Failure),
    Unparseable(String),
    /// The model call timed out, or planning outlasted its deadline.
    Slow(String),
}

async fn plan_with(
    model: &dyn ChatModel,
    state: &RunState,
    max_tokens: u32,
    usage: &mut Usage,
) -> Result<PlanOutcome, PlanError> {
    let mut user = format!("Question: {}", state.input.query);
    if let Some(c) = state
        .input
        .context
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        user.push_str(&format!("\n\nBackground:\n{c}"));
    }
    let mut messages = vec![Message::system(prompts::PLANNER), Message::user(user)];
    let mut last_error = String::new();
    for attempt in 0..2 {
        let resp = model
            .chat(request(
                messages.clone(),
                true,
                max_tokens,
                CallPurpose::Plan,
            ))
            .await
            .map_err(|e| {
                usage.add(&e.billed());
                match e.unbilled() {
                    crate::llm::LlmError::Timeout { seconds } => {
                        PlanError::Slow(format!("the planning call timed out after {seconds} s"))
                    }
                    // An answer the server gave and the engine could not use (it repeated
                    // itself until stopped) is no agenda, as an unparseable one is: the 0.5B
                    // planner's degenerate answer failed a deep run in its first 24 seconds.
                    crate::llm::LlmError::Degenerate { .. }
                    | crate::llm::LlmError::Malformed(_) => PlanError::Unparseable(e.to_string()),
                    _ => PlanError::Model(failure_from_llm(&e)),
                }
            })?;
        usage.add(&resp.usage);
        // The retry is judged leniently: a short agenda beats no agenda.
        let parsed = if attempt == 0 {
            parse_plan_strict(&resp.content)
        } else {
            parse_plan(&resp.content)
        };
        match parsed {
            Ok(outcome) => return Ok(outcome),
            Err(e) if attempt == 0 => {
                last_error = e.clone();
                messages.push(Message::assistant(resp.content, vec![]));
                messages.push(Message::user(format!(
                    "Your answer could not be used: {e}. Answer again with ONE JSON object of the form {{\"intent\": \"research\", \"complexity\": 2, \"tasks\": [\"...\"]}} and nothing else."
                )));
            }
            Err(e) => last_error = e,
        }
    }
    Err(PlanError::Unparseable(last_error))
}

/// Runs the lead evaluator after a round.
pub async fn evaluate(model: &dyn ChatModel, state: &RunState, max_tokens: u32) -> Event {
    let max_queries = state.input.limits.max_concurrent_researchers.max(1) as usize;
    let system = prompts::render(
        prompts::EVALUATOR,
        &[
            ("round", &state.round.to_string()),
            ("max_rounds", &state.input.limits.max_rounds.to_string()),
            ("max_queries", &max_queries.to_string()),
        ],
    );
    let mut user = format!("Question: {}\n\nAgenda:\n", state.input.query);
    for t in &state.agenda {
        user.push_str(&format!("- [{:?}] {}\n", t.state, t.query));
    }
    user.push_str("\nFindings so far:\n");
    let share = material_budget(model.context_window()) / state.reports.len().max(1);
    user.push_str(&reports_digest(state, share.clamp(500, 12_000)));
    match model
        .chat(request(
            vec![Message::system(system), Message::user(user)],
            true,
            max_tokens,
            CallPurpose::Evaluate,
        ))
        .await
    {
        Ok(resp) => Event::Evaluated {
            decision: worth_delegating(state, parse_decision(&resp.content, max_queries)),
            usage: resp.usage,
        },
        // An evaluator that cannot answer must not strand the run: synthesize what exists.
        Err(e) => Event::Evaluated {
            decision: Decision::Synthesize,
            usage: e.billed(),
        },
    }
}

/// Pure: `decision` with only the follow-ups worth a researcher ([`follow_ups`]): new tasks,
/// not done already and not a page's title; none left is synthesis.
pub fn worth_delegating(state: &RunState, decision: Decision) -> Decision {
    let Decision::Delegate { queries } = decision else {
        return decision;
    };
    let done: Vec<String> = state
        .agenda
        .iter()
        .filter(|t| t.state == TaskState::Done)
        .map(|t| t.query.clone())
        .collect();
    let titles: Vec<String> = state
        .reports
        .iter()
        .flat_map(|r| r.fetched.iter().map(|s| s.title.clone()))
        .collect();
    let queries = follow_ups(&queries, &done, &titles);
    if queries.is_empty() {
        tracing::info!("no follow-up worth a researcher; synthesizing");
        Decision::Synthesize
    } else {
        Decision::Delegate { queries }
    }
}

/// The outputs a run asked for, in a fixed order: study, ideas, implementations (study when none).
pub fn requested_outputs(state: &RunState) -> Vec<OutputKind> {
    let mut kinds: Vec<OutputKind> = state.input.outputs.clone();
    kinds.sort();
    kinds.dedup();
    if kinds.is_empty() {
        kinds.push(OutputKind::Study);
    }
    kinds
}

/// True when synthesis needs no model call: quick mode with only the study (the researcher's
/// report is the result).
pub fn synthesis_is_free(state: &RunState) -> bool {
    state.input.mode == Mode::Quick && requested_outputs(state) == [OutputKind::Study]
}

/// Every page the run read, once each (first reader's text).
fn unique_pages(state: &RunState) -> Vec<PageExtract> {
    let mut seen = std::collections::BTreeSet::new();
    state
        .reports
        .iter()
        .flat_map(|r| r.pages.iter())
        .filter(|p| seen.insert(p.url.clone()))
        .cloned()
        .collect()
}

/// The compressor: one summary per page read, in parallel under a semaphore. A failed
/// summary falls back to the page's opening text, so no source is ever dropped silently.
pub async fn summarize_sources(
    model: &dyn ChatModel,
    state: &RunState,
    settings: &EngineSettings,
    usage: &mut Usage,
) -> Vec<SourceNote> {
    let pages: Vec<PageExtract> = unique_pages(state)
        .into_iter()
        .take(settings.max_summaries)
        .collect();
    tracing::info!(
        pages = pages.len(),
        concurrency = settings.summary_concurrency,
        "summarizing each page read"
    );
    let gate = Arc::new(Semaphore::new(settings.summary_concurrency.max(1)));
    let calls = pages.iter().map(|p| {
        let gate = gate.clone();
        async move {
            let _permit = gate.acquire().await.ok();
            let user = format!(
                "Question: {}\n\n{}",
                state.input.query,
                prompts::fence_page(&p.url, &p.title, &p.text)
            );
            model
                .chat(request(
                    vec![Message::system(prompts::SUMMARIZER), Message::user(user)],
                    false,
                    settings.summary_max_tokens,
                    CallPurpose::Summarize,
                ))
                .await
        }
    });
    let results = join_all(calls).await;
    let mut notes = Vec::with_capacity(pages.len());
    for (page, result) in pages.iter().zip(results) {
        let summary = match result {
            Ok(resp) => {
                usage.add(&resp.usage);
                let text = strip_think(&resp.content).trim().to_string();
                (!text.is_empty()).then_some(text)
            }
            Err(e) => {
                usage.add(&e.billed());
                tracing::warn!(url = %page.url, error = %e, "page summary failed; using its opening text");
                None
            }
        };
        notes.push(match summary {
            Some(text) => SourceNote {
                url: page.url.clone(),
                title: page.title.clone(),
                text: truncate_page(&text, 2000).text,
                summarized: true,
            },
            None => SourceNote {
                url: page.url.clone(),
                title: page.title.clone(),
                text: truncate_page(&page.text, 1500).text,
                summarized: false,
            },
        });
    }
    notes
}

/// Characters of synthesis material that fit a model: half of its context window (at four
/// characters per token) goes to the material, the rest to prompt and answer.
pub fn material_budget(context_window: u64) -> usize {
    usize::try_from(context_window.saturating_mul(2))
        .unwrap_or(usize::MAX)
        .clamp(4_000, 400_000)
}

/// The material every synthesis call reads: researcher reports and per-source notes, each cut to
/// its share of `budget` characters (reports half, notes half) so small models are not overrun.
pub fn synthesis_material(state: &RunState, notes: &[SourceNote], budget: usize) -> String {
    let reports = state.reports.len().max(1);
    let (report_share, note_share) = if notes.is_empty() {
        (budget / reports, 0)
    } else {
        (budget / 2 / reports, budget / 2 / notes.len())
    };
    let mut out = format!(
        "Question: {}\n\nResearchers' reports:\n{}",
        state.input.query,
        reports_digest(state, report_share.clamp(500, 20_000))
    );
    if !notes.is_empty() {
        out.push_str("\nNotes on each page the researchers read:\n");
        for n in notes {
            let text = truncate_page(&n.text, note_share.clamp(300, 2_000)).text;
            let kind = if n.summarized {
                "summary"
            } else {
                "opening text (summary unavailable)"
            };
            out.push_str(&format!(
                "\n<page url=\"{}\" title=\"{}\" kind=\"{kind}\">\n{}\n</page>\n",
                n.url,
                n.title.replace(['"', '\n'], " "),
                text.replace("</page>", "</ page>")
            ));
        }
    }
    out
}

/// True when an answer is mostly a copy of its input: it holds the material's own markers, or
/// most of its substantial lines appear verbatim in the material.
pub fn echoes_material(answer: &str, material: &str) -> bool {
    if [
        "<page url=",
        "--- researcher ",
        "Notes on each page the researchers read",
    ]
    .iter()
    .any(|marker| answer.contains(marker))
    {
        return true;
    }
    let lines: Vec<&str> = answer
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 40)
        .collect();
    if lines.len() < 3 {
        return false;
    }
    let copied = lines.iter().filter(|l| material.contains(**l)).count();
    copied * 2 > lines.len()
}

/// True when an answer repeats its instructions instead of following them: most of its content
/// lines (headings aside, which a report may share with its outline) stand word for word in the
/// instructions. The 0.5B model returned the study outline itself ("A numbered list of 5-7 most
/// important insights for busy readers.") as its report.
pub fn echoes_instructions(answer: &str, instructions: &str) -> bool {
    let lines: Vec<&str> = answer
        .lines()
        .map(|l| l.trim().trim_start_matches(['-', '*', ' ']))
        .filter(|l| l.len() >= 20 && !l.starts_with('#'))
        .collect();
    if lines.len() < 2 {
        return false;
    }
    let copied = lines.iter().filter(|l| instructions.contains(**l)).count();
    copied * 2 > lines.len()
}

/// True when deep mode's study is the researchers' own answers rather than a synthesis call: a
/// model small enough to be guided (see [`guides`]) copied the synthesis outline back
/// instead of writing from its material, while each guided researcher's answer is already
/// written from numbered passages and cited.
pub fn study_is_the_answers(model: &dyn ChatModel, settings: &EngineSettings) -> bool {
    guides(model, &settings.researcher)
}

/// The study when synthesis produced nothing usable: the researchers' reports, then the note on
/// each source (its summary, or its opening text), under a link to it.
pub fn fallback_study(state: &RunState, notes: &[SourceNote]) -> String {
    let mut md = merged_reports(state);
    if !notes.is_empty() {
        md.push_str("\n\n## Notes on each source\n");
        for n in notes {
            let title = if n.title.trim().is_empty() {
                n.url.as_str()
            } else {
                n.title.trim()
            };
            let kind = if n.summarized {
                ""
            } else {
                " (opening text; the summary failed)"
            };
            md.push_str(&format!(
                "\n### [{}]({}){kind}\n\n{}\n",
                title.replace(['[', ']'], ""),
                n.url,
                report::demote(n.text.trim(), 3)
            ));
        }
    }
    md
}

/// One output call (study, ideas or implementations), and whether its answer repeated the
/// instructions ([`echoes_instructions`]).
async fn output_call(
    model: &dyn ChatModel,
    state: &RunState,
    kind: OutputKind,
    material: &str,
    max_tokens: u32,
    billed: &mut Usage,
) -> Result<(ParsedOutput, Usage, bool), Failure> {
    let (mode, instructions) = match kind {
        OutputKind::Study => ("study", prompts::STUDY),
        OutputKind::Ideas => ("idea", prompts::IDEAS),
        OutputKind::Implementations => ("implementation", prompts::IMPLEMENTATIONS),
    };
    let top_k = state.input.top_k.max(1).to_string();
    let instructions = prompts::render(instructions, &[("top_k", &top_k)]);
    let system = prompts::render(
        prompts::SYNTHESIS_ENVELOPE,
        &[
            ("mode", mode),
            ("top_k", &top_k),
            ("mode_instructions", &instructions),
        ],
    );
    let resp = model
        .chat(request(
            vec![Message::system(system), Message::user(material.to_string())],
            false,
            max_tokens,
            CallPurpose::Synthesize,
        ))
        .await
        .map_err(|e| {
            billed.add(&e.billed());
            failure_from_llm(&e)
        })?;
    let parsed = outputs::parse(
        &strip_think(&resp.content),
        kind,
        state.input.top_k.max(1) as usize,
    );
    let echoed = parsed
        .body
        .as_deref()
        .is_some_and(|b| echoes_instructions(b, &instructions));
    Ok((parsed, resp.usage, echoed))
}

/// Produces the requested outputs (deep mode: from summaries and reports; quick mode: the
/// researcher's report is the study), runs the evidence gate and renders the final report.
pub async fn synthesize(
    model: &dyn ChatModel,
    state: &RunState,
    settings: &EngineSettings,
) -> Event {
    let mut usage = Usage::default();
    let kinds = requested_outputs(state);
    let deep = state.input.mode == Mode::Deep;
    let from_answers = deep && study_is_the_answers(model, settings);
    let notes = if deep && settings.summarize_sources && !from_answers {
        summarize_sources(model, state, settings, &mut usage).await
    } else {
        Vec::new()
    };
    let material = synthesis_material(state, &notes, material_budget(model.context_window()));
    let mut draft = Draft {
        source_notes: notes,
        ..Draft::default()
    };
    let mut failures: Vec<(OutputKind, Failure)> = Vec::new();
    let mut calls = 0;
    for kind in kinds {
        if kind == OutputKind::Study && !deep {
            draft.study = Some(merged_reports(state));
            continue;
        }
        if kind == OutputKind::Study && from_answers {
            draft.study = Some(merged_answers(state));
            continue;
        }
        calls += 1;
        tracing::info!(output = ?kind, material_chars = material.len(), "writing output");
        match output_call(
            model,
            state,
            kind,
            &material,
            settings.synthesis_max_tokens,
            &mut usage,
        )
        .await
        {
            Ok((parsed, u, echoed_instructions)) => {
                usage.add(&u);
                let echoed = echoed_instructions
                    || parsed
                        .body
                        .as_deref()
                        .is_some_and(|b| echoes_material(b, &material))
                    || parsed
                        .items
                        .iter()
                        .any(|i| echoes_material(&i.content, &material));
                if echoed {
                    // Small models sometimes copy their input instead of writing: never publish that.
                    tracing::warn!(output = ?kind, "the output repeated its input material");
                    draft.notes.push(format!(
                        "The {kind:?} output repeated its input instead of answering, so it was discarded{}.",
                        if kind == OutputKind::Study {
                            "; the researchers' reports and the notes on each source are shown instead"
                        } else {
                            ""
                        }
                    ));
                    if kind == OutputKind::Study {
                        draft.study = Some(fallback_study(state, &draft.source_notes));
                    }
                    continue;
                }
                if parsed.truncated {
                    draft.notes.push(format!(
                        "The {kind:?} output was cut off by the model's output limit; what it held is shown."
                    ));
                }
                match kind {
                    OutputKind::Study => match parsed.body {
                        Some(body) => draft.study = Some(report::tidy_model_markdown(&body)),
                        None => {
                            draft.notes.push("The synthesis came back empty; the researchers' reports and the notes on each source are shown instead.".to_string());
                            draft.study = Some(fallback_study(state, &draft.source_notes));
                        }
                    },
                    OutputKind::Ideas => draft.ideas = Some(parsed),
                    OutputKind::Implementations => draft.implementations = Some(parsed),
                }
            }
            Err(failure)
                if kind == OutputKind::Study
                    && [reasons::COST_LIMIT, reasons::TOKEN_LIMIT]
                        .contains(&failure.reason.as_str()) =>
            {
                // No budget for the report itself: the reducer assembles the partial one.
                return Event::SynthesisFailed { failure, usage };
            }
            Err(failure) => {
                tracing::warn!(output = ?kind, reason = %failure.reason, "output call failed");
                draft.notes.push(format!(
                    "The {kind:?} output could not be produced ({}: {}).",
                    failure.reason, failure.message
                ));
                if kind == OutputKind::Study {
                    draft.study = Some(fallback_study(state, &draft.source_notes));
                }
                failures.push((kind, failure));
            }
        }
    }
    if calls > 0 && failures.len() == calls {
        let (_, first) = failures.swap_remove(0);
        return Event::SynthesisFailed {
            failure: Failure::new(reasons::SYNTHESIS_FAILED, first.message),
            usage,
        };
    }
    let mut checked = report::check(state, draft);
    if settings.model_judge {
        let base = EvidenceBase::from_state(state);
        judge_claims(model, &mut checked.claims, &base, settings, &mut usage).await;
    }
    Event::Synthesized {
        report: report::render(state, checked, false),
        usage,
    }
}

/// Claims judged by the model at most (each is one small call).
pub const MAX_JUDGED_CLAIMS: usize = 40;

/// The optional model judge: asks the model whether each cited text supports its claim; a call
/// that fails or answers unclearly keeps the lexical verdict.
pub async fn judge_claims(
    model: &dyn ChatModel,
    claims: &mut [ClaimCheck],
    base: &EvidenceBase,
    settings: &EngineSettings,
    usage: &mut Usage,
) {
    let gate = Arc::new(Semaphore::new(settings.summary_concurrency.max(1)));
    let calls = claims.iter().take(MAX_JUDGED_CLAIMS).map(|c| {
        let gate = gate.clone();
        let evidence = base.evidence_text(&c.url).unwrap_or_default();
        async move {
            let _permit = gate.acquire().await.ok();
            let user = format!(
                "Claim: {}\n\n{}",
                c.claim,
                prompts::fence_page(&c.url, "", &truncate_page(&evidence, 12_000).text)
            );
            model
                .chat(request(
                    vec![Message::system(prompts::JUDGE), Message::user(user)],
                    true,
                    64,
                    CallPurpose::Classify,
                ))
                .await
        }
    });
    let results = join_all(calls).await;
    for (claim, result) in claims.iter_mut().zip(results) {
        let resp = match result {
            Ok(resp) => resp,
            Err(e) => {
                usage.add(&e.billed());
                continue;
            }
        };
        usage.add(&resp.usage);
        let verdict = extract_json_object(&resp.content)
            .ok()
            .and_then(|v| v.get("supported").and_then(Value::as_bool));
        if let Some(supported) = verdict {
            claim.supported = supported;
            claim.judged_by = "model";
        }
    }
}

/// Every researcher report, each capped at `chars_each`, for the evaluator and the synthesizer.
fn reports_digest(state: &RunState, chars_each: usize) -> String {
    let mut out = String::new();
    for r in &state.reports {
        out.push_str(&format!(
            "\n--- researcher {} ---\n{}\n",
            r.task_id,
            truncate_page(&r.markdown, chars_each).text
        ));
    }
    out
}

#[cfg(test)]
mod tests;
