//! Unit tests of `router`.

use super::*;
use crate::llm::limiter::{RateLimits, endpoint};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Fake {
    name: &'static str,
    fail_first: usize,
    error: fn() -> LlmError,
    calls: AtomicUsize,
    window: u64,
}

#[async_trait]
impl ChatModel for Fake {
    async fn chat(&self, _request: ChatRequest) -> Result<ChatResponse, LlmError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        if n < self.fail_first {
            return Err((self.error)());
        }
        Ok(ChatResponse {
            content: self.name.to_string(),
            tool_calls: vec![],
            usage: Usage {
                cached_input_tokens: 0,
                input_tokens: 100,
                output_tokens: 10,
                cost_pico_usd: 1_000,
                llm_calls: 1,
            },
            model: self.name.to_string(),
            finish_reason: None,
        })
    }
    fn context_window(&self) -> u64 {
        self.window
    }
}

fn fake(name: &'static str, fail_first: usize, error: fn() -> LlmError) -> Arc<Fake> {
    Arc::new(Fake {
        name,
        fail_first,
        error,
        calls: AtomicUsize::new(0),
        window: 8192,
    })
}

fn unavailable() -> LlmError {
    LlmError::Status {
        status: 503,
        body: "down".into(),
        retry_after: None,
    }
}

fn tier(name: &str, model: Arc<Fake>, url: &str) -> Tier {
    Tier {
        name: name.into(),
        model,
        endpoint: endpoint(url, name, RateLimits::default()),
        price: Price::FREE,
        provider: "test".into(),
        model_name: name.into(),
    }
}

fn req(purpose: CallPurpose) -> ChatRequest {
    ChatRequest {
        messages: vec![crate::llm::Message::user("x".repeat(400))],
        tools: vec![],
        json_mode: false,
        json_schema: None,
        max_tokens: 100,
        purpose,
    }
}

#[tokio::test(start_paused = true)]
async fn five_outages_open_the_breaker_and_the_fallback_answers_until_half_open_recovery() {
    let primary = fake("primary", 5, unavailable);
    let fallback = fake("fallback", 0, unavailable);
    let router = Router::new(
        tier(
            "primary",
            primary.clone(),
            "http://router-breaker.invalid/v1",
        ),
        Some(tier(
            "fallback",
            fallback.clone(),
            "http://router-breaker-fb.invalid/v1",
        )),
        None,
        vec![],
        Arc::new(SpendGuard::default()),
    );
    for _ in 0..5 {
        let r = router.chat(req(CallPurpose::Research)).await.unwrap();
        assert_eq!(r.content, "fallback");
    }
    assert_eq!(primary.calls.load(Ordering::SeqCst), 5);
    // Open: the primary is not even asked.
    router.chat(req(CallPurpose::Research)).await.unwrap();
    assert_eq!(primary.calls.load(Ordering::SeqCst), 5);
    // After 60 s the breaker lets trial calls through; the primary has recovered.
    tokio::time::advance(std::time::Duration::from_secs(61)).await;
    assert_eq!(
        router
            .chat(req(CallPurpose::Research))
            .await
            .unwrap()
            .content,
        "primary"
    );
    assert_eq!(
        router
            .chat(req(CallPurpose::Research))
            .await
            .unwrap()
            .content,
        "primary"
    );
    assert_eq!(primary.calls.load(Ordering::SeqCst), 7);
}

#[tokio::test]
async fn malformed_output_goes_to_the_next_tier_and_config_errors_stop() {
    let primary = fake("primary", 1, || LlmError::Malformed("garbage".into()));
    let budget = fake("budget", 0, unavailable);
    let router = Router::new(
        tier("primary", primary, "http://router-malformed.invalid/v1"),
        None,
        Some(tier(
            "budget",
            budget,
            "http://router-malformed-b.invalid/v1",
        )),
        vec![],
        Arc::new(SpendGuard::default()),
    );
    assert_eq!(
        router.chat(req(CallPurpose::Plan)).await.unwrap().content,
        "budget"
    );
    let broken = fake("broken", 9, || LlmError::Config("bad key".into()));
    let spare = fake("spare", 0, unavailable);
    let router = Router::new(
        tier("broken", broken, "http://router-config.invalid/v1"),
        Some(tier(
            "spare",
            spare.clone(),
            "http://router-config-s.invalid/v1",
        )),
        None,
        vec![],
        Arc::new(SpendGuard::default()),
    );
    assert!(matches!(
        router.chat(req(CallPurpose::Plan)).await,
        Err(LlmError::Config(_))
    ));
    assert_eq!(spare.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn roles_pick_their_own_primary_and_the_budget_tier_leads_past_eighty_percent() {
    let primary = fake("primary", 0, unavailable);
    let writer = fake("writer", 0, unavailable);
    let budget = fake("budget", 0, unavailable);
    let guard = Arc::new(SpendGuard::default());
    let router = Router::new(
        tier("primary", primary, "http://router-roles.invalid/v1"),
        None,
        Some(tier("budget", budget, "http://router-roles-b.invalid/v1")),
        vec![(
            Role::Writer,
            tier("roles.writer", writer, "http://router-roles-w.invalid/v1"),
        )],
        guard.clone(),
    );
    let names = |p| {
        router
            .order(p)
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(CallPurpose::Synthesize),
        vec!["roles.writer", "primary", "budget"]
    );
    assert_eq!(names(CallPurpose::Research), vec!["primary", "budget"]);
    // 8 of 10 units spent: the budget tier goes first.
    guard.configure(
        Some(10_000),
        None,
        &Usage {
            cost_pico_usd: 8_000,
            ..Usage::default()
        },
    );
    assert_eq!(names(CallPurpose::Research), vec!["budget", "primary"]);
    assert_eq!(
        router
            .chat(req(CallPurpose::Research))
            .await
            .unwrap()
            .content,
        "budget"
    );
}

#[tokio::test]
async fn a_call_whose_worst_case_passes_the_budget_is_not_made() {
    let primary = fake("primary", 0, unavailable);
    let guard = Arc::new(SpendGuard::default());
    let mut t = tier(
        "primary",
        primary.clone(),
        "http://router-budget.invalid/v1",
    );
    // 1 and 10 USD per million tokens; the worst case is 100 tokens in and 100 out.
    t.price = Price::parse("1", "10").unwrap();
    let router = Router::new(t, None, None, vec![], guard.clone());
    let worst = Price::parse("1", "10").unwrap().cost_pico_usd(100, 100);
    guard.configure(Some(worst * 2 + worst / 2), None, &Usage::default());
    // Two calls fit (each settles at the fake's 1_000 pico-USD), the third's worst case does not.
    router.chat(req(CallPurpose::Research)).await.unwrap();
    router.chat(req(CallPurpose::Research)).await.unwrap();
    guard.configure(
        Some(worst * 2 + worst / 2),
        None,
        &Usage {
            cost_pico_usd: worst * 2,
            ..Usage::default()
        },
    );
    let err = router.chat(req(CallPurpose::Research)).await.unwrap_err();
    assert!(
        matches!(err, LlmError::BudgetExhausted { tokens: false, .. }),
        "{err}"
    );
    assert_eq!(primary.calls.load(Ordering::SeqCst), 2);
    // Token budgets work the same way.
    guard.configure(None, Some(150), &Usage::default());
    let err = router.chat(req(CallPurpose::Research)).await.unwrap_err();
    assert!(
        matches!(err, LlmError::BudgetExhausted { tokens: true, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_reservations_cannot_overshoot_together() {
    let guard = SpendGuard::default();
    guard.configure(Some(1_000), None, &Usage::default());
    let a = guard.reserve(600, 0).unwrap();
    assert!(
        guard.reserve(600, 0).is_err(),
        "the second call waits for the first to settle"
    );
    guard.settle(
        a,
        &Usage {
            cost_pico_usd: 100,
            ..Usage::default()
        },
    );
    assert!(guard.reserve(600, 0).is_ok());
    assert!((guard.fraction_used() - 0.7).abs() < 1e-9);
}

#[tokio::test]
async fn a_cheaper_tier_answers_when_the_primary_worst_case_does_not_fit() {
    let primary = fake("primary", 0, unavailable);
    let budget = fake("budget", 0, unavailable);
    let guard = Arc::new(SpendGuard::default());
    let mut p = tier(
        "primary",
        primary.clone(),
        "http://router-cheaper.invalid/v1",
    );
    p.price = Price::parse("10", "100").unwrap();
    let mut b = tier(
        "budget",
        budget.clone(),
        "http://router-cheaper-b.invalid/v1",
    );
    b.price = Price::parse("0.1", "0.4").unwrap();
    let router = Router::new(p, None, Some(b), vec![], guard.clone());
    // Room for the budget tier's worst case (100·0.1 + 100·0.4 µUSD) but not the primary's.
    guard.configure(Some(1_000_000_000), None, &Usage::default());
    assert_eq!(
        router
            .chat(req(CallPurpose::Research))
            .await
            .unwrap()
            .content,
        "budget"
    );
    assert_eq!(primary.calls.load(Ordering::SeqCst), 0);
    // Nothing fits: the refusal is the error, whatever else happened.
    guard.configure(Some(1), None, &Usage::default());
    assert!(matches!(
        router.chat(req(CallPurpose::Research)).await,
        Err(LlmError::BudgetExhausted { .. })
    ));
}

#[tokio::test]
async fn a_researchers_calls_carry_its_task_in_the_provenance_log() {
    let guard = Arc::new(SpendGuard::default());
    let router = Router::new(
        tier(
            "primary",
            fake("primary", 0, unavailable),
            "http://router-task.invalid/v1",
        ),
        None,
        None,
        vec![],
        guard.clone(),
    );
    router.chat(req(CallPurpose::Plan)).await.unwrap();
    RESEARCH_TASK
        .scope(7, router.chat(req(CallPurpose::Research)))
        .await
        .unwrap();
    let (calls, _) = guard.calls();
    let tasks: Vec<Option<u32>> = calls.iter().map(|c| c.task).collect();
    assert_eq!(tasks, vec![None, Some(7)]);
    let line = serde_json::to_string(&calls[1]).unwrap();
    assert!(line.contains("\"task\":7"), "{line}");
    assert!(!serde_json::to_string(&calls[0]).unwrap().contains("task"));
}

#[test]
fn json_mode_is_that_of_the_tier_asked_first_for_the_purpose() {
    let client = |json_mode: bool| -> Arc<dyn ChatModel> {
        let mut config = crate::llm::ModelConfig::new("http://router-json.invalid/v1", "m");
        config.json_mode = json_mode;
        Arc::new(crate::llm::openai::OpenAiClient::new(config).unwrap())
    };
    let tier = |name: &str, model: Arc<dyn ChatModel>| Tier {
        name: name.into(),
        model,
        endpoint: endpoint("http://router-json.invalid/v1", name, RateLimits::default()),
        price: Price::FREE,
        provider: "test".into(),
        model_name: name.into(),
    };
    let router = Router::new(
        tier("primary", client(false)),
        None,
        None,
        vec![(Role::Researcher, tier("roles.researcher", client(true)))],
        Arc::new(SpendGuard::default()),
    );
    assert!(router.json_mode(CallPurpose::Research));
    assert!(!router.json_mode(CallPurpose::Plan));
    // A model that says nothing about JSON mode has none.
    assert!(!fake("plain", 0, unavailable).json_mode(CallPurpose::Research));
}
