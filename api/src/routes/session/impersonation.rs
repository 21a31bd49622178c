//! Impersonation: `POST /users/{user_id}/impersonate` switches a session to
//! act as a user ranked below its real user, and `DELETE
//! /session/impersonation` returns it to that real user.

use axum::Json;
use axum::extract::State;
use storage::ids::UserId;
use storage::people::users::Role;

use super::sign_in::{SessionOut, session_out};
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::ApiPath;
use crate::principal::SessionPrincipal;
use crate::state::AppState;

/// Switches the session to act as another user: the real user must be a
/// broker or higher and strictly above the target's role.
#[utoipa::path(
    post,
    path = "/users/{user_id}/impersonate",
    tag = "sessions",
    operation_id = "impersonate_user",
    params(("user_id" = String, Path, description = "The user to act as")),
    responses(
        (status = 200, description = "The session, now acting as the user", body = SessionOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed, or permission_denied: the caller is below broker, not strictly above the target, or the target is deactivated", body = ErrorEnvelope),
        (status = 404, description = "user_not_found, also for another agency's user", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn impersonate(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<SessionOut>, ApiError> {
    let session = &principal.session;
    let real = match &session.impersonator_id {
        None => session.user.clone(),
        Some(id) => state.store().users().by_id(id).await?,
    };
    let target_id = UserId::parse(&user_id).ok_or(ApiError::NotFound(Resource::User))?;
    // Platform identities serve every agency; everyone else stays in their own.
    let target = if real.role.is_platform() {
        state.store().users().by_id(&target_id).await?
    } else {
        let tenant = storage::Tenant::new(real.agency_id.clone(), storage::Environment::Live);
        state.store().users().get(&tenant, &target_id).await?
    };
    check_impersonation(real.role, &target)?;
    let switched = state
        .store()
        .sessions()
        .impersonate(session, &target.id)
        .await?;
    tracing::info!(
        session_id = %session.id,
        impersonator_id = %real.id,
        user_id = %target.id,
        "impersonation started"
    );
    Ok(Json(session_out(&state, switched)))
}

/// The impersonation rules: broker or higher, strictly above the target, and
/// the target still active.
fn check_impersonation(real: Role, target: &storage::people::users::User) -> Result<(), ApiError> {
    if real.rank() < Role::Broker.rank() {
        return Err(ApiError::Forbidden(
            "Only a broker or a higher role may impersonate.".to_owned(),
        ));
    }
    if real.rank() <= target.role.rank() {
        return Err(ApiError::Forbidden(format!(
            "A {} may impersonate only roles below their own, not a {}.",
            real.as_str(),
            target.role.as_str()
        )));
    }
    if !target.is_active {
        return Err(ApiError::Forbidden(
            "A deactivated user cannot be impersonated.".to_owned(),
        ));
    }
    Ok(())
}

/// Returns the session to its real user.
#[utoipa::path(
    delete,
    path = "/session/impersonation",
    tag = "sessions",
    operation_id = "end_impersonation",
    responses(
        (status = 200, description = "The session, acting as its real user again", body = SessionOut),
        (status = 401, description = "auth.session_required", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn end_impersonation(
    State(state): State<AppState>,
    principal: SessionPrincipal,
) -> Result<Json<SessionOut>, ApiError> {
    let session = state
        .store()
        .sessions()
        .end_impersonation(&principal.session)
        .await?;
    Ok(Json(session_out(&state, session)))
}

#[cfg(test)]
mod tests {
    use storage::ids::{AgencyId, UserId};
    use storage::people::users::User;

    use super::*;

    fn user(role: Role, is_active: bool) -> User {
        User {
            id: UserId::generate(),
            agency_id: AgencyId::generate(),
            role,
            email: None,
            name: None,
            manager_id: None,
            is_active,
            created_at: storage::Timestamp::from_micros(0),
        }
    }

    #[test]
    fn brokers_and_above_impersonate_strictly_lower_roles() {
        assert!(check_impersonation(Role::Broker, &user(Role::Agent, true)).is_ok());
        assert!(check_impersonation(Role::MediaAgency, &user(Role::Broker, true)).is_ok());
        assert!(check_impersonation(Role::SuperAdmin, &user(Role::Admin, true)).is_ok());
        assert!(check_impersonation(Role::Broker, &user(Role::Broker, true)).is_err());
        assert!(check_impersonation(Role::Photographer, &user(Role::Viewer, true)).is_err());
        assert!(check_impersonation(Role::Broker, &user(Role::MediaAgency, true)).is_err());
        assert!(check_impersonation(Role::Admin, &user(Role::Agent, false)).is_err());
    }
}
