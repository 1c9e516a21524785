//! The operator's egress policy applied by the model and search clients: base URLs at refused
//! addresses fail with a clear configuration error before any connection, and a server's error
//! body never reaches an error message.
//!
//! Every test of this binary installs the same process-wide policy, as the `quarry` binary does
//! from its configuration: only `127.0.0.1` is exempt (the local test servers).

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use quarry_engine::egress::{self, EgressPolicy};
use quarry_engine::llm::anthropic::AnthropicClient;
use quarry_engine::llm::openai::OpenAiClient;
use quarry_engine::llm::{CallPurpose, ChatModel, ChatRequest, LlmError, Message, ModelConfig};
use quarry_engine::sources::http::HttpSource;
use quarry_engine::sources::searxng::SearxngGatherer;
use quarry_engine::sources::{Gatherer, SourceError};
use url::Url;

fn install() {
    egress::install(EgressPolicy::new(["127.0.0.1"]));
    assert_eq!(
        egress::installed().map(EgressPolicy::exempt_hosts),
        Some(&["127.0.0.1".to_string()][..])
    );
}

/// Base URLs no profile may point a client at, with the reason the guard gives.
const REFUSED: [(&str, &str); 6] = [
    (
        "http://169.254.169.254/v1",
        "169.254.169.254 is a cloud metadata address",
    ),
    (
        "https://kubernetes.default.svc/v1",
        "kubernetes.default.svc is a cluster-service name",
    ),
    (
        "http://127.0.0.2:8080/v1",
        "127.0.0.2 is a loopback address",
    ),
    ("http://[::1]:8080/v1", "::1 is a loopback address"),
    ("http://10.0.0.1:11434/v1", "10.0.0.1 is a private address"),
    ("http://localhost:11434/v1", "localhost is a loopback name"),
];

fn config(base_url: &str) -> ModelConfig {
    ModelConfig {
        max_retries: 0,
        timeout: Duration::from_secs(10),
        ..ModelConfig::new(base_url, "m")
    }
}

#[test]
fn a_model_base_url_at_a_refused_address_fails_with_a_clear_error() {
    install();
    for (url, reason) in REFUSED {
        for result in [
            OpenAiClient::new(config(url)).map(|_| ()),
            AnthropicClient::new(config(url)).map(|_| ()),
        ] {
            match result {
                Err(LlmError::Config(message)) => {
                    assert!(message.contains(reason), "{url}: {message}");
                    assert!(message.contains("egress policy"), "{url}: {message}");
                    assert!(message.contains("egressExemptHosts"), "{url}: {message}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }
    // The exempt host and public hosts are accepted.
    assert!(OpenAiClient::new(config("http://127.0.0.1:9/v1")).is_ok());
    assert!(OpenAiClient::new(config("https://api.openai.com/v1")).is_ok());
}

#[test]
fn search_urls_at_refused_addresses_fail_with_a_clear_error() {
    install();
    for (url, reason) in REFUSED {
        match SearxngGatherer::new(url, Duration::from_secs(5)) {
            Err(SourceError::Config(message)) => {
                assert!(message.contains(reason), "{url}: {message}");
                assert!(message.contains("egress policy"), "{url}: {message}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    // The Service of an operator-managed SearchEngine is exempt: the operator resolved it.
    assert!(
        SearxngGatherer::operator_managed("http://search.team-a.svc:8080", Duration::from_secs(5))
            .is_ok()
    );
}

#[tokio::test]
async fn a_provider_request_to_a_refused_address_is_not_sent() {
    install();
    let source = HttpSource::new("brave", Duration::from_secs(5), 1024, vec![]).unwrap();
    for (url, reason) in REFUSED {
        let url = Url::parse(url).unwrap();
        let request = source.client().get(url.clone());
        match source.send(request, &url).await {
            Err(SourceError::Config(message)) => {
                assert!(message.contains(reason), "{url}: {message}");
                assert!(message.contains("egress policy"), "{url}: {message}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
}

/// A server on 127.0.0.1 answering every call with HTTP 500 and an internal-looking body.
async fn failing_server() -> String {
    let body = "INTERNAL-DETAIL: pg password=hunter2 at 10.3.4.5; <html>stack trace</html>";
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(move || async move { (StatusCode::INTERNAL_SERVER_ERROR, body) }),
        )
        .route(
            "/v1/messages",
            post(move || async move { (StatusCode::BAD_GATEWAY, body) }),
        )
        .route(
            "/search",
            get(move || async move { (StatusCode::SERVICE_UNAVAILABLE, body) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::user("hello")],
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens: 16,
        purpose: CallPurpose::Research,
    }
}

#[tokio::test]
async fn an_error_body_is_not_echoed() {
    install();
    let base = failing_server().await;
    let openai = OpenAiClient::new(config(&format!("{base}/v1"))).unwrap();
    let anthropic = AnthropicClient::new(config(&format!("{base}/v1"))).unwrap();
    let searx = SearxngGatherer::new(&base, Duration::from_secs(5)).unwrap();
    let messages = [
        openai.chat(request()).await.unwrap_err().to_string(),
        anthropic.chat(request()).await.unwrap_err().to_string(),
        searx.search("q", 5).await.unwrap_err().to_string(),
    ];
    assert_eq!(
        messages[0],
        "model server answered HTTP 500 (Internal Server Error)"
    );
    assert_eq!(messages[1], "model server answered HTTP 502 (Bad Gateway)");
    for m in &messages {
        for leak in ["INTERNAL-DETAIL", "hunter2", "10.3.4.5", "stack trace"] {
            assert!(!m.contains(leak), "{m}");
        }
    }
}
