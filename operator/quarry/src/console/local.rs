//! The local console's front door. `quarry console` acts with the user's kubeconfig identity, so
//! a web page of another site must not reach it: requests must name this console's own Host
//! (a page that re-points its DNS name at 127.0.0.1 still sends its own name), and carry the
//! launch key that only the printed address holds (it becomes an HttpOnly cookie on first use),
//! which also keeps out other users and processes of the same machine.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::render;
use super::server::cookie;

/// Cookie holding the launch key once the printed address was opened.
pub const LAUNCH_COOKIE: &str = "quarry_launch";
/// Query parameter of the printed address that carries the launch key.
pub const LAUNCH_PARAM: &str = "launch";

/// Host allow-list and launch key of one `quarry console` process.
#[derive(Clone)]
pub struct LocalGuard {
    hosts: Arc<Vec<String>>,
    key: Arc<str>,
}

impl std::fmt::Debug for LocalGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGuard")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl LocalGuard {
    /// A guard for a console on `port` with launch key `key`: the loopback names on that port
    /// and `extra` (`host:port`, compared without case) are the Hosts it answers to.
    pub fn new(port: u16, extra: &[String], key: &str) -> Self {
        let mut hosts = vec![
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("[::1]:{port}"),
        ];
        hosts.extend(extra.iter().map(|h| h.trim().to_ascii_lowercase()));
        Self {
            hosts: Arc::new(hosts),
            key: Arc::from(key),
        }
    }

    /// [`LocalGuard::new`] with a fresh random key (256 bits, hex).
    pub fn random(port: u16, extra: &[String]) -> Self {
        let bytes: [u8; 32] = rand::random();
        let key: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self::new(port, extra, &key)
    }

    /// The address to open: the console with this launch's key.
    pub fn launch_url(&self, addr: SocketAddr) -> String {
        let host = if addr.ip().is_unspecified() || addr.ip().is_loopback() {
            format!("127.0.0.1:{}", addr.port())
        } else {
            addr.to_string()
        };
        format!("http://{host}/console?{LAUNCH_PARAM}={}", self.key)
    }

    /// Pure: whether a request naming `host` is meant for this console.
    pub fn host_allowed(&self, host: Option<&str>) -> bool {
        host.map(|h| h.trim().to_ascii_lowercase())
            .is_some_and(|h| self.hosts.contains(&h))
    }

    fn key_matches(&self, given: &str) -> bool {
        given.len() == self.key.len()
            && given
                .bytes()
                .zip(self.key.bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }

    /// `router` behind this guard.
    pub fn protect(self, router: Router) -> Router {
        router.layer(axum::middleware::from_fn_with_state(self, guard))
    }
}

fn refused(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        render::error_page("Refused", message, "quarry console"),
    )
        .into_response()
}

/// Pure: the value of `name` in a query string.
fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

async fn guard(State(g): State<LocalGuard>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok());
    if !g.host_allowed(host) {
        return refused(
            StatusCode::MISDIRECTED_REQUEST,
            &format!(
                "This console answers only at {}; a request for Host {:?} may come from a web page trying to reach it. Reach it another way with --allow-host HOST:PORT.",
                g.hosts.join(", "),
                host.unwrap_or_default()
            ),
        );
    }
    if let Some(given) = query_param(request.uri().query(), LAUNCH_PARAM) {
        if !g.key_matches(given) {
            return refused(
                StatusCode::FORBIDDEN,
                "This launch key is not this console's. Open the address `quarry console` printed when it started.",
            );
        }
        let mut response = Redirect::to(request.uri().path()).into_response();
        let set = format!(
            "{LAUNCH_COOKIE}={}; Path=/console; HttpOnly; SameSite=Strict",
            g.key
        );
        if let Ok(v) = HeaderValue::from_str(&set) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
        return response;
    }
    match cookie(request.headers(), LAUNCH_COOKIE) {
        Some(given) if g.key_matches(&given) => next.run(request).await,
        _ => refused(
            StatusCode::UNAUTHORIZED,
            "Open the address `quarry console` printed when it started (it carries this launch's key); this browser has not opened it yet.",
        ),
    }
}

#[cfg(test)]
mod tests;
