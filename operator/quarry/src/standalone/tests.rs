//! Unit tests of `standalone`.

use super::*;
use rand::SeedableRng;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("quarry-standalone-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn home_and_system_directories_send_reports_to_temp() {
    let temp = Path::new("/tmp/x");
    assert_eq!(
        report_dir(Path::new("/home/me"), Some(Path::new("/home/me")), temp),
        temp
    );
    assert_eq!(report_dir(Path::new("/usr/lib"), None, temp), temp);
    assert_eq!(report_dir(Path::new("/"), None, temp), temp);
}

#[test]
fn recognised_subdirectories_win_in_priority_order_case_insensitively() {
    let cwd = tmp("subdirs");
    assert_eq!(report_dir(&cwd, None, Path::new("/tmp")), cwd);
    std::fs::create_dir(cwd.join("Notes")).unwrap();
    assert_eq!(report_dir(&cwd, None, Path::new("/tmp")), cwd.join("Notes"));
    std::fs::create_dir(cwd.join("DOCS")).unwrap();
    assert_eq!(report_dir(&cwd, None, Path::new("/tmp")), cwd.join("DOCS"));
    std::fs::write(cwd.join("research"), "a file, not a directory").unwrap();
    assert_eq!(report_dir(&cwd, None, Path::new("/tmp")), cwd.join("DOCS"));
    let _ = std::fs::remove_dir_all(cwd);
}

#[test]
fn a_heartbeat_is_due_after_fifteen_quiet_seconds_and_every_fifteen_after() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut hb = Heartbeat::new(t0);
    assert_eq!(hb.tick(at(1), 0), None);
    assert_eq!(hb.tick(at(14), 0), None);
    assert_eq!(hb.tick(at(15), 0), Some(Duration::from_secs(15)));
    // Not again until another 15 s have passed; the wait keeps counting from the last step.
    assert_eq!(hb.tick(at(16), 0), None);
    assert_eq!(hb.tick(at(29), 0), None);
    assert_eq!(hb.tick(at(30), 0), Some(Duration::from_secs(30)));
    assert_eq!(hb.tick(at(45), 0), Some(Duration::from_secs(45)));
}

#[test]
fn a_progress_line_resets_the_heartbeat_and_quiet_activity_resets_the_wait() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut hb = Heartbeat::new(t0);
    hb.printed(at(10));
    assert_eq!(hb.tick(at(24), 0), None);
    assert_eq!(hb.tick(at(25), 0), Some(Duration::from_secs(15)));
    // An event without a line: the heartbeat still comes (nothing was printed), but the wait
    // is counted from that event.
    hb.activity(at(33));
    assert_eq!(hb.tick(at(40), 0), Some(Duration::from_secs(7)));
    // A search or page read logged (the log's version moved) counts the same way.
    assert_eq!(hb.tick(at(50), 3), None);
    assert_eq!(hb.tick(at(55), 3), Some(Duration::from_secs(5)));
    assert_eq!(hb.tick(at(70), 3), Some(Duration::from_secs(20)));
}

#[test]
fn heartbeat_text_says_how_long_the_step_in_flight_has_run() {
    assert_eq!(
        heartbeat_text(Duration::from_millis(30_900)),
        "still working: a model call (or a search or page read) in flight for 30 s"
    );
    assert_eq!(
        heartbeat_text(Duration::from_secs(3)),
        "still working: the last model call, search or page read ended 3 s ago"
    );
}

#[test]
fn heartbeat_lines_carry_the_status_of_the_last_event() {
    let printer = ProgressPrinter::default();
    let t0 = Instant::now();
    // Before any event there is no status to show.
    assert_eq!(printer.heartbeat(t0 + Duration::from_secs(60), 0), None);
    let mut state = RunState::new(RunInput::new("how?", Mode::Quick));
    state.phase = Phase::Researching;
    let line = printer.observe(&state, &Event::Start, t0).unwrap();
    assert!(line.ends_with("| researching with 1 researcher"), "{line}");
    assert_eq!(printer.heartbeat(t0 + Duration::from_secs(14), 0), None);
    let beat = printer.heartbeat(t0 + Duration::from_secs(15), 0).unwrap();
    assert_eq!(
        beat,
        format!(
            "{}still working: a model call (or a search or page read) in flight for 15 s",
            status_prefix(&state)
        )
    );
    assert!(beat.starts_with("[Researching] "), "{beat}");
    assert!(line.starts_with(&status_prefix(&state)), "{line}");
}

#[test]
fn report_files_are_created_exclusively_and_redraw_on_collision() {
    let dir = tmp("files");
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (first, _) = create_report_file(&dir, "Rust async", &mut rng).unwrap();
    let name = first.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        regex::Regex::new(r"^rust-async-[a-z][0-9]\.md$")
            .unwrap()
            .is_match(&name),
        "{name}"
    );
    // Same seed draws the same suffix first: the collision forces a redraw.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (second, _) = create_report_file(&dir, "Rust async", &mut rng).unwrap();
    assert_ne!(first, second);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn out_naming_a_directory_writes_the_report_inside_it() {
    let dir = tmp("out-dir");
    let written = write_report(Some(&dir), "Rust async", "# Report\n").unwrap();
    assert_eq!(
        written.parent().unwrap(),
        std::fs::canonicalize(&dir).unwrap()
    );
    assert!(
        std::fs::read_to_string(&written)
            .unwrap()
            .starts_with("# Report")
    );
    // A path written with a trailing `/` is a directory to create.
    let fresh = dir.join("new");
    let slash = PathBuf::from(format!("{}/", fresh.display()));
    let written = write_report(Some(&slash), "Rust async", "# Report\n").unwrap();
    assert!(fresh.is_dir());
    assert_eq!(
        written.parent().unwrap(),
        std::fs::canonicalize(&fresh).unwrap()
    );
    // A file path is still the file.
    let file = dir.join("answer.md");
    let written = write_report(Some(&file), "Rust async", "# Report\n").unwrap();
    assert_eq!(written, std::fs::canonicalize(&file).unwrap());
    let _ = std::fs::remove_dir_all(dir);
}
