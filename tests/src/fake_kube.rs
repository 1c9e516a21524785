//! An in-memory fake of the parts of the Kubernetes API the operator's stores use, behind a
//! `kube::Client` (the tower-test mock service): objects by path, GET, server-side apply (the body
//! replaces the object, as for a sole field manager), JSON patch on `metadata.finalizers`, Events.
//! For tests that run the real stores without a cluster; request-level tests that assert every
//! request use the mock handle directly instead.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// Objects by request path, e.g. `/api/v1/namespaces/ns/configmaps/r1-report`.
type Objects = Arc<Mutex<BTreeMap<String, Value>>>;

/// The fake's state: the stored objects and every request seen.
#[derive(Clone, Default)]
pub struct FakeKube {
    objects: Objects,
    requests: Arc<Mutex<Vec<(String, String)>>>,
}

impl FakeKube {
    /// A client whose requests this fake answers (default namespace `namespace`).
    pub fn start(namespace: &str) -> (kube::Client, FakeKube) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let fake = FakeKube::default();
        let state = fake.clone();
        tokio::spawn(async move {
            while let Some((req, send)) = handle.next_request().await {
                let response = state.answer(req).await;
                send.send_response(response);
            }
        });
        (kube::Client::new(service, namespace), fake)
    }

    /// Stores `object` at `path`.
    pub fn insert(&self, path: &str, object: Value) {
        self.lock().insert(path.to_string(), object);
    }

    /// The object at `path`.
    pub fn get(&self, path: &str) -> Option<Value> {
        self.lock().get(path).cloned()
    }

    /// ConfigMap `name` of namespace `namespace`.
    pub fn configmap(&self, namespace: &str, name: &str) -> Option<Value> {
        self.get(&format!("/api/v1/namespaces/{namespace}/configmaps/{name}"))
    }

    /// Every request so far as (method, path).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Value>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn answer(&self, req: Request<Body>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let content_type = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let body = req.into_body().collect_bytes().await.unwrap_or_default();
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((method.to_string(), path.clone()));
        let parsed: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        // The status subresource lives on the object itself.
        let (object_path, status) = match path.strip_suffix("/status") {
            Some(p) => (p.to_string(), true),
            None => (path.clone(), false),
        };
        match method {
            Method::GET => match self.get(&object_path) {
                Some(o) => respond(200, &o),
                None => not_found(),
            },
            Method::POST if path.ends_with("/events") => respond(201, &parsed),
            Method::PATCH if content_type.starts_with("application/json-patch") => {
                let Some(mut object) = self.get(&object_path) else {
                    return not_found();
                };
                match apply_json_patch(&mut object, &parsed) {
                    Ok(()) => {
                        self.insert(&object_path, object.clone());
                        respond(200, &object)
                    }
                    Err(message) => respond(
                        422,
                        &json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422,"message":message}),
                    ),
                }
            }
            Method::PATCH if status => {
                let Some(mut object) = self.get(&object_path) else {
                    return not_found();
                };
                object["status"] = parsed["status"].clone();
                self.insert(&object_path, object.clone());
                respond(200, &object)
            }
            Method::PATCH => {
                let mut object = parsed;
                if let Some(existing) = self.get(&object_path) {
                    object["metadata"]["uid"] = existing["metadata"]["uid"].clone();
                }
                self.insert(&object_path, object.clone());
                respond(200, &object)
            }
            Method::DELETE => {
                self.lock().remove(&object_path);
                respond(
                    200,
                    &json!({"kind":"Status","apiVersion":"v1","status":"Success"}),
                )
            }
            _ => respond(405, &json!({})),
        }
    }
}

fn respond(status: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::from(serde_json::to_vec(body).unwrap_or_default()))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

fn not_found() -> Response<Body> {
    respond(
        404,
        &json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"}),
    )
}

/// Applies the `test`, `add` and `remove` operations of an RFC 6902 patch (what finalizer
/// patches use) to `object`.
pub fn apply_json_patch(object: &mut Value, patch: &Value) -> Result<(), String> {
    for op in patch.as_array().ok_or("a JSON patch is an array")? {
        let path = op["path"].as_str().ok_or("op without path")?;
        let tokens: Vec<&str> = path.split('/').skip(1).collect();
        let (last, parents) = tokens.split_last().ok_or("empty path")?;
        let mut parent = &mut *object;
        for t in parents {
            parent = match parent {
                Value::Object(map) => map.entry(t.to_string()).or_insert(json!({})),
                Value::Array(items) => t
                    .parse::<usize>()
                    .ok()
                    .and_then(|i| items.get_mut(i))
                    .ok_or(format!("no {path}"))?,
                _ => return Err(format!("no {path}")),
            };
        }
        let current = match &*parent {
            Value::Object(map) => map.get(*last).cloned(),
            Value::Array(items) => last
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i).cloned()),
            _ => None,
        };
        match op["op"].as_str() {
            Some("test") => {
                if current.unwrap_or(Value::Null) != op["value"] {
                    return Err(format!("test of {path} failed"));
                }
            }
            Some("add") => match parent {
                Value::Object(map) => {
                    map.insert(last.to_string(), op["value"].clone());
                }
                Value::Array(items) if *last == "-" => items.push(op["value"].clone()),
                Value::Array(items) => {
                    let i = last.parse::<usize>().map_err(|e| e.to_string())?;
                    items.insert(i, op["value"].clone());
                }
                _ => return Err(format!("cannot add at {path}")),
            },
            Some("remove") => match parent {
                Value::Object(map) => {
                    map.remove(*last).ok_or(format!("no {path}"))?;
                }
                Value::Array(items) => {
                    let i = last.parse::<usize>().map_err(|e| e.to_string())?;
                    if i >= items.len() {
                        return Err(format!("no {path}"));
                    }
                    items.remove(i);
                }
                _ => return Err(format!("no {path}")),
            },
            other => return Err(format!("unsupported op {other:?}")),
        }
    }
    Ok(())
}

/// The mock's handle, for request-level tests.
pub type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// A client on a request-level mock: every request is answered by the test through the handle.
pub fn mock_client(namespace: &str) -> (kube::Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, namespace), handle)
}

/// Receives the next request (within 30 s), checks method and path with query, and returns its
/// JSON body (`Null` when empty) with the sender of the answer.
pub async fn expect_request(
    handle: &mut Handle,
    method: Method,
    path_and_query: &str,
) -> (Value, tower_test::mock::SendResponse<Response<Body>>) {
    let (req, send) =
        tokio::time::timeout(std::time::Duration::from_secs(30), handle.next_request())
            .await
            .expect("a request is expected")
            .expect("the client is gone");
    assert_eq!(req.method(), method, "method of {}", req.uri());
    assert_eq!(
        req.uri().path_and_query().map(|p| p.as_str()),
        Some(path_and_query)
    );
    let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (body, send)
}

/// A 200 answer with `body`.
pub fn ok(body: &Value) -> Response<Body> {
    respond(200, body)
}
