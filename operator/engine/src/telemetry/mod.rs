//! Telemetry: every Prometheus metric Quarry exports (names live only here, so dashboards and code cannot drift apart) and the
//! trace ids their exemplars carry. The tracing subscriber is the operator's
//! (`quarry_operator::tracing_setup`).
//!
//! Metrics are labelled by namespace, profile, provider and model, never by run name: run names are
//! unbounded and would explode the series count.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub mod queue;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod run;
pub use run::RunMetrics;

mod labels;
pub use labels::{
    BackendLabels, BackendOutcomeLabels, CacheLabels, ControllerLabels, ControllerResultLabels,
    EndpointLabels, EngineHealthLabels, ErrorLabels, ModelLabels, NamespaceLabels, OutcomeLabels,
    PhaseLabel, PhaseLabels, RequestLabels, RunLabels, ScheduleDecision, ScheduleLabels,
    SourceLabels, StreamPublishLabels, TokenLabels, TraceLabels,
};

/// Content type of the OpenMetrics text exposition format served on `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The OpenTelemetry trace id of a span, when traces are exported (none otherwise).
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

type FloatCounter = Counter<f64, std::sync::atomic::AtomicU64>;

/// The `controller` label of the ResearchRun controller's controller-runtime metrics.
pub const CONTROLLER_NAME: &str = "researchrun";
/// The `controller` label of the ResearchSchedule controller's reconcile metrics.
pub const SCHEDULE_CONTROLLER_NAME: &str = "researchschedule";

/// All metrics of the operator with the registry that exports them. Cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// `controller_runtime_reconcile_total{controller,result}` (controller-runtime's name).
    pub reconcile_total: Family<ControllerResultLabels, Counter>,
    /// `controller_runtime_reconcile_errors_total{controller}`.
    pub reconcile_errors_total: Family<ControllerLabels, Counter>,
    /// `controller_runtime_reconcile_time_seconds{controller}`.
    pub reconcile_time: Family<ControllerLabels, Histogram>,
    /// `quarry_reconciliations_total`: reconcile calls.
    pub reconciliations: Counter,
    /// `quarry_reconcile_errors_total{reason}`: reconcile calls that returned an error.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// `quarry_reconcile_duration_seconds`: time spent in one reconcile call.
    pub reconcile_duration: Histogram,
    /// `quarry_schedule_changes_total{namespace}`: what scheduled runs found changed since the
    /// run before (claims and sources); an alert can page on it.
    pub schedule_changes: Family<NamespaceLabels, Counter>,
    /// `quarry_schedule_runs_total{namespace,decision}`: due times of schedules, by what was
    /// done (created, skipped, replaced).
    pub schedule_runs: Family<ScheduleLabels, Counter>,
    /// `quarry_runs{namespace,phase}`: ResearchRuns known to this operator by phase.
    pub runs: Family<PhaseLabels, Gauge>,
    /// `quarry_llm_requests_total{namespace,profile,provider,model,outcome}`.
    pub llm_requests: Family<RequestLabels, Counter>,
    /// `quarry_llm_tokens_total{namespace,profile,provider,model,kind}`.
    pub llm_tokens: Family<TokenLabels, Counter>,
    /// `quarry_llm_cost_usd_total{namespace,profile,provider,model}`.
    pub llm_cost_usd: Family<ModelLabels, FloatCounter>,
    /// `quarry_llm_request_duration_seconds{provider,model}`, with trace-id exemplars.
    pub llm_duration: Family<EndpointLabels, HistogramWithExemplars<TraceLabels>>,
    /// `quarry_llm_fallbacks_total{provider,model}`: calls this endpoint could not serve that
    /// the router passed to the next tier.
    pub llm_fallbacks: Family<EndpointLabels, Counter>,
    /// `quarry_llm_circuit_breaker_state{provider,model}`: 0 closed, 1 half-open, 2 open.
    pub llm_breaker_state: Family<EndpointLabels, Gauge>,
    /// `quarry_llm_rate_limit_waits_total{provider,model}`: calls held back by the shared limiter.
    pub llm_rate_limit_waits: Family<EndpointLabels, Counter>,
    /// `quarry_llm_rate_limit_wait_seconds_total{provider,model}`.
    pub llm_rate_limit_wait_seconds: Family<EndpointLabels, FloatCounter>,
    /// `quarry_searches_total{namespace,profile,outcome}`.
    pub searches: Family<SourceLabels, Counter>,
    /// `quarry_fetches_total{namespace,profile,outcome}`.
    pub fetches: Family<SourceLabels, Counter>,
    /// `quarry_search_engine_state{backend,engine,state}`: 1 for each engine's current state.
    pub search_engine_state: Family<EngineHealthLabels, Gauge>,
    /// `quarry_search_backend_requests_total{backend,outcome}`: calls of the failover chain.
    pub search_backend_requests: Family<BackendOutcomeLabels, Counter>,
    /// `quarry_search_backend_circuit_breaker_state{backend}`: 0 closed, 1 half-open, 2 open.
    pub search_backend_breaker_state: Family<BackendLabels, Gauge>,
    /// `quarry_cache_requests_total{kind,backend,result}`: search and page cache lookups.
    pub cache_requests: Family<CacheLabels, Counter>,
    /// `quarry_leader`: 1 while this replica holds the leader lease.
    pub leader: Gauge,
    /// `quarry_run_duration_seconds{mode,outcome}`: start to terminal phase.
    pub run_duration: Family<OutcomeLabels, HistogramWithExemplars<TraceLabels>>,
    /// `quarry_run_cost_usd{namespace,profile}`: what each finished run cost.
    pub run_cost: Family<RunLabels, Histogram>,
    /// The `quarry worker` metrics (scale-out mode; exported by [`Metrics::worker`] only).
    pub queue: queue::QueueMetrics,
    /// `quarry_event_stream_publish_total{backend,outcome}`: run events published to the live
    /// stream, by outcome.
    pub event_stream_publish: Family<StreamPublishLabels, Counter>,
    /// `quarry_event_stream_clients`: event stream (SSE) clients connected now.
    pub event_stream_clients: Gauge,
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

fn run_duration_histogram() -> HistogramWithExemplars<TraceLabels> {
    // 1 s .. ~9 h: quick runs take seconds, deep runs with local models take hours.
    HistogramWithExemplars::new(exponential_buckets(1.0, 2.0, 16))
}

fn llm_duration_histogram() -> HistogramWithExemplars<TraceLabels> {
    // 50 ms .. ~27 min: hosted models answer in seconds, local ones on 2 cores in minutes.
    HistogramWithExemplars::new(exponential_buckets(0.05, 2.0, 16))
}

fn run_cost_histogram() -> Histogram {
    // $0.0001 .. ~$100.
    Histogram::new(exponential_buckets(0.0001, 2.5, 16))
}

fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 14))
}

impl Metrics {
    /// Creates every metric and registers it under its name (`quarry_` or controller-runtime's).
    pub fn new() -> Self {
        Self::build(false)
    }

    /// The metrics of a `quarry worker`: these plus the worker's own (`quarry_worker_*`).
    pub fn worker() -> Self {
        Self::build(true)
    }

    fn build(worker: bool) -> Self {
        let mut root = Registry::default();
        let reconcile_total = Family::<ControllerResultLabels, Counter>::default();
        let reconcile_errors_total = Family::<ControllerLabels, Counter>::default();
        let reconcile_time = Family::<ControllerLabels, Histogram>::new_with_constructor(
            reconcile_histogram as fn() -> Histogram,
        );
        {
            let cr = root.sub_registry_with_prefix("controller_runtime");
            cr.register(
                "reconcile",
                "Total number of reconciliations per controller",
                reconcile_total.clone(),
            );
            cr.register(
                "reconcile_errors",
                "Total number of reconciliation errors per controller",
                reconcile_errors_total.clone(),
            );
            cr.register(
                "reconcile_time_seconds",
                "Length of time per reconciliation per controller",
                reconcile_time.clone(),
            );
        }
        let registry = root.sub_registry_with_prefix("quarry");
        let queue = if worker {
            queue::QueueMetrics::register(registry)
        } else {
            queue::QueueMetrics::default()
        };
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
        let schedule_changes = Family::<NamespaceLabels, Counter>::default();
        registry.register(
            "schedule_changes",
            "Changes (claims and sources) scheduled runs found since the run before",
            schedule_changes.clone(),
        );
        let schedule_runs = Family::<ScheduleLabels, Counter>::default();
        registry.register(
            "schedule_runs",
            "Due times of ResearchSchedules by decision (created, skipped, replaced)",
            schedule_runs.clone(),
        );
        let reconcile_duration = reconcile_histogram();
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
        let llm_requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "llm_requests",
            "Model requests by endpoint and outcome",
            llm_requests.clone(),
        );
        let llm_tokens = Family::<TokenLabels, Counter>::default();
        registry.register(
            "llm_tokens",
            "Model tokens by kind (input, cached, output)",
            llm_tokens.clone(),
        );
        let llm_cost_usd = Family::<ModelLabels, FloatCounter>::default();
        registry.register(
            "llm_cost_usd",
            "Model cost in USD from the profile's price table",
            llm_cost_usd.clone(),
        );
        let llm_duration =
            Family::<EndpointLabels, HistogramWithExemplars<TraceLabels>>::new_with_constructor(
                llm_duration_histogram as fn() -> HistogramWithExemplars<TraceLabels>,
            );
        registry.register(
            "llm_request_duration_seconds",
            "Duration of model requests, retries included",
            llm_duration.clone(),
        );
        let llm_fallbacks = Family::<EndpointLabels, Counter>::default();
        registry.register(
            "llm_fallbacks",
            "Model calls an endpoint could not serve, passed to the next tier",
            llm_fallbacks.clone(),
        );
        let llm_breaker_state = Family::<EndpointLabels, Gauge>::default();
        registry.register(
            "llm_circuit_breaker_state",
            "Circuit breaker of a model endpoint: 0 closed, 1 half-open, 2 open",
            llm_breaker_state.clone(),
        );
        let llm_rate_limit_waits = Family::<EndpointLabels, Counter>::default();
        registry.register(
            "llm_rate_limit_waits",
            "Model requests held back by the shared rate limiter",
            llm_rate_limit_waits.clone(),
        );
        let llm_rate_limit_wait_seconds = Family::<EndpointLabels, FloatCounter>::default();
        registry.register(
            "llm_rate_limit_wait_seconds",
            "Time model requests spent waiting for the shared rate limiter",
            llm_rate_limit_wait_seconds.clone(),
        );
        let searches = Family::<SourceLabels, Counter>::default();
        registry.register(
            "searches",
            "Search queries sent by researchers, by outcome",
            searches.clone(),
        );
        let fetches = Family::<SourceLabels, Counter>::default();
        registry.register(
            "fetches",
            "Page fetches by researchers, by outcome",
            fetches.clone(),
        );
        let search_engine_state = Family::<EngineHealthLabels, Gauge>::default();
        registry.register(
            "search_engine_state",
            "Health state of each SearXNG engine (1 for the current state)",
            search_engine_state.clone(),
        );
        let search_backend_requests = Family::<BackendOutcomeLabels, Counter>::default();
        registry.register(
            "search_backend_requests",
            "Calls to search backends of the failover chain, by outcome",
            search_backend_requests.clone(),
        );
        let search_backend_breaker_state = Family::<BackendLabels, Gauge>::default();
        registry.register(
            "search_backend_circuit_breaker_state",
            "Circuit breaker of each search backend: 0 closed, 1 half-open, 2 open",
            search_backend_breaker_state.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this operator replica holds the leader lease (and runs research)",
            leader.clone(),
        );
        let cache_requests = Family::<CacheLabels, Counter>::default();
        registry.register(
            "cache_requests",
            "Search and page cache lookups by result",
            cache_requests.clone(),
        );
        let run_duration =
            Family::<OutcomeLabels, HistogramWithExemplars<TraceLabels>>::new_with_constructor(
                run_duration_histogram as fn() -> HistogramWithExemplars<TraceLabels>,
            );
        registry.register(
            "run_duration_seconds",
            "Duration of finished ResearchRuns by mode and outcome",
            run_duration.clone(),
        );
        let run_cost = Family::<RunLabels, Histogram>::new_with_constructor(
            run_cost_histogram as fn() -> Histogram,
        );
        registry.register(
            "run_cost_usd",
            "Cost in USD of finished ResearchRuns",
            run_cost.clone(),
        );
        let event_stream_publish = Family::<StreamPublishLabels, Counter>::default();
        registry.register(
            "event_stream_publish",
            "Run events published to the live event stream, by backend and outcome",
            event_stream_publish.clone(),
        );
        let event_stream_clients = Gauge::default();
        registry.register(
            "event_stream_clients",
            "Clients following a run's event stream now",
            event_stream_clients.clone(),
        );
        // Errors are rare; the series exists at zero so alerts on its rate work from the start
        // (for both controllers: ResearchRun and ResearchSchedule).
        for controller in [CONTROLLER_NAME, SCHEDULE_CONTROLLER_NAME] {
            reconcile_errors_total
                .get_or_create(&ControllerLabels {
                    controller: controller.to_string(),
                })
                .inc_by(0);
        }
        Self {
            registry: Arc::new(root),
            reconcile_total,
            reconcile_errors_total,
            reconcile_time,
            reconciliations,
            reconcile_errors,
            schedule_changes,
            schedule_runs,
            reconcile_duration,
            runs,
            llm_requests,
            llm_tokens,
            llm_cost_usd,
            llm_duration,
            llm_fallbacks,
            llm_breaker_state,
            llm_rate_limit_waits,
            llm_rate_limit_wait_seconds,
            searches,
            fetches,
            search_engine_state,
            search_backend_requests,
            search_backend_breaker_state,
            cache_requests,
            leader,
            run_duration,
            run_cost,
            queue,
            event_stream_publish,
            event_stream_clients,
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

    /// Records one reconcile call under both naming schemes (quarry's and controller-runtime's).
    pub fn record_reconcile(&self, ok: bool, seconds: f64) {
        self.record_reconcile_of(CONTROLLER_NAME, ok, seconds);
    }

    /// Records one reconcile call of `controller` (`researchrun`, `searchengine`).
    pub fn record_reconcile_of(&self, controller_name: &str, ok: bool, seconds: f64) {
        self.reconciliations.inc();
        self.reconcile_duration.observe(seconds);
        let controller = ControllerLabels {
            controller: controller_name.to_string(),
        };
        self.reconcile_time
            .get_or_create(&controller)
            .observe(seconds);
        self.reconcile_total
            .get_or_create(&ControllerResultLabels {
                controller: controller_name.to_string(),
                result: if ok { "success" } else { "error" }.to_string(),
            })
            .inc();
        if !ok {
            self.reconcile_errors_total.get_or_create(&controller).inc();
        }
    }

    /// Exports whether this replica leads.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Exports an engine's new health state: 1 on its state's series, 0 on the others.
    pub fn set_engine_state(&self, backend: &str, engine: &str, state: &str) {
        for candidate in crate::sources::health::EngineState::ALL {
            self.search_engine_state
                .get_or_create(&EngineHealthLabels {
                    backend: backend.to_string(),
                    engine: engine.to_string(),
                    state: candidate.as_str().to_string(),
                })
                .set(i64::from(candidate.as_str() == state));
        }
    }

    /// Counts `n` run events published to the live stream with `outcome` (`ok`, `dropped`, `error`).
    pub fn stream_published(&self, backend: &str, outcome: &str, n: u64) {
        self.event_stream_publish
            .get_or_create(&StreamPublishLabels {
                backend: backend.to_string(),
                outcome: outcome.to_string(),
            })
            .inc_by(n);
    }

    /// Records a cache lookup.
    pub fn cache_lookup(&self, kind: &str, backend: &str, result: &str) {
        self.cache_requests
            .get_or_create(&CacheLabels {
                kind: kind.to_string(),
                backend: backend.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// Records a run that reached a terminal phase: its duration by mode and outcome, its cost.
    pub fn record_finished_run(
        &self,
        run: &RunLabels,
        mode: &str,
        outcome: PhaseLabel,
        seconds: Option<f64>,
        cost_usd: f64,
        trace_id: Option<String>,
    ) {
        self.run_cost.get_or_create(run).observe(cost_usd);
        if let Some(seconds) = seconds {
            self.run_duration
                .get_or_create(&OutcomeLabels {
                    mode: mode.to_string(),
                    outcome,
                })
                .observe(
                    seconds,
                    trace_id.map(|trace_id| TraceLabels { trace_id }),
                    None,
                );
        }
    }

    /// The metrics of one run's engine, labelled with its namespace and profile.
    pub fn for_run(&self, namespace: &str, profile: &str) -> RunMetrics {
        RunMetrics {
            metrics: self.clone(),
            namespace: namespace.to_string(),
            profile: profile.to_string(),
        }
    }
}

impl crate::sources::failover::FailoverObserver for Metrics {
    fn on_call(&self, backend: &str, outcome: &'static str) {
        self.search_backend_requests
            .get_or_create(&BackendOutcomeLabels {
                backend: backend.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    fn on_breaker(&self, backend: &str, gauge: i64) {
        self.search_backend_breaker_state
            .get_or_create(&BackendLabels {
                backend: backend.to_string(),
            })
            .set(gauge);
    }
}

impl Metrics {
    /// Creates the schedule series of `namespace` at zero (`quarry_schedule_runs_total` for each
    /// decision, `quarry_schedule_changes_total`), so their first increase is visible.
    pub fn zero_schedule_series(&self, namespace: &str) {
        for decision in [
            ScheduleDecision::Created,
            ScheduleDecision::Skipped,
            ScheduleDecision::Replaced,
        ] {
            self.schedule_runs
                .get_or_create(&ScheduleLabels {
                    namespace: namespace.to_string(),
                    decision,
                })
                .inc_by(0);
        }
        self.schedule_changes
            .get_or_create(&NamespaceLabels {
                namespace: namespace.to_string(),
            })
            .inc_by(0);
    }

    /// Creates `quarry_reconcile_errors_total{reason}` at zero for each of `reasons`: a family
    /// with no series is absent from `/metrics`, and the dashboard and alerts query it.
    pub fn zero_reconcile_errors(&self, reasons: &[&str]) {
        for reason in reasons {
            self.reconcile_errors
                .get_or_create(&ErrorLabels {
                    reason: (*reason).to_string(),
                })
                .inc_by(0);
        }
    }
}

#[cfg(test)]
mod tests;
