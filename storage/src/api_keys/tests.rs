//! Key shapes, hints and usability.

use std::collections::BTreeMap;

use super::format::{SK_RANDOM_LEN, generate_plaintext, hint_of};
use super::*;
use crate::ids::{AgencyId, ApiKeyId};
use crate::{Environment, Timestamp};

#[test]
fn generated_keys_have_the_shape_of_their_format() {
    let now = Timestamp::from_micros(1_790_000_000_000_000);
    for format in [KeyFormat::Sk, KeyFormat::Ma] {
        for environment in [Environment::Live, Environment::Sandbox] {
            let key = generate_plaintext(format, environment, now);
            assert_eq!(key_shape(&key), Some((format, environment)), "{key}");
        }
    }
    let sk = generate_plaintext(KeyFormat::Sk, Environment::Live, now);
    assert_eq!(sk.len(), "sk_live_".len() + SK_RANDOM_LEN);
    let ma = generate_plaintext(KeyFormat::Ma, Environment::Sandbox, now);
    assert!(ma.starts_with("ma_test_ak_") && ma.len() == 11 + 26);
}

#[test]
fn malformed_strings_have_no_shape() {
    for bad in [
        "",
        "sk_live_",
        "sk_live_short",
        "sk_prod_abcdefghijklmnopqrstuvwxyz012345",
        "sk_live_abcdefghijklmnopqrstuvwx-yz012345",
        "ma_live_ak_NOTAULID",
        "ma_live_ak_01ARZ3NDEKTSV4RRFFQ69G5FAVX",
        "Bearer sk_live_abcdefghijklmnopqrstuvwxyz012345",
    ] {
        assert_eq!(key_shape(bad), None, "{bad}");
    }
}

#[test]
fn hint_shows_prefix_and_last_four_only() {
    let hint = hint_of(
        "sk_live_abcdefghijklmnopqrstuvwxyz012345",
        KeyFormat::Sk,
        Environment::Live,
    );
    assert_eq!(hint, "sk_live_…2345");
}

#[test]
fn usability_follows_status_and_expiry() {
    let now = Timestamp::from_micros(1_000_000);
    let mut key = ApiKey {
        id: ApiKeyId::generate(),
        agency_id: AgencyId::generate(),
        name: "k".into(),
        hint: "h".into(),
        format: KeyFormat::Sk,
        scopes: vec![Scope::ListingsRead],
        environment: Environment::Live,
        status: KeyStatus::Active,
        created_by: None,
        created_at: now,
        rotation_started_at: None,
        expires_at: None,
        revoked_at: None,
        rate_limit_overrides: BTreeMap::new(),
        last_used_at: None,
    };
    assert_eq!(key.check_usable(now), Ok(()));
    key.status = KeyStatus::Rotating;
    key.expires_at = Some(now.plus_seconds(1));
    assert_eq!(key.check_usable(now), Ok(()));
    assert_eq!(
        key.check_usable(now.plus_seconds(1)),
        Err(KeyUnusable::Expired)
    );
    key.status = KeyStatus::Revoked;
    assert_eq!(key.check_usable(now), Err(KeyUnusable::Revoked));
}
