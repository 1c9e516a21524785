//! Metrics of `quarry worker`: tasks taken, acknowledged and reclaimed, and the stream's lag
//! (what the chart's KEDA trigger scales on).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Labels of acknowledged tasks.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AckLabels {
    /// `finished`, `failed`, `cancelled` (the run no longer wanted it), `released` (handed back
    /// on shutdown), `given_up` (too many deliveries) or `invalid` (unreadable message).
    pub outcome: String,
}

/// The worker's metrics. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct QueueMetrics {
    /// `quarry_worker_tasks_taken_total`: entries this worker started, new or reclaimed.
    pub taken: Counter,
    /// `quarry_worker_tasks_reclaimed_total`: entries taken over from a silent consumer.
    pub reclaimed: Counter,
    /// `quarry_worker_tasks_acked_total{outcome}`.
    pub acked: Family<AckLabels, Counter>,
    /// `quarry_worker_tasks_lost_total`: tasks this worker stopped because another took them.
    pub lost: Counter,
    /// `quarry_worker_tasks_running`.
    pub running: Gauge,
    /// `quarry_worker_stream_lag`: entries of `quarry:tasks` not yet delivered to the group.
    pub lag: Gauge,
    /// `quarry_worker_stream_pending`: delivered entries not yet acknowledged.
    pub pending: Gauge,
}

impl QueueMetrics {
    /// Creates the metrics and registers them in `registry` (the `quarry_` prefixed one).
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "worker_tasks_taken",
            "Researcher tasks this worker started, new or reclaimed",
            m.taken.clone(),
        );
        registry.register(
            "worker_tasks_reclaimed",
            "Researcher tasks taken over from a consumer silent for the visibility timeout",
            m.reclaimed.clone(),
        );
        registry.register(
            "worker_tasks_acked",
            "Researcher tasks acknowledged, by outcome",
            m.acked.clone(),
        );
        registry.register(
            "worker_tasks_lost",
            "Researcher tasks stopped because another worker had taken them over",
            m.lost.clone(),
        );
        registry.register(
            "worker_tasks_running",
            "Researcher tasks running on this worker",
            m.running.clone(),
        );
        registry.register(
            "worker_stream_lag",
            "Entries of the tasks stream not yet delivered to the worker group",
            m.lag.clone(),
        );
        registry.register(
            "worker_stream_pending",
            "Entries of the tasks stream delivered but not yet acknowledged",
            m.pending.clone(),
        );
        m
    }

    /// Counts an acknowledged task.
    pub fn ack(&self, outcome: &str) {
        self.acked
            .get_or_create(&AckLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }
}
