//! Unit tests of `budget`.

use super::*;

#[test]
fn four_gathering_calls_then_refused() {
    let mut b = ToolBudget::default();
    assert_eq!(
        (0..6).map(|_| b.take_gather()).collect::<Vec<_>>(),
        vec![true, true, true, true, false, false]
    );
    assert!(b.gathering_exhausted());
    assert_eq!(b.units(), 4);
}

#[test]
fn handshake_then_batches_of_three_two_three_then_exhausted() {
    let mut b = ToolBudget::default();
    let steps: Vec<_> = (0..5).map(|_| b.take_scrape(0.1)).collect();
    assert_eq!(
        steps,
        vec![
            ScrapeStep::Handshake,
            ScrapeStep::Batch {
                index: 0,
                max_urls: 3
            },
            ScrapeStep::Batch {
                index: 1,
                max_urls: 2
            },
            ScrapeStep::Batch {
                index: 2,
                max_urls: 3
            },
            ScrapeStep::Exhausted,
        ]
    );
    assert!(b.scraping_exhausted());
    assert_eq!(b.units(), 4);
}

#[test]
fn batches_are_skipped_over_the_context_gate_but_the_handshake_is_not() {
    let mut b = ToolBudget::default();
    assert_eq!(b.take_scrape(0.9), ScrapeStep::Handshake);
    assert_eq!(b.take_scrape(0.56), ScrapeStep::Skipped { index: 0 });
    assert_eq!(
        b.take_scrape(0.55),
        ScrapeStep::Batch {
            index: 1,
            max_urls: 2
        }
    );
}
