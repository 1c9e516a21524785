//! Artifact and report stores behind the `ArtifactStore` port (DESIGN §4): ConfigMaps (the
//! default), object storage (S3, GCS, Azure) and local files (standalone mode). [`routed`] picks
//! between the first two for each write.

use async_trait::async_trait;

pub mod configmap;
pub mod local;
pub mod memory;
pub mod object;
pub mod routed;

/// Errors of a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store I/O on {key}: {message}")]
    Io { key: String, message: String },
    #[error("artifact {key} is corrupt: {message}")]
    Corrupt { key: String, message: String },
    /// The artifact does not fit where it was meant to go; the message names the way out.
    #[error("artifact {key} is too large: {message}")]
    TooLarge { key: String, message: String },
}

/// The port through which the engine persists checkpoints, artifacts and reports.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Writes (replaces) one artifact atomically.
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// Writes several artifacts in order: an item is written only after those before it. A store
    /// may write neighbouring items that share a container in one request (then atomically):
    /// the ConfigMap store writes a checkpoint slot, its pointer and the progress report in one
    /// apply, which keeps a run's API writes down.
    async fn put_many(&self, items: &[(&str, &[u8])]) -> Result<(), StoreError> {
        for (key, bytes) in items {
            self.put(key, bytes).await?;
        }
        Ok(())
    }
    /// Reads one artifact; `None` when it does not exist.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Deletes one artifact; deleting one that does not exist succeeds.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;
}
