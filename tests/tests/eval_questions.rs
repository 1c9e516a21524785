//! The evaluation question set `tests/eval/questions.jsonl` (see `tests/eval/README.md`), checked
//! against the documentation it cites: Debian's Python 3.11 and PostgreSQL 15 HTML docs, the same
//! corpus the local search stack serves.
//!
//! - `question_set_is_well_formed` needs nothing installed: schema, ids, counts, match strings.
//! - `quotes_and_matches_are_on_the_cited_pages`: every key fact's quote occurs in the visible
//!   text of its page, and at least one of its match strings occurs in that text or in the quote.
//! - `no_answer_terms_are_absent_from_the_corpus`: the distinctive terms of every no-answer
//!   question occur on no page of either doc tree.
//!
//! The last two need `scripts/install-test-deps.sh` (the `python3.11-doc` and `postgresql-doc-15`
//! packages); without them each prints why it is skipped, unless `CI` is set, where the missing
//! packages fail the test (the convention of the other docs-corpus tests, `searx::require_installed`).
//!
//! Every check collects all its failures first and asserts once, so one run lists every bad line,
//! quote or term.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use quarry_e2e::docs_server::DEFAULT_DOC_ROOT;
use quarry_e2e::searx::{DOC_TREES, missing_doc_trees, require_installed};
use regex::{Captures, Regex};
use serde::Deserialize;

/// Fewest questions the set may hold, and fewest of them without an answer in the corpus.
const MIN_QUESTIONS: usize = 40;
const MIN_NO_ANSWER: usize = 4;
/// Bounds on a quote's length in whitespace-separated words.
const QUOTE_WORDS: std::ops::RangeInclusive<usize> = 5..=40;
/// Key facts per answerable question, and match strings per key fact.
const FACTS_PER_QUESTION: std::ops::RangeInclusive<usize> = 1..=3;
const MATCHES_PER_FACT: std::ops::RangeInclusive<usize> = 1..=3;
const KINDS: [&str; 4] = ["fact", "explanation", "multi-page", "no-answer"];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Question {
    id: String,
    /// Optional grouping for reports: one of [`KINDS`].
    #[serde(default)]
    kind: Option<String>,
    question: String,
    /// `answer` or `no-answer`.
    expect: String,
    key_facts: Vec<KeyFact>,
    pages: Vec<String>,
    /// No-answer questions only: lowercase terms no page of the corpus contains.
    #[serde(default)]
    absent_terms: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFact {
    fact: String,
    #[serde(rename = "match")]
    matches: Vec<String>,
    page: String,
    quote: String,
}

fn questions_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/questions.jsonl")
}

/// Parses every non-empty line; a line that does not parse is an error naming its number.
fn load() -> (Vec<(usize, Question)>, Vec<String>) {
    let path = questions_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let mut questions = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Question>(line) {
            Ok(q) => questions.push((number, q)),
            Err(e) => errors.push(format!("line {number}: {e}")),
        }
    }
    (questions, errors)
}

/// Parsed questions; panics listing every unparsable line.
fn load_valid() -> Vec<Question> {
    let (questions, errors) = load();
    assert!(
        errors.is_empty(),
        "{} has unparsable lines:\n{}",
        questions_path().display(),
        errors.join("\n")
    );
    questions.into_iter().map(|(_, q)| q).collect()
}

/// Lowercased, whitespace runs collapsed to one space, trimmed.
fn normalise(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn is_kebab_case(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('-')
        && !id.ends_with('-')
        && !id.contains("--")
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A page path must name an HTML file inside one of the served doc trees.
fn page_problem(page: &str) -> Option<String> {
    if !DOC_TREES
        .iter()
        .any(|tree| page.starts_with(&format!("{tree}/")))
    {
        return Some(format!("page {page:?} is not under {DOC_TREES:?}"));
    }
    if page.split('/').any(|part| part == ".." || part.is_empty()) || !page.ends_with(".html") {
        return Some(format!(
            "page {page:?} is not a plain path to an .html file"
        ));
    }
    None
}

fn match_problem(m: &str) -> Option<String> {
    if m.trim().is_empty() {
        Some("an empty match string".to_string())
    } else if m != m.to_lowercase() {
        Some(format!("match {m:?} is not lowercase"))
    } else if m != normalise(m) {
        Some(format!(
            "match {m:?} is not normalised (whitespace collapsed, trimmed)"
        ))
    } else {
        None
    }
}

#[test]
fn question_set_is_well_formed() {
    let (questions, mut errors) = load();
    let mut ids = HashSet::new();
    let mut no_answer = 0;
    for (line, q) in &questions {
        let at = format!("line {line} ({})", q.id);
        if !ids.insert(q.id.as_str()) {
            errors.push(format!("{at}: duplicate id"));
        }
        if !is_kebab_case(&q.id) {
            errors.push(format!("{at}: id is not kebab-case"));
        }
        if q.question.trim().is_empty() {
            errors.push(format!("{at}: empty question"));
        }
        if let Some(kind) = &q.kind {
            if !KINDS.contains(&kind.as_str()) {
                errors.push(format!("{at}: kind {kind:?} is not one of {KINDS:?}"));
            }
            if (kind == "no-answer") != (q.expect == "no-answer") {
                errors.push(format!(
                    "{at}: kind {kind:?} disagrees with expect {:?}",
                    q.expect
                ));
            }
        }
        match q.expect.as_str() {
            "no-answer" => {
                no_answer += 1;
                if !q.key_facts.is_empty() || !q.pages.is_empty() {
                    errors.push(format!("{at}: a no-answer question has key facts or pages"));
                }
                if q.absent_terms.is_empty() {
                    errors.push(format!("{at}: a no-answer question needs absentTerms"));
                }
                for term in &q.absent_terms {
                    if let Some(problem) = match_problem(term) {
                        errors.push(format!("{at}: absentTerms: {problem}"));
                    }
                }
            }
            "answer" => {
                if q.key_facts.is_empty() {
                    errors.push(format!("{at}: an answerable question has no key facts"));
                } else if !FACTS_PER_QUESTION.contains(&q.key_facts.len()) {
                    errors.push(format!(
                        "{at}: {} key facts, want {FACTS_PER_QUESTION:?}",
                        q.key_facts.len()
                    ));
                }
                if !q.absent_terms.is_empty() {
                    errors.push(format!("{at}: absentTerms on an answerable question"));
                }
                let fact_pages: HashSet<&str> =
                    q.key_facts.iter().map(|f| f.page.as_str()).collect();
                let listed: HashSet<&str> = q.pages.iter().map(String::as_str).collect();
                if fact_pages != listed || listed.len() != q.pages.len() {
                    errors.push(format!(
                        "{at}: pages {:?} are not exactly the key facts' pages {fact_pages:?}",
                        q.pages
                    ));
                }
                if q.kind.as_deref() == Some("multi-page") && listed.len() < 2 {
                    errors.push(format!("{at}: a multi-page question cites one page"));
                }
                for page in &q.pages {
                    if let Some(problem) = page_problem(page) {
                        errors.push(format!("{at}: {problem}"));
                    }
                }
                for (n, fact) in q.key_facts.iter().enumerate() {
                    let at = format!("{at} fact {n}");
                    if fact.fact.trim().is_empty() {
                        errors.push(format!("{at}: empty fact"));
                    }
                    if !MATCHES_PER_FACT.contains(&fact.matches.len()) {
                        errors.push(format!(
                            "{at}: {} match strings, want {MATCHES_PER_FACT:?}",
                            fact.matches.len()
                        ));
                    }
                    for m in &fact.matches {
                        if let Some(problem) = match_problem(m) {
                            errors.push(format!("{at}: {problem}"));
                        }
                    }
                    let words = fact.quote.split_whitespace().count();
                    if !QUOTE_WORDS.contains(&words) {
                        errors.push(format!(
                            "{at}: quote has {words} words, want {QUOTE_WORDS:?}: {:?}",
                            fact.quote
                        ));
                    }
                }
            }
            other => errors.push(format!(
                "{at}: expect {other:?} is neither \"answer\" nor \"no-answer\""
            )),
        }
    }
    if questions.len() < MIN_QUESTIONS {
        errors.push(format!(
            "{} questions parse, want at least {MIN_QUESTIONS}",
            questions.len()
        ));
    }
    if no_answer < MIN_NO_ANSWER {
        errors.push(format!(
            "{no_answer} no-answer questions, want at least {MIN_NO_ANSWER}"
        ));
    }
    assert!(
        errors.is_empty(),
        "{} is malformed:\n{}",
        questions_path().display(),
        errors.join("\n")
    );
}

// ---- HTML to visible text -------------------------------------------------------------------

/// Elements whose boundaries separate words (everything else, e.g. Sphinx's `<span>`s inside
/// `json.<span>loads</span>`, is removed without a space).
const BLOCK_TAGS: &[&str] = &[
    "p",
    "div",
    "br",
    "li",
    "ul",
    "ol",
    "dl",
    "dt",
    "dd",
    "pre",
    "table",
    "tr",
    "td",
    "th",
    "thead",
    "tbody",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "blockquote",
    "hr",
    "title",
    "head",
    "body",
    "html",
    "nav",
    "header",
    "footer",
    "aside",
    "figure",
    "figcaption",
    "caption",
    "main",
];

static COMMENT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?s)<!--.*?-->").unwrap());
static SCRIPT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<script\b.*?</script\s*>").unwrap());
static STYLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<style\b.*?</style\s*>").unwrap());
static TAG: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<\s*/?\s*([A-Za-z][A-Za-z0-9]*)\b[^>]*>").unwrap());
/// `<!DOCTYPE ...>`, `<?xml ...?>` and the like.
static DECLARATION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"<[!?][^>]*>").unwrap());
static ENTITY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"&(#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);").unwrap());

fn decode_entity(caps: &Captures) -> String {
    let whole = &caps[0];
    let name = &caps[1];
    let numeric = if let Some(hex) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
        Some(u32::from_str_radix(hex, 16).ok())
    } else {
        name.strip_prefix('#').map(|dec| dec.parse::<u32>().ok())
    };
    match numeric {
        Some(code) => code
            .and_then(char::from_u32)
            .map(String::from)
            .unwrap_or_else(|| whole.to_string()),
        None => match name {
            "amp" => "&",
            "lt" => "<",
            "gt" => ">",
            "quot" => "\"",
            "apos" => "'",
            "nbsp" => " ",
            _ => whole,
        }
        .to_string(),
    }
}

/// The page's visible text: comments, `<script>` and `<style>` dropped, tags removed (block
/// elements leave a space), entities decoded, whitespace collapsed.
fn visible_text(html: &str) -> String {
    let text = COMMENT.replace_all(html, " ");
    let text = SCRIPT.replace_all(&text, " ");
    let text = STYLE.replace_all(&text, " ");
    let text = TAG.replace_all(&text, |caps: &Captures| {
        if BLOCK_TAGS.contains(&caps[1].to_ascii_lowercase().as_str()) {
            " "
        } else {
            ""
        }
    });
    let text = DECLARATION.replace_all(&text, " ");
    let text = ENTITY.replace_all(&text, decode_entity);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn page_file(page: &str) -> PathBuf {
    Path::new(DEFAULT_DOC_ROOT).join(page)
}

fn read_visible_text(path: &Path) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    Ok(visible_text(&String::from_utf8_lossy(&bytes)))
}

#[test]
fn visible_text_strips_markup_and_decodes_entities() {
    let html = "<!DOCTYPE html><html><head><title>T</title><style>p{x:1}</style>\
        <script>var a = '<p>no</p>';</script></head><body><!-- hidden -->\
        <dt><code>json.</code><code><span class=\"pre\">loads</span></code>(<em>s</em>)</dt>\
        <p>a&nbsp;&amp;&#32;b &lt;c&gt; &quot;d&quot; &#39;e&#x27; &para;</p><p>next</p></body></html>";
    assert_eq!(
        visible_text(html),
        "T json.loads(s) a & b <c> \"d\" 'e' &para; next"
    );
}

#[test]
#[ignore = "needs the docs corpus (scripts/install-test-deps.sh)"]
fn quotes_and_matches_are_on_the_cited_pages() {
    let test = "quotes_and_matches_are_on_the_cited_pages";
    let questions = load_valid();
    require_installed(test, &missing_doc_trees());
    let mut texts: HashMap<String, Result<String, String>> = HashMap::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for q in &questions {
        for (n, fact) in q.key_facts.iter().enumerate() {
            let at = format!("{} fact {n} ({})", q.id, fact.page);
            if let Some(problem) = page_problem(&fact.page) {
                failures.push(format!("{at}: {problem}"));
                continue;
            }
            let text = texts.entry(fact.page.clone()).or_insert_with(|| {
                let path = page_file(&fact.page);
                read_visible_text(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
            });
            let text = match text {
                Ok(text) => text,
                Err(e) => {
                    failures.push(format!("{at}: {e}"));
                    continue;
                }
            };
            checked += 1;
            if !text.contains(fact.quote.as_str()) {
                failures.push(format!(
                    "{at}: quote not in the page's visible text: {:?}",
                    fact.quote
                ));
            }
            let page = normalise(text);
            let quote = normalise(&fact.quote);
            if !fact.matches.iter().any(|m| {
                let m = normalise(m);
                page.contains(&m) || quote.contains(&m)
            }) {
                failures.push(format!(
                    "{at}: none of the match strings {:?} is on the page or in the quote",
                    fact.matches
                ));
            }
        }
    }
    assert!(checked > 0, "no key facts were checked");
    assert!(
        failures.is_empty(),
        "{} of {checked} key facts fail against the docs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every `.html` file under `dir`, following symlinked files but not symlinked directories.
fn html_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            html_files(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "html")
            && (file_type.is_file() || path.is_file())
        {
            out.push(path);
        }
    }
    Ok(())
}

#[test]
#[ignore = "needs the docs corpus (scripts/install-test-deps.sh)"]
fn no_answer_terms_are_absent_from_the_corpus() {
    let test = "no_answer_terms_are_absent_from_the_corpus";
    let questions = load_valid();
    require_installed(test, &missing_doc_trees());
    // Term -> ids of the questions relying on its absence.
    let mut terms: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for q in questions.iter().filter(|q| q.expect == "no-answer") {
        for term in &q.absent_terms {
            terms.entry(normalise(term)).or_default().push(&q.id);
        }
    }
    assert!(!terms.is_empty(), "no absentTerms to check");

    let mut files = Vec::new();
    for tree in DOC_TREES {
        let root = Path::new(DEFAULT_DOC_ROOT).join(tree);
        html_files(&root, &mut files)
            .unwrap_or_else(|e| panic!("cannot walk {}: {e}", root.display()));
    }
    assert!(
        files.len() > 1000,
        "only {} HTML pages under {DOC_TREES:?}; are the doc packages complete?",
        files.len()
    );

    let mut hits: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for file in &files {
        let text = read_visible_text(file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()))
            .to_lowercase();
        for term in terms.keys() {
            if text.contains(term.as_str()) {
                hits.entry(term)
                    .or_default()
                    .push(file.display().to_string());
            }
        }
    }
    let failures: Vec<String> = hits
        .iter()
        .map(|(term, pages)| {
            format!(
                "{term:?} (questions {:?}) occurs on {} page(s): {}",
                terms[*term],
                pages.len(),
                pages.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "absent terms found in the corpus of {} pages:\n{}",
        files.len(),
        failures.join("\n")
    );
}
