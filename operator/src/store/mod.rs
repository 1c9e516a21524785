//! Artifact and report stores behind the `ArtifactStore` port.

use async_trait::async_trait;

pub mod local;
pub mod memory;

/// Errors of a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O on {key}: {message}")]
    Io { key: String, message: String },
    #[error("artifact {key} is corrupt: {message}")]
    Corrupt { key: String, message: String },
}

/// The port through which the engine persists checkpoints, artifacts and reports.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Writes (replaces) one artifact atomically.
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Reads one artifact; `None` when it does not exist.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
}
pub mod configmap;
