//! A throwaway S3-compatible server on 127.0.0.1 for tests: moto's server mode (PyPI `moto`,
//! installed into `<work>/moto` by `scripts/install-test-deps.sh`), killed on drop.
//!
//! The server enforces request signatures: start-up creates an IAM user with an access key and an
//! `s3:*` policy and a bucket, then turns authentication on, so a wrong key is refused the way a
//! real S3 refuses it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Name of the bucket every server starts with.
pub const BUCKET: &str = "quarry-test";

/// A running moto server with one bucket and one access key; killed when dropped.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    host: std::net::Ipv4Addr,
    port: u16,
    /// Access key id of the IAM user allowed `s3:*`.
    pub access_key_id: String,
    /// Its secret access key.
    pub secret_access_key: String,
}

/// Where moto's server is: `$QUARRY_MOTO_SERVER`, else `<work>/moto/bin/moto_server` with
/// `<work>` = `$QUARRY_WORK_DIR` or `<repo>/.work` (what `scripts/install-test-deps.sh` uses).
pub fn moto_server_path() -> PathBuf {
    if let Some(path) = std::env::var_os("QUARRY_MOTO_SERVER").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let repo = crate::real_model::repo_root();
    let work = std::env::var_os("QUARRY_WORK_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".work"));
    let work = if work.is_absolute() {
        work
    } else {
        repo.join(work)
    };
    work.join("moto").join("bin").join("moto_server")
}

/// Whether moto's server is installed.
pub fn moto_available() -> bool {
    moto_server_path().is_file()
}

/// An unsigned request routed by moto to `service` (authentication is still off).
fn setup_request(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    service: &str,
) -> reqwest::RequestBuilder {
    http.request(method, url).header(
        "Authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential=setup/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        ),
    )
}

/// `application/x-www-form-urlencoded` body of `fields`.
fn form(fields: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn xml_field(text: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].to_string())
}

impl S3Server {
    /// Starts moto on a free port, waits (bounded) until it answers, creates the user, key and
    /// bucket, and turns authentication on.
    pub async fn start() -> Result<Self, String> {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST).await
    }

    /// As [`S3Server::start`], listening on `host` (e.g. a node address Pods reach).
    pub async fn start_on(host: std::net::Ipv4Addr) -> Result<Self, String> {
        let port = std::net::TcpListener::bind((host, 0))
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let child = Command::new(moto_server_path())
            .args(["-H", &host.to_string(), "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", moto_server_path().display()))?;
        let mut server = Self {
            child,
            host,
            port,
            access_key_id: String::new(),
            secret_access_key: String::new(),
        };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(r) = http
                .get(format!("{}/moto-api/", server.endpoint()))
                .send()
                .await
                && r.status().is_success()
            {
                break;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("moto_server exited with {status}"));
            }
            if Instant::now() > deadline {
                return Err("moto_server did not answer within 60 s".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let endpoint = server.endpoint();
        let iam = |fields: &[(&str, &str)]| {
            setup_request(&http, reqwest::Method::POST, format!("{endpoint}/"), "iam")
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(form(fields))
                .send()
        };
        let text = |r: Result<reqwest::Response, reqwest::Error>| async move {
            let r = r.map_err(|e| e.to_string())?;
            let status = r.status();
            let body = r.text().await.map_err(|e| e.to_string())?;
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{status}: {body}"))
            }
        };
        let version = ("Version", "2010-05-08");
        text(iam(&[("Action", "CreateUser"), ("UserName", "quarry"), version]).await).await?;
        let key = text(
            iam(&[
                ("Action", "CreateAccessKey"),
                ("UserName", "quarry"),
                version,
            ])
            .await,
        )
        .await?;
        server.access_key_id = xml_field(&key, "AccessKeyId").ok_or("no AccessKeyId")?;
        server.secret_access_key =
            xml_field(&key, "SecretAccessKey").ok_or("no SecretAccessKey")?;
        let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}"#;
        text(
            iam(&[
                ("Action", "PutUserPolicy"),
                ("UserName", "quarry"),
                ("PolicyName", "s3"),
                ("PolicyDocument", policy),
                version,
            ])
            .await,
        )
        .await?;
        text(
            setup_request(
                &http,
                reqwest::Method::PUT,
                format!("{}/{BUCKET}", server.endpoint()),
                "s3",
            )
            .send()
            .await,
        )
        .await?;
        text(
            http.post(format!("{}/moto-api/reset-auth", server.endpoint()))
                .body("0")
                .send()
                .await,
        )
        .await?;
        Ok(server)
    }

    /// `http://<host>:<port>` (127.0.0.1 unless started with [`S3Server::start_on`]).
    pub fn endpoint(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// Stops the server.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
