//! Content-type parsing and charset detection for fetched documents.
//!
//! Order (WHATWG encoding sniffing, simplified): a byte-order mark wins, then the charset of
//! the Content-Type header, then a `<meta charset>` or `<meta http-equiv="content-type">` in
//! the first 4 KiB, then UTF-8 if the bytes are valid UTF-8, else windows-1252 (what browsers
//! assume for unlabelled Western pages).

use std::sync::LazyLock;

use encoding_rs::{Encoding, UTF_8, WINDOWS_1252};
use regex::bytes::Regex;

/// How far into the document a `<meta>` charset is looked for.
pub const META_SCAN_BYTES: usize = 4096;

/// The kind of document a fetch may return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// HTML or XHTML: main content is extracted.
    Html,
    /// Plain text or Markdown: passed through as is.
    Text,
    /// PDF: text is extracted from the binary body.
    Pdf,
}

/// A parsed `Content-Type` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentType {
    /// Lower-case `type/subtype`.
    pub mime: String,
    /// The `charset` parameter, if any, lower-case and unquoted.
    pub charset: Option<String>,
}

/// Parses a `Content-Type` header value.
pub fn parse_content_type(value: &str) -> ContentType {
    let mut parts = value.split(';');
    let mime = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("charset"))
            .then(|| {
                v.trim()
                    .trim_matches(|c| c == '"' || c == '\'')
                    .to_ascii_lowercase()
            })
            .filter(|v| !v.is_empty())
    });
    ContentType { mime, charset }
}

/// Classifies a MIME type; `None` for types that are not read.
pub fn doc_kind(mime: &str) -> Option<DocKind> {
    match mime {
        "text/html" | "application/xhtml+xml" => Some(DocKind::Html),
        "text/plain" | "text/markdown" | "text/x-markdown" => Some(DocKind::Text),
        "application/pdf" | "application/x-pdf" => Some(DocKind::Pdf),
        _ => None,
    }
}

static META_CHARSET: LazyLock<Regex> = LazyLock::new(|| {
    // Matches both `<meta charset="x">` and `<meta http-equiv=... content="text/html; charset=x">`.
    Regex::new(r#"(?i-u)<meta\s[^>]*?charset\s*=\s*["']?\s*([a-z0-9_:.\-]+)"#)
        .unwrap_or_else(|e| unreachable!("static regex: {e}"))
});

/// The encoding named by a `<meta>` tag in the first [`META_SCAN_BYTES`] bytes.
pub fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(META_SCAN_BYTES)];
    let label = META_CHARSET.captures(head)?.get(1)?.as_bytes();
    let enc = Encoding::for_label(label)?;
    // A page that could be read as ASCII to find this tag cannot be UTF-16 (HTML standard).
    Some(
        if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
            UTF_8
        } else {
            enc
        },
    )
}

/// Decodes a document body; returns the text and the encoding that was used.
pub fn decode(
    bytes: &[u8],
    header_charset: Option<&str>,
    kind: DocKind,
) -> (String, &'static Encoding) {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        let (text, _) = enc.decode_without_bom_handling(&bytes[bom_len..]);
        return (text.into_owned(), enc);
    }
    let from_header = header_charset.and_then(|c| Encoding::for_label(c.as_bytes()));
    let from_meta = || {
        if kind == DocKind::Html {
            meta_charset(bytes)
        } else {
            None
        }
    };
    let enc = from_header.or_else(from_meta).unwrap_or_else(|| {
        if std::str::from_utf8(bytes).is_ok() {
            UTF_8
        } else {
            WINDOWS_1252
        }
    });
    let (text, _) = enc.decode_without_bom_handling(bytes);
    (text.into_owned(), enc)
}

#[cfg(test)]
mod tests;
