//! The API keys the operator hands to workers with a task, sealed (AES-256-GCM) so that Redis
//! never holds them in plaintext.
//!
//! Why: worker Pods hold no Kubernetes API token, so they cannot read a run's Secrets
//! themselves. The operator, which resolved and checked them (the `quarry.dev/credential` opt-in
//! and `quarry.dev/credential-hosts`), seals the keys a task needs under a symmetric key that
//! only the operator and the workers have: a file mounted from a Secret the chart makes (a volume
//! mount, not an API token). Whoever reads Redis sees ciphertext.
//!
//! The sealed keys travel in the stream entry's field `k`, beside the task message `m`, and `m`'s
//! exact bytes are the associated data: a task changed in Redis (a profile repointed at another
//! host, another query, another run) no longer opens, so keys only go where the operator checked
//! they may. Each seal has a fresh random 96-bit nonce (far below GCM's 2^32 messages per key).
//! The envelope names the sealing key by a fingerprint, so a worker with another key says so
//! instead of reporting tampering.

use std::path::Path;

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::engine_builder::ApiKey;
use quarry_api::SecretKeyRef;

/// Environment variable (and the `--sealing-key-file` flag) naming the sealing key file.
pub const SEALING_KEY_ENV: &str = "QUARRY_SEALING_KEY_FILE";
/// Bytes of key material a sealing key file holds at least (whitespace around it ignored).
pub const MIN_KEY_MATERIAL: usize = 32;
/// Version of the sealed envelope.
const ENVELOPE_VERSION: u32 = 1;
/// Largest sealed envelope a worker reads (a profile names a handful of keys).
pub const MAX_SEALED_BYTES: usize = 64 << 10;

/// Errors loading a sealing key, sealing or opening.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    /// The key file could not be read.
    #[error("cannot read the sealing key file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The key file holds too little material to be a key.
    #[error(
        "the sealing key in {source_name} has {len} bytes; it needs at least {MIN_KEY_MATERIAL} random bytes (e.g. `head -c 48 /dev/urandom | base64`)"
    )]
    TooShort { source_name: String, len: usize },
    /// The envelope is not one this version reads.
    #[error("the sealed keys are unreadable: {0}")]
    Malformed(String),
    /// Sealed under another sealing key.
    #[error("the keys were sealed with sealing key {sealed_with}, and this key is {have}")]
    WrongKey { sealed_with: String, have: String },
    /// Right key, but the envelope or its task was changed after sealing.
    #[error(
        "the sealed keys do not match their task: the task or its keys were changed after the operator sealed them"
    )]
    Tampered,
    /// The cryptographic library refused (no randomness).
    #[error("sealing failed: {0}")]
    Crypto(&'static str),
}

/// The symmetric key shared by the operator and the workers.
pub struct SealingKey {
    key: LessSafeKey,
    id: String,
    source: String,
}

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealingKey")
            .field("id", &self.id)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// One key as it travels inside the sealed envelope.
#[derive(Serialize, Deserialize)]
struct WireKey {
    secret: SecretKeyRef,
    value: String,
}

/// What the field `k` of a task entry holds.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    v: u32,
    /// Fingerprint of the sealing key (not the key: a separate hash of the material).
    key_id: String,
    nonce: String,
    /// Ciphertext and tag, hex.
    sealed: String,
}

/// SHA-256 of `label` and the material: the AES key and the fingerprint come from the same
/// material under different labels, so the fingerprint says nothing about the key.
fn derive(label: &[u8], material: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update([0u8]);
    h.update(material);
    h.finalize().into()
}

impl SealingKey {
    /// The key from the material of a key file (`source_name` says where it came from, for
    /// messages). Surrounding whitespace is ignored: a trailing newline does not change the key.
    pub fn from_material(material: &[u8], source_name: &str) -> Result<Self, SealError> {
        let material = material.trim_ascii();
        if material.len() < MIN_KEY_MATERIAL {
            return Err(SealError::TooShort {
                source_name: source_name.to_string(),
                len: material.len(),
            });
        }
        // The material is random bytes (the chart's Secret, or a file an admin made), so one
        // hash is a sound key derivation; the labels keep the key and its fingerprint apart.
        let bytes = derive(b"quarry task keys v1: key", material);
        let key = UnboundKey::new(&AES_256_GCM, &bytes)
            .map_err(|_| SealError::Crypto("AES-256-GCM key"))?;
        let id = hex::encode(&derive(b"quarry task keys v1: fingerprint", material)[..8]);
        Ok(Self {
            key: LessSafeKey::new(key),
            id,
            source: source_name.to_string(),
        })
    }

    /// Reads the key file at `path`.
    pub fn load(path: &Path) -> Result<Self, SealError> {
        let material = std::fs::read(path).map_err(|source| SealError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_material(&material, &path.display().to_string())
    }

    /// The key's fingerprint (16 hex digits), safe to log and show.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Where the key came from (its file).
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Seals `keys` for the task whose message bytes are `task`.
    pub fn seal(&self, keys: &[(SecretKeyRef, ApiKey)], task: &[u8]) -> Result<Vec<u8>, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).map_err(|_| SealError::Crypto("no random nonce"))?;
        self.seal_with_nonce(keys, task, nonce)
    }

    fn seal_with_nonce(
        &self,
        keys: &[(SecretKeyRef, ApiKey)],
        task: &[u8],
        nonce: [u8; NONCE_LEN],
    ) -> Result<Vec<u8>, SealError> {
        let wire: Vec<WireKey> = keys
            .iter()
            .map(|(secret, key)| WireKey {
                secret: secret.clone(),
                value: key.expose().to_string(),
            })
            .collect();
        let mut in_out =
            serde_json::to_vec(&wire).map_err(|e| SealError::Malformed(e.to_string()))?;
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(task),
                &mut in_out,
            )
            .map_err(|_| SealError::Crypto("AES-256-GCM seal"))?;
        let envelope = Envelope {
            v: ENVELOPE_VERSION,
            key_id: self.id.clone(),
            nonce: hex::encode(nonce),
            sealed: hex::encode(&in_out),
        };
        serde_json::to_vec(&envelope).map_err(|e| SealError::Malformed(e.to_string()))
    }

    /// Opens what [`SealingKey::seal`] sealed for the task whose message bytes are `task`.
    pub fn open(
        &self,
        sealed: &[u8],
        task: &[u8],
    ) -> Result<Vec<(SecretKeyRef, ApiKey)>, SealError> {
        if sealed.len() > MAX_SEALED_BYTES {
            return Err(SealError::Malformed(format!(
                "{} bytes, over the limit of {MAX_SEALED_BYTES}",
                sealed.len()
            )));
        }
        let envelope: Envelope =
            serde_json::from_slice(sealed).map_err(|e| SealError::Malformed(e.to_string()))?;
        if envelope.v != ENVELOPE_VERSION {
            return Err(SealError::Malformed(format!(
                "envelope version {} (this version reads {ENVELOPE_VERSION})",
                envelope.v
            )));
        }
        if envelope.key_id != self.id {
            return Err(SealError::WrongKey {
                sealed_with: envelope.key_id,
                have: self.id.clone(),
            });
        }
        let nonce: [u8; NONCE_LEN] = hex::decode(&envelope.nonce)
            .ok()
            .and_then(|n| n.try_into().ok())
            .ok_or_else(|| SealError::Malformed("nonce".into()))?;
        let mut in_out =
            hex::decode(&envelope.sealed).map_err(|e| SealError::Malformed(e.to_string()))?;
        let plain = self
            .key
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(task),
                &mut in_out,
            )
            .map_err(|_| SealError::Tampered)?;
        let wire: Vec<WireKey> =
            serde_json::from_slice(plain).map_err(|e| SealError::Malformed(e.to_string()))?;
        Ok(wire
            .into_iter()
            .map(|w| (w.secret, ApiKey::new(w.value)))
            .collect())
    }
}

#[cfg(test)]
mod tests;
