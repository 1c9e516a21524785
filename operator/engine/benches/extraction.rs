//! Extraction quality and speed on a labelled set of real pages (see benches/README.md).
//!
//! Run with `cargo bench -p quarry --bench extraction`, or `scripts/bench-extraction.sh` to add
//! trafilatura 2.0.0 (Python) to the table. The directory is found by walking up from the crate,
//! or named by `QUARRY_EXTRACTION_BENCH`. Every candidate runs over the same pages in one process,
//! so the whole-page baselines are measured under the same conditions.
//!
//! Speed is the extraction alone (scoring is not timed), on one thread, as that thread's CPU time
//! (`/proc/thread-self/schedstat`), so pages per second are per core and other work on the machine
//! does not count. Each candidate makes `QUARRY_BENCH_PASSES` passes (default 3) and the fastest
//! counts. `QUARRY_PYTHON_EXTRACTION` names the JSON of `scripts/bench/trafilatura_extract.py`
//! (`texts` by page id, `seconds` of thread CPU time, measured the same way in Python); its texts
//! are scored here with the same metric code.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use quarry_engine::scrape::extract::{extract_markdown, strip_markdown, whole_page_markdown};
use quarry_engine::scrape::metric::{PageScore, score_page, summarize};

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

/// CPU time of the calling thread, in seconds: the first field of `/proc/thread-self/schedstat`
/// is the nanoseconds it ran.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Texts and timing of an extractor run outside this process (trafilatura in Python).
struct External {
    name: String,
    seconds: f64,
    texts: BTreeMap<String, String>,
}

fn load_external(path: &Path) -> Result<External, Box<dyn std::error::Error>> {
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    let texts = v["texts"]
        .as_object()
        .ok_or("no `texts` object")?
        .iter()
        .map(|(k, t)| (k.clone(), t.as_str().unwrap_or_default().to_string()))
        .collect();
    Ok(External {
        name: v["extractor"].as_str().unwrap_or("external").to_string(),
        seconds: v["seconds"].as_f64().ok_or("no `seconds`")?,
        texts,
    })
}

/// One row of the table.
struct Row {
    name: String,
    f1: f64,
    precision: f64,
    recall: f64,
    accuracy: f64,
    ms_per_page: f64,
}

fn print_row(r: &Row) {
    println!(
        "| {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {:.0} |",
        r.name,
        r.f1,
        r.precision,
        r.recall,
        r.accuracy,
        r.ms_per_page,
        1000.0 / r.ms_per_page
    );
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
    let passes: usize = std::env::var("QUARRY_BENCH_PASSES")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3)
        .max(1);
    let external = match std::env::var("QUARRY_PYTHON_EXTRACTION") {
        Ok(path) => match load_external(Path::new(&path)) {
            Ok(e) => Some(e),
            Err(e) => {
                eprintln!("cannot read {path}: {e}");
                std::process::exit(1);
            }
        },
        Err(_) => None,
    };
    println!(
        "{} pages from {}; fastest of {passes} passes, one thread",
        samples.len(),
        dir.display()
    );
    println!("| candidate | F1 | precision | recall | accuracy | CPU ms/page | pages/s per core |");
    println!("|---|---|---|---|---|---|---|");
    let mut rows: Vec<Row> = Vec::new();
    for (name, f) in candidates {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let mut scores: Vec<(PageScore, &Sample)> = Vec::with_capacity(samples.len());
        // Timed passes first (extraction only); the last pass's texts are scored.
        let mut fastest = f64::INFINITY;
        let mut texts: Vec<String> = Vec::new();
        for _ in 0..passes {
            let start = Instant::now();
            let cpu = thread_cpu_seconds();
            let out: Vec<String> = samples.iter().map(|s| f(&s.html, &s.url)).collect();
            // Without schedstat (not Linux), wall time stands in.
            let took = match (cpu, thread_cpu_seconds()) {
                (Some(a), Some(b)) => b - a,
                _ => start.elapsed().as_secs_f64(),
            };
            fastest = fastest.min(took);
            texts = out;
        }
        // Debugging aid: QUARRY_BENCH_DUMP=<part of a candidate name> writes its outputs to
        // $TMPDIR/quarry-extraction-dump/<page id>.<candidate>.txt (after the timed passes).
        let dump = std::env::var("QUARRY_BENCH_DUMP")
            .ok()
            .filter(|d| name.contains(d.as_str()))
            .map(|_| std::env::temp_dir().join("quarry-extraction-dump"));
        for (s, predicted) in samples.iter().zip(&texts) {
            if let Some(dir) = &dump {
                let file = format!(
                    "{}.{}.txt",
                    s.id,
                    name.replace(|c: char| !c.is_alphanumeric(), "_")
                );
                let written = std::fs::create_dir_all(dir)
                    .and_then(|()| std::fs::write(dir.join(file), predicted));
                if let Err(e) = written {
                    eprintln!("cannot dump to {}: {e}", dir.display());
                }
            }
            scores.push((score_page(&s.truth, predicted), s));
        }
        let ms = fastest * 1000.0 / samples.len() as f64;
        let only_scores: Vec<PageScore> = scores.iter().map(|(p, _)| *p).collect();
        let sum = summarize(&only_scores);
        let row = Row {
            name: name.to_string(),
            f1: sum.f1,
            precision: sum.precision,
            recall: sum.recall,
            accuracy: sum.accuracy,
            ms_per_page: ms,
        };
        print_row(&row);
        rows.push(row);
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
    let Some(ext) = external else {
        return;
    };
    // A page the external run did not extract counts as an empty prediction.
    let scores: Vec<PageScore> = samples
        .iter()
        .map(|s| score_page(&s.truth, ext.texts.get(&s.id).map_or("", String::as_str)))
        .collect();
    let sum = summarize(&scores);
    let theirs = Row {
        name: ext.name,
        f1: sum.f1,
        precision: sum.precision,
        recall: sum.recall,
        accuracy: sum.accuracy,
        ms_per_page: ext.seconds * 1000.0 / samples.len() as f64,
    };
    print_row(&theirs);
    if let Some(ours) = rows.iter().find(|r| r.name.starts_with("quarry")) {
        let speedup = theirs.ms_per_page / ours.ms_per_page;
        println!(
            "\nquarry vs {}: F1 {:.3} vs {:.3} ({}), {speedup:.1}x its speed (target >= 10x: {})",
            theirs.name,
            ours.f1,
            theirs.f1,
            if ours.f1 >= theirs.f1 {
                "target met"
            } else {
                "target MISSED"
            },
            if speedup >= 10.0 { "met" } else { "MISSED" }
        );
    }
}
