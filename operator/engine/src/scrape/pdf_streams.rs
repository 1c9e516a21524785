//! Capped, streaming decoding of a PDF's stream filters, to refuse decompression bombs before
//! `lopdf` decodes them without a cap.
//!
//! The decoders mirror the ones `lopdf` applies (`FlateDecode` with its raw-deflate fallback,
//! `LZWDecode` with `EarlyChange`, `ASCII85Decode`, in chains, with the PNG predictor's row
//! buffer) but never hold a decoded stream: every layer is a reader over the one below, and
//! a shared counter of the bytes every layer produced stops the chain at the budget or the
//! deadline. Memory stays at the decoders' windows whatever the ratio.

use std::cell::Cell;
use std::io::{self, Read};
use std::rc::Rc;
use std::time::Instant;

/// Bytes read from a layer at a time.
const CHUNK: usize = 16 * 1024;
/// Longest stream dictionary looked at before a `stream` keyword.
const MAX_DICT_BYTES: usize = 16 * 1024;

/// Why a budgeted decode stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// More bytes than the budget were produced (intermediate layers included).
    Bytes,
    /// The deadline passed.
    Time,
}

/// The decode parameters `lopdf` reads from a stream's `/DecodeParms` dictionary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// LZW `EarlyChange` (default on).
    pub early_change: bool,
    /// `Predictor` (1: none).
    pub predictor: i64,
    /// `Columns`.
    pub columns: i64,
    /// `Colors`.
    pub colors: i64,
    /// `BitsPerComponent`.
    pub bits: i64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            early_change: true,
            predictor: 1,
            columns: 1,
            colors: 1,
            bits: 8,
        }
    }
}

impl Params {
    /// Bytes of each of the two row buffers the PNG predictor allocates, or `None` without one
    /// (`u64::MAX` when the product overflows).
    pub fn predictor_row_bytes(&self) -> Option<u64> {
        if !(10..=15).contains(&self.predictor) {
            return None;
        }
        let pos = |v: i64, min: i64| u64::try_from(v.max(min)).unwrap_or(u64::MAX);
        let bpp = pos(self.colors, 1).saturating_mul(pos(self.bits, 8)) / 8;
        Some(bpp.saturating_mul(pos(self.columns, 1)))
    }
}

/// A budget shared by every layer of every stream of one file.
#[derive(Debug, Clone)]
pub struct Budget {
    used: Rc<Cell<u64>>,
    cap: u64,
    deadline: Instant,
}

impl Budget {
    /// A budget of `cap` decoded bytes until `deadline`.
    pub fn new(cap: u64, deadline: Instant) -> Self {
        Self {
            used: Rc::new(Cell::new(0)),
            cap,
            deadline,
        }
    }

    /// Bytes produced so far, by every layer.
    pub fn used(&self) -> u64 {
        self.used.get()
    }

    fn check(&self) -> Result<(), Exceeded> {
        if self.used.get() > self.cap {
            Err(Exceeded::Bytes)
        } else if Instant::now() > self.deadline {
            Err(Exceeded::Time)
        } else {
            Ok(())
        }
    }

    /// Charges `n` bytes; errors once the budget or the deadline is passed.
    fn charge(&self, n: usize) -> io::Result<()> {
        self.used.set(self.used.get().saturating_add(n as u64));
        self.check().map_err(|_| io::Error::other(BudgetHit))
    }
}

/// The I/O error that stops every layer once the budget is spent.
#[derive(Debug, thiserror::Error)]
#[error("decode budget exceeded")]
struct BudgetHit;

fn is_budget_hit(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|i| i.is::<BudgetHit>())
}

/// Decodes `input` through `filters` (in decoding order) into nothing, charging every layer's
/// output to `budget`; filters `lopdf` does not decode end the chain, as they end its decoding.
pub fn decode_into_budget(
    input: &[u8],
    filters: &[Vec<u8>],
    params: &Params,
    budget: &Budget,
) -> Result<(), Exceeded> {
    // The predictor allocates and zero-fills two rows before it reads a byte.
    if let Some(row) = params.predictor_row_bytes()
        && (filters
            .iter()
            .any(|f| f == b"FlateDecode" || f == b"LZWDecode"))
    {
        budget
            .used
            .set(budget.used.get().saturating_add(row.saturating_mul(2)));
        budget.check()?;
    }
    let mut reader: Box<dyn Read + '_> = Box::new(input);
    for filter in filters {
        let layer: Box<dyn Read + '_> = match filter.as_slice() {
            b"FlateDecode" => Box::new(Flate::new(reader)),
            b"LZWDecode" => Box::new(Lzw::new(reader, params.early_change)),
            b"ASCII85Decode" => Box::new(Ascii85::new(reader)),
            _ => break,
        };
        reader = Box::new(Charged {
            inner: layer,
            budget: budget.clone(),
        });
    }
    // A decoding error ends the stream, as `lopdf` keeps what decoded before one.
    let _ = io::copy(&mut reader, &mut io::sink());
    budget.check()
}

/// A layer whose output is charged to the budget.
struct Charged<R> {
    inner: R,
    budget: Budget,
}

impl<R: Read> Read for Charged<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.budget.charge(n)?;
        Ok(n)
    }
}

/// A reader that records what it passes on while `recording`, so that a failed zlib decode
/// can be replayed as raw deflate.
struct Recorder<R> {
    inner: R,
    seen: Vec<u8>,
    recording: bool,
}

impl<R: Read> Read for Recorder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.recording {
            self.seen.extend_from_slice(&buf[..n]);
        }
        Ok(n)
    }
}

/// `FlateDecode` as `lopdf` does it: zlib, and when zlib fails before producing a byte, raw
/// deflate from the third byte on (files with broken zlib headers or checksums).
enum Flate<R> {
    Zlib(Box<flate2::read::ZlibDecoder<Recorder<R>>>, bool),
    Raw(Box<flate2::read::DeflateDecoder<io::Chain<io::Cursor<Vec<u8>>, R>>>),
    Done,
}

impl<R: Read> Flate<R> {
    fn new(inner: R) -> Self {
        Flate::Zlib(
            Box::new(flate2::read::ZlibDecoder::new(Recorder {
                inner,
                seen: Vec::new(),
                recording: true,
            })),
            false,
        )
    }
}

impl<R: Read> Read for Flate<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Flate::Zlib(z, produced) => match z.read(buf) {
                Ok(n) => {
                    if n > 0 && !*produced {
                        *produced = true;
                        let rec = z.get_mut();
                        rec.recording = false;
                        rec.seen = Vec::new();
                    }
                    Ok(n)
                }
                Err(e) if is_budget_hit(&e) => Err(e),
                Err(_) if !*produced => {
                    let state = std::mem::replace(self, Flate::Done);
                    let Flate::Zlib(z, _) = state else {
                        return Ok(0);
                    };
                    let rec = z.into_inner();
                    if rec.seen.len() <= 2 {
                        return Ok(0);
                    }
                    let replay = io::Cursor::new(rec.seen[2..].to_vec()).chain(rec.inner);
                    *self = Flate::Raw(Box::new(flate2::read::DeflateDecoder::new(replay)));
                    self.read(buf)
                }
                Err(_) => Ok(0),
            },
            Flate::Raw(d) => Ok(d.read(buf).unwrap_or(0)),
            Flate::Done => Ok(0),
        }
    }
}

/// `LZWDecode` (MSB first, 8-bit symbols, `EarlyChange` as the TIFF size switch).
struct Lzw<R> {
    inner: R,
    decoder: weezl::decode::Decoder,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
}

impl<R: Read> Lzw<R> {
    fn new(inner: R, early_change: bool) -> Self {
        let decoder = if early_change {
            weezl::decode::Decoder::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
        } else {
            weezl::decode::Decoder::new(weezl::BitOrder::Msb, 8)
        };
        Self {
            inner,
            decoder,
            buf: Vec::new(),
            pos: 0,
            eof: false,
        }
    }
}

impl<R: Read> Read for Lzw<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos == self.buf.len() && !self.eof {
                self.buf.resize(CHUNK, 0);
                let n = self.inner.read(&mut self.buf)?;
                self.buf.truncate(n);
                self.pos = 0;
                self.eof = n == 0;
            }
            let r = self.decoder.decode_bytes(&self.buf[self.pos..], out);
            self.pos += r.consumed_in;
            if r.consumed_out > 0 {
                return Ok(r.consumed_out);
            }
            match r.status {
                Ok(weezl::LzwStatus::Ok) if !(self.eof && self.pos == self.buf.len()) => {}
                // Done, an error (`lopdf` keeps the output before it), or no more input.
                _ => return Ok(0),
            }
        }
    }
}

/// `ASCII85Decode`: groups of five characters are four bytes, `z` four zeros; `~` or any
/// character outside the alphabet ends the data.
struct Ascii85<R> {
    inner: io::Bytes<io::BufReader<R>>,
    out: Vec<u8>,
    pos: usize,
    done: bool,
}

impl<R: Read> Ascii85<R> {
    fn new(inner: R) -> Self {
        Self {
            inner: io::BufReader::new(inner).bytes(),
            out: Vec::new(),
            pos: 0,
            done: false,
        }
    }

    /// Decodes the next group into `out`.
    fn group(&mut self) -> io::Result<()> {
        let mut value: u64 = 0;
        let mut count = 0;
        while count < 5 {
            let Some(c) = self.inner.next().transpose()? else {
                break;
            };
            match c {
                b'z' if count == 0 => {
                    self.out.extend_from_slice(&[0; 4]);
                    return Ok(());
                }
                c if c.is_ascii_whitespace() => {}
                b'!'..=b'u' => {
                    value = value * 85 + u64::from(c - b'!');
                    count += 1;
                }
                _ => break,
            }
        }
        if count < 5 {
            self.done = true;
            if count <= 1 {
                return Ok(());
            }
            for _ in count..5 {
                value = value * 85 + 84;
            }
        }
        let bytes = u32::try_from(value).unwrap_or(u32::MAX).to_be_bytes();
        let keep = if count < 5 { count - 1 } else { 4 };
        self.out.extend_from_slice(&bytes[..keep]);
        Ok(())
    }
}

impl<R: Read> Read for Ascii85<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.out.len() {
            if self.done {
                return Ok(0);
            }
            self.out.clear();
            self.pos = 0;
            self.group()?;
        }
        let n = buf.len().min(self.out.len() - self.pos);
        buf[..n].copy_from_slice(&self.out[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Decodes every stream of the raw file within `budget`, reading each stream's filters from
/// the dictionary before its `stream` keyword.
///
/// Streams are found textually (`stream` + EOL, not preceded by `end`), so this runs before
/// `lopdf` parses anything, object streams included; a false match just fails to decode.
pub fn check_raw_file(bytes: &[u8], budget: &Budget) -> Result<(), Exceeded> {
    let mut at = 0;
    while let Some(found) = find(&bytes[at..], b"stream") {
        let start = at + found;
        at = start + b"stream".len();
        if start >= 3 && &bytes[start - 3..start] == b"end" {
            continue;
        }
        let data_start = match &bytes[at..] {
            [b'\r', b'\n', ..] => at + 2,
            [b'\n', ..] | [b'\r', ..] => at + 1,
            _ => continue,
        };
        let dict = stream_dict(&bytes[..start]);
        let filters = dict
            .map(filters_of)
            .unwrap_or_else(|| vec![b"FlateDecode".to_vec()]);
        let params = dict.map(params_of).unwrap_or_default();
        let rest = &bytes[data_start..];
        // A /Length is trusted when `endstream` follows it, as `lopdf` does; else the data
        // runs to the next `endstream`.
        let len = dict
            .and_then(|d| int_after(d, b"/Length"))
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n <= rest.len() && skip_ws(&rest[*n..]).starts_with(b"endstream"))
            .or_else(|| find(rest, b"endstream"))
            .unwrap_or(rest.len());
        decode_into_budget(&rest[..len], &filters, &params, budget)?;
    }
    Ok(())
}

/// The dictionary (`<< ... >>`) ending right before a `stream` keyword, if one does.
fn stream_dict(before: &[u8]) -> Option<&[u8]> {
    let end = before.iter().rposition(|b| !b.is_ascii_whitespace())? + 1;
    if end < 2 || &before[end - 2..end] != b">>" {
        return None;
    }
    let floor = end.saturating_sub(MAX_DICT_BYTES);
    let mut depth = 0usize;
    let mut i = end;
    while i >= floor + 2 {
        match &before[i - 2..i] {
            b">>" => {
                depth += 1;
                i -= 2;
            }
            b"<<" => {
                depth -= 1;
                i -= 2;
                if depth == 0 {
                    return Some(&before[i..end]);
                }
            }
            _ => i -= 1,
        }
    }
    None
}

/// The value of `/Filter` when it is a name or an array of names (`lopdf` decodes nothing
/// otherwise), with `#xx` escapes decoded.
fn filters_of(dict: &[u8]) -> Vec<Vec<u8>> {
    let Some(at) = key_pos(dict, b"/Filter") else {
        return Vec::new();
    };
    let rest = skip_ws(&dict[at..]);
    match rest.first() {
        Some(b'/') => vec![name(&rest[1..])],
        Some(b'[') => {
            let end = rest.iter().position(|b| *b == b']').unwrap_or(rest.len());
            rest[1..end]
                .split(|b| *b == b'/')
                .skip(1)
                .map(name)
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The `/DecodeParms` values `lopdf` reads (only from a direct dictionary).
fn params_of(dict: &[u8]) -> Params {
    let mut p = Params::default();
    let Some(at) = key_pos(dict, b"/DecodeParms") else {
        return p;
    };
    let rest = skip_ws(&dict[at..]);
    if !rest.starts_with(b"<<") {
        return p;
    }
    let end = find(rest, b">>").unwrap_or(rest.len());
    let parms = &rest[..end];
    if let Some(v) = int_after(parms, b"/EarlyChange") {
        p.early_change = v != 0;
    }
    p.predictor = int_after(parms, b"/Predictor").unwrap_or(p.predictor);
    p.columns = int_after(parms, b"/Columns").unwrap_or(p.columns);
    p.colors = int_after(parms, b"/Colors").unwrap_or(p.colors);
    p.bits = int_after(parms, b"/BitsPerComponent").unwrap_or(p.bits);
    p
}

/// Where the value of `key` starts (the key must not continue into a longer name).
fn key_pos(hay: &[u8], key: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = find(&hay[from..], key) {
        let after = from + i + key.len();
        match hay.get(after) {
            Some(c) if c.is_ascii_alphanumeric() || *c == b'#' => from = after,
            _ => return Some(after),
        }
    }
    None
}

/// The direct integer value of `key` (`None` for a reference `n g R` or anything else).
fn int_after(hay: &[u8], key: &[u8]) -> Option<i64> {
    let rest = skip_ws(&hay[key_pos(hay, key)?..]);
    let len = rest
        .iter()
        .enumerate()
        .position(|(i, c)| !(c.is_ascii_digit() || (i == 0 && (*c == b'-' || *c == b'+'))))
        .unwrap_or(rest.len());
    let after = skip_ws(&rest[len..]);
    // `12 0 R` is a reference, not the number 12.
    if after.first().is_some_and(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(&rest[..len]).ok()?.parse().ok()
}

fn skip_ws(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(s.len());
    &s[n..]
}

/// A PDF name's characters up to a delimiter, `#xx` escapes decoded.
fn name(s: &[u8]) -> Vec<u8> {
    let end = s
        .iter()
        .position(|b| b.is_ascii_whitespace() || b"/[]<>()%{}".contains(b))
        .unwrap_or(s.len());
    let raw = &s[..end];
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'#'
            && let Some(v) = raw
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    out
}

/// Position of `needle` in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests;
