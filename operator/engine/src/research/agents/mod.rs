//! The model conversations the shell runs: the lead (planning, evaluating, synthesizing) and the
//! researchers, with their prompts, tool budgets and settings.

pub mod budget;
pub mod lead;
pub mod prompts;
pub mod researcher;
pub mod settings;
