//! The policy table of the public routes: each endpoint's name (the one the
//! specification's per-key budgets use), the scope it requires, the
//! agency-level budgets it spends, and its per-key budget per minute.

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

/// Every endpoint with a per-key budget, for validating overrides.
pub static ALL: [&Endpoint; 9] = [
    &READ_USERS_LIST,
    &READ_USER_SINGLE,
    &CREATE_LISTING,
    &READ_LISTINGS_LIST,
    &READ_LISTING_SINGLE,
    &GET_LISTING_ORDERS,
    &UPDATE_LISTING_STATUS,
    &CANCEL_LISTING,
    &UPDATE_SECTION,
];

/// Endpoint names the specification budgets but whose routes other parts of the
/// API serve (uploads, availability, the webhook catalog); overrides may name them.
pub static OTHER_BUDGETED_NAMES: [&str; 3] =
    ["upload_media", "get_availability", "get_webhook_catalog"];

/// Every agency-level budget, for validating an agency's overrides.
pub static AGENCY_BUDGETS: [&AgencyBudget; 8] = [
    &LISTING_CREATES,
    &LISTING_READS,
    &LISTING_WRITES,
    &UPLOADS,
    &AVAILABILITY,
    &USERS,
    &WEBHOOK_CATALOG,
    &SANDBOX_BUDGET,
];

/// Whether `name` is an endpoint name a key's override may refer to.
pub fn is_budgeted_name(name: &str) -> bool {
    ALL.iter().any(|e| e.name == name) || OTHER_BUDGETED_NAMES.contains(&name)
}
