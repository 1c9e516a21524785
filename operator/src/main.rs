//! The `quarry` binary.
fn main() {}
