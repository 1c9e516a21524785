//! Metrics of one run: what its model calls, searches and pages add to the process's families, labelled by the run's namespace, profile and models.

use super::*;

/// The metrics one run's engine records (model calls, searches, fetches), with its labels.
#[derive(Clone, Debug)]
pub struct RunMetrics {
    pub(super) metrics: Metrics,
    pub(super) namespace: String,
    pub(super) profile: String,
}

impl RunMetrics {
    /// The operator-wide metrics behind this handle.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Records one model request: its outcome, duration and (when answered) tokens and cost.
    pub fn llm_request(
        &self,
        provider: &str,
        model: &str,
        outcome: &str,
        usage: Option<&crate::llm::Usage>,
        seconds: Option<f64>,
        trace_id: Option<String>,
    ) {
        let m = &self.metrics;
        m.llm_requests
            .get_or_create(&RequestLabels {
                namespace: self.namespace.clone(),
                profile: self.profile.clone(),
                provider: provider.to_string(),
                model: model.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        let endpoint = EndpointLabels {
            provider: provider.to_string(),
            model: model.to_string(),
        };
        if let Some(seconds) = seconds {
            m.llm_duration.get_or_create(&endpoint).observe(
                seconds,
                trace_id.map(|trace_id| TraceLabels { trace_id }),
                None,
            );
        }
        if let Some(usage) = usage {
            for (kind, n) in [
                ("input", usage.input_tokens),
                ("cached", usage.cached_input_tokens),
                ("output", usage.output_tokens),
            ] {
                m.llm_tokens
                    .get_or_create(&TokenLabels {
                        namespace: self.namespace.clone(),
                        profile: self.profile.clone(),
                        provider: provider.to_string(),
                        model: model.to_string(),
                        kind: kind.to_string(),
                    })
                    .inc_by(n);
            }
            // pico-USD to USD; f64 is exact enough for a monotonically growing total.
            m.llm_cost_usd
                .get_or_create(&ModelLabels {
                    namespace: self.namespace.clone(),
                    profile: self.profile.clone(),
                    provider: provider.to_string(),
                    model: model.to_string(),
                })
                .inc_by(usage.cost_pico_usd as f64 / 1e12);
        }
    }

    /// Records the state of an endpoint's circuit breaker (0 closed, 1 half-open, 2 open).
    pub fn breaker_state(&self, provider: &str, model: &str, state: i64) {
        self.metrics
            .llm_breaker_state
            .get_or_create(&EndpointLabels {
                provider: provider.to_string(),
                model: model.to_string(),
            })
            .set(state);
    }

    /// Exposes an endpoint's per-endpoint series at zero, so `rate()` and alerts see them
    /// before the first fallback or wait (Prometheus' advice for known label sets).
    pub fn register_endpoint(&self, provider: &str, model: &str) {
        let labels = EndpointLabels {
            provider: provider.to_string(),
            model: model.to_string(),
        };
        let m = &self.metrics;
        m.llm_fallbacks.get_or_create(&labels).inc_by(0);
        m.llm_rate_limit_waits.get_or_create(&labels).inc_by(0);
        m.llm_rate_limit_wait_seconds
            .get_or_create(&labels)
            .inc_by(0.0);
        m.llm_breaker_state.get_or_create(&labels).inc_by(0);
    }

    /// Records a call the endpoint could not serve, passed on to the next tier.
    pub fn fallback(&self, provider: &str, model: &str) {
        self.metrics
            .llm_fallbacks
            .get_or_create(&EndpointLabels {
                provider: provider.to_string(),
                model: model.to_string(),
            })
            .inc();
    }

    /// Records a wait imposed by the shared rate limiter.
    pub fn rate_limit_wait(&self, provider: &str, model: &str, waited: std::time::Duration) {
        let labels = EndpointLabels {
            provider: provider.to_string(),
            model: model.to_string(),
        };
        self.metrics
            .llm_rate_limit_waits
            .get_or_create(&labels)
            .inc();
        self.metrics
            .llm_rate_limit_wait_seconds
            .get_or_create(&labels)
            .inc_by(waited.as_secs_f64());
    }

    pub(super) fn source(&self, outcome: &str) -> SourceLabels {
        SourceLabels {
            namespace: self.namespace.clone(),
            profile: self.profile.clone(),
            outcome: outcome.to_string(),
        }
    }

    /// Records one search query by outcome (`ok`, `empty`, `error`).
    pub fn search(&self, outcome: &str) {
        self.metrics
            .searches
            .get_or_create(&self.source(outcome))
            .inc();
    }

    /// Records one page fetch by outcome (`ok`, `error`).
    pub fn fetch(&self, outcome: &str) {
        self.metrics
            .fetches
            .get_or_create(&self.source(outcome))
            .inc();
    }
}
