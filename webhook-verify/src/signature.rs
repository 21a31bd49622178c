//! The signature scheme: `sha256=` + lowercase hex HMAC-SHA256(secret, `"<timestamp>.<raw body>"`).

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::VerifyError;

const SCHEME_PREFIX: &str = "sha256=";
const DIGEST_LEN: usize = 32;

/// The signature header value for a delivery: `sha256=<64 lowercase hex digits>`.
///
/// The key is the secret string's UTF-8 bytes as given (`whsec_…` is not decoded), and
/// the message is the decimal `timestamp`, a dot, then the raw body. Receivers can use
/// it to build signed deliveries in their own tests.
///
/// ```
/// let header = webhook_verify::sign("whsec_dGVzdC1zZWNyZXQ", 1_700_000_000, br#"{"event_id":"x"}"#);
/// assert_eq!(header, "sha256=8bf6c1018eb9eaa666e231a0fe2fa61db99cb44b7235333b74e41bdf408ba658");
/// ```
pub fn sign(secret: &str, timestamp: i64, raw_body: &[u8]) -> String {
    let digest = SigningKey::new(secret).digest(&timestamp.to_string(), raw_body);
    format!("{SCHEME_PREFIX}{}", hex::encode(digest))
}

/// One secret, keyed once so that each verification only hashes the message.
#[derive(Clone)]
pub(crate) struct SigningKey(Hmac<Sha256>);

impl SigningKey {
    pub(crate) fn new(secret: &str) -> Self {
        // HMAC hashes long keys and pads short ones, so no length is invalid.
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
            .expect("HMAC-SHA256 accepts keys of any length");
        Self(mac)
    }

    /// `timestamp` is the header text exactly as signed, not a re-formatted number.
    fn digest(&self, timestamp: &str, raw_body: &[u8]) -> [u8; DIGEST_LEN] {
        let mac = self
            .0
            .clone()
            .chain_update(timestamp.as_bytes())
            .chain_update(b".")
            .chain_update(raw_body);
        mac.finalize().into_bytes().into()
    }

    /// Constant-time comparison, so response timing reveals nothing about the expected tag.
    pub(crate) fn matches(&self, timestamp: &str, raw_body: &[u8], tag: &[u8; DIGEST_LEN]) -> bool {
        self.digest(timestamp, raw_body).ct_eq(tag).into()
    }
}

/// Most signatures one header carries (the sender sends two at most: the
/// current secret's and, while a rotation's overlap runs, the replaced one's).
const MAX_SIGNATURES: usize = 4;

/// Parses a signature header: one `sha256=<64 lowercase hex>`, or several
/// separated by commas (`sha256=<new>, sha256=<old>` during a secret
/// rotation's overlap), each strictly.
pub(crate) fn parse_signatures(value: &str) -> Result<Vec<[u8; DIGEST_LEN]>, VerifyError> {
    let parts: Vec<&str> = value
        .split(',')
        .map(|part| part.trim_matches(' '))
        .collect();
    if parts.len() > MAX_SIGNATURES {
        return Err(VerifyError::MalformedSignature);
    }
    parts.into_iter().map(parse_signature).collect()
}

/// Parses `sha256=<64 lowercase hex>` strictly: the sender never produces anything else.
pub(crate) fn parse_signature(value: &str) -> Result<[u8; DIGEST_LEN], VerifyError> {
    let hex_digits = value
        .strip_prefix(SCHEME_PREFIX)
        .ok_or(VerifyError::MalformedSignature)?;
    let lowercase_hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    if hex_digits.len() != 2 * DIGEST_LEN || !hex_digits.as_bytes().iter().all(lowercase_hex) {
        return Err(VerifyError::MalformedSignature);
    }
    let mut tag = [0u8; DIGEST_LEN];
    hex::decode_to_slice(hex_digits, &mut tag).map_err(|_| VerifyError::MalformedSignature)?;
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known answer computed independently with Python's hmac and Node's crypto.
    const SECRET: &str = "whsec_dGVzdC1zZWNyZXQ";
    const EXPECTED: &str =
        "sha256=8bf6c1018eb9eaa666e231a0fe2fa61db99cb44b7235333b74e41bdf408ba658";

    #[test]
    fn sign_matches_an_independent_implementation() {
        assert_eq!(
            sign(SECRET, 1_700_000_000, br#"{"event_id":"x"}"#),
            EXPECTED
        );
    }

    #[test]
    fn the_secret_is_used_as_text_not_decoded() {
        // "dGVzdC1zZWNyZXQ" is base64url for "test-secret"; decoding it would change the key.
        assert_ne!(
            sign("test-secret", 1_700_000_000, br#"{"event_id":"x"}"#),
            EXPECTED
        );
    }

    #[test]
    fn parse_accepts_what_sign_produces() {
        let tag = parse_signature(EXPECTED).expect("well-formed");
        let key = SigningKey::new(SECRET);
        assert!(key.matches("1700000000", br#"{"event_id":"x"}"#, &tag));
        assert!(!key.matches("1700000001", br#"{"event_id":"x"}"#, &tag));
    }

    #[test]
    fn parse_rejects_anything_else() {
        let hex = &EXPECTED[7..];
        for bad in [
            hex.to_string(),                             // no scheme
            format!("sha1={hex}"),                       // other scheme
            format!("SHA256={hex}"),                     // scheme case
            format!("sha256={}", hex.to_uppercase()),    // uppercase hex
            format!("sha256={}", &hex[..62]),            // short
            format!("sha256={hex}00"),                   // long
            format!("sha256={}zz", &hex[..62]),          // not hex
            format!("sha256= {hex}"),                    // inner space
            format!("sha256={hex},"),                    // an empty second
            format!("sha256={hex}, sha1={hex}"),         // a bad second
            vec![format!("sha256={hex}"); 5].join(", "), // too many
            "sha256=".to_string(),
            String::new(),
        ] {
            assert_eq!(
                parse_signatures(&bad),
                Err(VerifyError::MalformedSignature),
                "{bad:?}"
            );
        }
        for several in [
            format!("sha256={hex}, sha256={hex}"),
            format!("sha256={hex},sha256={hex}"),
        ] {
            assert_eq!(
                parse_signatures(&several).map(|tags| tags.len()),
                Ok(2),
                "{several:?}"
            );
        }
    }
}
