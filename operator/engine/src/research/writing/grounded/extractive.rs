//! The extractive report: the passages read, quoted unedited, when the model's answer is
//! unusable, led by the statements that answer.

use super::kind::{AnswerKind, answer_kind, holds_for, kind_name};
use super::statements::{labelled, quoted_list, statement};
use super::{Numbered, citation};
use crate::research::reading::passages::products_asked;
use crate::research::writing::evidence::subject::of_product;

/// What an extractive summary says of itself after its lead.
pub const QUOTED_NOTE: &str = "The model did not write a usable report, so this section quotes, unedited, the passages of the pages read that best match the task, best first.";

/// The extractive report made of the numbered passages when the model's answer is unusable:
/// the best passages for the task across every page read, best first, quoted unedited (the answer a
/// page-by-page excerpt left out, `max_workers`' default, was passage 2 here).
/// The summary's first sentence is the best passage's statement for the task `asked`, quoted
/// and cited: the answer first, then the note that the model wrote none. A task asking of two
/// products leads with each one's best passage ([`lead_items`]). When the task asks for a kind
/// of value ([`answer_kind`]), a lead states one; with none in any passage the summary says so.
pub fn quoted_report(asked: &str, items: &[Numbered]) -> String {
    // A lead holds a value of the kind asked for (a name to use is the passage's entry itself).
    let kind = answer_kind(asked).filter(|k| *k != AnswerKind::Name);
    let holds = |s: &String| kind.is_none_or(|k| holds_for(k, s, asked));
    // Labelled with what it is said of when it names none of it: "The default is `on`" led
    // the report on a query result cache, under `enable_memoize`'s entry.
    let quote = |n: &Numbered, s: String| format!("{}{}. ", labelled(asked, n, s), citation(n));
    let mut lead: String = lead_items(asked, items)
        .into_iter()
        .filter_map(|n| statement(asked, n).filter(holds).map(|s| quote(n, s)))
        .collect();
    if lead.is_empty()
        && let Some(k) = kind
    {
        // The first passage that states one, or else the plain fact that none does: "Default five
        // seconds" led a report on how many connections a pool holds that sqlite3 does not have.
        lead = items
            .iter()
            .find_map(|n| statement(asked, n).filter(holds).map(|s| quote(n, s)))
            .unwrap_or_else(|| {
                format!(
                    "The passages read do not answer this: none states the {} asked for. ",
                    kind_name(k)
                )
            });
    }
    let items: Vec<&Numbered> = items.iter().collect();
    format!(
        "## Summary\n\n{lead}{QUOTED_NOTE}\n\n## Key findings\n{}",
        quoted_list(&items)
    )
}

/// Pure: the passages an extractive summary leads with: the best one, or, when `asked` asks
/// of two products ([`products_asked`]), the best of each one's docs. "How does integer
/// division differ between Python and PostgreSQL?" led with a Python passage on raising a
/// negative number to a power, and PostgreSQL's `/` row, the other half, came last.
fn lead_items<'a>(asked: &str, items: &'a [Numbered]) -> Vec<&'a Numbered> {
    let mut out: Vec<&Numbered> = Vec::new();
    for product in products_asked(asked) {
        if let Some(n) = items
            .iter()
            .find(|n| of_product(&n.url, &n.title, &product))
            .filter(|n| !out.iter().any(|o| o.number == n.number))
        {
            out.push(n);
        }
    }
    if out.is_empty() {
        out.extend(items.first());
    }
    out
}
