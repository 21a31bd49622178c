//! The agency's people: `GET /users` (oldest first, role and active filters,
//! cursor pagination) and `GET /users/{user_id}`.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::ids::UserId;
use storage::people::users::{Role, User, UserFilter};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorEnvelope, Resource};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit};
use crate::principal::Principal;
use crate::state::AppState;

/// A user as the API shows it. Field names are the specification's own,
/// including its camelCase `createdAt` and `managerId`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct UserOut {
    /// The user's id.
    pub id: String,
    /// One of media_agency, broker, photographer, agent, assistant, viewer.
    pub role: String,
    /// False once deactivated.
    pub is_active: bool,
    /// Creation time, RFC 3339 UTC.
    #[serde(rename = "createdAt")]
    pub created_at: String,
    /// The user's manager in the agency hierarchy.
    #[serde(rename = "managerId")]
    pub manager_id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Login email.
    pub email: Option<String>,
}

impl From<User> for UserOut {
    fn from(user: User) -> Self {
        Self {
            id: user.id.to_string(),
            role: user.role.as_str().to_owned(),
            is_active: user.is_active,
            created_at: user.created_at.to_rfc3339(),
            manager_id: user.manager_id.map(|id| id.to_string()),
            name: user.name,
            email: user.email,
        }
    }
}

/// Query of `GET /users`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct UserListQuery {
    /// Only users with this role. The platform roles super_admin and admin are refused.
    role: Option<String>,
    /// `true`: active only; `false`: deactivated only; omitted: both.
    active: Option<String>,
    /// The `next_cursor` of the previous page.
    cursor: Option<String>,
    /// Page size, 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<i64>,
}

impl UserListQuery {
    fn filter(&self) -> Result<UserFilter, ApiError> {
        let role = match self.role.as_deref() {
            None => None,
            Some(text) => match Role::parse(text) {
                Some(role) if role.is_platform() => {
                    return Err(ApiError::field("role", "platform roles are not listed"));
                }
                Some(role) => Some(role),
                None => return Err(ApiError::field("role", "is not a known role")),
            },
        };
        let active = match self.active.as_deref() {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(_) => return Err(ApiError::field("active", "must be true or false")),
        };
        Ok(UserFilter { role, active })
    }
}

/// Lists the users of the caller's agency hierarchy, oldest first.
#[utoipa::path(
    get,
    path = "/users",
    tag = "users",
    operation_id = "read_users_list",
    params(UserListQuery),
    responses(
        (status = 200, description = "A page of users", body = PageOut<UserOut>),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:read", body = ErrorEnvelope),
        (status = 422, description = "Invalid filter, limit or cursor", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn list_users(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<UserListQuery>,
) -> Result<Json<PageOut<UserOut>>, ApiError> {
    let filter = query.filter()?;
    let limit = page_limit(query.limit)?;
    let scope = CursorScope {
        collection: "users",
        tenant: principal.tenant(),
        filters: format!(
            "role={};active={}",
            filter.role.map(Role::as_str).unwrap_or(""),
            filter.active.map(|a| a.to_string()).unwrap_or_default()
        ),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    let page = state
        .store()
        .users()
        .list(&scope.tenant, &filter, after.as_ref(), limit)
        .await?;
    Ok(Json(state.cursors().envelope(&scope, page, UserOut::from)))
}

/// Reads one user of the caller's agency.
#[utoipa::path(
    get,
    path = "/users/{user_id}",
    tag = "users",
    operation_id = "read_user_single",
    params(("user_id" = String, Path, description = "The user's id")),
    responses(
        (status = 200, description = "The user", body = UserOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:read", body = ErrorEnvelope),
        (status = 404, description = "user_not_found: no such user in the caller's agency", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn get_user(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<UserOut>, ApiError> {
    let id = UserId::parse(&user_id).ok_or(ApiError::NotFound(Resource::User))?;
    let user = state.store().users().get(&principal.tenant(), &id).await?;
    if user.role.is_platform() {
        // Platform identities are not part of any agency's hierarchy.
        return Err(ApiError::NotFound(Resource::User));
    }
    Ok(Json(user.into()))
}
