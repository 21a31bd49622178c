//! `GET /scheduling/availability`: the free shoot slots of the caller's
//! photographers for a package, in a window of at most 31 days, shown in the
//! requested time zone.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use storage::Timestamp;
use storage::listings::availability::{DEFAULT_TIMEZONE, Slot, SlotQuery};
use storage::rules::packages::{self, Package};
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ErrorEnvelope, FieldErrors};
use crate::extract::ApiQuery;
use crate::principal::Principal;
use crate::state::AppState;

/// Longest accepted address, as for listings.
pub(crate) const MAX_ADDRESS_CHARS: usize = 500;
/// The window when `to` is absent: this many days after `from`.
const DEFAULT_WINDOW_DAYS: i64 = 14;
/// The widest window a request may ask for.
const MAX_WINDOW_DAYS: i64 = 31;

/// Query of `GET /scheduling/availability`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AvailabilityQuery {
    /// The shoot's address (required, at most 500 characters).
    #[param(min_length = 1, max_length = 500, pattern = r"[^\s\x85]")]
    address: Option<String>,
    /// The package: essentials (60 minutes), standard (90) or premium (150).
    package: Option<String>,
    /// Window start, RFC 3339; default now.
    #[param(format = DateTime)]
    from: Option<String>,
    /// Window end, RFC 3339, after `from` and at most 31 days later; default `from` + 14 days.
    #[param(format = DateTime)]
    to: Option<String>,
    /// IANA time zone of the response's times; default America/Los_Angeles.
    timezone: Option<String>,
}

/// A free slot.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SlotOut {
    /// When the shoot would start, RFC 3339 in the requested zone's offset.
    pub start: String,
    /// When it would end (start plus the package's shoot length).
    pub end: String,
    /// The photographer who is free.
    pub photographer_id: String,
}

/// The free slots, by start and then photographer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AvailabilityOut {
    /// The slots.
    pub items: Vec<SlotOut>,
    /// The IANA zone `start` and `end` are written in.
    pub timezone: String,
}

/// A validated query.
struct Checked {
    package: &'static Package,
    from: Timestamp,
    to: Timestamp,
    timezone: Tz,
}

impl AvailabilityQuery {
    /// Checks every parameter, reporting all bad ones at once.
    fn check(&self, now: Timestamp) -> Result<Checked, ApiError> {
        let mut errors = FieldErrors::new();
        match self.address.as_deref().map(str::trim) {
            None | Some("") => {
                errors.insert("address".into(), "is required".into());
            }
            Some(address) if address.chars().count() > MAX_ADDRESS_CHARS => {
                errors.insert(
                    "address".into(),
                    format!("must be at most {MAX_ADDRESS_CHARS} characters"),
                );
            }
            Some(_) => {}
        }
        let package = match self.package.as_deref() {
            None => {
                errors.insert("package".into(), "is required".into());
                None
            }
            Some(key) => packages::find(key).or_else(|| {
                let keys = packages::keys().join(", ");
                errors.insert("package".into(), format!("must be one of {keys}"));
                None
            }),
        };
        let zone = self.timezone.as_deref().unwrap_or(DEFAULT_TIMEZONE);
        let timezone = noted(
            &mut errors,
            "timezone",
            zone.parse::<Tz>()
                .map_err(|_| "is not an IANA time zone".to_owned()),
        );
        let from = match self.from.as_deref() {
            None => Some(now),
            Some(text) => noted(&mut errors, "from", instant(text)),
        };
        let to = match (self.to.as_deref(), from) {
            (Some(text), _) => noted(&mut errors, "to", instant(text)),
            (None, Some(from)) => Some(from.plus_seconds(DEFAULT_WINDOW_DAYS * 86_400)),
            (None, None) => None,
        };
        if let (Some(from), Some(to)) = (from, to) {
            if to <= from {
                errors.insert("to".into(), "must be after from".into());
            } else if to > from.plus_seconds(MAX_WINDOW_DAYS * 86_400) {
                errors.insert(
                    "to".into(),
                    format!("must be at most {MAX_WINDOW_DAYS} days after from"),
                );
            }
        }
        match (package, from, to, timezone) {
            (Some(package), Some(from), Some(to), Some(timezone)) if errors.is_empty() => {
                Ok(Checked {
                    package,
                    from,
                    to,
                    timezone,
                })
            }
            _ => Err(ApiError::Validation(errors)),
        }
    }
}

/// The value of `result`, or `None` with its reason recorded under `field`.
fn noted<T>(errors: &mut FieldErrors, field: &str, result: Result<T, String>) -> Option<T> {
    result
        .map_err(|reason| errors.insert(field.to_owned(), reason))
        .ok()
}

/// An RFC 3339 time as an instant.
fn instant(text: &str) -> Result<Timestamp, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| Timestamp::from(at.with_timezone(&Utc)))
        .map_err(|_| "must be an RFC 3339 time, e.g. 2026-06-01T09:00:00-07:00".to_owned())
}

/// `at` as RFC 3339 with `zone`'s offset at that instant.
fn in_zone(at: Timestamp, zone: Tz) -> String {
    at.to_datetime()
        .with_timezone(&zone)
        .to_rfc3339_opts(SecondsFormat::Millis, false)
}

/// Lists the free shoot slots of the caller's active photographers.
#[utoipa::path(
    get,
    path = "/scheduling/availability",
    tag = "scheduling",
    operation_id = "get_availability",
    params(AvailabilityQuery),
    responses(
        (status = 200, description = "Free slots, by start then photographer", body = AvailabilityOut),
        (status = 401, description = "Missing, malformed, unknown, revoked or expired key", body = ErrorEnvelope),
        (status = 403, description = "The key lacks scheduling:read", body = ErrorEnvelope),
        (status = 422, description = "validation.failed: address, package, timezone, from or to", body = ErrorEnvelope),
    ),
    security(("api_key" = []), ("bearer" = []))
)]
pub(crate) async fn get_availability(
    State(state): State<AppState>,
    principal: Principal,
    ApiQuery(query): ApiQuery<AvailabilityQuery>,
) -> Result<Json<AvailabilityOut>, ApiError> {
    let checked = query.check(state.store().clock().now())?;
    let slots = state
        .store()
        .availability()
        .slots(
            &principal.tenant(),
            &SlotQuery {
                from: checked.from,
                to: checked.to,
                package: checked.package,
            },
        )
        .await?;
    let zone = checked.timezone;
    Ok(Json(AvailabilityOut {
        items: slots
            .into_iter()
            .map(
                |Slot {
                     start,
                     end,
                     photographer_id,
                 }| SlotOut {
                    start: in_zone(start, zone),
                    end: in_zone(end, zone),
                    photographer_id: photographer_id.to_string(),
                },
            )
            .collect(),
        timezone: zone.name().to_owned(),
    }))
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    #[test]
    fn times_carry_the_zone_offset() {
        let at = Timestamp::from_micros(1_780_329_600_000_000); // 2026-06-01T16:00:00Z
        assert_eq!(
            in_zone(at, Tz::from_str("America/Los_Angeles").unwrap()),
            "2026-06-01T09:00:00.000-07:00"
        );
        assert_eq!(in_zone(at, Tz::UTC), "2026-06-01T16:00:00.000+00:00");
    }
}
