//! The web console in a real browser (Debian's headless chromium over WebDriver) and on a real
//! API server: a standalone run's report renders with its citations marked and a hostile report
//! stays inert (with JavaScript on and off); on the cluster the list shows runs, a run's progress
//! advances without a reload, the form creates a run and the button cancels one, both as the
//! user, and a user without rights reads what to ask for. The in-cluster console signs callers
//! in with a token (TokenReview) and applies their RBAC (SubjectAccessReview).
//!
//! Screenshots are saved under each test's temp directory (the path is printed).

use std::path::Path;
use std::time::Duration;

use fantoccini::Locator;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use quarry::cli::cluster::KubeArgs;
use quarry::console::ConsoleArgs;
use quarry_api::ResearchRun;
use quarry_e2e::browser::Browser;
use quarry_e2e::control_plane::{ControlPlane, install_crds};
use quarry_e2e::kube_operator::{apply, install_chart_rbac, user_kubeconfig, wait_for};
use quarry_engine::research::machine::state::{Mode, Phase, RunInput, RunState};
use quarry_engine::research::shell::executor::encode_checkpoint;
use serde_json::json;

const JSON_URL: &str = "https://docs.python.org/3/library/json.html";

/// Serves `router` on a free loopback port; returns its base URL.
async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

/// A finished standalone run in `dir`, as `quarry run --state-dir` leaves it.
fn standalone_run(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let mut state = RunState::new(RunInput::new(
        "How do I decode JSON in Python?",
        Mode::Quick,
    ));
    state.phase = Phase::Completed;
    state.usage.input_tokens = 9200;
    state.usage.output_tokens = 213;
    std::fs::write(
        dir.join("checkpoint.json"),
        encode_checkpoint(&state).unwrap(),
    )
    .unwrap();
    let report = format!(
        "# How do I decode JSON in Python?\n\n## Summary\nUse `json.loads(s)` for a string ([json]({JSON_URL})).\n\n\
<script>document.title = 'pwned by script'</script>\n\n\
A [harmless-looking link](javascript:document.title='pwned-by-link') and \
<img src=x onerror=\"document.title='pwned by image'\"> and \
<a href=\"javascript:document.title='pwned by anchor'\" id=\"evil\">raw anchor</a>.\n"
    );
    std::fs::write(dir.join("report.md"), report).unwrap();
    let findings = json!({
        "claims": [{"claim": "Use json.loads(s) for a string", "url": JSON_URL, "supported": true}],
        "sources": [{"url": JSON_URL, "title": "json — JSON encoder and decoder"}],
        "citedUrls": [JSON_URL],
        "unverifiedReferences": ["https://invented.example/json-guide"]
    });
    std::fs::write(dir.join("findings.json"), findings.to_string()).unwrap();
}

async fn title(b: &Browser) -> String {
    b.client.title().await.unwrap_or_default()
}

async fn text_of(b: &Browser, css: &str) -> String {
    match b.client.find(Locator::Css(css)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver (scripts/install-test-deps.sh)"]
async fn a_standalone_report_renders_with_marked_citations_and_hostile_markup_stays_inert() {
    let tmp = tempfile::tempdir().unwrap();
    standalone_run(&tmp.path().join("runs/json-run"));
    let args = ConsoleArgs {
        state_dir: Some(tmp.path().join("runs")),
        listen: "127.0.0.1:0".into(),
        allow_host: vec![],
        kube: KubeArgs {
            namespace: None,
            kube_context: None,
            kubeconfig: None,
        },
    };
    let base = serve(quarry::console::local_router(&args).await.unwrap()).await;
    let shots = tmp.path().join("screenshots");
    let b = Browser::start(&shots).await;
    b.client.goto(&format!("{base}/console")).await.unwrap();
    let row = text_of(&b, "tr[data-run='standalone/json-run']").await;
    assert!(
        row.contains("json-run") && row.contains("Completed") && row.contains("9413"),
        "{row}"
    );
    b.screenshot("runs").await;
    b.client
        .find(Locator::LinkText("json-run"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // A click does not wait for the navigation it starts.
    b.client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("article.report"))
        .await
        .expect("the run page");
    let verified = text_of(&b, "article.report .cite-verified").await;
    assert_eq!(verified, "verified");
    let removed = text_of(&b, "ul.removed").await;
    assert!(removed.contains("invented.example"), "{removed}");
    // Nothing the model wrote ran: no script changed the title, no handler fired.
    assert_eq!(title(&b).await, "json-run · Quarry");
    let scripts = b
        .client
        .execute("return document.scripts.length", vec![])
        .await
        .unwrap();
    assert_eq!(scripts, json!(1), "only console.js");
    let article = text_of(&b, "article.report").await;
    assert!(
        article.contains("<script>") && article.contains("raw anchor"),
        "shown as text: {article}"
    );
    // The markdown javascript: link lost its target; clicking it does nothing.
    let link = b
        .client
        .find(Locator::XPath(
            "//article//a[contains(., 'harmless-looking link')]",
        ))
        .await
        .unwrap();
    assert_eq!(link.attr("href").await.unwrap(), None);
    link.click().await.unwrap();
    assert_eq!(title(&b).await, "json-run · Quarry");
    let shot = b.screenshot("report").await;
    println!("screenshots: {}", shot.parent().unwrap().display());
    b.close().await;

    // With JavaScript off the page reads the same.
    let off = Browser::start_with(&shots, &["--blink-settings=scriptEnabled=false"]).await;
    off.client
        .goto(&format!("{base}/console/runs/standalone/json-run"))
        .await
        .unwrap();
    assert_eq!(
        text_of(&off, "article.report .cite-verified").await,
        "verified"
    );
    assert!(
        text_of(&off, "article.report")
            .await
            .contains("json.loads(s)")
    );
    off.close().await;
}

fn run_body(name: &str) -> serde_json::Value {
    json!({"apiVersion": "quarry.dev/v1alpha1", "kind": "ResearchRun", "metadata": {"name": name},
           "spec": {"query": "How do CEL validation rules work?", "mode": "quick"}})
}

async fn set_progress(runs: &Api<ResearchRun>, name: &str, phase: &str, progress: &str) {
    runs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase, "progress": progress, "usage": {"inputTokens": 1200, "outputTokens": 40, "costUSD": "0.001900"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver and a kube-apiserver and etcd and helm (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn on_a_cluster_the_console_updates_live_creates_cancels_and_explains_refusals() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    install_crds(&client).await.unwrap();
    install_chart_rbac(&plane, &[]).await.unwrap();
    let ns = plane.namespace("console").await.unwrap();
    let editor = user_kubeconfig(&plane, &ns, "editor", &["quarry-edit", "quarry-view"])
        .await
        .unwrap();
    let nobody = user_kubeconfig(&plane, &ns, "nobody", &[]).await.unwrap();
    apply(&client, Some(&ns), &run_body("going")).await.unwrap();
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    set_progress(&runs, "going", "Researching", "20%").await;
    let console_for = |kubeconfig: &Path| ConsoleArgs {
        state_dir: None,
        listen: "127.0.0.1:0".into(),
        allow_host: vec![],
        kube: KubeArgs {
            namespace: Some(ns.clone()),
            kube_context: None,
            kubeconfig: Some(kubeconfig.to_path_buf()),
        },
    };
    let base = serve(
        quarry::console::local_router(&console_for(&editor))
            .await
            .unwrap(),
    )
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let b = Browser::start(&tmp.path().join("screenshots")).await;

    // The list shows the run; its progress advances without a reload.
    b.client.goto(&format!("{base}/console")).await.unwrap();
    let row = "tr[data-run$='/going'] [data-field='progress']";
    assert_eq!(text_of(&b, row).await, "20%");
    b.client
        .execute("window.__sameDocument = true", vec![])
        .await
        .unwrap();
    // The page subscribes when it loads; give the watch a moment to be established.
    tokio::time::sleep(Duration::from_millis(500)).await;
    set_progress(&runs, "going", "Synthesizing", "60%").await;
    let mut seen = String::new();
    for _ in 0..100 {
        seen = text_of(&b, row).await;
        if seen == "60%" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, "60%", "the row follows the run");
    assert_eq!(
        text_of(&b, "tr[data-run$='/going'] [data-field='phase']").await,
        "Synthesizing"
    );
    let same = b
        .client
        .execute("return window.__sameDocument === true", vec![])
        .await
        .unwrap();
    assert_eq!(same, json!(true), "updated in place, not reloaded");
    b.screenshot("live").await;

    // Create through the form, as the editor.
    b.client.goto(&format!("{base}/console/new")).await.unwrap();
    let form = b.client.form(Locator::Css("form.new")).await.unwrap();
    form.set_by_name("query", "What does VACUUM FULL lock in PostgreSQL?")
        .await
        .unwrap();
    form.submit().await.unwrap();
    // The submit does not wait for the navigation it starts (a busy machine is slow to answer).
    let mut url = String::new();
    for _ in 0..300 {
        url = b.client.current_url().await.unwrap().to_string();
        if url.contains("/console/runs/") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let shown = text_of(&b, "main").await;
    assert!(
        url.contains(&format!("/console/runs/{ns}/what-does-vacuum-full-lock")),
        "{url}: {shown}"
    );
    let made: Vec<ResearchRun> = runs.list(&ListParams::default()).await.unwrap().items;
    let created = made
        .iter()
        .find(|r| r.spec.query == "What does VACUUM FULL lock in PostgreSQL?")
        .expect("the form created the run");
    assert_eq!(created.spec.mode.to_string(), "quick");
    let managers: Vec<String> = created
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.contains(&"quarry-console".to_string()),
        "{managers:?}"
    );

    // Cancel from the run page.
    b.client
        .goto(&format!("{base}/console/runs/{ns}/going"))
        .await
        .unwrap();
    b.client
        .find(Locator::Css("form.cancel button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let cancelled = wait_for(
        "spec.cancel set by the console",
        Duration::from_secs(10),
        || async { runs.get("going").await.ok() },
        |r: &ResearchRun| r.spec.cancel,
    )
    .await;
    assert!(cancelled.is_ok(), "{cancelled:?}");
    b.screenshot("run").await;

    // A plan waiting for approval (status as the operator writes it) is approved from its page.
    let mut waits = run_body("waits");
    waits["spec"]["approval"] = json!({"required": true});
    apply(&client, Some(&ns), &waits).await.unwrap();
    runs.patch_status(
        "waits",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "phase": "Planning",
            "agenda": [{"id": "1", "query": "CEL rules in CRDs", "state": "Pending"}],
            "approval": {"estimatedCostUSD": {"min": "0.004200", "max": "0.031000"}},
            "conditions": [{"type": "AwaitingApproval", "status": "True", "reason": "PlanReady",
                            "message": "the plan waits for approval", "lastTransitionTime": "2026-11-25T08:00:00Z"}]
        }})),
    )
    .await
    .unwrap();
    b.client
        .goto(&format!("{base}/console/runs/{ns}/waits"))
        .await
        .unwrap();
    let section = text_of(&b, "section.approval").await;
    assert!(section.contains("$0.004200–$0.031000"), "{section}");
    b.screenshot("approval").await;
    b.client
        .find(Locator::Css("form.approve button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let approved = wait_for(
        "spec.approval.approved set by the console",
        Duration::from_secs(10),
        || async { runs.get("waits").await.ok() },
        |r: &ResearchRun| r.spec.approval.as_ref().is_some_and(|a| a.approved),
    )
    .await;
    assert!(approved.is_ok(), "{approved:?}");

    // A user without rights reads what to ask for.
    let refused = serve(
        quarry::console::local_router(&console_for(&nobody))
            .await
            .unwrap(),
    )
    .await;
    b.client.goto(&format!("{refused}/console")).await.unwrap();
    let message = text_of(&b, "p.error").await;
    assert!(
        message.contains("forbidden") && message.contains("quarry-view"),
        "{message}"
    );
    assert_eq!(title(&b).await, "Not allowed · Quarry");
    b.screenshot("forbidden").await;
    b.close().await;
}

#[tokio::test]
#[ignore = "needs a kube-apiserver and etcd and helm (scripts/install-test-deps.sh, KUBE_APISERVER_BIN)"]
async fn the_in_cluster_console_signs_callers_in_with_a_token_and_applies_their_rbac() {
    let plane = ControlPlane::start().await.expect("test control plane");
    let client = plane.client();
    install_crds(&client).await.unwrap();
    install_chart_rbac(&plane, &[]).await.unwrap();
    let ns = plane.namespace("console-auth").await.unwrap();
    user_kubeconfig(&plane, &ns, "viewer", &["quarry-view"])
        .await
        .unwrap();
    user_kubeconfig(&plane, &ns, "editor", &["quarry-edit", "quarry-view"])
        .await
        .unwrap();
    let viewer = plane.service_account_token(&ns, "viewer").await.unwrap();
    let editor = plane.service_account_token(&ns, "editor").await.unwrap();
    apply(&client, Some(&ns), &run_body("seen")).await.unwrap();
    // The operator's console, with the operator's (here: admin) client for the reviews and its
    // run event stream (in memory here, as a single operator without Redis has it).
    let events = std::sync::Arc::new(quarry_engine::events::memory::MemoryEvents::new(
        Default::default(),
        None,
    ));
    let directory = std::sync::Arc::new(quarry_operator::server::run_finder::KubeDirectory::new(
        client.clone(),
    ));
    let api = quarry_operator::server::run_events::EventsApi::new(
        events.clone(),
        directory,
        quarry_engine::telemetry::Metrics::new(),
    );
    // Writes go to the API server with the caller's own token, over the admin's connection.
    let kubeconfig = kube::config::Kubeconfig::read_from(plane.kubeconfig()).unwrap();
    let people = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions {
            context: Some("admin".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let base = serve(quarry::console::in_cluster_with(
        client.clone(),
        Some(people),
        Some(api),
    ))
    .await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let list = format!("{base}/console?namespace={ns}");

    // No token: sign in first. A bad token: refused on the sign-in page.
    let r = http.get(&list).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console/login");
    let r = http
        .get(&list)
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("did not accept this token")
    );

    // The viewer reads the runs of the namespace, but not of all namespaces, and cannot create.
    let r = http.get(&list).bearer_auth(&viewer).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(
        page.contains(&format!("data-run=\"{ns}/seen\""))
            && page.contains("signed in as system:serviceaccount"),
        "{page}"
    );
    let r = http
        .get(format!("{base}/console?namespace=*"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("may not list researchruns.quarry.dev in all namespaces")
    );
    // A running run's page follows its event log live; the lines are those of `quarry logs`.
    let runs: Api<ResearchRun> = Api::namespaced(client.clone(), &ns);
    let uid = runs.get("seen").await.unwrap().uid().unwrap();
    let run_ref = quarry_engine::events::RunRef::new(ns.clone(), "seen", uid);
    use quarry_engine::events::RunEvents as _;
    let event = |kind: &str, fields: serde_json::Value| {
        quarry_engine::events::RunEvent::from_object(
            &run_ref,
            kind,
            fields.as_object().cloned().unwrap_or_default(),
            "2026-11-25T08:00:00.000Z",
        )
    };
    events.publish(
        &run_ref,
        event(
            "search",
            json!({"subject": "CEL validation rules", "outcome": "ok", "cache": "miss", "durationMs": 41}),
        ),
    );
    let page = http
        .get(format!("{base}/console/runs/{ns}/seen"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("data-stream=\"/console/runs/{ns}/seen/log\"")),
        "{page}"
    );
    let mut live = http
        .get(format!("{base}/console/runs/{ns}/seen/log"))
        .bearer_auth(&viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
    let first = tokio::time::timeout(Duration::from_secs(10), live.chunk())
        .await
        .expect("a live line")
        .unwrap()
        .unwrap_or_default();
    let first = String::from_utf8_lossy(&first).to_string();
    assert!(
        first.starts_with("data: ") && first.contains("CEL validation rules"),
        "{first:?}"
    );
    events.publish(
        &run_ref,
        event(
            "fetch",
            json!({"subject": "https://kubernetes.io/docs/cel", "outcome": "ok", "cache": "miss", "durationMs": 120}),
        ),
    );
    let second = tokio::time::timeout(Duration::from_secs(10), live.chunk())
        .await
        .expect("the next line as it happens")
        .unwrap()
        .unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&second).contains("kubernetes.io/docs/cel"),
        "{second:?}"
    );
    drop(live);
    let nobody = http
        .get(format!("{base}/console/runs/{ns}/seen/log"))
        .send()
        .await
        .unwrap();
    assert_eq!(nobody.status(), 303, "signed-out callers sign in first");

    let csrf = "c".repeat(64);
    let create = |token: &str| {
        http.post(format!("{base}/console/runs"))
            .bearer_auth(token)
            .header("cookie", format!("quarry_csrf={csrf}"))
            .header("content-type", "application/x-www-form-urlencoded")
            // The form the page posts (the namespace is letters, digits and dashes).
            .body(format!(
                "csrf={csrf}&query=What+is+CEL%3F&namespace={ns}&mode=quick"
            ))
            .send()
    };
    let r = create(&viewer).await.unwrap();
    assert_eq!(r.status(), 403);
    let body = r.text().await.unwrap();
    assert!(
        body.contains(&format!(
            "may not create researchruns.quarry.dev in namespace {ns}"
        )),
        "{body}"
    );
    // The editor creates; the run exists on the API server.
    let r = create(&editor).await.unwrap();
    assert_eq!(r.status(), 303, "{:?}", r.text().await);
    let names: Vec<String> = runs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|r| r.name_any())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("what-is-cel-")),
        "{names:?}"
    );
    // The API server saw the editor create it (audit, admission and RBAC name the person), not
    // the console's own client.
    let editor_user = quarry_e2e::kube_operator::service_account_user(&ns, "editor");
    let creates: Vec<_> = quarry_e2e::kube_operator::audit_requests(&plane)
        .into_iter()
        .filter(|r| r.resource == "researchruns" && r.verb == "create" && r.namespace == ns)
        .collect();
    assert!(
        !creates.is_empty()
            && creates
                .iter()
                .all(|r| r.user == editor_user && r.code == 201),
        "{creates:#?}"
    );

    // Signing in sets a cookie that is Secure, HttpOnly, same-site and short-lived; pages then
    // offer signing out, which expires it.
    let jar = format!("quarry_csrf={csrf}");
    let r = http
        .post(format!("{base}/console/login"))
        .header("cookie", &jar)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&token={editor}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(
        r.headers()["set-cookie"].to_str().unwrap(),
        format!(
            "quarry_token={editor}; Path=/console; Secure; HttpOnly; SameSite=Strict; Max-Age=3600"
        )
    );
    let signed_in = format!("{jar}; quarry_token={editor}");
    let page = http
        .get(&list)
        .header("cookie", &signed_in)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("href=\"/console/logout\">Sign out</a>"),
        "{page}"
    );
    let r = http
        .post(format!("{base}/console/logout"))
        .header("cookie", &signed_in)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/console/login");
    assert_eq!(
        r.headers()["set-cookie"].to_str().unwrap(),
        "quarry_token=; Path=/console; Secure; HttpOnly; SameSite=Strict; Max-Age=0"
    );
    // Signing out needs the page's CSRF token (another site cannot sign the person out).
    let r = http
        .post(format!("{base}/console/logout"))
        .header("cookie", &signed_in)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("csrf=")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
}
