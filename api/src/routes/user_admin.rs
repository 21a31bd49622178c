//! Who may change whom: `GET /users/{user_id}/can-edit`, its batch form
//! `POST /users/batch-can-edit`, `PUT /users/{user_id}/role` and `/status`,
//! `POST /users` (also `/users/`) and `DELETE /users/team/{assistant_id}`.
//!
//! A key acts as the user who created it. That user may edit themself, the
//! users they manage, and, as an agency administrator (the agency's owner
//! role or a platform role), anyone of the agency. Sandbox keys read people
//! but never change them.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::Environment;
use storage::ids::UserId;
use storage::people::users::{Role, User};
use utoipa::ToSchema;

use super::users::UserOut;
use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Principal;
use crate::state::AppState;

/// Most users one batch asks about.
pub(crate) const MAX_BATCH: usize = 200;

/// The user the key acts as, if it is an active user of the tenant's agency.
pub(crate) async fn acting_user(state: &AppState, principal: &Principal) -> Option<User> {
    let id = principal.acting_user.as_ref()?;
    let user = state
        .store()
        .users()
        .get(&principal.tenant(), id)
        .await
        .ok()?;
    user.is_active.then_some(user)
}

/// Refuses a change to people made with a sandbox key. People belong to the
/// agency, not to an environment, so such a change would reach real users
/// while its events went to the sandbox outbox, unseen by live webhooks.
pub(crate) fn refuse_sandbox(principal: &Principal) -> Result<(), ApiError> {
    if principal.environment == Environment::Sandbox {
        return Err(ApiError::Forbidden(
            "Sandbox keys cannot change people; use a live key.".into(),
        ));
    }
    Ok(())
}

/// Whether `caller` may edit `target`.
pub(crate) fn may_edit(caller: Option<&User>, target: &User) -> bool {
    let Some(caller) = caller else {
        return false;
    };
    caller.id == target.id
        || target.manager_id.as_ref() == Some(&caller.id)
        || caller.role.is_administrator()
}

/// One of the tenant's users, never a platform identity; else `user_not_found`.
pub(crate) async fn agency_user(
    state: &AppState,
    principal: &Principal,
    user_id: &str,
) -> Result<User, ApiError> {
    let id = UserId::parse(user_id).ok_or(ApiError::NotFound(Resource::User))?;
    let user = state.store().users().get(&principal.tenant(), &id).await?;
    if user.role.is_platform() {
        return Err(ApiError::NotFound(Resource::User));
    }
    Ok(user)
}

/// Whether the caller may edit one user.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CanEditOut {
    /// The user asked about.
    pub user_id: String,
    /// True when the caller may change this user.
    pub can_edit: bool,
    /// `user_not_found` in a batch answer for an id that is not the agency's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Tells whether the caller may edit this user.
#[utoipa::path(
    get,
    path = "/users/{user_id}/can-edit",
    tag = "users",
    operation_id = "can_edit_user",
    params(("user_id" = String, Path, description = "The user's id")),
    responses(
        (status = 200, description = "The answer", body = CanEditOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:read", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn can_edit(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<CanEditOut>, ApiError> {
    let target = agency_user(&state, &principal, &user_id).await?;
    let caller = acting_user(&state, &principal).await;
    Ok(Json(CanEditOut {
        user_id: target.id.to_string(),
        can_edit: may_edit(caller.as_ref(), &target),
        error: None,
    }))
}

/// Body of `POST /users/batch-can-edit`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchCanEditIn {
    /// 1 to 200 user ids.
    #[schema(min_items = 1, max_items = 200)]
    user_ids: Vec<String>,
}

/// The batch answer, in the order asked.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchCanEditOut {
    /// One answer per id asked about.
    pub items: Vec<CanEditOut>,
}

/// Tells, for up to 200 users at once, whether the caller may edit each.
#[utoipa::path(
    post,
    path = "/users/batch-can-edit",
    tag = "users",
    operation_id = "batch_can_edit_users",
    request_body = BatchCanEditIn,
    responses(
        (status = 200, description = "One answer per id, in order; ids not of the agency answer can_edit false with error user_not_found", body = BatchCanEditOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:read", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: no ids or more than 200", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn batch_can_edit(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<BatchCanEditIn>,
) -> Result<Json<BatchCanEditOut>, ApiError> {
    if body.user_ids.is_empty() || body.user_ids.len() > MAX_BATCH {
        return Err(ApiError::field(
            "user_ids",
            format!("must hold 1 to {MAX_BATCH} ids"),
        ));
    }
    if let Some(index) = body.user_ids.iter().position(String::is_empty) {
        return Err(ApiError::field(
            format!("user_ids[{index}]"),
            "must not be empty",
        ));
    }
    let caller = acting_user(&state, &principal).await;
    let mut items = Vec::with_capacity(body.user_ids.len());
    for user_id in body.user_ids {
        let item = match agency_user(&state, &principal, &user_id).await {
            Ok(target) => CanEditOut {
                user_id,
                can_edit: may_edit(caller.as_ref(), &target),
                error: None,
            },
            Err(ApiError::NotFound(_)) => CanEditOut {
                user_id,
                can_edit: false,
                error: Some("user_not_found".into()),
            },
            Err(other) => return Err(other),
        };
        items.push(item);
    }
    Ok(Json(BatchCanEditOut { items }))
}

/// Body of `PUT /users/{user_id}/role`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleIn {
    /// photographer, agent, assistant or viewer.
    role: String,
}

/// Changes a user's role (administrators only).
#[utoipa::path(
    put,
    path = "/users/{user_id}/role",
    tag = "users",
    operation_id = "update_user_role",
    params(("user_id" = String, Path, description = "The user's id")),
    request_body = RoleIn,
    responses(
        (status = 200, description = "The user with the new role", body = UserOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:write or is a sandbox key; or its user is no administrator, or the target is the caller or an administrator", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: not a role, or an owner or platform role", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn update_role(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
    ApiJson(body): ApiJson<RoleIn>,
) -> Result<Json<UserOut>, ApiError> {
    refuse_sandbox(&principal)?;
    let target = agency_user(&state, &principal, &user_id).await?;
    let role = Role::parse(body.role.trim()).ok_or_else(|| {
        ApiError::field("role", "must be photographer, agent, assistant or viewer")
    })?;
    if role.is_administrator() {
        return Err(ApiError::field(
            "role",
            "owner and platform roles are not assigned through the API",
        ));
    }
    let caller = acting_user(&state, &principal).await;
    match &caller {
        Some(caller) if caller.role.is_administrator() => {
            if caller.id == target.id {
                return Err(ApiError::Forbidden(
                    "Administrators do not change their own role.".into(),
                ));
            }
            if target.role.is_administrator() {
                return Err(ApiError::Forbidden(
                    "An administrator's role is not changed through the API.".into(),
                ));
            }
        }
        _ => {
            return Err(ApiError::Forbidden(
                "Only an agency administrator changes roles.".into(),
            ));
        }
    }
    let user = state
        .store()
        .users()
        .set_role(&principal.tenant(), &target.id, role)
        .await?;
    Ok(Json(user.into()))
}

/// Body of `PUT /users/{user_id}/status`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusIn {
    /// `active` or `suspended`.
    status: String,
}

/// Suspends or reactivates a user (administrators only; not oneself, not
/// another administrator). Suspending emits `user.deactivated`.
#[utoipa::path(
    put,
    path = "/users/{user_id}/status",
    tag = "users",
    operation_id = "update_user_status",
    params(("user_id" = String, Path, description = "The user's id")),
    request_body = StatusIn,
    responses(
        (status = 200, description = "The user with its new state", body = UserOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:write or is a sandbox key; or its user is no administrator, or the target is the caller or an administrator", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: status is not active or suspended", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn update_status(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
    ApiJson(body): ApiJson<StatusIn>,
) -> Result<Json<UserOut>, ApiError> {
    refuse_sandbox(&principal)?;
    let target = agency_user(&state, &principal, &user_id).await?;
    let active = match body.status.trim().to_ascii_lowercase().as_str() {
        "active" => true,
        "suspended" => false,
        _ => return Err(ApiError::field("status", "must be active or suspended")),
    };
    let caller = acting_user(&state, &principal).await;
    match &caller {
        Some(caller) if caller.role.is_administrator() => {
            if caller.id == target.id {
                return Err(ApiError::Forbidden(
                    "Administrators do not suspend themselves.".into(),
                ));
            }
            if target.role.is_administrator() {
                return Err(ApiError::Forbidden(
                    "Another administrator is not suspended through the API.".into(),
                ));
            }
        }
        _ => {
            return Err(ApiError::Forbidden(
                "Only an agency administrator changes a user's status.".into(),
            ));
        }
    }
    let user = state
        .store()
        .users()
        .set_active(&principal.tenant(), &target.id, active)
        .await?;
    Ok(Json(user.into()))
}

/// Takes an assistant off their manager's team: deactivated and unlinked.
/// Allowed to the assistant's manager and to administrators. Emits
/// `user.hierarchy_changed` (and `user.deactivated`).
#[utoipa::path(
    delete,
    path = "/users/team/{assistant_id}",
    tag = "users",
    operation_id = "remove_team_member",
    params(("assistant_id" = String, Path, description = "The assistant's user id")),
    responses(
        (status = 200, description = "The assistant as it now is", body = UserOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:write or is a sandbox key, or its user is neither the manager nor an administrator", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: the user is not an assistant", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn remove_from_team(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(assistant_id): ApiPath<String>,
) -> Result<Json<UserOut>, ApiError> {
    refuse_sandbox(&principal)?;
    let target = agency_user(&state, &principal, &assistant_id).await?;
    if target.role != Role::Assistant {
        return Err(ApiError::field("assistant_id", "is not an assistant"));
    }
    let caller = acting_user(&state, &principal).await;
    let allowed = caller.as_ref().is_some_and(|caller| {
        caller.role.is_administrator() || target.manager_id.as_ref() == Some(&caller.id)
    });
    if !allowed {
        return Err(ApiError::Forbidden(
            "Only the assistant's manager or an administrator removes them from a team.".into(),
        ));
    }
    let user = state
        .store()
        .users()
        .remove_from_team(&principal.tenant(), &target.id)
        .await?;
    Ok(Json(user.into()))
}

/// Body of `POST /users`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UserIn {
    /// Login email, unique on the platform.
    #[schema(
        max_length = 254,
        pattern = r"^[^@\s\x85]+@[^@\s\x85.][^@\s\x85]*\.[^@\s\x85]*[^@\s\x85.]$"
    )]
    email: String,
    /// At least 8 characters with upper case, lower case, a digit and a
    /// special character; omit it to have the user choose one at first login.
    #[schema(
        max_length = 128,
        pattern = r"^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])(?=.*[!-/:-@\[-`{-~]).{8,}$"
    )]
    password: Option<String>,
    /// photographer, agent, assistant or viewer.
    role: String,
    /// Display name.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Given name.
    #[schema(max_length = 200)]
    first_name: Option<String>,
    /// Family name.
    #[schema(max_length = 200)]
    last_name: Option<String>,
    /// Brokerage.
    #[schema(max_length = 200)]
    brokerage_name: Option<String>,
    /// Office.
    #[schema(max_length = 200)]
    office_name: Option<String>,
    /// The user's manager (default: the administrator creating it).
    #[schema(pattern = r"^usr_[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$")]
    manager_id: Option<String>,
}

/// A created account.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AccountOut {
    /// The user.
    #[serde(flatten)]
    pub user: UserOut,
    /// Given name.
    pub first_name: Option<String>,
    /// Family name.
    pub last_name: Option<String>,
    /// Brokerage.
    pub brokerage_name: Option<String>,
    /// Office.
    pub office_name: Option<String>,
    /// False until the email address is confirmed.
    pub is_verified: bool,
    /// The account's time zone.
    pub timezone: String,
    /// Logins so far.
    pub login_count: i32,
    /// True when no password was given: the user is e-mailed a link (one
    /// use, one hour) to choose one, and can ask for a new link with
    /// `POST /session/password-reset`.
    pub password_reset_required: bool,
}

/// Creates a user in the caller's agency (administrators only). Also served
/// at `POST /users/`, the specification's spelling.
#[utoipa::path(
    post,
    path = "/users",
    tag = "users",
    operation_id = "create_user",
    request_body = UserIn,
    responses(
        (status = 201, description = "The account; never its password. Without a password, the user is e-mailed a one-time link to choose one", body = AccountOut),
        (status = 400, description = "validation.invalid_value: an invalid email, password, role or manager, or an email already taken (details.fields)", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:write or is a sandbox key, or its user is no administrator", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: an unknown field or a value of the wrong type", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn create_user(
    State(state): State<AppState>,
    principal: Principal,
    ApiJson(body): ApiJson<UserIn>,
) -> Result<(axum::http::StatusCode, Json<AccountOut>), ApiError> {
    refuse_sandbox(&principal)?;
    let caller = acting_user(&state, &principal).await;
    let Some(caller) = caller.filter(|c| c.role.is_administrator()) else {
        return Err(ApiError::Forbidden(
            "Only an agency administrator creates users.".into(),
        ));
    };
    let invalid = |field: &str, reason: &str| {
        ApiError::InvalidValues(std::collections::BTreeMap::from([(
            field.to_owned(),
            reason.to_owned(),
        )]))
    };
    let role = Role::parse(body.role.trim())
        .ok_or_else(|| invalid("role", "must be photographer, agent, assistant or viewer"))?;
    let manager_id = match body.manager_id.as_deref() {
        None => Some(caller.id.clone()),
        Some(text) => Some(
            UserId::parse(text)
                .ok_or_else(|| invalid("manager_id", "does not name a user of this agency"))?,
        ),
    };
    let new = storage::people::accounts::NewAccount {
        email: body.email,
        password: body.password,
        role: Some(role),
        name: body.name,
        first_name: body.first_name,
        last_name: body.last_name,
        brokerage_name: body.brokerage_name,
        office_name: body.office_name,
        manager_id,
        password_link_base: Some(super::session::password_link_base(&state)),
    };
    let account = match state
        .store()
        .accounts()
        .create(&principal.tenant().agency_id, new)
        .await
    {
        Ok(account) => account,
        Err(storage::StorageError::Fields(fields)) => {
            return Err(ApiError::InvalidValues(
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            ));
        }
        Err(storage::StorageError::Conflict { field }) => {
            return Err(invalid(field, "is already taken"));
        }
        Err(storage::StorageError::Invalid { field, reason }) => {
            return Err(invalid(field, &reason));
        }
        Err(other) => return Err(other.into()),
    };
    if let Some(link) = &account.password_link {
        super::session::send_password_link(&state, link).await;
    }
    Ok((
        axum::http::StatusCode::CREATED,
        Json(AccountOut {
            user: account.user.into(),
            first_name: account.first_name,
            last_name: account.last_name,
            brokerage_name: account.brokerage_name,
            office_name: account.office_name,
            is_verified: account.is_verified,
            timezone: account.timezone,
            login_count: account.login_count,
            password_reset_required: account.password_reset_required,
        }),
    ))
}
