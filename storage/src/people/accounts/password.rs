//! Passwords: the specification's rule for a new one, and argon2 hashing
//! off the async threads.

use argon2::{Argon2, PasswordHasher};

use crate::{Result, StorageError};

/// The longest new password, in characters (what the OpenAPI document has
/// always said; argon2 of megabytes would be a cheap denial of service).
pub const MAX_PASSWORD_CHARS: usize = 128;

/// Why a password is refused, if it is: at least 8 characters with an upper
/// case letter, a lower case letter, a digit and a special character, and at
/// most [`MAX_PASSWORD_CHARS`].
pub fn password_problem(password: &str) -> Option<&'static str> {
    if password.chars().count() < 8 {
        Some("must be at least 8 characters")
    } else if !password.chars().any(char::is_uppercase) {
        Some("must contain an upper case letter")
    } else if !password.chars().any(char::is_lowercase) {
        Some("must contain a lower case letter")
    } else if !password.chars().any(|c| c.is_ascii_digit()) {
        Some("must contain a digit")
    } else if !password
        .chars()
        .any(|c| !c.is_alphanumeric() && !c.is_whitespace())
    {
        Some("must contain a special character")
    } else if password.chars().count() > MAX_PASSWORD_CHARS {
        Some("must be at most 128 characters")
    } else {
        None
    }
}

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
