//! The console's HTTP routes (axum): pages, downloads, the live SSE feed, and the two write
//! actions (create, cancel) behind a CSRF check. Every response carries a strict CSP.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};

use super::auth::{Action, Authorizer, Caller};
use super::model::url_segment;
use super::render::{self, Filter};
use super::source::{NewRun, RunSource, SourceError};

/// The stylesheet (one for the whole console).
const CSS: &str = include_str!("assets/console.css");
/// The live-update script (optional: pages work without it).
const JS: &str = include_str!("assets/console.js");
/// Cookie holding the CSRF token (double submit: it must equal the form's `csrf` field).
pub const CSRF_COOKIE: &str = "quarry_csrf";
/// Cookie holding the in-cluster console's bearer token.
pub const TOKEN_COOKIE: &str = "quarry_token";
/// How long the token cookie lives (an hour, as `kubectl create token` mints by default): a
/// browser left signed in on a shared machine forgets it.
pub const TOKEN_MAX_AGE_SECS: u64 = 3600;

/// Pure: the Set-Cookie value holding the caller's token: sent only over HTTPS (or to
/// localhost), never readable by scripts, never sent from another site, gone after an hour.
pub fn token_cookie(token: &str) -> String {
    format!(
        "{TOKEN_COOKIE}={token}; Path=/console; Secure; HttpOnly; SameSite=Strict; Max-Age={TOKEN_MAX_AGE_SECS}"
    )
}

/// Pure: the Set-Cookie value that signs out (the token cookie, emptied and expired).
pub fn signed_out_cookie() -> String {
    format!("{TOKEN_COOKIE}=; Path=/console; Secure; HttpOnly; SameSite=Strict; Max-Age=0")
}
/// The Content-Security-Policy of every response: no inline script or style, nothing loaded
/// from elsewhere, no framing. A report's images and scripts, if any survived, cannot load.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What the handlers share.
#[derive(Clone)]
pub struct Console {
    source: Arc<dyn RunSource>,
    /// Set in the cluster: callers sign in with a token, each action is checked for them.
    auth: Option<Arc<Authorizer>>,
    /// The operator's run event stream (in the cluster): the live event log of a run page.
    events: Option<quarry_operator::server::run_events::EventsApi>,
}

impl Console {
    /// A console on `source`; `auth` for the in-cluster console.
    pub fn new(source: Arc<dyn RunSource>, auth: Option<Arc<Authorizer>>) -> Self {
        Self {
            source,
            auth,
            events: None,
        }
    }

    /// Serves the live event log of running runs from the operator's event stream.
    pub fn with_events(mut self, events: quarry_operator::server::run_events::EventsApi) -> Self {
        self.events = Some(events);
        self
    }
}

/// The console's routes under `/console`.
pub fn router(console: Console) -> Router {
    Router::new()
        .route("/console", get(runs))
        .route("/console/", get(runs))
        .route("/console/new", get(new_run))
        .route("/console/runs", post(create))
        .route("/console/runs/{namespace}/{name}", get(run))
        .route("/console/runs/{namespace}/{name}/cancel", post(cancel))
        .route("/console/runs/{namespace}/{name}/approve", post(approve))
        .route("/console/runs/{namespace}/{name}/log", get(log))
        .route("/console/runs/{namespace}/{name}/report.md", get(report_md))
        .route(
            "/console/runs/{namespace}/{name}/findings.json",
            get(findings_json),
        )
        .route("/console/watch", get(watch))
        .route("/console/login", get(login_form).post(login))
        .route("/console/logout", get(logout_form).post(logout))
        .route(
            "/console/static/console.css",
            get(|| async { asset(CSS, "text/css; charset=utf-8") }),
        )
        .route(
            "/console/static/console.js",
            get(|| async { asset(JS, "text/javascript; charset=utf-8") }),
        )
        .layer(axum::middleware::map_response(secure_headers))
        .with_state(console)
}

async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// Pure: the value of cookie `name` in the request's Cookie headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// The request's CSRF token, and the cookie to set when it had none.
fn csrf_of(headers: &HeaderMap) -> (String, Option<String>) {
    match cookie(headers, CSRF_COOKIE).filter(|t| t.len() == 64) {
        Some(token) => (token, None),
        None => {
            let bytes: [u8; 32] = rand::random();
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let set = format!("{CSRF_COOKIE}={token}; Path=/console; HttpOnly; SameSite=Strict");
            (token, Some(set))
        }
    }
}

/// Pure: whether a write request is the console's own form: the cookie and the field agree
/// (compared in constant time) and the browser does not say it came from another site.
pub fn csrf_ok(headers: &HeaderMap, field: Option<&str>) -> bool {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let cross_site = fetch_site.is_some_and(|v| v != "same-origin" && v != "none");
    let origin_ok = match (
        headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()),
        headers.get(header::HOST).and_then(|v| v.to_str().ok()),
    ) {
        // A browser hiding the origin (privacy settings) still says where the request came from.
        (Some("null"), _) => fetch_site == Some("same-origin"),
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest == host),
        _ => true,
    };
    let (Some(cookie), Some(field)) = (cookie(headers, CSRF_COOKIE), field) else {
        return false;
    };
    let same = cookie.len() == field.len()
        && cookie
            .bytes()
            .zip(field.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    same && !cross_site && origin_ok && cookie.len() == 64
}

fn html(status: StatusCode, body: String, set_cookie: Option<String>) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response();
    if let Some(c) = set_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().append(header::SET_COOKIE, c);
    }
    response
}

impl Console {
    fn label(&self, caller: Option<&Caller>) -> String {
        match caller {
            Some(c) => format!(
                "{}{}{}",
                self.source.describe(),
                render::SIGNED_IN_MARK,
                c.user
            ),
            None => self.source.describe(),
        }
    }

    /// The failure as a page: RBAC refusals are 403 with what to ask for.
    fn fail(&self, e: &SourceError, caller: Option<&Caller>) -> Response {
        let (status, title) = match e {
            SourceError::Forbidden(_) => (StatusCode::FORBIDDEN, "Not allowed"),
            SourceError::NotFound(_) => (StatusCode::NOT_FOUND, "Not found"),
            SourceError::Invalid(_) => (StatusCode::UNPROCESSABLE_ENTITY, "Refused"),
            SourceError::Unsupported(_) => (StatusCode::METHOD_NOT_ALLOWED, "Not available here"),
            SourceError::Unavailable(_) => (StatusCode::BAD_GATEWAY, "Cannot reach the cluster"),
        };
        html(
            status,
            render::error_page(title, &e.to_string(), &self.label(caller)),
            None,
        )
    }

    /// In the cluster: the signed-in caller, or the response that asks them to sign in.
    async fn caller(&self, headers: &HeaderMap) -> Result<Option<Caller>, Response> {
        let Some(auth) = &self.auth else {
            return Ok(None);
        };
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::to_string)
            .or_else(|| cookie(headers, TOKEN_COOKIE));
        let Some(token) = token else {
            return Err(Redirect::to("/console/login").into_response());
        };
        match auth.review(&token).await {
            Ok(caller) => Ok(Some(caller)),
            Err(e @ SourceError::Forbidden(_)) => {
                let (csrf, set) = csrf_of(headers);
                Err(html(
                    StatusCode::UNAUTHORIZED,
                    render::login_page(&csrf, Some(&e.to_string())),
                    set,
                ))
            }
            Err(e) => Err(self.fail(&e, None)),
        }
    }

    /// The source a write goes through: in the cluster, the signed-in person's own identity
    /// (their token), so the API server authorizes, admits and audits them, not the operator.
    async fn acting(&self, caller: Option<&Caller>) -> Result<Arc<dyn RunSource>, Response> {
        let Some(token) = caller.and_then(|c| c.token.as_ref()) else {
            return Ok(self.source.clone());
        };
        match self.source.as_person(token.expose()).await {
            Ok(Some(person)) => Ok(person),
            Ok(None) => Ok(self.source.clone()),
            Err(e) => Err(self.fail(&e, caller)),
        }
    }

    /// In the cluster: whether the caller may do `action` (locally the API server decides).
    async fn check(&self, caller: Option<&Caller>, action: Action<'_>) -> Result<(), Response> {
        match (&self.auth, caller) {
            (Some(auth), Some(caller)) => auth
                .allow(caller, action)
                .await
                .map_err(|e| self.fail(&e, Some(caller))),
            _ => Ok(()),
        }
    }
}

/// The signed-in caller (in the cluster) or nobody (locally: the API server knows the user);
/// extracting it answers with the sign-in page when the caller must sign in first.
struct Signed(Option<Caller>);

impl axum::extract::FromRequestParts<Console> for Signed {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        console: &Console,
    ) -> Result<Self, Self::Rejection> {
        console.caller(&parts.headers).await.map(Signed)
    }
}

fn runs_of(namespace: Option<&str>) -> Action<'_> {
    Action {
        verb: "list",
        group: "quarry.dev",
        resource: "researchruns",
        namespace,
    }
}

/// `*` or empty means all namespaces; nothing given means the source's default.
fn namespace_of(asked: Option<&str>, default: Option<String>) -> Option<String> {
    match asked.map(str::trim) {
        Some("*") | Some("") => None,
        Some(ns) => Some(ns.to_string()),
        None => default,
    }
}

async fn runs(
    State(c): State<Console>,
    Signed(caller): Signed,
    Query(filter): Query<Filter>,
) -> Response {
    let namespace = namespace_of(filter.namespace.as_deref(), c.source.default_namespace());
    if let Err(r) = c
        .check(caller.as_ref(), runs_of(namespace.as_deref()))
        .await
    {
        return r;
    }
    match c.source.list(namespace.as_deref()).await {
        Ok(list) => html(
            StatusCode::OK,
            render::runs_page(
                &list,
                &filter,
                namespace.as_deref(),
                &c.label(caller.as_ref()),
            ),
            None,
        ),
        Err(e) => c.fail(&e, caller.as_ref()),
    }
}

async fn run(
    State(c): State<Console>,
    Signed(caller): Signed,
    headers: HeaderMap,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let read = [("quarry.dev", "researchruns"), ("", "configmaps")];
    for (group, resource) in read {
        let action = Action {
            verb: "get",
            group,
            resource,
            namespace: Some(&namespace),
        };
        if let Err(r) = c.check(caller.as_ref(), action).await {
            return r;
        }
    }
    let view = match c.source.get(&namespace, &name).await {
        Ok(v) => v,
        Err(e) => return c.fail(&e, caller.as_ref()),
    };
    let artifacts = match c.source.artifacts(&namespace, &name).await {
        Ok(a) => a,
        Err(e) => return c.fail(&e, caller.as_ref()),
    };
    let (csrf, set) = csrf_of(&headers);
    let page = render::run_page(
        &view,
        &artifacts,
        &csrf,
        c.source.writable(),
        c.events.is_some(),
        &c.label(caller.as_ref()),
    );
    html(StatusCode::OK, page, set)
}

/// A running run's events as they happen, one rendered line per message (the lines of
/// `quarry logs`), from the operator's event stream after the caller's access was checked.
async fn log(
    State(c): State<Console>,
    Signed(caller): Signed,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    let Some(api) = c.events.clone() else {
        let e = SourceError::Unsupported(format!(
            "this console does not serve live events; follow them with: quarry logs -f {name} -n {namespace}"
        ));
        return c.fail(&e, caller.as_ref());
    };
    let action = Action {
        verb: "get",
        group: "quarry.dev",
        resource: "researchruns",
        namespace: Some(&namespace),
    };
    if let Err(r) = c.check(caller.as_ref(), action).await {
        return r;
    }
    let query = quarry_operator::server::run_events::EventsQuery {
        after: None,
        follow: Some(true),
    };
    // Each person holds a bounded number of live logs, as on the operator's own route.
    let who = caller.as_ref().map_or("local console", |c| c.user.as_str());
    let upstream = api
        .respond_as(who, &namespace, &name, query, &HeaderMap::new())
        .await;
    if !upstream.status().is_success() {
        return upstream;
    }
    let mut parser = crate::logs::SseParser::new();
    let lines = upstream
        .into_body()
        .into_data_stream()
        .flat_map(move |chunk| {
            let messages = chunk.map(|b| parser.push(&b)).unwrap_or_default();
            futures::stream::iter(messages)
        })
        .map(|m| {
            let line = serde_json::from_str::<serde_json::Value>(&m.data)
                .map(|v| crate::logs::render(&v))
                .unwrap_or(m.data);
            Ok::<Event, Infallible>(Event::default().data(line))
        });
    Sse::new(lines)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

async fn download(
    c: &Console,
    caller: Option<Caller>,
    namespace: &str,
    name: &str,
    json: bool,
) -> Response {
    let action = Action {
        verb: "get",
        group: "",
        resource: "configmaps",
        namespace: Some(namespace),
    };
    if let Err(r) = c.check(caller.as_ref(), action).await {
        return r;
    }
    let artifacts = match c.source.artifacts(namespace, name).await {
        Ok(a) => a,
        Err(e) => return c.fail(&e, caller.as_ref()),
    };
    let (body, file, content_type) = if json {
        (
            artifacts
                .findings
                .map(|f| serde_json::to_string_pretty(&f).unwrap_or_default()),
            "findings.json",
            "application/json",
        )
    } else {
        (
            artifacts.report,
            "report.md",
            "text/markdown; charset=utf-8",
        )
    };
    match body {
        Some(body) => {
            let disposition = format!("attachment; filename=\"{}-{file}\"", url_segment(name));
            let mut response = (
                StatusCode::OK,
                [(header::CONTENT_TYPE, content_type)],
                Body::from(body),
            )
                .into_response();
            if let Ok(v) = HeaderValue::from_str(&disposition) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_DISPOSITION, v);
            }
            response
        }
        None => c.fail(
            &SourceError::NotFound(format!("run {name} has no {file} yet")),
            caller.as_ref(),
        ),
    }
}

async fn report_md(
    State(c): State<Console>,
    Signed(caller): Signed,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    download(&c, caller, &namespace, &name, false).await
}

async fn findings_json(
    State(c): State<Console>,
    Signed(caller): Signed,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    download(&c, caller, &namespace, &name, true).await
}

async fn new_run(State(c): State<Console>, Signed(caller): Signed, headers: HeaderMap) -> Response {
    let (csrf, set) = csrf_of(&headers);
    let namespace = c
        .source
        .default_namespace()
        .unwrap_or_else(|| "default".into());
    let page = render::new_run_page(
        &NewRun::default(),
        &namespace,
        &csrf,
        None,
        c.source.writable(),
        &c.label(caller.as_ref()),
    );
    html(StatusCode::OK, page, set)
}

fn forged(c: &Console) -> Response {
    html(
        StatusCode::FORBIDDEN,
        render::error_page(
            "Refused",
            "This form was not sent by this console's page (its CSRF token is missing or wrong). Reload the page and try again.",
            &c.source.describe(),
        ),
        None,
    )
}

async fn create(
    State(c): State<Console>,
    Signed(caller): Signed,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if !csrf_ok(&headers, form.get("csrf").map(String::as_str)) {
        return forged(&c);
    }
    let field = |k: &str| form.get(k).cloned().unwrap_or_default();
    let new = NewRun {
        query: field("query"),
        mode: field("mode"),
        profile: field("profile"),
        outputs: field("outputs"),
        max_cost_usd: field("max_cost_usd"),
        timeout: field("timeout"),
    };
    let namespace = Some(field("namespace"))
        .filter(|n| !n.trim().is_empty())
        .or_else(|| c.source.default_namespace())
        .unwrap_or_else(|| "default".into());
    let action = Action {
        verb: "create",
        group: "quarry.dev",
        resource: "researchruns",
        namespace: Some(&namespace),
    };
    if let Err(r) = c.check(caller.as_ref(), action).await {
        return r;
    }
    let source = match c.acting(caller.as_ref()).await {
        Ok(source) => source,
        Err(r) => return r,
    };
    match source.create(&namespace, &new).await {
        Ok(name) => Redirect::to(&format!(
            "/console/runs/{}/{}",
            url_segment(&namespace),
            url_segment(&name)
        ))
        .into_response(),
        Err(e @ SourceError::Invalid(_)) => {
            let (csrf, set) = csrf_of(&headers);
            let page = render::new_run_page(
                &new,
                &namespace,
                &csrf,
                Some(&e.to_string()),
                true,
                &c.label(caller.as_ref()),
            );
            html(StatusCode::UNPROCESSABLE_ENTITY, page, set)
        }
        Err(e) => c.fail(&e, caller.as_ref()),
    }
}

/// What a run page's button asks: stop the run (cancel, or reject its plan), or approve its plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Cancel,
    Approve,
}

/// Applies a button's decision as the caller, after the CSRF and access checks.
async fn decide(
    c: Console,
    caller: Option<Caller>,
    headers: HeaderMap,
    namespace: String,
    name: String,
    form: HashMap<String, String>,
    decision: Decision,
) -> Response {
    if !csrf_ok(&headers, form.get("csrf").map(String::as_str)) {
        return forged(&c);
    }
    let action = Action {
        verb: "patch",
        group: "quarry.dev",
        resource: "researchruns",
        namespace: Some(&namespace),
    };
    if let Err(r) = c.check(caller.as_ref(), action).await {
        return r;
    }
    let source = match c.acting(caller.as_ref()).await {
        Ok(source) => source,
        Err(r) => return r,
    };
    let done = match decision {
        Decision::Cancel => source.cancel(&namespace, &name).await,
        Decision::Approve => source.approve(&namespace, &name).await,
    };
    match done {
        Ok(()) => Redirect::to(&format!(
            "/console/runs/{}/{}",
            url_segment(&namespace),
            url_segment(&name)
        ))
        .into_response(),
        Err(e) => c.fail(&e, caller.as_ref()),
    }
}

async fn cancel(
    State(c): State<Console>,
    Signed(caller): Signed,
    headers: HeaderMap,
    Path((namespace, name)): Path<(String, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    decide(c, caller, headers, namespace, name, form, Decision::Cancel).await
}

async fn approve(
    State(c): State<Console>,
    Signed(caller): Signed,
    headers: HeaderMap,
    Path((namespace, name)): Path<(String, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    decide(c, caller, headers, namespace, name, form, Decision::Approve).await
}

/// Query of the live feed.
#[derive(Debug, Default, serde::Deserialize)]
struct WatchQuery {
    namespace: Option<String>,
    name: Option<String>,
    phase: Option<String>,
}

async fn watch(
    State(c): State<Console>,
    Signed(caller): Signed,
    Query(q): Query<WatchQuery>,
) -> Response {
    let namespace = namespace_of(q.namespace.as_deref(), c.source.default_namespace());
    let action = Action {
        verb: "watch",
        group: "quarry.dev",
        resource: "researchruns",
        namespace: namespace.as_deref(),
    };
    if let Err(r) = c.check(caller.as_ref(), action).await {
        return r;
    }
    let name = q.name.filter(|n| !n.is_empty());
    let phase = q.phase.filter(|p| !p.is_empty());
    let stream = c.source.watch(namespace).filter(move |v| {
        let keep = name.as_ref().is_none_or(|n| *n == v.name)
            && phase.as_ref().is_none_or(|p| *p == v.phase);
        futures::future::ready(keep)
    });
    let events: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> =
        Box::pin(stream.map(|view| {
            Ok(Event::default()
                .event("run")
                .data(serde_json::to_string(&view).unwrap_or_default()))
        }));
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

async fn login_form(State(c): State<Console>, headers: HeaderMap) -> Response {
    if c.auth.is_none() {
        return Redirect::to("/console").into_response();
    }
    let (csrf, set) = csrf_of(&headers);
    html(StatusCode::OK, render::login_page(&csrf, None), set)
}

async fn login(
    State(c): State<Console>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let Some(auth) = &c.auth else {
        return Redirect::to("/console").into_response();
    };
    if !csrf_ok(&headers, form.get("csrf").map(String::as_str)) {
        return forged(&c);
    }
    let token = form
        .get("token")
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    match auth.review(&token).await {
        Ok(_) => {
            let mut response = Redirect::to("/console").into_response();
            if let Ok(v) = HeaderValue::from_str(&token_cookie(&token)) {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            response
        }
        Err(e) => {
            let (csrf, set) = csrf_of(&headers);
            html(
                StatusCode::UNAUTHORIZED,
                render::login_page(&csrf, Some(&e.to_string())),
                set,
            )
        }
    }
}

async fn logout_form(State(c): State<Console>, headers: HeaderMap) -> Response {
    if c.auth.is_none() {
        return Redirect::to("/console").into_response();
    }
    let (csrf, set) = csrf_of(&headers);
    html(StatusCode::OK, render::logout_page(&csrf), set)
}

/// Signs out: the token cookie is expired (the form's CSRF token guards against a page of
/// another site signing the person out).
async fn logout(
    State(c): State<Console>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if c.auth.is_none() {
        return Redirect::to("/console").into_response();
    }
    if !csrf_ok(&headers, form.get("csrf").map(String::as_str)) {
        return forged(&c);
    }
    let mut response = Redirect::to("/console/login").into_response();
    if let Ok(v) = HeaderValue::from_str(&signed_out_cookie()) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}
