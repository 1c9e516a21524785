//! Checkpoints of the engine state, written atomically so a crash never leaves a torn one.
//!
//! A checkpoint is the state JSON behind a header line holding its SHA-256 and a sequence number.
//! Two slots alternate (`checkpoint-a.json`, `checkpoint-b.json`); the pointer
//! (`checkpoint.json`) names the slot of the latest one and is switched after that slot was
//! written. A checkpoint is durable once its slot is: a slot is one atomic write that verifies
//! itself, so the loader takes the newest slot that verifies, whether or not the pointer was
//! switched to it (the ConfigMap store keeps the slots in two ConfigMaps, and the pointer follows
//! the second slot in a separate request that a crash can prevent: a finished researcher visible
//! in that slot must not be paid for again). A slot that fails its hash (bit rot, a truncated
//! write, a hand edit) falls back to the other one; the pointer's sequence tells that the newest
//! checkpoint was lost, and its slot breaks ties.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tracing::warn;

use crate::research::machine::state::RunState;
use crate::store::{ArtifactStore, StoreError};

use crate::store::keys::{CHECKPOINT_KEY, CHECKPOINT_SLOTS as SLOTS};

/// The pointer's content: which slot holds the latest checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pointer {
    /// Key of the slot.
    pub slot: String,
    /// Sequence number of the checkpoint in that slot (1 for the first).
    pub sequence: u64,
    /// Hex SHA-256 of the slot's state JSON.
    pub sha256: String,
}

/// A checkpoint read back and verified.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub state: RunState,
    /// Its sequence number (0 for a checkpoint written before sequences existed).
    pub sequence: u64,
    /// Whether the latest checkpoint was unusable and the previous one was taken instead.
    pub fell_back: bool,
}

/// Serializes a checkpoint: `<sha256> <sequence>` on the first line, the state JSON after it.
pub fn encode(state: &RunState, sequence: u64) -> Result<(Vec<u8>, String), serde_json::Error> {
    let json = serde_json::to_vec(state)?;
    let digest = hex::encode(Sha256::digest(&json));
    let mut out = Vec::with_capacity(json.len() + 90);
    out.extend_from_slice(digest.as_bytes());
    out.extend_from_slice(format!(" {sequence}\n").as_bytes());
    out.extend_from_slice(&json);
    Ok((out, digest))
}

/// Parses and verifies a checkpoint; returns the state and its sequence number.
pub fn decode(bytes: &[u8]) -> Result<(RunState, u64), String> {
    let split = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or("no digest line")?;
    let (header, json) = (&bytes[..split], &bytes[split + 1..]);
    let header = std::str::from_utf8(header).map_err(|_| "the digest line is not text")?;
    let mut parts = header.split(' ');
    let digest = parts.next().unwrap_or_default();
    let sequence = match parts.next() {
        Some(s) => s.parse::<u64>().map_err(|_| "bad sequence number")?,
        None => 0,
    };
    let actual = hex::encode(Sha256::digest(json));
    if digest != actual {
        return Err("sha256 mismatch: the checkpoint was altered or truncated".to_string());
    }
    let state = serde_json::from_slice(json).map_err(|e| format!("checkpoint JSON: {e}"))?;
    Ok((state, sequence))
}

fn corrupt(key: &str, message: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        key: key.to_string(),
        message: message.into(),
    }
}

async fn read_slot(
    store: &dyn ArtifactStore,
    slot: &str,
) -> Result<Option<(RunState, u64)>, StoreError> {
    match store.get(slot).await? {
        None => Ok(None),
        Some(bytes) => decode(&bytes).map(Some).map_err(|m| corrupt(slot, m)),
    }
}

/// Which of the two slots holds the checkpoint to resume from, given each slot's verified
/// sequence number (`None`: absent or failing its hash) and the slot the pointer names: the
/// highest sequence, the pointer's slot on a tie.
fn newest(sequences: [Option<u64>; 2], pointed: Option<usize>) -> Option<usize> {
    (0..SLOTS.len())
        .filter_map(|i| sequences[i].map(|seq| (i, seq)))
        .max_by_key(|(i, seq)| (*seq, Some(*i) == pointed))
        .map(|(i, _)| i)
}

/// Loads the latest usable checkpoint: the newest slot that verifies (see the module comment),
/// else a checkpoint of the older single-key format. `Ok(None)` when the run has none; an error
/// only when checkpoints exist and none of them verifies.
pub async fn load(store: &dyn ArtifactStore) -> Result<Option<Loaded>, StoreError> {
    let head = store.get(CHECKPOINT_KEY).await?;
    let pointer = match &head {
        None => None,
        Some(bytes) => match serde_json::from_slice::<Pointer>(bytes) {
            Ok(p) => Some(p),
            // The older format kept the whole checkpoint under the pointer's key.
            Err(_) => {
                return decode(bytes)
                    .map(|(state, sequence)| {
                        Some(Loaded {
                            state,
                            sequence,
                            fell_back: false,
                        })
                    })
                    .map_err(|m| corrupt(CHECKPOINT_KEY, m));
            }
        },
    };
    let mut found: [Option<(RunState, u64)>; 2] = [None, None];
    let mut errors = Vec::new();
    for (i, slot) in SLOTS.iter().enumerate() {
        match read_slot(store, slot).await {
            Ok(f) => found[i] = f,
            Err(e) => errors.push(e.to_string()),
        }
    }
    let pointed = pointer
        .as_ref()
        .and_then(|p| SLOTS.iter().position(|s| *s == p.slot));
    let sequences = [0, 1].map(|i| found[i].as_ref().map(|(_, seq)| *seq));
    match newest(sequences, pointed).and_then(|i| found[i].take()) {
        Some((state, sequence)) => {
            // Older than the pointer says: the latest checkpoint is unusable.
            let fell_back = pointer.as_ref().is_some_and(|p| sequence < p.sequence);
            if fell_back {
                warn!(
                    errors = %errors.join("; "),
                    sequence,
                    "the latest checkpoint is unusable; resuming from the previous one"
                );
            }
            Ok(Some(Loaded {
                state,
                sequence,
                fell_back,
            }))
        }
        None if pointer.is_none() && errors.is_empty() => Ok(None),
        None => Err(corrupt(
            CHECKPOINT_KEY,
            if errors.is_empty() {
                "the pointer names a checkpoint that does not exist".to_string()
            } else {
                errors.join("; ")
            },
        )),
    }
}

struct WriterState {
    sequence: u64,
    /// Slot the next checkpoint goes to.
    next: usize,
    /// Digest of the last state written, so an unchanged state is not written again.
    last_digest: Option<String>,
}

/// Writes checkpoints of one run: slot first, then the pointer.
#[derive(Default)]
pub struct Writer {
    inner: Mutex<Option<WriterState>>,
}

impl Writer {
    /// A writer that learns where the run's checkpoints stand on its first write.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where to write next: never over the slot that [`load`] resumes from, and after every
    /// sequence number already used (so the next checkpoint is the newest one).
    async fn init(store: &dyn ArtifactStore) -> Result<WriterState, StoreError> {
        let pointer = store
            .get(CHECKPOINT_KEY)
            .await?
            .and_then(|b| serde_json::from_slice::<Pointer>(&b).ok());
        let mut sequences = [None, None];
        for (i, slot) in SLOTS.iter().enumerate() {
            sequences[i] = store
                .get(slot)
                .await?
                .and_then(|b| decode(&b).ok())
                .map(|(_, seq)| seq);
        }
        let pointed = pointer
            .as_ref()
            .and_then(|p| SLOTS.iter().position(|s| *s == p.slot));
        let sequence = sequences
            .into_iter()
            .flatten()
            .chain(pointer.as_ref().map(|p| p.sequence))
            .max()
            .unwrap_or(0);
        Ok(WriterState {
            sequence,
            // A corrupt or missing slot is the one to overwrite; the usable one is kept.
            next: newest(sequences, pointed).map_or(pointed.unwrap_or(0), |i| 1 - i),
            last_digest: None,
        })
    }

    /// Persists `state` as the next checkpoint; returns whether anything was written.
    pub async fn write(
        &self,
        store: &dyn ArtifactStore,
        state: &RunState,
    ) -> Result<bool, StoreError> {
        self.write_with(store, state, &[]).await
    }

    /// [`Checkpoints::write`], then `extra` artifacts in the same [`ArtifactStore::put_many`]
    /// (a store may write them with the pointer in one request). `extra` is written even when
    /// the state did not change.
    pub async fn write_with(
        &self,
        store: &dyn ArtifactStore,
        state: &RunState,
        extra: &[(&str, &[u8])],
    ) -> Result<bool, StoreError> {
        let mut guard = self.inner.lock().await;
        if guard.is_none() {
            *guard = Some(Self::init(store).await?);
        }
        let Some(w) = guard.as_mut() else {
            return Ok(false);
        };
        let sequence = w.sequence + 1;
        let (bytes, digest) = encode(state, sequence).map_err(|e| StoreError::Io {
            key: CHECKPOINT_KEY.to_string(),
            message: format!("serializing the state: {e}"),
        })?;
        if w.last_digest.as_deref() == Some(digest.as_str()) {
            if !extra.is_empty() {
                store.put_many(extra).await?;
            }
            return Ok(false);
        }
        let slot = w.next;
        let pointer = Pointer {
            slot: SLOTS[slot].to_string(),
            sequence,
            sha256: digest.clone(),
        };
        let pointer = serde_json::to_vec(&pointer).map_err(|e| StoreError::Io {
            key: CHECKPOINT_KEY.to_string(),
            message: e.to_string(),
        })?;
        // In order: the slot (from then on the checkpoint is durable, see `load`), then the
        // pointer that names it, then the rest. A store that writes the slot and the pointer in
        // one request switches both at once.
        let mut items: Vec<(&str, &[u8])> = vec![(SLOTS[slot], &bytes), (CHECKPOINT_KEY, &pointer)];
        items.extend_from_slice(extra);
        store.put_many(&items).await?;
        w.sequence = sequence;
        w.next = 1 - slot;
        w.last_digest = Some(digest);
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
