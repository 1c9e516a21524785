//! Writing and checking the answer, as pure functions: grounded answers from numbered passages,
//! the models' structured outputs parsed, every citation checked against what the run saw, the
//! report assembled, and what changed since an earlier run.

pub mod changes;
pub mod evidence;
pub mod grounded;
pub mod links;
pub mod merged;
pub mod outputs;
pub mod report;
