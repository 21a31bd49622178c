//! The policy table of the routes: each key endpoint's name (the one the
//! specification's per-key budgets use), the scope it requires, the
//! agency-level budgets it spends, and its per-key budget per minute; and
//! for session routes ([`SessionEndpoint`]) the CSRF rule and the user's
//! budget.

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

/// `POST /listings`: 200 per minute per agency.
pub static LISTING_CREATES: AgencyBudget = AgencyBudget {
    name: "agency_listing_creates",
    limit: 200,
};
/// Listing reads other than creation: 500 per minute per agency.
pub static LISTING_READS: AgencyBudget = AgencyBudget {
    name: "agency_listing_reads",
    limit: 500,
};
/// Every listing write together: 200 per minute per agency.
pub static LISTING_WRITES: AgencyBudget = AgencyBudget {
    name: "agency_listing_writes",
    limit: 200,
};
/// `POST /media/upload`: 100 per minute per agency.
pub static UPLOADS: AgencyBudget = AgencyBudget {
    name: "agency_uploads",
    limit: 100,
};
/// `GET /scheduling/availability`: 300 per minute per agency.
pub static AVAILABILITY: AgencyBudget = AgencyBudget {
    name: "agency_availability",
    limit: 300,
};
/// `GET /users`: 200 per minute per agency.
pub static USERS: AgencyBudget = AgencyBudget {
    name: "agency_users",
    limit: 200,
};
/// `GET /webhooks/events`: 60 per minute per agency.
pub static WEBHOOK_CATALOG: AgencyBudget = AgencyBudget {
    name: "agency_webhook_catalog",
    limit: 60,
};
/// Webhook endpoint management and delivery reads: 120 per minute per agency.
pub static WEBHOOK_MANAGEMENT: AgencyBudget = AgencyBudget {
    name: "agency_webhook_management",
    limit: 120,
};
/// All sandbox traffic of an agency: 500 per minute, apart from live.
pub static SANDBOX_BUDGET: AgencyBudget = AgencyBudget {
    name: "agency_sandbox",
    limit: 500,
};

/// `GET /users`.
pub static READ_USERS_LIST: Endpoint = Endpoint {
    name: "read_users_list",
    scope: Scope::UsersRead,
    agency_budgets: &[&USERS],
    key_limit: 300,
};

/// `GET /users/{user_id}`.
pub static READ_USER_SINGLE: Endpoint = Endpoint {
    name: "read_user_single",
    scope: Scope::UsersRead,
    agency_budgets: &[&USERS],
    key_limit: 600,
};

/// `GET /users/{user_id}/preferences`.
pub static READ_USER_PREFERENCES: Endpoint = Endpoint {
    name: "read_user_preferences",
    scope: Scope::UsersRead,
    agency_budgets: &[&USERS],
    key_limit: 600,
};

/// `PATCH /users/{user_id}/preferences`.
pub static UPDATE_USER_PREFERENCES: Endpoint = Endpoint {
    name: "update_user_preferences",
    scope: Scope::UsersWrite,
    agency_budgets: &[&USERS],
    key_limit: 200,
};

/// `GET /users/{user_id}/can-edit`.
pub static CAN_EDIT_USER: Endpoint = Endpoint {
    name: "can_edit_user",
    scope: Scope::UsersRead,
    agency_budgets: &[&USERS],
    key_limit: 600,
};

/// `POST /users/batch-can-edit`.
pub static BATCH_CAN_EDIT_USERS: Endpoint = Endpoint {
    name: "batch_can_edit_users",
    scope: Scope::UsersRead,
    agency_budgets: &[&USERS],
    key_limit: 300,
};

/// `PUT /users/{user_id}/role`.
pub static UPDATE_USER_ROLE: Endpoint = Endpoint {
    name: "update_user_role",
    scope: Scope::UsersWrite,
    agency_budgets: &[&USERS],
    key_limit: 200,
};

/// `POST /media/upload` and `POST /listings/{listing_number}/media`.
pub static UPLOAD_MEDIA: Endpoint = Endpoint {
    name: "upload_media",
    scope: Scope::MediaWrite,
    agency_budgets: &[&UPLOADS],
    key_limit: 20,
};

/// `POST /media/archive` and `GET /media/archive/{operation_id}`.
pub static ARCHIVE_MEDIA: Endpoint = Endpoint {
    name: "archive_media",
    scope: Scope::MediaWrite,
    agency_budgets: &[&UPLOADS],
    key_limit: 60,
};

/// `GET /progress/{operation_id}`: progress streams of media operations.
pub static READ_PROGRESS: Endpoint = Endpoint {
    name: "read_progress",
    scope: Scope::MediaWrite,
    agency_budgets: &[],
    key_limit: 600,
};

/// `POST /agency/sandbox/seed`: a sandbox key re-seeds its fixtures.
pub static SEED_SANDBOX: Endpoint = Endpoint {
    name: "seed_sandbox",
    scope: Scope::ListingsWrite,
    agency_budgets: &[&LISTING_WRITES],
    key_limit: 10,
};

/// `POST /users`.
pub static CREATE_USER: Endpoint = Endpoint {
    name: "create_user",
    scope: Scope::UsersWrite,
    agency_budgets: &[&USERS],
    key_limit: 60,
};

/// `PUT /users/{user_id}/status`.
pub static UPDATE_USER_STATUS: Endpoint = Endpoint {
    name: "update_user_status",
    scope: Scope::UsersWrite,
    agency_budgets: &[&USERS],
    key_limit: 200,
};

/// `DELETE /users/team/{assistant_id}`.
pub static REMOVE_TEAM_MEMBER: Endpoint = Endpoint {
    name: "remove_team_member",
    scope: Scope::UsersWrite,
    agency_budgets: &[&USERS],
    key_limit: 200,
};

/// `POST /listings`.
pub static CREATE_LISTING: Endpoint = Endpoint {
    name: "create_listing",
    scope: Scope::ListingsWrite,
    agency_budgets: &[&LISTING_CREATES, &LISTING_WRITES],
    key_limit: 200,
};

/// `GET /listings`.
pub static READ_LISTINGS_LIST: Endpoint = Endpoint {
    name: "read_listings_list",
    scope: Scope::ListingsRead,
    agency_budgets: &[&LISTING_READS],
    key_limit: 300,
};

/// `GET /listings/{listing_number}`.
pub static READ_LISTING_SINGLE: Endpoint = Endpoint {
    name: "read_listing_single",
    scope: Scope::ListingsRead,
    agency_budgets: &[&LISTING_READS],
    key_limit: 600,
};

/// `GET /listings/{listing_number}/orders`.
pub static GET_LISTING_ORDERS: Endpoint = Endpoint {
    name: "get_listing_orders",
    scope: Scope::ListingsRead,
    agency_budgets: &[&LISTING_READS],
    key_limit: 300,
};

/// `PATCH /listings/{listing_number}/status`.
pub static UPDATE_LISTING_STATUS: Endpoint = Endpoint {
    name: "update_listing_status",
    scope: Scope::ListingsWrite,
    agency_budgets: &[&LISTING_WRITES],
    key_limit: 200,
};

/// `POST /listings/{listing_number}/cancel`.
pub static CANCEL_LISTING: Endpoint = Endpoint {
    name: "cancel_listing",
    scope: Scope::ListingsWrite,
    agency_budgets: &[&LISTING_WRITES],
    key_limit: 100,
};

/// `PATCH /listings/{listing_number}/sections/{section}`; the agency table's
/// "section PATCH 200 per key" is this per-key budget.
pub static UPDATE_SECTION: Endpoint = Endpoint {
    name: "update_section",
    scope: Scope::ListingsWrite,
    agency_budgets: &[&LISTING_WRITES],
    key_limit: 200,
};

/// `GET /scheduling/availability`.
pub static GET_AVAILABILITY: Endpoint = Endpoint {
    name: "get_availability",
    scope: Scope::SchedulingRead,
    agency_budgets: &[&AVAILABILITY],
    key_limit: 600,
};

/// `GET /webhooks/events`.
pub static GET_WEBHOOK_CATALOG: Endpoint = Endpoint {
    name: "get_webhook_catalog",
    scope: Scope::WebhooksRead,
    agency_budgets: &[&WEBHOOK_CATALOG],
    key_limit: 60,
};

/// `POST /webhooks/endpoints`.
pub static CREATE_WEBHOOK_ENDPOINT: Endpoint = Endpoint {
    name: "create_webhook_endpoint",
    scope: Scope::WebhooksWrite,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 30,
};

/// `GET /webhooks/endpoints` and `GET /webhooks/endpoints/{endpoint_id}`.
pub static READ_WEBHOOK_ENDPOINTS: Endpoint = Endpoint {
    name: "read_webhook_endpoints",
    scope: Scope::WebhooksRead,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 120,
};

/// Update, disable, enable, rotate the secret of, or delete an endpoint.
pub static UPDATE_WEBHOOK_ENDPOINT: Endpoint = Endpoint {
    name: "update_webhook_endpoint",
    scope: Scope::WebhooksWrite,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 60,
};

/// An endpoint's deliveries and one delivery with its attempts.
pub static READ_WEBHOOK_DELIVERIES: Endpoint = Endpoint {
    name: "read_webhook_deliveries",
    scope: Scope::WebhooksRead,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 120,
};

/// `POST /webhooks/deliveries/{delivery_id}/replay` (also 10 per minute per
/// webhook endpoint).
pub static REPLAY_WEBHOOK_DELIVERY: Endpoint = Endpoint {
    name: "replay_webhook_delivery",
    scope: Scope::WebhooksWrite,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 60,
};

/// `POST /webhooks/endpoints/{endpoint_id}/test` (also 5 per minute per
/// webhook endpoint).
pub static TEST_WEBHOOK_ENDPOINT: Endpoint = Endpoint {
    name: "test_webhook_endpoint",
    scope: Scope::WebhooksWrite,
    agency_budgets: &[&WEBHOOK_MANAGEMENT],
    key_limit: 60,
};

/// Replays per minute per webhook endpoint.
pub const REPLAYS_PER_ENDPOINT: u32 = 10;
/// Test fires per minute per webhook endpoint.
pub const TEST_FIRES_PER_ENDPOINT: u32 = 5;
/// Recoveries per minute per webhook endpoint.
pub const RECOVERIES_PER_ENDPOINT: u32 = 2;

/// Every endpoint with a per-key budget, for validating overrides.
pub static ALL: [&Endpoint; 29] = [
    &UPLOAD_MEDIA,
    &ARCHIVE_MEDIA,
    &READ_PROGRESS,
    &SEED_SANDBOX,
    &READ_USERS_LIST,
    &READ_USER_SINGLE,
    &READ_USER_PREFERENCES,
    &UPDATE_USER_PREFERENCES,
    &CAN_EDIT_USER,
    &BATCH_CAN_EDIT_USERS,
    &UPDATE_USER_ROLE,
    &UPDATE_USER_STATUS,
    &CREATE_USER,
    &REMOVE_TEAM_MEMBER,
    &CREATE_LISTING,
    &READ_LISTINGS_LIST,
    &READ_LISTING_SINGLE,
    &GET_LISTING_ORDERS,
    &UPDATE_LISTING_STATUS,
    &CANCEL_LISTING,
    &UPDATE_SECTION,
    &GET_AVAILABILITY,
    &GET_WEBHOOK_CATALOG,
    &CREATE_WEBHOOK_ENDPOINT,
    &READ_WEBHOOK_ENDPOINTS,
    &UPDATE_WEBHOOK_ENDPOINT,
    &READ_WEBHOOK_DELIVERIES,
    &REPLAY_WEBHOOK_DELIVERY,
    &TEST_WEBHOOK_ENDPOINT,
];

/// Every agency-level budget, for validating an agency's overrides.
pub static AGENCY_BUDGETS: [&AgencyBudget; 9] = [
    &LISTING_CREATES,
    &LISTING_READS,
    &LISTING_WRITES,
    &UPLOADS,
    &AVAILABILITY,
    &USERS,
    &WEBHOOK_CATALOG,
    &WEBHOOK_MANAGEMENT,
    &SANDBOX_BUDGET,
];

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
