//! The totals of a question set's results: what `eval.json` and the table report.

use serde::{Deserialize, Serialize};

use super::*;

/// Totals over every scored question.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub questions: u32,
    pub completed: u32,
    pub no_evidence: u32,
    /// Failed for another reason, or cancelled.
    pub failed: u32,
    pub answerable: u32,
    /// Answerable questions whose report has every key fact.
    pub all_facts_found: u32,
    /// `allFactsFound / answerable`.
    pub all_facts_share: Option<f64>,
    /// Mean over answerable questions of `keyFactsFound / keyFacts`.
    pub mean_fact_share: Option<f64>,
    pub key_facts_found: u32,
    /// Of those, found in the reports' own words, not only in passages they quote.
    #[serde(default)]
    pub key_facts_stated: u32,
    pub key_facts: u32,
    /// Key facts the judge gave a verdict on (`--judge`).
    pub judged_facts: u32,
    /// Of those, facts the judge says are stated.
    pub key_facts_judged: u32,
    /// Of those, facts the string match found (the same facts, for comparison).
    pub key_facts_found_of_judged: u32,
    /// Of those, facts on which the judge and the string match agree.
    pub judge_agreement: u32,
    /// Of those, facts whose verdict is `unknown`.
    pub judge_unknown: u32,
    /// What the judge spent, apart from the runs' tokens and cost.
    pub judge_spend: JudgeSpend,
    /// Cited claims the judge gave a verdict on (`--judge`).
    #[serde(default)]
    pub judged_claims: u32,
    /// Of those, claims the judge says their cited page supports.
    #[serde(default)]
    pub judge_supported_claims: u32,
    /// Of those, claims the run's own check called supported (the same claims, for comparison).
    #[serde(default)]
    pub run_supported_of_judged: u32,
    /// Of those, claims whose verdict is `unknown`.
    #[serde(default)]
    pub claims_judge_unknown: u32,
    /// Of those, claims on which the judge (yes or no) and the run's check disagree.
    #[serde(default)]
    pub claim_disagreements: u32,
    /// Of those, claims their page states word for word: judged yes without a model call.
    #[serde(default)]
    pub verbatim_claims: u32,
    /// Falsified claims put to the judge as controls ([`JudgeControl`]), and those it rejected.
    #[serde(default)]
    pub judge_controls: u32,
    #[serde(default)]
    pub judge_controls_rejected: u32,
    /// `judgeSupportedClaims / judgedClaims`: citation precision by the judge.
    #[serde(default)]
    pub judge_precision: Option<f64>,
    pub no_answer: u32,
    pub honest: u32,
    pub invented: u32,
    /// Runs stopped by their time limit.
    pub runaways: u32,
    pub claims: u32,
    pub supported_claims: u32,
    pub unsupported_claims: u32,
    /// `supportedClaims / claims` over all questions.
    pub citation_precision: Option<f64>,
    pub cited_urls: u32,
    pub cited_fetched: u32,
    /// Citations removed as pages the runs neither read nor saw: invented URLs.
    pub invented_urls: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: String,
    pub cost_pico_usd: u64,
    pub wall_seconds: f64,
}

/// Pure: whether a verdict agrees with the string match (`unknown` never does).
pub fn agrees(v: Verdict, found: bool) -> bool {
    matches!((v, found), (Verdict::Yes, true) | (Verdict::No, false))
}

fn ratio(a: u32, b: u32) -> Option<f64> {
    (b > 0).then(|| round3(f64::from(a) / f64::from(b)))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Pure: the totals of `results`.
pub fn totals(results: &[QuestionResult]) -> Totals {
    let mut t = Totals::default();
    let mut share_sum = 0.0;
    for r in results {
        t.questions += 1;
        if r.outcome.is_completed() {
            t.completed += 1;
        } else if r.outcome.is_no_evidence() {
            t.no_evidence += 1;
        } else {
            t.failed += 1;
        }
        match r.expect {
            Expect::Answer => {
                t.answerable += 1;
                t.key_facts_found += r.key_facts_found;
                t.key_facts_stated += r.key_facts_stated;
                t.key_facts += r.key_facts;
                if r.key_facts > 0 {
                    share_sum += f64::from(r.key_facts_found) / f64::from(r.key_facts);
                    if r.key_facts_found == r.key_facts {
                        t.all_facts_found += 1;
                    }
                }
                for f in &r.facts {
                    let Some(v) = f.judge else { continue };
                    t.judged_facts += 1;
                    t.key_facts_judged += u32::from(v == Verdict::Yes);
                    t.key_facts_found_of_judged += u32::from(f.found);
                    t.judge_agreement += u32::from(agrees(v, f.found));
                    t.judge_unknown += u32::from(v == Verdict::Unknown);
                }
            }
            Expect::NoAnswer => {
                t.no_answer += 1;
                t.honest += u32::from(r.honest == Some(true));
                t.invented += u32::from(r.invented == Some(true));
            }
        }
        for c in &r.claim_verdicts {
            let Some(v) = c.judge else { continue };
            t.judged_claims += 1;
            t.judge_supported_claims += u32::from(v == Verdict::Yes);
            t.run_supported_of_judged += u32::from(c.supported);
            t.claims_judge_unknown += u32::from(v == Verdict::Unknown);
            t.claim_disagreements += u32::from(c.disagrees());
            t.verbatim_claims += u32::from(c.verbatim);
        }
        if let Some(v) = r.judge_control.as_ref().and_then(|c| c.judge) {
            t.judge_controls += 1;
            t.judge_controls_rejected += u32::from(v == Verdict::No);
        }
        t.runaways += u32::from(r.runaway);
        if let Some(s) = &r.judge_spend {
            t.judge_spend.add(s);
        }
        t.claims += r.claims;
        t.supported_claims += r.supported_claims;
        t.unsupported_claims += r.unsupported_claims;
        t.cited_urls += r.cited_urls;
        t.cited_fetched += r.cited_fetched;
        t.invented_urls += r.removed_citations;
        t.input_tokens += r.input_tokens;
        t.output_tokens += r.output_tokens;
        t.cost_pico_usd += r.cost_pico_usd;
        t.wall_seconds += r.wall_seconds;
    }
    t.all_facts_share = ratio(t.all_facts_found, t.answerable);
    t.mean_fact_share = (t.answerable > 0).then(|| round3(share_sum / f64::from(t.answerable)));
    t.citation_precision = ratio(t.supported_claims, t.claims);
    t.judge_precision = ratio(t.judge_supported_claims, t.judged_claims);
    t.cost_usd = format_pico_usd(t.cost_pico_usd);
    t.wall_seconds = (t.wall_seconds * 10.0).round() / 10.0;
    t
}
