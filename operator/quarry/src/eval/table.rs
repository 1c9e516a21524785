//! The eval's table and progress lines: pure rendering of scored results.

use super::score::*;
use quarry_engine::llm::format_pico_usd;

/// Pure: the FACTS cell: `2/3` for answerable questions; `honest`, `invented` or `answered`
/// (neither said it cannot answer nor cited anything) for no-answer ones; `-` for an external
/// question that did not finish.
pub fn facts_cell(r: &QuestionResult) -> String {
    match r.expect {
        Expect::Answer => format!("{}/{}", r.key_facts_found, r.key_facts),
        Expect::NoAnswer if r.outcome.reason.as_deref() == Some(NOT_FINISHED) => "-".into(),
        Expect::NoAnswer if r.invented == Some(true) => "invented".into(),
        Expect::NoAnswer if r.honest == Some(true) => "honest".into(),
        Expect::NoAnswer => "answered".into(),
    }
}

fn ratio3(a: u32, b: u32) -> Option<f64> {
    (b > 0).then(|| f64::from(a) / f64::from(b))
}

fn precision_cell(p: Option<f64>) -> String {
    p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}"))
}

/// Pure: the JUDGE cell: facts the judge says are stated, of the facts it judged (`-` when it
/// judged none; no-answer questions have no facts).
pub fn judge_cell(r: &QuestionResult) -> String {
    let judged = r.facts.iter().filter(|f| f.judge.is_some()).count();
    if judged == 0 {
        return "-".into();
    }
    let yes = r
        .facts
        .iter()
        .filter(|f| f.judge == Some(Verdict::Yes))
        .count();
    format!("{yes}/{judged}")
}

/// Pure: the AGREE cell: facts on which judge and string match agree, of the facts judged.
pub fn agree_cell(r: &QuestionResult) -> String {
    let judged: Vec<&FactResult> = r.facts.iter().filter(|f| f.judge.is_some()).collect();
    if judged.is_empty() {
        return "-".into();
    }
    let agree = judged
        .iter()
        .filter(|f| f.judge.is_some_and(|v| agrees(v, f.found)))
        .count();
    format!("{agree}/{}", judged.len())
}

/// Pure: the results table of `system` with the totals under it. The JUDGE and AGREE columns
/// appear when some fact was judged.
pub fn render_table(system: &str, results: &[QuestionResult], t: &Totals) -> String {
    let judged = t.judged_facts > 0;
    let mut headers = vec!["ID", "OUTCOME", "FACTS"];
    if judged {
        headers.extend(["JUDGE", "AGREE"]);
    }
    headers.extend([
        "PRECISION",
        "CITED-READ",
        "UNSUPPORTED",
        "INVENTED-URLS",
        "TOKENS(IN/OUT)",
        "COST",
        "SECONDS",
    ]);
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|r| {
            let mut row = vec![r.id.clone(), r.outcome.label(), facts_cell(r)];
            if judged {
                row.extend([judge_cell(r), agree_cell(r)]);
            }
            row.extend([
                precision_cell(r.citation_precision),
                format!("{}/{}", r.cited_fetched, r.cited_urls),
                r.unsupported_claims.to_string(),
                r.removed_citations.to_string(),
                format!("{}/{}", r.input_tokens, r.output_tokens),
                format!("${}", r.cost_usd),
                format!("{:.0}", r.wall_seconds),
            ]);
            row
        })
        .collect();
    let mut out = format!("system: {system}\n");
    out.push_str(&crate::cli::table::render(&headers, &rows));
    let pct = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{:.0}%", x * 100.0));
    out.push_str(&format!(
        "\n{} questions: {} completed, {} NoEvidence, {} failed otherwise, {} runaways (time limit)\n",
        t.questions, t.completed, t.no_evidence, t.failed, t.runaways
    ));
    out.push_str(&format!(
        "answerable: {}/{} with every key fact ({}), mean share of facts found {}, {}/{} facts ({} in the reports' own words, the rest only in passages they quote)\n",
        t.all_facts_found,
        t.answerable,
        pct(t.all_facts_share),
        pct(t.mean_fact_share),
        t.key_facts_found,
        t.key_facts,
        t.key_facts_stated
    ));
    if judged {
        out.push_str(&format!(
            "judge: {}/{} judged facts stated (string match: {}/{}), agreement {}/{}, {} unknown\n",
            t.key_facts_judged,
            t.judged_facts,
            t.key_facts_found_of_judged,
            t.judged_facts,
            t.judge_agreement,
            t.judged_facts,
            t.judge_unknown
        ));
    }
    out.push_str(&format!(
        "no-answer: {}/{} honest, {} invented an answer with citations\n",
        t.honest, t.no_answer, t.invented
    ));
    out.push_str(&format!(
        "citations: precision {} ({}/{} claims supported), {}/{} cited pages read, {} invented URLs\n",
        precision_cell(t.citation_precision),
        t.supported_claims,
        t.claims,
        t.cited_fetched,
        t.cited_urls,
        t.invented_urls
    ));
    if t.judged_claims > 0 {
        let d = t.claim_disagreements;
        out.push_str(&format!(
            "citations judged: precision by the judge {} ({}/{} claims, {} of them word for word on their page), by the run's check {} on the same claims; {d} disagreement{}, {} unknown\n",
            precision_cell(ratio3(t.judge_supported_claims, t.judged_claims)),
            t.judge_supported_claims,
            t.judged_claims,
            t.verbatim_claims,
            precision_cell(ratio3(t.run_supported_of_judged, t.judged_claims)),
            if d == 1 { "" } else { "s" },
            t.claims_judge_unknown
        ));
        if t.judge_controls > 0 {
            out.push_str(&format!(
                "judge controls: the judge rejected {}/{} claims falsified by changing their number (its precision means little when it accepts them)\n",
                t.judge_controls_rejected, t.judge_controls
            ));
        }
        for line in super::judge::claims::disagreement_lines(results) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.push_str(&format!(
        "spend: {} input + {} output tokens, ${}, {:.0} s\n",
        t.input_tokens, t.output_tokens, t.cost_usd, t.wall_seconds
    ));
    if judged || t.judge_spend.calls > 0 {
        let j = &t.judge_spend;
        out.push_str(&format!(
            "judge spend (not in the spend above): {} calls, {} input + {} output tokens, ${}\n",
            j.calls,
            j.input_tokens,
            j.output_tokens,
            format_pico_usd(j.cost_pico_usd)
        ));
    }
    out
}

/// Pure: the stderr line for a finished question, e.g. `[3/58] py-json-decode … 41 s, 2/2 facts`.
pub fn progress_line(index: usize, of: usize, r: &QuestionResult) -> String {
    let score = match r.expect {
        Expect::Answer => format!("{} facts", facts_cell(r)),
        Expect::NoAnswer => facts_cell(r),
    };
    let mut line = format!(
        "[{index}/{of}] {} … {:.0} s, {score}, {}",
        r.id,
        r.wall_seconds,
        r.outcome.label()
    );
    if r.wall_seconds > SLOW_RUN_SECONDS && r.model_calls > 0 {
        // Why a run took long: on a small local model nearly always the model calls.
        line.push_str(&format!(
            "; over {} min: {} model calls took {:.0} s (summed)",
            SLOW_RUN_SECONDS as u64 / 60,
            r.model_calls,
            r.model_seconds
        ));
    }
    line
}

/// A run longer than this says in its progress line where the time went.
pub const SLOW_RUN_SECONDS: f64 = 300.0;

/// Pure: the progress line of a question whose result is already on disk.
pub fn skipped_line(index: usize, of: usize, id: &str) -> String {
    format!("[{index}/{of}] {id} skipped: results/{id}.json exists")
}
