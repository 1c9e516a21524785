//! PDF text extraction (`pdf-extract` over `lopdf`), bounded and never a panic.
//!
//! PDF parsing is CPU-bound and the crates in this space panic on hostile files, so extraction
//! runs inside `catch_unwind` (the release profile keeps unwinding for this) and under a
//! timeout: in a helper process under memory and CPU limits when the embedding binary installed
//! a `PdfSandbox` (`pdf_sandbox.rs`) (the `quarry` binary does), else on the blocking pool.
//! `lopdf` decodes object and content streams without a cap (a few kilobytes of flate can claim
//! gigabytes), so every stream is first decoded through capped streaming decoders
//! ([`pdf_streams`]: filter chains, LZW, the raw-deflate fallback) against
//! [`MAX_PDF_INFLATED_BYTES`]: the raw file before parsing, and the parsed streams (decrypted,
//! with their real dictionaries) before any page is read. Pages past
//! [`MAX_PDF_PAGES`] and text past [`MAX_PDF_TEXT_BYTES`] are not extracted; the deadline is
//! checked for every character written, so a slow file stops with the text read so far.

use std::time::{Duration, Instant};

use pdf_extract::{Document, MediaBox, OutputDev, OutputError, PlainTextOutput, Transform};

use super::pdf_streams::{self, Budget, Exceeded, Params};

/// Pages whose text is extracted; later pages are skipped.
pub const MAX_PDF_PAGES: u32 = 300;
/// Bytes of extracted text kept (a model reads a few thousand characters of a page anyway).
pub const MAX_PDF_TEXT_BYTES: usize = 1024 * 1024;
/// Total bytes the file's compressed streams may decode to (every layer of a filter chain).
pub const MAX_PDF_INFLATED_BYTES: u64 = 64 * 1024 * 1024;
/// Time extraction may take.
pub const PDF_TIMEOUT: Duration = Duration::from_secs(15);
/// Characters of an Info Title kept.
const MAX_TITLE_CHARS: usize = 200;

/// Text extracted from a PDF.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PdfText {
    /// The Info dictionary's Title, when present and not blank.
    pub title: Option<String>,
    /// The text of the pages read, pages separated by blank lines.
    pub text: String,
    /// Pages in the document.
    pub pages: u32,
    /// Whether a page, text or time cap stopped extraction early.
    pub truncated: bool,
}

/// Why a PDF yields no text.
#[derive(Debug, thiserror::Error, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PdfError {
    /// Encrypted with a user password (files readable with the empty password are read).
    #[error("the PDF is encrypted and needs a password")]
    Encrypted,
    /// Not a PDF, or too damaged to parse.
    #[error("the PDF is malformed: {0}")]
    Malformed(String),
    /// Its compressed streams inflate past the cap.
    #[error("the PDF's compressed streams inflate to more than {0} bytes")]
    TooLarge(u64),
    /// The parser panicked.
    #[error("the PDF parser crashed: {0}")]
    Crashed(String),
    /// Extraction ran out of time before any text was read.
    #[error("PDF text extraction took longer than {0:?}")]
    Timeout(Duration),
    /// The helper process was stopped by its resource limits.
    #[error("the PDF parser was stopped: {0}")]
    Stopped(String),
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic without a message".to_string())
}

/// The synchronous extraction within `limit`; may panic inside the parser (the caller catches it).
pub fn extract_blocking(bytes: &[u8], limit: Duration) -> Result<PdfText, PdfError> {
    let deadline = Instant::now() + limit;
    // The header may follow up to 1 KiB of junk (PDF 1.7, annex H).
    if find(&bytes[..bytes.len().min(1024)], b"%PDF-").is_none() {
        return Err(PdfError::Malformed("no %PDF- header".to_string()));
    }
    check_decoded_size(bytes, MAX_PDF_INFLATED_BYTES, deadline, limit)?;
    let doc = Document::load_mem(bytes).map_err(|e| PdfError::Malformed(e.to_string()))?;
    // lopdf already decrypts files whose user password is empty; what is still encrypted
    // needs a password Quarry does not have.
    if doc.is_encrypted() {
        return Err(PdfError::Encrypted);
    }
    check_parsed_streams(&doc, MAX_PDF_INFLATED_BYTES, deadline, limit)?;
    let title = info_title(&doc);
    let page_numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    let pages = u32::try_from(page_numbers.len()).unwrap_or(u32::MAX);
    let mut text = String::new();
    let mut truncated = pages > MAX_PDF_PAGES;
    let mut failures = Vec::new();
    for num in page_numbers.into_iter().take(MAX_PDF_PAGES as usize) {
        let mut page = String::new();
        let stop = {
            let mut out = Capped {
                inner: PlainTextOutput::new(&mut page),
                left: MAX_PDF_TEXT_BYTES.saturating_sub(text.len()),
                deadline,
                stop: None,
            };
            match pdf_extract::output_doc_page(&doc, &mut out, num) {
                // One bad page does not spoil the others.
                Err(e) if out.stop.is_none() => failures.push(format!("page {num}: {e}")),
                _ => {}
            }
            out.stop
        };
        let page = page.trim();
        if !page.is_empty() {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(page);
        }
        match stop {
            Some(Stop::Deadline) if text.is_empty() => {
                return Err(PdfError::Timeout(limit));
            }
            Some(_) => {
                truncated = true;
                break;
            }
            None => {}
        }
    }
    if text.is_empty() && !failures.is_empty() {
        return Err(PdfError::Malformed(failures.join("; ")));
    }
    truncate_at_char(&mut text, MAX_PDF_TEXT_BYTES);
    Ok(PdfText {
        title,
        text,
        pages,
        truncated,
    })
}

fn truncate_at_char(s: &mut String, max: usize) {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
}

/// The Info dictionary's Title, decoded (PDFDocEncoding or UTF-16), trimmed and shortened.
fn info_title(doc: &Document) -> Option<String> {
    let info = doc.trailer.get(b"Info").ok()?;
    let (_, info) = doc.dereference(info).ok()?;
    let title = info.as_dict().ok()?.get(b"Title").ok()?;
    let (_, title) = doc.dereference(title).ok()?;
    let title = pdf_extract::decode_text_string(title).ok()?;
    let title: String = title
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    (!title.is_empty()).then_some(title)
}

/// Decodes every stream of the raw file through capped decoders; fails past `cap` decoded
/// bytes (all streams, all layers) or at the deadline. Runs before `lopdf` sees the file,
/// which decodes object streams while loading.
pub fn check_decoded_size(
    bytes: &[u8],
    cap: u64,
    deadline: Instant,
    limit: Duration,
) -> Result<(), PdfError> {
    exceeded(
        pdf_streams::check_raw_file(bytes, &Budget::new(cap, deadline)),
        cap,
        limit,
    )
}

/// Decodes the parsed streams (decrypted, filters from their real dictionaries) through capped
/// decoders before any page is read.
fn check_parsed_streams(
    doc: &Document,
    cap: u64,
    deadline: Instant,
    limit: Duration,
) -> Result<(), PdfError> {
    let budget = Budget::new(cap, deadline);
    for object in doc.objects.values() {
        let Ok(stream) = object.as_stream() else {
            continue;
        };
        let filters: Vec<Vec<u8>> = stream
            .filters()
            .map(|f| f.into_iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default();
        if filters.is_empty() {
            continue;
        }
        let parms = stream
            .dict
            .get(b"DecodeParms")
            .and_then(pdf_extract::Object::as_dict)
            .ok();
        let int = |key: &[u8], default: i64| {
            parms
                .and_then(|p| p.get(key).and_then(pdf_extract::Object::as_i64).ok())
                .unwrap_or(default)
        };
        let params = Params {
            early_change: int(b"EarlyChange", 1) != 0,
            predictor: int(b"Predictor", 1),
            columns: int(b"Columns", 1),
            colors: int(b"Colors", 1),
            bits: int(b"BitsPerComponent", 8),
        };
        exceeded(
            pdf_streams::decode_into_budget(&stream.content, &filters, &params, &budget),
            cap,
            limit,
        )?;
    }
    Ok(())
}

fn exceeded(r: Result<(), Exceeded>, cap: u64, limit: Duration) -> Result<(), PdfError> {
    match r {
        Ok(()) => Ok(()),
        Err(Exceeded::Bytes) => Err(PdfError::TooLarge(cap)),
        Err(Exceeded::Time) => Err(PdfError::Timeout(limit)),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    pdf_streams::find(haystack, needle)
}

/// Why extraction stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Deadline,
    TextCap,
}

/// A plain-text output that stops the parser (by returning an error) at the text cap or the
/// deadline; `pdf-extract` has no other way to be interrupted.
struct Capped<W: pdf_extract::ConvertToFmt> {
    inner: PlainTextOutput<W>,
    left: usize,
    deadline: Instant,
    stop: Option<Stop>,
}

impl<W: pdf_extract::ConvertToFmt> Capped<W> {
    fn halt(&mut self, why: Stop) -> Result<(), OutputError> {
        self.stop = Some(why);
        Err(OutputError::FormatError(std::fmt::Error))
    }
}

impl<W: pdf_extract::ConvertToFmt> OutputDev for Capped<W> {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        if Instant::now() > self.deadline {
            return self.halt(Stop::Deadline);
        }
        self.inner.begin_page(page_num, media_box, art_box)
    }
    fn end_page(&mut self) -> Result<(), OutputError> {
        self.inner.end_page()
    }
    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        if Instant::now() > self.deadline {
            return self.halt(Stop::Deadline);
        }
        // +1 for the space or newline the inner output may put before it.
        let cost = char.len() + 1;
        if cost > self.left {
            return self.halt(Stop::TextCap);
        }
        self.left -= cost;
        self.inner
            .output_character(trm, width, spacing, font_size, char)
    }
    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.inner.begin_word()
    }
    fn end_word(&mut self) -> Result<(), OutputError> {
        self.inner.end_word()
    }
    fn end_line(&mut self) -> Result<(), OutputError> {
        self.inner.end_line()
    }
}

#[cfg(test)]
mod tests;
