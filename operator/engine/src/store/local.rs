//! Local filesystem store for standalone mode: atomic writes (temp file, fsync, rename).

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{ArtifactStore, StoreError};

/// Artifacts as files under one directory; keys are file names.
#[derive(Debug, Clone)]
pub struct LocalStore {
    dir: PathBuf,
}

impl LocalStore {
    /// A store rooted at `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory holding the artifacts.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> Result<PathBuf, StoreError> {
        // Keys are engine constants; refuse anything that could leave the directory.
        if key.is_empty() || key.contains(['/', '\\']) || key.starts_with('.') {
            return Err(StoreError::Io {
                key: key.to_string(),
                message: "invalid artifact key".into(),
            });
        }
        Ok(self.dir.join(key))
    }
}

#[async_trait]
impl ArtifactStore for LocalStore {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.path(key)?;
        let io = |e: std::io::Error| StoreError::Io {
            key: key.to_string(),
            message: e.to_string(),
        };
        tokio::fs::create_dir_all(&self.dir).await.map_err(io)?;
        let tmp = self.dir.join(format!(".{key}.tmp"));
        let data = bytes.to_vec();
        let tmp2 = tmp.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp2)?;
            f.write_all(&data)?;
            f.sync_all()
        })
        .await
        .map_err(|e| StoreError::Io {
            key: key.to_string(),
            message: e.to_string(),
        })?
        .map_err(io)?;
        tokio::fs::rename(&tmp, &path).await.map_err(io)
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.path(key)?;
        match tokio::fs::read(&path).await {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io {
                key: key.to_string(),
                message: e.to_string(),
            }),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let path = self.path(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                key: key.to_string(),
                message: e.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests;
