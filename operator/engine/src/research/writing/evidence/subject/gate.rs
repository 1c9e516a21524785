//! Subjects the question ties together: a phrase of several subjects, a keyword in capitals,
//! the words saying what kind of answer is asked for, and the attribute "What is the X of Y"
//! asks for. Part of the answerability gate.

use std::collections::BTreeSet;

use super::{Named, Subject, asked_subjects, names_term};
use crate::research::reading::passages::holds_word;
use crate::research::reading::passages::{context_terms, is_category_noun, is_context};

/// Pure: the words `question` writes in capitals, letters only (`VACUUM`, `COMPACT`, `HTTP`),
/// lower-cased: SQL keywords and acronyms, which a text names only in capitals too.
pub(super) fn keywords(question: &str) -> BTreeSet<String> {
    question
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().all(|c| c.is_ascii_uppercase()) && w.len() > 1)
        .map(str::to_lowercase)
        .collect()
}

/// Pure: whether a text names the subject `term` of a question whose capitalised words are
/// `keywords`: a keyword only in capitals. "VACUUM FULL actively compacts tables" does not
/// name a `VACUUM COMPACT`, which PostgreSQL does not have.
pub(super) fn names_asked(
    text: &str,
    named: &Named,
    term: &str,
    keywords: &BTreeSet<String>,
) -> bool {
    if keywords.contains(term) {
        named.names(&Subject::Keywords(vec![term.to_string()]))
    } else {
        names_term(text, named, term)
    }
}

/// Pure: the runs of `subjects` that `question` writes side by side as one noun phrase
/// (`asyncio` and `HTTP` of "Python's asyncio HTTP client") that no one of `texts` names
/// together, as "`asyncio` together with `HTTP`", spelled as the question does. Each named
/// apart, by `http.client`'s page and by asyncio's, they said nothing of an asyncio HTTP
/// client, which Python does not have; its timeout was answered from `http.client`'s.
pub(super) fn named_apart(question: &str, subjects: &[String], texts: &[String]) -> Vec<String> {
    let mut runs: Vec<Vec<(&String, &str)>> = vec![vec![]];
    for raw in question.split_whitespace() {
        let word = bare_word(raw);
        match subjects.iter().find(|k| k.eq_ignore_ascii_case(word)) {
            Some(k) => {
                if let Some(run) = runs.last_mut() {
                    run.push((k, word));
                }
            }
            None => runs.push(vec![]),
        }
        // A comma or a stop ends the phrase: "TRUNCATE, plain VACUUM" are things apart.
        if raw.ends_with([',', ';', ':', '?', '!']) {
            runs.push(vec![]);
        }
    }
    let named: Vec<Named> = texts.iter().map(|t| Named::new(t)).collect();
    let keywords = keywords(question);
    let mut out = Vec::new();
    for mut run in runs {
        run.dedup_by(|a, b| a.0 == b.0);
        if run.len() < 2 {
            continue;
        }
        let together = (0..texts.len()).any(|i| {
            run.iter()
                .all(|(k, _)| names_asked(&texts[i], &named[i], k, &keywords))
        });
        if !together {
            let spelled: Vec<String> = run.iter().map(|(_, w)| format!("`{w}`")).collect();
            out.push(spelled.join(" together with "));
        }
    }
    out
}

/// Pure: the words of a "Which ... <kind>" question naming the kind of thing it asks for, up to
/// that noun ("Python 3.11 standard library module" of "Which Python 3.11 standard library
/// module parses YAML files?"); empty for a question of another form. They say what the answer
/// is, not what is asked of the subject: json's page, saying "This module can thus also be used
/// as a YAML serializer", shares "module" with that question and parses nothing.
pub(super) fn answer_kind_phrase(question: &str) -> String {
    let words: Vec<&str> = question
        .split(|c: char| c.is_whitespace() || "?,;:".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    if !words
        .first()
        .is_some_and(|w| matches!(w.to_lowercase().as_str(), "which" | "what"))
    {
        return String::new();
    }
    let noun = words.iter().take(7).skip(1).position(|w| {
        let w = w.to_lowercase();
        is_category_noun(w.strip_suffix('s').unwrap_or(&w))
    });
    match noun {
        Some(i) => words[1..=i + 1].join(" "),
        None => String::new(),
    }
}

/// Pure: the words `question` writes in capitals ([`keywords`], three letters or more) that
/// are not among its subjects (those are checked as such) nor its products, and that no one of
/// `texts` writes in capitals, spelled as the question does. A question with identifiers
/// takes only them as subjects, so "the TLS mode of Python's http.server module" would be
/// answered from `http.server`'s page, which has none.
pub(super) fn unnamed_keywords(question: &str, texts: &[String]) -> Vec<String> {
    let subjects = asked_subjects(question);
    let context = context_terms(question);
    let named: Vec<Named> = texts.iter().map(|t| Named::new(t)).collect();
    keywords(question)
        .into_iter()
        .filter(|k| k.len() > 2 && !subjects.contains(k) && !is_context(k, &context))
        // By a plural's rule, as subjects are (matched exactly, a question of the frozen set
        // was refused on its own pages), though an asked word ending in a capital S is never
        // named without it: "HTTP" is not "HTTPS" (`Named::names`).
        .filter(|k| {
            !named
                .iter()
                .any(|n| n.names(&Subject::Keywords(vec![k.clone()])))
        })
        .map(|k| k.to_uppercase())
        .collect()
}

/// Words of "What is the X of Y" that ask for a value of Y, not an attribute of its own: "the
/// default value of `work_mem`" asks what `work_mem` is set to.
const GENERIC_ATTRIBUTES: [&str; 24] = [
    "default",
    "value",
    "values",
    "maximum",
    "minimum",
    "max",
    "min",
    "number",
    "name",
    "names",
    "type",
    "size",
    "purpose",
    "role",
    "meaning",
    "effect",
    "difference",
    "kind",
    "way",
    "use",
    "amount",
    "result",
    "part",
    "list",
];

/// Pure: the attribute `question` asks of a subject when it opens "What is the X of Y"
/// ("compression level" of "What is the default compression level of Python's pickle
/// module?"), when none of `texts` holds some word of it, generic words
/// ([`GENERIC_ATTRIBUTES`]) and the question's products and subjects aside. Pickle's pages never
/// speak of compression, and answered that question with the default protocol. Only that
/// opening asks for the attribute itself: "round the quotient of integer division" is answered
/// by "division truncates".
pub(super) fn unspoken_attributes(question: &str, texts: &[String]) -> Vec<String> {
    use crate::research::reading::passages::terms;
    let words: Vec<String> = question
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\''))
                .to_lowercase()
        })
        .collect();
    let opening = match words.as_slice() {
        [what, be, the, ..] if what == "what" && (be == "is" || be == "are") && the == "the" => 3,
        [whats, the, ..] if whats == "what's" && the == "the" => 2,
        _ => return vec![],
    };
    let Some(of) = words.iter().skip(opening).position(|w| w == "of") else {
        return vec![];
    };
    let phrase = &words[opening..opening + of];
    if phrase.is_empty() || phrase.len() > 3 {
        return vec![];
    }
    let (context, subjects, held) = read_against(question, texts);
    let asked: Vec<&String> = phrase
        .iter()
        .filter(|w| !GENERIC_ATTRIBUTES.contains(&w.as_str()))
        .collect();
    let unheld = asked.iter().any(|w| {
        w.len() >= 3
            && w.chars().all(char::is_alphabetic)
            // A superlative ("finest", "largest") qualifies as "maximum" does.
            && !w.ends_with("est")
            && !is_context(w, &context)
            && !subjects.contains(*w)
            && terms(w).iter().all(|t| !held.contains(t))
    });
    if !unheld {
        return vec![];
    }
    let label: Vec<&str> = asked.iter().map(|w| w.as_str()).collect();
    vec![format!("“{}”", label.join(" "))]
}

/// Auxiliaries after which a question's subject is followed by its verb: "How does <subject>
/// choose", "Can <subject> hold".
const AUXILIARIES: [&str; 10] = [
    "do", "does", "did", "can", "could", "will", "would", "should", "may", "must",
];

/// Forms of "be", an auxiliary only when a question opens with it ("Is <subject> stable") or
/// with "How is": in "What is the X of Y" the phrase is the complement, with no verb after it.
const COPULAS: [&str; 4] = ["is", "are", "was", "were"];

/// Adverbs that end a verb's phrase ("round a number down"), naming no thing.
const PARTICLES: [&str; 12] = [
    "down", "away", "back", "apart", "together", "again", "ahead", "aside", "instead", "first",
    "last", "later",
];

/// Words that open a noun phrase.
const DETERMINERS: [&str; 5] = ["the", "a", "an", "its", "their"];

/// Pure: the noun phrases `question` opens with a determiner or a possessive ("its connection
/// pool", "PostgreSQL's built-in index advisor") whose last word, the thing named, none of
/// `texts` holds in any form, as the phrase quoted. A feature the documents never name is not
/// theirs: asked how PostgreSQL's built-in index advisor chooses indexes, the model answered
/// from trigger functions' pages, and asked the size of sqlite3's connection pool, from its
/// connection timeout. Only the head is checked: a modifier may be the question's own word
/// ("its child tasks" of a page on tasks). Code names, generic attributes ("default value"),
/// superlatives and the question's products are left to the other checks.
pub(super) fn unheld_heads(question: &str, texts: &[String]) -> Vec<String> {
    use crate::research::reading::passages::{FRAME_WORDS, is_stop, terms};
    let raw: Vec<&str> = question.split_whitespace().collect();
    let clean: Vec<String> = raw.iter().map(|w| bare_word(w).to_lowercase()).collect();
    let (context, subjects, held) = read_against(question, texts);
    let mut out = Vec::new();
    let mut i = 0;
    while i < raw.len() {
        let opens = DETERMINERS.contains(&clean[i].as_str()) || possessive(raw[i]);
        // "according to its release notes" names where the answer is written, not a thing
        // asked of: What's New pages never call themselves release notes, and deep mode's
        // tasks on Python 3.11's speed-up were refused for want of them.
        let source = i >= 2 && clean[i - 2] == "according" && clean[i - 1] == "to";
        if !opens || source || ends_clause(raw[i]) {
            i += 1;
            continue;
        }
        let after_auxiliary = i > 0 && {
            let before = clean[i - 1].as_str();
            AUXILIARIES.contains(&before)
                || (COPULAS.contains(&before) && (i == 1 || clean[i - 2] == "how"))
        };
        let mut phrase: Vec<&str> = Vec::new();
        let mut j = i + 1;
        while j < raw.len() {
            let w = clean[j].as_str();
            if w.is_empty()
                || is_stop(w)
                || AUXILIARIES.contains(&w)
                || DETERMINERS.contains(&w)
                || possessive(raw[j])
            {
                break;
            }
            phrase.push(w);
            j += 1;
            // A call names a whole thing; the word after it is its verb: "How do Python's
            // json.loads() handle duplicate keys" (deep mode's aspect of a question asking two
            // products) asks nothing of a "json.loads handle duplicate".
            let call = raw[j - 1]
                .trim_end_matches(|c: char| "?,;:!.".contains(c))
                .ends_with("()");
            if ends_clause(raw[j - 1]) || call {
                break;
            }
        }
        // After an auxiliary the subject's verb ends the phrase: "advisor choose".
        if after_auxiliary && phrase.len() > 1 {
            phrase.pop();
        }
        // "The quotient of integer division" is an attribute of a thing, and an attribute is
        // often the question's own word for it ("division truncates" answers it); a phrase
        // before "of" is `unspoken_attributes`' to judge.
        if clean.get(j).is_some_and(|w| w == "of") && !ends_clause(raw[j - 1]) {
            phrase.clear();
        }
        i = j.max(i + 1);
        let Some(head) = phrase.last() else { continue };
        let head = head.rsplit('-').next().unwrap_or(head);
        let checked = head.len() >= 3
            && head.chars().all(|c| c.is_ascii_lowercase())
            && !head.ends_with("est")
            // "the others" names nothing, nor does "round it down".
            && !is_stop(head.strip_suffix('s').unwrap_or(head))
            && !PARTICLES.contains(&head)
            && !GENERIC_ATTRIBUTES.contains(&head)
            // "its default settings differ from": the question's frame is no thing named.
            && !FRAME_WORDS.iter().any(|f| head.starts_with(f))
            && !is_context(head, &context)
            && !subjects.contains(head);
        if checked && terms(head).iter().all(|t| !held.contains(t)) {
            out.push(format!("“{}”", phrase.join(" ")));
        }
    }
    out
}

/// Pure: whether a question's word as written is a possessive ("PostgreSQL's"), punctuation aside.
fn possessive(raw: &str) -> bool {
    let w = raw.trim_end_matches(|c: char| "?,;:!.".contains(c));
    w.ends_with("'s") || w.ends_with("’s")
}

/// Pure: whether a question's word as written ends its clause (a comma or a stop after it).
fn ends_clause(raw: &str) -> bool {
    raw.ends_with([',', ';', ':', '?', '!', '.'])
}

/// A question's word as written, without its punctuation, possessive or call parentheses.
fn bare_word(raw: &str) -> &str {
    let w = raw.trim_matches(|c: char| "\"'`?!,;:()[]{}“”".contains(c));
    let w = w.trim_end_matches('.');
    let w = w
        .strip_suffix("'s")
        .or_else(|| w.strip_suffix("’s"))
        .unwrap_or(w);
    w.strip_suffix("()").unwrap_or(w)
}

/// Pure: what a phrase of `question` is read against: its products, its subjects (lower-cased)
/// and the terms `texts` hold.
fn read_against(
    question: &str,
    texts: &[String],
) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    use crate::research::reading::passages::terms;
    let subjects = asked_subjects(question)
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let held = texts.iter().flat_map(|t| terms(t)).collect();
    (context_terms(question), subjects, held)
}

/// Fewest words of a run [`scattered_phrases`] checks: a pair of words is paraphrased too often
/// ("partial index", "index that covers part of a table").
const PHRASE_WORDS: usize = 3;

/// Words after which a question's next word is its verb ("How do I enable ...").
const PRONOUNS: [&str; 4] = ["i", "you", "we", "one"];

/// Pure: the run of at least [`PHRASE_WORDS`] plain lower-case words (no product, no generic
/// attribute) right after the asker's verb ("How do I enable transparent data encryption"),
/// when no one sentence of `texts` holds its words together, as the phrase quoted. Each word
/// may be on the pages apart: asked how to enable transparent data encryption in PostgreSQL
/// 15, the passages read named GSSAPI's encryption of the data sent and the model answered
/// from them; PostgreSQL 15 has no such feature. Words in one sentence are the least a passage
/// naming the thing writes, in any order or form.
pub(super) fn scattered_phrases(question: &str, texts: &[String]) -> Vec<String> {
    use crate::research::reading::passages::{FRAME_WORDS, is_stop};
    use crate::research::writing::evidence::terms;
    let context = context_terms(question);
    let raw: Vec<&str> = question.split_whitespace().collect();
    let plain = |raw: &str, w: &str| {
        let bare = raw.trim_matches(|c: char| "?,;:!.\"“”".contains(c));
        w.len() > 1
            && bare == w
            && w.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            && !is_stop(w)
            && !AUXILIARIES.contains(&w)
            && !COPULAS.contains(&w)
            && !DETERMINERS.contains(&w)
            && !FRAME_WORDS.iter().any(|f| w.starts_with(f))
            && !is_context(w, &context)
    };
    let pronoun = |i: usize| PRONOUNS.contains(&bare_word(raw[i]).to_lowercase().as_str());
    // Only the thing the asker's verb acts on: other runs hold verbs a word list cannot tell
    // from nouns ("module parses", "handle exceptions raised").
    let mut runs: Vec<Vec<String>> = Vec::new();
    let mut open = false;
    for (i, r) in raw.iter().enumerate() {
        let w = bare_word(r).to_lowercase();
        if i >= 2 && pronoun(i - 2) && !ends_clause(raw[i - 1]) {
            runs.push(vec![]);
            open = true;
        }
        match runs.last_mut() {
            // A generic attribute opens no phrase ("change the default value of"), but inside
            // one it is a word of the thing's name ("the query result cache").
            Some(run)
                if open
                    && plain(r, &w)
                    && !(run.is_empty() && GENERIC_ATTRIBUTES.contains(&w.as_str())) =>
            {
                run.push(w)
            }
            // "How do I size the query result cache": the article opens the phrase.
            Some(run) if open && run.is_empty() && DETERMINERS.contains(&w.as_str()) => {}
            _ => open = false,
        }
        if ends_clause(r) {
            open = false;
        }
    }
    let sentences: Vec<BTreeSet<String>> = texts
        .iter()
        .flat_map(|t| crate::research::writing::evidence::sentences(t))
        .map(|s| terms(&s))
        .collect();
    runs.into_iter()
        .filter(|run| run.len() >= PHRASE_WORDS)
        .filter(|run| {
            let words = terms(&run.join(" "));
            !sentences
                .iter()
                .any(|s| words.iter().all(|w| s.contains(w)))
        })
        .map(|run| format!("“{}”", run.join(" ")))
        .collect()
}

/// Verbs that relate a thing to another or to a value rather than name an act of its own;
/// passages put them in other words ("Sets the maximum number ..." answers "Which setting
/// controls ..."), so [`unheld_predicates`] does not hold a sentence to them.
const RELATIONAL_VERBS: [&str; 40] = [
    "differ",
    "handle",
    "work",
    "compare",
    "relate",
    "affect",
    "behave",
    "use",
    "mean",
    "treat",
    "interact",
    "change",
    "happen",
    "help",
    "deal",
    "make",
    "get",
    "control",
    "set",
    "specify",
    "determine",
    "limit",
    "return",
    "raise",
    "accept",
    "take",
    "give",
    "provide",
    "support",
    "allow",
    "need",
    "require",
    "have",
    "cause",
    "produce",
    "represent",
    "contain",
    "add",
    "introduce",
    "improve",
];

/// Pure: the verb `question` asks about and the words of the thing it acts on, when its form
/// shows where the verb is: after the kind of thing asked for ("Which git command
/// *encrypts* the history of a repository?") or after a named subject and its auxiliary ("How
/// does PostgreSQL 15 automatically *scale* shared_buffers ...?"), a subject that may be a
/// lower-case command `texts` write as one ("How does git bisect *rewrite* ..."). `None` for
/// other forms, a relational verb ([`RELATIONAL_VERBS`]) or a verb with no object of its own.
fn asked_predicate(question: &str, texts: &[String]) -> Option<Predicate> {
    use crate::research::reading::passages::{is_category_noun, is_stop};
    let raw: Vec<&str> = question.split_whitespace().collect();
    let clean: Vec<String> = raw.iter().map(|w| bare_word(w).to_lowercase()).collect();
    let category = |w: &str| is_category_noun(w.strip_suffix('s').unwrap_or(w));
    let function = |w: &str| {
        AUXILIARIES.contains(&w) || COPULAS.contains(&w) || DETERMINERS.contains(&w) || is_stop(w)
    };
    let first = clean.first()?.as_str();
    let verb_at = if matches!(first, "which" | "what") {
        // "Which git command encrypts": the words up to the kind, none an auxiliary.
        let noun = (1..raw.len().min(7)).find(|&i| category(&clean[i]))?;
        if (1..noun).any(|i| function(&clean[i]) || ends_clause(raw[i])) {
            return None;
        }
        noun + 1
    } else {
        // "How does PostgreSQL 15 [automatically] scale": a subject written as a name.
        let start = match (first, clean.get(1).map(String::as_str)) {
            ("how", Some(aux)) if AUXILIARIES.contains(&aux) => 2,
            (aux, _) if AUXILIARIES.contains(&aux) => 1,
            _ => return None,
        };
        let named = |r: &str| {
            r.chars()
                .any(|c| c.is_uppercase() || c.is_ascii_digit() || "_.()`".contains(c))
        };
        // A command written in lower case, two words the texts write as one ("git bisect",
        // "git-bisect"), is the subject.
        let command = start + 1 < raw.len()
            && !ends_clause(raw[start])
            && (start..start + 2).all(|j| {
                let w = clean[j].as_str();
                w.len() > 1
                    && w.chars().all(|c| c.is_ascii_lowercase())
                    && !function(w)
                    && !PRONOUNS.contains(&w)
            })
            && texts.iter().any(|t| {
                let lower = t.to_lowercase();
                [" ", "-"].iter().any(|sep| {
                    holds_word(
                        &lower,
                        &format!("{}{sep}{}", clean[start], clean[start + 1]),
                    )
                })
            });
        let mut i = if command { start + 2 } else { start };
        // A name, the thing a possessive owns ("Python's asyncio") or the kind after a name
        // ("the json module") is the subject, not its verb.
        while i < raw.len()
            && !PRONOUNS.contains(&clean[i].as_str())
            && (named(raw[i]) || (i > start && (possessive(raw[i - 1]) || category(&clean[i]))))
        {
            if ends_clause(raw[i]) {
                return None;
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        while i < raw.len() && clean[i].ends_with("ly") && !ends_clause(raw[i]) {
            i += 1;
        }
        i
    };
    let verb = clean.get(verb_at)?;
    let relational = |v: &str| {
        RELATIONAL_VERBS.iter().any(|r| {
            [
                *r,
                &format!("{r}s"),
                &format!("{r}es"),
                &format!("{r}d"),
                &format!("{r}ed"),
            ]
            .contains(&v)
        })
    };
    if verb.len() < 3
        || !verb.chars().all(|c| c.is_ascii_lowercase())
        || function(verb)
        || relational(verb)
        || category(verb)
        || ends_clause(raw[verb_at])
        // "Python's json module": a name, not a verb.
        || clean.get(verb_at + 1).is_some_and(|w| category(w))
    {
        return None;
    }
    let context = context_terms(question);
    let mut object: Vec<String> = Vec::new();
    let mut last = verb_at;
    for (i, (r, w)) in raw.iter().zip(&clean).enumerate().skip(verb_at + 1) {
        // A clause of its own ("when memory is added") says when, not what.
        if SUBORDINATORS.contains(&w.as_str()) {
            break;
        }
        let content = |w: &str| w.len() >= 3 && !function(w) && !is_context(w, &context);
        // A participle before a noun only qualifies it: "failed" of "retry failed tasks".
        let qualifier = (w.ends_with("ed") || w.ends_with("ing"))
            && !ends_clause(r)
            && clean.get(i + 1).is_some_and(|n| content(n));
        if content(w) {
            last = i;
            if !qualifier {
                object.push(w.clone());
            }
        }
        if ends_clause(r) {
            break;
        }
    }
    if object.is_empty() {
        return None;
    }
    let phrase = raw[verb_at..=last]
        .iter()
        .map(|r| r.trim_matches(|c: char| "?,;:!.\"“”".contains(c)))
        .collect::<Vec<_>>()
        .join(" ");
    Some(Predicate {
        verb: verb.clone(),
        object,
        phrase,
    })
}

/// The verb a question asks about, the words of the thing it acts on, and both as written.
struct Predicate {
    verb: String,
    object: Vec<String>,
    phrase: String,
}

/// Words that open a clause of their own after a verb's object.
const SUBORDINATORS: [&str; 10] = [
    "when", "if", "while", "because", "after", "before", "since", "unless", "and", "or",
];

/// Pure: the verb `question` asks about ([`asked_predicate`]) with the thing it acts on, as
/// asked, when no one sentence of `texts` holds the verb (in any form, or a word the
/// documentation uses for it) together with a word of that thing (a participle qualifying a
/// noun aside: "failed" of "retry failed tasks"). Asked which git command
/// encrypts a repository's history, the passages read held "history" in the user manual and
/// "encrypt" in git-cvsserver's password setup, and the model answered from the manual; git
/// has no such command. Relational verbs ("differ", "handle", "control") are not held to.
pub(super) fn unheld_predicates(question: &str, texts: &[String]) -> Vec<String> {
    use crate::research::reading::passages::{synonyms, terms};
    let Some(Predicate {
        verb,
        object,
        phrase,
    }) = asked_predicate(question, texts)
    else {
        return vec![];
    };
    let acts: Vec<String> = terms(&verb)
        .into_iter()
        .flat_map(|t| {
            let same: Vec<String> = synonyms(&t).map(str::to_string).collect();
            std::iter::once(t).chain(same)
        })
        .collect();
    let things: Vec<Vec<String>> = object.iter().map(|w| terms(w)).collect();
    let held = texts
        .iter()
        .flat_map(|t| crate::research::writing::evidence::sentences(t))
        .any(|s| {
            let words: BTreeSet<String> = terms(&s).into_iter().collect();
            acts.iter().any(|a| words.contains(a))
                && things
                    .iter()
                    .any(|t| !t.is_empty() && t.iter().all(|w| words.contains(w)))
        });
    if held {
        return vec![];
    }
    vec![format!("“{phrase}”")]
}

/// Pure: the part a question asks of a thing, written "the X of Y" ("the else clause of
/// Python's match statement"), when no one sentence of `texts` holds the part's words (generic
/// attributes and products aside: "else clause") with a word of the thing (`match`), as
/// the phrase quoted. Python's `match` has no `else` clause, yet asked what it does, the model
/// answered: its docs hold "else" of other statements and "match" of patterns, each apart. The
/// part is one or two plain words after a determiner, one of them its kind ("clause",
/// "parameter"); "What is the X of Y" is [`unspoken_attributes`]' to judge.
pub(super) fn unheld_parts(question: &str, texts: &[String]) -> Vec<String> {
    use crate::research::reading::passages::{
        FRAME_WORDS, is_category_noun, is_stop, synonyms, terms,
    };
    let raw: Vec<&str> = question.split_whitespace().collect();
    let clean: Vec<String> = raw.iter().map(|w| bare_word(w).to_lowercase()).collect();
    let context = context_terms(question);
    let plain = |i: usize| {
        let w = clean[i].as_str();
        w.len() > 1
            && raw[i].trim_matches(|c: char| "?,;:!.\"“”".contains(c)) == w
            && w.chars().all(|c| c.is_ascii_lowercase())
            && !is_stop(w)
            && !AUXILIARIES.contains(&w)
            && !COPULAS.contains(&w)
            && !DETERMINERS.contains(&w)
    };
    let kind = |w: &str| is_category_noun(w.strip_suffix('s').unwrap_or(w));
    // The thing's own words: not its kind ("statement"), a generic attribute, the question's
    // frame or its products.
    let own = |w: &str| {
        !kind(w)
            && !GENERIC_ATTRIBUTES.contains(&w)
            && !FRAME_WORDS.iter().any(|f| w.starts_with(f))
            && !PARTICLES.contains(&w)
            && !is_context(w, &context)
    };
    let sentences: Vec<BTreeSet<String>> = texts
        .iter()
        .flat_map(|t| crate::research::writing::evidence::sentences(t))
        .map(|s| terms(&s).into_iter().collect())
        .collect();
    let mut out = Vec::new();
    for i in 0..raw.len() {
        if !DETERMINERS.contains(&clean[i].as_str()) || ends_clause(raw[i]) {
            continue;
        }
        // "What is the X of Y" asks for an attribute.
        if i == 2 && clean[0] == "what" && COPULAS.contains(&clean[1].as_str()) {
            continue;
        }
        let Some(of) = (i + 1..raw.len().min(i + 4)).find(|&j| clean[j] == "of") else {
            continue;
        };
        if of == i + 1 || (i + 1..of).any(|j| !plain(j) || ends_clause(raw[j])) {
            continue;
        }
        // A part named with its kind ("else clause") is a component, which docs name by its
        // name; another ("the quotient of integer division") is often put in other words
        // ("division truncates").
        if !(i + 1..of).any(|j| kind(&clean[j])) {
            continue;
        }
        // Its kind is held too: "Else, the subpattern ... is matched" holds "else" and "match"
        // and speaks of no else clause.
        let part: Vec<&str> = (i + 1..of)
            .map(|j| clean[j].as_str())
            .filter(|w| (own(w) || kind(w)) && !terms(w).is_empty())
            .collect();
        // The thing: the words after "of" up to a function word or the clause's end, past
        // determiners and possessives.
        let mut thing: Vec<&str> = Vec::new();
        let mut end = of;
        for j in of + 1..raw.len() {
            let opener = DETERMINERS.contains(&clean[j].as_str()) || possessive(raw[j]);
            if !opener && !plain(j) {
                break;
            }
            end = j;
            if !opener && own(&clean[j]) && !terms(&clean[j]).is_empty() {
                thing.push(clean[j].as_str());
            }
            if ends_clause(raw[j]) {
                break;
            }
        }
        if part.is_empty() || thing.is_empty() {
            continue;
        }
        let held_with = |s: &BTreeSet<String>, words: &[&str]| {
            words.iter().all(|w| {
                terms(w)
                    .iter()
                    .all(|t| s.contains(t) || synonyms(t).any(|y| s.contains(y)))
            })
        };
        let held = sentences
            .iter()
            .any(|s| held_with(s, &part) && thing.iter().any(|w| held_with(s, &[w])));
        if !held {
            let phrase: Vec<&str> = raw[i + 1..=end]
                .iter()
                .map(|r| r.trim_matches(|c: char| "?,;:!.\"“”".contains(c)))
                .collect();
            out.push(format!("“{}”", phrase.join(" ")));
        }
    }
    out
}

/// Pure: the names with a version after a slash that `question` writes ("HTTP/3", "HTTP/1.1")
/// and no one of `texts` writes (in any case), as written. Their words apart say nothing of
/// the version: asked which module implements an HTTP/3 client, `http.server`'s page, which
/// implements HTTP/1.1 servers, answered it.
pub(super) fn unwritten_versions(question: &str, texts: &[String]) -> Vec<String> {
    let lower: Vec<String> = texts.iter().map(|t| t.to_lowercase()).collect();
    question
        .split_whitespace()
        .map(|r| {
            r.trim_matches(|c: char| "\"'`?!,;:()[]{}“”".contains(c))
                .trim_end_matches('.')
        })
        .filter(|w| {
            w.split_once('/').is_some_and(|(name, version)| {
                name.len() > 1
                    && name.chars().all(|c| c.is_ascii_alphabetic())
                    && version.starts_with(|c: char| c.is_ascii_digit())
                    && version.chars().all(|c| c.is_ascii_digit() || c == '.')
            })
        })
        .filter(|w| {
            let w = w.to_lowercase();
            !lower.iter().any(|t| t.contains(&w))
        })
        .map(|w| format!("`{w}`"))
        .collect()
}

/// Pure: whether `text` names the command-line option `option` (lower-cased, `--` first) as a
/// whole: not as the start of a longer option, nor inside a word.
pub(super) fn names_option(text: &str, option: &str) -> bool {
    let lower = text.to_lowercase();
    let part = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '-' || c == '_');
    lower.match_indices(option).any(|(at, _)| {
        !part(lower[..at].chars().next_back()) && !part(lower[at + option.len()..].chars().next())
    })
}
