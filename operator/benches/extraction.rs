//! Extraction quality and speed on `shared/bench/article-extraction/` (see benches/README.md).
//!
//! Run with `cargo bench -p quarry --bench extraction`. The directory is found by walking up from
//! the crate, or named by `QUARRY_EXTRACTION_BENCH`. Every candidate runs over the same pages in
//! one process, so the whole-page baselines are measured under the same conditions.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use quarry::scrape::extract::{extract_markdown, strip_markdown, whole_page_markdown};
use quarry::scrape::metric::{PageScore, score_page, summarize};

/// One labelled page.
struct Sample {
    id: String,
    url: String,
    html: String,
    truth: String,
}

/// A named extractor returning text to be scored.
type Candidate = (&'static str, fn(&str, &str) -> String);

fn find_bench_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("QUARRY_EXTRACTION_BENCH") {
        return Some(PathBuf::from(dir));
    }
    let start = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    start
        .ancestors()
        .map(|a| a.join("shared/bench/article-extraction"))
        .find(|p| p.join("ground-truth.json").is_file())
}

fn load(dir: &Path) -> Result<Vec<Sample>, Box<dyn std::error::Error>> {
    let truth: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ground-truth.json"))?)?;
    let mut out = Vec::new();
    for (id, v) in truth {
        let gz = std::fs::read(dir.join("html").join(format!("{id}.html.gz")))?;
        let mut html = String::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut html)?;
        out.push(Sample {
            url: v["url"].as_str().unwrap_or_default().to_string(),
            truth: v["articleBody"].as_str().unwrap_or_default().to_string(),
            id,
            html,
        });
    }
    Ok(out)
}

fn htmd_whole_raw(html: &str, _url: &str) -> String {
    strip_markdown(&htmd::convert(html).unwrap_or_default())
}

fn htmd_whole_skipping(html: &str, _url: &str) -> String {
    strip_markdown(&whole_page_markdown(html))
}

fn trafilatura_text(html: &str, _url: &str) -> String {
    rs_trafilatura::extract(html)
        .map(|r| r.content_text)
        .unwrap_or_default()
}

fn trafilatura_markdown(html: &str, url: &str) -> String {
    let o = rs_trafilatura::Options {
        output_markdown: true,
        url: Some(url.to_string()),
        ..Default::default()
    };
    let md = rs_trafilatura::extract_with_options(html, &o)
        .ok()
        .and_then(|r| r.content_markdown)
        .unwrap_or_default();
    strip_markdown(&md)
}

fn trafilatura_html_htmd(html: &str, _url: &str) -> String {
    let h = rs_trafilatura::extract(html)
        .ok()
        .and_then(|r| r.content_html)
        .unwrap_or_default();
    strip_markdown(&htmd::convert(&h).unwrap_or_default())
}

fn smoothie(html: &str, url: &str, mode: dom_smoothie::TextMode) -> Option<dom_smoothie::Article> {
    let cfg = dom_smoothie::Config {
        text_mode: mode,
        ..Default::default()
    };
    let url = url::Url::parse(url).ok().map(|u| u.to_string());
    let mut r = dom_smoothie::Readability::new(html, url.as_deref(), Some(cfg)).ok()?;
    r.parse().ok()
}

fn smoothie_text(html: &str, url: &str) -> String {
    smoothie(html, url, dom_smoothie::TextMode::Raw)
        .map(|a| a.text_content.to_string())
        .unwrap_or_default()
}

fn smoothie_markdown(html: &str, url: &str) -> String {
    let md = smoothie(html, url, dom_smoothie::TextMode::Markdown)
        .map(|a| a.text_content.to_string())
        .unwrap_or_default();
    strip_markdown(&md)
}

fn smoothie_html_htmd(html: &str, url: &str) -> String {
    let h = smoothie(html, url, dom_smoothie::TextMode::Raw)
        .map(|a| a.content.to_string())
        .unwrap_or_default();
    strip_markdown(&htmd::convert(&h).unwrap_or_default())
}

fn quarry_pipeline(html: &str, url: &str) -> String {
    strip_markdown(&extract_markdown(html, url).markdown)
}

fn main() {
    let Some(dir) = find_bench_dir() else {
        eprintln!("article-extraction bench data not found; set QUARRY_EXTRACTION_BENCH");
        return;
    };
    let samples = match load(&dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot load {}: {e}", dir.display());
            std::process::exit(1);
        }
    };
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let candidates: Vec<Candidate> = vec![
        ("htmd whole page (baseline)", htmd_whole_raw),
        (
            "htmd whole page, non-content tags skipped",
            htmd_whole_skipping,
        ),
        ("rs-trafilatura text", trafilatura_text),
        ("rs-trafilatura Markdown", trafilatura_markdown),
        ("rs-trafilatura HTML -> htmd", trafilatura_html_htmd),
        ("dom_smoothie text", smoothie_text),
        ("dom_smoothie Markdown", smoothie_markdown),
        ("dom_smoothie HTML -> htmd", smoothie_html_htmd),
        ("quarry extract_markdown (chosen)", quarry_pipeline),
    ];
    let worst = std::env::var("QUARRY_BENCH_WORST").ok();
    println!("{} pages from {}", samples.len(), dir.display());
    println!("| candidate | F1 | precision | recall | accuracy | ms/page |");
    println!("|---|---|---|---|---|---|");
    for (name, f) in candidates {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let mut scores: Vec<(PageScore, &Sample)> = Vec::with_capacity(samples.len());
        let start = Instant::now();
        // Debugging aid: QUARRY_BENCH_DUMP=<part of a candidate name> writes its outputs to
        // $TMPDIR/quarry-extraction-dump/<page id>.<candidate>.txt (timings then include I/O).
        let dump = std::env::var("QUARRY_BENCH_DUMP")
            .ok()
            .filter(|d| name.contains(d.as_str()))
            .map(|_| std::env::temp_dir().join("quarry-extraction-dump"));
        for s in &samples {
            let predicted = f(&s.html, &s.url);
            if let Some(dir) = &dump {
                let file = format!(
                    "{}.{}.txt",
                    s.id,
                    name.replace(|c: char| !c.is_alphanumeric(), "_")
                );
                let written = std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(dir.join(file), &predicted));
                if let Err(e) = written {
                    eprintln!("cannot dump to {}: {e}", dir.display());
                }
            }
            scores.push((score_page(&s.truth, &predicted), s));
        }
        let ms = start.elapsed().as_secs_f64() * 1000.0 / samples.len() as f64;
        let only_scores: Vec<PageScore> = scores.iter().map(|(p, _)| *p).collect();
        let sum = summarize(&only_scores);
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} |",
            sum.f1, sum.precision, sum.recall, sum.accuracy, ms
        );
        if worst.as_deref().is_some_and(|w| name.contains(w)) {
            scores.sort_by(|a, b| (a.0.tp).total_cmp(&b.0.tp));
            for (p, s) in scores.iter().take(10) {
                eprintln!(
                    "  tp={:.2} fp={:.2} fn={:.2} {} {}",
                    p.tp, p.fp, p.fn_, s.id, s.url
                );
            }
        }
    }
}
