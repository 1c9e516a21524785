//! The words every layer of Quarry shares: the reasons a run ends with and the validation
//! patterns checked both at admission (CRD schema) and at run time (standalone profiles).
//!
//! The engine produces these reasons and the API's conditions carry them unchanged; neither owns
//! the other, so they live here, below both.

/// Reasons a run fails or stops with: the engine's outcomes, surfaced unchanged in status
/// conditions, Kubernetes Events and the CLI.
pub mod reasons {
    /// The planner's agenda could not be parsed, even after a repair retry.
    pub const PLAN_UNPARSEABLE: &str = "PlanUnparseable";
    /// The model's output could not be used even after tolerant parsing.
    pub const MODEL_OUTPUT_INVALID: &str = "ModelOutputInvalid";
    /// The model endpoint could not be reached (connection refused, DNS, timeout, 429/5xx).
    pub const MODEL_UNREACHABLE: &str = "ModelUnreachable";
    /// The model endpoint refused the request (401/403/404, bad configuration).
    pub const MODEL_REJECTED: &str = "ModelRejected";
    /// The final report could not be stored.
    pub const REPORT_STORE_FAILED: &str = "ReportStoreFailed";
    /// Every researcher of a round failed (the evaluator's error check).
    pub const ALL_RESEARCHERS_FAILED: &str = "AllResearchersFailed";
    /// The synthesis call failed.
    pub const SYNTHESIS_FAILED: &str = "SynthesisFailed";
    /// The run hit `limits.maxCostUSD`.
    pub const COST_LIMIT: &str = "CostLimit";
    /// The run hit `limits.maxTokens`.
    pub const TOKEN_LIMIT: &str = "TokenLimit";
    /// The run hit `limits.timeout`.
    pub const TIME_LIMIT: &str = "TimeLimit";
    /// The run was cancelled (deleted or cancelled by the user).
    pub const CANCELLED: &str = "Cancelled";
    /// The query was refused by the intent policy.
    pub const POLICY_REFUSED: &str = "PolicyRefused";
    /// No usable source was found; the honest "unable to research" report was stored.
    pub const NO_EVIDENCE: &str = "NoEvidence";
    /// The plan waited for approval longer than `spec.approval.timeout`.
    pub const APPROVAL_TIMEOUT: &str = "ApprovalTimeout";
}

/// Validation patterns shared by the CRD schema and the engine.
pub mod patterns {
    /// A Stack Exchange site name (`stackoverflow`, `serverfault`, `math.stackexchange`).
    pub const STACK_EXCHANGE_SITE: &str = r"^[a-z][a-z.]{0,63}$";
}
