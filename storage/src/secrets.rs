//! The server master key and the purpose-bound keys derived from it.
//!
//! One master key (32 random bytes) is configured per deployment; every secret
//! use (hashing API keys, signing cursors) gets its own key derived with
//! HMAC-SHA256(master, purpose label), so no two purposes share key material.

use std::fmt;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::db::Database;
use crate::{Result, StorageError};

type HmacSha256 = Hmac<Sha256>;

/// Version prefix of sealed secrets.
const SEALED_PREFIX: &str = "v1.";
/// Version prefix of sealed byte strings.
const SEALED_BYTES_PREFIX: &[u8] = b"\x00sealed-v1";

/// Computes HMAC-SHA256 of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// The deployment's root secret. Never logged: `Debug` prints a placeholder.
#[derive(Clone)]
pub struct MasterKey(Vec<u8>);

/// Why a configured master key was refused.
#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    /// The text was neither base64 nor hex.
    #[error("the master key must be base64 or hex")]
    Encoding,
    /// Fewer than 32 bytes.
    #[error("the master key must hold at least 32 bytes, found {0}")]
    TooShort(usize),
    /// The key file could not be read or created.
    #[error("master key file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        source: io::Error,
    },
}

impl MasterKey {
    /// Minimum key length in bytes.
    pub const MIN_LEN: usize = 32;

    /// A fresh random key.
    pub fn generate() -> Self {
        let mut bytes = vec![0u8; Self::MIN_LEN];
        rand::fill(&mut bytes[..]);
        Self(bytes)
    }

    /// Parses a key given as base64 (standard or URL-safe) or hex.
    pub fn from_text(text: &str) -> Result<Self, MasterKeyError> {
        let text = text.trim();
        let bytes = if text.len().is_multiple_of(2) && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).map_err(|_| MasterKeyError::Encoding)?
        } else {
            STANDARD
                .decode(text)
                .or_else(|_| URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')))
                .map_err(|_| MasterKeyError::Encoding)?
        };
        if bytes.len() < Self::MIN_LEN {
            return Err(MasterKeyError::TooShort(bytes.len()));
        }
        Ok(Self(bytes))
    }

    /// Reads the key file at `path`, creating it with a new random key (mode 0600)
    /// when it does not exist yet. Used by the embedded profile, whose data
    /// directory is the deployment.
    pub fn load_or_create(path: &Path) -> Result<Self, MasterKeyError> {
        let file_error = |source| MasterKeyError::File {
            path: path.display().to_string(),
            source,
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Self::from_text(&text),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let key = Self::generate();
                let created = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path);
                match created {
                    Ok(mut file) => {
                        writeln!(file, "{}", key.to_text()).map_err(file_error)?;
                        file.sync_all().map_err(file_error)?;
                        Ok(key)
                    }
                    // Another process created it first: use theirs.
                    Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                        let text = std::fs::read_to_string(path).map_err(file_error)?;
                        Self::from_text(&text)
                    }
                    Err(err) => Err(file_error(err)),
                }
            }
            Err(err) => Err(file_error(err)),
        }
    }

    /// The key as base64, the form `MASTER_KEY` and the key file take.
    pub fn to_text(&self) -> String {
        STANDARD.encode(&self.0)
    }

    fn derive_for(&self, purpose: &str) -> [u8; 32] {
        hmac_sha256(&self.0, purpose.as_bytes())
    }

    /// The purpose-bound keys.
    pub fn derive(&self) -> DerivedKeys {
        DerivedKeys {
            api_key_hash: self.derive_for("listing-api/api-key-hash/v1"),
            cursor_signing: self.derive_for("listing-api/cursor-signing/v1"),
            secret_sealing: self.derive_for("listing-api/secret-sealing/v1"),
            session_token_hash: self.derive_for("listing-api/session-token-hash/v1"),
            csrf_signing: self.derive_for("listing-api/csrf-signing/v1"),
            url_signing: self.derive_for("listing-api/url-signing/v1"),
        }
    }

    fn check_value(&self) -> String {
        hex::encode(self.derive_for("listing-api/master-key-check/v1"))
    }
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey(<redacted>)")
    }
}

/// Keys derived from the master key, one per purpose.
#[derive(Clone)]
pub struct DerivedKeys {
    api_key_hash: [u8; 32],
    cursor_signing: [u8; 32],
    secret_sealing: [u8; 32],
    session_token_hash: [u8; 32],
    csrf_signing: [u8; 32],
    url_signing: [u8; 32],
}

impl DerivedKeys {
    /// The stored form of an API key: hex HMAC-SHA256 of its plaintext.
    pub fn hash_api_key(&self, plaintext: &str) -> String {
        hex::encode(hmac_sha256(&self.api_key_hash, plaintext.as_bytes()))
    }

    /// The stored form of a session cookie's secret: hex HMAC-SHA256 under
    /// its own key, so a session token can never pass as an API key's hash.
    pub fn hash_session_token(&self, token: &str) -> String {
        hex::encode(hmac_sha256(&self.session_token_hash, token.as_bytes()))
    }

    /// The CSRF token of a session: HMAC-SHA256 of the session id, so it is
    /// checked without storage and is useless for any other session.
    pub fn csrf_token(&self, session_id: &str) -> String {
        encode_token(&hmac_sha256(&self.csrf_signing, session_id.as_bytes()))
    }

    /// The signature of a URL the API hands out (a progress stream, a
    /// download): base64url HMAC-SHA256 of `message`, which names the
    /// resource, its tenant and the expiry.
    pub fn url_signature(&self, message: &str) -> String {
        encode_token(&hmac_sha256(&self.url_signing, message.as_bytes()))
    }

    /// Whether `signature` is [`Self::url_signature`] of `message`, compared
    /// in constant time.
    pub fn verify_url_signature(&self, message: &str, signature: &str) -> bool {
        let expected = self.url_signature(message);
        bool::from(subtle::ConstantTimeEq::ct_eq(
            expected.as_bytes(),
            signature.as_bytes(),
        ))
    }

    /// The key that signs pagination cursors.
    pub fn cursor_signing_key(&self) -> &[u8] {
        &self.cursor_signing
    }

    /// Seals a secret we must be able to read back (a webhook signing
    /// secret) with XChaCha20-Poly1305. `context` (the owning row's id) is
    /// authenticated, so a sealed value copied to another row does not open.
    /// The result is `v1.` + base64url(nonce ‖ ciphertext).
    pub fn seal(&self, plaintext: &str, context: &str) -> String {
        let cipher = XChaCha20Poly1305::new(&self.secret_sealing.into());
        let mut nonce = [0u8; 24];
        rand::fill(&mut nonce[..]);
        let payload = Payload {
            msg: plaintext.as_bytes(),
            aad: context.as_bytes(),
        };
        // Encryption fails only for messages beyond the cipher's length limit.
        let sealed = cipher
            .encrypt(&XNonce::from(nonce), payload)
            .unwrap_or_default();
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes))
    }

    /// Seals bytes at rest (a stored response that may carry a secret shown
    /// once): `v1` + nonce ‖ ciphertext, `context` authenticated.
    pub fn seal_bytes(&self, plaintext: &[u8], context: &str) -> Vec<u8> {
        let cipher = XChaCha20Poly1305::new(&self.secret_sealing.into());
        let mut nonce = [0u8; 24];
        rand::fill(&mut nonce[..]);
        let payload = Payload {
            msg: plaintext,
            aad: context.as_bytes(),
        };
        let sealed = cipher
            .encrypt(&XNonce::from(nonce), payload)
            .unwrap_or_default();
        let mut bytes = SEALED_BYTES_PREFIX.to_vec();
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&sealed);
        bytes
    }

    /// Opens what [`Self::seal_bytes`] produced for the same `context`.
    pub fn open_bytes(&self, sealed: &[u8], context: &str) -> Option<Vec<u8>> {
        let rest = sealed.strip_prefix(SEALED_BYTES_PREFIX)?;
        if rest.len() < 24 {
            return None;
        }
        let (nonce, ciphertext) = rest.split_at(24);
        let nonce: [u8; 24] = nonce.try_into().ok()?;
        let cipher = XChaCha20Poly1305::new(&self.secret_sealing.into());
        let payload = Payload {
            msg: ciphertext,
            aad: context.as_bytes(),
        };
        cipher.decrypt(&XNonce::from(nonce), payload).ok()
    }

    /// Opens what [`Self::seal`] produced for the same `context`; `None` when
    /// it was tampered with, sealed for another context or under another key.
    pub fn open(&self, sealed: &str, context: &str) -> Option<String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(sealed.strip_prefix(SEALED_PREFIX)?)
            .ok()?;
        if bytes.len() < 24 {
            return None;
        }
        let (nonce, ciphertext) = bytes.split_at(24);
        let nonce: [u8; 24] = nonce.try_into().ok()?;
        let cipher = XChaCha20Poly1305::new(&self.secret_sealing.into());
        let payload = Payload {
            msg: ciphertext,
            aad: context.as_bytes(),
        };
        let plaintext = cipher.decrypt(&XNonce::from(nonce), payload).ok()?;
        String::from_utf8(plaintext).ok()
    }
}

impl fmt::Debug for DerivedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DerivedKeys(<redacted>)")
    }
}

/// Records the master key's check value on first use and refuses a different key
/// afterwards.
pub(crate) async fn check_master_key(db: &Database, key: &MasterKey) -> Result<()> {
    let expected = key.check_value();
    let stored: String = crate::db::write_on_pool!(db, pool => {
        sqlx::query(
            "insert into server_settings (name, value) values ('master_key_check', $1)
             on conflict (name) do nothing",
        )
        .bind(&expected)
        .execute(&mut *pool)
        .await?;
        sqlx::query_scalar("select value from server_settings where name = 'master_key_check'")
            .fetch_one(&mut *pool)
            .await?
    });
    if stored == expected {
        Ok(())
    } else {
        Err(StorageError::MasterKeyMismatch)
    }
}

/// Whether `bytes` is what [`DerivedKeys::seal_bytes`] produces.
pub fn is_sealed_bytes(bytes: &[u8]) -> bool {
    bytes.starts_with(SEALED_BYTES_PREFIX)
}

/// URL-safe base64 without padding, the encoding of every opaque token we hand out.
pub fn encode_token(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Decodes what `encode_token` produced; `None` for anything else.
pub fn decode_token(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_secrets_open_only_in_their_context_and_under_their_key() {
        let keys = MasterKey::generate().derive();
        let sealed = keys.seal("whsec_example", "whe_1");
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("whsec_example"));
        assert_eq!(
            keys.open(&sealed, "whe_1").as_deref(),
            Some("whsec_example")
        );
        assert_eq!(keys.open(&sealed, "whe_2"), None);
        assert_eq!(MasterKey::generate().derive().open(&sealed, "whe_1"), None);
        assert_ne!(
            keys.seal("whsec_example", "whe_1"),
            sealed,
            "a fresh nonce each time"
        );
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(keys.open(&tampered, "whe_1"), None);
        assert_eq!(keys.open("v1.", "whe_1"), None);
        assert_eq!(keys.open("garbage", "whe_1"), None);
    }

    #[test]
    fn sealed_bytes_round_trip_in_their_context_only() {
        let keys = MasterKey::generate().derive();
        let body = br#"{"secret":"whsec_abc"}"#;
        let sealed = keys.seal_bytes(body, "agc_1/key-1");
        assert!(!sealed.windows(9).any(|w| w == b"whsec_abc"));
        assert_eq!(
            keys.open_bytes(&sealed, "agc_1/key-1").as_deref(),
            Some(&body[..])
        );
        assert_eq!(keys.open_bytes(&sealed, "agc_2/key-1"), None);
        assert_eq!(keys.open_bytes(body, "agc_1/key-1"), None);
    }

    #[test]
    fn accepts_base64_and_hex_of_32_bytes() {
        let key = MasterKey::generate();
        let b64 = STANDARD.encode(&key.0);
        let hexed = hex::encode(&key.0);
        assert_eq!(MasterKey::from_text(&b64).unwrap().0, key.0);
        assert_eq!(MasterKey::from_text(&hexed).unwrap().0, key.0);
    }

    #[test]
    fn refuses_short_or_garbled_keys() {
        assert!(matches!(
            MasterKey::from_text(&hex::encode([1u8; 16])),
            Err(MasterKeyError::TooShort(16))
        ));
        assert!(matches!(
            MasterKey::from_text("not a key!"),
            Err(MasterKeyError::Encoding)
        ));
    }

    #[test]
    fn purposes_get_different_keys() {
        let keys = MasterKey::generate().derive();
        assert_ne!(keys.api_key_hash, keys.cursor_signing);
        assert_eq!(keys.hash_api_key("sk_live_x").len(), 64);
    }

    #[test]
    fn debug_never_shows_key_material() {
        let key = MasterKey::from_text(&hex::encode([0xabu8; 32])).unwrap();
        assert_eq!(format!("{key:?}"), "MasterKey(<redacted>)");
    }

    #[test]
    fn key_file_is_created_once_with_owner_only_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("master.key");
        let first = MasterKey::load_or_create(&path).unwrap();
        let second = MasterKey::load_or_create(&path).unwrap();
        assert_eq!(first.0, second.0);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
