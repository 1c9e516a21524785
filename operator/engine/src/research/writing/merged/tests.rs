//! Unit tests of `merged`.

use super::*;
use crate::research::machine::state::{Mode, ResearcherReport, RunInput, Task, TaskState};

fn state_with(reports: &[(&str, &str)]) -> RunState {
    let mut state = RunState::new(RunInput::new("q", Mode::Deep));
    for (id, (task, markdown)) in reports.iter().enumerate() {
        let id = id as u32;
        state.agenda.push(Task {
            id,
            query: task.to_string(),
            round: 1,
            state: TaskState::Done,
            units: 0,
            error: None,
        });
        state.reports.push(ResearcherReport {
            task_id: id,
            markdown: markdown.to_string(),
            fetched: vec![],
            seen: vec![],
            pages: vec![],
            irrelevant: vec![],
            queries: vec![],
            searches: 0,
            usage: Default::default(),
        });
    }
    state
}

#[test]
fn every_tasks_summary_opens_the_study_and_its_evidence_follows_under_the_task() {
    let state = state_with(&[
        (
            "What does json.loads raise?",
            "## Summary\n\nIt raises JSONDecodeError ([json](http://d/json.html)).\n\n## Evidence\n\n> quote one",
        ),
        (
            "What does json.dumps return?",
            "## Summary\n\nIt returns a str ([json](http://d/json.html)).\n\n## Evidence\n\n> quote two\n\n## Best-matching passage (not cited above)\n\n> quote three",
        ),
    ]);
    let md = merged_answers(&state);
    assert!(
        md.starts_with("## Summary\n\nIt raises JSONDecodeError"),
        "{md}"
    );
    let summary = md.split("\n## ").next().unwrap();
    assert!(summary.contains("It returns a str"), "{md}");
    assert!(
        md.contains("## What does json.loads raise?\n\n### Evidence\n\n> quote one"),
        "{md}"
    );
    assert!(
        md.contains("## What does json.dumps return?\n\n### Evidence\n\n> quote two\n\n### Best-matching passage (not cited above)"),
        "{md}"
    );
    assert_eq!(md.matches("## Summary").count(), 1, "{md}");
}

#[test]
fn a_report_without_a_summary_is_kept_whole_and_a_repeated_summary_written_once() {
    let state = state_with(&[
        ("a", "## Summary\n\nSame answer.\n\n## Evidence\n\n> one"),
        ("b", "## Summary\n\nSame answer.\n\n## Evidence\n\n> two"),
        ("c", "Free text without sections."),
    ]);
    let md = merged_answers(&state);
    assert_eq!(md.matches("Same answer.").count(), 1, "{md}");
    assert!(md.contains("## c\n\nFree text without sections."), "{md}");
    // No summary anywhere: the reports under their tasks, as quick mode merges them.
    let none = state_with(&[("a", "text a"), ("b", "text b")]);
    assert_eq!(merged_answers(&none), merged_reports(&none));
    assert_eq!(
        merged_reports(&none),
        "## a\n\ntext a\n\n## b\n\ntext b\n\n"
    );
}

#[test]
fn answers_follow_the_agenda_not_the_order_researchers_finished() {
    let mut state = state_with(&[
        (
            "first",
            "## Summary\n\nFirst answer.\n\n## Evidence\n\n> one",
        ),
        (
            "second",
            "## Summary\n\nSecond answer.\n\n## Evidence\n\n> two",
        ),
    ]);
    state.reports.reverse();
    let md = merged_answers(&state);
    assert!(
        md.starts_with("## Summary\n\nFirst answer.\n\nSecond answer."),
        "{md}"
    );
    assert!(
        md.find("## first").unwrap() < md.find("## second").unwrap(),
        "{md}"
    );
}

/// Tuning set, deep 0.5B (`multi-json-duplicate-keys`): the study opened with the json.loads
/// task's "The sources read do not answer ...", and the jsonb task's answer came second.
#[test]
fn a_task_that_found_nothing_comes_after_those_that_answered() {
    let mut state = state_with(&[
        (
            "How does json.loads handle duplicate keys?",
            "## Summary\n\nThe sources read do not answer it.\n\n## Closest pages read\n- a — http://d/a.html",
        ),
        (
            "How does jsonb handle duplicate keys?",
            "## Summary\n\njsonb keeps the last value ([json](http://d/b.html)).\n\n## Evidence\n\n> quote",
        ),
    ]);
    let read = |url: &str| crate::research::machine::state::SourceRef::new(url, "t");
    state.reports[0].fetched = vec![read("http://d/a.html")];
    state.reports[0].irrelevant = vec!["http://d/a.html".into()];
    state.reports[1].fetched = vec![read("http://d/b.html")];
    assert!(!state.reports[0].found_anything() && state.reports[1].found_anything());
    let md = merged_answers(&state);
    assert!(
        md.starts_with("## Summary\n\njsonb keeps the last value"),
        "{md}"
    );
    assert!(
        md.find("## How does jsonb").unwrap() < md.find("## How does json.loads").unwrap(),
        "{md}"
    );
}

/// Deep 0.5B json report: a task's extractive note sat in the middle of the study's summary,
/// as if said of the whole; it is said once, at the end, of the tasks it concerns.
#[test]
fn a_tasks_quoted_note_is_said_once_at_the_end_of_the_summary() {
    let quoted = format!(
        "## Summary\n\njson.loads: “Deserialize s” ([json](http://d/json.html)). {QUOTED_NOTE}\n\n## Key findings\n\n> quote"
    );
    let state = state_with(&[
        ("What does json.loads do?", quoted.as_str()),
        (
            "What does jsonb keep?",
            "## Summary\n\nOnly the last value is kept ([jsonb](http://d/datatype-json.html)).\n\n## Evidence\n\n> quote two",
        ),
    ]);
    let md = merged_answers(&state);
    let summary = md.split("\n## ").next().unwrap();
    assert!(!summary.contains(QUOTED_NOTE), "{md}");
    assert!(
        summary
            .trim_end()
            .ends_with("its section below quotes the passages read for it, unedited."),
        "{md}"
    );
    assert!(summary.contains("Only the last value is kept"), "{md}");
}
