//! The researcher's tool budgets, as a pure tracker.

/// Gathering calls per researcher, shared by every search-like tool.
pub const GATHER_CALLS: u32 = 4;
/// URLs per scrape batch after the handshake: broad, targeted follow-up, deep dive.
pub const SCRAPE_BATCHES: [usize; 3] = [3, 2, 3];
/// A scrape batch is skipped when the conversation uses more than this share of the context window.
pub const CONTEXT_GATE: f64 = 0.55;

/// What the next `scrape` call may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScrapeStep {
    /// No network: report which URLs siblings already read.
    Handshake,
    /// Fetch up to `max_urls` URLs (batch index 0..3).
    Batch { index: usize, max_urls: usize },
    /// The batch was skipped because the context is too full.
    Skipped { index: usize },
    /// All four scrape calls are used.
    Exhausted,
}

/// Counts a researcher's tool calls against its budgets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolBudget {
    gathers: u32,
    scrape_calls: usize,
}

impl ToolBudget {
    /// Takes one gathering call; false when the budget is used up.
    pub fn take_gather(&mut self) -> bool {
        if self.gathers >= GATHER_CALLS {
            return false;
        }
        self.gathers += 1;
        true
    }

    /// Takes the next scrape step given how full the context is (0.0..=1.0).
    pub fn take_scrape(&mut self, context_used: f64) -> ScrapeStep {
        let step = match self.scrape_calls {
            0 => ScrapeStep::Handshake,
            n if n <= SCRAPE_BATCHES.len() => {
                let index = n - 1;
                if context_used > CONTEXT_GATE {
                    ScrapeStep::Skipped { index }
                } else {
                    ScrapeStep::Batch {
                        index,
                        max_urls: SCRAPE_BATCHES[index],
                    }
                }
            }
            _ => return ScrapeStep::Exhausted,
        };
        self.scrape_calls += 1;
        step
    }

    /// Gathering calls used.
    pub fn gathers(&self) -> u32 {
        self.gathers
    }

    /// True when no gathering call is left.
    pub fn gathering_exhausted(&self) -> bool {
        self.gathers >= GATHER_CALLS
    }

    /// True when every scrape call is used.
    pub fn scraping_exhausted(&self) -> bool {
        self.scrape_calls > SCRAPE_BATCHES.len()
    }

    /// Progress units: one per tool call, the report makes the tenth.
    pub fn units(&self) -> u32 {
        self.gathers + self.scrape_calls as u32
    }
}

#[cfg(test)]
mod tests;
