//! A login email's shape, and the lengths of a person's names.

/// Longest email accepted (RFC 5321 path limit).
pub const MAX_EMAIL_LEN: usize = 254;
/// Longest display name accepted.
pub const MAX_NAME_LEN: usize = 200;

/// Checks the shape of an email address and returns it lower-cased. Deliberately
/// simple: one `@`, a non-empty local part, a dotted domain, no whitespace.
pub fn normalise_email(email: &str) -> Option<String> {
    let email = email.trim();
    if email.len() > MAX_EMAIL_LEN || email.chars().any(char::is_whitespace) {
        return None;
    }
    let (local, domain) = email.split_once('@')?;
    let domain_ok = !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.');
    (!local.is_empty() && domain_ok).then(|| email.to_lowercase())
}
