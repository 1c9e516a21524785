//! The researchers' reports as one study: quick and partial reports, and deep mode's report when
//! its model is too small to write a synthesis of its own.

use crate::research::machine::state::RunState;
use crate::research::writing::grounded::QUOTED_NOTE;

/// The researchers' reports under their task headings: the body of quick and partial reports.
pub fn merged_reports(state: &RunState) -> String {
    if state.reports.len() == 1 {
        return state.reports[0].markdown.clone();
    }
    let mut body = String::new();
    for r in &state.reports {
        body.push_str(&format!(
            "## {}\n\n{}\n\n",
            task_title(state, r.task_id),
            demote_headings(&r.markdown)
        ));
    }
    body
}

/// The researchers' grounded answers as one study: every task's summary first, under one
/// "Summary" (so the report opens with answers, not with the first task's heading), then each
/// task's evidence under the task, in the agenda's order, tasks that found nothing last. A
/// report without a summary section is kept whole under its task. Summaries repeated word for
/// word by two tasks are written once.
pub fn merged_answers(state: &RunState) -> String {
    if state.reports.len() == 1 {
        return state.reports[0].markdown.clone();
    }
    let mut summaries: Vec<String> = Vec::new();
    let mut sections = String::new();
    // In the agenda's order, which follows the question's, not in the order researchers finished;
    // a task whose pages bore on nothing of it comes after those that found something, so the
    // study opens with an answer: "The sources read do not answer ..." led a deep report whose
    // next paragraph answered from another task's pages.
    let mut reports: Vec<_> = state.reports.iter().collect();
    reports.sort_by_key(|r| {
        let position = state
            .agenda
            .iter()
            .position(|t| t.id == r.task_id)
            .unwrap_or(usize::MAX);
        (!r.found_anything(), position)
    });
    // A task's extractive summary says of itself that it quotes passages unedited; inside one
    // study that sentence reads as said of the whole, so it is said once, at the end, of those
    // tasks.
    let mut quoted = false;
    for r in reports {
        let (summary, rest) = split_summary(&r.markdown);
        let summary = summary.map(|s| {
            let without = s.replace(QUOTED_NOTE, "");
            quoted |= without.len() != s.len();
            without.trim().to_string()
        });
        if let Some(summary) = summary.filter(|s| !s.is_empty() && !summaries.contains(s)) {
            summaries.push(summary);
        }
        if !rest.trim().is_empty() {
            sections.push_str(&format!(
                "## {}\n\n{}\n\n",
                task_title(state, r.task_id),
                demote_headings(rest.trim())
            ));
        }
    }
    if summaries.is_empty() {
        return merged_reports(state);
    }
    if quoted {
        summaries.push(
            "Where the model wrote no usable answer for a task, its section below quotes the passages read for it, unedited."
                .to_string(),
        );
    }
    format!("## Summary\n\n{}\n\n{sections}", summaries.join("\n\n"))
}

/// A report's "## Summary" paragraph (when it opens with one) and everything after it.
fn split_summary(md: &str) -> (Option<&str>, &str) {
    let Some(body) = md.trim_start().strip_prefix("## Summary") else {
        return (None, md);
    };
    let (summary, rest) = match body.find("\n## ") {
        Some(at) => (&body[..at], &body[at + 1..]),
        None => (body, ""),
    };
    let summary = summary.trim();
    ((!summary.is_empty()).then_some(summary), rest)
}

/// The agenda's wording of a task, or "Findings" for a report of no known task.
fn task_title(state: &RunState, task_id: u32) -> &str {
    state
        .agenda
        .iter()
        .find(|t| t.id == task_id)
        .map(|t| t.query.as_str())
        .unwrap_or("Findings")
}

/// Pushes headings one level down so researcher sections nest under their task heading.
fn demote_headings(md: &str) -> String {
    md.lines()
        .map(|l| {
            if l.starts_with('#') && l.len() < 200 {
                format!("#{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
