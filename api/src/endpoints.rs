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
