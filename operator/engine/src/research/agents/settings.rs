//! The engine's tunables: the researcher's, and the token budgets of the lead's calls.

use super::researcher::ResearcherSettings;

/// Tunables of the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    pub researcher: ResearcherSettings,
    /// Output cap of planner and evaluator calls.
    pub lead_max_tokens: u32,
    /// Output cap of each synthesis (output) call.
    pub synthesis_max_tokens: u32,
    /// Summarize every page read before synthesis (deep mode), so the writer sees every source
    /// within its context window.
    pub summarize_sources: bool,
    /// Pages summarized at most; the rest reach synthesis through the researchers' reports.
    pub max_summaries: usize,
    /// Summary and judge calls in flight at once.
    pub summary_concurrency: usize,
    /// Output cap of a summary call.
    pub summary_max_tokens: u32,
    /// Let the model judge each cited claim after the lexical check.
    pub model_judge: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            researcher: ResearcherSettings::default(),
            lead_max_tokens: 1024,
            synthesis_max_tokens: 4096,
            summarize_sources: true,
            max_summaries: 24,
            summary_concurrency: 4,
            summary_max_tokens: 400,
            model_judge: false,
        }
    }
}
