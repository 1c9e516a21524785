//! `ConfigMapStore`: the default artifact store of a ResearchRun. Artifacts live in
//! ConfigMaps owned by the run, so deleting the run deletes them:
//! - `report.md` and `findings.json` in `<run>-report` (people read them with kubectl),
//! - everything else (the `checkpoint.json` first of all) in `<run>-state`.
//!
//! Values over [`GZIP_THRESHOLD`] bytes, or that are not UTF-8, are stored gzip-compressed in
//! `binaryData` under `<key>.gz`. A ConfigMap over [`CONFIGMAP_LIMIT`] bytes is refused with an
//! error that says so and names the object-store option, before the API server rejects it less
//! clearly. [`super::routed`] sends such artifacts to object storage when one is configured.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use async_trait::async_trait;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::Mutex;

use quarry_engine::store::keys::{CHECKPOINT_SLOTS, EVENTS_KEY, FINDINGS_KEY, REPORT_KEY};
use quarry_engine::store::{ArtifactStore, StoreError};

/// Field manager of every Server-Side Apply the operator sends.
pub const FIELD_MANAGER: &str = "quarry-operator";
/// Values larger than this are gzip-compressed into `binaryData`.
pub const GZIP_THRESHOLD: usize = 256 * 1024;
/// Largest ConfigMap payload (sum of keys and values) this store writes; the API server's limit is
/// 1 MiB, a little is left for metadata.
pub const CONFIGMAP_LIMIT: usize = 1_000_000;
/// Largest artifact size accepted after decompression, so a corrupt or hostile object cannot blow
/// up memory.
pub const MAX_DECOMPRESSED: u64 = 64 * 1024 * 1024;
/// Label put on every artifact ConfigMap, naming the run.
pub const RUN_LABEL: &str = "quarry.dev/run";

/// Keys stored in the report ConfigMap rather than the state ConfigMap (the provenance log,
/// `EVENTS_KEY`, has a ConfigMap of its own).
const REPORT_KEYS: [&str; 2] = [REPORT_KEY, FINDINGS_KEY];

/// Artifact store of one ResearchRun on ConfigMaps.
pub struct ConfigMapStore {
    api: Api<ConfigMap>,
    run_name: String,
    owner: OwnerReference,
    /// Serialises read-merge-apply cycles: each apply carries every key of its ConfigMap, since an
    /// apply that omits a key this field manager owns would delete it.
    lock: Mutex<()>,
}

/// Name of the ConfigMap holding a run's report.
pub fn report_configmap_name(run_name: &str) -> String {
    format!("{run_name}-report")
}

/// Name of the ConfigMap holding a run's provenance log (`events.jsonl`): apart from the
/// checkpoint, so a long log can never crowd a checkpoint out of its ConfigMap.
pub fn events_configmap_name(run_name: &str) -> String {
    format!("{run_name}-events")
}

/// Name of the ConfigMap holding a run's second checkpoint slot.
pub fn checkpoint_b_configmap_name(run_name: &str) -> String {
    format!("{run_name}-state-b")
}

/// Name of the ConfigMap holding a run's checkpoint and other artifacts.
pub fn state_configmap_name(run_name: &str) -> String {
    format!("{run_name}-state")
}

impl ConfigMapStore {
    /// A store for run `run_name` in `namespace`; `owner` is the run's controller owner reference.
    pub fn new(client: Client, namespace: &str, run_name: &str, owner: OwnerReference) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            run_name: run_name.to_string(),
            owner,
            lock: Mutex::new(()),
        }
    }

    /// The name of the ConfigMap that holds artifact `key`.
    pub fn configmap_of(&self, key: &str) -> Result<String, StoreError> {
        self.locate(key).map(|(name, _)| name)
    }

    /// The ConfigMap name and the data key an artifact key maps to.
    fn locate(&self, key: &str) -> Result<(String, String), StoreError> {
        let data_key = sanitize_key(key)?;
        let cm = if REPORT_KEYS.contains(&key) {
            report_configmap_name(&self.run_name)
        } else if key == EVENTS_KEY {
            events_configmap_name(&self.run_name)
        } else if key == CHECKPOINT_SLOTS[1] {
            // Each checkpoint slot has a ConfigMap of its own: two full states side by side
            // would halve the room a run's state may take.
            checkpoint_b_configmap_name(&self.run_name)
        } else {
            state_configmap_name(&self.run_name)
        };
        Ok((cm, data_key))
    }

    /// Reads ConfigMap `name`; one that exists but is not this run's is an error, never data:
    /// a foreign object must neither be taken over nor read as the run's checkpoint or report.
    async fn read(&self, name: &str, key: &str) -> Result<Option<ConfigMap>, StoreError> {
        match self.fetch(name, key).await? {
            Some(cm) if !self.owns(&cm) => Err(StoreError::Io {
                key: key.to_string(),
                message: not_owned_message(name, &self.run_name),
            }),
            other => Ok(other),
        }
    }

    async fn fetch(&self, name: &str, key: &str) -> Result<Option<ConfigMap>, StoreError> {
        self.api.get_opt(name).await.map_err(|e| StoreError::Io {
            key: key.to_string(),
            message: format!("reading ConfigMap {name}: {e}"),
        })
    }

    fn owns(&self, cm: &ConfigMap) -> bool {
        is_runs_configmap(cm, &self.run_name, &self.owner.uid)
    }

    /// The message for the first of the run's ConfigMaps that exists and is not the run's, if
    /// any (one read per ConfigMap): checked before research starts, so the run stalls saying so
    /// instead of failing once its artifacts are written.
    pub async fn foreign_configmap(&self) -> Result<Option<String>, StoreError> {
        for name in configmap_names(&self.run_name) {
            if let Some(cm) = self.fetch(&name, &name).await?
                && !self.owns(&cm)
            {
                return Ok(Some(not_owned_message(&name, &self.run_name)));
            }
        }
        Ok(None)
    }
}

/// Every ConfigMap a run's artifacts may go to.
pub fn configmap_names(run_name: &str) -> [String; 4] {
    [
        report_configmap_name(run_name),
        events_configmap_name(run_name),
        state_configmap_name(run_name),
        checkpoint_b_configmap_name(run_name),
    ]
}

/// Pure: whether `cm` is the run's own: labelled with the run's name and controlled by the run
/// with this UID (what this store puts on every ConfigMap it creates). A ConfigMap of an earlier
/// run of the same name has another UID and is not.
pub fn is_runs_configmap(cm: &ConfigMap, run_name: &str, run_uid: &str) -> bool {
    let labelled = cm
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(RUN_LABEL))
        .is_some_and(|v| v == run_name);
    let controlled = cm.metadata.owner_references.iter().flatten().any(|o| {
        o.controller == Some(true)
            && o.uid == run_uid
            && o.kind == "ResearchRun"
            && o.api_version.starts_with("quarry.dev/")
    });
    labelled && controlled
}

/// Pure: what a person sees when a ConfigMap with the name of one of a run's artifact
/// ConfigMaps exists and is not the run's.
pub fn not_owned_message(configmap: &str, run_name: &str) -> String {
    format!(
        "ConfigMap \"{configmap}\" already exists and is not this run's (Quarry's carry the label {RUN_LABEL}={run_name} and a controller owner reference to this ResearchRun); Quarry never overwrites or adopts an object it did not create: delete or rename that ConfigMap if it is stale, or create the run under another name"
    )
}

/// One artifact to write: its key and bytes.
pub type Item<'a> = (&'a str, &'a [u8]);

/// Maps an artifact key onto a valid ConfigMap key (`[-._a-zA-Z0-9]+`): `/` becomes `__`.
fn sanitize_key(key: &str) -> Result<String, StoreError> {
    let mapped = key.replace('/', "__");
    let valid = !mapped.is_empty()
        && mapped.len() <= 240
        && mapped
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if valid && mapped != "." && mapped != ".." {
        Ok(mapped)
    } else {
        Err(StoreError::Io {
            key: key.to_string(),
            message: "not usable as a ConfigMap key (allowed: letters, digits, '-', '_', '.', '/')"
                .into(),
        })
    }
}

fn gzip(bytes: &[u8]) -> Result<Vec<u8>, std::io::Error> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes)?;
    encoder.finish()
}

fn gunzip(bytes: &[u8], key: &str) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_DECOMPRESSED + 1)
        .read_to_end(&mut out)
        .map_err(|e| StoreError::Corrupt {
            key: key.to_string(),
            message: format!("gzip: {e}"),
        })?;
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(StoreError::Corrupt {
            key: key.to_string(),
            message: format!("decompresses to more than {MAX_DECOMPRESSED} bytes"),
        });
    }
    Ok(out)
}

/// Size the API server counts for a ConfigMap: keys plus values.
fn payload_size(data: &BTreeMap<String, String>, binary: &BTreeMap<String, ByteString>) -> usize {
    data.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
        + binary
            .iter()
            .map(|(k, v)| k.len() + v.0.len())
            .sum::<usize>()
}

/// The error text for a ConfigMap that would outgrow the limit: it names the object-store option,
/// the way out.
pub fn too_large_message(configmap: &str, size: usize) -> String {
    format!(
        "ConfigMap {configmap} would hold {size} bytes, over the {CONFIGMAP_LIMIT}-byte ConfigMap limit even after gzip; configure object storage (spec.objectStore in the run's ResearchProfile, or the operator's --object-store-url) and large artifacts go there automatically, or set the run's spec.report.kind to objectStore"
    )
}

impl ConfigMapStore {
    /// Writes `bytes` under `key` if `decide` agrees, given the ConfigMap's name and the size it
    /// would have after the write (keys plus values, gzip applied). Returns whether it wrote:
    /// `Ok(false)` when `decide` declined, after no request but the read.
    pub async fn put_if(
        &self,
        key: &str,
        bytes: &[u8],
        decide: impl FnOnce(&str, usize) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        self.put_group_if(&[(key, bytes)], decide).await
    }

    /// [`ConfigMapStore::put_if`] for several artifacts of one ConfigMap, written in one apply
    /// (so all or none of them): one read and one write for the group.
    pub async fn put_group_if(
        &self,
        items: &[(&str, &[u8])],
        decide: impl FnOnce(&str, usize) -> Result<bool, StoreError>,
    ) -> Result<bool, StoreError> {
        let Some((first, _)) = items.first() else {
            return Ok(true);
        };
        let (name, _) = self.locate(first)?;
        let _guard = self.lock.lock().await;
        let existing = self.read(&name, first).await?;
        let (mut data, mut binary) = match existing {
            Some(cm) => (
                cm.data.unwrap_or_default(),
                cm.binary_data.unwrap_or_default(),
            ),
            None => Default::default(),
        };
        for (key, bytes) in items {
            let (item_cm, data_key) = self.locate(key)?;
            if item_cm != name {
                return Err(StoreError::Io {
                    key: key.to_string(),
                    message: format!("belongs to ConfigMap {item_cm}, not {name}"),
                });
            }
            let gz_key = format!("{data_key}.gz");
            data.remove(&data_key);
            binary.remove(&gz_key);
            match std::str::from_utf8(bytes) {
                Ok(text) if bytes.len() <= GZIP_THRESHOLD => {
                    data.insert(data_key, text.to_string());
                }
                _ => {
                    let packed = gzip(bytes).map_err(|e| StoreError::Io {
                        key: key.to_string(),
                        message: format!("gzip: {e}"),
                    })?;
                    binary.insert(gz_key, ByteString(packed));
                }
            }
        }
        if !decide(&name, payload_size(&data, &binary))? {
            return Ok(false);
        }
        self.apply(&name, first, data, binary).await?;
        Ok(true)
    }

    /// Splits `items` into runs of neighbours that live in the same ConfigMap, in order.
    pub fn groups<'a>(&self, items: &[Item<'a>]) -> Result<Vec<Vec<Item<'a>>>, StoreError> {
        let mut groups: Vec<(String, Vec<Item<'a>>)> = Vec::new();
        for (key, bytes) in items {
            let (name, _) = self.locate(key)?;
            match groups.last_mut() {
                Some((last, group)) if *last == name => group.push((key, bytes)),
                _ => groups.push((name, vec![(key, bytes)])),
            }
        }
        Ok(groups.into_iter().map(|(_, g)| g).collect())
    }

    /// Writes ConfigMap `name` with exactly these entries by server-side apply, only after the
    /// read just before found it absent or this run's own (label and controller owner).
    async fn apply(
        &self,
        name: &str,
        key: &str,
        data: BTreeMap<String, String>,
        binary: BTreeMap<String, ByteString>,
    ) -> Result<(), StoreError> {
        let mut labels = BTreeMap::new();
        labels.insert(RUN_LABEL.to_string(), self.run_name.clone());
        labels.insert(
            "app.kubernetes.io/managed-by".to_string(),
            "quarry".to_string(),
        );
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(labels),
                owner_references: Some(vec![self.owner.clone()]),
                ..Default::default()
            },
            data: Some(data),
            binary_data: Some(binary),
            ..Default::default()
        };
        let mut value = serde_json::to_value(&cm).map_err(|e| StoreError::Io {
            key: key.to_string(),
            message: format!("serializing ConfigMap: {e}"),
        })?;
        // SSA needs apiVersion and kind in the body; the typed struct does not carry them.
        value["apiVersion"] = "v1".into();
        value["kind"] = "ConfigMap".into();
        self.api
            .patch(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(value),
            )
            .await
            .map_err(|e| StoreError::Io {
                key: key.to_string(),
                message: format!("applying ConfigMap {name}: {e}"),
            })?;
        Ok(())
    }
}

#[async_trait]
impl ArtifactStore for ConfigMapStore {
    async fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        self.put_if(key, bytes, |name, size| {
            if size > CONFIGMAP_LIMIT {
                Err(StoreError::TooLarge {
                    key: key.to_string(),
                    message: too_large_message(name, size),
                })
            } else {
                Ok(true)
            }
        })
        .await
        .map(|_| ())
    }

    async fn put_many(&self, items: &[(&str, &[u8])]) -> Result<(), StoreError> {
        for group in self.groups(items)? {
            self.put_group_if(&group, |name, size| {
                if size > CONFIGMAP_LIMIT {
                    Err(StoreError::TooLarge {
                        key: group
                            .first()
                            .map(|(k, _)| k.to_string())
                            .unwrap_or_default(),
                        message: too_large_message(name, size),
                    })
                } else {
                    Ok(true)
                }
            })
            .await?;
        }
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let (name, data_key) = self.locate(key)?;
        let Some(cm) = self.read(&name, key).await? else {
            return Ok(None);
        };
        configmap_value(&cm, &data_key, key)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let (name, data_key) = self.locate(key)?;
        let _guard = self.lock.lock().await;
        let Some(cm) = self.read(&name, key).await? else {
            return Ok(());
        };
        let mut data = cm.data.unwrap_or_default();
        let mut binary = cm.binary_data.unwrap_or_default();
        let had_text = data.remove(&data_key).is_some();
        let had_packed = binary.remove(&format!("{data_key}.gz")).is_some();
        if !had_text && !had_packed {
            return Ok(());
        }
        self.apply(&name, key, data, binary).await
    }
}

/// The value of artifact `key` (ConfigMap key `data_key`) in a ConfigMap this store wrote: text
/// from `data`, or gunzipped from `binaryData` under `<data_key>.gz`.
pub fn configmap_value(
    cm: &ConfigMap,
    data_key: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StoreError> {
    if let Some(text) = cm.data.as_ref().and_then(|d| d.get(data_key)) {
        return Ok(Some(text.clone().into_bytes()));
    }
    if let Some(packed) = cm
        .binary_data
        .as_ref()
        .and_then(|d| d.get(&format!("{data_key}.gz")))
    {
        return gunzip(&packed.0, key).map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
