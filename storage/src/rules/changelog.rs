//! The API changelog: every change to the public surface under `/api/v1`,
//! typed by the specification's change types. Deprecations name their
//! migration path and removal date; the deprecation headers, the 410 answers
//! and the OpenAPI `info.version` are all derived from these entries, so the
//! signals cannot drift from what the changelog says.

use chrono::{NaiveDate, NaiveTime};

/// The specification's change types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeType {
    /// A new route, field or event type.
    Added,
    /// A compatible change of behaviour.
    Changed,
    /// Still served, with a removal date.
    Deprecated,
    /// No longer served (410 Gone).
    Removed,
    /// A bug fixed.
    Fixed,
    /// A security improvement.
    Security,
}

impl ChangeType {
    /// Every change type, for validation messages.
    pub const ALL: [ChangeType; 6] = [
        Self::Added,
        Self::Changed,
        Self::Deprecated,
        Self::Removed,
        Self::Fixed,
        Self::Security,
    ];

    /// The wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Changed => "changed",
            Self::Deprecated => "deprecated",
            Self::Removed => "removed",
            Self::Fixed => "fixed",
            Self::Security => "security",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == text)
    }

    /// Whether entries of this type change the surface a client codes against.
    pub const fn changes_surface(self) -> bool {
        matches!(
            self,
            Self::Added | Self::Changed | Self::Deprecated | Self::Removed
        )
    }
}

/// One changelog entry.
#[derive(Debug)]
pub struct Entry {
    /// Stable id, also the anchor deprecation links point to.
    pub id: &'static str,
    /// When the change shipped, `YYYY-MM-DD`.
    pub date: &'static str,
    /// What kind of change.
    pub change_type: ChangeType,
    /// One line.
    pub title: &'static str,
    /// What changed and what to do about it.
    pub description: &'static str,
    /// The routes concerned, as `METHOD /api/v1/path`.
    pub routes: &'static [&'static str],
    /// For deprecations and removals: what to use instead.
    pub migration: Option<&'static str>,
    /// For deprecations: when the route stops being served, `YYYY-MM-DD`.
    pub removal_date: Option<&'static str>,
}

/// `GET /api/v1/tours` (the listings list under the product's old name):
/// deprecated at launch, removed after its 90-day overlap.
pub static TOURS_LIST_DEPRECATED: Entry = Entry {
    id: "chg_2026_05_29_tours_list_deprecated",
    date: "2026-05-29",
    change_type: ChangeType::Deprecated,
    title: "GET /api/v1/tours is deprecated",
    description: "Tours are listings. The tours list is served until its removal date; move to the listings list, which adds cursor pagination and filters.",
    routes: &["GET /api/v1/tours"],
    migration: Some("GET /api/v1/listings"),
    removal_date: Some("2026-09-01"),
};

/// The removal of `GET /api/v1/tours`.
pub static TOURS_LIST_REMOVED: Entry = Entry {
    id: "chg_2026_09_01_tours_list_removed",
    date: "2026-09-01",
    change_type: ChangeType::Removed,
    title: "GET /api/v1/tours was removed",
    description: "The tours list answers 410 Gone. Use the listings list.",
    routes: &["GET /api/v1/tours"],
    migration: Some("GET /api/v1/listings"),
    removal_date: None,
};

/// `GET /api/v1/tours/{listing_number}`: deprecated, served for a year.
pub static TOUR_READ_DEPRECATED: Entry = Entry {
    id: "chg_2026_05_29_tour_read_deprecated",
    date: "2026-05-29",
    change_type: ChangeType::Deprecated,
    title: "GET /api/v1/tours/{listing_number} is deprecated",
    description: "Tours are listings. The route answers exactly like GET /api/v1/listings/{listing_number} and carries Deprecation, Sunset and Link headers until its removal date.",
    routes: &["GET /api/v1/tours/{listing_number}"],
    migration: Some("GET /api/v1/listings/{listing_number}"),
    removal_date: Some("2027-05-29"),
};

/// Every entry, oldest first.
pub static ENTRIES: [&Entry; 27] = [
    &Entry {
        id: "chg_2026_05_29_initial_release",
        date: "2026-05-29",
        change_type: ChangeType::Added,
        title: "Initial public release",
        description: "Listings with their status lifecycle, cancellation, sections and orders; media uploads with their progress stream; scheduling availability; users; the webhook event catalog. Event payloads start at api_version 2026-05-29.",
        routes: &[
            "POST /api/v1/listings",
            "GET /api/v1/listings",
            "GET /api/v1/listings/{listing_number}",
            "GET /api/v1/listings/{listing_number}/orders",
            "PATCH /api/v1/listings/{listing_number}/status",
            "POST /api/v1/listings/{listing_number}/cancel",
            "PATCH /api/v1/listings/{listing_number}/sections/{section}",
            "POST /api/v1/media/upload",
            "GET /api/v1/progress/{operation_id}",
            "GET /api/v1/scheduling/availability",
            "GET /api/v1/users",
            "GET /api/v1/webhooks/events",
        ],
        migration: None,
        removal_date: None,
    },
    &TOURS_LIST_DEPRECATED,
    &TOUR_READ_DEPRECATED,
    &TOURS_LIST_REMOVED,
    &Entry {
        id: "chg_2026_10_01_webhook_endpoints",
        date: "2026-10-01",
        change_type: ChangeType::Added,
        title: "Webhook endpoints, deliveries, test fires and replays",
        description: "Register signed HTTPS endpoints per environment, inspect deliveries and their attempts, fire test events and replay deliveries.",
        routes: &[
            "POST /api/v1/webhooks/endpoints",
            "GET /api/v1/webhooks/endpoints",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}/deliveries",
            "POST /api/v1/webhooks/endpoints/{endpoint_id}/test",
            "POST /api/v1/webhooks/deliveries/{delivery_id}/replay",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_02_user_administration",
        date: "2026-11-02",
        change_type: ChangeType::Added,
        title: "User administration and preferences",
        description: "Read one user, create users, change roles and status, remove assistants from a team, read and change preferences, and ask who may edit whom.",
        routes: &[
            "GET /api/v1/users/{user_id}",
            "POST /api/v1/users",
            "PUT /api/v1/users/{user_id}/role",
            "PUT /api/v1/users/{user_id}/status",
            "DELETE /api/v1/users/team/{assistant_id}",
            "GET /api/v1/users/{user_id}/preferences",
            "PATCH /api/v1/users/{user_id}/preferences",
            "GET /api/v1/users/{user_id}/can-edit",
            "POST /api/v1/users/batch-can-edit",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_developer_settings",
        date: "2026-11-21",
        change_type: ChangeType::Added,
        title: "Sessions, API key management, impersonation and the sandbox seed",
        description: "Sign in to the developer settings with a session cookie and CSRF token; list, create, rotate and revoke API keys; impersonate a lower role; re-seed the sandbox's three fixture listings.",
        routes: &[
            "POST /api/v1/session",
            "GET /api/v1/session",
            "DELETE /api/v1/session",
            "POST /api/v1/users/{user_id}/impersonate",
            "GET /api/v1/agency/api-keys",
            "POST /api/v1/agency/api-keys",
            "POST /api/v1/agency/api-keys/{key_id}/rotate",
            "DELETE /api/v1/agency/api-keys/{key_id}",
            "POST /api/v1/agency/sandbox/seed",
            "GET /api/v1/agency/changelog",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_listing_media",
        date: "2026-11-21",
        change_type: ChangeType::Added,
        title: "Uploads against a listing, media in the listing read, and archives",
        description: "POST /api/v1/listings/{listing_number}/media uploads with the listing in the path; the listing read lists each media item with its six variants and signed download URLs; media.upload.completed is emitted; POST /api/v1/media/archive packs originals into a ZIP.",
        routes: &[
            "POST /api/v1/listings/{listing_number}/media",
            "POST /api/v1/media/archive",
            "GET /api/v1/media/archive/{operation_id}",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_key_revocation",
        date: "2026-11-21",
        change_type: ChangeType::Security,
        title: "Revoked keys stop working on every replica at once",
        description: "A revocation is announced to every API process; rotated keys keep working for 30 days and then expire.",
        routes: &[],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_password_links",
        date: "2026-11-21",
        change_type: ChangeType::Added,
        title: "Password links, and POST /users/ with its trailing slash",
        description: "A user created without a password is e-mailed a one-time link; POST /api/v1/session/password-reset asks for a new link (always 202) and POST /api/v1/session/password sets the password with it and signs in. POST /api/v1/users/ is served as well as POST /api/v1/users.",
        routes: &[
            "POST /api/v1/session/password-reset",
            "POST /api/v1/session/password",
            "POST /api/v1/users",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_status_conflict",
        date: "2026-11-21",
        change_type: ChangeType::Changed,
        title: "A status change overtaken by another is a 409, not applied to the new status",
        description: "When another change moves a listing between a request's read and its write, the request gets 409 listing_status_conflict (details.expected_status, details.current_status) or no_op_transition, and nothing is written.",
        routes: &["PATCH /api/v1/listings/{listing_number}/status"],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_upload_rules",
        date: "2026-11-21",
        change_type: ChangeType::Changed,
        title: "Session uploads need an idempotency key; HEIC, AVIF, QuickTime and M4A are refused",
        description: "Uploads signed in with a session now require X-Idempotency-Key like key uploads. ISO media files count as MP4 only with an MP4 video brand; HEIC/HEIF, AVIF, QuickTime and M4A/M4B/M4P get 400 upload.unsupported_format at upload instead of failing in processing.",
        routes: &[
            "POST /api/v1/media/upload",
            "POST /api/v1/listings/{listing_number}/media",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_sandbox_people",
        date: "2026-11-21",
        change_type: ChangeType::Security,
        title: "Sandbox keys no longer change people",
        description: "User creation, status, role, team and preference changes answer 403 permission_denied to sandbox keys; people belong to the agency, so a sandbox change reached real users.",
        routes: &[],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_21_rate_limit_headers",
        date: "2026-11-21",
        change_type: ChangeType::Fixed,
        title: "Rate-limit headers report the budget closest to exhaustion",
        description: "When a request spends several budgets, the X-Rate-Limit-* and RateLimit headers describe the one with the least room left.",
        routes: &[],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_exact_contract",
        date: "2026-11-26",
        change_type: ChangeType::Changed,
        title: "One rule for query parameters, idempotent outcomes, deadlines and test fires",
        description: "Every operation refuses a query parameter the OpenAPI document does not declare (422 validation.failed), including GET /webhooks/events. No refusal (validation, rate limit, a webhook endpoint's own budget) is kept under an idempotency key, so a corrected or later retry under the same key runs; a malformed X-Idempotency-Key is 422 like every validation failure. Requests stop at their deadline with 503 server.timeout (10 s user creation, 30 s most routes). A test fire answers 201 like a replay. The changelog and the API key lists carry next_cursor and take limit and cursor. An Archived listing can be cancelled inside the no-fee window.",
        routes: &[
            "GET /api/v1/webhooks/events",
            "POST /api/v1/webhooks/endpoints/{endpoint_id}/test",
            "GET /api/v1/agency/changelog",
            "GET /api/v1/agency/api-keys",
            "GET /api/v1/agency/api-keys/audit",
            "POST /api/v1/listings/{listing_number}/cancel",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_events",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "User and media delivery events; planned types marked",
        description: "user.signed_up and user.agent_created are emitted when a user joins; media.delivery.completed, media.delivery.partial and media.delivery.failed when an upload to a listing completes. The catalog marks the six types with no trigger yet as status planned; subscribing to one is 422.",
        routes: &[
            "GET /api/v1/webhooks/events",
            "POST /api/v1/webhooks/endpoints",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_removal_notices",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Owners are e-mailed before a route they call is removed",
        description: "An agency that calls a deprecated route has its owner e-mailed 31 days before the route's removal date, once per route.",
        routes: &[],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_developer_portal",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "The developer portal, its test console, and sessions on the webhook routes",
        description: "The developer settings are pages at /settings: keys, webhook endpoints with their delivery log, replay and test events, the event catalog, a test console, usage and this changelog. POST /agency/test-console runs a request as one of the agency's keys (60 runs a minute per agency). The webhook endpoint, delivery, replay and test routes accept an agency administrator's session with its CSRF token; X-Environment: sandbox chooses a session's environment. An endpoint receives the events that happen after it is registered. Every listing's canonical_url is its public property page.",
        routes: &[
            "POST /api/v1/agency/test-console",
            "GET /api/v1/webhooks/endpoints",
            "POST /api/v1/webhooks/endpoints",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}/deliveries",
            "POST /api/v1/webhooks/deliveries/{delivery_id}/replay",
            "POST /api/v1/webhooks/endpoints/{endpoint_id}/test",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_secret_rotation_overlap",
        date: "2026-11-26",
        change_type: ChangeType::Changed,
        title: "Rotating a webhook signing secret keeps the old one signing for a day",
        description: "POST /webhooks/endpoints/{endpoint_id}/rotate-secret takes an optional previous_secret_expires_in (seconds, 0 to 604800, default 86400). Until the endpoint's new previous_secret_expires_at, each delivery's X-Webhook-Signature carries the new secret's signature and then the old one's, separated by a comma and a space; accept a delivery if any one verifies. Send 0 to end the old secret at once.",
        routes: &[
            "POST /api/v1/webhooks/endpoints/{endpoint_id}/rotate-secret",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_standard_webhooks",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Webhook endpoints can be signed the Standard Webhooks way",
        description: "Endpoints take signature_scheme: spec (the default, X-Webhook-Signature) or standard_webhooks, which sends webhook-id, webhook-timestamp and webhook-signature (v1,<base64>) so receivers can verify with a Standard Webhooks library. New signing secrets are whsec_ followed by standard base64; rotate an older endpoint's secret when moving it to standard_webhooks.",
        routes: &[
            "POST /api/v1/webhooks/endpoints",
            "PATCH /api/v1/webhooks/endpoints/{endpoint_id}",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_hourly_budget_setting",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Each webhook endpoint's hourly budget is a setting, and a held-back backlog drains steadily",
        description: "Endpoints take hourly_budget (default 1000; 1 to 1000000; null for none) on registration and PATCH. The budget is spent evenly: a burst of up to the whole budget, then one delivery every 3600/budget seconds; deliveries over it are held back to their own slots instead of all waiting an hour. The endpoint shows held_back (count, next_release_at); changing the budget releases the backlog at once.",
        routes: &[
            "POST /api/v1/webhooks/endpoints",
            "PATCH /api/v1/webhooks/endpoints/{endpoint_id}",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_endpoint_health",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Endpoint health: a warning at 40 failures, disabled and recovered events, and recover",
        description: "The agency's owner is e-mailed a warning when an endpoint's deliveries fail 40 times in a row, before the disable at 50. New event types webhook.endpoint.disabled and webhook.endpoint.recovered (the first success after five or more failures) go to the agency's other endpoints that subscribe. POST /webhooks/endpoints/{endpoint_id}/recover with since re-sends every delivery that failed since then in one job; GET /webhooks/endpoints/{endpoint_id}/recoveries/{recovery_id} shows its progress.",
        routes: &[
            "POST /api/v1/webhooks/endpoints/{endpoint_id}/recover",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}/recoveries/{recovery_id}",
            "GET /api/v1/webhooks/events",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_ordered_endpoints",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Webhook endpoints can receive each listing's events in order",
        description: "Endpoints take ordering: none (the default) or listing. With listing, deliveries of events about the same listing arrive in commit order: a later one waits while an earlier one is pending or retrying, and goes once that one succeeded or failed for good. Other listings are not held up.",
        routes: &[
            "POST /api/v1/webhooks/endpoints",
            "PATCH /api/v1/webhooks/endpoints/{endpoint_id}",
            "GET /api/v1/webhooks/endpoints/{endpoint_id}",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_26_listen_and_trigger",
        date: "2026-11-26",
        change_type: ChangeType::Added,
        title: "Follow webhook events locally: api listen and api trigger",
        description: "GET /webhooks/listen streams the key's events as server-sent events; api listen forwards each to a local URL, signed with a secret made for the session. POST /webhooks/trigger (sandbox keys) emits an event type's catalog sample into the sandbox; api trigger calls it.",
        routes: &[
            "GET /api/v1/webhooks/listen",
            "POST /api/v1/webhooks/trigger",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_28_upload_file_names",
        date: "2026-11-28",
        change_type: ChangeType::Changed,
        title: "Upload file names are at most 255 bytes",
        description: "A file part whose name is longer than 255 bytes of UTF-8 is refused with 400 upload.filename_too_long before anything of the request is kept; names used to be stored at any length and repeated in every listing read.",
        routes: &[
            "POST /api/v1/media/upload",
            "POST /api/v1/listings/{listing_number}/media",
        ],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_28_response_headers",
        date: "2026-11-28",
        change_type: ChangeType::Security,
        title: "Every answer carries nosniff, HSTS over HTTPS, and no-store unless it is meant to be cached",
        description: "Responses carry X-Content-Type-Options: nosniff; over HTTPS (directly or through a trusted proxy) Strict-Transport-Security with a two-year max-age; and Cache-Control: no-store where the answer names no caching of its own. Behind a trusted proxy, only the last entry of X-Forwarded-Proto and Forwarded (the one the proxy wrote) is believed.",
        routes: &[],
        migration: None,
        removal_date: None,
    },
    &Entry {
        id: "chg_2026_11_28_password_length",
        date: "2026-11-28",
        change_type: ChangeType::Changed,
        title: "New passwords are at most 128 characters, as the document says",
        description: "POST /users and POST /session/password refuse a new password longer than 128 characters (400 validation.invalid_value naming the field); the OpenAPI document has always said 128, while the service took up to 1024 bytes.",
        routes: &["POST /api/v1/users", "POST /api/v1/session/password"],
        migration: None,
        removal_date: None,
    },
];

/// The OpenAPI `info.version`: the date of the newest change to the surface
/// (added, changed, deprecated or removed), so it moves with every addition.
pub fn surface_version() -> &'static str {
    ENTRIES
        .iter()
        .filter(|entry| entry.change_type.changes_surface())
        .map(|entry| entry.date)
        .max()
        .unwrap_or("2026-05-29")
}

/// Midnight UTC of an entry date, as Unix seconds.
pub fn unix_seconds(date: &str) -> Option<i64> {
    NaiveDate::parse_from_str(date, "%Y-%m-%d")
        .ok()
        .map(|day| day.and_time(NaiveTime::MIN).and_utc().timestamp())
}

/// An entry date as an HTTP-date (`Sat, 29 May 2027 00:00:00 GMT`).
pub fn http_date(date: &str) -> Option<String> {
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok().map(|day| {
        day.and_time(NaiveTime::MIN)
            .and_utc()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_dated_oldest_first_with_unique_ids() {
        let mut ids: Vec<&str> = ENTRIES.iter().map(|e| e.id).collect();
        assert!(ENTRIES.windows(2).all(|w| w[0].date <= w[1].date));
        for entry in ENTRIES {
            assert!(unix_seconds(entry.date).is_some(), "{}", entry.id);
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ENTRIES.len());
    }

    #[test]
    fn deprecations_name_a_migration_and_a_removal_date_at_least_90_days_on() {
        for entry in ENTRIES
            .iter()
            .filter(|e| e.change_type == ChangeType::Deprecated)
        {
            let removal = entry.removal_date.and_then(unix_seconds);
            let since = unix_seconds(entry.date);
            let (Some(removal), Some(since)) = (removal, since) else {
                panic!("{} lacks a removal date", entry.id);
            };
            assert!(removal - since >= 90 * 86_400, "{}", entry.id);
            assert!(entry.migration.is_some(), "{}", entry.id);
        }
    }

    #[test]
    fn dates_render_as_http_dates() {
        assert_eq!(
            http_date("2027-05-29").as_deref(),
            Some("Sat, 29 May 2027 00:00:00 GMT")
        );
        assert_eq!(unix_seconds("2026-05-29"), Some(1_780_012_800));
        assert_eq!(surface_version(), "2026-11-28");
    }
}
