//! Who is calling, as the guard (`middleware::guard`) established it: an API
//! key's [`Principal`], a developer-settings [`SessionPrincipal`], or the
//! tenant a signed progress URL was issued to, together a [`Credential`].
//! Handlers take these as extractors; the route table decides which a route
//! accepts, so a handler can only receive what its guard attached.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use storage::api_keys::Scope;
use storage::ids::{AgencyId, ApiKeyId, UserId};
use storage::people::sessions::Session;
use storage::people::users::User;
use storage::{Environment, Tenant};

use crate::error::ApiError;

/// Who is calling with an API key: the key's agency, environment and scopes,
/// and the user the key acts for. Shared, not copied: the key cache holds
/// one per key, and every request of that key (its guard, its extensions,
/// its handler) reads the same one.
#[derive(Clone, Debug)]
pub struct Principal(Arc<KeyHolder>);

/// What a [`Principal`] says of its key; read through the principal.
#[derive(Debug)]
pub struct KeyHolder {
    /// The key used.
    pub key_id: ApiKeyId,
    /// The agency the key is bound to.
    pub agency_id: AgencyId,
    /// Live or sandbox, from the key.
    pub environment: Environment,
    /// What the key permits.
    pub scopes: Vec<Scope>,
    /// The user who created the key; its requests act as that user.
    pub acting_user: Option<UserId>,
    /// Per-endpoint budgets replacing the defaults for this key.
    pub rate_limit_overrides: BTreeMap<String, u32>,
    /// Agency budgets an operator set for this agency, replacing the defaults.
    pub agency_rate_limit_overrides: BTreeMap<String, u32>,
}

impl std::ops::Deref for Principal {
    type Target = KeyHolder;

    fn deref(&self) -> &KeyHolder {
        &self.0
    }
}

impl From<KeyHolder> for Principal {
    fn from(holder: KeyHolder) -> Self {
        Self(Arc::new(holder))
    }
}

impl Principal {
    /// The principal of a stored key (whether it may be used now, and for
    /// what, is the guard's question).
    pub fn of(credential: &storage::api_keys::Credential) -> Self {
        let key = &credential.key;
        KeyHolder {
            key_id: key.id.clone(),
            agency_id: key.agency_id.clone(),
            environment: key.environment,
            scopes: key.scopes.clone(),
            acting_user: key.created_by.clone(),
            rate_limit_overrides: key.rate_limit_overrides.clone(),
            agency_rate_limit_overrides: credential.agency_rate_limit_overrides.clone(),
        }
        .into()
    }

    /// The tenant every repository call of this request uses.
    pub fn tenant(&self) -> Tenant {
        Tenant::new(self.agency_id.clone(), self.environment)
    }
}

/// A request authenticated by a session of the developer settings.
#[derive(Clone, Debug)]
pub struct SessionPrincipal {
    /// The session, with the user it acts as.
    pub session: Session,
    /// The environment the request acts in: live unless the request's
    /// `X-Environment` header chose the sandbox (the portal's switch).
    pub environment: Environment,
}

impl SessionPrincipal {
    /// The user the session acts as (the target while impersonating).
    pub fn user(&self) -> &User {
        &self.session.user
    }

    /// The user's agency in the environment the request chose (live by
    /// default).
    pub fn tenant(&self) -> Tenant {
        Tenant::new(self.session.user.agency_id.clone(), self.environment)
    }
}

/// Whatever credential opened the request.
#[derive(Clone, Debug)]
pub enum Credential {
    /// An API key.
    Key(Principal),
    /// A session cookie (with its CSRF token where the route wants one).
    Session(SessionPrincipal),
    /// The signed token of a progress URL, issued to this tenant for the
    /// operation in the path.
    ProgressToken(Tenant),
}

impl Credential {
    /// The tenant the request acts in.
    pub fn tenant(&self) -> Tenant {
        match self {
            Self::Key(principal) => principal.tenant(),
            Self::Session(session) => session.tenant(),
            Self::ProgressToken(tenant) => tenant.clone(),
        }
    }

    /// The user the request acts as: a key's creator, a session's user.
    pub fn acting_user(&self) -> Option<UserId> {
        match self {
            Self::Key(principal) => principal.acting_user.clone(),
            Self::Session(session) => Some(session.user().id.clone()),
            Self::ProgressToken(_) => None,
        }
    }
}

/// Reads what the guard attached, or fails as a route wired without it.
fn attached<T: Clone + Send + Sync + 'static>(parts: &Parts, what: &str) -> Result<T, ApiError> {
    parts.extensions.get::<T>().cloned().ok_or_else(|| {
        ApiError::internal(format!("route is missing the guard that attaches {what}"))
    })
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        attached(parts, "an API key")
    }
}

impl<S: Send + Sync> FromRequestParts<S> for SessionPrincipal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        attached(parts, "a session")
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Credential {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        attached(parts, "a credential")
    }
}
