//! The guided researcher: the engine searches, chooses and reads; the model only answers.
//!
//! A model with a small context window cannot hold an agent's conversation (search results,
//! pages and its own tool calls) and still write a report: measured with an 8k-token 0.5B model,
//! the agent loop spent 25k input tokens over seven calls choosing pages by their titles, often
//! the wrong ones, and its queries were copies of the question. Here the engine does every step
//! that needs no judgement: it searches the task (as written, as keywords, by its key names),
//! reads the best-scoring results in batches, keeps the passages that bear on the task, and makes
//! one grounded call in which the model writes sentences over numbered passages.

use super::*;

/// A small model (one the profile offers tools through the prompt, `toolMode: jsonAction`) with a
/// window at or below this many tokens gets the guided researcher unless the settings say
/// otherwise: 8k windows overflowed in the agent loop, 32k ones do not. A model with
/// native tool calling keeps the agent loop whatever its window (the profile default is 8k).
pub const GUIDED_WINDOW_TOKENS: u64 = 16_384;

/// Pages that bear on the task after which no further batch is read.
const ENOUGH_PAGES: usize = 4;

/// Characters of each page kept for the grounded call: with no conversation to hold, a page may
/// give more than the agent loop's `pageCharsForModel`; the grounded call's own budget decides
/// what the model reads.
const GUIDED_PAGE_CHARS: usize = 4000;

/// Pure: whether a researcher with these settings and this model window is guided.
pub fn is_guided(setting: Option<bool>, context_window: u64, prompt_tools: bool) -> bool {
    setting.unwrap_or(prompt_tools && context_window <= GUIDED_WINDOW_TOKENS)
}

/// Pure: the characters of each page a guided researcher keeps.
pub fn guided_page_chars(page_chars: usize) -> usize {
    page_chars.max(GUIDED_PAGE_CHARS)
}

impl Session<'_> {
    /// Runs the guided path to its report: search, read the best results batch by batch, answer.
    pub(super) async fn guided_report(
        mut self,
        task_id: u32,
        task: &str,
    ) -> Result<ResearcherReport, Failure> {
        self.page_chars = guided_page_chars(self.deps.settings.page_chars);
        self.search(&[]).await;
        (self.progress)(self.budget.units(), Usage::default());
        loop {
            if self.pages.len() >= ENOUGH_PAGES {
                break;
            }
            let step = self.budget.take_scrape(0.0);
            let (index, max_urls) = match step {
                ScrapeStep::Handshake => continue,
                ScrapeStep::Batch { index, max_urls } => (index, max_urls),
                ScrapeStep::Skipped { .. } | ScrapeStep::Exhausted => break,
            };
            let urls = self.best_unread(max_urls).await;
            if urls.is_empty() {
                break;
            }
            self.read_batch(index, max_urls, &urls).await;
            (self.progress)(self.budget.units(), Usage::default());
        }
        tracing::info!(
            pages = self.pages.len(),
            off_task = self.irrelevant.len(),
            searches = self.searches,
            "guided research read its pages"
        );
        self.fallback_report(task_id, task).await
    }
}
