//! `quarry mcp` driven by a real MCP client, the official MCP Inspector's CLI mode: tools are
//! listed with portable schemas; `research` runs standalone against the local demo services
//! (real searx over the docs, a scripted model) and returns the cited report; on a (fake)
//! cluster it creates a ResearchRun, follows it and returns the report from its ConfigMap.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use quarry_e2e::fake_apiserver::{FakeApiServer, QUARRY_GV};
use quarry_e2e::mcp_inspector::{InspectorOutput, inspect, inspector_for};
use quarry_e2e::model_server::{Script, ScriptedModel, Step};
use quarry_e2e::profiles::scripted_profile;
use quarry_e2e::quarry_bin::quarry_bin;
use quarry_e2e::searx::SearchStack;

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// One Inspector call against `quarry mcp <server_args>`, off the async runtime.
async fn call(
    launcher: &Path,
    home: &Path,
    server_args: &[String],
    env: Vec<(&'static str, String)>,
    args: &[&str],
) -> InspectorOutput {
    let launcher = launcher.to_path_buf();
    let home = home.to_path_buf();
    // The loopback test servers are exempt by the flag alone (not the environment), so the
    // standalone child runs prove the flag reaches them.
    let mut server = vec![
        quarry_bin().unwrap().display().to_string(),
        "mcp".to_string(),
        "--egress-exempt-hosts".to_string(),
        quarry_e2e::quarry_bin::EGRESS_EXEMPT_ENV.1.to_string(),
    ];
    server.extend(server_args.iter().cloned());
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        inspect(&launcher, &home, &server, &env, &args).unwrap()
    })
    .await
    .unwrap()
}

fn text_of(out: &InspectorOutput) -> String {
    out.json["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content: {}\n{}", out.stdout, out.stderr))
        .to_string()
}

#[tokio::test]
#[ignore = "needs the MCP Inspector (scripts/install-test-deps.sh)"]
async fn tools_are_listed_with_schemas_the_inspector_finds_portable() {
    let launcher = inspector_for("mcp_tools_list");
    let home = dir();
    let out = call(
        &launcher,
        home.path(),
        &[],
        vec![],
        &["--method", "tools/list", "--strict"],
    )
    .await;
    // --strict exits 6 on any error-severity schema portability problem.
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let tools = out.json["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["research", "get_report", "list_runs", "list_schedules"]
    );
    assert_eq!(
        tools[0]["inputSchema"],
        json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "The research question, self-contained (3 to 4000 characters)."},
                "mode": {"type": "string", "enum": ["quick", "deep"],
                         "description": "quick: one researcher, fast and cheap; deep: planner, parallel researchers, evaluator."},
                "outputs": {"type": "array", "items": {"type": "string", "enum": ["study", "ideas", "implementations"]},
                            "description": "What to produce: study (a cited report, the default), ideas, implementations."},
                "wait": {"type": "boolean", "default": true,
                         "description": "Wait for the report and return it; false returns at once with the run's name."}
            },
            "required": ["query"],
            "additionalProperties": false
        })
    );
    assert_eq!(tools[1]["inputSchema"]["required"], json!(["name"]));
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], true);
}

#[tokio::test]
#[ignore = "needs the MCP Inspector and searx and the docs corpus (scripts/install-test-deps.sh)"]
async fn research_runs_standalone_and_returns_the_cited_report() {
    let launcher = inspector_for("mcp_research_standalone");
    let stack = SearchStack::start_for("mcp_research_standalone").await;
    let docs = stack.docs.base_url();
    let json_url = format!("{docs}/python3.11-doc/html/library/json.html");
    let model = ScriptedModel::start(Script::new(vec![
        Step::tool_call("search", json!({"queries": ["json decoder"]})).with_usage(900, 20),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1500, 15),
        Step::tool_call("scrape", json!({"urls": [json_url]})).with_usage(1600, 18),
        Step::text(format!(
            "## Summary\nPython decodes JSON with the json module.\n\n## Key findings\n- `json.loads` parses a str into Python objects ([json]({json_url})).\n\n## Links\n- {json_url}\n"
        ))
        .with_usage(5200, 160),
    ]))
    .await
    .unwrap();
    let home = dir();
    let profile = home.path().join("profile.yaml");
    std::fs::write(
        &profile,
        scripted_profile(&model.base_url(), stack.searx.base_url()),
    )
    .unwrap();
    let reports = home.path().join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    let server_args = vec![
        "--profile".to_string(),
        profile.display().to_string(),
        "--reports-dir".to_string(),
        reports.display().to_string(),
    ];
    let env = || vec![("QUARRY_TEST_KEY", "sk-test-secret-123".to_string())];
    let out = call(
        &launcher,
        home.path(),
        &server_args,
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "research",
            "--tool-arg",
            "query=How do I decode JSON in Python?",
            "--tool-arg",
            "mode=quick",
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.json["isError"], false);
    let text = text_of(&out);
    // The one report written: named after the question, in the reports directory.
    let files: Vec<PathBuf> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let report_path = std::fs::canonicalize(&files[0]).unwrap();
    let stem = report_path
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert!(
        regex::Regex::new(r"^how-do-i-decode-json-in-python-[a-z][0-9]$")
            .unwrap()
            .is_match(&stem),
        "{stem}"
    );
    let report = std::fs::read_to_string(&report_path).unwrap();
    assert!(
        report.contains("Python decodes JSON with the json module."),
        "{report}"
    );
    assert!(
        report.contains(&format!("([json]({json_url}))")),
        "{report}"
    );
    // The agent gets the report whole (it is short) and where it lives.
    assert_eq!(
        text,
        format!(
            "{}\n\n---\nFull report: {}",
            report.trim_end(),
            report_path.display()
        )
    );
    assert_eq!(model.request_count(), 4);
    assert!(!out.stdout.contains("sk-test-secret-123"));

    // A new server process finds it again by name.
    let out = call(
        &launcher,
        home.path(),
        &server_args,
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "get_report",
            "--tool-arg",
            &format!("name={stem}"),
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(text_of(&out), text);

    // Bad arguments come back as a tool error that says what is wrong.
    let out = call(
        &launcher,
        home.path(),
        &server_args,
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "research",
            "--tool-arg",
            "query=ab",
        ],
    )
    .await;
    assert_eq!(out.json["isError"], true, "{}", out.stdout);
    assert_eq!(
        text_of(&out),
        "the query must be 3 to 4000 characters, not 2"
    );
    assert_eq!(model.request_count(), 4);
}

#[tokio::test]
#[ignore = "needs the MCP Inspector (scripts/install-test-deps.sh)"]
async fn research_on_a_cluster_creates_a_run_and_returns_the_report_from_its_configmap() {
    let launcher = inspector_for("mcp_research_cluster");
    let kube = FakeApiServer::start().await.unwrap();
    let home = dir();
    let kubeconfig = kube.write_kubeconfig(home.path(), "team-a").unwrap();
    kube.insert(json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchProfile",
        "metadata": {"name": "default", "namespace": "team-a"},
        "spec": {"models": {"primary": {"baseURL": "http://127.0.0.1:9/v1", "model": "m"}}, "search": {"url": "http://127.0.0.1:8888"}}
    }));
    let name = "how-do-i-decode-json-in-python-z0001";
    let report =
        "# How do I decode JSON in Python?\n\nUse `json.loads` ([json](http://docs/json.html)).\n";
    kube.insert(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        // The run's own report (its label and controller owner): the fake server gives the run,
        // created third after this profile and ConfigMap, the uid `uid-3`.
        "metadata": {"name": format!("{name}-report"), "namespace": "team-a",
            "labels": {"quarry.dev/run": name},
            "ownerReferences": [{"apiVersion": QUARRY_GV, "kind": "ResearchRun", "name": name,
                "uid": "uid-3", "controller": true, "blockOwnerDeletion": true}]},
        "data": {"report.md": report, "findings.json": "{}"}
    }));
    kube.script_watch(
        name,
        vec![
            json!({"phase": "Researching", "progress": "40%"}),
            json!({"phase": "Completed", "progress": "100%",
                   "usage": {"inputTokens": 9200, "outputTokens": 213, "costUSD": "0.013630"},
                   "report": {"configMap": format!("{name}-report"), "bytes": report.len(), "sources": 1}}),
        ],
    );
    let env = || vec![("KUBECONFIG", kubeconfig.display().to_string())];
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "research",
            "--tool-arg",
            "query=How do I decode JSON in Python?",
            "--tool-arg",
            "mode=quick",
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let location =
        format!("ConfigMap team-a/{name}-report, key report.md (quarry report {name} -n team-a)");
    let expected = format!("{}\n\n---\nFull report: {location}", report.trim_end());
    assert_eq!(text_of(&out), expected);
    let runs = "/apis/quarry.dev/v1alpha1/namespaces/team-a/researchruns";
    assert_eq!(
        kube.request_lines(),
        [
            "GET /apis/quarry.dev/v1alpha1/namespaces/team-a/researchprofiles/default".to_string(),
            format!("POST {runs}?&fieldManager=quarry-cli"),
            format!("GET {runs}?&fieldSelector=metadata.name%3D{name}&limit=500"),
            format!(
                "GET {runs}?&watch=true&timeoutSeconds=290&fieldSelector=metadata.name%3D{name}&allowWatchBookmarks=true&resourceVersion=103"
            ),
            format!("GET /api/v1/namespaces/team-a/configmaps/{name}-report"),
        ]
    );
    let created = &kube.requests()[1].body;
    assert_eq!(
        created["metadata"]["generateName"],
        "how-do-i-decode-json-in-python-"
    );
    assert_eq!(created["spec"]["mode"], "quick");
    assert_eq!(created["spec"]["profileRef"], "default");

    // list_schedules shows the namespace's schedules with their latest report.
    kube.insert(json!({
        "apiVersion": QUARRY_GV, "kind": "ResearchSchedule",
        "metadata": {"name": "json-weekly", "namespace": "team-a", "creationTimestamp": "2026-11-20T07:00:00Z"},
        "spec": {"schedule": "0 7 * * 1", "runTemplate": {"spec": {"query": "How do I decode JSON in Python?"}}},
        "status": {"lastReport": {"run": "json-weekly-29900000", "configMap": "json-weekly-29900000-report"}, "lastChanges": 2}
    }));
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &["--method", "tools/call", "--tool-name", "list_schedules"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let table = text_of(&out);
    assert!(
        table.starts_with("NAME          SCHEDULE    STATE    ACTIVE   LAST   NEXT   REPORT"),
        "{table}"
    );
    assert!(
        table.contains(
            "json-weekly   0 7 * * 1   Active   0        -      -      json-weekly-29900000   2"
        ),
        "{table}"
    );

    // list_runs shows it as a table; get_report returns the same report.
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &["--method", "tools/call", "--tool-name", "list_runs"],
    )
    .await;
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let table = text_of(&out);
    assert!(
        table.starts_with("NAME                                   PHASE       PROGRESS   COST        SOURCES   AGE\n"),
        "{table}"
    );
    assert!(
        table.contains(&format!(
            "{name}   Completed   100%       $0.013630   1         "
        )),
        "{table}"
    );
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "get_report",
            "--tool-arg",
            &format!("name={name}"),
        ],
    )
    .await;
    assert_eq!(text_of(&out), expected);

    // Without waiting: the run is created and named at once.
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "research",
            "--tool-arg",
            "query=What does VACUUM FULL lock?",
            "--tool-arg",
            "wait=false",
        ],
    )
    .await;
    assert_eq!(
        text_of(&out),
        "Created ResearchRun team-a/what-does-vacuum-full-lock-z0002 (profile default). It runs on the cluster; call get_report with name \"what-does-vacuum-full-lock-z0002\" when it is done; list_runs shows its progress."
    );
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "get_report",
            "--tool-arg",
            "name=what-does-vacuum-full-lock-z0002",
        ],
    )
    .await;
    assert_eq!(
        text_of(&out),
        "ResearchRun team-a/what-does-vacuum-full-lock-z0002 is still Pending (-). Call get_report again later."
    );
    // An unknown run is a tool error with what to do.
    let out = call(
        &launcher,
        home.path(),
        &[],
        env(),
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "get_report",
            "--tool-arg",
            "name=nope",
        ],
    )
    .await;
    assert_eq!(out.json["isError"], true);
    assert_eq!(
        text_of(&out),
        "ResearchRun \"nope\" not found in namespace \"team-a\".\n  List the runs with: quarry list -n team-a   (or quarry list -A for every namespace)"
    );
    let stored: Value = kube
        .object(
            QUARRY_GV,
            "researchruns",
            "team-a",
            "what-does-vacuum-full-lock-z0002",
        )
        .unwrap();
    assert_eq!(stored["spec"]["query"], "What does VACUUM FULL lock?");
}
