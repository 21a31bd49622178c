//! The signed token of a progress URL: a browser's `EventSource` cannot send
//! headers, so an upload answers with a URL whose `token` opens that one
//! operation's stream for an hour, for the tenant it was issued to. Format:
//! `<agency>.<environment>.<expires>.<signature>`, the signature an HMAC
//! under a key derived from the master key.

use storage::ids::{AgencyId, OperationId};
use storage::{Environment, Store, Tenant};

/// How long a progress URL's token is accepted.
pub const TOKEN_LIFETIME_SECONDS: i64 = 3600;

fn token_message(tenant: &Tenant, operation_id: &str, expires: i64) -> String {
    format!(
        "progress|{operation_id}|{}|{}|{expires}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
}

/// A token opening `operation_id`'s stream to `tenant` for an hour.
pub fn issue(store: &Store, tenant: &Tenant, operation_id: &OperationId) -> String {
    let expires = store.clock().now().as_unix_seconds() + TOKEN_LIFETIME_SECONDS;
    let signature =
        store
            .derived_keys()
            .url_signature(&token_message(tenant, operation_id.as_str(), expires));
    format!(
        "{}.{}.{expires}.{signature}",
        tenant.agency_id,
        tenant.environment.as_str()
    )
}

/// The tenant a token was issued to, if it is genuine, unexpired and for
/// this operation.
pub fn verify(store: &Store, operation_id: &str, token: &str) -> Option<Tenant> {
    let mut parts = token.splitn(4, '.');
    let agency = AgencyId::parse(parts.next()?)?;
    let environment = match parts.next()? {
        "live" => Environment::Live,
        "sandbox" => Environment::Sandbox,
        _ => return None,
    };
    let expires: i64 = parts.next()?.parse().ok()?;
    let signature = parts.next()?;
    if expires < store.clock().now().as_unix_seconds() {
        return None;
    }
    let tenant = Tenant::new(agency, environment);
    store
        .derived_keys()
        .verify_url_signature(&token_message(&tenant, operation_id, expires), signature)
        .then_some(tenant)
}
