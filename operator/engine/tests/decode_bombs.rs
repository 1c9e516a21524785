//! Decompression bombs in PDFs: nested Flate filters, LZW, the raw-deflate fallback and a
//! stream of more than 10,000:1 are refused with bounded memory and time, in-process (a counting
//! allocator measures the peak of this test's thread) and in the helper process (its peak RSS
//! is read back with `getrusage`). A file that passes the byte cap but whose parse needs more
//! memory than the helper has is stopped, and a helper past its time is killed and reaped.
//!
//! The bombs are generated here, not committed: a block of zeros is deflated once with a sync
//! flush and the block repeated, which inflates to the repeats times the block.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use flate2::Compression;
use lopdf::{Document, Object, Stream, dictionary};
use quarry_engine::scrape::pdf::{self, MAX_PDF_INFLATED_BYTES, PdfError};
use quarry_engine::scrape::pdf_sandbox::{self, PdfSandbox};
use quarry_engine::scrape::pdf_streams::{Budget, Params, decode_into_budget};

/// Counts the bytes live on each thread and their peak since the last [`reset_peak`].
struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn charge(delta: isize) {
    // `try_with`: the allocator also runs while thread-locals are being torn down.
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        charge(layout.size() as isize);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        charge(-(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        charge(layout.size() as isize);
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        charge(new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Runs `f` and returns its result with the peak of bytes it had live on this thread.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, usize::try_from(peak).unwrap_or(0))
}

const MIB: usize = 1024 * 1024;

/// Raw deflate of `chunk` repeated `times` times: one sync-flushed block repeated, then an
/// empty final block. Each copy only refers back inside itself, so the repeats are valid.
fn deflate_repeat(chunk: &[u8], times: usize) -> Vec<u8> {
    let mut c = flate2::Compress::new(Compression::best(), false);
    let mut block = Vec::with_capacity(chunk.len() + 1024);
    c.compress_vec(chunk, &mut block, flate2::FlushCompress::Sync)
        .unwrap();
    assert_eq!(c.total_in() as usize, chunk.len());
    let mut out = block.repeat(times);
    out.extend_from_slice(&[0x03, 0x00]);
    out
}

/// The Adler-32 of `chunk` repeated `times` times.
fn adler_repeat(chunk: &[u8], times: usize) -> u32 {
    const M: u64 = 65521;
    let n = chunk.len() as u64;
    let s = chunk.iter().map(|b| u64::from(*b)).sum::<u64>() % M;
    let w = chunk
        .iter()
        .enumerate()
        .map(|(i, b)| (n - i as u64) * u64::from(*b) % M)
        .sum::<u64>()
        % M;
    let (mut a, mut b) = (1u64, 0u64);
    for _ in 0..times {
        b = (b + n % M * a + w) % M;
        a = (a + s) % M;
    }
    ((b << 16) | a) as u32
}

/// A zlib stream of `chunk` repeated `times` times.
fn zlib_repeat(chunk: &[u8], times: usize) -> Vec<u8> {
    let mut out = vec![0x78, 0xda];
    out.extend_from_slice(&deflate_repeat(chunk, times));
    out.extend_from_slice(&adler_repeat(chunk, times).to_be_bytes());
    out
}

fn zlib(data: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), Compression::best());
    z.write_all(data).unwrap();
    z.finish().unwrap()
}

fn lzw(data: &[u8]) -> Vec<u8> {
    weezl::encode::Encoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
        .encode(data)
        .unwrap()
}

/// A minimal PDF holding one stream with `filter` (a PDF object, e.g. `[/FlateDecode]`).
fn pdf_with_stream(filter: &str, data: &[u8]) -> Vec<u8> {
    let mut f = format!(
        "%PDF-1.7\n1 0 obj\n<< /Length {} /Filter {filter} >>\nstream\n",
        data.len()
    )
    .into_bytes();
    f.extend_from_slice(data);
    f.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< >>\n%%EOF\n");
    f
}

const BOMB_MIB: usize = 128;

/// 128 MiB of zeros behind two Flate layers.
fn nested_flate() -> (Vec<u8>, Vec<u8>) {
    let inner = zlib_repeat(&vec![0; MIB], BOMB_MIB);
    let outer = zlib(&inner);
    (
        pdf_with_stream("[/FlateDecode /FlateDecode]", &outer),
        outer,
    )
}

/// 128 MiB of zeros behind LZW then Flate.
fn lzw_flate() -> Vec<u8> {
    let inner = zlib_repeat(&vec![0; MIB], BOMB_MIB);
    pdf_with_stream("[/LZWDecode /FlateDecode]", &lzw(&inner))
}

/// 128 MiB of zeros as raw deflate behind a broken zlib header (`lopdf` retries as raw).
fn raw_deflate() -> Vec<u8> {
    let mut data = vec![0x00, 0x00];
    data.extend_from_slice(&deflate_repeat(&vec![0; MIB], BOMB_MIB));
    pdf_with_stream("/FlateDecode", &data)
}

/// Limits of the in-process checks: the peak a bomb may add, and the time it may take.
const PEAK_LIMIT: usize = 4 * MIB;
const TIME_LIMIT: Duration = Duration::from_secs(20);

fn assert_refused_in_process(name: &str, file: &[u8]) {
    let started = Instant::now();
    let (result, peak) = peak_of(|| pdf::extract_blocking(file, Duration::from_secs(60)));
    let took = started.elapsed();
    eprintln!(
        "{name}: {} bytes, peak {peak} bytes, {took:?}: {result:?}",
        file.len()
    );
    assert_eq!(
        result,
        Err(PdfError::TooLarge(MAX_PDF_INFLATED_BYTES)),
        "{name}"
    );
    assert!(peak < PEAK_LIMIT, "{name}: peak {peak} bytes");
    assert!(took < TIME_LIMIT, "{name}: took {took:?}");
}

#[test]
fn nested_flate_of_more_than_10000_to_1_is_refused_with_bounded_memory() {
    let (file, stream) = nested_flate();
    let ratio = (BOMB_MIB * MIB) / stream.len();
    eprintln!("nested flate stream: {} bytes, {ratio}:1", stream.len());
    assert!(ratio > 10_000, "{ratio}:1");
    assert_refused_in_process("nested flate", &file);
}

#[test]
fn lzw_in_a_filter_chain_is_refused_with_bounded_memory() {
    assert_refused_in_process("lzw+flate", &lzw_flate());
}

#[test]
fn the_raw_deflate_fallback_is_refused_with_bounded_memory() {
    assert_refused_in_process("raw deflate", &raw_deflate());
}

#[test]
fn the_capped_decoders_decode_what_lopdf_decodes() {
    let far = Instant::now() + Duration::from_secs(60);
    let decoded = |input: &[u8], filters: &[&[u8]]| {
        let filters: Vec<Vec<u8>> = filters.iter().map(|f| f.to_vec()).collect();
        let budget = Budget::new(u64::MAX, far);
        decode_into_budget(input, &filters, &Params::default(), &budget).unwrap();
        budget.used()
    };
    let eight = 8 * MIB;
    // LZW alone: every byte is counted.
    assert_eq!(
        decoded(&lzw(&vec![0; eight]), &[b"LZWDecode"]),
        eight as u64
    );
    // The raw-deflate fallback after a broken zlib header.
    let mut raw = vec![0x00, 0x00];
    raw.extend_from_slice(&deflate_repeat(&vec![0; MIB], 8));
    assert_eq!(decoded(&raw, &[b"FlateDecode"]), eight as u64);
    // Two layers: both outputs count (the inner stream is what `lopdf` holds in between).
    let inner = zlib_repeat(&vec![0; MIB], 8);
    let outer = zlib(&inner);
    assert_eq!(
        decoded(&outer, &[b"FlateDecode", b"FlateDecode"]),
        (inner.len() + eight) as u64
    );
    // The Adler-32 of the generated streams is right: flate2 itself accepts them.
    let mut check = Vec::new();
    flate2::read::ZlibDecoder::new(&inner[..])
        .read_to_end(&mut check)
        .unwrap();
    assert_eq!(check.len(), eight);
}

#[test]
fn a_document_with_chained_filters_still_yields_its_text() {
    let text = "Chained filters keep their text readable.";
    let content = format!("BT /F1 12 Tf 72 720 Td ({text}) Tj ET");
    let encoded = zlib(&lzw(content.as_bytes()));
    let file = document(Stream::new(
        dictionary! { "Filter" => vec![Object::from("FlateDecode"), Object::from("LZWDecode")] },
        encoded,
    ));
    let got = pdf::extract_blocking(&file, Duration::from_secs(30)).unwrap();
    assert_eq!(got.text, text);
}

/// A one-page document whose page content is `content`.
fn document(content: Stream) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
    });
    let resources_id = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font_id },
    });
    let content_id = doc.add_object(content);
    let page_id = doc.add_object(dictionary! {
        "Type" => "Page",
        "Parent" => pages_id,
        "Contents" => content_id,
    });
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => vec![page_id.into()],
            "Count" => 1,
            "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => pages_id });
    doc.trailer.set("Root", catalog_id);
    let mut out = Vec::new();
    doc.save_to(&mut out).unwrap();
    out
}

/// A page whose content decodes to about 60 MiB (under the byte cap) of ten million path
/// operators, which the parser turns into far more memory than that.
fn heavy_page() -> Vec<u8> {
    let chunk = "0 0 m\n".repeat(MIB / 6 + 1);
    let content = zlib_repeat(chunk.as_bytes(), 60);
    document(Stream::new(
        dictionary! { "Filter" => "FlateDecode" },
        content,
    ))
}

fn sandbox(memory_bytes: u64) -> PdfSandbox {
    PdfSandbox {
        memory_bytes,
        ..PdfSandbox::new(env!("CARGO_BIN_EXE_quarry-pdf-helper"), &[])
    }
}

/// The largest peak RSS of a reaped child of this process, in bytes.
fn children_max_rss() -> u64 {
    // SAFETY: getrusage writes the zeroed struct passed to it and nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage), 0);
        usage
    };
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// Whether this process has no child left, running or waiting to be reaped.
fn no_children_left() -> bool {
    // SAFETY: waitpid with WNOHANG on any child only reads the process table.
    let rc = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD)
}

#[tokio::test]
async fn the_helper_refuses_every_bomb_with_bounded_rss_and_time() {
    let sb = sandbox(pdf_sandbox::HELPER_MEMORY_BYTES);
    for (name, file) in [
        ("nested flate", nested_flate().0),
        ("lzw+flate", lzw_flate()),
        ("raw deflate", raw_deflate()),
    ] {
        let started = Instant::now();
        let got = pdf_sandbox::extract_in(&sb, file, Duration::from_secs(15)).await;
        let took = started.elapsed();
        let rss = children_max_rss();
        eprintln!("helper, {name}: {got:?} in {took:?}, children's peak RSS {rss} bytes");
        assert_eq!(
            got,
            Err(PdfError::TooLarge(MAX_PDF_INFLATED_BYTES)),
            "{name}"
        );
        assert!(rss < 64 * MIB as u64, "{name}: peak RSS {rss}");
        assert!(took < TIME_LIMIT, "{name}: took {took:?}");
    }
}

#[tokio::test]
async fn a_parse_past_the_helpers_memory_limit_is_stopped() {
    let file = heavy_page();
    let limit = 160 * MIB as u64;
    let started = Instant::now();
    let got = pdf_sandbox::extract_in(&sandbox(limit), file, Duration::from_secs(60)).await;
    let took = started.elapsed();
    let rss = children_max_rss();
    eprintln!("heavy page: {got:?} in {took:?}, helper's peak RSS {rss} bytes");
    assert!(
        matches!(&got, Err(PdfError::Stopped(why)) if why.contains("memory")),
        "{got:?}"
    );
    assert!(rss <= limit, "peak RSS {rss} over the {limit} byte limit");
    assert!(no_children_left());
}

#[tokio::test]
async fn a_helper_past_its_time_is_killed_and_reaped() {
    // A helper that never answers (`sleep` adds up its arguments, the limits included): only
    // the parent's deadline can end it.
    let stuck = PdfSandbox::new("sleep", &["30"]);
    let limit = Duration::from_millis(200);
    let started = Instant::now();
    let got = pdf_sandbox::extract_in(&stuck, heavy_page(), limit).await;
    let took = started.elapsed();
    eprintln!("stuck helper: {got:?} in {took:?}");
    assert_eq!(got, Err(PdfError::Timeout(limit)));
    assert!(took < limit + Duration::from_secs(4), "took {took:?}");
    assert!(no_children_left(), "the helper outlived the call");
}
