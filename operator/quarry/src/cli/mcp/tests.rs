//! Unit tests of `mcp`.

use super::*;

#[test]
fn short_reports_come_whole_with_their_location() {
    assert_eq!(
        report_text("# Title\n\nBody.\n", "/r/x.md"),
        "# Title\n\nBody.\n\n---\nFull report: /r/x.md"
    );
}

#[test]
fn long_reports_keep_the_head_within_seed_002s_budget() {
    let long: String = (1..=5000).map(|i| format!("line {i}\n")).collect();
    let text = report_text(&long, "ConfigMap ns/r1-report");
    assert!(text.len() <= DEFAULT_MAX_BYTES, "{}", text.len());
    assert!(text.lines().count() <= DEFAULT_MAX_LINES);
    assert!(text.starts_with("line 1\nline 2\n"));
    assert!(
            text.ends_with(
                "\n\n[Report truncated: showing lines 1-1998 of 5000 (18873 of 48893 bytes). Full report: ConfigMap ns/r1-report]"
            ),
            "{}",
            &text[text.len() - 200..]
        );
    let wide = "x".repeat(200_000);
    let text = report_text(&wide, "/r/x.md");
    assert!(text.len() <= DEFAULT_MAX_BYTES);
    assert!(
        text.contains("[Report truncated: showing lines 1-1 of 1 ("),
        "{}",
        &text[text.len() - 120..]
    );
}

#[test]
fn tool_schemas_are_objects_with_documented_fields() {
    let tools = tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            RESEARCH_TOOL,
            GET_REPORT_TOOL,
            LIST_RUNS_TOOL,
            LIST_SCHEDULES_TOOL
        ]
    );
    let research = serde_json::Value::Object(tools[0].input_schema.as_ref().clone());
    assert_eq!(research["type"], "object");
    assert_eq!(research["required"], serde_json::json!(["query"]));
    assert_eq!(research["additionalProperties"], false);
    assert_eq!(
        research["properties"],
        serde_json::json!({
            "query": {"type": "string", "description": "The research question, self-contained (3 to 4000 characters)."},
            "mode": {"type": "string", "enum": ["quick", "deep"],
                     "description": "quick: one researcher, fast and cheap; deep: planner, parallel researchers, evaluator."},
            "outputs": {"type": "array", "items": {"type": "string", "enum": ["study", "ideas", "implementations"]},
                        "description": "What to produce: study (a cited report, the default), ideas, implementations."},
            "wait": {"type": "boolean", "default": true,
                     "description": "Wait for the report and return it; false returns at once with the run's name."}
        })
    );
}

#[test]
fn cluster_runs_take_the_tools_arguments() {
    let input: ResearchInput = serde_json::from_value(serde_json::json!({
        "query": "  How does VACUUM FULL lock?  ", "mode": "quick", "outputs": ["ideas", "study"]
    }))
    .unwrap();
    let run = cluster_run(&input, Mode::Deep, "fast").unwrap();
    assert_eq!(
        run.metadata.generate_name.as_deref(),
        Some("how-does-vacuum-full-lock-")
    );
    assert_eq!(run.spec.query, "How does VACUUM FULL lock?");
    assert_eq!(run.spec.mode, Mode::Quick);
    assert_eq!(run.spec.outputs, vec![Output::Study, Output::Ideas]);
    assert!(input.wait);
    assert_eq!(run.spec.profile_ref, "fast");
    let bad: ResearchInput = serde_json::from_value(serde_json::json!({"query": "ab"})).unwrap();
    assert_eq!(
        cluster_run(&bad, Mode::Deep, "default").unwrap_err(),
        "the query must be 3 to 4000 characters, not 2"
    );
    assert!(
        serde_json::from_value::<ResearchInput>(serde_json::json!({"query": "abc", "depth": 3}))
            .is_err()
    );
}

#[test]
fn a_standalone_child_run_gets_the_servers_egress_exemption_as_a_flag() {
    let exempt = vec!["127.0.0.1".to_string(), "vllm.models.svc".to_string()];
    let run = StandaloneRun {
        query: "How does VACUUM FULL lock?",
        profile: Path::new("/p.yaml"),
        mode: "quick",
        report: Path::new("/r.md"),
        outputs: &["study", "ideas"],
        egress_exempt_hosts: &exempt,
    };
    let args: Vec<String> = standalone_run_args(&run)
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        args,
        [
            "run",
            "How does VACUUM FULL lock?",
            "--profile",
            "/p.yaml",
            "--mode",
            "quick",
            "--output",
            "json",
            "--out",
            "/r.md",
            "--outputs",
            "study,ideas",
            "--egress-exempt-hosts",
            "127.0.0.1,vllm.models.svc",
        ]
    );
    let none = StandaloneRun {
        egress_exempt_hosts: &[],
        outputs: &[],
        ..run
    };
    assert!(
        !standalone_run_args(&none)
            .iter()
            .any(|a| a == "--egress-exempt-hosts")
    );
}
