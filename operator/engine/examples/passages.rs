//! What a researcher's model is shown of a page for a task: the extracted Markdown, split into
//! passages, ranked with BM25, and the selection within `pageCharsForModel`.
//!
//! `cargo run -p quarry-engine --example passages -- PAGE.html "the task" [CHARS] [--all] [--md]`
//! (`--all` also prints every passage with its score, `--md` the extracted Markdown).

use quarry_engine::research::reading::passages::{rank, select, split};
use quarry_engine::scrape::extract_markdown;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(task)) = (args.first(), args.get(1)) else {
        eprintln!("usage: passages PAGE.html \"task\" [CHARS] [--all]");
        return std::process::ExitCode::from(2);
    };
    let chars = args
        .get(2)
        .and_then(|c| c.parse().ok())
        .unwrap_or(1500usize);
    let html = match std::fs::read_to_string(path) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{path}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let page = extract_markdown(&html, "");
    if args.iter().any(|a| a == "--md") {
        println!("{}\n=====================================", page.markdown);
    }
    if args.iter().any(|a| a == "--all") {
        let passages = split(&page.markdown);
        let scores = rank(&passages, task);
        for (p, s) in passages.iter().zip(&scores) {
            println!(
                "--- #{} {:?} score {s:.2} [{}]\n{}",
                p.index,
                p.kind,
                p.heading_path.join(" › "),
                p.text
            );
        }
        println!("=====================================");
    }
    let selection = select(&page.markdown, task, chars, &page.title);
    println!(
        "# {}\n(best score {:.2})\n\n{}",
        page.title, selection.best_score, selection.text
    );
    std::process::ExitCode::SUCCESS
}
