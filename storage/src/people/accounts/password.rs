//! Passwords: argon2 hashing off the async threads (the rule for a new one
//! is `crate::rules::passwords`).

use argon2::{Argon2, PasswordHasher};

use crate::{Result, StorageError};

/// The argon2 PHC string of `password`, computed off the async threads.
pub(super) async fn hash_password(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || {
        Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| hash.to_string())
    })
    .await
    .map_err(|err| StorageError::Corrupt(format!("password hashing: {err}")))?
    .map_err(|err| StorageError::Corrupt(format!("password hashing: {err}")))
}
