//! Reading and ranking, as pure functions: the search queries asked, search results scored, and
//! a page split into passages ranked against the task.

pub mod agenda;
pub mod passages;
pub mod queries;
pub mod scoring;
