//! The model judge of `quarry eval --judge`: for each key fact of an answerable question, a model
//! is asked whether the report states it. Its verdicts sit beside the string match so either can
//! audit the other.
//!
//! Everything but [`judge_fact`] and [`judge_result`] is pure: the prompt, fitting the report into
//! the judge's context window, reading the answer and recording the verdicts. Those two talk to
//! the model only through [`ChatModel`], so tests script it.

use std::collections::BTreeSet;

use quarry_engine::llm::json_extract::extract_json_object;
use quarry_engine::llm::{CallPurpose, ChatModel, ChatRequest, JsonSchema, Message, Usage};
use quarry_engine::research::writing::evidence::terms;
use serde_json::Value;

pub mod claims;

use super::score::{FactResult, JudgeSpend, KeyFact, Question, QuestionResult, Verdict, agrees, n};

/// Characters per token assumed when fitting a prompt: conservative for English and code.
pub const CHARS_PER_TOKEN: f64 = 3.5;
/// Tokens kept free for the chat template and the model's role markers.
pub const TEMPLATE_TOKENS: u64 = 64;
/// Output cap of one judge call: the answer is `{"stated": true}`.
pub const JUDGE_MAX_TOKENS: u32 = 32;
/// Output cap assumed when the profile sets no `maxOutputTokens` (the researcher's default).
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 1024;

/// What the judge needs to know about its model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JudgeSettings {
    /// The model's context window in tokens (`contextWindow`).
    pub context_window: u64,
    /// The profile's output cap (`maxOutputTokens`), kept free in the window.
    pub max_output_tokens: u64,
    /// Ask for a JSON object (`jsonMode`).
    pub json_mode: bool,
}

impl JudgeSettings {
    /// Characters of the whole prompt that fit: `(contextWindow - maxOutputTokens - template)`
    /// tokens at [`CHARS_PER_TOKEN`].
    pub fn prompt_chars(&self) -> usize {
        let tokens = self
            .context_window
            .saturating_sub(self.max_output_tokens)
            .saturating_sub(TEMPLATE_TOKENS);
        // Whole tokens times 3.5, rounded down; `as` is exact for any realistic window.
        usize::try_from(tokens.saturating_mul(7) / 2).unwrap_or(usize::MAX)
    }

    /// Output cap of one judge call: small, and never above the profile's.
    pub fn max_tokens(&self) -> u32 {
        u32::try_from(self.max_output_tokens.clamp(1, u64::from(JUDGE_MAX_TOKENS)))
            .unwrap_or(JUDGE_MAX_TOKENS)
    }
}

const SYSTEM: &str = "You check whether a report states a given fact. Answer with one JSON object and nothing else: {\"stated\": true} if the report states the fact (in any wording), {\"stated\": false} if it does not.";

fn user_prompt(fact: &str, report: &str) -> String {
    format!(
        "Fact: {fact}\n\nReport:\n<<<\n{report}\n>>>\n\nDoes the report state the fact? Answer {{\"stated\": true}} or {{\"stated\": false}}."
    )
}

/// Pure: the judge's messages for one fact and a report body already fitted with [`fit_body`].
pub fn judge_messages(fact: &str, report: &str) -> Vec<Message> {
    vec![
        Message::system(SYSTEM),
        Message::user(user_prompt(fact, report)),
    ]
}

/// Pure: characters left for the report in a prompt about `fact`.
pub fn body_chars(settings: &JudgeSettings, fact: &str) -> usize {
    let fixed = SYSTEM.chars().count() + user_prompt(fact, "").chars().count();
    settings.prompt_chars().saturating_sub(fixed)
}

/// Pure: the report's sentence-sized pieces: lines, then sentences within a line.
fn pieces(body: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for line in body.lines() {
        let mut start = 0;
        let bytes: Vec<(usize, char)> = line.char_indices().collect();
        for (i, &(at, c)) in bytes.iter().enumerate() {
            let next_is_space = bytes.get(i + 1).is_none_or(|&(_, n)| n.is_whitespace());
            if matches!(c, '.' | '!' | '?') && next_is_space {
                let end = at + c.len_utf8();
                out.push(line[start..end].trim());
                start = end;
            }
        }
        out.push(line[start..].trim());
    }
    out.into_iter().filter(|p| !p.is_empty()).collect()
}

fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((at, _)) => &s[..at],
        None => s,
    }
}

/// Pure: the report as the judge reads it, at most `max_chars` characters. A report that fits
/// is kept whole; a longer one is cut to the sentences sharing the most content words with
/// `key` (the fact, its quote and match strings), taken best first while they fit and put back
/// in report order, `…` marking each gap (and a cut start or end).
pub fn fit_body(body: &str, key: &str, max_chars: usize) -> String {
    let body = body.trim();
    if body.chars().count() <= max_chars {
        return body.to_string();
    }
    let want = terms(key);
    let pieces = pieces(body);
    let mut ranked: Vec<(usize, usize)> = pieces
        .iter()
        .enumerate()
        .map(|(i, p)| (i, terms(p).intersection(&want).count()))
        .collect();
    // Best first; the earlier sentence wins a tie.
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    const GAP: &str = "\n…\n";
    let gap = GAP.chars().count();
    let mut picked = BTreeSet::new();
    // Each kept sentence pays for the gap before it; one more character pays for the gap
    // marks at both ends (2 + 2 against the 3 of one inner gap).
    let mut used = 1usize;
    for (i, _) in ranked {
        let len = pieces[i].chars().count();
        if used + len + gap <= max_chars {
            picked.insert(i);
            used += len + gap;
        }
    }
    if picked.is_empty() {
        // Even the best sentence is longer than the room: its beginning.
        let best = pieces
            .iter()
            .max_by_key(|p| terms(p).intersection(&want).count())
            .copied()
            .unwrap_or(body);
        return truncate_chars(best, max_chars).to_string();
    }
    let mut out = String::new();
    let mut last: Option<usize> = None;
    for i in picked {
        if let Some(l) = last {
            out.push_str(if i == l + 1 { "\n" } else { GAP });
        } else if i > 0 {
            out.push_str("…\n");
        }
        out.push_str(pieces[i]);
        last = Some(i);
    }
    if last.is_some_and(|l| l + 1 < pieces.len()) {
        out.push_str("\n…");
    }
    truncate_chars(&out, max_chars).to_string()
}

/// Pure: what the ranking of [`fit_body`] looks for: the fact, its quote and its match strings.
pub fn fact_key(f: &KeyFact) -> String {
    let mut key = f.fact.clone();
    for extra in f.quote.iter().chain(&f.matches) {
        key.push(' ');
        key.push_str(extra);
    }
    key
}

fn polarity(word: &str) -> Option<Verdict> {
    match word {
        "yes" | "true" => Some(Verdict::Yes),
        "no" | "false" => Some(Verdict::No),
        _ => None,
    }
}

fn verdict_of(v: &Value) -> Option<Verdict> {
    match v {
        Value::Bool(true) => Some(Verdict::Yes),
        Value::Bool(false) => Some(Verdict::No),
        Value::String(s) => polarity(s.trim().to_lowercase().as_str()),
        _ => None,
    }
}

/// Pure: the verdict in a judge's answer, read tolerantly: a JSON `stated` field (boolean or
/// "yes"/"no"), else the first yes/no/true/false after the word `stated`, else the answer's first
/// word when it is one of those, else the only polarity the answer uses. Anything else, or both
/// polarities with nothing to choose between them, is [`Verdict::Unknown`].
pub fn parse_verdict(answer: &str) -> Verdict {
    parse_verdict_as(answer, "stated")
}

/// Pure: [`parse_verdict`] with another field name (`supported` for the claim judge).
pub fn parse_verdict_as(answer: &str, field: &str) -> Verdict {
    if let Ok(Value::Object(o)) = extract_json_object(answer)
        && let Some(v) = o.iter().find_map(|(k, v)| {
            k.eq_ignore_ascii_case(field)
                .then(|| verdict_of(v))
                .flatten()
        })
    {
        return v;
    }
    let lower = answer.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if let Some(at) = words.iter().position(|w| *w == field)
        && let Some(v) = words[at + 1..].iter().find_map(|w| polarity(w))
    {
        return v;
    }
    if let Some(v) = words.first().and_then(|w| polarity(w)) {
        return v;
    }
    let mut seen = words.iter().filter_map(|w| polarity(w));
    match seen.next() {
        Some(v) if seen.all(|other| other == v) => v,
        _ => Verdict::Unknown,
    }
}

/// The answer's schema, `{"stated": boolean}`: servers with `jsonMode` constrain decoding to it.
pub fn verdict_schema() -> JsonSchema {
    JsonSchema {
        name: "verdict".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {"stated": {"type": "boolean"}},
            "required": ["stated"],
            "additionalProperties": false
        }),
        strict: true,
    }
}

/// Asks `model` whether `body` states `fact`: the verdict ([`Verdict::Unknown`] for an answer
/// that cannot be read) and what the call cost, or `None` and the failed call's bill when the
/// call itself failed (the fact stays unjudged, so a rerun asks again).
pub async fn judge_fact(
    model: &dyn ChatModel,
    settings: &JudgeSettings,
    fact: &KeyFact,
    body: &str,
) -> (Option<Verdict>, Usage) {
    let report = fit_body(body, &fact_key(fact), body_chars(settings, &fact.fact));
    let request = ChatRequest {
        messages: judge_messages(&fact.fact, &report),
        tools: Vec::new(),
        json_mode: settings.json_mode,
        // The OpenAI client asks again in json_object mode when a server refuses the schema.
        json_schema: settings.json_mode.then(verdict_schema),
        max_tokens: settings.max_tokens(),
        purpose: CallPurpose::Classify,
    };
    match model.chat(request).await {
        Ok(answer) => (Some(parse_verdict(&answer.content)), answer.usage),
        Err(e) => {
            tracing::warn!(error = %e, "judge call failed");
            (None, e.billed())
        }
    }
}

/// Pure: whether a result still lacks a verdict on some key fact or on some cited claim (its
/// claims are not yet listed, or a call about one failed).
pub fn needs_judge(r: &QuestionResult) -> bool {
    r.facts.iter().any(|f| f.judge.is_none()) || claims::needs_claim_judge(r)
}

/// Pure: records verdicts (one per fact of `r`, in order; missing ones stay unjudged) and what
/// they cost, and recounts the judge's totals of `r`.
pub fn record_verdicts(r: &mut QuestionResult, verdicts: &[Option<Verdict>], spend: JudgeSpend) {
    for (f, v) in r.facts.iter_mut().zip(verdicts) {
        if v.is_some() {
            f.judge = *v;
        }
    }
    let mut total = r.judge_spend.unwrap_or_default();
    total.add(&spend);
    r.judge_spend = Some(total);
    recount_verdicts(r);
}

/// Pure: recounts the judge's totals of `r` from its facts' verdicts (how many say stated, how
/// many agree with the string match).
pub fn recount_verdicts(r: &mut QuestionResult) {
    let judged: Vec<&FactResult> = r.facts.iter().filter(|f| f.judge.is_some()).collect();
    r.key_facts_judged = Some(n(judged
        .iter()
        .filter(|f| f.judge == Some(Verdict::Yes))
        .count()));
    r.judge_agreement = Some(n(judged
        .iter()
        .filter(|f| f.judge.is_some_and(|v| agrees(v, f.found)))
        .count()));
}

/// Judges every fact of `r` that has no verdict yet against `body` (the report text the string
/// match read; `None` when there is none, which is a `no` without a model call) and records the
/// verdicts and their cost in `r`. The run's own tokens and cost are left alone. Returns how
/// many calls failed (their facts stay unjudged).
pub async fn judge_result(
    model: &dyn ChatModel,
    settings: &JudgeSettings,
    q: &Question,
    body: Option<&str>,
    r: &mut QuestionResult,
) -> usize {
    let mut failed = 0;
    let mut verdicts = Vec::with_capacity(r.facts.len());
    let mut spend = JudgeSpend::default();
    for (i, f) in r.facts.iter().enumerate() {
        if f.judge.is_some() {
            verdicts.push(None);
            continue;
        }
        let Some(fact) = q.key_facts.get(i).filter(|k| k.fact == f.fact) else {
            // The question set changed since this result was scored: leave it unjudged.
            verdicts.push(None);
            continue;
        };
        let verdict = match body.map(str::trim).filter(|b| !b.is_empty()) {
            None => Some(Verdict::No),
            Some(body) => {
                let (v, usage) = judge_fact(model, settings, fact, body).await;
                spend.calls += 1;
                spend.input_tokens += usage.input_tokens;
                spend.output_tokens += usage.output_tokens;
                spend.cost_pico_usd += usage.cost_pico_usd;
                failed += usize::from(v.is_none());
                v
            }
        };
        verdicts.push(verdict);
    }
    record_verdicts(r, &verdicts, spend);
    failed
}

#[cfg(test)]
mod tests;
