//! The tracing subscriber of every Quarry process: console logs in text or JSON and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans exported over OTLP/HTTP.

/// Output format of logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Errors of telemetry setup.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter does not parse.
    #[error("invalid log filter {filter:?}: {message}")]
    Filter { filter: String, message: String },
    /// A global subscriber was already installed (tests, or init called twice).
    #[error("tracing subscriber already installed: {0}")]
    AlreadyInstalled(String),
    /// The OTLP exporter could not be built from the `OTEL_EXPORTER_OTLP_*` settings.
    #[error("OTLP trace exporter: {0}")]
    Otlp(String),
}

/// Environment variable that turns on OTLP trace export (the OpenTelemetry standard name).
pub const OTLP_ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";

/// Keeps the trace exporter alive; dropping it flushes and shuts it down.
#[must_use = "dropping the guard stops trace export"]
#[derive(Default)]
pub struct TelemetryGuard {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl TelemetryGuard {
    /// True when spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("quarry: flushing traces: {e}");
        }
    }
}

/// Installs the global tracing subscriber: console logs with the filter the layered
/// configuration resolved (`--log-level`, `QUARRY_LOG_LEVEL`, config file, default `info`) when
/// `console` is set, and OTLP/HTTP span export when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the
/// exporter's blocking HTTP client runs on the batch processor's own thread, as its docs advise).
pub fn init_tracing(
    format: LogFormat,
    filter: &str,
    console: bool,
) -> Result<TelemetryGuard, TelemetryError> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::{EnvFilter, Layer, Registry};
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = Vec::new();
    if console {
        let env_filter = EnvFilter::try_new(filter).map_err(|e| TelemetryError::Filter {
            filter: filter.to_string(),
            message: e.to_string(),
        })?;
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        layers.push(match format {
            LogFormat::Json => fmt.json().with_filter(env_filter).boxed(),
            LogFormat::Text => fmt.with_filter(env_filter).boxed(),
        });
    }
    let mut guard = TelemetryGuard::default();
    if std::env::var(OTLP_ENDPOINT_ENV).is_ok_and(|v| !v.trim().is_empty()) {
        // The builder reads OTEL_EXPORTER_OTLP_ENDPOINT (and _HEADERS, _TIMEOUT) itself.
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .build()
            .map_err(|e| TelemetryError::Otlp(e.to_string()))?;
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name("quarry")
                    .build(),
            )
            .build();
        let tracer = provider.tracer("quarry");
        layers.push(
            tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(EnvFilter::new("quarry=info"))
                .boxed(),
        );
        guard.provider = Some(provider);
    }
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| TelemetryError::AlreadyInstalled(e.to_string()))?;
    Ok(guard)
}
