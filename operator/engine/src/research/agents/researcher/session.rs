//! A researcher's conversation: its model calls and the tools it runs (search, read, the
//! specialised sources) and the reading gates; `answer.rs` holds the fallbacks when the model
//! falls short.

use super::*;

impl Session<'_> {
    /// Share of the context window the conversation fills. The server's own token count of the
    /// last call (its real tokenizer, whatever the model) anchors it; only messages added since
    /// are estimated, at four characters per token.
    pub(super) fn context_used(&self) -> f64 {
        let (tokens, from) = match self.anchor {
            // The assistant answer right after the anchored request is in its output tokens.
            Some((sent, tokens)) => (tokens as f64, sent + 1),
            None => (0.0, 0),
        };
        let chars: usize = self
            .messages
            .iter()
            .skip(from)
            .map(|m| m.content.len() + 16)
            .sum();
        let window = self.deps.model.context_window().max(1) as f64;
        (tokens + chars as f64 / 4.0) / window
    }

    /// Steers reports of siblings that finished since the last turn into the conversation.
    pub(super) fn take_steered_reports(&mut self) {
        let Some(inbox) = self.steering.as_mut() else {
            return;
        };
        let mut arrived = Vec::new();
        while let Ok(report) = inbox.try_recv() {
            arrived.push(report);
        }
        for r in arrived {
            if self.steered.contains(&r.task_id) {
                continue;
            }
            self.steered.push(r.task_id);
            tracing::debug!(from = r.task_id, "sibling report steered in");
            self.messages.push(Message::user(format!(
                "Steering update: researcher {} of this run just finished. Its report follows; build on it, do not repeat its work, and do not cite its links unless you read them yourself.\n\n--- report of researcher {} ---\n{}\n",
                r.task_id,
                r.task_id,
                truncate_chars(&r.markdown, INJECTED_REPORT_CHARS)
            )));
        }
    }

    /// Whether this researcher read `url` already (a page it gave back stays read for it).
    pub(super) fn has_read(&self, url: &str) -> bool {
        self.fetched.iter().any(|f| f.url == url)
    }

    /// Unread search results, best score first.
    pub(super) async fn best_unread(&self, n: usize) -> Vec<String> {
        let taken = self.deps.pool.taken().await;
        let mut unread: Vec<(f64, usize, &SearchHit)> = self
            .seen
            .iter()
            .enumerate()
            .filter(|(_, h)| !taken.contains(&h.url) && !self.has_read(&h.url))
            .map(|(i, h)| (self.scores.get(&h.url).copied().unwrap_or(0.0), i, h))
            .collect();
        unread.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        unread
            .into_iter()
            .take(n)
            .map(|(_, _, h)| h.url.clone())
            .collect()
    }

    pub(super) async fn call(
        &mut self,
        with_tools: bool,
    ) -> Result<crate::llm::ChatResponse, Failure> {
        self.call_with(with_tools, None).await
    }

    /// [`Self::call`], the answer held to `json_schema` where the model's server can do that.
    pub(super) async fn call_with(
        &mut self,
        with_tools: bool,
        json_schema: Option<crate::llm::JsonSchema>,
    ) -> Result<crate::llm::ChatResponse, Failure> {
        self.take_steered_reports();
        let sent = self.messages.len();
        let request = ChatRequest {
            messages: self.messages.clone(),
            tools: if with_tools {
                tools(self.deps.specialised.as_deref())
            } else {
                vec![]
            },
            json_mode: json_schema.is_some(),
            json_schema,
            max_tokens: self.deps.settings.max_output_tokens,
            purpose: CallPurpose::Research,
        };
        match self.deps.model.chat(request).await {
            Ok(resp) => {
                self.usage.add(&resp.usage);
                if resp.usage.input_tokens > 0 {
                    self.anchor = Some((sent, resp.usage.input_tokens + resp.usage.output_tokens));
                }
                (self.progress)(self.budget.units(), resp.usage);
                Ok(resp)
            }
            Err(e) => {
                // The model answered, but unusably (degenerate, unparsable): not a broken server.
                self.model_fault = matches!(
                    e.unbilled(),
                    LlmError::Degenerate { .. } | LlmError::Malformed(_)
                );
                // An unusable answer is still paid for: it counts in this researcher's usage.
                let billed = e.billed();
                if billed.llm_calls > 0 {
                    self.usage.add(&billed);
                    (self.progress)(self.budget.units(), billed);
                }
                Err(failure_from_llm(&e))
            }
        }
    }

    pub(super) async fn search(&mut self, queries: &[String]) -> String {
        // The task is searched first, as written and as keywords, whatever the model asks for;
        // the model's queries are added to it, screened so a placeholder or a repeat never
        // spends the budget (a 0.5B model searched `example1` twelve times).
        let seeds: Vec<String> = if self.seeded {
            vec![]
        } else {
            queries::seed_queries(&self.task)
                .into_iter()
                .filter(|q| !self.queries.contains(&queries::normalise(q)))
                .collect()
        };
        let mut planned: Vec<String> = self.queries.clone();
        planned.extend(seeds.iter().map(|q| queries::normalise(q)));
        let mut notes = String::new();
        let mut accepted: Vec<String> = Vec::new();
        for q in queries.iter().take(3) {
            match queries::screen(q, &planned) {
                Ok(q) => {
                    planned.push(queries::normalise(&q));
                    accepted.push(q);
                }
                Err(why) => {
                    notes.push_str(&format!("Query \"{}\" was not run: {why}.\n", q.trim()))
                }
            }
        }
        if seeds.is_empty() && accepted.is_empty() {
            return format!(
                "{notes}No search was run and no search call was used. Search for words of the task itself: {}",
                self.task.trim()
            );
        }
        if !self.budget.take_gather() {
            return format!(
                "Gathering budget exhausted ({GATHER_CALLS} calls). Read pages with `scrape` or write your report."
            );
        }
        self.seeded = true;
        let to_run: Vec<String> = seeds.into_iter().chain(accepted).collect();
        let mut results: Vec<(String, Result<Vec<SearchHit>, String>)> = Vec::new();
        for q in &to_run {
            let r = self.run_query(q).await;
            results.push((q.clone(), r));
        }
        let queries = to_run.as_slice();
        // The sufficiency check: too few results above the adaptive threshold means the
        // query is reformulated (broaden, narrow, synonyms) with one more gathering call.
        let passing = |s: &Self, results: &[(String, Result<Vec<SearchHit>, String>)]| {
            let hits: Vec<SearchHit> = results
                .iter()
                .filter_map(|(_, r)| r.as_ref().ok())
                .flatten()
                .cloned()
                .collect();
            let threshold = adaptive_threshold(hits.len(), social_ratio(&hits));
            let passing = hits
                .iter()
                .filter(|h| s.scores.get(&h.url).copied().unwrap_or(0.0) >= threshold)
                .map(|h| h.url.as_str())
                .collect::<BTreeSet<_>>()
                .len();
            (passing, threshold)
        };
        let (count, threshold) = passing(self, &results);
        if count < MIN_PASSING_SOURCES
            && self.reformulations < 3
            && let Some(first) = queries.first()
            && let Some(next) = reformulate(first, Reformulation::nth(self.reformulations))
            && !self.queries.contains(&queries::normalise(&next))
            && self.budget.take_gather()
        {
            let strategy = Reformulation::nth(self.reformulations);
            self.reformulations += 1;
            notes.push_str(&format!(
                "Only {count} result(s) passed the quality bar (score >= {threshold:.2}), so the query was reformulated ({strategy:?}) as \"{next}\"; this used one more search call.\n"
            ));
            let r = self.run_query(&next).await;
            results.push((next, r));
        }
        let (_, threshold) = passing(self, &results);
        let mut out = notes;
        for (q, r) in &results {
            match r {
                Ok(hits) if hits.is_empty() => {
                    out.push_str(&format!("Query \"{q}\": no results.\n"))
                }
                Ok(hits) => {
                    out.push_str(&format!("Query \"{q}\":\n"));
                    let mut ranked: Vec<&SearchHit> = hits.iter().collect();
                    let score_of = |h: &SearchHit| self.scores.get(&h.url).copied().unwrap_or(0.0);
                    ranked.sort_by(|a, b| score_of(b).total_cmp(&score_of(a)));
                    let mut below = Vec::new();
                    for h in ranked {
                        let sc = score_of(h);
                        if sc < threshold {
                            below.push(format!("{} — {}", h.title.trim(), h.url));
                            continue;
                        }
                        let snippet: String = h.snippet.chars().take(300).collect();
                        out.push_str(&format!(
                            "- {} — {} (score {sc:.2})\n   {}\n",
                            h.title.trim(),
                            h.url,
                            snippet.trim()
                        ));
                    }
                    if !below.is_empty() {
                        out.push_str(&format!(
                            "  Below the quality bar ({threshold:.2}): {}\n",
                            below.join("; ")
                        ));
                    }
                }
                Err(e) => out.push_str(&format!("Query \"{q}\" failed: {e}\n")),
            }
        }
        out
    }

    /// Runs one query, scores its results and records them as seen.
    pub(super) async fn run_query(&mut self, q: &str) -> Result<Vec<SearchHit>, String> {
        self.searches += 1;
        self.queries.push(queries::normalise(q));
        let hits = self
            .deps
            .gatherer
            .search(q, self.deps.settings.results_per_query)
            .await
            .map_err(|e| e.to_string())?;
        self.record(q, &hits);
        Ok(hits)
    }

    /// Scores hits and adds them to what this researcher has seen (and so may read and cite).
    pub(super) fn record(&mut self, q: &str, hits: &[SearchHit]) {
        // Results are scored against the task, not the query that found them: a broad or
        // off-topic query ("python", a reformulation) matches its own results perfectly, and
        // its pages then outranked the page the task is about (`plpython` read
        // instead of `pickle` for "Which pickle protocol ...").
        let against = if self.task.trim().is_empty() {
            q
        } else {
            self.task.as_str()
        };
        for (rank, h) in hits.iter().enumerate() {
            let entry = !self.task.trim().is_empty()
                && crate::research::reading::passages::entry::is_entry_page(&h.title, against);
            let sc = score(against, h).score
                + rank_prior(rank)
                + if entry { ENTRY_PAGE_BONUS } else { 0.0 };
            let entry = self.scores.entry(h.url.clone()).or_insert(sc);
            *entry = entry.max(sc);
            if !self.seen.iter().any(|s| s.url == h.url) {
                self.seen.push(h.clone());
            }
        }
    }

    /// A specialised tool call: one gathering call; its hits join the seen results.
    pub(super) async fn specialised(
        &mut self,
        tool: &str,
        query: &SecurityQuery,
        site: Option<&str>,
    ) -> String {
        let Some(sources) = self.deps.specialised.clone() else {
            return format!("The `{tool}` tool is not available in this run.");
        };
        if !self.budget.take_gather() {
            return format!(
                "Gathering budget exhausted ({GATHER_CALLS} calls). Read pages with `scrape` or write your report."
            );
        }
        self.searches += 1;
        let answer: Result<ToolAnswer, String> =
            match (tool, &sources.security, &sources.stackexchange) {
                ("security_search", Some(security), _) => Ok(security.lookup(query).await),
                ("stackexchange", _, Some(se)) => se
                    .questions(&query.query, site)
                    .await
                    .map_err(|e| e.to_string()),
                _ => Err(format!("the `{tool}` tool is not available in this run")),
            };
        match answer {
            Ok(answer) => {
                self.record(&query.query, &answer.hits);
                // Sources truncate already; this keeps the tool-output bound whatever the source.
                truncate_head(&answer.text, DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES).text
            }
            Err(e) => format!("{tool} failed: {e}"),
        }
    }

    pub(super) async fn scrape(&mut self, urls: &[String]) -> String {
        // Gathering comes before scraping: a model that skips it gets a search for its
        // task instead of a wasted scrape step, and picks from real results.
        if self.seen.is_empty() && self.known_urls.is_empty() && !self.budget.gathering_exhausted()
        {
            let task = self.task.clone();
            let results = self.search(&[task]).await;
            return format!(
                "There are no search results to read yet: gathering comes before scraping. The task was searched for you:\n{results}\nCall `scrape` with URLs from these results."
            );
        }
        // The 55% gate protects room for the report; before anything was read there is
        // nothing to report from, so the first batch is never skipped (a 0.5B model's search
        // results alone filled 64% of an 8k window and every batch was skipped). The window
        // itself is enforced when each prompt is sent (llm::window).
        let used = if self.fetched.is_empty() {
            0.0
        } else {
            self.context_used()
        };
        match self.budget.take_scrape(used) {
            ScrapeStep::Handshake => {
                // The handshake returns what siblings took, with no network activity, so the
                // model does not ask for pages another researcher already read.
                let all = self.deps.pool.taken().await;
                let taken: Vec<&String> = all.iter().take(HANDSHAKE_LIST).collect();
                let list = if taken.is_empty() {
                    "none".to_string()
                } else {
                    taken
                        .iter()
                        .map(|u| u.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let clash: Vec<&String> = urls.iter().filter(|u| all.contains(*u)).collect();
                let clash = if clash.is_empty() {
                    String::new()
                } else {
                    format!(
                        " Of the URLs you named, these are taken: {}.",
                        clash
                            .iter()
                            .map(|u| u.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                format!(
                    "Handshake done. URLs already read by researchers of this run (do not request them): {list}.{clash} Call `scrape` again with up to 3 URLs to read batch 1."
                )
            }
            ScrapeStep::Batch { index, max_urls } => self.read_batch(index, max_urls, urls).await,
            ScrapeStep::Skipped { index } => format!(
                "Batch {} skipped: the conversation already fills more than 55% of the context window. Write your report now.",
                index + 1
            ),
            ScrapeStep::Exhausted => "Scrape budget exhausted. Write your report now.".to_string(),
        }
    }

    pub(super) async fn read_batch(
        &mut self,
        index: usize,
        max_urls: usize,
        urls: &[String],
    ) -> String {
        let mut chosen = Vec::new();
        let mut skipped = Vec::new();
        for u in urls {
            let u = u.trim();
            if chosen.len() >= max_urls {
                break;
            }
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                skipped.push(format!("{u} (not an http(s) URL)"));
            } else if !self.may_read(u) {
                // Reading only what gathering found keeps invented URLs out of reports.
                skipped.push(format!("{u} (not among your search results)"));
            } else if self.has_read(u) || !self.deps.pool.claim(u).await {
                skipped.push(format!("{u} (already read by a researcher)"));
            } else {
                chosen.push(u.to_string());
            }
        }
        let mut out = format!("Batch {} (up to {max_urls} URLs):\n", index + 1);
        if chosen.is_empty() {
            // Weak models often name URLs they never saw; a batch is too precious to waste,
            // so the best unread search results are read instead, and the model is told.
            let fallback = self.best_unread(max_urls).await;
            for u in fallback {
                if self.deps.pool.claim(&u).await {
                    chosen.push(u);
                }
            }
            if !chosen.is_empty() {
                out.push_str("None of the requested URLs could be read, so the top unread search results were read instead.\n");
            }
        }
        let relevant_before = self.pages.len();
        let off_task_before = self.irrelevant.len();
        self.fetch_into(&chosen, &mut out).await;
        // Every page of the batch was off the task: the batch goes to the next candidates
        // instead, once (the search engine ranked three unrelated pages first).
        let off_task = self.irrelevant.len() - off_task_before;
        if self.pages.len() == relevant_before && off_task > 0 {
            let mut next = Vec::new();
            for u in self.best_unread(off_task).await {
                if self.deps.pool.claim(&u).await {
                    next.push(u);
                }
            }
            if !next.is_empty() {
                out.push_str("None of those pages bears on the task, so the next search results were read instead.\n");
                self.fetch_into(&next, &mut out).await;
            }
        }
        for s in skipped {
            out.push_str(&format!("Skipped {s}\n"));
        }
        out
    }

    /// Fetches `urls` and records each page: shown (the passages that bear on the task), off
    /// the task (read, never shown) or failed.
    pub(super) async fn fetch_into(&mut self, urls: &[String], out: &mut String) {
        let fetches = urls.iter().map(|u| self.deps.fetcher.fetch(u));
        let results = join_all(fetches).await;
        for (url, res) in urls.iter().zip(results) {
            match res {
                Ok(page) => {
                    // The passages that bear on the task, not the page's first N characters: the
                    // answer is rarely in a page's opening (a reference page opens with its
                    // table of contents).
                    let selection = crate::research::reading::passages::select(
                        &page.markdown,
                        &self.task,
                        self.page_chars,
                        &page.title,
                    );
                    // A page's address names what it is about too: a product's docs seldom
                    // name their product in the text.
                    let named = format!(
                        "{}\n{}",
                        crate::research::writing::evidence::subject::address_words(url),
                        page.markdown
                    );
                    let off_task = !crate::research::reading::passages::bears_on(
                        selection.best_score > 0.0,
                        &page.markdown,
                        &named,
                        &self.task,
                    );
                    if off_task && !self.task.trim().is_empty() {
                        // Read, and on the record as read, but nothing on it bears on the task:
                        // it is not put before the model and cannot stand in a fallback report.
                        out.push_str(&format!(
                            "{url}: read; nothing on this page matches the task, so it is left out\n"
                        ));
                        self.irrelevant.push(url.clone());
                        self.fetched.push(SourceRef::new(url.clone(), page.title));
                        self.deps.pool.release(url).await;
                        continue;
                    }
                    let body = selection.text;
                    out.push_str(&prompts::fence_page(url, &page.title, &body));
                    out.push('\n');
                    self.pages.push(PageExtract {
                        url: url.clone(),
                        title: page.title.clone(),
                        text: body,
                    });
                    self.fetched.push(SourceRef::new(url.clone(), page.title));
                }
                Err(e) => {
                    // A URL the fetch policy refuses (an internal address, a denied domain) is
                    // no source, read or not: it must not be cited as an unread search result.
                    if matches!(e, FetchError::Refused { .. }) {
                        self.seen.retain(|h| h.url != *url);
                    }
                    out.push_str(&format!("{url}: could not be read ({e})\n"));
                }
            }
        }
    }

    /// True when nothing was read (nothing to cite) or the text cites at least one page read.
    pub(super) fn cites_a_read_page(&self, text: &str) -> bool {
        if self.fetched.is_empty() {
            return true;
        }
        if self.pages.is_empty() {
            return true;
        }
        let read: std::collections::BTreeSet<String> =
            self.pages.iter().map(|p| p.url.clone()).collect();
        !report::verify_citations(text, &read).cited.is_empty()
    }

    pub(super) fn may_read(&self, url: &str) -> bool {
        self.seen.iter().any(|h| h.url == url) || self.known_urls.iter().any(|k| k == url)
    }

    pub(super) async fn run_tool(&mut self, call: &ToolCall) -> String {
        tracing::debug!(tool = %call.name, arguments = %call.arguments, "tool call");
        let text = |key: &str| -> Option<String> {
            call.arguments
                .get(key)
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        let list = |key: &str| -> Vec<String> {
            match call.arguments.get(key) {
                Some(serde_json::Value::Array(items)) => items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                Some(serde_json::Value::String(s)) => vec![s.clone()],
                _ => vec![],
            }
        };
        match call.name.as_str() {
            "search" => {
                let queries = list("queries");
                let queries = if queries.is_empty() {
                    list("query")
                } else {
                    queries
                };
                if queries.is_empty() {
                    return "The search tool needs `queries`: a list of 1-3 search strings."
                        .to_string();
                }
                self.search(&queries).await
            }
            "scrape" => {
                let urls = list("urls");
                let urls = if urls.is_empty() { list("url") } else { urls };
                if urls.is_empty() {
                    return "The scrape tool needs `urls`: a list of 1-3 URLs from the search results.".to_string();
                }
                self.scrape(&urls).await
            }
            "security_search" | "stackexchange" => {
                let Some(query) = text("query").or_else(|| list("queries").into_iter().next())
                else {
                    return format!("The {} tool needs `query`: a search string.", call.name);
                };
                let q = SecurityQuery {
                    query,
                    package: text("package"),
                    ecosystem: text("ecosystem"),
                    version: text("version"),
                };
                self.specialised(&call.name, &q, text("site").as_deref())
                    .await
            }
            other => {
                let names: Vec<String> = tools(self.deps.specialised.as_deref())
                    .into_iter()
                    .map(|t| t.name)
                    .collect();
                format!(
                    "Unknown tool `{other}`. Available tools: {}.",
                    names.join(", ")
                )
            }
        }
    }

    /// A researcher must read before it reports: when a model tries to report with nothing read,
    /// the engine gathers or reads on its behalf once, so weak models still ground their report.
    pub(super) async fn ground_if_needed(&mut self, task: &str) -> bool {
        if !self.fetched.is_empty() {
            return false;
        }
        if self.seen.is_empty() && !self.budget.gathering_exhausted() && self.searches == 0 {
            let result = self.search(&[task.to_string()]).await;
            self.messages.push(Message::user(format!(
                "You must search before reporting. Results of searching for the task:\n{result}\nNow call `scrape` with the most relevant URLs."
            )));
            return true;
        }
        if !self.seen.is_empty() && !self.budget.scraping_exhausted() {
            // The handshake carries no network; take it, then read the best unread results.
            let urls = self.best_unread(usize::MAX).await;
            if urls.is_empty() {
                return false;
            }
            // Nothing is read yet (this grounds a researcher with no page): never gated.
            let mut step = self.budget.take_scrape(0.0);
            if step == ScrapeStep::Handshake {
                step = self.budget.take_scrape(0.0);
            }
            let result = match step {
                ScrapeStep::Batch { index, max_urls } => {
                    self.read_batch(index, max_urls, &urls).await
                }
                _ => return false,
            };
            self.messages.push(Message::user(format!(
                "You must read pages before reporting. Here are the most relevant search results:\n{result}\nNow write your report, citing only these pages."
            )));
            return true;
        }
        false
    }
}

/// What the entry page of an asked-for name ([`crate::research::reading::passages::entry::is_entry_page`]) adds to its score:
/// enough to be read in the first batch, before pages that only share the question's words.
const ENTRY_PAGE_BONUS: f64 = 1.0;

/// A small bonus for a result's place in its engine's ranking: the engine read the whole page
/// and the title and snippet scores cannot tell two on-topic pages apart (0.1 for the first
/// result, half that for the second, and so on down).
fn rank_prior(rank: usize) -> f64 {
    0.1 / (rank as f64 + 1.0)
}
