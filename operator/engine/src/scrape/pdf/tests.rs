//! Unit tests of `pdf`.

use super::*;

#[test]
fn garbage_and_truncated_files_are_malformed_not_panics() {
    let far = Duration::from_secs(10);
    assert!(matches!(
        extract_blocking(b"not a pdf at all", far),
        Err(PdfError::Malformed(_))
    ));
    assert!(matches!(
        extract_blocking(b"%PDF-1.7\n1 0 obj << /Type /Catalog", far),
        Err(PdfError::Malformed(_))
    ));
}

#[test]
fn a_flate_bomb_is_refused_before_parsing() {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    z.write_all(&vec![b' '; 4 * 1024 * 1024]).unwrap();
    let bomb = z.finish().unwrap();
    let mut file = b"%PDF-1.7\n1 0 obj << /Length 0 /Filter /FlateDecode >>\nstream\n".to_vec();
    file.extend_from_slice(&bomb);
    file.extend_from_slice(b"\nendstream\nendobj\n");
    let far = Instant::now() + Duration::from_secs(30);
    let limit = Duration::from_secs(30);
    assert_eq!(
        check_decoded_size(&file, 1024 * 1024, far, limit),
        Err(PdfError::TooLarge(1024 * 1024))
    );
    assert_eq!(
        check_decoded_size(&file, 8 * 1024 * 1024, far, limit),
        Ok(())
    );
}
