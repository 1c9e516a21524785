//! A local server for the source tests: answers every request with what the test's closure
//! says and logs each request, so a test checks requests exactly as each API documents them.

// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::Value;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Req {
    pub fn q(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// What the server answers.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

pub fn reply(status: u16, body: impl Into<Vec<u8>>) -> Reply {
    Reply {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.into(),
    }
}

impl Reply {
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

pub type Log = Arc<Mutex<Vec<Req>>>;

/// Serves `answer` for every request on 127.0.0.1 and logs the requests.
pub async fn serve(answer: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> (String, Log) {
    let log: Log = Arc::default();
    let answer = Arc::new(answer);
    let app = Router::new().fallback({
        let log = log.clone();
        move |method: Method, uri: Uri, headers: HeaderMap, body: Bytes| {
            let log = log.clone();
            let answer = answer.clone();
            async move {
                let req = Req {
                    method,
                    path: uri.path().to_string(),
                    query: url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                        .into_owned()
                        .collect(),
                    headers,
                    body: body.to_vec(),
                };
                let r = answer(&req);
                log.lock().unwrap().push(req);
                let mut response = Response::builder().status(r.status);
                for (k, v) in r.headers {
                    response = response.header(k, v);
                }
                response.body(Body::from(r.body)).unwrap()
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), log)
}
