//! An in-memory artifact store: tests and single-process runs that keep nothing.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{ArtifactStore, StoreError};

/// Artifacts kept in a map; cloneable snapshots for assertions.
#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<BTreeMap<String, Vec<u8>>>,
    writes: Mutex<Vec<String>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
    /// Keys written so far, in order, including rewrites.
    pub fn writes(&self) -> Vec<String> {
        self.writes.lock().map(|w| w.clone()).unwrap_or_default()
    }
    /// One artifact as UTF-8 text, if present.
    pub fn text(&self, key: &str) -> Option<String> {
        self.items
            .lock()
            .ok()?
            .get(key)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

#[async_trait]
impl ArtifactStore for MemoryStore {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let poisoned = || StoreError::Io {
            key: key.to_string(),
            message: "store lock poisoned".into(),
        };
        self.items
            .lock()
            .map_err(|_| poisoned())?
            .insert(key.to_string(), bytes.to_vec());
        self.writes
            .lock()
            .map_err(|_| poisoned())?
            .push(key.to_string());
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let items = self.items.lock().map_err(|_| StoreError::Io {
            key: key.to_string(),
            message: "store lock poisoned".into(),
        })?;
        Ok(items.get(key).cloned())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.items
            .lock()
            .map_err(|_| StoreError::Io {
                key: key.to_string(),
                message: "store lock poisoned".into(),
            })?
            .remove(key);
        Ok(())
    }
}
