//! Checkpoints of the engine state, written atomically so a crash never leaves a torn one.
//!
//! A checkpoint is the state JSON behind a header line holding its SHA-256 and a sequence number.
//! Two slots alternate (`checkpoint-a.json`, `checkpoint-b.json`); the pointer
//! (`checkpoint.json`) names the slot of the latest one and is switched only after that slot was
//! written. A crash between the two writes leaves the pointer on the previous, complete slot; a
//! slot that fails its hash (bit rot, a truncated write, a hand edit) falls back to the other one.
//! Stores without atomic multi-key writes (every one of them) get the same guarantee this way.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tracing::warn;

use super::state::RunState;
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

/// Loads the latest usable checkpoint: the pointer's slot, else the other slot (the previous
/// checkpoint), else a checkpoint of the older single-key format. `Ok(None)` when the run has
/// none; an error only when checkpoints exist and none of them verifies.
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
    // The pointer's slot first; a missing or unreadable pointer tries both, newest first.
    let mut order: Vec<&str> = SLOTS.to_vec();
    if let Some(p) = &pointer
        && let Some(i) = SLOTS.iter().position(|s| *s == p.slot)
    {
        order = vec![SLOTS[i], SLOTS[1 - i]];
    }
    let mut found: Vec<(RunState, u64, usize)> = Vec::new();
    let mut errors = Vec::new();
    for (rank, slot) in order.iter().enumerate() {
        match read_slot(store, slot).await {
            Ok(Some((state, sequence))) => found.push((state, sequence, rank)),
            Ok(None) => {}
            Err(e) => errors.push(e.to_string()),
        }
    }
    let chosen = match &pointer {
        // The pointer's slot when it verified, else the other (previous) one.
        Some(p) => {
            let by_rank = found
                .iter()
                .position(|(_, seq, rank)| *rank == 0 && *seq == p.sequence);
            match by_rank {
                Some(i) => Some((found.swap_remove(i), false)),
                None => found
                    .into_iter()
                    .max_by_key(|(_, seq, _)| *seq)
                    .map(|f| (f, true)),
            }
        }
        None => found
            .into_iter()
            .max_by_key(|(_, seq, _)| *seq)
            .map(|f| (f, false)),
    };
    match chosen {
        Some(((state, sequence, _), fell_back)) => {
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

    /// Where to write next: never over the slot of the latest usable checkpoint.
    async fn init(store: &dyn ArtifactStore) -> Result<WriterState, StoreError> {
        let pointer = store
            .get(CHECKPOINT_KEY)
            .await?
            .and_then(|b| serde_json::from_slice::<Pointer>(&b).ok());
        let Some(p) = pointer else {
            return Ok(WriterState {
                sequence: 0,
                next: 0,
                last_digest: None,
            });
        };
        let named = SLOTS.iter().position(|s| *s == p.slot).unwrap_or(0);
        let usable = matches!(
            store.get(SLOTS[named]).await?.map(|b| decode(&b)),
            Some(Ok((_, seq))) if seq == p.sequence
        );
        Ok(WriterState {
            sequence: p.sequence,
            // A corrupt latest slot is the one to overwrite; the previous one is kept.
            next: if usable { 1 - named } else { named },
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
        // In order: the slot, then the pointer that names it (a crash between them leaves the
        // pointer on the previous complete checkpoint), then the rest. A store that writes the
        // slot and the pointer in one request makes the switch atomic.
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
mod tests {
    use super::*;
    use crate::research::state::{Mode, Phase, RunInput};
    use crate::store::memory::MemoryStore;

    fn state(round: u32) -> RunState {
        let mut s = RunState::new(RunInput::new("what changed in http/3?", Mode::Deep));
        s.phase = Phase::Researching;
        s.round = round;
        s
    }

    #[tokio::test]
    async fn slots_alternate_and_the_pointer_follows() {
        let store = MemoryStore::new();
        let w = Writer::new();
        assert!(w.write(&store, &state(1)).await.unwrap());
        assert!(w.write(&store, &state(2)).await.unwrap());
        assert!(
            !w.write(&store, &state(2)).await.unwrap(),
            "unchanged: not rewritten"
        );
        assert!(w.write(&store, &state(3)).await.unwrap());
        let p: Pointer =
            serde_json::from_slice(&store.get(CHECKPOINT_KEY).await.unwrap().unwrap()).unwrap();
        assert_eq!((p.slot.as_str(), p.sequence), (SLOTS[0], 3));
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!(
            (loaded.state.round, loaded.sequence, loaded.fell_back),
            (3, 3, false)
        );
        // The other slot still holds the previous checkpoint.
        let (prev, seq) = decode(&store.get(SLOTS[1]).await.unwrap().unwrap()).unwrap();
        assert_eq!((prev.round, seq), (2, 2));
    }

    #[tokio::test]
    async fn a_corrupt_latest_checkpoint_falls_back_to_the_previous_one() {
        let store = MemoryStore::new();
        let w = Writer::new();
        w.write(&store, &state(1)).await.unwrap();
        w.write(&store, &state(2)).await.unwrap();
        let mut bytes = store.get(SLOTS[1]).await.unwrap().unwrap();
        let last = bytes.len() - 3;
        bytes[last] ^= 0x20;
        store.put(SLOTS[1], &bytes).await.unwrap();
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!(
            (loaded.state.round, loaded.sequence, loaded.fell_back),
            (1, 1, true)
        );
        // A writer resuming after the fallback overwrites the corrupt slot, never the good one.
        let w = Writer::new();
        w.write(&store, &state(5)).await.unwrap();
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!(
            (loaded.state.round, loaded.sequence, loaded.fell_back),
            (5, 3, false)
        );
        assert_eq!(
            decode(&store.get(SLOTS[0]).await.unwrap().unwrap())
                .unwrap()
                .0
                .round,
            1
        );
    }

    #[tokio::test]
    async fn a_crash_between_slot_and_pointer_keeps_the_previous_checkpoint() {
        let store = MemoryStore::new();
        let w = Writer::new();
        w.write(&store, &state(1)).await.unwrap();
        // The next slot was written, the pointer never switched.
        let (bytes, _) = encode(&state(2), 2).unwrap();
        store.put(SLOTS[1], &bytes).await.unwrap();
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!((loaded.state.round, loaded.fell_back), (1, false));
    }

    #[tokio::test]
    async fn both_slots_corrupt_is_an_error_and_no_checkpoint_is_none() {
        let store = MemoryStore::new();
        assert_eq!(load(&store).await.unwrap(), None);
        let w = Writer::new();
        w.write(&store, &state(1)).await.unwrap();
        w.write(&store, &state(2)).await.unwrap();
        for slot in SLOTS {
            store.put(slot, b"garbage\n{}").await.unwrap();
        }
        let err = load(&store).await.unwrap_err();
        assert!(err.to_string().contains("sha256 mismatch"), "{err}");
    }

    #[tokio::test]
    async fn without_a_pointer_the_newest_verified_slot_wins_and_a_garbled_one_is_an_error() {
        let store = MemoryStore::new();
        for (slot, round) in [(SLOTS[0], 3u32), (SLOTS[1], 2)] {
            let (bytes, _) = encode(&state(round), u64::from(round)).unwrap();
            store.put(slot, &bytes).await.unwrap();
        }
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!((loaded.state.round, loaded.sequence), (3, 3));
        // Neither a pointer nor a checkpoint: an error, never a silent restart from zero.
        store.put(CHECKPOINT_KEY, b"{\"slot\":").await.unwrap();
        assert!(load(&store).await.is_err());
    }

    #[tokio::test]
    async fn checkpoints_of_the_older_single_key_format_still_load() {
        let store = MemoryStore::new();
        let (bytes, _) = encode(&state(4), 0).unwrap();
        // The older header had no sequence number.
        let text = String::from_utf8(bytes).unwrap().replacen(" 0\n", "\n", 1);
        store.put(CHECKPOINT_KEY, text.as_bytes()).await.unwrap();
        let loaded = load(&store).await.unwrap().unwrap();
        assert_eq!((loaded.state.round, loaded.sequence), (4, 0));
    }
}
