//! The `ArtifactStore` port through which the engine persists checkpoints, artifacts
//! and reports, with the stores that need nothing outside the engine: local files (standalone
//! mode) and memory (tests). The ConfigMap and object stores are the operator's.

use async_trait::async_trait;

pub mod keys;
pub mod local;
pub mod memory;

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

/// Turns a query into a file-name stem: lowercase words joined by dashes, at most 60 characters.
pub fn sanitize_query(query: &str) -> String {
    let mut out = String::new();
    for c in query.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
        if out.len() >= 60 {
            break;
        }
    }
    let trimmed = out.trim_matches('-').to_string();
    if trimmed.is_empty() {
        "research".to_string()
    } else {
        trimmed
    }
}

/// The report file name: `<sanitized-query>-<letter><digit>.md`, readable and rarely taken. Standalone runs draw
/// the suffix at random; object storage derives it from the run's UID (see
/// `quarry_operator::store::object::report_object_name`).
pub fn report_file_name(query: &str, letter: char, digit: u8) -> String {
    format!("{}-{letter}{}.md", sanitize_query(query), digit % 10)
}

#[cfg(test)]
mod tests;
