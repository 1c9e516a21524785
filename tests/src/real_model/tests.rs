//! Unit tests of `real_model`.

use super::*;

#[test]
fn parses_the_listening_line() {
    assert_eq!(
        parse_listening_port("quarry-llm-server listening on http://127.0.0.1:40123"),
        Some(40123)
    );
    assert_eq!(parse_listening_port("quarry-llm-server ready"), None);
    assert_eq!(
        parse_listening_port("quarry-llm-server listening on http://127.0.0.1:x"),
        None
    );
}
