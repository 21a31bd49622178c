//! The two plaintext formats of a key (`sk_live_…`, `ma_live_ak_<ULID>`),
//! telling a presented key's format and environment by its shape, and
//! minting a new plaintext with its displayable hint.

use std::fmt;

use rand::RngExt;
use rand::distr::Alphanumeric;
use ulid::Ulid;

use crate::{Environment, Timestamp};

/// Length of the random part of an `sk_` key (base62, about 190 bits).
pub(super) const SK_RANDOM_LEN: usize = 32;
/// Shortest random part accepted as an `sk_` key.
const SK_RANDOM_MIN: usize = 24;
/// Longest random part accepted as an `sk_` key.
const SK_RANDOM_MAX: usize = 128;
/// Longest key name accepted.
pub const MAX_NAME_LEN: usize = 100;

/// The two plaintext formats of the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyFormat {
    /// `sk_live_…` / `sk_test_…` followed by random base62.
    Sk,
    /// `ma_live_ak_…` / `ma_test_ak_…` followed by a ULID.
    Ma,
}

impl KeyFormat {
    /// `sk` or `ma`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Sk => "sk",
            Self::Ma => "ma",
        }
    }

    /// Parses `sk` or `ma`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "sk" => Some(Self::Sk),
            "ma" => Some(Self::Ma),
            _ => None,
        }
    }

    const fn prefix(self, environment: Environment) -> &'static str {
        match (self, environment) {
            (Self::Sk, Environment::Live) => "sk_live_",
            (Self::Sk, Environment::Sandbox) => "sk_test_",
            (Self::Ma, Environment::Live) => "ma_live_ak_",
            (Self::Ma, Environment::Sandbox) => "ma_test_ak_",
        }
    }
}

/// The format and environment a presented string claims by its shape, or `None`
/// when it cannot be a key of ours at all (the "malformed" case).
pub fn key_shape(text: &str) -> Option<(KeyFormat, Environment)> {
    for format in [KeyFormat::Sk, KeyFormat::Ma] {
        for environment in [Environment::Live, Environment::Sandbox] {
            let Some(rest) = text.strip_prefix(format.prefix(environment)) else {
                continue;
            };
            let well_formed = match format {
                KeyFormat::Sk => {
                    (SK_RANDOM_MIN..=SK_RANDOM_MAX).contains(&rest.len())
                        && rest.bytes().all(|b| b.is_ascii_alphanumeric())
                }
                KeyFormat::Ma => rest.len() == ulid::ULID_LEN && Ulid::from_string(rest).is_ok(),
            };
            return well_formed.then_some((format, environment));
        }
    }
    None
}

/// A key's plaintext. Shown once; `Debug` never prints it.
pub struct Plaintext(pub(super) String);

impl Plaintext {
    /// The plaintext, for the one response that shows it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Plaintext(<redacted>)")
    }
}

pub(super) fn generate_plaintext(
    format: KeyFormat,
    environment: Environment,
    now: Timestamp,
) -> String {
    let prefix = format.prefix(environment);
    match format {
        KeyFormat::Sk => {
            let random: String = rand::rng()
                .sample_iter(Alphanumeric)
                .take(SK_RANDOM_LEN)
                .map(char::from)
                .collect();
            format!("{prefix}{random}")
        }
        KeyFormat::Ma => {
            // The ULID's 80 random bits come from the thread CSPRNG.
            let millis = u64::try_from(now.as_micros() / 1000).unwrap_or(0);
            let ulid = Ulid::from_parts(millis, rand::random::<u128>());
            format!("{prefix}{ulid}")
        }
    }
}

pub(super) fn hint_of(plaintext: &str, format: KeyFormat, environment: Environment) -> String {
    let tail: String = plaintext
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{}…{tail}", format.prefix(environment))
}
