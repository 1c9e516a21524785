//! Unit tests of `status`.

use super::*;
use quarry_api::{ResearchRunSpec, find_condition};
use quarry_engine::research::machine::state::{Failure, RunInput};

fn at(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
}

fn run() -> ResearchRun {
    let spec: ResearchRunSpec = serde_yaml::from_str("query: what is CEL?").unwrap();
    let mut run = ResearchRun::new("r1", spec);
    run.metadata.namespace = Some("ns".into());
    run.metadata.generation = Some(2);
    run
}

fn cond(status: &ResearchRunStatus, t: &str) -> (String, String) {
    let c = find_condition(&status.conditions, t).unwrap();
    (c.status.clone(), c.reason.clone())
}

#[test]
fn stalled_then_resolved() {
    let mut r = run();
    let s = desired_status(
        &r,
        RunView::Stalled {
            reason: "ProfileNotFound",
            message: "ResearchProfile \"default\" not found",
        },
        "r1-report",
        &at(10),
    );
    assert_eq!(s.phase, Some(Phase::Pending));
    assert_eq!(s.observed_generation, Some(2));
    assert_eq!(
        cond(&s, "Stalled"),
        ("True".into(), "ProfileNotFound".into())
    );
    assert_eq!(
        cond(&s, "Reconciling"),
        ("False".into(), "ProfileNotFound".into())
    );
    assert_eq!(
        cond(&s, "Succeeded"),
        ("Unknown".into(), "ProfileNotFound".into())
    );
    let events = transition_events(None, &s);
    assert_eq!(
        events,
        vec![EventSpec {
            type_: EventType::Warning,
            reason: "ProfileNotFound".into(),
            note: "ResearchProfile \"default\" not found".into(),
            action: "Resolve".into()
        }]
    );
    r.status = Some(s.clone());
    // Same view again: nothing changes, no events.
    let again = desired_status(
        &r,
        RunView::Stalled {
            reason: "ProfileNotFound",
            message: "ResearchProfile \"default\" not found",
        },
        "r1-report",
        &at(20),
    );
    assert_eq!(again, s);
    assert!(transition_events(Some(&s), &again).is_empty());
    // Starting clears the stall.
    let started = desired_status(&r, RunView::Starting, "r1-report", &at(30));
    assert_eq!(
        cond(&started, "Stalled"),
        ("False".into(), "Resolved".into())
    );
    assert_eq!(
        cond(&started, "Reconciling"),
        ("True".into(), "Running".into())
    );
    assert_eq!(started.start_time, Some(at(30)));
    assert!(transition_events(Some(&s), &started).is_empty());
}

#[test]
fn progress_completed_and_failed() {
    let mut r = run();
    r.status = Some(desired_status(&r, RunView::Starting, "r1-report", &at(1)));
    let mut state = RunState::new(RunInput::new(
        "what is CEL?",
        quarry_engine::research::machine::state::Mode::Quick,
    ));
    state.phase = EnginePhase::Researching;
    state.searches = 3;
    state.usage.input_tokens = 100;
    state.usage_by_model.insert(
        "gpt-mini".into(),
        quarry_engine::llm::Usage {
            input_tokens: 100,
            cost_pico_usd: 40_000_000,
            llm_calls: 1,
            ..Default::default()
        },
    );
    let s = desired_status(&r, RunView::Progress(&state), "r1-report", &at(2));
    let by_model = &s.usage.as_ref().unwrap().by_model;
    assert_eq!(by_model.len(), 1);
    assert_eq!(
        (
            by_model[0].model.as_str(),
            by_model[0].cost_usd.as_str(),
            by_model[0].llm_calls
        ),
        ("gpt-mini", "0.000040", 1)
    );
    assert_eq!(s.phase, Some(Phase::Researching));
    assert_eq!(s.usage.as_ref().unwrap().searches, 3);
    assert_eq!(
        s.usage.as_ref().unwrap().cost_usd.as_deref(),
        Some("0.000000")
    );
    let events = transition_events(r.status.as_ref(), &s);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].type_, events[0].reason.as_str()),
        (EventType::Normal, "Researching")
    );
    r.status = Some(s);
    let mut failed = state.clone();
    failed.phase = EnginePhase::Failed;
    failed.failure = Some(Failure::new(
        "ModelOutputInvalid",
        "the model answered garbage",
    ));
    let f = desired_status(&r, RunView::Progress(&failed), "r1-report", &at(3));
    assert_eq!(
        cond(&f, "Succeeded"),
        ("False".into(), "ModelOutputInvalid".into())
    );
    assert_eq!(
        cond(&f, "Reconciling"),
        ("False".into(), "ModelOutputInvalid".into())
    );
    assert_eq!(f.completion_time, Some(at(3)));
    let events = transition_events(r.status.as_ref(), &f);
    assert_eq!(
        events,
        vec![EventSpec {
            type_: EventType::Warning,
            reason: "ModelOutputInvalid".into(),
            note: "the model answered garbage".into(),
            action: "Research".into()
        }]
    );
}

#[test]
fn stored_reports_carry_the_citation_precision_also_when_no_evidence_failed_the_run() {
    let r = run();
    let mut state = RunState::new(RunInput::new(
        "what is CEL?",
        quarry_engine::research::machine::state::Mode::Deep,
    ));
    state.phase = EnginePhase::Completed;
    state.published = true;
    state.final_report = Some(quarry_engine::research::machine::state::FinalReport {
        markdown: "# CEL".into(),
        findings_json: "{}".into(),
        sources: vec![],
        partial: false,
        aborted: false,
        claims_checked: 8,
        claims_supported: 7,
        changes: None,
    });
    let s = desired_status(&r, RunView::Progress(&state), "r1-report", &at(2));
    let report = s.report.unwrap();
    assert_eq!(report.citations_checked, Some(8));
    assert_eq!(report.citation_precision.as_deref(), Some("0.875"));
    assert_eq!(report.bytes, 5);

    let mut none = state.clone();
    none.phase = EnginePhase::Failed;
    none.failure = Some(Failure::new("NoEvidence", "no usable source was found"));
    if let Some(f) = none.final_report.as_mut() {
        f.aborted = true;
        f.claims_checked = 0;
        f.claims_supported = 0;
    }
    let s = desired_status(&r, RunView::Progress(&none), "r1-report", &at(3));
    assert_eq!(cond(&s, "Succeeded"), ("False".into(), "NoEvidence".into()));
    let report = s.report.unwrap();
    assert_eq!(report.config_map.as_deref(), Some("r1-report"));
    assert_eq!(report.citation_precision, None);
}

#[test]
fn a_run_stopped_by_its_budget_says_budget_exceeded_and_stores_a_partial_report() {
    let r = run();
    let mut state = RunState::new(RunInput::new(
        "what is CEL?",
        quarry_engine::research::machine::state::Mode::Deep,
    ));
    state.phase = EnginePhase::Completed;
    state.limit_hit = Some(quarry_engine::research::machine::state::LimitHit::Cost);
    state.published = true;
    state.final_report = Some(quarry_engine::research::machine::state::FinalReport {
        markdown: "# CEL\n\n> **Partial report**".into(),
        findings_json: "{}".into(),
        sources: vec![],
        partial: true,
        aborted: false,
        claims_checked: 0,
        claims_supported: 0,
        changes: None,
    });
    let s = desired_status(&r, RunView::Progress(&state), "r1-report", &at(2));
    assert_eq!(
        cond(&s, "BudgetExceeded"),
        ("True".into(), "CostLimit".into())
    );
    assert_eq!(cond(&s, "Succeeded"), ("True".into(), "Completed".into()));
    assert!(s.report.unwrap().partial);
}

#[test]
fn a_plan_awaiting_approval_says_how_to_approve_and_the_approval_is_an_event() {
    use quarry_engine::research::machine::state::{
        ApprovalPolicy, Phase as P, RunInput as I, Task,
    };
    let mut r = run();
    r.status = Some(desired_status(&r, RunView::Starting, "r1-report", &at(1)));
    let mut input = I::new("q", quarry_engine::research::machine::state::Mode::Deep);
    input.approval = Some(ApprovalPolicy {
        timeout_secs: Some(3600),
    });
    let mut state = RunState::new(input);
    state.phase = P::Planning;
    state.agenda.push(Task {
        id: 0,
        query: "json.loads".into(),
        round: 1,
        state: EngineTaskState::Pending,
        units: 0,
        error: None,
    });
    state.approval.waiting = true;
    state.approval.waiting_since = Some(1_000);
    state.approval.estimated_cost_pico = Some((1_000_000, 30_000_000));
    let waiting = desired_status(&r, RunView::Progress(&state), "r1-report", &at(2));
    assert_eq!(waiting.phase, Some(Phase::Planning));
    let (status, reason) = cond(&waiting, types::AWAITING_APPROVAL);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", reasons::PLAN_READY)
    );
    assert_eq!(cond(&waiting, types::RECONCILING).0, "False");
    let message = waiting.message.clone().unwrap();
    assert!(
        message.contains("1 task(s)")
            && message.contains("0.000001 to 0.000030 USD")
            && message.contains("quarry approve r1 -n ns")
            && message.contains("quarry reject r1 -n ns"),
        "{message}"
    );
    let approval = waiting.approval.clone().unwrap();
    assert_eq!(approval.waiting_since, Some(at(1_000)));
    assert_eq!(approval.deadline, Some(at(4_600)));
    assert_eq!(approval.estimated_cost_usd.unwrap().max, "0.000030");
    assert_eq!(waiting.agenda[0].query, "json.loads");
    let events = transition_events(r.status.as_ref(), &waiting);
    assert!(
        events.iter().any(|e| e.reason == reasons::PLAN_READY),
        "{events:?}"
    );

    r.status = Some(waiting.clone());
    state.approval.waiting = false;
    state.approval.approved = true;
    state.phase = P::Researching;
    let approved = desired_status(&r, RunView::Progress(&state), "r1-report", &at(3));
    assert_eq!(approved.approval, None);
    let (status, reason) = cond(&approved, types::AWAITING_APPROVAL);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", reasons::APPROVED)
    );
    assert_eq!(cond(&approved, types::RECONCILING).0, "True");
    let events = transition_events(Some(&waiting), &approved);
    assert!(
        events.iter().any(|e| e.reason == reasons::APPROVED),
        "{events:?}"
    );
    // Written again unchanged, nothing new is published.
    r.status = Some(approved.clone());
    let again = desired_status(&r, RunView::Progress(&state), "r1-report", &at(4));
    assert!(transition_events(Some(&approved), &again).is_empty());
}
