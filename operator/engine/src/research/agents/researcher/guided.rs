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
use crate::research::reading::agenda;
use crate::research::reading::passages::{
    held_part_terms, keyword_query, products_asked, speaks_to, split,
};
use crate::research::writing::evidence::subject;

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

/// Whether `model`'s researchers are guided under `settings` ([`is_guided`] of its window and
/// tool mode): the researcher and deep mode's synthesis decide by this one test.
pub fn guides(model: &dyn ChatModel, settings: &ResearcherSettings) -> bool {
    is_guided(
        settings.guided,
        model.context_window(),
        model.prompt_tools(CallPurpose::Research),
    )
}

/// Pure: the characters of each page a guided researcher keeps.
pub fn guided_page_chars(page_chars: usize) -> usize {
    page_chars.max(GUIDED_PAGE_CHARS)
}

/// Most subjects searched for on their own after the first pass.
const MAX_SUBJECT_SEARCHES: usize = 2;

/// One search for a subject of the task no page read covers, or for a product no page read is
/// of ([`product_searches`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct SubjectSearch {
    /// The subject, as [`subject::unanswered`] labels it (`jsonb`); for a product's search, the
    /// part of the task asked of it.
    pub subject: String,
    /// The product the task asks it in (`postgresql` of "PostgreSQL's jsonb type"), if any.
    pub owner: Option<String>,
    /// The query: the subject, after its product when it has one.
    pub query: String,
}

/// Pure: the product `task` asks `subject` in: the word before it when that word is one of the
/// task's context terms ("PostgreSQL's jsonb", "a PostgreSQL timestamp"), lower-cased.
fn owner_of(task: &str, subject: &str) -> Option<String> {
    let context = crate::research::reading::passages::context_terms(task);
    let clean = |w: &str| {
        w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '.' || c == '_'))
            .trim_end_matches('.')
            .to_lowercase()
    };
    let raw: Vec<&str> = task.split_whitespace().collect();
    raw.windows(2).find_map(|pair| {
        let prev = pair[0].replace('’', "'");
        let prev = clean(prev.strip_suffix("'s").unwrap_or(&prev));
        (clean(pair[1]) == subject
            && !prev.is_empty()
            && crate::research::reading::passages::is_context(&prev, &context))
        .then_some(prev)
    })
}

/// Pure: whether a page read covers `subject` of `task`: its title or kept text names it, and,
/// when the task asks it in a product, the page (URL, title or text) names that product. A
/// Python page naming `datetime.timestamp()` does not answer for "a PostgreSQL timestamp".
/// (Asking for a heading that names it instead searched `copy.copy` and `copy.deepcopy` again
/// after `copy.html` had been read, and the pages it added pushed out the definitions: a
/// tuning question went from its facts to 0/3.)
fn covers(task: &str, search: &SubjectSearch, page: &PageExtract) -> bool {
    let whole = format!("{}\n{}\n{}", page.url, page.title, page.text);
    names(
        task,
        &search.subject,
        &format!("{}\n{}", page.title, page.text),
    ) && owned_by(search, &whole)
}

/// Pure: whether `text` names `subject` of `task`.
fn names(task: &str, subject: &str, text: &str) -> bool {
    !subject::unanswered(task, &[text.to_string()]).contains(&subject.to_string())
}

/// Pure: whether `text` names the product `search`'s subject is asked in (true without one).
fn owned_by(search: &SubjectSearch, text: &str) -> bool {
    search
        .owner
        .as_ref()
        .is_none_or(|o| text.to_lowercase().contains(o.as_str()))
}

/// Pure: a search for each subject `task` names ([`subject::unanswered`]) that no page of
/// `pages` covers ([`covers`]), unless a query of `already` (normalised) was exactly that
/// search; at most [`MAX_SUBJECT_SEARCHES`].
pub(super) fn subject_searches(
    task: &str,
    pages: &[PageExtract],
    already: &[String],
) -> Vec<SubjectSearch> {
    let all = subject::unanswered(task, &[String::new()]);
    // A task naming one subject searched it by name already (the seed queries).
    if all.len() < 2 {
        return vec![];
    }
    all.into_iter()
        .map(|subject| {
            let owner = owner_of(task, &subject);
            let query = match &owner {
                Some(o) => format!("{o} {subject}"),
                None => subject.clone(),
            };
            SubjectSearch {
                subject,
                owner,
                query,
            }
        })
        .filter(|s| !pages.iter().any(|p| covers(task, s, p)))
        .filter(|s| !already.contains(&queries::normalise(&s.query)))
        .take(MAX_SUBJECT_SEARCHES)
        .collect()
}

/// Pure: a search for each product `task` asks of ([`products_asked`]) that no page of `pages`
/// is of ([`subject::of_product`]) with a passage speaking to its part ([`speaks_to`]): the
/// keywords of the part of the task asked of it, unless a query of `already` (normalised) was
/// that search. "What does Python's functools.partial
/// return, and how many arguments can a PostgreSQL function take at most?" read five Python
/// pages and its report left the PostgreSQL half out without a word: the second half names
/// no subject of its own for [`subject_searches`] to look for. A page of the product's docs
/// must speak to the part: for "Which Python exception does json.loads raise ..., and what
/// is PostgreSQL's default port?" a PostgreSQL page on JSON functions was read, no search for
/// the port ran, and the report left that half out.
pub(super) fn product_searches(
    task: &str,
    pages: &[PageExtract],
    already: &[String],
) -> Vec<SubjectSearch> {
    let products = products_asked(task);
    products
        .iter()
        .filter_map(|product| {
            let part = agenda::part_of(task, product, &products);
            let query = keyword_query(&part);
            (!query.is_empty()).then(|| SubjectSearch {
                subject: part,
                owner: Some(product.clone()),
                query,
            })
        })
        .filter(|s| {
            !pages.iter().any(|page| {
                s.owner
                    .as_ref()
                    .is_some_and(|p| subject::of_product(&page.url, &page.title, p))
                    // One passage must: a page as long as PostgreSQL's error codes holds
                    // every word of "how many columns can a PostgreSQL table have" somewhere.
                    && split(&page.text).iter().any(|passage| {
                        speaks_to(
                            &s.subject,
                            &products,
                            &format!("{}\n{}", page.title, passage.text),
                        )
                    })
            })
        })
        .filter(|s| !already.contains(&queries::normalise(&s.query)))
        .take(MAX_SUBJECT_SEARCHES)
        .collect()
}

/// Most pages a sibling took that one researcher reads again for its own subjects.
const MAX_SHARED_READS: usize = 2;

/// Words of the answerability gate's labels that join names and name nothing themselves
/// ("`asyncio` together with `HTTP`", "`x` other than in passing", "`--all` for `git stash`").
const LABEL_JOINERS: [&str; 7] = ["together", "with", "other", "than", "in", "passing", "for"];

/// Pure: the names of `text`, lower-cased: its words with the dots, underscores and hyphens
/// inside them (`json.loads`, `lru_cache`).
fn name_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !(c.is_alphanumeric() || "._-".contains(c)))
        .map(|w| w.trim_matches(['.', '-']).to_lowercase())
}

/// Pure: the words the answerability gate's labels `missing` name, lower-cased; a dotted name
/// names its module too (`json` of `json.loads`: its page is titled "json — JSON encoder and
/// decoder").
fn label_words(missing: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for label in missing {
        for w in name_words(label) {
            let module = w.split_once('.').map(|(m, _)| m.to_string());
            for w in std::iter::once(w).chain(module) {
                if w.len() > 1 && !LABEL_JOINERS.contains(&w.as_str()) && !out.contains(&w) {
                    out.push(w);
                }
            }
        }
    }
    out
}

/// Pure: the results of `hits` (best first) that a sibling researcher took (`taken`), that no
/// page of `pages` is, and whose title names a word of what keeps the pages read from
/// answering (`missing`, the answerability gate's labels): at most [`MAX_SHARED_READS`].
/// Siblings share no page, so the task holding a page decides who reads it, and a page two
/// tasks need was read by one: the 1.5B planner's second task for "Which standard library
/// module for TOML was added in Python 3.11, ..., and what kind of file object does its load()
/// function need?" lost `tomllib`'s page to the first, read five others, and was refused for
/// want of "TOML".
pub(super) fn shared_reads(
    missing: &[String],
    pages: &[PageExtract],
    hits: &[&SearchHit],
    taken: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let words = label_words(missing);
    let mut out: Vec<String> = Vec::new();
    for h in hits {
        let title: Vec<String> = name_words(&h.title).collect();
        if taken.contains(&h.url)
            && !pages.iter().any(|p| p.url == h.url)
            && !out.contains(&h.url)
            && words.iter().any(|w| title.contains(w))
        {
            out.push(h.url.clone());
        }
    }
    out.truncate(MAX_SHARED_READS);
    out
}

impl Session<'_> {
    /// A second, deterministic search for each subject of the task that no page read names:
    /// its name alone, and the best of its results that names it (else its best) read. Quick
    /// mode reads the area the task's whole wording leads to, and a question joining two
    /// areas ("`json.loads()` and `jsonb`", a Git command and a Python module) got pages of
    /// one, so the model answered one half and the answerability gate refused the rest. Costs
    /// a search and a page per subject, no model call. Before them, the same for each product
    /// the task asks of that no page read is of ([`product_searches`]).
    async fn search_unnamed_subjects(&mut self) {
        for search in product_searches(&self.task, &self.pages, &self.queries) {
            if !self.search_and_read(&search, true).await {
                return;
            }
        }
        for search in subject_searches(&self.task, &self.pages, &self.queries) {
            if !self.search_and_read(&search, false).await {
                return;
            }
        }
    }

    /// Reads the pages a sibling took whose titles name what keeps the passages read from
    /// answering the task ([`shared_reads`] of the answerability gate's labels), without
    /// claiming them: the sibling keeps its claim. Runs after the researcher's own reading and
    /// searches, so it reads only for what they left unanswered; no search is made, so the
    /// gathering budget is not asked (`MAX_SHARED_READS` bounds the pages).
    async fn read_shared_pages(&mut self) {
        let items = grounded::number_passages(&self.pages, &self.task, self.passage_budget());
        let missing = grounded::unanswered(&self.task, &items);
        if missing.is_empty() {
            return;
        }
        let taken = self.deps.pool.taken().await;
        let score_of = |h: &SearchHit| self.scores.get(&h.url).copied().unwrap_or(0.0);
        let mut hits: Vec<&SearchHit> = self
            .seen
            .iter()
            .filter(|h| !self.has_read(&h.url))
            .collect();
        hits.sort_by(|a, b| score_of(b).total_cmp(&score_of(a)));
        let urls = shared_reads(&missing, &self.pages, &hits, &taken);
        if urls.is_empty() {
            return;
        }
        tracing::info!(
            pages = urls.len(),
            ?missing,
            "reading pages a sibling took for this task"
        );
        let mut out = String::new();
        self.fetch_into(&urls, &mut out).await;
    }

    /// Runs `search` and reads the best unread result that names its subject in its product's
    /// docs: for a product's search ([`product_searches`], `of_product_only`) one of that
    /// product's pages or none, else that or the best result. `false` when the gathering budget
    /// is spent.
    async fn search_and_read(&mut self, search: &SubjectSearch, of_product_only: bool) -> bool {
        if !self.budget.take_gather() {
            return false;
        }
        let Ok(hits) = self.run_query(&search.query).await else {
            return true;
        };
        let taken = self.deps.pool.taken().await;
        let score_of = |h: &SearchHit| self.scores.get(&h.url).copied().unwrap_or(0.0);
        let mut unread: Vec<&SearchHit> = hits.iter().filter(|h| !taken.contains(&h.url)).collect();
        unread.sort_by(|a, b| score_of(b).total_cmp(&score_of(a)));
        let fits = |h: &SearchHit| {
            if of_product_only {
                // A page is of a product's docs by its address and title, not a snippet naming it.
                return owned_by(search, &format!("{}\n{}", h.url, h.title));
            }
            let text = format!("{}\n{}\n{}", h.url, h.title, h.snippet);
            names(
                &self.task,
                &search.subject,
                &format!("{}\n{}", h.title, h.snippet),
            ) && owned_by(search, &text)
        };
        let fallback = if of_product_only {
            None
        } else {
            unread.first()
        };
        // A product's search reads the result of its docs whose title and snippet hold most
        // of its part ([`held_part_terms`]), the best scored among equals.
        let products = products_asked(&self.task);
        let held = |h: &SearchHit| {
            held_part_terms(
                &search.subject,
                &products,
                &format!("{}\n{}", h.title, h.snippet),
            )
        };
        let pick = if of_product_only {
            unread
                .iter()
                .filter(|h| fits(h))
                .rev()
                .max_by_key(|h| held(h))
        } else {
            unread.iter().find(|h| fits(h)).or(fallback)
        }
        .map(|h| h.url.clone());
        if let Some(url) = pick
            && self.deps.pool.claim(&url).await
        {
            let mut out = String::new();
            self.fetch_into(&[url], &mut out).await;
        }
        true
    }

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
        self.search_unnamed_subjects().await;
        self.read_shared_pages().await;
        tracing::info!(
            pages = self.pages.len(),
            off_task = self.irrelevant.len(),
            searches = self.searches,
            "guided research read its pages"
        );
        self.fallback_report(task_id, task).await
    }
}

#[cfg(test)]
mod tests;
