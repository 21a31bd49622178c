//! The specification's rule for a new password.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_need_length_and_four_kinds_of_character() {
        assert_eq!(
            password_problem("Sh0rt!"),
            Some("must be at least 8 characters")
        );
        assert_eq!(
            password_problem("lowercase1!"),
            Some("must contain an upper case letter")
        );
        assert_eq!(
            password_problem("UPPERCASE1!"),
            Some("must contain a lower case letter")
        );
        assert_eq!(password_problem("NoDigits!!"), Some("must contain a digit"));
        assert_eq!(
            password_problem("NoSpecial12"),
            Some("must contain a special character")
        );
        assert_eq!(password_problem("Corr3ct-Horse"), None);
        let longest = format!("Aa1!{}", "é".repeat(MAX_PASSWORD_CHARS - 4));
        assert_eq!(password_problem(&longest), None, "characters, not bytes");
        assert_eq!(
            password_problem(&format!("{longest}y")),
            Some("must be at most 128 characters")
        );
    }
}
