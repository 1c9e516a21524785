//! Unit tests of `local`.

use super::*;

#[tokio::test]
async fn put_get_roundtrip_and_missing_key() {
    let dir = std::env::temp_dir().join(format!("quarry-local-store-{}", std::process::id()));
    let store = LocalStore::new(&dir);
    assert_eq!(store.get("a.json").await.unwrap(), None);
    store.put("a.json", b"one").await.unwrap();
    store.put("a.json", b"two").await.unwrap();
    assert_eq!(store.get("a.json").await.unwrap(), Some(b"two".to_vec()));
    assert!(store.put("../x", b"no").await.is_err());
    store.delete("a.json").await.unwrap();
    assert_eq!(store.get("a.json").await.unwrap(), None);
    // Deleting what is not there is not an error.
    store.delete("a.json").await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}
