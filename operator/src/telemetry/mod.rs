//! Telemetry: every Prometheus metric the operator exports (names live only here, DESIGN §1) and
//! the tracing subscriber.
//!
//! Metrics are labelled by namespace, profile, provider and model, never by run name: run names are
//! unbounded and would explode the series count (DESIGN §5).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::config::LogFormat;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Content type of the OpenMetrics text exposition format served on `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels of reconcile errors: a short, bounded reason such as `KubeApi` or `Serialization`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Error reason (bounded set, from the controller's error enum).
    pub reason: String,
}

/// A run phase as a metric label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum PhaseLabel {
    /// Accepted, not started (includes runs stalled on a missing profile or Secret).
    Pending,
    /// The coordinator is planning the agenda.
    Planning,
    /// Researchers are working.
    Researching,
    /// The final report is being written.
    Synthesizing,
    /// Finished with a report.
    Completed,
    /// Finished without success.
    Failed,
    /// Stopped by suspend or delete.
    Cancelled,
}

impl PhaseLabel {
    /// Parses a phase name as written in the ResearchRun status (`"Researching"`, ...).
    pub fn from_phase_name(name: &str) -> Option<Self> {
        Some(match name {
            "Pending" => Self::Pending,
            "Planning" => Self::Planning,
            "Researching" => Self::Researching,
            "Synthesizing" => Self::Synthesizing,
            "Completed" => Self::Completed,
            "Failed" => Self::Failed,
            "Cancelled" => Self::Cancelled,
            _ => return None,
        })
    }
}

/// Labels of the runs-by-phase gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    /// Namespace of the runs.
    pub namespace: String,
    /// Phase of the runs.
    pub phase: PhaseLabel,
}

/// Labels of model usage counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    /// Namespace of the run.
    pub namespace: String,
    /// ResearchProfile name.
    pub profile: String,
    /// Provider, e.g. the host of the model's base URL.
    pub provider: String,
    /// Model name as configured in the profile.
    pub model: String,
}

/// Labels of search and fetch counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    /// Namespace of the run.
    pub namespace: String,
    /// ResearchProfile name.
    pub profile: String,
}

/// Labels of the run duration histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// Namespace of the run.
    pub namespace: String,
    /// ResearchProfile name.
    pub profile: String,
    /// Terminal phase: Completed, Failed or Cancelled.
    pub outcome: PhaseLabel,
}

/// All metrics of the operator with the registry that exports them. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// `quarry_reconciliations_total`: reconcile calls.
    pub reconciliations: Counter,
    /// `quarry_reconcile_errors_total{reason}`: reconcile calls that returned an error.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// `quarry_reconcile_duration_seconds`: time spent in one reconcile call.
    pub reconcile_duration: Histogram,
    /// `quarry_runs{namespace,phase}`: ResearchRuns known to this operator by phase.
    pub runs: Family<PhaseLabels, Gauge>,
    /// `quarry_llm_input_tokens_total`.
    pub llm_input_tokens: Family<ModelLabels, Counter>,
    /// `quarry_llm_output_tokens_total`.
    pub llm_output_tokens: Family<ModelLabels, Counter>,
    /// `quarry_llm_calls_total`.
    pub llm_calls: Family<ModelLabels, Counter>,
    /// `quarry_llm_cost_usd_total`.
    pub llm_cost_usd: Family<ModelLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// `quarry_searches_total`.
    pub searches: Family<RunLabels, Counter>,
    /// `quarry_pages_fetched_total`.
    pub pages_fetched: Family<RunLabels, Counter>,
    /// `quarry_run_duration_seconds{namespace,profile,outcome}`: creation to terminal phase.
    pub run_duration: Family<OutcomeLabels, Histogram>,
    /// Phase each run is counted under in `runs`, keyed by UID, so moves are exact.
    phases: Arc<Mutex<HashMap<String, PhaseLabels>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

fn run_duration_histogram() -> Histogram {
    // 1 s .. ~9 h: quick runs take seconds, deep runs with local models take hours.
    Histogram::new(exponential_buckets(1.0, 2.0, 16))
}

impl Metrics {
    /// Creates every metric and registers it under its `quarry_` name.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("quarry");
        let reconciliations = Counter::default();
        registry.register(
            "reconciliations",
            "ResearchRun reconcile calls",
            reconciliations.clone(),
        );
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "reconcile_errors",
            "ResearchRun reconcile calls that failed, by reason",
            reconcile_errors.clone(),
        );
        let reconcile_duration = Histogram::new(exponential_buckets(0.001, 2.0, 14));
        registry.register(
            "reconcile_duration_seconds",
            "Time spent in one reconcile call",
            reconcile_duration.clone(),
        );
        let runs = Family::<PhaseLabels, Gauge>::default();
        registry.register(
            "runs",
            "ResearchRuns known to the operator, by namespace and phase",
            runs.clone(),
        );
        let llm_input_tokens = Family::<ModelLabels, Counter>::default();
        registry.register(
            "llm_input_tokens",
            "Input (prompt) tokens sent to models",
            llm_input_tokens.clone(),
        );
        let llm_output_tokens = Family::<ModelLabels, Counter>::default();
        registry.register(
            "llm_output_tokens",
            "Output (completion) tokens received from models",
            llm_output_tokens.clone(),
        );
        let llm_calls = Family::<ModelLabels, Counter>::default();
        registry.register("llm_calls", "Model calls", llm_calls.clone());
        let llm_cost_usd =
            Family::<ModelLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "llm_cost_usd",
            "Model cost in USD from the profile's price table",
            llm_cost_usd.clone(),
        );
        let searches = Family::<RunLabels, Counter>::default();
        registry.register(
            "searches",
            "Search queries sent by researchers",
            searches.clone(),
        );
        let pages_fetched = Family::<RunLabels, Counter>::default();
        registry.register(
            "pages_fetched",
            "Pages fetched by researchers",
            pages_fetched.clone(),
        );
        let run_duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(
            run_duration_histogram as fn() -> Histogram,
        );
        registry.register(
            "run_duration_seconds",
            "Duration of finished ResearchRuns",
            run_duration.clone(),
        );
        Self {
            registry: Arc::new(registry),
            reconciliations,
            reconcile_errors,
            reconcile_duration,
            runs,
            llm_input_tokens,
            llm_output_tokens,
            llm_calls,
            llm_cost_usd,
            searches,
            pages_fetched,
            run_duration,
            phases: Arc::default(),
        }
    }

    /// Encodes every metric in the OpenMetrics text format (ends with `# EOF`).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }

    /// Records that run `uid` in `namespace` is now in `phase` (`None`: the run is gone), moving
    /// it between the `quarry_runs` series so every run is counted exactly once.
    pub fn set_run_phase(&self, uid: &str, namespace: &str, phase: Option<PhaseLabel>) {
        let Ok(mut phases) = self.phases.lock() else {
            return;
        };
        let new = phase.map(|phase| PhaseLabels {
            namespace: namespace.to_string(),
            phase,
        });
        let old = match &new {
            Some(labels) => phases.insert(uid.to_string(), labels.clone()),
            None => phases.remove(uid),
        };
        if old == new {
            return;
        }
        if let Some(old) = old {
            self.runs.get_or_create(&old).dec();
        }
        if let Some(new) = new {
            self.runs.get_or_create(&new).inc();
        }
    }

    /// Forgets every run whose UID `is_live` rejects (runs deleted from the cluster).
    pub fn retain_runs(&self, is_live: impl Fn(&str) -> bool) {
        let gone: Vec<String> = match self.phases.lock() {
            Ok(phases) => phases.keys().filter(|uid| !is_live(uid)).cloned().collect(),
            Err(_) => return,
        };
        for uid in gone {
            self.set_run_phase(&uid, "", None);
        }
    }

    /// Adds model usage to the token, call and cost counters.
    pub fn record_llm_usage(&self, labels: &ModelLabels, usage: &crate::llm::Usage) {
        self.llm_input_tokens
            .get_or_create(labels)
            .inc_by(usage.input_tokens);
        self.llm_output_tokens
            .get_or_create(labels)
            .inc_by(usage.output_tokens);
        self.llm_calls.get_or_create(labels).inc_by(usage.llm_calls);
        // pico-USD to USD; f64 is exact enough for a monotonically growing total.
        self.llm_cost_usd
            .get_or_create(labels)
            .inc_by(usage.cost_pico_usd as f64 / 1e12);
    }
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
}

/// Installs the global tracing subscriber with the filter the layered configuration resolved
/// (`--log-level`, `QUARRY_LOG_LEVEL`, config file, default `info`).
pub fn init_tracing(format: LogFormat, filter: &str) -> Result<(), TelemetryError> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::util::SubscriberInitExt;
    let env_filter = EnvFilter::try_new(filter).map_err(|e| TelemetryError::Filter {
        filter: filter.to_string(),
        message: e.to_string(),
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Json => builder.json().finish().try_init(),
        LogFormat::Text => builder.finish().try_init(),
    };
    result.map_err(|e| TelemetryError::AlreadyInstalled(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_openmetrics_with_expected_names() {
        let metrics = Metrics::new();
        metrics.reconciliations.inc();
        metrics
            .reconcile_errors
            .get_or_create(&ErrorLabels {
                reason: "KubeApi".into(),
            })
            .inc();
        let labels = ModelLabels {
            namespace: "ns".into(),
            profile: "default".into(),
            provider: "127.0.0.1".into(),
            model: "m".into(),
        };
        metrics.record_llm_usage(
            &labels,
            &crate::llm::Usage {
                input_tokens: 100,
                output_tokens: 20,
                cost_pico_usd: 1_500_000_000_000,
                llm_calls: 2,
            },
        );
        metrics
            .searches
            .get_or_create(&RunLabels {
                namespace: "ns".into(),
                profile: "default".into(),
            })
            .inc_by(4);
        let text = metrics.encode().unwrap();
        assert!(text.contains("quarry_reconciliations_total 1\n"), "{text}");
        assert!(
            text.contains("quarry_reconcile_errors_total{reason=\"KubeApi\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("quarry_llm_input_tokens_total{namespace=\"ns\",profile=\"default\",provider=\"127.0.0.1\",model=\"m\"} 100\n"), "{text}");
        assert!(text.contains("quarry_llm_output_tokens_total{namespace=\"ns\",profile=\"default\",provider=\"127.0.0.1\",model=\"m\"} 20\n"), "{text}");
        assert!(text.contains("quarry_llm_calls_total{namespace=\"ns\",profile=\"default\",provider=\"127.0.0.1\",model=\"m\"} 2\n"), "{text}");
        assert!(text.contains("quarry_llm_cost_usd_total{namespace=\"ns\",profile=\"default\",provider=\"127.0.0.1\",model=\"m\"} 1.5\n"), "{text}");
        assert!(
            text.contains("quarry_searches_total{namespace=\"ns\",profile=\"default\"} 4\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn run_phase_gauge_counts_each_run_once() {
        let metrics = Metrics::new();
        let get = |phase| {
            metrics
                .runs
                .get_or_create(&PhaseLabels {
                    namespace: "ns".into(),
                    phase,
                })
                .get()
        };
        metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Pending));
        metrics.set_run_phase("u2", "ns", Some(PhaseLabel::Pending));
        metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Researching));
        metrics.set_run_phase("u1", "ns", Some(PhaseLabel::Researching));
        assert_eq!(get(PhaseLabel::Pending), 1);
        assert_eq!(get(PhaseLabel::Researching), 1);
        metrics.set_run_phase("u1", "ns", None);
        metrics.set_run_phase("u1", "ns", None);
        assert_eq!(get(PhaseLabel::Researching), 0);
        assert_eq!(get(PhaseLabel::Pending), 1);
        metrics.retain_runs(|uid| uid != "u2");
        assert_eq!(get(PhaseLabel::Pending), 0);
        assert_eq!(
            PhaseLabel::from_phase_name("Completed"),
            Some(PhaseLabel::Completed)
        );
        assert_eq!(PhaseLabel::from_phase_name("nope"), None);
    }
}
