//! Unit tests of `checkpoint`.

use super::*;
use crate::research::machine::state::{Mode, Phase, RunInput};
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
async fn a_crash_between_slot_and_pointer_keeps_the_newer_complete_slot() {
    let store = MemoryStore::new();
    let w = Writer::new();
    w.write(&store, &state(1)).await.unwrap();
    // The next slot was written, the pointer never switched (the ConfigMap store writes
    // slot B and the pointer in two requests): that slot is complete and verifies.
    let (bytes, _) = encode(&state(2), 2).unwrap();
    store.put(SLOTS[1], &bytes).await.unwrap();
    let loaded = load(&store).await.unwrap().unwrap();
    assert_eq!(
        (loaded.state.round, loaded.sequence, loaded.fell_back),
        (2, 2, false)
    );
    // A writer resuming from it writes over the older slot, with a newer sequence.
    let w = Writer::new();
    w.write(&store, &state(3)).await.unwrap();
    assert_eq!(
        decode(&store.get(SLOTS[1]).await.unwrap().unwrap()).unwrap(),
        (state(2), 2)
    );
    let loaded = load(&store).await.unwrap().unwrap();
    assert_eq!((loaded.state.round, loaded.sequence), (3, 3));
    let p: Pointer =
        serde_json::from_slice(&store.get(CHECKPOINT_KEY).await.unwrap().unwrap()).unwrap();
    assert_eq!((p.slot.as_str(), p.sequence), (SLOTS[0], 3));
}

#[test]
fn the_newest_verified_slot_wins_and_the_pointer_breaks_ties() {
    assert_eq!(newest([Some(1), Some(2)], Some(0)), Some(1));
    assert_eq!(newest([Some(3), Some(2)], Some(1)), Some(0));
    assert_eq!(newest([None, Some(2)], Some(0)), Some(1));
    assert_eq!(newest([Some(0), Some(0)], Some(1)), Some(1));
    assert_eq!(newest([None, None], Some(0)), None);
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
