//! The policies the route table (`routes/table.rs`) names, one line each:
//! for an API key's route ([`Endpoint`]) the specification's endpoint name
//! (the one its per-key budgets use), the scope it requires, the
//! agency-level budgets it spends and its per-key budget per minute; for a
//! session route ([`SessionEndpoint`]) the CSRF rule and the user's budget
//! per minute; and the agency-level budgets themselves ([`AgencyBudget`]).

use axum::http::Method;
use storage::api_keys::Scope;

/// An agency-level budget, shared by every key of the agency (per environment).
#[derive(Debug, PartialEq, Eq)]
pub struct AgencyBudget {
    /// Name of the bucket.
    pub name: &'static str,
    /// Requests per minute.
    pub limit: u32,
}

/// One public endpoint's policy.
#[derive(Debug)]
pub struct Endpoint {
    /// The specification's endpoint name, e.g. `read_users_list`.
    pub name: &'static str,
    /// The scope a key must hold.
    pub scope: Scope,
    /// Agency-level budgets this endpoint spends.
    pub agency_budgets: &'static [&'static AgencyBudget],
    /// Per-key budget per minute (a key's override replaces it).
    pub key_limit: u32,
}

/// When a session route wants the CSRF token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csrf {
    /// On every request, reads included (`GET /agency/changelog`).
    Always,
    /// On every method but GET and HEAD.
    UnsafeMethods,
}

/// One session route's policy.
#[derive(Debug)]
pub struct SessionEndpoint {
    /// Name of its per-user budget.
    pub name: &'static str,
    /// When it wants the CSRF token.
    pub csrf: Csrf,
    /// Requests per minute per user.
    pub user_limit: u32,
}

impl SessionEndpoint {
    /// Whether a request of `method` must carry the CSRF token.
    pub fn wants_csrf(&self, method: &Method) -> bool {
        match self.csrf {
            Csrf::Always => true,
            Csrf::UnsafeMethods => !matches!(*method, Method::GET | Method::HEAD),
        }
    }
}

/// Declares agency budgets and [`AGENCY_BUDGETS`], the list of them all.
macro_rules! agency_budgets {
    ($($(#[$doc:meta])* $id:ident = $name:literal, $limit:literal;)*) => {
        $($(#[$doc])* pub static $id: AgencyBudget = AgencyBudget { name: $name, limit: $limit };)*
        /// Every agency-level budget, for validating an agency's overrides.
        pub static AGENCY_BUDGETS: &[&AgencyBudget] = &[$(&$id),*];
    };
}

/// Declares key endpoints and [`ALL`], the list of them all.
macro_rules! key_endpoints {
    ($($(#[$doc:meta])* $id:ident = $name:literal, $scope:ident, [$($budget:ident),*], $limit:literal;)*) => {
        $($(#[$doc])* pub static $id: Endpoint = Endpoint {
            name: $name,
            scope: Scope::$scope,
            agency_budgets: &[$(&$budget),*],
            key_limit: $limit,
        };)*
        /// Every endpoint with a per-key budget, for validating overrides.
        pub static ALL: &[&Endpoint] = &[$(&$id),*];
    };
}

/// Declares session endpoints.
macro_rules! session_endpoints {
    ($($(#[$doc:meta])* $id:ident = $name:literal, $csrf:ident, $limit:expr;)*) => {
        $($(#[$doc])* pub static $id: SessionEndpoint = SessionEndpoint {
            name: $name,
            csrf: Csrf::$csrf,
            user_limit: $limit,
        };)*
    };
}

// The agency-level budgets: requests per minute per agency and environment.
#[rustfmt::skip]
agency_budgets! {
    /// `POST /listings`: 200 per minute per agency.
    LISTING_CREATES = "agency_listing_creates", 200;
    /// Listing reads other than creation: 500 per minute per agency.
    LISTING_READS = "agency_listing_reads", 500;
    /// Every listing write together: 200 per minute per agency.
    LISTING_WRITES = "agency_listing_writes", 200;
    /// `POST /media/upload`: 100 per minute per agency.
    UPLOADS = "agency_uploads", 100;
    /// Resumable uploads (every tus request of them): 6000 per minute per
    /// agency, a shoot's 200 files in small chunks with room to spare.
    RESUMABLE_UPLOADS = "agency_resumable_uploads", 6000;
    /// `GET /scheduling/availability`: 300 per minute per agency.
    AVAILABILITY = "agency_availability", 300;
    /// `GET /users`: 200 per minute per agency.
    USERS = "agency_users", 200;
    /// `GET /webhooks/events`: 60 per minute per agency.
    WEBHOOK_CATALOG = "agency_webhook_catalog", 60;
    /// Webhook endpoint management and delivery reads: 120 per minute per agency.
    WEBHOOK_MANAGEMENT = "agency_webhook_management", 120;
    /// Delivery profile management: 120 per minute per agency.
    DELIVERY_PROFILE_MANAGEMENT = "agency_delivery_profiles", 120;
    /// All sandbox traffic of an agency: 500 per minute, apart from live.
    SANDBOX_BUDGET = "agency_sandbox", 500;
}

// Key endpoints: name, scope, agency budgets spent, requests per minute per key.
#[rustfmt::skip]
key_endpoints! {
    /// `POST /media/upload` and `POST /listings/{listing_number}/media`.
    UPLOAD_MEDIA = "upload_media", MediaWrite, [UPLOADS], 20;
    /// `POST /uploads`: creating a resumable upload.
    CREATE_UPLOAD = "create_upload", MediaWrite, [RESUMABLE_UPLOADS], 600;
    /// `HEAD`, `PATCH` and `DELETE /uploads/{upload_id}`: a resumable upload's bytes.
    TRANSFER_UPLOAD = "transfer_upload", MediaWrite, [RESUMABLE_UPLOADS], 3000;
    /// `POST /direct-uploads`: a direct upload's part URLs (the S3 profile).
    CREATE_DIRECT_UPLOAD = "create_direct_upload", MediaWrite, [UPLOADS], 600;
    /// `GET`, `DELETE /direct-uploads/{upload_id}` and its `complete`.
    DIRECT_UPLOAD = "direct_upload", MediaWrite, [UPLOADS], 1200;
    /// `POST /upload-batches`: a shoot's batch of resumable uploads.
    CREATE_UPLOAD_BATCH = "create_upload_batch", MediaWrite, [UPLOADS], 60;
    /// `POST /media/archive` and `GET /media/archive/{operation_id}`.
    ARCHIVE_MEDIA = "archive_media", MediaWrite, [UPLOADS], 60;
    /// `PATCH /media/{media_id}`: a photo's focal point.
    UPDATE_MEDIA = "update_media", MediaWrite, [UPLOADS], 120;
    /// `GET /delivery-profiles`, `GET /delivery-profiles/{profile_id}` and
    /// `GET /delivery-profile-templates`.
    READ_DELIVERY_PROFILES = "read_delivery_profiles", DeliveryProfilesRead, [DELIVERY_PROFILE_MANAGEMENT], 120;
    /// `POST /delivery-profiles`, and `PATCH` and `DELETE
    /// /delivery-profiles/{profile_id}`.
    WRITE_DELIVERY_PROFILE = "write_delivery_profile", DeliveryProfilesWrite, [DELIVERY_PROFILE_MANAGEMENT], 60;
    /// `GET /progress/{operation_id}`: progress streams of media operations.
    READ_PROGRESS = "read_progress", MediaWrite, [], 600;
    /// `POST /agency/sandbox/seed`: a sandbox key re-seeds its fixtures.
    SEED_SANDBOX = "seed_sandbox", ListingsWrite, [LISTING_WRITES], 10;
    /// `GET /users`.
    READ_USERS_LIST = "read_users_list", UsersRead, [USERS], 300;
    /// `GET /users/{user_id}`.
    READ_USER_SINGLE = "read_user_single", UsersRead, [USERS], 600;
    /// `GET /users/{user_id}/preferences`.
    READ_USER_PREFERENCES = "read_user_preferences", UsersRead, [USERS], 600;
    /// `PATCH /users/{user_id}/preferences`.
    UPDATE_USER_PREFERENCES = "update_user_preferences", UsersWrite, [USERS], 200;
    /// `GET /users/{user_id}/can-edit`.
    CAN_EDIT_USER = "can_edit_user", UsersRead, [USERS], 600;
    /// `POST /users/batch-can-edit`.
    BATCH_CAN_EDIT_USERS = "batch_can_edit_users", UsersRead, [USERS], 300;
    /// `PUT /users/{user_id}/role`.
    UPDATE_USER_ROLE = "update_user_role", UsersWrite, [USERS], 200;
    /// `PUT /users/{user_id}/status`.
    UPDATE_USER_STATUS = "update_user_status", UsersWrite, [USERS], 200;
    /// `POST /users`.
    CREATE_USER = "create_user", UsersWrite, [USERS], 60;
    /// `DELETE /users/team/{assistant_id}`.
    REMOVE_TEAM_MEMBER = "remove_team_member", UsersWrite, [USERS], 200;
    /// `POST /listings`.
    CREATE_LISTING = "create_listing", ListingsWrite, [LISTING_CREATES, LISTING_WRITES], 200;
    /// `GET /listings`.
    READ_LISTINGS_LIST = "read_listings_list", ListingsRead, [LISTING_READS], 300;
    /// `GET /listings/{listing_number}`.
    READ_LISTING_SINGLE = "read_listing_single", ListingsRead, [LISTING_READS], 600;
    /// `GET /listings/{listing_number}/orders`.
    GET_LISTING_ORDERS = "get_listing_orders", ListingsRead, [LISTING_READS], 300;
    /// `PATCH /listings/{listing_number}/status`.
    UPDATE_LISTING_STATUS = "update_listing_status", ListingsWrite, [LISTING_WRITES], 200;
    /// `POST /listings/{listing_number}/cancel`.
    CANCEL_LISTING = "cancel_listing", ListingsWrite, [LISTING_WRITES], 100;
    /// `PATCH /listings/{listing_number}/sections/{section}`; the agency table's
    /// "section PATCH 200 per key" is this per-key budget.
    UPDATE_SECTION = "update_section", ListingsWrite, [LISTING_WRITES], 200;
    /// `GET /scheduling/availability`.
    GET_AVAILABILITY = "get_availability", SchedulingRead, [AVAILABILITY], 600;
    /// `GET /webhooks/events`.
    GET_WEBHOOK_CATALOG = "get_webhook_catalog", WebhooksRead, [WEBHOOK_CATALOG], 60;
    /// `POST /webhooks/endpoints`.
    CREATE_WEBHOOK_ENDPOINT = "create_webhook_endpoint", WebhooksWrite, [WEBHOOK_MANAGEMENT], 30;
    /// `GET /webhooks/endpoints` and `GET /webhooks/endpoints/{endpoint_id}`.
    READ_WEBHOOK_ENDPOINTS = "read_webhook_endpoints", WebhooksRead, [WEBHOOK_MANAGEMENT], 120;
    /// Update, disable, enable, rotate the secret of, or delete an endpoint.
    UPDATE_WEBHOOK_ENDPOINT = "update_webhook_endpoint", WebhooksWrite, [WEBHOOK_MANAGEMENT], 60;
    /// An endpoint's deliveries and one delivery with its attempts.
    READ_WEBHOOK_DELIVERIES = "read_webhook_deliveries", WebhooksRead, [WEBHOOK_MANAGEMENT], 120;
    /// `POST /webhooks/deliveries/{delivery_id}/replay` (also 10 per minute per
    /// webhook endpoint).
    REPLAY_WEBHOOK_DELIVERY = "replay_webhook_delivery", WebhooksWrite, [WEBHOOK_MANAGEMENT], 60;
    /// `POST /webhooks/endpoints/{endpoint_id}/test` (also 5 per minute per
    /// webhook endpoint).
    TEST_WEBHOOK_ENDPOINT = "test_webhook_endpoint", WebhooksWrite, [WEBHOOK_MANAGEMENT], 60;
}

/// Test-console runs: the specification's 60 per minute per agency (and per user).
pub const RUNS_PER_MINUTE: u32 = 60;

// Session endpoints of the developer settings: name, CSRF rule, requests
// per minute per user.
#[rustfmt::skip]
session_endpoints! {
    /// `GET /session`.
    READ_SESSION = "read_session", UnsafeMethods, 600;
    /// `DELETE /session`.
    END_SESSION = "end_session", UnsafeMethods, 60;
    /// `POST /users/{user_id}/impersonate` and `DELETE /session/impersonation`.
    IMPERSONATE = "impersonate_user", UnsafeMethods, 60;
    /// Reads of the key list and audit log.
    READ_KEYS = "read_api_keys", UnsafeMethods, 300;
    /// Creating, rotating and revoking keys.
    MANAGE_KEYS = "manage_api_keys", UnsafeMethods, 60;
    /// `GET /agency/changelog`: the specification wants the CSRF token on this read.
    READ_CHANGELOG = "read_changelog", Always, 120;
    /// The user's budget of console runs (the agency's is checked by the handler).
    RUN_CONSOLE = "test_console", UnsafeMethods, RUNS_PER_MINUTE;
}

/// Replays per minute per webhook endpoint.
pub const REPLAYS_PER_ENDPOINT: u32 = 10;
/// Test fires per minute per webhook endpoint.
pub const TEST_FIRES_PER_ENDPOINT: u32 = 5;
/// Recoveries per minute per webhook endpoint.
pub const RECOVERIES_PER_ENDPOINT: u32 = 2;

/// Whether `name` is an endpoint name a key's override may refer to.
pub fn is_budgeted_name(name: &str) -> bool {
    ALL.iter().any(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(name: &str) -> &'static Endpoint {
        ALL.iter()
            .copied()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no endpoint {name}"))
    }

    fn agency_budgets(name: &str) -> Vec<(&'static str, u32)> {
        endpoint(name)
            .agency_budgets
            .iter()
            .map(|b| (b.name, b.limit))
            .collect()
    }

    /// The specification's per-key, per-endpoint table, entry by entry.
    #[test]
    fn per_key_budgets_are_the_specifications() {
        let table = [
            ("cancel_listing", 100),
            ("create_listing", 200),
            ("get_availability", 600),
            ("get_listing_orders", 300),
            ("get_webhook_catalog", 60),
            ("read_listing_single", 600),
            ("read_listings_list", 300),
            ("read_user_single", 600),
            ("read_users_list", 300),
            ("update_listing_status", 200),
            ("update_section", 200),
            ("upload_media", 20),
        ];
        for (name, limit) in table {
            assert_eq!(endpoint(name).key_limit, limit, "{name}");
        }
    }

    /// The specification's agency-level table: which endpoints spend which
    /// shared budget, and how large it is.
    #[test]
    fn agency_budgets_are_the_specifications() {
        assert_eq!(
            agency_budgets("create_listing"),
            [
                ("agency_listing_creates", 200),
                ("agency_listing_writes", 200)
            ]
        );
        for read in [
            "read_listings_list",
            "read_listing_single",
            "get_listing_orders",
        ] {
            assert_eq!(
                agency_budgets(read),
                [("agency_listing_reads", 500)],
                "{read}"
            );
        }
        for write in ["update_listing_status", "cancel_listing", "update_section"] {
            assert_eq!(
                agency_budgets(write),
                [("agency_listing_writes", 200)],
                "{write}"
            );
        }
        assert_eq!(agency_budgets("upload_media"), [("agency_uploads", 100)]);
        assert_eq!(
            agency_budgets("get_availability"),
            [("agency_availability", 300)]
        );
        assert_eq!(agency_budgets("read_users_list"), [("agency_users", 200)]);
        assert_eq!(
            agency_budgets("get_webhook_catalog"),
            [("agency_webhook_catalog", 60)]
        );
        assert_eq!(SANDBOX_BUDGET.limit, 500);
    }

    #[test]
    fn endpoint_names_are_unique_and_every_budget_is_listed() {
        let mut names: Vec<_> = ALL.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        for endpoint in ALL {
            for budget in endpoint.agency_budgets {
                assert!(
                    AGENCY_BUDGETS.contains(budget),
                    "{} spends an unlisted budget",
                    endpoint.name
                );
            }
        }
    }
}
