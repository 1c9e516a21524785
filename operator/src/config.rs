//! Layered configuration.
