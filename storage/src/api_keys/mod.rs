//! API keys: the two plaintext formats, scopes, issuing, and authentication by
//! keyed-hash lookup. The plaintext exists only in the value returned by
//! `issue`; the table holds its HMAC-SHA256 and a short hint.
//!
//! One file per part: formats (`format`), scopes (`scope`), the stored key
//! (`record`), issuing and rotating (`issue`), lookups (`lookup`), the
//! end of a key (`lifecycle`) and how every process hears of it (`ended`).

mod ended;
mod format;
mod issue;
mod lifecycle;
mod lookup;
mod record;
mod repository;
mod scope;
#[cfg(test)]
mod tests;

pub use ended::{ENDED_KEYS_CHANNEL, KeyEnded};
pub use format::{KeyFormat, MAX_NAME_LEN, Plaintext, key_shape};
pub use record::{
    ApiKey, Credential, IssuedKey, KeyAuditEntry, KeyStatus, KeyUnusable, NewApiKey,
    ROTATION_OVERLAP_SECONDS,
};
pub use repository::ApiKeys;
pub use scope::Scope;
