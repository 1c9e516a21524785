//! Unit tests of `pdf_streams`.

use super::*;
use std::time::Duration;

fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

#[test]
fn reads_filters_params_and_length_from_the_dictionary() {
    let d = b"<< /Length 12 /Filter [/Fl#61teDecode /LZWDecode] /DecodeParms << /EarlyChange 0 /Predictor 12 /Columns 5 >> >>";
    assert_eq!(
        filters_of(d),
        vec![b"FlateDecode".to_vec(), b"LZWDecode".to_vec()]
    );
    let p = params_of(d);
    assert!(!p.early_change);
    assert_eq!((p.predictor, p.columns), (12, 5));
    assert_eq!(int_after(d, b"/Length"), Some(12));
    assert_eq!(int_after(b"<< /Length 7 0 R >>", b"/Length"), None);
    assert_eq!(filters_of(b"<< /Filter 4 0 R >>"), Vec::<Vec<u8>>::new());
    let file = b"1 0 obj\n<< /Filter /FlateDecode /Length 3 >>\n";
    assert_eq!(
        stream_dict(file),
        Some(&b"<< /Filter /FlateDecode /Length 3 >>"[..])
    );
}

#[test]
fn ascii85_decodes_as_lopdf_does() {
    let mut out = Vec::new();
    Ascii85::new(&b"87cURD]i,\"Ebo80z~>"[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, b"Hello World!\0\0\0\0");
}

#[test]
fn a_huge_predictor_row_is_charged_before_decoding() {
    let p = Params {
        predictor: 12,
        columns: 1 << 40,
        ..Params::default()
    };
    let budget = Budget::new(1 << 20, far());
    assert_eq!(
        decode_into_budget(b"", &[b"FlateDecode".to_vec()], &p, &budget),
        Err(Exceeded::Bytes)
    );
}
