//! Unit tests of `bench`.

use super::*;

#[test]
fn proc_fields_are_read_after_the_command_name() {
    let stat = "1234 (my (odd) prog) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 100";
    assert_eq!(cpu_seconds_of(stat, 100.0), Some(3.0));
    let status = "Name:\tx\nVmHWM:\t  123456 kB\nVmRSS:\t 1000 kB\n";
    assert_eq!(status_kib_of(status, "VmHWM"), Some(123456));
    assert_eq!(status_kib_of(status, "VmRSS"), Some(1000));
    assert_eq!(status_kib_of(status, "VmPeak"), None);
}

#[test]
fn medians() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert!(median(&[]).is_nan());
}
