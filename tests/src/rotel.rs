//! A throwaway OpenTelemetry collector on 127.0.0.1 for tests: Rotel, a lightweight collector
//! written in Rust (PyPI `rotel`, whose wheel ships the prebuilt `rotel-agent`; installed into
//! `<work>/rotel` by `scripts/install-test-deps.sh`). It receives OTLP over HTTP and gRPC on free
//! ports and prints every span it receives in detail (its debug output, the format of the
//! OpenTelemetry Collector's debug exporter), which [`Rotel::spans`] reads back. Killed on drop.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What to run when rotel is missing.
pub const INSTALL_HINT: &str = "run scripts/install-test-deps.sh (PyPI's rotel into .work/rotel)";

/// Where rotel's collector is: `$QUARRY_ROTEL`, else `<work>/rotel/bin/rotel-agent` with
/// `<work>` = `$QUARRY_WORK_DIR` or `<repo>/.work` (what `scripts/install-test-deps.sh` uses).
pub fn rotel_path() -> PathBuf {
    if let Some(path) = std::env::var_os("QUARRY_ROTEL").filter(|v| !v.is_empty()) {
        return PathBuf::from(path);
    }
    let work = std::env::var_os("QUARRY_WORK_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(".work"));
    let work = if work.is_absolute() {
        work
    } else {
        crate::real_model::repo_root().join(work)
    };
    work.join("rotel").join("bin").join("rotel-agent")
}

/// Whether rotel's collector is installed.
pub fn rotel_available() -> bool {
    rotel_path().is_file()
}

/// An attribute value as the collector printed it (`Str(..)`, `Int(..)`, ...).
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
    /// Any other kind (arrays, maps, bytes), as printed.
    Other(String),
}

impl AttrValue {
    fn parse(printed: &str) -> Self {
        let typed = |kind: &str| {
            printed
                .strip_prefix(kind)
                .and_then(|rest| rest.strip_prefix('('))
                .and_then(|rest| rest.strip_suffix(')'))
        };
        if let Some(s) = typed("Str") {
            return AttrValue::Str(s.to_string());
        }
        if let Some(n) = typed("Int").and_then(|s| s.parse().ok()) {
            return AttrValue::Int(n);
        }
        if let Some(b) = typed("Bool").and_then(|s| s.parse().ok()) {
            return AttrValue::Bool(b);
        }
        if let Some(d) = typed("Double").and_then(|s| s.parse().ok()) {
            return AttrValue::Double(d);
        }
        AttrValue::Other(printed.to_string())
    }

    /// The string, for a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, for an integer value.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// One span as the collector received it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReceivedSpan {
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex id of the parent span; empty for a root span.
    pub parent_span_id: String,
    pub name: String,
    /// `SPAN_KIND_CLIENT`, `SPAN_KIND_INTERNAL`, ...
    pub kind: String,
    /// Attributes of the resource that exported the span (`service.name`, ...).
    pub resource: BTreeMap<String, AttrValue>,
    /// The span's own attributes (not its events').
    pub attributes: BTreeMap<String, AttrValue>,
}

impl ReceivedSpan {
    /// The attribute `key`, if the span has it.
    pub fn attr(&self, key: &str) -> Option<&AttrValue> {
        self.attributes.get(key)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Other,
    Resource,
    Span,
    SpanAttributes,
}

/// Parses the collector's detailed debug output into spans. A line that continues a multi-line
/// string value is joined to the attribute before it.
pub fn parse_debug_output(text: &str) -> Vec<ReceivedSpan> {
    let mut spans: Vec<ReceivedSpan> = Vec::new();
    let mut resource = BTreeMap::new();
    let mut section = Section::Other;
    // The attribute a continuation line belongs to: (in the resource?, key, raw value so far).
    let mut last: Option<(bool, String, String)> = None;
    let flush = |last: &mut Option<(bool, String, String)>,
                 resource: &mut BTreeMap<String, AttrValue>,
                 spans: &mut Vec<ReceivedSpan>| {
        if let Some((in_resource, key, raw)) = last.take() {
            let value = AttrValue::parse(&raw);
            if in_resource {
                resource.insert(key, value);
            } else if let Some(span) = spans.last_mut() {
                span.attributes.insert(key, value);
            }
        }
    };
    for line in text.lines() {
        let attribute = line
            .strip_prefix("     -> ")
            .filter(|rest| !rest.starts_with(' '))
            .and_then(|rest| rest.split_once(": "));
        if let (Section::Resource | Section::SpanAttributes, Some((key, raw))) =
            (section, attribute)
        {
            flush(&mut last, &mut resource, &mut spans);
            last = Some((
                section == Section::Resource,
                key.to_string(),
                raw.to_string(),
            ));
            continue;
        }
        let structural = line.starts_with("ResourceSpans #")
            || line.starts_with("ScopeSpans #")
            || line.starts_with("Span #")
            || line.starts_with("Resource attributes:")
            || line.starts_with("Attributes:")
            || line.starts_with("Events:")
            || line.starts_with("Links:")
            || line.starts_with("    ")
            || line.starts_with("Start time:")
            || line.starts_with("End time:")
            || line.starts_with("Resource SchemaURL:")
            || line.starts_with("ScopeSpans SchemaURL:")
            || line.starts_with("InstrumentationScope ");
        if !structural {
            if let Some((_, _, raw)) = last.as_mut() {
                raw.push('\n');
                raw.push_str(line);
            }
            continue;
        }
        flush(&mut last, &mut resource, &mut spans);
        if line.starts_with("ResourceSpans #") {
            resource = BTreeMap::new();
            section = Section::Other;
        } else if line.starts_with("Resource attributes:") {
            section = Section::Resource;
        } else if line.starts_with("Span #") {
            spans.push(ReceivedSpan {
                resource: resource.clone(),
                ..ReceivedSpan::default()
            });
            section = Section::Span;
        } else if line.starts_with("Attributes:") && section == Section::Span {
            section = Section::SpanAttributes;
        } else if line.starts_with("Events:")
            || line.starts_with("Links:")
            || line.starts_with("ScopeSpans #")
        {
            section = Section::Other;
        } else if section == Section::Span
            && let Some((field, value)) = line.trim_start().split_once(':')
            && let Some(span) = spans.last_mut()
        {
            let value = value.trim().to_string();
            match field.trim_end() {
                "Trace ID" => span.trace_id = value,
                "Parent ID" => span.parent_span_id = value,
                "ID" => span.span_id = value,
                "Name" => span.name = value,
                "Kind" => span.kind = value,
                _ => {}
            }
        }
    }
    flush(&mut last, &mut resource, &mut spans);
    spans
}

/// A running rotel collector that discards what it receives after printing it; killed when
/// dropped.
#[derive(Debug)]
pub struct Rotel {
    child: Child,
    http_port: u16,
    grpc_port: u16,
    output: PathBuf,
    _dir: tempfile::TempDir,
}

fn free_ports() -> std::io::Result<(u16, u16)> {
    // Both held at once so they differ; released just before rotel binds them.
    let a = std::net::TcpListener::bind("127.0.0.1:0")?;
    let b = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok((a.local_addr()?.port(), b.local_addr()?.port()))
}

impl Rotel {
    /// Starts rotel for the test `test` on free ports of 127.0.0.1 and waits (bounded) until both
    /// receivers accept connections; panics when rotel is not installed or does not start (tests
    /// that need it are `#[ignore = "needs rotel ..."]` and run only when asked).
    pub fn start_for(test: &str) -> Self {
        assert!(
            rotel_available(),
            "{test}: rotel is not installed at {}; {INSTALL_HINT}",
            rotel_path().display()
        );
        Self::start().unwrap_or_else(|e| panic!("{test}: rotel: {e}"))
    }

    /// Starts rotel on free ports and waits until it listens.
    pub fn start() -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let output = dir.path().join("rotel.out");
        let out = File::create(&output).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let (http_port, grpc_port) = free_ports().map_err(|e| e.to_string())?;
        let child = Command::new(rotel_path())
            .arg("start")
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http_port}")])
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc_port}")])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .arg("--pid-file")
            .arg(dir.path().join("rotel.pid"))
            .arg("--log-file")
            .arg(dir.path().join("rotel.log"))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", rotel_path().display()))?;
        let mut rotel = Self {
            child,
            http_port,
            grpc_port,
            output,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let listening = |port| TcpStream::connect(("127.0.0.1", port)).is_ok();
            if listening(rotel.http_port) && listening(rotel.grpc_port) {
                return Ok(rotel);
            }
            if let Ok(Some(status)) = rotel.child.try_wait() {
                return Err(format!("exited with {status}: {}", rotel.output()));
            }
            if Instant::now() > deadline {
                return Err(format!("not listening after 20 s: {}", rotel.output()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The OTLP/HTTP base URL (what `OTEL_EXPORTER_OTLP_ENDPOINT` takes).
    pub fn http_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// The OTLP/gRPC endpoint.
    pub fn grpc_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// Everything rotel printed so far: its log and the spans it received.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// The spans received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        parse_debug_output(&self.output())
    }

    /// Waits up to `timeout` until the spans received satisfy `done` (rotel batches what it
    /// receives for up to 200 ms before printing it) and returns them; after the timeout, what
    /// arrived so far.
    pub async fn wait_for_spans(
        &self,
        timeout: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = Instant::now() + timeout;
        loop {
            let spans = self.spans();
            if done(&spans) || Instant::now() > deadline {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests;
