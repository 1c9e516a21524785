//! Unit tests of `charset`.

use super::*;

#[test]
fn content_type_parameters_are_parsed() {
    assert_eq!(
        parse_content_type("Text/HTML; Charset=\"ISO-8859-1\""),
        ContentType {
            mime: "text/html".into(),
            charset: Some("iso-8859-1".into())
        }
    );
    assert_eq!(
        parse_content_type("text/plain"),
        ContentType {
            mime: "text/plain".into(),
            charset: None
        }
    );
    assert_eq!(doc_kind("application/xhtml+xml"), Some(DocKind::Html));
    assert_eq!(doc_kind("text/markdown"), Some(DocKind::Text));
    assert_eq!(doc_kind("application/pdf"), Some(DocKind::Pdf));
    assert_eq!(doc_kind("application/octet-stream"), None);
    assert_eq!(doc_kind("image/png"), None);
}

#[test]
fn bom_wins_over_header_and_meta() {
    let mut bytes = vec![0xEF, 0xBB, 0xBF];
    bytes.extend_from_slice("<meta charset=\"windows-1252\"><p>café</p>".as_bytes());
    let (text, enc) = decode(&bytes, Some("iso-8859-2"), DocKind::Html);
    assert_eq!(enc, UTF_8);
    assert_eq!(text, "<meta charset=\"windows-1252\"><p>café</p>");
    // UTF-16LE with BOM.
    let mut u16 = vec![0xFF, 0xFE];
    for unit in "naïve".encode_utf16() {
        u16.extend_from_slice(&unit.to_le_bytes());
    }
    let (text, enc) = decode(&u16, None, DocKind::Text);
    assert_eq!((text.as_str(), enc), ("naïve", encoding_rs::UTF_16LE));
}

#[test]
fn header_then_meta_then_utf8_then_windows_1252() {
    let latin = b"<p>caf\xe9 \x93quoted\x94</p>";
    assert_eq!(
        decode(latin, Some("windows-1252"), DocKind::Html).0,
        "<p>café \u{201c}quoted\u{201d}</p>"
    );
    let with_meta = b"<html><head><META HTTP-EQUIV=\"Content-Type\" CONTENT=\"text/html; charset=iso-8859-7\"></head>\xe1";
    let (text, enc) = decode(with_meta, None, DocKind::Html);
    assert_eq!(enc.name(), "ISO-8859-7");
    assert!(text.ends_with('α'));
    let (text, enc) = decode("plain ünïcode".as_bytes(), None, DocKind::Html);
    assert_eq!((text.as_str(), enc), ("plain ünïcode", UTF_8));
    let (text, enc) = decode(b"caf\xe9", None, DocKind::Html);
    assert_eq!((text.as_str(), enc), ("café", WINDOWS_1252));
}

#[test]
fn meta_is_only_looked_for_near_the_start_and_utf16_labels_mean_utf8() {
    let mut late = vec![b' '; META_SCAN_BYTES];
    late.extend_from_slice(b"<meta charset=iso-8859-7>");
    assert_eq!(meta_charset(&late), None);
    assert_eq!(meta_charset(b"<meta charset='utf-16'>"), Some(UTF_8));
    assert_eq!(
        meta_charset(b"<meta  charset=Shift_JIS >"),
        Some(encoding_rs::SHIFT_JIS)
    );
}
