//! Rate limiting: every request must pass both of the specification's budget
//! sets, the agency-level budgets (per agency and environment, shared by its
//! keys) and the per-key, per-endpoint budgets (with the key's overrides).
//! Sandbox traffic also has its own 500/minute agency budget. Buckets use GCRA;
//! they live in process, or in Redis when `REDIS_URL` is set so that every
//! replica spends one budget.

pub mod gcra;
pub mod memory;
pub mod redis;

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use storage::Environment;
use storage::ids::{AgencyId, UserId};

use crate::endpoints::{AgencyBudget, Endpoint, SANDBOX_BUDGET, SessionEndpoint, UPLOADS};
use crate::error::ApiError;
use crate::principal::Principal;

/// Uploads per user per minute through a session (the specification's other figure).
const SESSION_UPLOADS_PER_MINUTE: u32 = 50;

/// One bucket a request must pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Storage key.
    pub key: String,
    /// The budget's name, as shown in the `RateLimit` headers.
    pub name: String,
    /// Requests per 60 seconds.
    pub limit: u32,
}

/// The agency bucket of `budget` for `tenant`, an operator's override
/// replacing its default limit.
fn agency_bucket(
    tenant: &storage::Tenant,
    budget: &AgencyBudget,
    overrides: &std::collections::BTreeMap<String, u32>,
) -> Bucket {
    Bucket {
        key: format!(
            "agency:{}:{}:{}",
            tenant.agency_id,
            tenant.environment.as_str(),
            budget.name
        ),
        name: budget.name.to_owned(),
        limit: overrides.get(budget.name).copied().unwrap_or(budget.limit),
    }
}

/// The buckets of `endpoint` for `principal`.
pub fn buckets_for(principal: &Principal, endpoint: &Endpoint) -> Vec<Bucket> {
    let tenant = principal.tenant();
    let sandbox = (principal.environment == Environment::Sandbox).then_some(&SANDBOX_BUDGET);
    let mut buckets: Vec<Bucket> = sandbox
        .into_iter()
        .chain(endpoint.agency_budgets.iter().copied())
        .map(|budget| agency_bucket(&tenant, budget, &principal.agency_rate_limit_overrides))
        .collect();
    let key_limit = principal
        .rate_limit_overrides
        .get(endpoint.name)
        .copied()
        .unwrap_or(endpoint.key_limit);
    buckets.push(Bucket {
        key: format!("key:{}:{}", principal.key_id, endpoint.name),
        name: endpoint.name.to_owned(),
        limit: key_limit,
    });
    buckets
}

/// The bucket of a session route: the user's own budget for it.
pub fn session_buckets(user: &UserId, endpoint: &SessionEndpoint) -> Vec<Bucket> {
    vec![Bucket {
        key: format!("session:{user}:{}", endpoint.name),
        name: endpoint.name.to_owned(),
        limit: endpoint.user_limit,
    }]
}

/// Every agency budget of `tenant`'s environment, with `overrides` (an
/// operator's) replacing the defaults: what the portal's headroom shows.
pub fn agency_buckets(
    tenant: &storage::Tenant,
    overrides: &std::collections::BTreeMap<String, u32>,
) -> Vec<Bucket> {
    let sandbox = tenant.environment == Environment::Sandbox;
    crate::endpoints::AGENCY_BUDGETS
        .iter()
        .filter(|budget| sandbox || budget.name != SANDBOX_BUDGET.name)
        .map(|budget| agency_bucket(tenant, budget, overrides))
        .collect()
}

/// The buckets of an upload through a session: the agency's live upload
/// budget, which its keys spend too, and the user's own.
pub fn session_upload_buckets(
    agency: &AgencyId,
    user: &UserId,
    endpoint: &Endpoint,
) -> Vec<Bucket> {
    vec![
        Bucket {
            key: format!("agency:{agency}:live:{}", UPLOADS.name),
            name: UPLOADS.name.to_owned(),
            limit: UPLOADS.limit,
        },
        Bucket {
            key: format!("session:{user}:{}", endpoint.name),
            name: endpoint.name.to_owned(),
            limit: SESSION_UPLOADS_PER_MINUTE,
        },
    ]
}

/// Microseconds of waiting as the whole seconds of a `Retry-After`, rounded
/// up and at least one.
fn whole_seconds(micros: i64) -> u64 {
    u64::try_from((micros + 999_999) / 1_000_000)
        .unwrap_or(1)
        .max(1)
}

/// Where buckets live.
#[derive(Clone, Debug)]
pub enum RateLimiter {
    /// In this process (embedded profile).
    Memory(Arc<memory::MemoryLimiter>),
    /// In Redis, shared by every replica; while Redis does not answer, each
    /// process keeps the buckets itself (the second field) rather than
    /// refusing requests that need nothing else from Redis.
    Redis(redis::RedisLimiter, Arc<memory::MemoryLimiter>),
}

/// How long a request waits for the shared buckets before this process
/// decides with its own.
const REDIS_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the shared limiter is being stood in for (logged once per outage).
static DEGRADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl RateLimiter {
    /// A limiter in process, on the wall clock.
    pub fn in_process() -> Self {
        Self::Memory(Arc::default())
    }

    /// A limiter in process, on `clock` (the store's: a test's standing
    /// clock makes budgets refill only when the test moves it).
    pub fn in_process_on(clock: storage::Clock) -> Self {
        Self::Memory(Arc::new(memory::MemoryLimiter::on(clock)))
    }

    /// A limiter shared through Redis.
    pub fn shared(limiter: redis::RedisLimiter) -> Self {
        Self::Redis(limiter, Arc::default())
    }

    /// What each bucket would admit now, spending nothing (the portal's
    /// headroom chart). While Redis does not answer, this process's own view.
    pub async fn headroom(&self, buckets: &[Bucket]) -> Vec<u32> {
        match self {
            Self::Memory(limiter) => limiter.headroom(buckets),
            Self::Redis(limiter, standby) => {
                match tokio::time::timeout(REDIS_PATIENCE, limiter.headroom(buckets)).await {
                    Ok(Ok(headroom)) => headroom,
                    _ => standby.headroom(buckets),
                }
            }
        }
    }

    /// How long until every bucket would admit one more request, in whole
    /// seconds; `None` when they would now. Spends nothing: a caller that
    /// counts only some outcomes (failed sign-ins) looks first and spends
    /// with `check` once it knows.
    pub async fn wait_before_next(&self, buckets: &[Bucket]) -> Option<u64> {
        let outcomes = match self {
            Self::Memory(limiter) => limiter.peek(buckets),
            Self::Redis(limiter, standby) => {
                match tokio::time::timeout(REDIS_PATIENCE, limiter.peek(buckets)).await {
                    Ok(Ok(outcomes)) => outcomes,
                    _ => standby.peek(buckets),
                }
            }
        };
        outcomes
            .iter()
            .filter(|outcome| !outcome.allowed)
            .map(|outcome| whole_seconds(outcome.retry_after))
            .max()
    }

    /// Gives back the request `check` spent from each bucket, for a request
    /// that turned out not to count (a sign-in that succeeded).
    pub async fn refund(&self, buckets: &[Bucket]) {
        match self {
            Self::Memory(limiter) => limiter.refund(buckets),
            Self::Redis(limiter, standby) => {
                match tokio::time::timeout(REDIS_PATIENCE, limiter.refund(buckets)).await {
                    Ok(Ok(())) => {}
                    _ => standby.refund(buckets),
                }
            }
        }
    }

    /// Checks (and if admitted, spends) every bucket of a request. A refused
    /// request is a 429 carrying the headers.
    pub async fn check(&self, buckets: &[Bucket]) -> Result<RateLimitHeaders, ApiError> {
        let outcomes = match self {
            Self::Memory(limiter) => limiter.check(buckets),
            Self::Redis(limiter, standby) => {
                use std::sync::atomic::Ordering;
                let shared = tokio::time::timeout(REDIS_PATIENCE, limiter.check(buckets)).await;
                match shared {
                    Ok(Ok(outcomes)) => {
                        if DEGRADED.swap(false, Ordering::Relaxed) {
                            tracing::info!("rate limits are shared through Redis again");
                        }
                        outcomes
                    }
                    failed => {
                        if !DEGRADED.swap(true, Ordering::Relaxed) {
                            let cause = match failed {
                                Ok(Err(err)) => err.to_string(),
                                _ => "no answer within 500 ms".to_owned(),
                            };
                            tracing::warn!(
                                %cause,
                                "Redis does not answer: this process keeps rate limits on its own until it does"
                            );
                        }
                        standby.check(buckets)
                    }
                }
            }
        };
        let headers = RateLimitHeaders::new(buckets, &outcomes);
        let refused = outcomes
            .iter()
            .filter(|o| !o.allowed)
            .map(|o| o.retry_after)
            .max();
        match refused {
            None => Ok(headers),
            Some(retry_after) => Err(ApiError::RateLimited {
                retry_after_seconds: whole_seconds(retry_after),
                headers: headers.into_map(),
            }),
        }
    }
}

/// The rate-limit headers of a response, describing the budget closest to
/// exhaustion, in the three spellings clients look for. Kept as the figures
/// they are written from, and written straight into the response's headers:
/// every guarded response carries them.
#[derive(Clone, Debug, Default)]
pub struct RateLimitHeaders(Option<Closest>);

/// The figures of the budget closest to exhaustion, and the policy of all.
#[derive(Clone, Debug)]
struct Closest {
    limit: u32,
    remaining: u32,
    reset_unix: i64,
    /// `ratelimit`: the closest budget's name, remaining and reset.
    summary: Option<HeaderValue>,
    /// `ratelimit-policy`: every budget the request spent.
    policy: Option<HeaderValue>,
}

impl RateLimitHeaders {
    fn new(buckets: &[Bucket], outcomes: &[gcra::Outcome]) -> Self {
        let closest = buckets
            .iter()
            .zip(outcomes)
            .min_by_key(|(bucket, outcome)| {
                // Refused buckets first (latest admission first), then fewest remaining.
                (
                    outcome.allowed,
                    -outcome.retry_after,
                    outcome.remaining,
                    bucket.limit,
                )
            });
        let Some((bucket, outcome)) = closest else {
            return Self(None);
        };
        let reset_in = (outcome.reset_in.max(0) + 999_999) / 1_000_000;
        let policies: Vec<String> = buckets
            .iter()
            .map(|b| format!("\"{}\";q={};w=60", b.name, b.limit))
            .collect();
        let summary = format!("\"{}\";r={};t={reset_in}", bucket.name, outcome.remaining);
        Self(Some(Closest {
            limit: bucket.limit,
            remaining: outcome.remaining,
            reset_unix: (outcome.reset_at + 999_999) / 1_000_000,
            // A budget's name is ours and plain; were one not a header's
            // text, its header is left out rather than the request failed.
            summary: HeaderValue::from_str(&summary).ok(),
            policy: HeaderValue::from_str(&policies.join(", ")).ok(),
        }))
    }

    /// Adds the headers to a response's, leaving those it already has: a
    /// response refused by a narrower budget inside the handler (a webhook
    /// endpoint's replays) describes that budget, not this one.
    pub fn apply(&self, headers: &mut HeaderMap) {
        /// The names, made once: `from_static` at run time checks its text.
        const NAMES: [[HeaderName; 3]; 2] = [
            [
                HeaderName::from_static("x-rate-limit-limit"),
                HeaderName::from_static("x-rate-limit-remaining"),
                HeaderName::from_static("x-rate-limit-reset"),
            ],
            [
                HeaderName::from_static("x-ratelimit-limit"),
                HeaderName::from_static("x-ratelimit-remaining"),
                HeaderName::from_static("x-ratelimit-reset"),
            ],
        ];
        const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
        const SUMMARY: HeaderName = HeaderName::from_static("ratelimit");
        let Some(closest) = &self.0 else { return };
        let mut put = |name: HeaderName, value: HeaderValue| {
            if let header::Entry::Vacant(vacant) = headers.entry(name) {
                vacant.insert(value);
            }
        };
        for [limit, remaining, reset] in NAMES {
            // Numbers become header values without a formatted string.
            put(limit, closest.limit.into());
            put(remaining, closest.remaining.into());
            put(reset, closest.reset_unix.into());
        }
        if let Some(policy) = &closest.policy {
            put(POLICY, policy.clone());
        }
        if let Some(summary) = &closest.summary {
            put(SUMMARY, summary.clone());
        }
    }

    /// The headers on their own (a refusal's).
    fn into_map(self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        self.apply(&mut headers);
        headers
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use storage::ids::{AgencyId, ApiKeyId};

    use super::*;
    use crate::endpoints;

    fn principal(environment: Environment, overrides: &[(&str, u32)]) -> Principal {
        crate::principal::KeyHolder {
            key_id: ApiKeyId::generate(),
            agency_id: AgencyId::generate(),
            environment,
            scopes: vec![],
            acting_user: None,
            rate_limit_overrides: overrides
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect::<BTreeMap<_, _>>(),
            agency_rate_limit_overrides: BTreeMap::from([(
                "agency_listing_reads".to_owned(),
                9000,
            )]),
        }
        .into()
    }

    #[test]
    fn a_create_passes_the_agency_budgets_and_the_key_budget() {
        let buckets = buckets_for(
            &principal(Environment::Live, &[]),
            &endpoints::CREATE_LISTING,
        );
        let named: Vec<(&str, u32)> = buckets.iter().map(|b| (b.name.as_str(), b.limit)).collect();
        assert_eq!(
            named,
            [
                ("agency_listing_creates", 200),
                ("agency_listing_writes", 200),
                ("create_listing", 200)
            ]
        );
    }

    #[test]
    fn sandbox_keys_add_the_sandbox_budget_and_keep_their_own_buckets() {
        let live = buckets_for(
            &principal(Environment::Live, &[]),
            &endpoints::READ_LISTING_SINGLE,
        );
        let sandbox = buckets_for(
            &principal(Environment::Sandbox, &[]),
            &endpoints::READ_LISTING_SINGLE,
        );
        assert_eq!(sandbox[0].name, "agency_sandbox");
        assert_eq!(sandbox[0].limit, 500);
        assert!(sandbox.iter().all(|b| !live.iter().any(|l| l.key == b.key)));
    }

    #[test]
    fn overrides_replace_the_key_budget_of_their_endpoint_only() {
        let p = principal(Environment::Live, &[("create_listing", 5)]);
        let create = buckets_for(&p, &endpoints::CREATE_LISTING);
        assert_eq!(create.last().map(|b| b.limit), Some(5));
        let read = buckets_for(&p, &endpoints::READ_LISTING_SINGLE);
        assert_eq!(read.last().map(|b| b.limit), Some(600));
        assert_eq!(
            read[0].limit, 9000,
            "the agency's own override of its read budget"
        );
    }

    #[test]
    fn headers_describe_the_budget_closest_to_exhaustion() {
        let buckets = vec![
            Bucket {
                key: "a".into(),
                name: "wide".into(),
                limit: 500,
            },
            Bucket {
                key: "b".into(),
                name: "narrow".into(),
                limit: 5,
            },
        ];
        let limiter = memory::MemoryLimiter::default();
        let outcomes = limiter.check(&buckets);
        let headers = RateLimitHeaders::new(&buckets, &outcomes).into_map();
        assert_eq!(headers["x-rate-limit-limit"], "5");
        assert_eq!(headers["x-rate-limit-remaining"], "4");
        assert_eq!(headers["x-ratelimit-remaining"], "4");
        assert_eq!(
            headers["ratelimit-policy"],
            "\"wide\";q=500;w=60, \"narrow\";q=5;w=60"
        );
        assert!(
            headers["ratelimit"]
                .to_str()
                .unwrap()
                .starts_with("\"narrow\";r=4;t=")
        );
    }
}
