//! Search queries that cannot go wrong (issue 14): the task is always searched first, in its own
//! words and as keywords; what the model writes is added to that, and a query that is empty, a
//! placeholder copied from an example, or a repeat is refused before it spends the budget.
//!
//! Pure functions; the researcher applies them.

use super::passages::{key_terms, keyword_query};

/// Why a model-written query was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Nothing but whitespace and punctuation.
    Empty,
    /// A prompt's example or a template placeholder (`example1`, `<query>`, `...`).
    Placeholder,
    /// The same query (after normalisation) already ran in this conversation.
    Repeat,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::Empty => "empty",
            Refusal::Placeholder => "a placeholder, not a search",
            Refusal::Repeat => "already searched",
        })
    }
}

/// Lower-case, words separated by one space, surrounding punctuation and quotes dropped: two
/// queries that a search engine answers alike compare equal.
pub fn normalise(query: &str) -> String {
    query
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && !"._-+#".contains(c))
                .trim_end_matches('.')
        })
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Words small models copy from tool schemas and examples instead of writing a query.
const PLACEHOLDER_WORDS: &[&str] = &[
    "example",
    "examples",
    "query",
    "queries",
    "search",
    "string",
    "keyword",
    "keywords",
    "text",
    "placeholder",
    "foo",
    "bar",
    "baz",
    "test",
    "todo",
    "term",
    "terms",
    "your",
    "here",
    "insert",
    "topic",
    "question",
    "sample",
    "xxx",
    "q",
    "none",
    "null",
    "undefined",
];

/// True when a query is a template placeholder rather than a search: `example1`, `query 2`,
/// `<search terms>`, `{query}`, `...`, `string`.
pub fn is_placeholder(query: &str) -> bool {
    let q = query.trim();
    if q.contains("...") || q.contains('…') {
        let rest = q.replace("...", "").replace('…', "");
        if normalise(&rest).split(' ').filter(|w| w.len() > 2).count() < 2 {
            return true;
        }
    }
    if (q.starts_with('<') && q.ends_with('>')) || (q.starts_with('{') && q.ends_with('}')) {
        return true;
    }
    let n = normalise(q);
    !n.is_empty()
        && n.split(' ').all(|w| {
            let stem = w.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_' || c == '-');
            stem.is_empty() || PLACEHOLDER_WORDS.contains(&stem)
        })
}

/// Screens one model-written query against those already run (normalised).
pub fn screen(query: &str, already: &[String]) -> Result<String, Refusal> {
    let n = normalise(query);
    if n.is_empty() {
        return Err(Refusal::Empty);
    }
    if is_placeholder(query) {
        return Err(Refusal::Placeholder);
    }
    if already.contains(&n) {
        return Err(Refusal::Repeat);
    }
    Ok(query.trim().to_string())
}

/// The queries the engine runs itself before any the model writes: the task as written and its
/// keyword form (stop words dropped), each once.
pub fn seed_queries(task: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let whole = task.trim();
    if normalise(whole).is_empty() {
        return out;
    }
    out.push(whole.to_string());
    let keywords = keyword_query(whole);
    if !keywords.is_empty() && normalise(&keywords) != normalise(whole) {
        out.push(keywords);
    }
    // The names a page must mention (`asyncio.TaskGroup`), alone: full-text engines rank the
    // page that documents an API first for its bare name, not for a sentence around it.
    let keys = key_terms(whole);
    // One plain capitalised word ("Python" in "... in Python 3.11?") names the product, not
    // the subject: searched alone it returns the product's most generic pages.
    let plain_name = |k: &String| {
        whole.split_whitespace().any(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            w.to_lowercase() == *k && w.chars().skip(1).all(|c| !c.is_uppercase())
        })
    };
    let useful = keys.len() > 1 || keys.iter().any(|k| !plain_name(k));
    let keys = keys.join(" ");
    if useful && !out.iter().any(|q| normalise(q) == normalise(&keys)) {
        out.push(keys);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_small_models_copy_are_recognised() {
        for q in [
            "example1",
            "example 2",
            "Example3",
            "query",
            "search query",
            "<search terms>",
            "{query}",
            "...",
            "your query here",
            "string",
            "keyword1 keyword2",
        ] {
            assert!(is_placeholder(q), "{q}");
        }
        for q in [
            "json.loads example",
            "asyncio TaskGroup exceptions",
            "python json decode",
            "PostgreSQL serializable isolation",
            "query planner postgres",
            "test discovery unittest",
        ] {
            assert!(!is_placeholder(q), "{q}");
        }
    }

    #[test]
    fn screen_refuses_empty_placeholder_and_repeated_queries() {
        let already = vec![normalise("Python json decode")];
        assert_eq!(screen("   ", &already), Err(Refusal::Empty));
        assert_eq!(screen("\"\"", &already), Err(Refusal::Empty));
        assert_eq!(screen("example1", &already), Err(Refusal::Placeholder));
        assert_eq!(
            screen("python JSON  decode.", &already),
            Err(Refusal::Repeat)
        );
        assert_eq!(
            screen(" json.loads object_hook ", &already),
            Ok("json.loads object_hook".to_string())
        );
    }

    #[test]
    fn the_task_is_searched_as_written_and_as_keywords() {
        assert_eq!(
            seed_queries("How do I decode JSON with the json module in Python?"),
            vec![
                "How do I decode JSON with the json module in Python?".to_string(),
                "decode json module python".to_string(),
                "json python".to_string()
            ]
        );
        assert_eq!(
            seed_queries("How does asyncio.TaskGroup handle exceptions?")[2],
            "asyncio.taskgroup"
        );
        // A product named in passing is no subject: "python" alone returns Python's most
        // generic pages, which then crowded out `pickle.html`.
        assert_eq!(
            seed_queries("Which pickle protocol does Python 3.11 use by default?"),
            vec![
                "Which pickle protocol does Python 3.11 use by default?".to_string(),
                "pickle protocol python 3.11 use default".to_string(),
            ]
        );
        // A task that is already keywords is searched once.
        assert_eq!(
            seed_queries("json decoder"),
            vec!["json decoder".to_string()]
        );
        assert!(seed_queries("  ").is_empty());
    }
}
