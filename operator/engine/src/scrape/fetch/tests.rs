//! Unit tests of `fetch`.

use super::timed_out;

#[test]
fn a_timeout_wrapped_in_a_body_error_is_a_timeout() {
    let inner = std::io::Error::new(std::io::ErrorKind::TimedOut, "operation timed out");
    let wrapped = std::io::Error::other(inner);
    assert!(timed_out(&wrapped));
    let other = std::io::Error::other(std::io::Error::other("reset by peer"));
    assert!(!timed_out(&other));
}
