//! The ops listener's sign-in throttle. Failed sign-ins are counted per
//! client address (an IPv6 client by its /64, which one host usually holds
//! whole) and per basic-auth user name, in the shared limiter (Redis when
//! configured), a few allowed in a burst and one more every
//! `60 / FAILED_SIGN_INS_PER_MINUTE` seconds after.
//!
//! - **A guess is paid for before it is checked.** A request from an address
//!   that has not signed in as this user lately reserves one failure from
//!   each bucket first, atomically, and gets it back when its credentials
//!   prove right. So any number of concurrent guesses cannot share one free
//!   slot, and a throttled guesser is refused (429 with `Retry-After`)
//!   before the credentials are looked at, learning nothing from a right
//!   guess either.
//! - **The operator is never locked out by someone else.** An address that
//!   signed in as a user within [`KNOWN_FOR_SECONDS`] is known: its requests
//!   are checked first and spend only when they fail, and the user's bucket
//!   does not apply to them, so guessing the operator's password from
//!   elsewhere, however widely, does not keep the operator out. A platform
//!   administrator's API key is never throttled by a user name either.
//!   Known addresses are remembered by each process for itself.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::rate_limit::{Bucket, RateLimiter};

/// Failed sign-ins a client address, and separately a user name, may make
/// in a burst; after that one more each `60 / FAILED_SIGN_INS_PER_MINUTE`
/// seconds (12).
pub const FAILED_SIGN_INS_PER_MINUTE: u32 = 5;

/// How long an address that signed in stays known.
pub const KNOWN_FOR_SECONDS: u64 = 30 * 86_400;

/// Known addresses kept at most; the oldest go first.
const KNOWN_AT_MOST: usize = 10_000;

/// The throttle's memory of known addresses; the counts are the limiter's.
#[derive(Debug, Default)]
pub struct SignInThrottle {
    /// (user or `key`, network) → when it last signed in.
    known: Mutex<HashMap<String, Instant>>,
}

/// One sign-in attempt under way.
#[derive(Debug)]
#[must_use]
pub struct Attempt {
    /// Buckets reserved before the check, given back on success.
    reserved: Vec<Bucket>,
    /// Buckets a failure from a known address spends after the check.
    on_failure: Vec<Bucket>,
    /// The known-address entry a success refreshes.
    known_as: Option<String>,
}

/// How a failed attempt is answered.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    /// 401 with the challenge: try again.
    Challenge,
    /// 429: wait this many seconds.
    Wait(u64),
}

/// The client's network as the buckets name it.
fn network(address: IpAddr) -> String {
    match address {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            format!(
                "{:x}:{:x}:{:x}:{:x}::/64",
                segments[0], segments[1], segments[2], segments[3]
            )
        }
    }
}

fn bucket(key: String) -> Bucket {
    Bucket {
        key,
        name: "ops_failed_sign_ins".to_owned(),
        limit: FAILED_SIGN_INS_PER_MINUTE,
    }
}

/// The user name as the limiter's keys carry it: keyed-hashed, so they do
/// not list the names tried.
fn hashed_user(user: &str) -> String {
    let hashed = storage::secrets::hmac_sha256(b"listing-api/ops-sign-in", user.as_bytes());
    hex::encode(&hashed[..12])
}

impl SignInThrottle {
    /// Begins an attempt from `address` as basic-auth `user` (none for an API
    /// key); `Err` with the seconds to wait when it is refused unchecked.
    pub async fn begin(
        &self,
        limiter: &RateLimiter,
        address: Option<IpAddr>,
        user: Option<&str>,
    ) -> Result<Attempt, u64> {
        let network = address.map(network);
        let user = user.map(hashed_user);
        let address_bucket = network
            .as_ref()
            .map(|network| bucket(format!("ops_sign_in:address:{network}")));
        let user_bucket = user
            .as_ref()
            .map(|user| bucket(format!("ops_sign_in:user:{user}")));
        let known_as =
            network.map(|network| format!("{}:{network}", user.as_deref().unwrap_or("key")));
        if known_as.as_ref().is_some_and(|known| self.is_known(known)) {
            return Ok(Attempt {
                reserved: Vec::new(),
                on_failure: address_bucket.into_iter().collect(),
                known_as,
            });
        }
        let reserved: Vec<Bucket> = address_bucket.into_iter().chain(user_bucket).collect();
        match limiter.check(&reserved).await {
            Ok(_) => Ok(Attempt {
                reserved,
                on_failure: Vec::new(),
                known_as,
            }),
            Err(crate::error::ApiError::RateLimited {
                retry_after_seconds,
                ..
            }) => Err(retry_after_seconds),
            Err(_) => Err(1),
        }
    }

    fn is_known(&self, known_as: &str) -> bool {
        let known = self
            .known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        known
            .get(known_as)
            .is_some_and(|at| at.elapsed() < Duration::from_secs(KNOWN_FOR_SECONDS))
    }

    /// The credentials were right: the reservation is given back and the
    /// address is known from now on.
    pub async fn succeeded(&self, limiter: &RateLimiter, attempt: Attempt) {
        if !attempt.reserved.is_empty() {
            limiter.refund(&attempt.reserved).await;
        }
        if let Some(known_as) = attempt.known_as {
            let mut known = self
                .known
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if known.len() >= KNOWN_AT_MOST && !known.contains_key(&known_as) {
                let oldest = known
                    .iter()
                    .min_by_key(|(_, at)| **at)
                    .map(|(key, _)| key.clone());
                if let Some(oldest) = oldest {
                    known.remove(&oldest);
                }
            }
            known.insert(known_as, Instant::now());
        }
    }

    /// The credentials were wrong: what a known address's failure spends is
    /// spent now (the others paid up front).
    pub async fn failed(&self, limiter: &RateLimiter, attempt: Attempt) -> Failure {
        if attempt.on_failure.is_empty() {
            return Failure::Challenge;
        }
        match limiter.check(&attempt.on_failure).await {
            Ok(_) => Failure::Challenge,
            Err(crate::error::ApiError::RateLimited {
                retry_after_seconds,
                ..
            }) => Failure::Wait(retry_after_seconds),
            Err(_) => Failure::Challenge,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_is_counted_by_its_64() {
        let one: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        assert_eq!(network(one), network(other));
        assert_eq!(network(one), "2001:db8:1:2::/64");
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(network(v4), "192.0.2.7");
    }

    #[tokio::test]
    async fn concurrent_guesses_cannot_share_one_free_slot() {
        let limiter = RateLimiter::in_process();
        let throttle = SignInThrottle::default();
        let address: IpAddr = "198.51.100.7".parse().unwrap();
        // Every guess reserves before it is checked: a burst's worth begin,
        // the next is refused unchecked.
        let mut begun = Vec::new();
        for _ in 0..FAILED_SIGN_INS_PER_MINUTE {
            begun.push(
                throttle
                    .begin(&limiter, Some(address), Some("ops"))
                    .await
                    .unwrap(),
            );
        }
        let refused = throttle.begin(&limiter, Some(address), Some("ops")).await;
        assert!(matches!(refused, Err(wait) if (1..=12).contains(&wait)));
        for attempt in begun {
            assert_eq!(throttle.failed(&limiter, attempt).await, Failure::Challenge);
        }
    }

    #[tokio::test]
    async fn a_known_address_is_not_kept_out_by_guesses_from_elsewhere() {
        let limiter = RateLimiter::in_process();
        let throttle = SignInThrottle::default();
        let operator: IpAddr = "192.0.2.10".parse().unwrap();
        let signed_in = throttle
            .begin(&limiter, Some(operator), Some("ops"))
            .await
            .unwrap();
        throttle.succeeded(&limiter, signed_in).await;
        // Guessers elsewhere use up the user's bucket.
        for guesser in 1..=FAILED_SIGN_INS_PER_MINUTE {
            let address: IpAddr = format!("203.0.113.{guesser}").parse().unwrap();
            let attempt = throttle
                .begin(&limiter, Some(address), Some("ops"))
                .await
                .unwrap();
            let _ = throttle.failed(&limiter, attempt).await;
        }
        let stranger: IpAddr = "203.0.113.200".parse().unwrap();
        assert!(
            throttle
                .begin(&limiter, Some(stranger), Some("ops"))
                .await
                .is_err()
        );
        // The operator's known address still gets in, and its success spends
        // nothing.
        for _ in 0..10 {
            let attempt = throttle
                .begin(&limiter, Some(operator), Some("ops"))
                .await
                .unwrap();
            throttle.succeeded(&limiter, attempt).await;
        }
        // Its own failures still count.
        let mut answers = Vec::new();
        for _ in 0..=FAILED_SIGN_INS_PER_MINUTE {
            let attempt = throttle
                .begin(&limiter, Some(operator), Some("ops"))
                .await
                .unwrap();
            answers.push(throttle.failed(&limiter, attempt).await);
        }
        assert!(
            matches!(answers.last(), Some(Failure::Wait(_))),
            "{answers:?}"
        );
    }
}
