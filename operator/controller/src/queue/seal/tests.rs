//! Unit tests of `seal`.

use super::*;

const MATERIAL: &[u8] = b"c2VhbGluZy1rZXktbWF0ZXJpYWwtZm9yLXRlc3RzLW9ubHktMTIzNDU2Nzg5MA==\n";

fn keys() -> Vec<(SecretKeyRef, ApiKey)> {
    vec![
        (
            SecretKeyRef {
                name: "openai".into(),
                key: "api-key".into(),
            },
            ApiKey::new("sk-live-123"),
        ),
        (
            SecretKeyRef {
                name: "search".into(),
                key: "brave".into(),
            },
            ApiKey::new("BSA-456"),
        ),
    ]
}

fn key() -> SealingKey {
    SealingKey::from_material(MATERIAL, "test").unwrap()
}

#[test]
fn sealed_keys_open_for_their_task_and_never_show_in_the_envelope() {
    let task = br#"{"v":1,"run":"r1","query":"q"}"#;
    let sealed = key().seal(&keys(), task).unwrap();
    let text = String::from_utf8(sealed.clone()).unwrap();
    assert!(
        !text.contains("sk-live-123") && !text.contains("BSA-456"),
        "{text}"
    );
    assert!(
        !text.contains("openai"),
        "Secret names are sealed too: {text}"
    );
    // Another process loading the same file (with or without its newline) opens it.
    let other = SealingKey::from_material(MATERIAL.trim_ascii(), "other").unwrap();
    assert_eq!(other.open(&sealed, task).unwrap(), keys());
    // Two seals of the same keys differ (fresh nonces).
    assert_ne!(key().seal(&keys(), task).unwrap(), sealed);
}

#[test]
fn a_changed_task_or_ciphertext_does_not_open() {
    let task = br#"{"v":1,"run":"r1","profile":{"baseURL":"https://api.openai.com/v1"}}"#;
    let sealed = key().seal(&keys(), task).unwrap();
    let repointed = br#"{"v":1,"run":"r1","profile":{"baseURL":"https://evil.example/v1"}}"#;
    assert!(matches!(
        key().open(&sealed, repointed),
        Err(SealError::Tampered)
    ));
    // One flipped bit of the ciphertext.
    let mut envelope: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
    let ct = envelope["sealed"].as_str().unwrap().to_string();
    let flipped = format!(
        "{}{}",
        if ct.starts_with('0') { '1' } else { '0' },
        &ct[1..]
    );
    envelope["sealed"] = flipped.into();
    let altered = serde_json::to_vec(&envelope).unwrap();
    assert!(matches!(
        key().open(&altered, task),
        Err(SealError::Tampered)
    ));
    // Another nonce.
    let mut envelope: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
    envelope["nonce"] = hex::encode([7u8; NONCE_LEN]).into();
    let altered = serde_json::to_vec(&envelope).unwrap();
    assert!(matches!(
        key().open(&altered, task),
        Err(SealError::Tampered)
    ));
    // Not an envelope at all.
    assert!(matches!(
        key().open(b"sk-plaintext", task),
        Err(SealError::Malformed(_))
    ));
}

#[test]
fn another_sealing_key_is_named_not_taken_for_tampering() {
    let task = b"task";
    let sealed = key().seal(&keys(), task).unwrap();
    let wrong = SealingKey::from_material(&[b'x'; 40], "wrong").unwrap();
    match wrong.open(&sealed, task) {
        Err(SealError::WrongKey { sealed_with, have }) => {
            assert_eq!(sealed_with, key().id());
            assert_eq!(have, wrong.id());
            assert_ne!(sealed_with, have);
        }
        other => panic!("{other:?}"),
    }
    // A forged fingerprint does not help: the key itself must match.
    let mut envelope: serde_json::Value = serde_json::from_slice(&sealed).unwrap();
    envelope["keyId"] = wrong.id().into();
    let forged = serde_json::to_vec(&envelope).unwrap();
    assert!(matches!(
        wrong.open(&forged, task),
        Err(SealError::Tampered)
    ));
}

#[test]
fn short_key_material_is_refused_with_what_to_make() {
    let e = SealingKey::from_material(b"  short-key\n", "/etc/quarry/sealing/key").unwrap_err();
    assert_eq!(
        e.to_string(),
        "the sealing key in /etc/quarry/sealing/key has 9 bytes; it needs at least 32 random bytes (e.g. `head -c 48 /dev/urandom | base64`)"
    );
    let missing = SealingKey::load(Path::new("/nonexistent/quarry-key")).unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("cannot read the sealing key file /nonexistent/quarry-key:"),
        "{missing}"
    );
}

#[test]
fn the_fingerprint_is_stable_and_not_the_key() {
    let a = key();
    let b = SealingKey::from_material(MATERIAL, "b").unwrap();
    assert_eq!(a.id(), b.id());
    assert_eq!(a.id().len(), 16);
    let aes = hex::encode(derive(b"quarry task keys v1: key", MATERIAL.trim_ascii()));
    assert!(!aes.starts_with(a.id()));
    assert!(!format!("{a:?}").contains(&aes[..16]));
}
