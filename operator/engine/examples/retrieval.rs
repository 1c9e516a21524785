//! Evidence recall of the guided researcher, without a model: for each answerable question of a
//! question set (tests/eval/README.md), the researcher searches and reads through a live SearXNG,
//! and a model stand-in records the numbered passages it would be shown. A key fact counts as
//! shown when its verbatim quote is in those passages, and as matched when one of its match
//! strings is. This measures the deterministic half of an answer in seconds per question, so
//! search, scoring and passage selection can be tuned without running the model. It also counts
//! the questions whose pages would all be judged off the question (the run would end
//! NoEvidence): refusals of answerable questions, and the no-answer questions refused.
//!
//! `cargo run -p quarry-engine --example retrieval -- QUESTIONS.jsonl SEARX_URL [PAGE_CHARS] [--only a,b] [-v] [--show]`

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use quarry_engine::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, Usage};
use quarry_engine::research::agents::researcher::{
    ResearcherDeps, ResearcherSettings, UrlPool, run_researcher,
};
use quarry_engine::research::machine::state::{Limits, Mode, OutputKind, RunInput};
use quarry_engine::research::writing::grounded;
use quarry_engine::scrape::{FetchPolicy, HttpFetcher};
use quarry_engine::sources::searxng::SearxngGatherer;
use serde_json::Value;

/// Records the prompt of the grounded call and answers nothing (the report is then extractive).
#[derive(Default)]
struct Recorder {
    passages: Mutex<String>,
}

#[async_trait]
impl ChatModel for Recorder {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        if let Some(m) = request.messages.last()
            && m.content.contains("Passages:")
            && let Ok(mut p) = self.passages.lock()
        {
            *p = m.content.clone();
        }
        Ok(ChatResponse {
            content: String::new(),
            tool_calls: vec![],
            usage: Usage::default(),
            model: "recorder".into(),
            finish_reason: Some("stop".into()),
        })
    }
    fn context_window(&self) -> u64 {
        8192
    }
}

/// Lower case, Markdown emphasis, code marks, escapes and link targets dropped, whitespace collapsed.
fn norm(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    // "[text](url)" → "text"
    while let Some(i) = rest.find("](") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        rest = match tail.find(')') {
            Some(j) => &tail[j + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out.replace(['*', '`', '\\', '[', ']', '“', '”'], "")
        .replace(['’', '‘'], "'")
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(file), Some(searx)) = (args.first(), args.get(1)) else {
        eprintln!("usage: retrieval QUESTIONS.jsonl SEARX_URL [PAGE_CHARS] [--only a,b] [-v]");
        return std::process::ExitCode::from(2);
    };
    let page_chars = args
        .get(2)
        .and_then(|c| c.parse().ok())
        .unwrap_or(1500usize);
    let only: Vec<String> = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let verbose = args.iter().any(|a| a == "-v");
    let Ok(text) = std::fs::read_to_string(file) else {
        eprintln!("cannot read {file}");
        return std::process::ExitCode::FAILURE;
    };
    let (Ok(gatherer), Ok(fetcher)) = (
        SearxngGatherer::new(searx, Duration::from_secs(10)),
        HttpFetcher::new(FetchPolicy {
            allowed_hosts: vec!["127.0.0.1".into()],
            politeness_delay: Duration::ZERO,
            per_host_concurrency: 8,
            ..FetchPolicy::default()
        }),
    ) else {
        eprintln!("cannot build the search or fetch client");
        return std::process::ExitCode::FAILURE;
    };
    let (gatherer, fetcher) = (Arc::new(gatherer), Arc::new(fetcher));
    let (mut shown_total, mut matched_total, mut facts_total, mut first_total) = (0, 0, 0, 0);
    let (mut refused_total, mut no_answer_total, mut no_answer_refused) = (0, 0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(q) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let id = q["id"].as_str().unwrap_or_default();
        if !only.is_empty() && !only.iter().any(|o| o == id) {
            continue;
        }
        let answerable = q["expect"] == "answer";
        let recorder = Arc::new(Recorder::default());
        let deps = ResearcherDeps {
            model: recorder.clone(),
            gatherer: gatherer.clone(),
            fetcher: fetcher.clone(),
            pool: Arc::new(UrlPool::default()),
            settings: ResearcherSettings {
                page_chars,
                guided: Some(true),
                ..ResearcherSettings::default()
            },
            specialised: None,
        };
        let question = q["question"].as_str().unwrap_or_default();
        let input = RunInput {
            query: question.to_string(),
            context: None,
            mode: Mode::Quick,
            outputs: vec![OutputKind::Study],
            top_k: 5,
            limits: Limits::default(),
            approval: None,
            earlier: None,
        };
        let report = run_researcher(&deps, &input, 0, question, &[], None, &|_, _| {}).await;
        let passages = recorder
            .passages
            .lock()
            .map(|p| p.clone())
            .unwrap_or_default();
        // Every page read judged off the question (its passages matched nothing, or left out a
        // subject the question names): the run would end NoEvidence.
        let refused = report
            .as_ref()
            .is_ok_and(|r| r.fetched.iter().all(|f| r.irrelevant.contains(&f.url)));
        let why = report
            .as_ref()
            .ok()
            .and_then(|r| {
                r.markdown
                    .lines()
                    .find(|l| l.starts_with("The sources read"))
            })
            .unwrap_or("nothing on the pages matches")
            .to_string();
        if !answerable {
            no_answer_total += 1;
            no_answer_refused += usize::from(refused);
            println!(
                "{id}: no-answer, {}",
                if refused {
                    format!("refused ({why})")
                } else {
                    "ANSWERED from unrelated passages".to_string()
                }
            );
            if !refused && args.iter().any(|a| a == "--show") {
                println!("{passages}");
            }
            continue;
        }
        if refused {
            refused_total += 1;
            println!("{id}: REFUSED: {why}");
        }
        let shown = norm(&passages);
        // A JSON-mode model is asked first for one sentence per passage over the best
        // `EACH_PASSAGES` only; what it answers from is that head of the list.
        let head = format!("\n[{}] (", grounded::EACH_PASSAGES + 1);
        let first = norm(passages.split(head.as_str()).next().unwrap_or(&passages));
        let (mut s, mut m, mut s_first) = (0, 0, 0);
        let facts = q["keyFacts"].as_array().cloned().unwrap_or_default();
        let mut missing = Vec::new();
        for f in &facts {
            let quote = norm(f["quote"].as_str().unwrap_or_default());
            let matched = f["match"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|x| shown.contains(&norm(x)));
            s_first += usize::from(first.contains(&quote));
            if shown.contains(&quote) {
                s += 1;
            } else {
                let page = f["page"].as_str().unwrap_or_default();
                // Where the quote was lost: its page unread, cut from the page's selection, or
                // not among the passages numbered for the model.
                let why = match &report {
                    Ok(r) => match r.pages.iter().find(|p| p.url.ends_with(page)) {
                        None if r.irrelevant.iter().any(|u| u.ends_with(page)) => {
                            "page read, judged off-task"
                        }
                        None => "page not read",
                        Some(p) if !norm(&p.text).contains(&quote) => "not in the page's selection",
                        Some(_) => "not numbered",
                    },
                    Err(_) => "run failed",
                };
                missing.push(format!(
                    "[{why}] {} ({page})",
                    f["quote"].as_str().unwrap_or_default(),
                ));
            }
            m += usize::from(matched);
        }
        let read = match &report {
            Ok(r) => r
                .pages
                .iter()
                .map(|s| s.url.rsplit('/').next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
                .join(" "),
            Err(f) => format!("failed: {}", f.message),
        };
        println!(
            "{id}: quotes {s}/{} (first {}: {s_first}) match {m}/{} | read {read}",
            facts.len(),
            grounded::EACH_PASSAGES,
            facts.len()
        );
        if args.iter().any(|a| a == "--show") {
            println!("{passages}");
            if let Ok(r) = &report {
                println!("--- report\n{}", r.markdown);
            }
        }
        if verbose {
            for x in &missing {
                println!("    missing: {x}");
            }
        }
        shown_total += s;
        first_total += s_first;
        matched_total += m;
        facts_total += facts.len();
    }
    println!(
        "total: quotes shown {shown_total}/{facts_total} ({:.0}%; in the first {}: {first_total}), match strings {matched_total}/{facts_total} ({:.0}%)",
        100.0 * shown_total as f64 / facts_total.max(1) as f64,
        grounded::EACH_PASSAGES,
        100.0 * matched_total as f64 / facts_total.max(1) as f64
    );
    println!(
        "answerable questions refused (would end NoEvidence): {refused_total}; no-answer questions refused: {no_answer_refused}/{no_answer_total}"
    );
    std::process::ExitCode::SUCCESS
}
