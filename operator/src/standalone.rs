//! Standalone mode.
