//! The claim judge of `quarry eval --judge`: each cited claim of a run is put to the judge model
//! with the page it cites, asking whether the page supports it. Its verdicts sit beside the run's
//! own support check, so citation precision is reported by both, and every claim on which they
//! disagree is printed.
//!
//! Everything but [`judge_claim`] and [`judge_claims`] is pure; those two talk to the model only
//! through [`ChatModel`], so tests script it.

use std::collections::{BTreeMap, BTreeSet};

use quarry_engine::llm::{CallPurpose, ChatModel, ChatRequest, JsonSchema, Message, Usage};
use quarry_engine::research::writing::links::normalize_url;
use serde_json::Value;

use super::{JudgeSettings, fit_body, parse_verdict_as};
use crate::eval::external::PageText;
use crate::eval::score::{ClaimVerdict, JudgeControl, JudgeSpend, QuestionResult, Verdict, n};

/// Characters of the cited page shown to the judge: the sentences sharing the most words with
/// the claim. Small, so one call stays a few seconds on 2 cores; the run's check read the page.
pub const CLAIM_PASSAGE_CHARS: usize = 1600;

const SYSTEM: &str = "You check whether a source supports a claim. Answer with one JSON object and nothing else: {\"supported\": true} if the source says what the claim says (in any wording), {\"supported\": false} if it does not say it or says something else.";

fn user_prompt(claim: &str, source: &str) -> String {
    format!(
        "Claim: {claim}\n\nSource:\n<<<\n{source}\n>>>\n\nDoes the source support the claim? Answer {{\"supported\": true}} or {{\"supported\": false}}."
    )
}

/// Pure: the judge's messages for one claim and the part of its page fitted with [`source_text`].
pub fn claim_messages(claim: &str, source: &str) -> Vec<Message> {
    vec![
        Message::system(SYSTEM),
        Message::user(user_prompt(claim, source)),
    ]
}

/// Pure: what the judge reads of `page` for `claim`: its title, then the sentences sharing the
/// most words with the claim, at most [`CLAIM_PASSAGE_CHARS`] characters and never more than the
/// judge's window holds.
pub fn source_text(settings: &JudgeSettings, claim: &str, page: &PageText) -> String {
    let fixed = SYSTEM.chars().count() + user_prompt(claim, "").chars().count();
    let room = settings
        .prompt_chars()
        .saturating_sub(fixed)
        .min(CLAIM_PASSAGE_CHARS);
    let text = format!("{}\n{}", page.title.trim(), page.text);
    fit_body(&text, claim, room)
}

/// The answer's schema, `{"supported": boolean}`.
pub fn supported_schema() -> JsonSchema {
    JsonSchema {
        name: "support".into(),
        schema: serde_json::json!({
            "type": "object",
            "properties": {"supported": {"type": "boolean"}},
            "required": ["supported"],
            "additionalProperties": false
        }),
        strict: true,
    }
}

/// Pure: the cited claims of a run's `findings.json` (`claims[].claim`, `.url`, `.supported`),
/// not yet judged.
pub fn findings_claims(findings: &Value) -> Vec<ClaimVerdict> {
    findings["claims"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some(ClaimVerdict {
                claim: c["claim"].as_str()?.to_string(),
                url: c["url"].as_str()?.to_string(),
                supported: c["supported"].as_bool().unwrap_or(false),
                judge: None,
                verbatim: false,
            })
        })
        .collect()
}

/// Pure: whether `r` has cited claims the judge has not given a verdict on: none listed yet, or
/// a call about one failed.
pub fn needs_claim_judge(r: &QuestionResult) -> bool {
    r.claims > 0
        && (n(r.claim_verdicts.len()) != r.claims
            || r.claim_verdicts.iter().any(|c| c.judge.is_none()))
}

/// Pure: the claims of `r` to judge: `listed` (from the run's findings) with the verdicts `r`
/// already holds for the same claim and URL kept.
pub fn merge_claims(r: &QuestionResult, listed: Vec<ClaimVerdict>) -> Vec<ClaimVerdict> {
    listed
        .into_iter()
        .map(|mut c| {
            if let Some(old) = r
                .claim_verdicts
                .iter()
                .find(|old| old.claim == c.claim && old.url == c.url)
            {
                c.judge = old.judge;
                c.verbatim = old.verbatim;
            }
            c
        })
        .collect()
}

/// Pure: the words of `text`, lower-cased and joined by single spaces: what
/// [`states_verbatim`] compares, so Markdown's `*`, backticks, quotes and line breaks do not
/// count.
fn word_run(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Fewest words a claim needs for [`states_verbatim`] to count it: "The default is" alone is on
/// every reference page.
const VERBATIM_MIN_WORDS: usize = 4;

/// Pure: whether `page` states `claim` word for word: its words (up to a cut, `…`) run in the
/// same order in the page's text. Such a claim is a copy of what the page says, so the page
/// supports it; the 1.5B judge, shown one sentence without the entry it belongs to, answered
/// "no" to copies such as "*abs_tol* must be at least zero." from `math.isclose`. A claim
/// that labels a quote (`concurrently: “This option may be faster …”`) is a copy when the
/// quote is, and the page names the label.
pub fn states_verbatim(claim: &str, page: &PageText) -> bool {
    let page_words = format!(" {} ", word_run(&format!("{}\n{}", page.title, page.text)));
    let copied = |text: &str| {
        let kept = text.split('…').next().unwrap_or(text);
        let words = word_run(kept);
        words.split(' ').count() >= VERBATIM_MIN_WORDS && page_words.contains(&format!(" {words} "))
    };
    if copied(claim) {
        return true;
    }
    match claim.split_once('“') {
        Some((label, rest)) => {
            let quote = rest.split('”').next().unwrap_or(rest);
            let label = word_run(label);
            copied(quote) && (label.is_empty() || page_words.contains(&format!(" {label} ")))
        }
        None => false,
    }
}

/// Asks `model` whether `page` supports `claim`. A page that could not be read supports
/// nothing: `no` without a call. `None` and the failed call's bill when the call failed.
pub async fn judge_claim(
    model: &dyn ChatModel,
    settings: &JudgeSettings,
    claim: &str,
    page: Option<&PageText>,
) -> (Option<Verdict>, Usage, bool) {
    let Some(page) = page else {
        return (Some(Verdict::No), Usage::default(), false);
    };
    let request = ChatRequest {
        messages: claim_messages(claim, &source_text(settings, claim, page)),
        tools: Vec::new(),
        json_mode: settings.json_mode,
        json_schema: settings.json_mode.then(supported_schema),
        max_tokens: settings.max_tokens(),
        purpose: CallPurpose::Classify,
    };
    match model.chat(request).await {
        Ok(answer) => (
            Some(parse_verdict_as(&answer.content, "supported")),
            answer.usage,
            true,
        ),
        Err(e) => {
            tracing::warn!(error = %e, "claim judge call failed");
            (None, e.billed(), true)
        }
    }
}

/// Judges every claim of `r.claim_verdicts` without a verdict against its page in `pages`
/// (keyed by [`normalize_url`] without fragment; a missing page supports nothing) and adds the
/// calls to `r`'s judge spend. A claim whose page's server could not be reached at all
/// (`unreachable`: the corpus server is down, not the page missing) stays unjudged: judging
/// it "no" gave a rerun of the judge, after the docs server had stopped, precision 0.00 with no
/// call made. Returns how many claims stay unjudged (failed calls and unreachable pages).
pub async fn judge_claims(
    model: &dyn ChatModel,
    settings: &JudgeSettings,
    r: &mut QuestionResult,
    pages: &BTreeMap<String, PageText>,
    unreachable: &BTreeSet<String>,
) -> usize {
    let mut spend = JudgeSpend::default();
    let mut failed = 0;
    for c in r.claim_verdicts.iter_mut().filter(|c| c.judge.is_none()) {
        let key = page_key(&c.url);
        if unreachable.contains(&key) {
            failed += 1;
            continue;
        }
        let page = pages.get(&key);
        if page.is_some_and(|p| states_verbatim(&c.claim, p)) {
            c.judge = Some(Verdict::Yes);
            c.verbatim = true;
            continue;
        }
        let (v, usage, called) = judge_claim(model, settings, &c.claim, page).await;
        bill(&mut spend, &usage, called);
        failed += usize::from(v.is_none());
        c.judge = v;
    }
    if r.judge_control.as_ref().is_none_or(|c| c.judge.is_none()) {
        let control = r.claim_verdicts.iter().find_map(|c| {
            let page = pages.get(&page_key(&c.url))?;
            Some((falsified(&c.claim, page)?, c.url.clone(), page))
        });
        if let Some((claim, url, page)) = control {
            let (v, usage, called) = judge_claim(model, settings, &claim, Some(page)).await;
            bill(&mut spend, &usage, called);
            failed += usize::from(v.is_none());
            r.judge_control = Some(JudgeControl {
                claim,
                url,
                judge: v,
            });
        }
    }
    let mut total = r.judge_spend.unwrap_or_default();
    total.add(&spend);
    r.judge_spend = Some(total);
    failed
}

/// Adds one call's bill to `spend`, when a call was made.
fn bill(spend: &mut JudgeSpend, usage: &Usage, called: bool) {
    if called {
        spend.calls += 1;
        spend.input_tokens += usage.input_tokens;
        spend.output_tokens += usage.output_tokens;
        spend.cost_pico_usd += usage.cost_pico_usd;
    }
}

/// Pure: `claim` made false by changing its last number to one its page does not hold
/// ("The default maxsize of functools.lru_cache is 128." → "... is 259."), or `None` when it
/// states no number standing alone (versions such as "3.11", names such as `serial4`, are
/// left as they are). A judge that says yes to such a control cannot tell a claim its page
/// supports from one that only shares its words; [`judge_claims`] asks it one per question.
pub fn falsified(claim: &str, page: &PageText) -> Option<String> {
    let on_page = format!(" {} ", word_run(&format!("{}\n{}", page.title, page.text)));
    let bytes = claim.as_bytes();
    let mut numbers = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let before = claim[..start].chars().next_back();
        let after = claim[i..].chars().next();
        let after_next = claim[i..].chars().nth(1);
        let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let dotted = |c: Option<char>, next: Option<char>| {
            matches!(c, Some('.' | ',')) && next.is_some_and(|n| n.is_ascii_digit())
        };
        let before_prev = claim[..start].chars().rev().nth(1);
        if !glued(before)
            && !glued(after)
            && !dotted(after, after_next)
            && !dotted(before, before_prev)
        {
            numbers.push((start, i));
        }
    }
    let &(start, end) = numbers.last()?;
    let n: u64 = claim[start..end].parse().ok()?;
    [n * 2 + 3, n * 3 + 7, n + 1000]
        .into_iter()
        .map(|m| m.to_string())
        .find(|m| !on_page.contains(&format!(" {m} ")))
        .map(|m| format!("{}{m}{}", &claim[..start], &claim[end..]))
}

/// Pure: the key of a cited page: its URL normalised, without fragment.
pub fn page_key(url: &str) -> String {
    normalize_url(url.split('#').next().unwrap_or(url))
}

/// Pure: one line per claim on which the judge and the run's check disagree, e.g.
/// `py-x: run check supported, judge not: "claim" (url)`.
pub fn disagreement_lines(results: &[QuestionResult]) -> Vec<String> {
    results
        .iter()
        .flat_map(|r| {
            r.claim_verdicts
                .iter()
                .filter(|c| c.disagrees())
                .map(|c| {
                    let (run, judge) = if c.supported {
                        ("supported", "not")
                    } else {
                        ("not supported", "supported")
                    };
                    format!(
                        "{}: run check {run}, judge {judge}: {:?} ({})",
                        r.id, c.claim, c.url
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests;
