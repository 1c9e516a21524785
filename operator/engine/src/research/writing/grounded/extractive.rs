//! The extractive report: the passages read, quoted unedited, when the model's answer is
//! unusable, led by the statements that answer.

use super::kind::{
    AnswerKind, NOT_ANSWERED, answer_kind, holds_for, kind_name, none_states, parts_without_value,
};
use super::statements::{labelled, quoted_list, statement};
use super::{Numbered, citation};
use crate::research::reading::agenda;
use crate::research::reading::passages::products_asked;
use crate::research::writing::evidence::subject::of_product;

/// What an extractive summary says of itself after its lead.
pub const QUOTED_NOTE: &str = "The model did not write a usable report, so this section quotes, unedited, the passages of the pages read that best match the task, best first.";

/// The extractive report made of the numbered passages when the model's answer is unusable:
/// the best passages for the task across every page read, best first, quoted unedited (the answer a
/// page-by-page excerpt left out, `max_workers`' default, was passage 2 here).
/// The summary's first sentence is the best passage's statement for the task `asked`, quoted
/// and cited: the answer first, then the note that the model wrote none. A task asking of two
/// products leads with each one's best passage ([`product_lead`]). When the task asks for a kind
/// of value ([`answer_kind`]), a lead states one; with none in any passage the summary says so.
pub fn quoted_report(asked: &str, items: &[Numbered]) -> String {
    // Labelled with what it is said of when it names none of it: "The default is `on`" led
    // the report on a query result cache, under `enable_memoize`'s entry.
    let quote = |n: &Numbered, s: String| format!("{}{}. ", labelled(asked, n, s), citation(n));
    let products = products_asked(asked);
    if !products.is_empty() {
        let lead: String = products
            .iter()
            .map(|p| product_lead(asked, p, &products, items, quote))
            .collect();
        return with_lead(lead, items);
    }
    // A lead holds a value of the kind asked for (a name to use is the passage's entry itself).
    let kind = answer_kind(asked).filter(|k| *k != AnswerKind::Name);
    let holds = |s: &String| kind.is_none_or(|k| holds_for(k, s, asked));
    let mut lead: String = items
        .first()
        .and_then(|n| statement(asked, n).filter(holds).map(|s| quote(n, s)))
        .unwrap_or_default();
    if lead.is_empty()
        && let Some(k) = kind
    {
        // The first passage that states one, or else the plain fact that none does: "Default five
        // seconds" led a report on how many connections a pool holds that sqlite3 does not have.
        lead = items
            .iter()
            .find_map(|n| statement(asked, n).filter(holds).map(|s| quote(n, s)))
            .unwrap_or_else(|| not_answered_lead(asked, k, items, quote));
    }
    with_lead(lead, items)
}

/// Pure: the lead of an extractive summary when no passage states the kind of value `k` that
/// `asked` asks for: that no passage answers it, and for a question of several parts, the best
/// passage's statement, which may answer another part, before a note naming each part that asks
/// for a value. "Which TCP port does a PostgreSQL server listen on by default, and which
/// environment variable sets the port for libpq clients?" was led by "The passages read do not
/// answer this" alone (tuning set).
fn not_answered_lead(
    asked: &str,
    k: AnswerKind,
    items: &[Numbered],
    quote: impl Fn(&Numbered, String) -> String,
) -> String {
    let parts = crate::research::reading::queries::split_questions(asked);
    if parts.len() < 2 {
        return format!(
            "{NOT_ANSWERED} this: none states the {} asked for. ",
            kind_name(k)
        );
    }
    let first = items
        .first()
        .and_then(|n| statement(asked, n).map(|s| quote(n, s)))
        .unwrap_or_default();
    // With nothing said, every part asking for a value is one without it.
    let notes: String = parts_without_value(asked, &[])
        .iter()
        .map(|(part, k)| format!("{} ", none_states(part, kind_name(*k))))
        .collect();
    format!("{first}{notes}")
}

/// The extractive report with `lead` opening its summary.
fn with_lead(lead: String, items: &[Numbered]) -> String {
    let items: Vec<&Numbered> = items.iter().collect();
    format!(
        "## Summary\n\n{lead}{QUOTED_NOTE}\n\n## Key findings\n{}",
        quoted_list(&items)
    )
}

/// Pure: the lead an extractive summary gives `product`, one of the `products` `asked` asks
/// of: the statement of its docs' best passage for the part asked of it
/// ([`agenda::part_of`]), which holds the kind of value that part asks for when it asks for
/// one. When none of its passages does, or none is of its docs, the lead says the part is not
/// answered. "How does integer division differ between Python and PostgreSQL?" led with a
/// Python passage on raising a negative number to a power, and PostgreSQL's `/` row came last;
/// "Which Python exception does json.loads raise ..., and what is PostgreSQL's default port?"
/// asked its exception of the PostgreSQL half too, and led with neither.
fn product_lead(
    asked: &str,
    product: &str,
    products: &[String],
    items: &[Numbered],
    quote: impl Fn(&Numbered, String) -> String,
) -> String {
    let part = agenda::part_of(asked, product, products);
    let kind = answer_kind(&part).filter(|k| *k != AnswerKind::Name);
    let holds = |s: &String| kind.is_none_or(|k| holds_for(k, s, &part));
    let mut own = items
        .iter()
        .filter(|n| of_product(&n.url, &n.title, product))
        .peekable();
    if own.peek().is_none() {
        // The product as the question spells it ("PostgreSQL", not `postgresql`).
        let spelled = part
            .split(|c: char| !c.is_alphanumeric())
            .find(|w| w.eq_ignore_ascii_case(product))
            .unwrap_or(product);
        return format!(
            "{NOT_ANSWERED} “{}”: none is from {spelled}'s documentation. ",
            part.trim().trim_end_matches('?')
        );
    }
    // The best passage states it; else, for a kind asked for, any of the product's that does.
    let mut own = own.take(if kind.is_some() { usize::MAX } else { 1 });
    own.find_map(|n| statement(&part, n).filter(holds).map(|s| quote(n, s)))
        .unwrap_or_else(|| format!("{} ", none_states(&part, kind.map_or("answer", kind_name))))
}
