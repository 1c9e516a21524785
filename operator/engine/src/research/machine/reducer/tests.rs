//! Drives the reducer through every transition with exact assertions on state and commands.

use super::*;
use crate::research::machine::state::{ApprovalPolicy, Limits, RunInput, SourceRef};

fn usage(input: u64, output: u64, cost: u64) -> Usage {
    Usage {
        cached_input_tokens: 0,
        input_tokens: input,
        output_tokens: output,
        cost_pico_usd: cost,
        llm_calls: 1,
    }
}

fn report(task_id: u32, urls: &[&str], u: Usage) -> ResearcherReport {
    ResearcherReport {
        task_id,
        markdown: format!("findings of task {task_id}"),
        fetched: urls
            .iter()
            .map(|u| SourceRef::new(u.to_string(), format!("T {u}")))
            .collect(),
        seen: vec![],
        pages: vec![],
        irrelevant: vec![],
        queries: vec![],
        searches: 2,
        usage: u,
    }
}

fn quick() -> RunState {
    RunState::new(RunInput::new("how does json.loads work", Mode::Quick))
}

fn deep(max_concurrent: u32) -> RunState {
    let mut input = RunInput::new("compare json libraries", Mode::Deep);
    input.limits = Limits {
        max_concurrent_researchers: max_concurrent,
        ..Limits::default()
    };
    RunState::new(input)
}

/// Applies events in order, returning the final state and the commands of the last event.
fn run(mut s: RunState, events: Vec<Event>) -> (RunState, Vec<Command>) {
    let mut last = vec![];
    for e in events {
        let (next, cmds) = reduce(s, e);
        s = next;
        last = cmds;
    }
    (s, last)
}

fn states(s: &RunState) -> Vec<TaskState> {
    s.agenda.iter().map(|t| t.state).collect()
}

#[test]
fn quick_start_runs_exactly_one_researcher_on_the_query() {
    let (s, cmds) = reduce(quick(), Event::Start);
    assert_eq!(s.phase, Phase::Researching);
    assert_eq!(s.round, 1);
    assert_eq!(s.agenda.len(), 1);
    assert_eq!(s.agenda[0].query, "how does json.loads work");
    assert_eq!(s.agenda[0].state, TaskState::Running);
    assert_eq!(s.budget_units, 10);
    assert_eq!(cmds, vec![Command::StartResearcher { task_id: 0 }]);
    assert_eq!(s.progress(), "0%");
}

#[test]
fn quick_progress_counts_tool_units() {
    let (s, cmds) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherProgress {
                task_id: 0,
                units: 7,
                usage: Usage::default(),
            },
        ],
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s.progress(), "70%");
}

#[test]
fn quick_finished_researcher_goes_to_synthesis_with_usage_accounted() {
    let (s, cmds) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherProgress {
                task_id: 0,
                units: 1,
                usage: usage(60, 10, 2),
            },
            Event::ResearcherProgress {
                task_id: 0,
                units: 4,
                usage: usage(40, 10, 3),
            },
            // The report's own usage is a record: its spend arrived through progress events.
            Event::ResearcherFinished {
                report: report(0, &["http://a/1", "http://a/2"], usage(100, 20, 5)),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
    assert_eq!(
        s.usage,
        Usage {
            cached_input_tokens: 0,
            input_tokens: 100,
            output_tokens: 20,
            cost_pico_usd: 5,
            llm_calls: 2
        }
    );
    assert_eq!(s.pages_fetched, 2);
    assert_eq!(s.searches, 2);
    assert_eq!(s.source_count(), 2);
    assert_eq!(states(&s), vec![TaskState::Done]);
}

#[test]
fn synthesized_report_is_published_once_then_completed() {
    let (s, _) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherFinished {
                report: report(0, &["http://a/1"], usage(1, 1, 0)),
            },
        ],
    );
    let final_report = report::compose(&s, "body [a](http://a/1)", false);
    let (s, cmds) = reduce(
        s,
        Event::Synthesized {
            report: final_report.clone(),
            usage: usage(50, 10, 3),
        },
    );
    assert_eq!(cmds, vec![Command::Checkpoint, Command::Publish]);
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(s.usage.input_tokens, 50);
    // A second synthesis result (a race) is ignored: the report is written once.
    let (s, cmds) = reduce(
        s,
        Event::Synthesized {
            report: report::abort_report(&quick()),
            usage: Usage::default(),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s.final_report.as_ref(), Some(&final_report));
    let (s, cmds) = reduce(s, Event::Published);
    assert_eq!(cmds, vec![Command::Checkpoint]);
    assert_eq!(s.phase, Phase::Completed);
    assert!(s.published);
    assert_eq!(s.progress(), "100%");
    // Terminal: nothing more happens, but late spend is still counted.
    let (s2, cmds) = reduce(s.clone(), Event::Resume);
    assert_eq!((s2, cmds), (s.clone(), vec![]));
    let (s2, cmds) = reduce(
        s.clone(),
        Event::ResearcherProgress {
            task_id: 0,
            units: 9,
            usage: usage(7, 7, 7),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s2.phase, Phase::Completed);
    assert_eq!(s2.usage.input_tokens, s.usage.input_tokens + 7);
}

#[test]
fn quick_run_without_any_source_writes_the_honest_abort_report() {
    let (s, cmds) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherFinished {
                report: report(0, &[], usage(10, 5, 1)),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::Publish]);
    let r = s.final_report.as_ref().unwrap();
    assert!(r.aborted);
    assert!(
        r.markdown
            .starts_with("# Unable to research: how does json.loads work")
    );
    // The honest report is stored, then the run ends Failed with reason NoEvidence.
    let (s, cmds) = reduce(s, Event::Published);
    assert_eq!(cmds, vec![Command::Checkpoint]);
    assert_eq!(s.phase, Phase::Failed);
    assert!(s.published);
    let failure = s.failure.unwrap();
    assert_eq!(failure.reason, reasons::NO_EVIDENCE);
    assert!(
        failure.message.contains("after 2 search(es)"),
        "{}",
        failure.message
    );
}

#[test]
fn pages_read_that_all_miss_the_question_end_in_the_honest_report_not_a_synthesis() {
    let mut off_topic = report(
        0,
        &["https://docs/pickle.html", "https://docs/hstore.html"],
        usage(10, 5, 1),
    );
    off_topic.irrelevant = vec![
        "https://docs/pickle.html".into(),
        "https://docs/hstore.html".into(),
    ];
    off_topic.queries = vec!["sqlalchemy create_engine pool_size".into()];
    let (s, cmds) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherFinished { report: off_topic },
        ],
    );
    assert_eq!(cmds, vec![Command::Checkpoint, Command::Publish]);
    let r = s.final_report.as_ref().unwrap();
    assert!(r.aborted);
    assert!(r.sources.is_empty());
    // The reader learns what was searched and what was read, and that none of it answers.
    assert!(
        r.markdown.contains("read 2 page(s), and no passage"),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown
            .contains("- `sqlalchemy create_engine pool_size`"),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown.contains("<https://docs/pickle.html>"),
        "{}",
        r.markdown
    );
    let (s, _) = reduce(s, Event::Published);
    assert_eq!(s.phase, Phase::Failed);
    let failure = s.failure.unwrap();
    assert_eq!(failure.reason, reasons::NO_EVIDENCE);
    assert!(
        failure
            .message
            .starts_with("none of the 2 page(s) read answers the question"),
        "{}",
        failure.message
    );

    // Pages the researcher kept but found to leave out a subject of the question (its
    // answerability gate marks every page read off the task): the run ends the same way, and
    // the report names what no page names and the closest pages.
    let mut gated = report(0, &["https://docs/sqlite3.html"], usage(1, 1, 1));
    gated.irrelevant = vec!["https://docs/sqlite3.html".into()];
    gated.pages = vec![crate::research::machine::state::PageExtract {
        url: "https://docs/sqlite3.html".into(),
        title: "sqlite3 — DB-API 2.0 interface for SQLite databases".into(),
        text: "Unlike a create_engine() pool, each call opens one connection.".into(),
    }];
    let mut state = quick();
    state.input.query = "What is the default pool_size of SQLAlchemy's create_engine()?".into();
    let (s, _) = run(
        state,
        vec![Event::Start, Event::ResearcherFinished { report: gated }],
    );
    let r = s.final_report.as_ref().unwrap();
    assert!(r.aborted, "{}", r.markdown);
    assert!(
        r.markdown.contains(
            "read 1 page(s), and none of them names `pool_size`, which the question asks about"
        ),
        "{}",
        r.markdown
    );
    assert!(
        r.markdown.contains("## Closest pages read (none of them answers the question)\n\n- sqlite3 — DB-API 2.0 interface for SQLite databases — <https://docs/sqlite3.html>"),
        "{}",
        r.markdown
    );
    assert!(!r.markdown.contains("What else was read"), "{}", r.markdown);

    // One relevant page among them is enough to synthesise.
    let mut mixed = report(
        0,
        &["https://docs/json.html", "https://docs/pickle.html"],
        usage(1, 1, 1),
    );
    mixed.irrelevant = vec!["https://docs/pickle.html".into()];
    mixed.pages = vec![crate::research::machine::state::PageExtract {
        url: "https://docs/json.html".into(),
        title: "json".into(),
        text: "json.loads(s) deserializes s".into(),
    }];
    let (s, cmds) = run(
        quick(),
        vec![Event::Start, Event::ResearcherFinished { report: mixed }],
    );
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
    assert!(s.final_report.is_none());
}

#[test]
fn quick_researcher_failure_fails_the_run_with_its_reason() {
    let failure = Failure::new(
        reasons::MODEL_OUTPUT_INVALID,
        "the model answered with text that is not a tool call",
    );
    let (s, cmds) = run(
        quick(),
        vec![
            Event::Start,
            Event::ResearcherProgress {
                task_id: 0,
                units: 1,
                usage: usage(9, 9, 9),
            },
            Event::ResearcherFailed {
                task_id: 0,
                failure: failure.clone(),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.failure, Some(failure));
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
    assert_eq!(s.usage, usage(9, 9, 9));
    assert!(s.final_report.is_none());
}

#[test]
fn deep_plans_then_runs_agenda_within_the_concurrency_limit() {
    let (s, cmds) = reduce(deep(3), Event::Start);
    assert_eq!(s.phase, Phase::Planning);
    assert_eq!(cmds, vec![Command::Plan]);
    let tasks: Vec<String> = (0..5).map(|i| format!("task {i}")).collect();
    let (s, cmds) = reduce(
        s,
        Event::PlanReady {
            tasks,
            usage: usage(10, 10, 1),
        },
    );
    assert_eq!(s.phase, Phase::Researching);
    assert_eq!(s.budget_units, 50);
    assert_eq!(
        cmds,
        vec![
            Command::Checkpoint,
            Command::StartResearcher { task_id: 0 },
            Command::StartResearcher { task_id: 1 },
            Command::StartResearcher { task_id: 2 }
        ]
    );
    assert_eq!(
        states(&s),
        vec![
            TaskState::Running,
            TaskState::Running,
            TaskState::Running,
            TaskState::Pending,
            TaskState::Pending
        ]
    );
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFinished {
            report: report(1, &["http://a/1"], usage(1, 1, 1)),
        },
    );
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::StartResearcher { task_id: 3 }]
    );
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFailed {
            task_id: 0,
            failure: Failure::new("X", "boom"),
        },
    );
    assert_eq!(cmds, vec![Command::StartResearcher { task_id: 4 }]);
    let (s, _) = run(
        s,
        vec![
            Event::ResearcherFinished {
                report: report(2, &["http://a/2"], usage(1, 1, 1)),
            },
            Event::ResearcherFinished {
                report: report(3, &["http://a/3"], usage(1, 1, 1)),
            },
        ],
    );
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFinished {
            report: report(4, &[], usage(1, 1, 1)),
        },
    );
    assert_eq!(cmds, vec![Command::Checkpoint, Command::Evaluate]);
    assert_eq!(
        states(&s),
        vec![
            TaskState::Failed,
            TaskState::Done,
            TaskState::Done,
            TaskState::Done,
            TaskState::Done
        ]
    );
    assert_eq!(s.agenda[0].error.as_deref(), Some("X: boom"));
}

fn deep_after_round_one() -> RunState {
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
            Event::ResearcherFinished {
                report: report(0, &["http://a/0"], Usage::default()),
            },
            Event::ResearcherFinished {
                report: report(1, &["http://a/1"], Usage::default()),
            },
        ],
    );
    s
}

#[test]
fn delegation_opens_a_new_round_and_progress_switches_to_exploring() {
    let s = deep_after_round_one();
    assert_eq!(s.progress(), "99%");
    let (s, cmds) = reduce(
        s,
        Event::Evaluated {
            decision: Decision::Delegate {
                queries: vec!["c".into(), "d".into()],
            },
            usage: usage(5, 5, 5),
        },
    );
    assert_eq!(
        cmds,
        vec![
            Command::Checkpoint,
            Command::StartResearcher { task_id: 2 },
            Command::StartResearcher { task_id: 3 }
        ]
    );
    assert_eq!(s.round, 2);
    assert_eq!(s.budget_units, 40);
    assert_eq!(s.agenda[2].round, 2);
    assert_eq!(s.progress(), "exploring");
}

#[test]
fn synthesize_decision_enters_synthesis() {
    let (s, cmds) = reduce(
        deep_after_round_one(),
        Event::Evaluated {
            decision: Decision::Synthesize,
            usage: Usage::default(),
        },
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
}

#[test]
fn delegation_past_the_round_limit_synthesizes_instead() {
    let mut s = deep_after_round_one();
    s.input.limits.max_rounds = 1;
    let (s, cmds) = reduce(
        s,
        Event::Evaluated {
            decision: Decision::Delegate {
                queries: vec!["more".into()],
            },
            usage: Usage::default(),
        },
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(s.agenda.len(), 2);
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
}

#[test]
fn last_allowed_round_skips_the_evaluator() {
    let (s, cmds) = run(
        {
            let mut s = deep(3);
            s.input.limits.max_rounds = 1;
            s
        },
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into()],
                usage: Usage::default(),
            },
            Event::ResearcherFinished {
                report: report(0, &["http://a/0"], Usage::default()),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
}

#[test]
fn a_round_where_every_researcher_failed_fails_the_run() {
    let (s, cmds) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
            Event::ResearcherFailed {
                task_id: 0,
                failure: Failure::new("ModelUnreachable", "connection refused"),
            },
            Event::ResearcherFailed {
                task_id: 1,
                failure: Failure::new("ModelUnreachable", "connection refused"),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
    let f = s.failure.unwrap();
    assert_eq!(f.reason, reasons::ALL_RESEARCHERS_FAILED);
    assert_eq!(
        f.message,
        "every researcher of round 1 failed; first error: ModelUnreachable: connection refused"
    );
}

/// A deep run of the 1.5B model: rounds 1 and 2 reported, every researcher of the next round
/// wrote nothing usable; the run failed and the reports were lost.
#[test]
fn a_later_round_where_every_researcher_failed_synthesizes_what_earlier_rounds_found() {
    let s = deep_after_round_one();
    let (s, _) = reduce(
        s,
        Event::Evaluated {
            decision: Decision::Delegate {
                queries: vec!["c".into(), "d".into()],
            },
            usage: usage(5, 5, 5),
        },
    );
    let (s, _) = reduce(
        s,
        Event::ResearcherFailed {
            task_id: 2,
            failure: Failure::new("ModelOutputInvalid", "no usable report"),
        },
    );
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFailed {
            task_id: 3,
            failure: Failure::new("ModelOutputInvalid", "no usable report"),
        },
    );
    assert_eq!(s.phase, Phase::Synthesizing, "{:?}", s.failure);
    assert!(s.failure.is_none());
    assert!(
        cmds.contains(&Command::Synthesize { partial: false }),
        "{cmds:?}"
    );
}

#[test]
fn plan_failure_and_policy_refusal_fail_without_research() {
    for reason in [reasons::PLAN_UNPARSEABLE, reasons::POLICY_REFUSED] {
        let (s, cmds) = run(
            deep(3),
            vec![
                Event::Start,
                Event::PlanFailed {
                    failure: Failure::new(reason, "why"),
                    usage: usage(3, 3, 3),
                },
            ],
        );
        assert_eq!(s.phase, Phase::Failed);
        assert_eq!(s.failure.as_ref().unwrap().reason, reason);
        assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
        assert!(s.agenda.is_empty());
        assert_eq!(s.usage, usage(3, 3, 3));
    }
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec![],
                usage: Usage::default(),
            },
        ],
    );
    assert_eq!(s.failure.unwrap().reason, reasons::PLAN_UNPARSEABLE);
}

#[test]
fn cost_limit_stops_running_researchers_and_makes_a_partial_report() {
    let mut s = deep(3);
    s.input.limits.max_cost_pico_usd = Some(100);
    let (s, _) = run(
        s,
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into(), "c".into()],
                usage: usage(1, 1, 10),
            },
        ],
    );
    let (s, cmds) = run(
        s,
        vec![
            Event::ResearcherProgress {
                task_id: 0,
                units: 3,
                usage: usage(1, 1, 50),
            },
            Event::ResearcherFinished {
                report: report(0, &["http://a/0"], usage(1, 1, 50)),
            },
        ],
    );
    assert_eq!(cmds, vec![Command::Checkpoint]);
    assert_eq!(s.usage.cost_pico_usd, 60);
    // Researcher 1's next call crosses the limit while it is still working.
    let (s, cmds) = reduce(
        s,
        Event::ResearcherProgress {
            task_id: 1,
            units: 2,
            usage: usage(1, 1, 45),
        },
    );
    assert_eq!(
        cmds,
        vec![
            Command::Checkpoint,
            Command::StopAll,
            Command::Synthesize { partial: true }
        ]
    );
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(s.limit_hit, Some(LimitHit::Cost));
    assert_eq!(
        states(&s),
        vec![TaskState::Done, TaskState::Pending, TaskState::Pending]
    );
    // A late result of a stopped researcher does not restart anything.
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFailed {
            task_id: 1,
            failure: Failure::new("X", "aborted"),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s.phase, Phase::Synthesizing);
}

#[test]
fn token_limit_before_any_report_fails_with_the_limit_reason() {
    let mut s = deep(3);
    s.input.limits.max_tokens = Some(1000);
    let (s, cmds) = run(
        s,
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into()],
                usage: usage(900, 200, 0),
            },
        ],
    );
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(s.limit_hit, Some(LimitHit::Tokens));
    assert_eq!(s.failure.unwrap().reason, reasons::TOKEN_LIMIT);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
}

#[test]
fn time_limit_during_research_and_during_synthesis() {
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
        ],
    );
    let (s, cmds) = run(
        s,
        vec![
            Event::ResearcherFinished {
                report: report(0, &["http://a/0"], Usage::default()),
            },
            Event::TimeLimitReached,
        ],
    );
    assert_eq!(
        cmds,
        vec![
            Command::Checkpoint,
            Command::StopAll,
            Command::Synthesize { partial: true }
        ]
    );
    assert_eq!(s.limit_hit, Some(LimitHit::Time));

    let (s, cmds) = reduce(
        deep_after_round_one(),
        Event::Evaluated {
            decision: Decision::Synthesize,
            usage: Usage::default(),
        },
    );
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
    let (s, cmds) = reduce(s, Event::TimeLimitReached);
    assert_eq!(
        cmds,
        vec![Command::StopAll, Command::Synthesize { partial: true }]
    );
    assert_eq!(s.limit_hit, Some(LimitHit::Time));
    let (_, cmds) = reduce(s, Event::TimeLimitReached);
    assert_eq!(cmds, vec![]);

    let (s, cmds) = run(deep(3), vec![Event::Start, Event::TimeLimitReached]);
    assert_eq!(s.failure.unwrap().reason, reasons::TIME_LIMIT);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
}

#[test]
fn suspend_requeues_running_work_and_resume_restarts_it() {
    let (s, _) = run(
        deep(2),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into(), "c".into()],
                usage: Usage::default(),
            },
        ],
    );
    let (s, cmds) = reduce(s, Event::Suspend);
    assert!(s.suspended);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
    assert_eq!(states(&s), vec![TaskState::Pending; 3]);
    // Suspending twice changes nothing.
    let (s, cmds) = reduce(s, Event::Suspend);
    assert_eq!(cmds, vec![]);
    let (s, cmds) = reduce(s, Event::Resume);
    assert!(!s.suspended);
    assert_eq!(
        cmds,
        vec![
            Command::StartResearcher { task_id: 0 },
            Command::StartResearcher { task_id: 1 }
        ]
    );
}

#[test]
fn a_result_finished_while_suspended_is_kept_but_starts_nothing() {
    let (s, _) = run(
        deep(1),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
            Event::Suspend,
        ],
    );
    let mut s = s;
    s.agenda[0].state = TaskState::Running; // finished just as suspension arrived
    let (s, cmds) = reduce(
        s,
        Event::ResearcherFinished {
            report: report(0, &["http://a/0"], usage(1, 1, 1)),
        },
    );
    assert_eq!(cmds, vec![Command::Checkpoint]);
    assert_eq!(states(&s), vec![TaskState::Done, TaskState::Pending]);
    let (_, cmds) = reduce(s, Event::Resume);
    assert_eq!(cmds, vec![Command::StartResearcher { task_id: 1 }]);
}

#[test]
fn suspended_before_start_waits() {
    let mut s = quick();
    s.suspended = true;
    let (s, cmds) = reduce(s, Event::Start);
    assert_eq!((s.phase, cmds), (Phase::Pending, vec![]));
    let (s, cmds) = reduce(s, Event::Resume);
    assert_eq!(s.phase, Phase::Researching);
    assert_eq!(cmds, vec![Command::StartResearcher { task_id: 0 }]);
}

#[test]
fn cancel_stops_everything_and_ignores_later_events() {
    let (s, _) = run(quick(), vec![Event::Start]);
    let (s, cmds) = reduce(s, Event::Cancel);
    assert_eq!(s.phase, Phase::Cancelled);
    assert_eq!(s.failure.as_ref().unwrap().reason, reasons::CANCELLED);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
    let (s2, cmds) = reduce(
        s.clone(),
        Event::ResearcherFinished {
            report: report(0, &["http://a/0"], usage(1, 1, 1)),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s2, s);
}

#[test]
fn recover_redoes_in_flight_work_only() {
    // A checkpoint taken while task 1 was running and task 0 was done.
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
            Event::ResearcherFinished {
                report: report(0, &["http://a/0"], usage(1, 1, 1)),
            },
        ],
    );
    let restored: RunState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
    assert_eq!(restored, s);
    let (r, cmds) = reduce(restored, Event::Recover);
    assert_eq!(cmds, vec![Command::StartResearcher { task_id: 1 }]);
    assert_eq!(states(&r), vec![TaskState::Done, TaskState::Running]);
    assert_eq!(r.reports.len(), 1);
}

#[test]
fn recover_in_each_phase_reissues_that_phase_work() {
    let (planning, _) = reduce(deep(3), Event::Start);
    assert_eq!(reduce(planning, Event::Recover).1, vec![Command::Plan]);
    assert_eq!(
        reduce(deep_after_round_one(), Event::Recover).1,
        vec![Command::Evaluate]
    );
    let (synth, _) = reduce(
        deep_after_round_one(),
        Event::Evaluated {
            decision: Decision::Synthesize,
            usage: Usage::default(),
        },
    );
    assert_eq!(
        reduce(synth.clone(), Event::Recover).1,
        vec![Command::Synthesize { partial: false }]
    );
    let r = report::compose(&synth, "x", false);
    let (written, _) = reduce(
        synth,
        Event::Synthesized {
            report: r,
            usage: Usage::default(),
        },
    );
    assert_eq!(reduce(written, Event::Recover).1, vec![Command::Publish]);
    assert_eq!(
        reduce(quick(), Event::Recover).1,
        vec![Command::StartResearcher { task_id: 0 }]
    );
}

#[test]
fn duplicate_and_unknown_results_are_ignored() {
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
        ],
    );
    let (s, _) = reduce(
        s,
        Event::ResearcherFinished {
            report: report(0, &["http://a/0"], usage(1, 1, 1)),
        },
    );
    let (s2, cmds) = reduce(
        s.clone(),
        Event::ResearcherFinished {
            report: report(0, &["http://a/0"], usage(1, 1, 1)),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s2.reports.len(), 1);
    let (_, cmds) = reduce(
        s,
        Event::ResearcherFinished {
            report: report(42, &[], Usage::default()),
        },
    );
    assert_eq!(cmds, vec![]);
}

#[test]
fn evaluation_arriving_before_the_round_ends_is_ignored() {
    let (s, _) = run(
        deep(3),
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
        ],
    );
    let (s, cmds) = reduce(
        s,
        Event::Evaluated {
            decision: Decision::Synthesize,
            usage: usage(1, 1, 1),
        },
    );
    assert_eq!(cmds, vec![]);
    assert_eq!(s.phase, Phase::Researching);
    assert_eq!(s.usage.llm_calls, 1);
}

#[test]
fn synthesis_failure_fails_the_run() {
    let (s, _) = reduce(
        deep_after_round_one(),
        Event::Evaluated {
            decision: Decision::Synthesize,
            usage: Usage::default(),
        },
    );
    let (s, cmds) = reduce(
        s,
        Event::SynthesisFailed {
            failure: Failure::new(reasons::SYNTHESIS_FAILED, "model unreachable"),
            usage: Usage::default(),
        },
    );
    assert_eq!(s.phase, Phase::Failed);
    assert_eq!(cmds, vec![Command::Checkpoint, Command::StopAll]);
}

#[test]
fn delegate_loops_run_round_after_round_until_target_rounds_plus_two() {
    // An evaluator that always delegates: rounds 1, 2 and 3 run, then synthesis without asking.
    let mut s = deep(3);
    let (next, _) = run(
        s,
        vec![
            Event::Start,
            Event::PlanReady {
                tasks: vec!["a".into(), "b".into()],
                usage: Usage::default(),
            },
        ],
    );
    s = next;
    let mut evaluations = 0;
    let mut last = vec![];
    for round in 1..=3u32 {
        assert_eq!(s.round, round);
        let ids: Vec<u32> = s
            .agenda
            .iter()
            .filter(|t| t.round == round)
            .map(|t| t.id)
            .collect();
        assert!(!ids.is_empty());
        for id in ids {
            let (next, cmds) = reduce(
                s,
                Event::ResearcherFinished {
                    report: report(id, &[&format!("http://x/{id}")], usage(1, 1, 1)),
                },
            );
            s = next;
            last = cmds;
        }
        if last.contains(&Command::Evaluate) {
            evaluations += 1;
            let (next, cmds) = reduce(
                s,
                Event::Evaluated {
                    decision: Decision::Delegate {
                        queries: vec![format!("gap {round}")],
                    },
                    usage: usage(5, 5, 5),
                },
            );
            s = next;
            last = cmds;
        }
    }
    // Two evaluations delegated; the third round was the last, so no third evaluation.
    assert_eq!(evaluations, 2);
    assert_eq!(s.round, 3);
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(
        last,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
    assert_eq!(s.progress(), "exploring");
    // 2 planned + 1 + 1 delegated researchers, 10 units each.
    assert_eq!(s.budget_units, 40);
}

#[test]
fn an_evaluator_answer_that_is_not_json_synthesizes() {
    let mut s = deep_after_round_one();
    let decision = crate::research::agents::lead::parse_decision(
        "# Final report\n\nEverything is covered; here is my synthesis.",
        3,
    );
    assert_eq!(decision, Decision::Synthesize);
    let (next, cmds) = reduce(
        s,
        Event::Evaluated {
            decision,
            usage: usage(3, 3, 3),
        },
    );
    s = next;
    assert_eq!(s.phase, Phase::Synthesizing);
    assert_eq!(
        cmds,
        vec![Command::Checkpoint, Command::Synthesize { partial: false }]
    );
}

#[test]
fn recovered_spend_raises_usage_to_the_journal_and_never_lowers_it() {
    let mut s = deep(2);
    s.phase = Phase::Researching;
    s.usage = usage(100, 10, 1_000);
    // The killed attempt answered two more calls after the checkpoint.
    let journal = Usage {
        llm_calls: 3,
        ..usage(400, 40, 4_000)
    };
    let (s, cmds) = reduce(s, Event::SpendRecovered { usage: journal });
    assert_eq!(s.usage, journal);
    assert!(cmds.is_empty(), "recovery of spend does no work: {cmds:?}");
    // A journal behind the checkpoint (its write failed) changes nothing.
    let (s, _) = reduce(
        s,
        Event::SpendRecovered {
            usage: usage(1, 1, 1),
        },
    );
    assert_eq!(s.usage, journal);
}

fn approved_by_hand(mut s: RunState, timeout_secs: Option<u64>) -> RunState {
    s.input.approval = Some(ApprovalPolicy { timeout_secs });
    s
}

fn plan(tasks: &[&str]) -> Event {
    Event::PlanReady {
        tasks: tasks.iter().map(|t| t.to_string()).collect(),
        usage: usage(100, 10, 1_000),
    }
}

#[test]
fn a_plan_that_needs_approval_waits_with_its_agenda_and_starts_nothing() {
    let (s, cmds) = run(
        approved_by_hand(deep(3), None),
        vec![Event::Start, plan(&["json.loads", "json.dumps"])],
    );
    assert_eq!(s.phase, Phase::Planning);
    assert!(s.approval.waiting && !s.approval.approved);
    assert_eq!(states(&s), vec![TaskState::Pending, TaskState::Pending]);
    assert_eq!(cmds, vec![Command::Checkpoint]);
    let (s, cmds) = reduce(
        s,
        Event::ApprovalWaitStarted {
            since: 1_700_000_000,
            estimate: Some((3, 60)),
        },
    );
    assert_eq!(s.approval.waiting_since, Some(1_700_000_000));
    assert_eq!(s.approval.estimated_cost_pico, Some((3, 60)));
    assert_eq!(cmds, vec![Command::Checkpoint]);
    // Resuming or recovering a waiting plan does not plan again, nor start researchers.
    let (s, cmds) = run(s, vec![Event::Suspend, Event::Resume]);
    assert!(cmds.is_empty(), "{cmds:?}");
    let (s, cmds) = reduce(s, Event::Recover);
    assert!(cmds.is_empty(), "{cmds:?}");
    let (s, cmds) = reduce(s, Event::Approve { agenda: None });
    assert_eq!(s.phase, Phase::Researching);
    assert!(!s.approval.waiting && s.approval.approved);
    assert_eq!(
        cmds,
        vec![
            Command::Checkpoint,
            Command::StartResearcher { task_id: 0 },
            Command::StartResearcher { task_id: 1 },
        ]
    );
}

#[test]
fn an_approval_with_an_agenda_replaces_the_planned_one() {
    let (s, cmds) = run(
        approved_by_hand(deep(3), None),
        vec![
            Event::Start,
            plan(&["a planned task", "another"]),
            Event::Approve {
                agenda: Some(vec!["the reviewer's task".into()]),
            },
        ],
    );
    assert_eq!(
        s.agenda
            .iter()
            .map(|t| t.query.as_str())
            .collect::<Vec<_>>(),
        vec!["the reviewer's task"]
    );
    assert_eq!(s.budget_units, UNITS_PER_RESEARCHER);
    assert!(cmds.contains(&Command::StartResearcher { task_id: 0 }));
}

#[test]
fn an_approval_given_before_the_plan_lets_it_start_at_once() {
    let (s, cmds) = run(
        approved_by_hand(deep(3), None),
        vec![
            Event::Approve { agenda: None },
            Event::Start,
            plan(&["json.loads"]),
        ],
    );
    assert_eq!(s.phase, Phase::Researching);
    assert!(!s.approval.waiting);
    assert!(cmds.contains(&Command::StartResearcher { task_id: 0 }));
}

#[test]
fn a_plan_nobody_approves_in_time_fails_approval_timeout() {
    let (s, _) = run(
        approved_by_hand(deep(3), Some(60)),
        vec![Event::Start, plan(&["json.loads"]), Event::ApprovalTimedOut],
    );
    assert_eq!(s.phase, Phase::Failed);
    let failure = s.failure.clone().unwrap();
    assert_eq!(failure.reason, reasons::APPROVAL_TIMEOUT);
    assert!(
        failure.message.contains("within 60 s"),
        "{}",
        failure.message
    );
    assert_eq!(s.searches, 0);
    // A timeout that arrives after the approval changes nothing.
    let (s, _) = run(
        approved_by_hand(deep(3), Some(60)),
        vec![
            Event::Start,
            plan(&["json.loads"]),
            Event::Approve { agenda: None },
            Event::ApprovalTimedOut,
        ],
    );
    assert_eq!(s.phase, Phase::Researching);
}

#[test]
fn a_rejected_plan_is_a_cancelled_run_and_quick_mode_waits_too() {
    let (s, _) = run(
        approved_by_hand(deep(3), None),
        vec![Event::Start, plan(&["json.loads"]), Event::Cancel],
    );
    assert_eq!(s.phase, Phase::Cancelled);
    let (s, cmds) = run(approved_by_hand(quick(), None), vec![Event::Start]);
    assert_eq!(s.phase, Phase::Planning);
    assert!(s.approval.waiting);
    assert_eq!(s.agenda.len(), 1);
    assert_eq!(cmds, vec![Command::Checkpoint]);
    let (s, cmds) = reduce(s, Event::Approve { agenda: None });
    assert_eq!(s.phase, Phase::Researching);
    assert!(cmds.contains(&Command::StartResearcher { task_id: 0 }));
}

#[test]
fn the_cost_estimate_is_priced_by_the_calls_made_and_capped_by_the_limit() {
    use crate::research::machine::state::estimate_cost;
    let planner = usage(1000, 100, 2_000_000);
    // 2 tasks: at least 2 calls each and the writer; at most 14 turns each, 24 summaries and
    // two more calls, each up to twice the planner's size.
    assert_eq!(
        estimate_cost(&planner, 2, 14, 24, None),
        Some((10_000_000, 216_000_000))
    );
    assert_eq!(
        estimate_cost(&planner, 2, 14, 24, Some(50_000_000)),
        Some((10_000_000, 50_000_000))
    );
    assert_eq!(estimate_cost(&Usage::default(), 2, 14, 24, None), None);
}
