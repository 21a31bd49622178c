//! `GET` and `PATCH /users/{user_id}/preferences`: a user's five display
//! preferences, defaults applied. Readable and changeable by the user, an
//! agency administrator, or the user's manager; changed with live keys only.

use std::collections::BTreeMap;
use std::str::FromStr;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use storage::people::preferences::{
    DATE_TIME_FORMATS, MEASUREMENT_UNITS, PreferenceChanges, Preferences, THEMES,
};
use storage::people::users::User;
use utoipa::ToSchema;

use super::user_admin::{acting_user, agency_user, may_edit, refuse_sandbox};
use crate::error::{ApiError, ErrorEnvelope};
use crate::extract::{ApiJson, ApiPath};
use crate::principal::Principal;
use crate::state::AppState;

/// A user's preferences.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct PreferencesOut {
    /// `friendly`, `us` or `uk`.
    pub date_time_format: String,
    /// IANA time zone name.
    pub timezone: String,
    /// BCP 47 language tag.
    pub language: String,
    /// `imperial` or `metric`.
    pub measurement_unit: String,
    /// `light`, `dark` or `system`.
    pub theme: String,
}

impl From<Preferences> for PreferencesOut {
    fn from(p: Preferences) -> Self {
        Self {
            date_time_format: p.date_time_format,
            timezone: p.timezone,
            language: p.language,
            measurement_unit: p.measurement_unit,
            theme: p.theme,
        }
    }
}

/// Body of the PATCH: any subset of the fields.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreferencesPatch {
    date_time_format: Option<String>,
    timezone: Option<String>,
    language: Option<String>,
    measurement_unit: Option<String>,
    theme: Option<String>,
}

/// The user, an agency administrator, or the user's manager; anyone else 403.
async fn authorize(state: &AppState, principal: &Principal, target: &User) -> Result<(), ApiError> {
    let caller = acting_user(state, principal).await;
    if may_edit(caller.as_ref(), target) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(
            "Only the user, an agency administrator or the user's manager may do this.".into(),
        ))
    }
}

/// Reads a user's preferences, defaults applied.
#[utoipa::path(
    get,
    path = "/users/{user_id}/preferences",
    tag = "users",
    operation_id = "read_user_preferences",
    params(("user_id" = String, Path, description = "The user's id")),
    responses(
        (status = 200, description = "The five preferences", body = PreferencesOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:read, or its user may not see these preferences", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn get_preferences(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
) -> Result<Json<PreferencesOut>, ApiError> {
    let user = agency_user(&state, &principal, &user_id).await?;
    authorize(&state, &principal, &user).await?;
    let preferences = state
        .store()
        .preferences()
        .get(&principal.tenant(), &user.id)
        .await?;
    Ok(Json(preferences.into()))
}

/// Checks the values of a change; every bad field is named.
fn validate(patch: PreferencesPatch) -> Result<PreferenceChanges, ApiError> {
    let mut bad = BTreeMap::new();
    let mut one_of = |field: &str, value: &Option<String>, allowed: &[&str]| {
        if let Some(value) = value
            && !allowed.contains(&value.as_str())
        {
            bad.insert(
                field.to_owned(),
                format!("must be one of {}", allowed.join(", ")),
            );
        }
    };
    one_of(
        "date_time_format",
        &patch.date_time_format,
        &DATE_TIME_FORMATS,
    );
    one_of(
        "measurement_unit",
        &patch.measurement_unit,
        &MEASUREMENT_UNITS,
    );
    one_of("theme", &patch.theme, &THEMES);
    if let Some(zone) = &patch.timezone
        && chrono_tz::Tz::from_str(zone).is_err()
    {
        bad.insert(
            "timezone".into(),
            "must be an IANA time zone name, e.g. Europe/Berlin".into(),
        );
    }
    let language = match &patch.language {
        None => None,
        Some(tag) => match language_tags::LanguageTag::parse(tag)
            .ok()
            .filter(|parsed| parsed.validate().is_ok())
        {
            // Stored in its canonical form (en-us → en-US).
            Some(parsed) => Some(
                parsed
                    .canonicalize()
                    .map(|c| c.to_string())
                    .unwrap_or_else(|_| parsed.to_string()),
            ),
            None => {
                bad.insert(
                    "language".into(),
                    "must be a BCP 47 language tag, e.g. en-US".into(),
                );
                None
            }
        },
    };
    if !bad.is_empty() {
        return Err(ApiError::InvalidValues(bad));
    }
    Ok(PreferenceChanges {
        date_time_format: patch.date_time_format,
        timezone: patch.timezone,
        language,
        measurement_unit: patch.measurement_unit,
        theme: patch.theme,
    })
}

/// Changes some of a user's preferences; returns all five.
#[utoipa::path(
    patch,
    path = "/users/{user_id}/preferences",
    tag = "users",
    operation_id = "update_user_preferences",
    params(("user_id" = String, Path, description = "The user's id")),
    request_body = PreferencesPatch,
    responses(
        (status = 200, description = "The five preferences after the change", body = PreferencesOut),
        (status = 400, description = "validation.invalid_value: a value outside its field's set (details.fields)", body = ErrorEnvelope),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks users:write or is a sandbox key, or its user may not change these preferences", body = ErrorEnvelope),
        (status = 404, description = "user_not_found", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: an unknown field or a value of the wrong type", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn update_preferences(
    State(state): State<AppState>,
    principal: Principal,
    ApiPath(user_id): ApiPath<String>,
    ApiJson(patch): ApiJson<PreferencesPatch>,
) -> Result<Json<PreferencesOut>, ApiError> {
    refuse_sandbox(&principal)?;
    let user = agency_user(&state, &principal, &user_id).await?;
    authorize(&state, &principal, &user).await?;
    let changes = validate(patch)?;
    let preferences = state
        .store()
        .preferences()
        .update(&principal.tenant(), &user.id, &changes)
        .await?;
    Ok(Json(preferences.into()))
}
