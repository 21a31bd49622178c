//! Numbers people read aloud and type back: listing numbers, invoice numbers
//! and the sandbox fixtures' slugs, all drawn from one unambiguous alphabet.

use crate::Environment;

/// The alphabet of every human-facing number: no 0/O, 1/I/L.
pub const NUMBER_ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";
/// Characters in a listing number's random part.
const LISTING_NUMBER_LEN: usize = 7;
/// Characters after `INV-` in an invoice number.
const INVOICE_NUMBER_LEN: usize = 10;
/// Prefix of listings in the sandbox pool.
pub const SANDBOX_PREFIX: &str = "snd_";

/// `len` random characters of [`NUMBER_ALPHABET`].
fn random_slug(len: usize) -> String {
    (0..len)
        .map(|_| char::from(NUMBER_ALPHABET[rand::random_range(0..NUMBER_ALPHABET.len())]))
        .collect()
}

/// A new random listing number for `environment`.
pub fn generate_listing_number(environment: Environment) -> String {
    let slug = random_slug(LISTING_NUMBER_LEN);
    match environment {
        Environment::Live => slug,
        Environment::Sandbox => format!("{SANDBOX_PREFIX}{slug}"),
    }
}

/// A listing number as clients may type it, in the stored case: prefixes
/// lower case, the random part upper case.
pub fn normalise_listing_number(text: &str) -> String {
    match text.rsplit_once('_') {
        Some((prefix, slug)) => format!(
            "{}_{}",
            prefix.to_ascii_lowercase(),
            slug.to_ascii_uppercase()
        ),
        None => text.to_ascii_uppercase(),
    }
}

/// A new invoice number: `INV-` and ten unambiguous characters.
pub fn invoice_number() -> String {
    format!("INV-{}", random_slug(INVOICE_NUMBER_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_use_the_unambiguous_alphabet() {
        let in_alphabet = |text: &str| text.bytes().all(|b| NUMBER_ALPHABET.contains(&b));
        let live = generate_listing_number(Environment::Live);
        assert_eq!(live.len(), LISTING_NUMBER_LEN);
        assert!(in_alphabet(&live));
        let sandbox = generate_listing_number(Environment::Sandbox);
        assert!(in_alphabet(sandbox.trim_start_matches(SANDBOX_PREFIX)));
        let invoice = invoice_number();
        assert!(in_alphabet(invoice.trim_start_matches("INV-")), "{invoice}");
    }

    #[test]
    fn typed_numbers_are_normalised_to_the_stored_case() {
        assert_eq!(normalise_listing_number("k7m3qx9"), "K7M3QX9");
        assert_eq!(
            normalise_listing_number("SND_Active_ab23"),
            "snd_active_AB23"
        );
    }
}
