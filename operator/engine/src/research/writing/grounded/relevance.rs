//! Whether a sentence of the grounded answer speaks of what the question names.

use super::{Numbered, entry_of};
use crate::research::reading::passages::focus;

/// Pure: the code names `asked` writes (`work_mem`, `json.loads`), lower-cased, each by its
/// last dotted part too: what a passage or sentence on them names.
fn asked_names(asked: &str) -> Vec<String> {
    asked
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_lowercase())
        .filter(|w| {
            let dotted = w.contains('.')
                && w.split('.')
                    .all(|p| p.chars().next().is_some_and(char::is_alphabetic));
            (w.contains('_') && w.chars().any(char::is_alphabetic)) || dotted
        })
        .flat_map(|w| {
            let last = w.rsplit('.').next().unwrap_or(&w).to_string();
            [w, last]
        })
        .collect()
}

/// Pure: whether `text` names `name` (`asyncio.TaskGroup`) whole or by its last dotted part
/// (`TaskGroup`), in any case.
pub(super) fn names_whole_or_by_last_part(text: &str, name: &str) -> bool {
    let name = name.to_lowercase();
    let last = name.rsplit('.').next().unwrap_or(&name).to_string();
    holds_any(text, &[name.clone(), last])
}

/// Pure: whether `text` holds one of `names` as a whole word, or as the last part of a dotted
/// word.
fn holds_any(text: &str, names: &[String]) -> bool {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .map(|w| w.trim_matches('.').to_lowercase())
        .any(|w| {
            names
                .iter()
                .any(|n| w == *n || w.rsplit('.').next() == Some(n.as_str()))
        })
}

/// Pure: whether `heading` spells one of `names` as words ("Task Groups" for
/// `asyncio.TaskGroup`): a section titled so is about it.
fn spells_any(heading: &str, names: &[String]) -> bool {
    let compact: String = heading
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    names.iter().any(|n| {
        let bare: String = n.chars().filter(|c| c.is_alphanumeric()).collect();
        bare.len() >= 5 && compact.contains(&bare)
    })
}

/// Pure: whether `text`, cited to `item`, speaks of something else than the code names the
/// question `asked` writes: neither it nor its passage (heading and text) names one. Asked
/// "What is the default value of work_mem in PostgreSQL 15?", the 0.5B model added "The
/// default value of port in PostgreSQL 15 is 5432" from the `postgres` manual page's `-p`
/// option, which the ranking had shown for its "default value". A question with a part
/// naming no code name is not judged here.
pub(super) fn off_the_asked_names(text: &str, item: &Numbered, asked: &str) -> bool {
    // Each part of the question must name one: "What does functools.partial return, and how
    // many arguments can a PostgreSQL function take at most?" asks its second part of no name.
    let parts = crate::research::reading::queries::split_questions(asked);
    if parts.iter().any(|p| asked_names(p).is_empty()) {
        return false;
    }
    let names = asked_names(asked);
    !names.is_empty()
        && !holds_any(text, &names)
        && !holds_any(&item.heading, &names)
        && !spells_any(&item.heading, &names)
        && !holds_any(&item.text, &names)
}

/// Pure: the name of the entry a heading breadcrumb ends in, as the page writes it
/// (`json.loads` of "... › json.loads(s, *, cls=None, ...)"); `None` when it is no entry.
pub(super) fn entry_label(heading: &str) -> Option<String> {
    let entry = entry_of(heading);
    let name = focus::entry_name(entry)?;
    let lower = entry.to_lowercase();
    let start = lower.find(&name)?;
    entry
        .get(start..start + name.len())
        .filter(|raw| raw.eq_ignore_ascii_case(&name))
        .map(str::to_string)
}

/// Pure: the model's sentence `text` as the summary writes it: after the name of the entry its
/// passage `item` documents when it states a value (a number, a default), that entry is another
/// than the question asks of and the sentence does not name it; quoted when the passage says
/// it word for word. "The default value is three connections.", `superuser_reserved_connections`'
/// default, read unlabelled in a report on `max_connections`' default as that setting's (the
/// leads are labelled so too).
pub(super) fn with_entry_label(asked: &str, text: String, item: &Numbered) -> String {
    // With nothing asked, nothing is mistaken for the asked entry's.
    let Some(entry) = entry_label(&item.heading).filter(|_| !asked.trim().is_empty()) else {
        return text;
    };
    // Only a value is labelled: a page's prose after an entry sits under that entry's heading
    // too ("The difference between shallow and deep copying ..." under `copy.Error`), and a
    // label on it would say what it is not.
    // The question's own numbers ("PostgreSQL 15") are no value the sentence states.
    let given: Vec<&str> = asked
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    let own: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !given.contains(&w.trim_matches(|c: char| !c.is_alphanumeric())))
        .collect();
    if !super::kind::states_value(&own.join(" "))
        || names_whole_or_by_last_part(asked, &entry)
        || names_whole_or_by_last_part(&text, &entry)
    {
        return text;
    }
    let words = |t: &str| {
        format!(
            " {} ",
            crate::research::reading::queries::plain_words(t).join(" ")
        )
    };
    let (body, stop) = super::split_stop(&text);
    if words(&item.text).contains(&words(body)) {
        format!("{entry}: “{body}”{stop}")
    } else {
        format!("{entry}: {text}")
    }
}

#[cfg(test)]
mod tests;
