//! Handler tests of the console over a fake source: headers, CSRF, refusals, pages.

use std::sync::Mutex;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tower::ServiceExt;

use super::model::{RunView, TaskView};
use super::server::{CSP, CSRF_COOKIE, Console, router};
use super::source::{Artifacts, NewRun, RunSource, SourceError};

#[derive(Default)]
struct Fake {
    forbidden: bool,
    created: Mutex<Vec<(String, NewRun)>>,
    cancelled: Mutex<Vec<String>>,
    approved: Mutex<Vec<String>>,
}

fn view(name: &str, phase: &str) -> RunView {
    RunView {
        namespace: "team".into(),
        name: name.into(),
        query: "How do I decode JSON in Python?".into(),
        mode: "quick".into(),
        phase: phase.into(),
        progress: "100%".into(),
        cost: "0.013630".into(),
        tokens: 9413,
        age: "3m".into(),
        report: format!("ConfigMap team/{name}-report"),
        message: String::new(),
        agenda: vec![TaskView {
            query: "json module".into(),
            state: "Completed".into(),
        }],
        by_model: vec![],
        finished: phase == "Completed",
        estimate: (phase == "AwaitingApproval").then(|| "$0.004200–$0.031000".to_string()),
    }
}

impl RunSource for Fake {
    fn describe(&self) -> String {
        "fake cluster".into()
    }
    fn default_namespace(&self) -> Option<String> {
        Some("team".into())
    }
    fn list<'a>(&'a self, _: Option<&'a str>) -> BoxFuture<'a, Result<Vec<RunView>, SourceError>> {
        Box::pin(async move {
            if self.forbidden {
                return Err(SourceError::Forbidden(
                    "Kubernetes refused to list researchruns in namespace team: forbidden. Ask a cluster admin to bind you the quarry-view ClusterRole".into(),
                ));
            }
            Ok(vec![
                view("json", "Completed"),
                view("going", "Researching"),
            ])
        })
    }
    fn get<'a>(&'a self, _: &'a str, name: &'a str) -> BoxFuture<'a, Result<RunView, SourceError>> {
        Box::pin(async move {
            let phase = match name {
                "json" => "Completed",
                "waits" => "AwaitingApproval",
                _ => "Researching",
            };
            Ok(view(name, phase))
        })
    }
    fn artifacts<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Artifacts, SourceError>> {
        Box::pin(async move {
            Ok(Artifacts {
                report: Some("Use `json.loads` ([json](https://docs.python.org/3/library/json.html)).\n\n<script>alert(1)</script>".into()),
                findings: Some(serde_json::json!({
                    "claims": [{"claim": "Use json.loads", "url": "https://docs.python.org/3/library/json.html", "supported": true}],
                    "sources": [{"url": "https://docs.python.org/3/library/json.html", "title": "json"}],
                    "citedUrls": ["https://docs.python.org/3/library/json.html"]
                })),
                events: vec![serde_json::json!({"type": "runFinished", "phase": "Completed"})],
            })
        })
    }
    fn create<'a>(
        &'a self,
        ns: &'a str,
        run: &'a NewRun,
    ) -> BoxFuture<'a, Result<String, SourceError>> {
        Box::pin(async move {
            self.created
                .lock()
                .unwrap()
                .push((ns.to_string(), run.clone()));
            Ok("how-do-i-x7k2p".to_string())
        })
    }
    fn cancel<'a>(&'a self, _: &'a str, name: &'a str) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async move {
            self.cancelled.lock().unwrap().push(name.to_string());
            Ok(())
        })
    }
    fn approve<'a>(&'a self, _: &'a str, name: &'a str) -> BoxFuture<'a, Result<(), SourceError>> {
        Box::pin(async move {
            self.approved.lock().unwrap().push(name.to_string());
            Ok(())
        })
    }
    fn watch(&self, _: Option<String>) -> BoxStream<'static, RunView> {
        futures::stream::iter(vec![view("going", "Synthesizing")]).boxed()
    }
    fn writable(&self) -> bool {
        true
    }
}

async fn call(
    fake: std::sync::Arc<Fake>,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, String) {
    let app = router(Console::new(fake, None));
    let response = app.oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(uri: &str) -> Request<Body> {
    Request::get(uri).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn pages_carry_a_strict_csp_and_the_run_page_marks_citations() {
    let fake = std::sync::Arc::new(Fake::default());
    let (status, headers, body) = call(fake.clone(), get("/console?namespace=team")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_SECURITY_POLICY], CSP);
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(
        body.contains("<tr data-run=\"team/json\">") && body.contains("Researching"),
        "{body}"
    );
    let (status, _, body) =
        call(fake.clone(), get("/console?namespace=team&phase=Completed")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains("team/json") && !body.contains("team/going"),
        "{body}"
    );
    let (status, headers, body) = call(fake.clone(), get("/console/runs/team/json")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("cite cite-verified"), "{body}");
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !body.contains("<script>alert"),
        "{body}"
    );
    assert!(
        headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .starts_with(&format!("{CSRF_COOKIE}="))
    );
    // A finished run has no cancel button; a going one has.
    assert!(!body.contains("Cancel run"));
    let (_, _, going) = call(fake.clone(), get("/console/runs/team/going")).await;
    assert!(
        going.contains("Cancel run") && going.contains("name=\"csrf\""),
        "{going}"
    );
    let (status, headers, md) = call(fake.clone(), get("/console/runs/team/json/report.md")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .contains("json-report.md")
    );
    assert!(md.starts_with("Use `json.loads`"));
    let (_, _, css) = call(fake, get("/console/static/console.css")).await;
    assert!(css.contains(".cite-verified"));
}

#[tokio::test]
async fn writes_need_the_pages_csrf_token() {
    let fake = std::sync::Arc::new(Fake::default());
    let token = "a".repeat(64);
    let form =
        |csrf: &str| format!("csrf={csrf}&query=How+do+I+decode+JSON%3F&namespace=team&mode=quick");
    let post = |uri: &str, body: String, cookie: Option<&str>, site: &str| {
        let mut b = Request::post(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header("sec-fetch-site", site);
        if let Some(c) = cookie {
            b = b.header(header::COOKIE, format!("{CSRF_COOKIE}={c}"));
        }
        b.body(Body::from(body)).unwrap()
    };
    // No cookie, a wrong token, or another site: refused, nothing created.
    for req in [
        post("/console/runs", form(&token), None, "same-origin"),
        post(
            "/console/runs",
            form(&"b".repeat(64)),
            Some(&token),
            "same-origin",
        ),
        post("/console/runs", form(&token), Some(&token), "cross-site"),
        post(
            "/console/runs/team/going/cancel",
            format!("csrf={}", "b".repeat(64)),
            Some(&token),
            "same-origin",
        ),
    ] {
        let (status, _, body) = call(fake.clone(), req).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("CSRF"), "{body}");
    }
    assert!(fake.created.lock().unwrap().is_empty() && fake.cancelled.lock().unwrap().is_empty());
    // The page's own form: created, then redirected to the new run.
    let (status, headers, _) = call(
        fake.clone(),
        post("/console/runs", form(&token), Some(&token), "same-origin"),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers[header::LOCATION],
        "/console/runs/team/how-do-i-x7k2p"
    );
    let created = fake.created.lock().unwrap().clone();
    assert_eq!(created[0].0, "team");
    assert_eq!(created[0].1.query, "How do I decode JSON?");
    let (status, _, _) = call(
        fake.clone(),
        post(
            "/console/runs/team/going/cancel",
            format!("csrf={token}"),
            Some(&token),
            "same-origin",
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(*fake.cancelled.lock().unwrap(), vec!["going".to_string()]);
}

#[tokio::test]
async fn a_refusal_is_a_page_that_says_what_to_ask_for() {
    let fake = std::sync::Arc::new(Fake {
        forbidden: true,
        ..Fake::default()
    });
    let (status, _, body) = call(fake, get("/console")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body.contains("Not allowed") && body.contains("quarry-view"),
        "{body}"
    );
}

#[tokio::test]
async fn the_live_feed_sends_run_changes_as_server_sent_events() {
    let fake = std::sync::Arc::new(Fake::default());
    let (status, headers, body) = call(fake, get("/console/watch?namespace=team&name=going")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    assert!(
        body.contains("event: run") && body.contains("\"phase\":\"Synthesizing\""),
        "{body}"
    );
}

#[test]
fn a_hidden_origin_is_accepted_only_from_the_same_origin() {
    use super::server::csrf_ok;
    use axum::http::HeaderMap;
    let token = "d".repeat(64);
    let headers = |origin: &str, site: &str| {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            format!("{CSRF_COOKIE}={token}").parse().unwrap(),
        );
        h.insert(header::HOST, "127.0.0.1:8090".parse().unwrap());
        h.insert(header::ORIGIN, origin.parse().unwrap());
        h.insert("sec-fetch-site", site.parse().unwrap());
        h
    };
    assert!(csrf_ok(
        &headers("http://127.0.0.1:8090", "same-origin"),
        Some(&token)
    ));
    assert!(csrf_ok(&headers("null", "same-origin"), Some(&token)));
    assert!(!csrf_ok(&headers("null", "cross-site"), Some(&token)));
    assert!(!csrf_ok(
        &headers("http://evil.example", "same-origin"),
        Some(&token)
    ));
}

#[tokio::test]
async fn a_plan_awaiting_approval_is_approved_or_rejected_from_its_page() {
    let fake = std::sync::Arc::new(Fake::default());
    let (_, _, page) = call(fake.clone(), get("/console/runs/team/waits")).await;
    assert!(
        page.contains("Approve plan")
            && page.contains("Reject plan")
            && page.contains("$0.004200–$0.031000"),
        "{page}"
    );
    let (_, _, going) = call(fake.clone(), get("/console/runs/team/going")).await;
    assert!(
        !going.contains("Approve plan"),
        "only a waiting plan is approved"
    );
    let token = "e".repeat(64);
    let post = |uri: &str, csrf: &str| {
        Request::post(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::COOKIE, format!("{CSRF_COOKIE}={token}"))
            .body(Body::from(format!("csrf={csrf}")))
            .unwrap()
    };
    let (status, _, _) = call(
        fake.clone(),
        post("/console/runs/team/waits/approve", &"f".repeat(64)),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a forged approval is refused"
    );
    assert!(fake.approved.lock().unwrap().is_empty());
    let (status, headers, _) = call(
        fake.clone(),
        post("/console/runs/team/waits/approve", &token),
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/console/runs/team/waits");
    assert_eq!(*fake.approved.lock().unwrap(), vec!["waits".to_string()]);
}

#[test]
fn a_callers_token_is_never_printed_and_the_cookie_is_locked_down() {
    let caller = super::auth::Caller {
        user: "alice".into(),
        uid: None,
        groups: vec![],
        token: Some(super::auth::BearerToken::new("eyJ-secret-token")),
    };
    assert!(!format!("{caller:?}").contains("eyJ-secret-token"));
    let set = super::server::token_cookie("eyJ-secret-token");
    for flag in [
        "Secure",
        "HttpOnly",
        "SameSite=Strict",
        "Max-Age=3600",
        "Path=/console",
    ] {
        assert!(set.split("; ").any(|part| part == flag), "{flag} in {set}");
    }
    assert!(super::server::signed_out_cookie().ends_with("Max-Age=0"));
}
