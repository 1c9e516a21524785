//! Object storage for reports and artifacts (S3 and S3-compatible servers, GCS, Azure) through the
//! `object_store` crate.
//!
//! Layout (the report named as standalone reports are): a run's artifacts are the direct children of
//! `<prefix>/<namespace>/<run>/`, the report is `<sanitized-query>-<letter><digit>.md` there. The
//! suffix comes from the run's UID, so a retried write lands on the same key (written once), and a
//! run recreated under the same name gets a new one. Keys with `/` are flattened to `__`, so a run's
//! directory holds no subdirectories and cleanup never reaches into another run's objects.
//!
//! Credentials come only from a Secret (or, for the operator-wide default, from the operator's
//! environment, itself filled from a Secret); error messages are stripped of them.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    ClientOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload, RetryConfig,
};
use sha2::Digest;

use super::configmap::MAX_DECOMPRESSED;
use quarry_engine::store::keys::REPORT_KEY;
use quarry_engine::store::{ArtifactStore, StoreError};

/// Bound on one object-store call, retries included: a stuck endpoint never stalls a run for long.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the start-up probe, which runs inside a reconcile.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest error text passed on to conditions and Events.
const MAX_ERROR_CHARS: usize = 400;

/// A secret value; its `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value, for the object-store client only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A resolved object-store configuration: a profile's `objectStore` with its Secret read, or the
/// operator-wide default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectStoreConfig {
    /// `s3://bucket/prefix`, `gs://bucket/prefix` or `az://container/prefix`.
    pub url: String,
    /// Endpoint of an S3-compatible server, or of an Azure-compatible one.
    pub endpoint: Option<String>,
    /// Region (S3).
    pub region: Option<String>,
    /// Whether plain-HTTP endpoints are allowed.
    pub allow_http: bool,
    /// `object_store` options from the credentials Secret: lower-cased key and value.
    pub options: Vec<(String, SecretValue)>,
    /// Read the standard environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`) first.
    pub from_env: bool,
    /// Where the configuration came from, for messages (`ResearchProfile "p" spec.objectStore`).
    pub origin: String,
}

impl ObjectStoreConfig {
    /// A store configured by the process's environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`) alone:
    /// the operator-wide default. `AWS_ALLOW_HTTP=true` or `AZURE_ALLOW_HTTP=true` allow a
    /// plain-HTTP endpoint.
    pub fn from_env(url: &str, origin: impl Into<String>) -> Self {
        Self {
            url: url.to_string(),
            endpoint: None,
            region: None,
            allow_http: ["AWS_ALLOW_HTTP", "AZURE_ALLOW_HTTP"]
                .iter()
                .any(|v| std::env::var(v).is_ok_and(|v| v.eq_ignore_ascii_case("true"))),
            options: Vec::new(),
            from_env: true,
            origin: origin.into(),
        }
    }
}

/// Errors of configuring or reaching an object store. Messages never hold credentials.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ObjectStoreError {
    /// The URL is not an object-store URL this build supports.
    #[error(
        "{origin}: url {url:?} is not usable: {message} (use s3://bucket/prefix, gs://bucket/prefix or az://container/prefix)"
    )]
    InvalidUrl {
        origin: String,
        url: String,
        message: String,
    },
    /// A credentials Secret key that is no option of this kind of store.
    #[error(
        "{origin}: credentials Secret key {key:?} is not an option of the {scheme} object store; use keys such as {examples}"
    )]
    UnknownOption {
        origin: String,
        key: String,
        scheme: &'static str,
        examples: &'static str,
    },
    /// The client could not be built from the configuration.
    #[error("{origin}: {message}")]
    Invalid { origin: String, message: String },
    /// The store refused the credentials.
    #[error("object store {url} refused access: {message}")]
    AccessDenied { url: String, message: String },
    /// The bucket or container does not exist.
    #[error("object store {url}: bucket not found: {message}")]
    BucketNotFound { url: String, message: String },
    /// The store could not be reached or answered with an error.
    #[error("object store {url} is not reachable: {message}")]
    Unavailable { url: String, message: String },
}

/// The kind of store a URL names, for option validation and messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// Amazon S3 and S3-compatible servers.
    S3,
    /// Google Cloud Storage.
    Gcs,
    /// Azure Blob Storage.
    Azure,
}

impl StoreKind {
    /// The URL scheme.
    pub fn name(self) -> &'static str {
        match self {
            Self::S3 => "s3",
            Self::Gcs => "gs",
            Self::Azure => "az",
        }
    }

    /// Typical credential option names.
    pub fn examples(self) -> &'static str {
        match self {
            Self::S3 => "aws_access_key_id, aws_secret_access_key, aws_session_token",
            Self::Gcs => "google_service_account_key, google_application_credentials",
            Self::Azure => {
                "azure_storage_account_name, azure_storage_account_key, azure_storage_sas_key"
            }
        }
    }

    /// Whether `key` (lower case) is a configuration key of this kind of store.
    pub fn accepts(self, key: &str) -> bool {
        match self {
            Self::S3 => key.parse::<object_store::aws::AmazonS3ConfigKey>().is_ok(),
            Self::Gcs => key.parse::<object_store::gcp::GoogleConfigKey>().is_ok(),
            Self::Azure => key.parse::<object_store::azure::AzureConfigKey>().is_ok(),
        }
    }
}

/// Pure: the kind of store and the key prefix a URL names.
pub fn parse_url(url: &str) -> Result<(StoreKind, url::Url, Path), String> {
    let parsed = url::Url::parse(url).map_err(|e| e.to_string())?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| e.to_string())?;
    let kind = match scheme {
        ObjectStoreScheme::AmazonS3 => StoreKind::S3,
        ObjectStoreScheme::GoogleCloudStorage => StoreKind::Gcs,
        ObjectStoreScheme::MicrosoftAzure => StoreKind::Azure,
        other => {
            return Err(format!(
                "{other:?} URLs are not object stores Quarry writes to"
            ));
        }
    };
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("the URL names no bucket or container".into());
    }
    Ok((kind, parsed, path))
}

/// Pure: checks every credentials Secret key against the store's options (lower-cased), so a
/// misspelt key is reported instead of silently ignored.
pub fn check_options(
    kind: StoreKind,
    keys: impl IntoIterator<Item = impl AsRef<str>>,
) -> Result<(), String> {
    for key in keys {
        let key = key.as_ref().to_ascii_lowercase();
        if !kind.accepts(&key) {
            return Err(key);
        }
    }
    Ok(())
}

/// A bucket (or container) with the key prefix of the configured URL.
#[derive(Clone)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket`, for the URLs shown to people.
    base_url: String,
    /// The key prefix from the URL's path.
    root: Path,
    /// Credential values, removed from every error message.
    secrets: Vec<String>,
}

impl std::fmt::Debug for Bucket {
    // The client's own Debug would print credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bucket")
            .field("base_url", &self.base_url)
            .field("root", &self.root.as_ref())
            .finish_non_exhaustive()
    }
}

impl Bucket {
    /// Builds the client for `config`. No I/O.
    pub fn connect(config: &ObjectStoreConfig) -> Result<Self, ObjectStoreError> {
        let invalid_url = |message: String| ObjectStoreError::InvalidUrl {
            origin: config.origin.clone(),
            url: config.url.clone(),
            message,
        };
        let (kind, url, root) = parse_url(&config.url).map_err(invalid_url)?;
        check_options(kind, config.options.iter().map(|(k, _)| k)).map_err(|key| {
            ObjectStoreError::UnknownOption {
                origin: config.origin.clone(),
                key,
                scheme: kind.name(),
                examples: kind.examples(),
            }
        })?;
        let client = ClientOptions::new()
            .with_timeout(Duration::from_secs(30))
            .with_connect_timeout(Duration::from_secs(5))
            .with_allow_http(config.allow_http);
        let retry = RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
            ..RetryConfig::default()
        };
        let invalid = |e: object_store::Error| ObjectStoreError::Invalid {
            origin: config.origin.clone(),
            message: e.to_string(),
        };
        let options = config
            .options
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.expose().to_string()));
        let store: Arc<dyn ObjectStore> = match kind {
            StoreKind::S3 => {
                use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
                let mut b = if config.from_env {
                    AmazonS3Builder::from_env()
                } else {
                    AmazonS3Builder::new()
                }
                .with_url(url.as_str());
                for (k, v) in options {
                    if let Ok(key) = k.parse::<AmazonS3ConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                if let Some(endpoint) = &config.endpoint {
                    b = b.with_endpoint(endpoint);
                }
                if let Some(region) = &config.region {
                    b = b.with_region(region);
                }
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(invalid)?,
                )
            }
            StoreKind::Gcs => {
                use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
                if config.endpoint.is_some() {
                    return Err(ObjectStoreError::Invalid {
                        origin: config.origin.clone(),
                        message: "endpoint is supported for s3:// and az:// URLs only".into(),
                    });
                }
                let mut b = if config.from_env {
                    GoogleCloudStorageBuilder::from_env()
                } else {
                    GoogleCloudStorageBuilder::new()
                }
                .with_url(url.as_str());
                for (k, v) in options {
                    if let Ok(key) = k.parse::<GoogleConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(invalid)?,
                )
            }
            StoreKind::Azure => {
                use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
                let mut b = if config.from_env {
                    MicrosoftAzureBuilder::from_env()
                } else {
                    MicrosoftAzureBuilder::new()
                }
                .with_url(url.as_str());
                for (k, v) in options {
                    if let Ok(key) = k.parse::<AzureConfigKey>() {
                        b = b.with_config(key, v);
                    }
                }
                if let Some(endpoint) = &config.endpoint {
                    b = b.with_endpoint(endpoint.clone());
                }
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(invalid)?,
                )
            }
        };
        let host = url.host_str().unwrap_or_default();
        Ok(Self {
            store,
            base_url: format!("{}://{host}", url.scheme()),
            root,
            secrets: config
                .options
                .iter()
                .map(|(_, v)| v.expose().to_string())
                .filter(|v| v.len() >= 4)
                .collect(),
        })
    }

    /// The store of one run's artifacts: `<url prefix>/<run prefix>/<namespace>/<run>/`.
    pub fn for_run(&self, layout: &RunLayout) -> ObjectArtifactStore {
        ObjectArtifactStore {
            bucket: self.clone(),
            dir: layout.dir(&self.root),
            report_name: layout.report_name(),
        }
    }

    /// Reads the object at `url` (`s3://bucket/key`), which must be in this bucket.
    pub async fn read_url(&self, url: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let io = |message: String| StoreError::Io {
            key: url.to_string(),
            message,
        };
        let key = url
            .strip_prefix(&self.base_url)
            .and_then(|rest| rest.strip_prefix('/'))
            .ok_or_else(|| io(format!("not an object of {}", self.base_url)))?;
        let path = Path::parse(key).map_err(|e| io(e.to_string()))?;
        let work = async {
            match self.store.get(&path).await {
                Ok(result) if result.meta.size > MAX_DECOMPRESSED => Err(io(format!(
                    "holds {} bytes, more than the {MAX_DECOMPRESSED} a report may",
                    result.meta.size
                ))),
                Ok(result) => result
                    .bytes()
                    .await
                    .map(|b| Some(b.to_vec()))
                    .map_err(|e| io(self.describe(&e))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(io(self.describe(&e))),
            }
        };
        tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| io(format!("no answer within {}s", CALL_TIMEOUT.as_secs())))?
    }

    fn url_of(&self, path: &Path) -> String {
        format!("{}/{}", self.base_url, path.as_ref())
    }

    /// An object-store error as a short message without credentials or timings.
    fn describe(&self, e: &object_store::Error) -> String {
        describe_error(e, &self.secrets)
    }
}

/// What kind of failure an object-store error is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The credentials were refused (401/403).
    Denied,
    /// The object, bucket or container does not exist (404).
    NotFound,
    /// Anything else: unreachable, server errors.
    Other,
}

/// Pure: the class of an object-store error. Listing errors arrive as `Generic`, so the status
/// code and the S3/Azure/GCS error codes in the text count too.
pub fn classify(e: &object_store::Error) -> ErrorClass {
    match e {
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => {
            return ErrorClass::Denied;
        }
        object_store::Error::NotFound { .. } => return ErrorClass::NotFound,
        _ => {}
    }
    let text = e.to_string();
    const DENIED: [&str; 9] = [
        "401 Unauthorized",
        "403 Forbidden",
        "SignatureDoesNotMatch",
        "InvalidAccessKeyId",
        "AccessDenied",
        "AuthorizationFailure",
        "AuthenticationFailed",
        "InvalidToken",
        "ExpiredToken",
    ];
    const MISSING: [&str; 3] = ["NoSuchBucket", "ContainerNotFound", "404 Not Found"];
    if DENIED.iter().any(|d| text.contains(d)) {
        ErrorClass::Denied
    } else if MISSING.iter().any(|m| text.contains(m)) {
        ErrorClass::NotFound
    } else {
        ErrorClass::Other
    }
}

/// Pure: a short, stable description of an object-store error (S3-style XML bodies reduced to
/// their code and message, timings removed so repeated failures read the same), with every
/// secret value replaced.
pub fn describe_error(e: &object_store::Error, secrets: &[String]) -> String {
    let text = e.to_string();
    let class = match classify(e) {
        ErrorClass::Denied => "access denied",
        ErrorClass::NotFound => "not found",
        ErrorClass::Other => "request failed",
    };
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let len = text[start..].find(&format!("</{name}>"))?;
        Some(text[start..start + len].to_string())
    };
    let mut message = match (tag("Code"), tag("Message")) {
        (Some(code), Some(detail)) => format!("{class}: {code}: {detail}"),
        (Some(code), None) => format!("{class}: {code}"),
        _ => {
            static TIMING: std::sync::LazyLock<Option<regex::Regex>> =
                std::sync::LazyLock::new(|| {
                    regex::Regex::new(r"\s+in\s+[0-9.]+(ns|µs|us|ms|s)\b").ok()
                });
            match TIMING.as_ref() {
                Some(re) => re.replace_all(&text, "").into_owned(),
                None => text.clone(),
            }
        }
    };
    for secret in secrets {
        message = message.replace(secret.as_str(), "<redacted>");
    }
    if message.chars().count() > MAX_ERROR_CHARS {
        message = message.chars().take(MAX_ERROR_CHARS).collect::<String>() + "…";
    }
    message
}

/// Where one run's artifacts live in a bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLayout {
    /// `spec.report.prefix` of the run.
    pub prefix: Option<String>,
    /// The run's namespace.
    pub namespace: String,
    /// The run's name.
    pub run: String,
    /// The run's UID (the report name's suffix).
    pub uid: String,
    /// The run's query (the report name's stem).
    pub query: String,
}

impl RunLayout {
    /// Pure: the run's directory under `root`. Every piece is one path segment (a `/` inside
    /// the run prefix separates segments; `.` and `..` are escaped, never resolved).
    pub fn dir(&self, root: &Path) -> Path {
        let mut path = root.clone();
        for segment in self
            .prefix
            .iter()
            .flat_map(|p| p.split('/'))
            .filter(|s| !s.is_empty())
        {
            path = path.join(segment);
        }
        path.join(self.namespace.as_str()).join(self.run.as_str())
    }

    /// Pure: the report's object name, `<sanitized-query>-<letter><digit>.md`.
    pub fn report_name(&self) -> String {
        report_object_name(&self.query, &self.uid)
    }
}

/// Pure: the standalone report file name, with the suffix derived from the run's UID.
pub fn report_object_name(query: &str, uid: &str) -> String {
    let digest = sha2::Sha256::digest(uid.as_bytes());
    let letter = (b'a' + digest[0] % 26) as char;
    quarry_engine::store::report_file_name(query, letter, digest[1] % 10)
}

/// Pure: the object name of an artifact key (the report gets its seed-000 name).
pub fn object_name(key: &str, report_name: &str) -> String {
    if key == REPORT_KEY {
        report_name.to_string()
    } else {
        key.replace('/', "__")
    }
}

/// The artifacts of one run in an object store.
#[derive(Clone, Debug)]
pub struct ObjectArtifactStore {
    bucket: Bucket,
    dir: Path,
    report_name: String,
}

impl ObjectArtifactStore {
    /// The object path of an artifact key.
    pub fn path_of(&self, key: &str) -> Path {
        self.dir.clone().join(object_name(key, &self.report_name))
    }

    /// The URL of an artifact, as shown in status (`s3://bucket/prefix/ns/run/report-a1.md`).
    pub fn url_of(&self, key: &str) -> String {
        self.bucket.url_of(&self.path_of(key))
    }

    /// The URL of the run's directory, ending in `/`.
    pub fn dir_url(&self) -> String {
        format!("{}/", self.bucket.url_of(&self.dir))
    }

    fn io(&self, key: &str, e: &object_store::Error) -> StoreError {
        StoreError::Io {
            key: key.to_string(),
            message: format!(
                "object store {}: {}",
                self.url_of(key),
                self.bucket.describe(e)
            ),
        }
    }

    fn timed_out(&self, key: &str) -> StoreError {
        StoreError::Io {
            key: key.to_string(),
            message: format!(
                "object store {}: no answer within {}s",
                self.url_of(key),
                CALL_TIMEOUT.as_secs()
            ),
        }
    }

    /// Checks that the store answers with these credentials: lists the run's directory.
    pub async fn probe(&self) -> Result<(), ObjectStoreError> {
        let url = self.dir_url();
        let listed = tokio::time::timeout(
            PROBE_TIMEOUT,
            self.bucket.store.list_with_delimiter(Some(&self.dir)),
        )
        .await;
        match listed {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => {
                let message = self.bucket.describe(&e);
                Err(match classify(&e) {
                    ErrorClass::Denied => ObjectStoreError::AccessDenied { url, message },
                    ErrorClass::NotFound => ObjectStoreError::BucketNotFound { url, message },
                    ErrorClass::Other => ObjectStoreError::Unavailable { url, message },
                })
            }
            Err(_) => Err(ObjectStoreError::Unavailable {
                url,
                message: format!("no answer within {}s", PROBE_TIMEOUT.as_secs()),
            }),
        }
    }

    /// Names of the run's objects (direct children of its directory), sorted.
    pub async fn list(&self) -> Result<Vec<String>, StoreError> {
        let listed = tokio::time::timeout(
            CALL_TIMEOUT,
            self.bucket.store.list_with_delimiter(Some(&self.dir)),
        )
        .await
        .map_err(|_| self.timed_out(""))?
        .map_err(|e| self.io("", &e))?;
        let mut names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect();
        names.sort();
        Ok(names)
    }

    /// Deletes every object of the run (the finalizer's cleanup); returns how many there were.
    pub async fn delete_all(&self) -> Result<usize, StoreError> {
        let work = async {
            let listed = self
                .bucket
                .store
                .list_with_delimiter(Some(&self.dir))
                .await
                .map_err(|e| self.io("", &e))?;
            let paths: Vec<Path> = listed.objects.into_iter().map(|o| o.location).collect();
            let count = paths.len();
            let stream = futures::stream::iter(paths.into_iter().map(Ok)).boxed();
            self.bucket
                .store
                .delete_stream(stream)
                .try_collect::<Vec<_>>()
                .await
                .map_err(|e| self.io("", &e))?;
            Ok(count)
        };
        tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| self.timed_out(""))?
    }
}

#[async_trait]
impl ArtifactStore for ObjectArtifactStore {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path_of(key);
        let payload = PutPayload::from(bytes.to_vec());
        tokio::time::timeout(CALL_TIMEOUT, self.bucket.store.put(&path, payload))
            .await
            .map_err(|_| self.timed_out(key))?
            .map_err(|e| self.io(key, &e))?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path_of(key);
        let work = async {
            let result = match self.bucket.store.get(&path).await {
                Ok(r) => r,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.io(key, &e)),
            };
            if result.meta.size > MAX_DECOMPRESSED {
                return Err(StoreError::Corrupt {
                    key: key.to_string(),
                    message: format!(
                        "object {} holds {} bytes, more than the {MAX_DECOMPRESSED} an artifact may",
                        self.url_of(key),
                        result.meta.size
                    ),
                });
            }
            let bytes = result.bytes().await.map_err(|e| self.io(key, &e))?;
            Ok(Some(bytes.to_vec()))
        };
        tokio::time::timeout(CALL_TIMEOUT, work)
            .await
            .map_err(|_| self.timed_out(key))?
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path_of(key);
        match tokio::time::timeout(CALL_TIMEOUT, self.bucket.store.delete(&path))
            .await
            .map_err(|_| self.timed_out(key))?
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.io(key, &e)),
        }
    }
}

#[cfg(test)]
mod tests;
