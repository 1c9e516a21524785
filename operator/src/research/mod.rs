//! research
