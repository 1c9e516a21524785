//! The artifact store of one cluster run: its ConfigMaps, object storage, or both.
//!
//! - `spec.report.kind: objectStore`: every artifact goes to the object store.
//! - `configMap` (the default): artifacts go to the run's ConfigMaps; one that would push its
//!   ConfigMap past the limit goes to the object store when one is configured, and is refused
//!   with an error naming the object-store option when none is.
//!
//! Reads look in the ConfigMap first, then in the object store: an artifact moved to the object
//! store is removed from its ConfigMap once the object is written, so the ConfigMap never serves
//! a stale copy. Before the first object write of a run, the hook the store was built with runs
//! once, and an error from it stops the write; the store knows nothing of what it does.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::configmap::{CONFIGMAP_LIMIT, ConfigMapStore, too_large_message};
use super::object::ObjectArtifactStore;
use quarry_api::ReportKind;
use quarry_engine::store::keys::REPORT_KEY;
use quarry_engine::store::{ArtifactStore, StoreError};

/// How a run's artifacts are routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Everything in the object store (`spec.report.kind: objectStore`).
    ObjectStore,
    /// ConfigMaps; `overflow` when an object store takes what does not fit.
    ConfigMap {
        /// Whether an object store is configured for the run.
        overflow: bool,
    },
}

/// Where one write lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The run's ConfigMap.
    ConfigMap,
    /// The object store.
    ObjectStore,
}

/// A write that fits no ConfigMap, with no object store to take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overflow;

/// Pure: the routing of a run from `spec.report.kind` and whether an object store is configured.
pub fn routing(kind: ReportKind, object_store: bool) -> Routing {
    match kind {
        ReportKind::ObjectStore => Routing::ObjectStore,
        ReportKind::ConfigMap => Routing::ConfigMap {
            overflow: object_store,
        },
    }
}

/// Pure: where a write goes, given the size its ConfigMap would have after it (keys plus values,
/// gzip applied).
pub fn place(routing: Routing, configmap_bytes: usize) -> Result<Placement, Overflow> {
    match routing {
        Routing::ObjectStore => Ok(Placement::ObjectStore),
        Routing::ConfigMap { .. } if configmap_bytes <= CONFIGMAP_LIMIT => Ok(Placement::ConfigMap),
        Routing::ConfigMap { overflow: true } => Ok(Placement::ObjectStore),
        Routing::ConfigMap { overflow: false } => Err(Overflow),
    }
}

/// Where a run's report is stored, for `status.report`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportLocation {
    /// In this ConfigMap (`report.md`, or `report.md.gz` in binaryData).
    ConfigMap(String),
    /// At this object URL.
    Object(String),
}

/// Shared cell through which a run's store tells the controller where the report went.
#[derive(Clone, Debug, Default)]
pub struct ReportSlot(Arc<Mutex<Option<ReportLocation>>>);

impl ReportSlot {
    /// Records the report's location.
    pub fn set(&self, location: ReportLocation) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(location);
    }
    /// The report's location, once stored.
    pub fn get(&self) -> Option<ReportLocation> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// What runs once before a run's first object-store write; an error stops the write.
pub type BeforeFirstObject =
    Arc<dyn Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// The routed store of one run.
pub struct RoutedStore {
    configmaps: Option<ConfigMapStore>,
    object: Option<ObjectArtifactStore>,
    routing: Routing,
    guard: Option<BeforeFirstObject>,
    guarded: OnceCell<()>,
    report: ReportSlot,
}

impl RoutedStore {
    /// Everything in `object` (`spec.report.kind: objectStore`).
    pub fn object_only(
        object: ObjectArtifactStore,
        guard: Option<BeforeFirstObject>,
        report: ReportSlot,
    ) -> Self {
        Self {
            configmaps: None,
            object: Some(object),
            routing: Routing::ObjectStore,
            guard,
            guarded: OnceCell::new(),
            report,
        }
    }

    /// ConfigMaps first; `overflow` takes what does not fit.
    pub fn configmap_first(
        configmaps: ConfigMapStore,
        overflow: Option<ObjectArtifactStore>,
        guard: Option<BeforeFirstObject>,
        report: ReportSlot,
    ) -> Self {
        Self {
            configmaps: Some(configmaps),
            routing: Routing::ConfigMap {
                overflow: overflow.is_some(),
            },
            object: overflow,
            guard,
            guarded: OnceCell::new(),
            report,
        }
    }

    /// The routing in force.
    pub fn routing(&self) -> Routing {
        self.routing
    }

    fn object(&self, key: &str) -> Result<&ObjectArtifactStore, StoreError> {
        self.object.as_ref().ok_or_else(|| StoreError::Io {
            key: key.to_string(),
            message: "no object store is configured for this run".into(),
        })
    }

    async fn put_object(&self, key: &str, bytes: &[u8]) -> Result<String, StoreError> {
        let object = self.object(key)?;
        if let Some(guard) = &self.guard {
            self.guarded.get_or_try_init(|| guard()).await?;
        }
        object.put(key, bytes).await?;
        Ok(object.url_of(key))
    }

    /// Finds where the stored report is (a run resumed after it was stored) and records it.
    pub async fn locate_report(&self) -> Result<Option<ReportLocation>, StoreError> {
        let location = match (&self.configmaps, &self.object) {
            (Some(cms), _) if cms.get(REPORT_KEY).await?.is_some() => {
                Some(ReportLocation::ConfigMap(cms.configmap_of(REPORT_KEY)?))
            }
            (_, Some(object)) if object.get(REPORT_KEY).await?.is_some() => {
                Some(ReportLocation::Object(object.url_of(REPORT_KEY)))
            }
            _ => None,
        };
        if let Some(location) = &location {
            self.report.set(location.clone());
        }
        Ok(location)
    }
}

#[async_trait]
impl ArtifactStore for RoutedStore {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let location = match &self.configmaps {
            Some(cms) if self.routing != Routing::ObjectStore => {
                let routing = self.routing;
                let fits = cms
                    .put_if(key, bytes, |name, size| match place(routing, size) {
                        Ok(Placement::ConfigMap) => Ok(true),
                        Ok(Placement::ObjectStore) => Ok(false),
                        Err(Overflow) => Err(StoreError::TooLarge {
                            key: key.to_string(),
                            message: too_large_message(name, size),
                        }),
                    })
                    .await?;
                if fits {
                    ReportLocation::ConfigMap(cms.configmap_of(key)?)
                } else {
                    let url = self.put_object(key, bytes).await?;
                    // The object is written: an older copy in the ConfigMap must not shadow it.
                    cms.delete(key).await?;
                    ReportLocation::Object(url)
                }
            }
            _ => ReportLocation::Object(self.put_object(key, bytes).await?),
        };
        if key == REPORT_KEY {
            self.report.set(location);
        }
        Ok(())
    }

    /// Neighbours that share a ConfigMap and fit there are written in one apply; a group that
    /// would not fit goes key by key through [`RoutedStore::put`]'s placement.
    async fn put_many(&self, items: &[(&str, &[u8])]) -> Result<(), StoreError> {
        let cms = match &self.configmaps {
            Some(cms) if self.routing != Routing::ObjectStore => cms,
            _ => {
                for (key, bytes) in items {
                    self.put(key, bytes).await?;
                }
                return Ok(());
            }
        };
        let routing = self.routing;
        for group in cms.groups(items)? {
            let written = cms
                .put_group_if(&group, |_, size| {
                    Ok(matches!(place(routing, size), Ok(Placement::ConfigMap)))
                })
                .await?;
            if written {
                if group.iter().any(|(k, _)| *k == REPORT_KEY) {
                    self.report
                        .set(ReportLocation::ConfigMap(cms.configmap_of(REPORT_KEY)?));
                }
            } else {
                for (key, bytes) in &group {
                    self.put(key, bytes).await?;
                }
            }
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(cms) = &self.configmaps
            && let Some(bytes) = cms.get(key).await?
        {
            return Ok(Some(bytes));
        }
        match &self.object {
            Some(object) => object.get(key).await,
            None => Ok(None),
        }
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        if let Some(cms) = &self.configmaps {
            cms.delete(key).await?;
        }
        if let Some(object) = &self.object {
            object.delete(key).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
