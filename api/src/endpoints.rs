//! The policy table of the public routes: each endpoint's name (the one the
//! specification's per-key budgets use) and the scope it requires.

use storage::api_keys::Scope;

/// One public endpoint's policy.
#[derive(Debug)]
pub struct Endpoint {
    /// The specification's endpoint name, e.g. `read_users_list`.
    pub name: &'static str,
    /// The scope a key must hold.
    pub scope: Scope,
}

/// `GET /users`.
pub static READ_USERS_LIST: Endpoint = Endpoint {
    name: "read_users_list",
    scope: Scope::UsersRead,
};

/// `GET /users/{user_id}`.
pub static READ_USER_SINGLE: Endpoint = Endpoint {
    name: "read_user_single",
    scope: Scope::UsersRead,
};

/// `POST /listings`.
pub static CREATE_LISTING: Endpoint = Endpoint {
    name: "create_listing",
    scope: Scope::ListingsWrite,
};

/// `GET /listings`.
pub static READ_LISTINGS_LIST: Endpoint = Endpoint {
    name: "read_listings_list",
    scope: Scope::ListingsRead,
};

/// `GET /listings/{listing_number}`.
pub static READ_LISTING_SINGLE: Endpoint = Endpoint {
    name: "read_listing_single",
    scope: Scope::ListingsRead,
};

/// `GET /listings/{listing_number}/orders`.
pub static GET_LISTING_ORDERS: Endpoint = Endpoint {
    name: "get_listing_orders",
    scope: Scope::ListingsRead,
};

/// `PATCH /listings/{listing_number}/status`.
pub static UPDATE_LISTING_STATUS: Endpoint = Endpoint {
    name: "update_listing_status",
    scope: Scope::ListingsWrite,
};

/// `POST /listings/{listing_number}/cancel`.
pub static CANCEL_LISTING: Endpoint = Endpoint {
    name: "cancel_listing",
    scope: Scope::ListingsWrite,
};

/// `PATCH /listings/{listing_number}/sections/{section}`.
pub static UPDATE_SECTION: Endpoint = Endpoint {
    name: "update_section",
    scope: Scope::ListingsWrite,
};
