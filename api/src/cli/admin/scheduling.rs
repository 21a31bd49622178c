//! `admin set-working-hours`: a photographer's weekly hours, which bound the
//! slots the availability routes offer.

use clap::Args;
use serde_json::{Value, json};
use storage::ids::UserId;
use storage::listings::availability::{DEFAULT_TIMEZONE, WorkingHours};

use super::error::AdminError;
use super::open::existing_agency;
use crate::config::StorageArgs;

/// `admin set-working-hours`.
#[derive(Debug, Args)]
pub struct SetWorkingHours {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The photographer's user id (usr_…).
    #[arg(long)]
    photographer: String,
    /// DAY=HH:MM-HH:MM (DAY is mon … sun), repeatable; none restores the
    /// default week (Monday to Friday 09:00-17:00, America/Los_Angeles).
    #[arg(long = "hours")]
    hours: Vec<String>,
    /// The IANA time zone of the hours; default America/Los_Angeles.
    #[arg(long)]
    timezone: Option<String>,
}

/// `admin set-working-hours`.
pub(super) async fn set_working_hours(args: SetWorkingHours) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let photographer = UserId::parse(&args.photographer)
        .ok_or_else(|| AdminError::new("not_found", "no such user"))?;
    if args.hours.is_empty() && args.timezone.is_some() {
        // The default week has its own zone; a zone alone would be ignored.
        return Err(AdminError::new(
            "validation.failed",
            "--timezone needs at least one --hours",
        ));
    }
    let blocks = args
        .hours
        .iter()
        .map(|text| {
            WorkingHours::parse(text).ok_or_else(|| {
                AdminError::new(
                    "validation.failed",
                    format!("--hours {text:?} is not DAY=HH:MM-HH:MM (mon=09:00-17:00)"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let timezone = args.timezone.as_deref().unwrap_or(DEFAULT_TIMEZONE);
    let week = store
        .availability()
        .set_working_hours(&agency, &photographer, &blocks, timezone)
        .await?;
    Ok(json!({
        "photographer_id": photographer,
        "hours": week.blocks.iter().map(|b| b.to_spec()).collect::<Vec<_>>(),
        "timezone": week.timezone.name(),
    }))
}
