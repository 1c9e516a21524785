//! A researcher's answer when its conversation gives none: the grounded answer over the best
//! passages read, behind the product filter and the answerability gate, and the quoted or
//! extractive report when the model's answer is unusable.

use super::*;
use crate::research::writing::evidence::subject;
use crate::research::writing::grounded::kind;

impl Session<'_> {
    /// Characters of passages the grounded call is shown: a quarter of the context window (at
    /// three characters per token), at least 1500 and at most 6000.
    pub(super) fn passage_budget(&self) -> usize {
        (self.deps.model.context_window() as usize * 3 / 4).clamp(1500, 6000)
    }

    /// When the model cannot write a usable report in its conversation, it is asked once more in
    /// a clean context holding only the task and the pages read (small models imitate a history
    /// full of tool calls); if that fails too, an honest extractive report is built from the pages
    /// (pass raw content when summarisation fails). With nothing read, the task fails.
    pub(super) async fn fallback_report(
        mut self,
        task_id: u32,
        task: &str,
    ) -> Result<ResearcherReport, Failure> {
        if self.fetched.is_empty() && self.seen.is_empty() && !self.budget.gathering_exhausted() {
            // The model never searched usefully: the engine searches the task itself.
            self.search(&[]).await;
        }
        if self.fetched.is_empty() {
            // Searched but never read (weak models repeat searches): read the top results now.
            let urls = self.best_unread(3).await;
            if !urls.is_empty() {
                self.read_batch(0, 3, &urls).await;
            }
        }
        if self.fetched.is_empty() {
            return Err(Failure::new(
                reasons::MODEL_OUTPUT_INVALID,
                "the model wrote no usable report (only empty answers or tool calls as text) and read no page",
            ));
        }
        if self.pages.is_empty() {
            // Everything read was off the task: say so, and quote nothing (a page opening that
            // does not answer is no finding). The run-level NoEvidence check sees `pages` empty.
            let md = nothing_relevant_report(task, &self.fetched);
            return Ok(finish(self, task_id, md));
        }
        // Grounded answer: the best passages for the task, numbered; the model writes
        // a few sentences ending in `[n]` and the engine makes the citations.
        let budget = self.passage_budget();
        // Only the asked product's pages answer for it, the product known from every page
        // fetched: git's pages judged off the task still say a git question is asked of git.
        let fetched: Vec<&str> = self.fetched.iter().map(|f| f.url.as_str()).collect();
        let addresses: Vec<(&str, &str)> = self
            .pages
            .iter()
            .map(|p| (p.url.as_str(), p.title.as_str()))
            .collect();
        let of_product = subject::of_asked_product(task, &addresses, &fetched);
        if !of_product.contains(&true) {
            let product = subject::asked_product(task, &fetched).unwrap_or_default();
            tracing::info!(%product, "no page read is of the asked product's docs");
            let why = format!(
                "none of the {} page(s) read is of {product}'s documentation",
                fetched.len()
            );
            return Ok(refuse(self, task_id, task, &why, &[]));
        }
        // Nor does another release's page answer for the asked release ("What's New In
        // Python 3.7" for a question on 3.11).
        let pages: Vec<&PageExtract> = self
            .pages
            .iter()
            .zip(of_product)
            .filter_map(|(p, keep)| keep.then_some(p))
            .collect();
        let titles: Vec<&str> = pages.iter().map(|p| p.title.as_str()).collect();
        let of_release = subject::of_asked_release(task, &titles);
        let pages: Vec<PageExtract> = pages
            .into_iter()
            .zip(of_release)
            .filter(|(_, keep)| *keep)
            .map(|(p, _)| p.clone())
            .collect();
        let items = grounded::number_passages(&pages, task, budget);
        // The answerability gate: passages that leave out a subject the task names do not
        // answer it, and a model shown them writes about what they do name (a question's
        // unrelated passages once ended Completed as its answer). Nothing is written;
        // every page read counts as off the task, so the run ends NoEvidence and lists them,
        // the closest first.
        let missing = grounded::unanswered(task, &items);
        if !missing.is_empty() {
            tracing::info!(
                ?missing,
                passages = items.len(),
                "the passages read do not name every subject of the task"
            );
            let names: Vec<String> = missing.iter().map(|m| subject::as_code(m)).collect();
            let why = format!(
                "none of the {} page(s) read names {}",
                self.fetched.len(),
                names.join(", ")
            );
            return Ok(refuse(
                self,
                task_id,
                task,
                &why,
                &grounded::closest_pages(&items),
            ));
        }
        if !items.is_empty() {
            // With JSON mode the model answers in a JSON form, held to its schema by the server:
            // first one sentence per best passage, then (when none holds) points over them all.
            let json = self.deps.model.json_mode(CallPurpose::Research);
            if json && let Some(md) = self.each_answer(task, &items).await {
                return Ok(answered_or_refused(self, task_id, task, md, &items));
            }
            let (system, ask) = if json {
                (
                    prompts::GROUNDED_JSON,
                    "Answer the task now with the JSON object.",
                )
            } else {
                (
                    prompts::GROUNDED,
                    "Answer the task now, ending every sentence with its passage number like [1].",
                )
            };
            self.messages = vec![
                Message::system(system),
                Message::user(format!(
                    "Research task: {task}\n\nPassages:\n{}{ask}",
                    grounded::render_passages(&items)
                )),
            ];
            let schema = json.then(|| grounded::answer_schema(items.len()));
            let answer = self.call_with(false, schema).await;
            // A model that has not answered once in this run is a setting to fix (a wrong URL,
            // a server down), not an unusable answer: the run fails with its reason. Quoting
            // the passages here ended a run Completed with no model call at all.
            if let Err(failure) = &answer
                && !self.model_fault
                && self.usage.llm_calls == 0
            {
                return Err(failure.clone());
            }
            if let Ok(resp) = answer {
                let text = strip_think(&resp.content).trim().to_string();
                tracing::debug!(answer = %text.chars().take(4000).collect::<String>(), "grounded answer");
                let md = if json {
                    grounded::assemble_json_for(task, &text, &items)
                } else {
                    grounded::assemble_for(task, &text, &items)
                };
                if !looks_like_tool_call(&text)
                    && let Some(md) = md
                {
                    return Ok(answered_or_refused(self, task_id, task, md, &items));
                }
                // Why a run quoted passages instead of answering is in the model's words.
                tracing::info!(
                    answer = %text.chars().take(2000).collect::<String>(),
                    "the grounded answer kept no supported sentence; quoting the passages"
                );
            }
            // The model's answer is unusable: the passages it was shown are the best extract of
            // what was read, across pages and best first.
            let md = grounded::quoted_report(task, &items);
            return Ok(answered_or_refused(self, task_id, task, md, &items));
        }
        let md = extractive_report(task, &self.pages);
        Ok(finish(self, task_id, md))
    }

    /// The grounded answer in the per-passage form ([`grounded::each_schema`]): one sentence for
    /// each of the best passages, checked as points are; the report may quote any passage shown.
    /// `None` when the call fails or no sentence holds (the points form is asked next).
    async fn each_answer(&mut self, task: &str, items: &[grounded::Numbered]) -> Option<String> {
        let best = &items[..items.len().min(grounded::EACH_PASSAGES)];
        self.messages = vec![
            Message::system(prompts::GROUNDED_EACH),
            Message::user(format!(
                "Research task: {task}\n\nPassages:\n{}Answer now with the JSON object.",
                grounded::render_passages(best)
            )),
        ];
        let resp = self
            .call_with(false, Some(grounded::each_schema(best.len())))
            .await
            .ok()?;
        let text = strip_think(&resp.content).trim().to_string();
        tracing::debug!(answer = %text.chars().take(4000).collect::<String>(), "grounded answer, one sentence per passage");
        let points = grounded::each_points(&text, best.len())?;
        grounded::assemble_points(task, &points, items)
    }
}

/// Finishes the task with the grounded report `md`, or refuses it when `md` answers no part of
/// the task ([`kind::answers_no_part`]): passages that leave out the value asked for, quoted
/// with a note saying so, are no answer, and the run ends NoEvidence listing them, the closest
/// first.
fn answered_or_refused(
    s: Session<'_>,
    task_id: u32,
    task: &str,
    md: String,
    items: &[grounded::Numbered],
) -> ResearcherReport {
    match kind::answers_no_part(task, &md) {
        Some(why) => {
            tracing::info!(%why, "the report written answers no part of the task");
            refuse(s, task_id, task, &why, &grounded::closest_pages(items))
        }
        None => finish(s, task_id, md),
    }
}
