//! The model router: tiers tried in order, per-role overrides, a circuit breaker and a
//! shared rate limiter per endpoint, and the run's budget guard.
//!
//! Every model call of a run goes through one [`Router`]. Before a call it reserves the call's
//! worst case (estimated input plus `max_tokens` of output, priced for the tier) against the
//! run's limits, so concurrent researchers cannot together overshoot a budget; past 80% of a
//! budget the budget tier is asked first.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tracing::Instrument;

use super::limiter::EndpointState;
use super::pricing::Price;
use super::window::{estimate_tokens, request_chars};
use super::{CallPurpose, ChatModel, ChatRequest, ChatResponse, LlmError, Usage};
use crate::telemetry::RunMetrics;

/// Share of a budget past which the budget tier is preferred.
pub const BUDGET_TIER_AT: f64 = 0.8;

/// Who a call is for; a profile may give a role its own primary model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Planner,
    Researcher,
    Evaluator,
    Summarizer,
    Writer,
}

impl Role {
    /// The role of a call.
    pub fn of(purpose: CallPurpose) -> Self {
        match purpose {
            CallPurpose::Plan => Role::Planner,
            CallPurpose::Research => Role::Researcher,
            CallPurpose::Evaluate => Role::Evaluator,
            CallPurpose::Summarize | CallPurpose::Classify => Role::Summarizer,
            CallPurpose::Synthesize => Role::Writer,
        }
    }
}

tokio::task_local! {
    /// The agenda task of the researcher running the current code. Parallel researchers' lines
    /// interleave in the provenance log; this gives each line its branch (benchmarks derive the
    /// run's critical path from it). Set by the executor around each researcher.
    pub static RESEARCH_TASK: u32;
}

/// The agenda task of the researcher running this code, if any.
pub fn current_task() -> Option<u32> {
    RESEARCH_TASK.try_with(|t| *t).ok()
}

/// Calls kept in the provenance log at most (older ones are dropped, and counted).
pub const MAX_CALL_RECORDS: usize = 10_000;

/// One model call as the provenance log records it (one JSON line each).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRecord {
    /// When the call ended, RFC 3339.
    pub time: String,
    pub kind: &'static str,
    pub tier: String,
    pub provider: String,
    pub model: String,
    pub purpose: CallPurpose,
    pub outcome: &'static str,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    #[serde(rename = "costUSD")]
    pub cost_usd: String,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The agenda task of the researcher that made the call (absent for lead calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<u32>,
    /// The call's exact cost (`costUSD` is rounded to micro-dollars).
    #[serde(rename = "costPicoUSD")]
    pub cost_pico_usd: u64,
    /// What the run had spent in all once this call settled, across restarts: a resumed run
    /// recovers its exact spend from the newest line (calls after its last checkpoint included).
    pub run_total: RunTotal,
}

/// The run's cumulative spend as each call line of the provenance log records it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunTotal {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    #[serde(rename = "costPicoUSD")]
    pub cost_pico_usd: u64,
    pub llm_calls: u64,
}

impl From<&Usage> for RunTotal {
    fn from(u: &Usage) -> Self {
        Self {
            input_tokens: u.input_tokens,
            cached_input_tokens: u.cached_input_tokens,
            output_tokens: u.output_tokens,
            cost_pico_usd: u.cost_pico_usd,
            llm_calls: u.llm_calls,
        }
    }
}

impl From<RunTotal> for Usage {
    fn from(t: RunTotal) -> Self {
        Self {
            input_tokens: t.input_tokens,
            cached_input_tokens: t.cached_input_tokens,
            output_tokens: t.output_tokens,
            cost_pico_usd: t.cost_pico_usd,
            llm_calls: t.llm_calls,
        }
    }
}

/// Makes the provenance log durable; the router waits for it after each answered call, so no
/// answer is used before its cost is on record (a crash loses no paid call that mattered).
#[async_trait::async_trait]
pub trait CallJournal: Send + Sync {
    /// Persists every record logged so far (best effort: failures are the journal's to report).
    async fn sync(&self);
}

/// One search or page read as the provenance log records it (one JSON line each).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceRecord {
    /// When it ended, RFC 3339.
    pub time: String,
    /// `search` or `fetch`.
    pub kind: &'static str,
    /// The query or URL.
    pub subject: String,
    /// `hit` (served from the cache, no request made), `miss` or `error`.
    pub cache: &'static str,
    /// `ok`, `empty` or `error`.
    pub outcome: &'static str,
    pub duration_ms: u64,
    /// The agenda task of the researcher that searched or read (absent outside researchers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<u32>,
}

/// Receives every provenance record as it is logged (the live event stream). Called outside the
/// guard's lock; implementations must return at once (queue, never wait).
pub trait RecordTap: Send + Sync {
    /// A model call was logged.
    fn on_call(&self, record: &CallRecord);
    /// A search or page read was logged.
    fn on_source(&self, record: &SourceRecord);
}

#[derive(Default)]
struct Spend {
    /// Usage per model that answered.
    by_model: std::collections::BTreeMap<String, Usage>,
    /// Every model call of the run (the provenance log), oldest first.
    calls: Vec<CallRecord>,
    /// Calls dropped from `calls` past [`MAX_CALL_RECORDS`].
    calls_dropped: u64,
    /// Every search and page read of the run, oldest first (capped like `calls`).
    sources: Vec<SourceRecord>,
    max_cost_pico_usd: Option<u64>,
    max_tokens: Option<u64>,
    cost: u64,
    tokens: u64,
    reserved_cost: u64,
    reserved_tokens: u64,
    /// Everything spent so far, resumed runs included (the `runTotal` of call lines).
    spent: Usage,
    /// Records logged so far (calls and sources, dropped ones included): the journal's version.
    logged: u64,
    /// Where records go as they are logged, besides the log.
    tap: Option<Arc<dyn RecordTap>>,
}

impl std::fmt::Debug for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spend")
            .field("calls", &self.calls.len())
            .field("sources", &self.sources.len())
            .field("cost", &self.cost)
            .field("tokens", &self.tokens)
            .finish_non_exhaustive()
    }
}

/// The run's budget as the router sees it: spend so far plus what calls in flight may still cost.
#[derive(Debug, Default)]
pub struct SpendGuard {
    inner: Mutex<Spend>,
    /// Where answered calls are made durable (the run's provenance log), when there is one.
    journal: Mutex<Option<std::sync::Weak<dyn CallJournal>>>,
    /// The run's namespace and name, put on every model-call span (set once).
    run: std::sync::OnceLock<(String, String)>,
}

/// The worst case of one call in flight, held against the budget until it settles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    cost: u64,
    tokens: u64,
}

impl SpendGuard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Spend> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Restores the per-model ledger of a resumed run.
    pub fn restore_by_model(&self, by_model: &std::collections::BTreeMap<String, Usage>) {
        self.lock().by_model = by_model.clone();
    }

    /// Usage per model so far.
    pub fn by_model(&self) -> std::collections::BTreeMap<String, Usage> {
        self.lock().by_model.clone()
    }

    /// Names the run whose calls this guard charges: its model-call spans carry `quarry.namespace`
    /// and `quarry.run`. The first call wins; later ones are ignored.
    pub fn set_run(&self, namespace: &str, run: &str) {
        let _ = self.run.set((namespace.to_string(), run.to_string()));
    }

    /// Sends every record logged from now on to `tap` as well (the run's live event stream).
    pub fn set_tap(&self, tap: Arc<dyn RecordTap>) {
        self.lock().tap = Some(tap);
    }

    /// Appends a call to the provenance log, stamped with the run's total spend so far.
    pub fn log_call(&self, mut record: CallRecord) {
        let tap = {
            let mut s = self.lock();
            record.run_total = RunTotal::from(&s.spent);
            if s.calls.len() >= MAX_CALL_RECORDS {
                s.calls.remove(0);
                s.calls_dropped += 1;
            }
            s.calls.push(record.clone());
            s.logged += 1;
            s.tap.clone()
        };
        if let Some(tap) = tap {
            tap.on_call(&record);
        }
    }

    /// Appends a search or page read to the provenance log.
    pub fn log_source(&self, record: SourceRecord) {
        let tap = {
            let mut s = self.lock();
            if s.sources.len() >= MAX_CALL_RECORDS {
                s.sources.remove(0);
            }
            s.sources.push(record.clone());
            s.logged += 1;
            s.tap.clone()
        };
        if let Some(tap) = tap {
            tap.on_source(&record);
        }
    }

    /// How many records were logged so far: changes whenever the log does.
    pub fn logged(&self) -> u64 {
        self.lock().logged
    }

    /// Everything the run spent so far (what it had before a restart included).
    pub fn spent(&self) -> Usage {
        self.lock().spent
    }

    /// Names the journal that makes answered calls durable.
    pub fn set_journal(&self, journal: std::sync::Weak<dyn CallJournal>) {
        *self.journal.lock().unwrap_or_else(|p| p.into_inner()) = Some(journal);
    }

    /// Waits until every call logged so far is durable (returns at once without a journal).
    pub async fn sync_journal(&self) {
        let journal = self
            .journal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(std::sync::Weak::upgrade);
        if let Some(journal) = journal {
            journal.sync().await;
        }
    }

    /// The searches and page reads logged so far.
    pub fn sources(&self) -> Vec<SourceRecord> {
        self.lock().sources.clone()
    }

    /// The provenance log so far, and how many older records were dropped.
    pub fn calls(&self) -> (Vec<CallRecord>, u64) {
        let s = self.lock();
        (s.calls.clone(), s.calls_dropped)
    }

    /// Adds a settled call's usage to its model's line of the ledger.
    fn record_model(&self, model: &str, used: &Usage) {
        self.lock()
            .by_model
            .entry(model.to_string())
            .or_default()
            .add(used);
    }

    /// Accounts what this run's researchers spent on other processes (scale-out workers), per
    /// model: it counts against the run's limits, in the per-model ledger and in the run total
    /// that call lines logged after it carry.
    pub fn account_remote(&self, by_model: &std::collections::BTreeMap<String, Usage>) {
        let mut s = self.lock();
        for (model, used) in by_model {
            s.cost += used.cost_pico_usd;
            s.tokens += used.input_tokens + used.output_tokens;
            s.spent.add(used);
            s.by_model.entry(model.clone()).or_default().add(used);
        }
    }

    /// Sets the run's limits and what it already spent (a resumed run keeps its spend).
    pub fn configure(
        &self,
        max_cost_pico_usd: Option<u64>,
        max_tokens: Option<u64>,
        spent: &Usage,
    ) {
        let mut s = self.lock();
        s.max_cost_pico_usd = max_cost_pico_usd;
        s.max_tokens = max_tokens;
        s.cost = spent.cost_pico_usd;
        s.tokens = spent.input_tokens + spent.output_tokens;
        s.spent = *spent;
    }

    /// Holds a call's worst case against the budget, or refuses the call.
    pub fn reserve(&self, cost: u64, tokens: u64) -> Result<Reservation, LlmError> {
        let mut s = self.lock();
        if let Some(max) = s.max_cost_pico_usd
            && s.cost + s.reserved_cost + cost > max
        {
            return Err(LlmError::BudgetExhausted {
                tokens: false,
                message: format!(
                    "the next model call could cost up to ${} and only ${} of the run's maxCostUSD is left",
                    super::format_pico_usd(cost),
                    super::format_pico_usd(max.saturating_sub(s.cost + s.reserved_cost))
                ),
            });
        }
        if let Some(max) = s.max_tokens
            && s.tokens + s.reserved_tokens + tokens > max
        {
            return Err(LlmError::BudgetExhausted {
                tokens: true,
                message: format!(
                    "the next model call could use up to {tokens} tokens and only {} of the run's maxTokens are left",
                    max.saturating_sub(s.tokens + s.reserved_tokens)
                ),
            });
        }
        s.reserved_cost += cost;
        s.reserved_tokens += tokens;
        Ok(Reservation { cost, tokens })
    }

    /// Replaces a reservation with what the call really used.
    pub fn settle(&self, r: Reservation, used: &Usage) {
        let mut s = self.lock();
        s.reserved_cost = s.reserved_cost.saturating_sub(r.cost);
        s.reserved_tokens = s.reserved_tokens.saturating_sub(r.tokens);
        s.cost += used.cost_pico_usd;
        s.tokens += used.input_tokens + used.output_tokens;
        s.spent.add(used);
    }

    /// Drops a reservation of a call that failed without reported usage.
    pub fn release(&self, r: Reservation) {
        self.settle(r, &Usage::default());
    }

    /// The larger of the spent shares of the cost and token budgets (0 without limits).
    pub fn fraction_used(&self) -> f64 {
        let s = self.lock();
        let share = |used: u64, max: Option<u64>| {
            max.filter(|m| *m > 0)
                .map_or(0.0, |m| used as f64 / m as f64)
        };
        share(s.cost + s.reserved_cost, s.max_cost_pico_usd)
            .max(share(s.tokens + s.reserved_tokens, s.max_tokens))
    }
}

/// One model endpoint the router may call.
pub struct Tier {
    /// `primary`, `fallback`, `budget` or `roles.<role>`.
    pub name: String,
    pub model: Arc<dyn ChatModel>,
    /// The endpoint's shared breaker and rate limiter.
    pub endpoint: Arc<EndpointState>,
    pub price: Price,
    /// Metric label: the host of the base URL.
    pub provider: String,
    /// Metric label: the model name sent.
    pub model_name: String,
}

/// Routes each call to the first usable tier.
pub struct Router {
    primary: Tier,
    fallback: Option<Tier>,
    budget: Option<Tier>,
    roles: Vec<(Role, Tier)>,
    guard: Arc<SpendGuard>,
    metrics: Option<RunMetrics>,
}

impl Router {
    /// Records every call in `metrics` (requests by outcome, tokens, cost, durations, breakers).
    pub fn with_metrics(mut self, metrics: RunMetrics) -> Self {
        for tier in std::iter::once(&self.primary)
            .chain(self.fallback.iter())
            .chain(self.budget.iter())
            .chain(self.roles.iter().map(|(_, t)| t))
        {
            metrics.register_endpoint(&tier.provider, &tier.model_name);
        }
        self.metrics = Some(metrics);
        self
    }

    fn record(
        &self,
        tier: &Tier,
        outcome: &str,
        usage: Option<&Usage>,
        seconds: Option<f64>,
        trace_id: Option<String>,
    ) {
        if let Some(m) = &self.metrics {
            m.llm_request(
                &tier.provider,
                &tier.model_name,
                outcome,
                usage,
                seconds,
                trace_id,
            );
            let state = tier.endpoint.with_breaker(|b| b.state().gauge());
            m.breaker_state(&tier.provider, &tier.model_name, state);
        }
    }

    /// A router over the profile's tiers, charging the run's `guard`.
    pub fn new(
        primary: Tier,
        fallback: Option<Tier>,
        budget: Option<Tier>,
        roles: Vec<(Role, Tier)>,
        guard: Arc<SpendGuard>,
    ) -> Self {
        Self {
            primary,
            fallback,
            budget,
            roles,
            guard,
            metrics: None,
        }
    }

    /// The tiers a call tries, in order: the role's model or the primary, the fallback, the budget
    /// tier; the budget tier first once 80% of a budget is spent.
    pub fn order(&self, purpose: CallPurpose) -> Vec<&Tier> {
        let role = Role::of(purpose);
        let first = self
            .roles
            .iter()
            .find(|(r, _)| *r == role)
            .map_or(&self.primary, |(_, t)| t);
        let mut order = vec![first];
        if !std::ptr::eq(first, &self.primary) {
            order.push(&self.primary);
        }
        order.extend(self.fallback.iter());
        if let Some(budget) = &self.budget {
            if self.guard.fraction_used() >= BUDGET_TIER_AT {
                order.insert(0, budget);
            } else {
                order.push(budget);
            }
        }
        order
    }
}

/// True for failures that say the endpoint is unavailable (they count against its breaker).
fn is_outage(e: &LlmError) -> bool {
    // A garbled answer came from a live server: retried, but not held against its breaker.
    e.is_retryable() && !matches!(e, LlmError::Garbled(_))
}

/// The `outcome` label of a failed request.
pub fn outcome_of(e: &LlmError) -> &'static str {
    match e.unbilled() {
        LlmError::Status { status: 429, .. } => "rate_limited",
        LlmError::Status { status, .. } if *status >= 500 => "unavailable",
        LlmError::Unreachable { .. } => "unavailable",
        LlmError::Timeout { .. } => "timeout",
        LlmError::Malformed(_) | LlmError::Garbled(_) | LlmError::Degenerate { .. } => {
            "invalid_output"
        }
        LlmError::Status { .. } | LlmError::Config(_) => "rejected",
        LlmError::BudgetExhausted { .. } => "budget_refused",
        LlmError::CircuitOpen { .. } => "circuit_open",
        LlmError::Billed { source, .. } => outcome_of(source),
    }
}

#[async_trait]
impl ChatModel for Router {
    async fn chat(&self, request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let input = estimate_tokens(request_chars(&request));
        let output = u64::from(request.max_tokens);
        let mut last: Option<LlmError> = None;
        let mut refused: Option<LlmError> = None;
        // What unusable answers of tiers tried before cost (providers bill them).
        let mut billed = Usage::default();
        let mut open = Vec::new();
        for tier in self.order(request.purpose) {
            let now = tokio::time::Instant::now().into_std();
            if !tier.endpoint.with_breaker(|b| b.allow(now)) {
                open.push(tier.name.clone());
                self.record(tier, "circuit_open", None, None, None);
                continue;
            }
            // A tier whose worst case does not fit may leave room for a cheaper one.
            let reservation = match self
                .guard
                .reserve(tier.price.cost_pico_usd(input, output), input + output)
            {
                Ok(r) => r,
                Err(e) => {
                    self.record(tier, outcome_of(&e), None, None, None);
                    refused = Some(e);
                    continue;
                }
            };
            let waited = tier.endpoint.acquire(input + output).await;
            if !waited.is_zero() {
                tracing::debug!(tier = %tier.name, wait_ms = waited.as_millis() as u64, "rate limit wait");
                if let Some(m) = &self.metrics {
                    m.rate_limit_wait(&tier.provider, &tier.model_name, waited);
                }
            }
            // One span per model call, with OpenTelemetry's GenAI semantic-convention attributes
            // and the run it belongs to. Counts are recorded as i64: OpenTelemetry's integers are
            // signed, and tracing-opentelemetry exports a u64 field as a string.
            let run = self.guard.run.get();
            let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            let span = tracing::info_span!(
                "gen_ai.chat",
                otel.name = %format!("chat {}", tier.model_name),
                otel.kind = "client",
                gen_ai.operation.name = "chat",
                gen_ai.system = %tier.provider,
                gen_ai.request.model = %tier.model_name,
                gen_ai.request.max_tokens = i64::from(request.max_tokens),
                gen_ai.response.model = tracing::field::Empty,
                gen_ai.response.finish_reasons = tracing::field::Empty,
                gen_ai.usage.input_tokens = tracing::field::Empty,
                gen_ai.usage.output_tokens = tracing::field::Empty,
                quarry.namespace = run.map(|(namespace, _)| namespace.as_str()),
                quarry.run = run.map(|(_, run)| run.as_str()),
                quarry.tier = %tier.name,
                quarry.purpose = ?request.purpose,
                quarry.outcome = tracing::field::Empty,
            );
            let started = tokio::time::Instant::now();
            let result = tier
                .model
                .chat(request.clone())
                .instrument(span.clone())
                .await;
            let seconds = started.elapsed().as_secs_f64();
            let trace_id = crate::telemetry::trace_id_of(&span);
            // An unusable answer is still paid for: its bill is recorded like any other call.
            let used = result.as_ref().map_or_else(LlmError::billed, |r| r.usage);
            let record = CallRecord {
                time: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                kind: "modelCall",
                tier: tier.name.clone(),
                provider: tier.provider.clone(),
                model: tier.model_name.clone(),
                purpose: request.purpose,
                outcome: result.as_ref().map_or_else(outcome_of, |_| "ok"),
                input_tokens: used.input_tokens,
                cached_input_tokens: used.cached_input_tokens,
                output_tokens: used.output_tokens,
                cost_usd: used.cost_usd_string(),
                duration_ms: (seconds * 1000.0) as u64,
                trace_id: trace_id.clone(),
                task: current_task(),
                cost_pico_usd: used.cost_pico_usd,
                run_total: RunTotal::default(),
            };
            match &result {
                Ok(resp) => {
                    span.record("gen_ai.response.model", resp.model.as_str());
                    span.record("gen_ai.usage.input_tokens", int(resp.usage.input_tokens));
                    span.record("gen_ai.usage.output_tokens", int(resp.usage.output_tokens));
                    if let Some(reason) = &resp.finish_reason {
                        span.record("gen_ai.response.finish_reasons", reason.as_str());
                    }
                    span.record("quarry.outcome", "ok");
                }
                Err(e) => {
                    span.record("quarry.outcome", outcome_of(e));
                }
            }
            match result {
                Ok(resp) => {
                    tier.endpoint.with_breaker(|b| b.on_success());
                    self.guard.settle(reservation, &resp.usage);
                    self.guard.record_model(&tier.model_name, &resp.usage);
                    self.guard.log_call(record);
                    self.record(tier, "ok", Some(&resp.usage), Some(seconds), trace_id);
                    // The answer is used only once its cost is on record.
                    self.guard.sync_journal().await;
                    let mut resp = resp;
                    resp.usage.add(&billed);
                    return Ok(resp);
                }
                Err(e) => {
                    if used.llm_calls > 0 {
                        // An unusable answer is still paid for: on record like any other call.
                        self.guard.settle(reservation, &used);
                        self.guard.record_model(&tier.model_name, &used);
                        self.guard.sync_journal().await;
                        billed.add(&used);
                    } else {
                        self.guard.release(reservation);
                    }
                    self.guard.log_call(record);
                    if let LlmError::Config(_) = e {
                        return Err(e);
                    }
                    if is_outage(&e) {
                        let now = tokio::time::Instant::now().into_std();
                        tier.endpoint.with_breaker(|b| b.on_failure(now));
                    } else {
                        // The endpoint answered, just not usefully: it is up.
                        tier.endpoint.with_breaker(|b| b.on_success());
                    }
                    let paid = (used.llm_calls > 0).then_some(&used);
                    self.record(tier, outcome_of(&e), paid, Some(seconds), trace_id);
                    if let Some(m) = &self.metrics {
                        m.fallback(&tier.provider, &tier.model_name);
                    }
                    tracing::warn!(tier = %tier.name, error = %e, "model tier failed; trying the next");
                    last = Some(e.into_unbilled());
                }
            }
        }
        // A budget refusal wins: the run must stop at its limit, not fail for a spare tier.
        let err = refused.or(last).unwrap_or(LlmError::CircuitOpen {
            endpoints: open.join(", "),
        });
        // The caller learns everything the failed attempts cost.
        Err(if billed.llm_calls > 0 {
            LlmError::Billed {
                usage: billed,
                source: Box::new(err),
            }
        } else {
            err
        })
    }

    fn context_window(&self) -> u64 {
        // Any tier may answer, so work within the smallest window.
        std::iter::once(&self.primary)
            .chain(self.fallback.iter())
            .chain(self.budget.iter())
            .chain(self.roles.iter().map(|(_, t)| t))
            .map(|t| t.model.context_window())
            .min()
            .unwrap_or(8192)
    }

    fn json_mode(&self, purpose: CallPurpose) -> bool {
        // The tier asked first answers almost every call; a later tier without JSON mode still
        // gets a prompt that asks for the JSON form, and callers parse what comes back tolerantly.
        self.order(purpose)
            .first()
            .is_some_and(|t| t.model.json_mode(purpose))
    }

    fn prompt_tools(&self, purpose: CallPurpose) -> bool {
        self.order(purpose)
            .first()
            .is_some_and(|t| t.model.prompt_tools(purpose))
    }
}

#[cfg(test)]
mod tests;
