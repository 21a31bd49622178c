//! The changelog and the versioning signals derived from it:
//! `GET /agency/changelog` (session plus `X-CSRF-Token`), the deprecated
//! `GET /tours/{listing_number}` (answers like the listing read, with
//! `Deprecation`, `Sunset` and `Link` headers) and the removed `GET /tours`
//! (410 Gone in the envelope).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use storage::page::Position;
use utoipa::{IntoParams, ToSchema};

use super::listings::read::{ListingDetailOut, read_listing};
use crate::changelog::{self, ChangeType, Entry};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiPath, ApiQuery};
use crate::pagination::{CursorScope, PageOut, page_limit, page_of_all};
use crate::principal::{Principal, SessionPrincipal};
use crate::state::AppState;

/// `GET /api/v1/tours`: removed (410 `endpoint_removed`, naming its
/// changelog entry and what to call instead).
pub(crate) async fn list_tours_removed(State(state): State<AppState>) -> ApiError {
    removed(&state, &changelog::TOURS_LIST_REMOVED)
}

fn changelog_url(state: &AppState, entry: &Entry) -> String {
    format!(
        "{}/api/v1/agency/changelog#{}",
        state.urls().base_url,
        entry.id
    )
}

fn removed(state: &AppState, entry: &Entry) -> ApiError {
    ApiError::EndpointRemoved {
        changelog_url: changelog_url(state, entry),
        replacement: entry
            .migration
            .unwrap_or("the routes listed in the changelog"),
    }
}

/// The RFC 9745 `Deprecation`, RFC 8594 `Sunset` and `Link` headers of a
/// deprecated route.
pub fn deprecation_headers(state: &AppState, entry: &Entry) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let mut put = |name: HeaderName, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.append(name, value);
        }
    };
    if let Some(since) = changelog::unix_seconds(entry.date) {
        put(HeaderName::from_static("deprecation"), format!("@{since}"));
    }
    if let Some(sunset) = entry.removal_date.and_then(changelog::http_date) {
        put(HeaderName::from_static("sunset"), sunset);
    }
    put(
        header::LINK,
        format!(
            "<{}>; rel=\"deprecation\"; type=\"application/json\"",
            changelog_url(state, entry)
        ),
    );
    headers
}

/// Query of the changelog.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChangelogQuery {
    /// 1 to 200, default 50.
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// added, changed, deprecated, removed, fixed or security.
    pub change_type: Option<String>,
}

/// One changelog entry.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ChangelogEntryOut {
    /// Stable id; deprecation links point to it.
    pub id: String,
    /// `YYYY-MM-DD`.
    pub date: String,
    /// added, changed, deprecated, removed, fixed or security.
    pub change_type: String,
    /// One line.
    pub title: String,
    /// What changed and what to do.
    pub description: String,
    /// The routes concerned.
    pub routes: Vec<String>,
    /// For deprecations and removals: what to use instead.
    pub migration: Option<String>,
    /// For deprecations: when the route stops being served.
    pub removal_date: Option<String>,
}

impl From<&Entry> for ChangelogEntryOut {
    fn from(entry: &Entry) -> Self {
        Self {
            id: entry.id.to_owned(),
            date: entry.date.to_owned(),
            change_type: entry.change_type.as_str().to_owned(),
            title: entry.title.to_owned(),
            description: entry.description.to_owned(),
            routes: entry.routes.iter().map(|r| (*r).to_owned()).collect(),
            migration: entry.migration.map(str::to_owned),
            removal_date: entry.removal_date.map(str::to_owned),
        }
    }
}

/// The API's changelog, newest first.
#[utoipa::path(
    get,
    path = "/agency/changelog",
    tag = "developer",
    operation_id = "read_changelog",
    params(ChangelogQuery),
    responses(
        (status = 200, description = "A page of entries, newest first", body = PageOut<ChangelogEntryOut>),
        (status = 401, description = "auth.session_required: no session (API keys are not accepted)", body = ErrorEnvelope),
        (status = 403, description = "auth.csrf_failed: no or a wrong X-CSRF-Token", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: limit or change_type; invalid_cursor", body = ErrorEnvelope),
    ),
    security(("session_cookie" = [], "csrf_token" = []))
)]
pub(crate) async fn read_changelog(
    State(state): State<AppState>,
    principal: SessionPrincipal,
    ApiQuery(query): ApiQuery<ChangelogQuery>,
) -> Result<Json<PageOut<ChangelogEntryOut>>, ApiError> {
    let limit = page_limit(query.limit)?;
    let change_type = match query.change_type.as_deref() {
        None => None,
        Some(text) => Some(ChangeType::parse(text).ok_or_else(|| {
            let names: Vec<&str> = ChangeType::ALL.iter().map(|t| t.as_str()).collect();
            ApiError::field(
                "change_type",
                format!("must be one of {}", names.join(", ")),
            )
        })?),
    };
    let matching: Vec<&Entry> = changelog::ENTRIES
        .iter()
        .rev()
        .copied()
        .filter(|entry| change_type.is_none_or(|wanted| entry.change_type == wanted))
        .collect();
    let scope = CursorScope {
        collection: "changelog",
        tenant: principal.tenant(),
        filters: format!(
            "change_type={}",
            change_type.map(ChangeType::as_str).unwrap_or("")
        ),
    };
    let after = state
        .cursors()
        .open_param(&scope, query.cursor.as_deref())?;
    // Newest first: an entry's place in that order is its position.
    let numbered: Vec<(usize, &Entry)> = matching.into_iter().enumerate().collect();
    let page = page_of_all(
        numbered,
        |(place, entry)| Position {
            created_at: i64::try_from(*place).unwrap_or(i64::MAX),
            id: entry.id.to_owned(),
        },
        after.as_ref(),
        limit,
    );
    Ok(Json(state.cursors().envelope(
        &scope,
        page,
        |(_, entry)| ChangelogEntryOut::from(entry),
    )))
}

/// Deprecated: reads a listing under its old name, tour. Use
/// `GET /listings/{listing_number}`.
#[utoipa::path(
    get,
    path = "/tours/{listing_number}",
    tag = "listings",
    operation_id = "read_tour",
    params(("listing_number" = String, Path, description = "The listing's number")),
    responses(
        (status = 200, description = "The listing, with Deprecation, Sunset and Link headers", body = ListingDetailOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks listings:read", body = ErrorEnvelope),
        (status = 404, description = "listing_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn read_tour(
    State(state): State<AppState>,
    principal: Principal,
    path: ApiPath<String>,
) -> Response {
    let headers = deprecation_headers(&state, &changelog::TOUR_READ_DEPRECATED);
    // Remembered so the agency's owner is e-mailed before the removal.
    let used = state
        .store()
        .deprecations()
        .record_use(
            &principal.tenant().agency_id,
            &changelog::TOUR_READ_DEPRECATED,
        )
        .await;
    if let Err(err) = used {
        tracing::warn!(%err, "could not record a call to a deprecated route");
    }
    let mut response = read_listing(State(state), principal, path)
        .await
        .into_response();
    response.headers_mut().extend(headers);
    response
}
