//! `admin record-payment`, `schedule-shoot` and `set-cancellation-fees`: the
//! steps of a listing's life that happen outside the API (a payment arrives,
//! a shoot is booked) and the fees that apply when one is cancelled.

use clap::Args;
use serde_json::{Value, json};
use storage::ids::{AgencyId, UserId};
use storage::listings::SANDBOX_PREFIX;
use storage::rules::cancellation::FeeTier;
use storage::{Environment, Tenant, Timestamp};

use super::error::AdminError;
use super::open::{existing_agency, open_platform};
use crate::config::StorageArgs;

/// How long a command waits for its events' dispatch jobs to be pushed.
const DISPATCH_FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// `admin record-payment`.
#[derive(Debug, Args)]
pub struct RecordPayment {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The listing number (a `snd_` number is in the sandbox pool).
    #[arg(long)]
    listing: String,
    /// The payment provider's reference; generated when absent.
    #[arg(long)]
    reference: Option<String>,
}

/// `admin schedule-shoot`.
#[derive(Debug, Args)]
pub struct ScheduleShoot {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The listing number.
    #[arg(long)]
    listing: String,
    /// When the shoot starts, RFC 3339 (2026-12-01T15:00:00Z).
    #[arg(long)]
    at: String,
}

/// `admin set-cancellation-fees`.
#[derive(Debug, Args)]
pub struct SetCancellationFees {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The owner's user id (usr_…).
    #[arg(long)]
    owner: String,
    /// HOURS:AMOUNT (amount in cents of USD), repeatable; none restores the default tier.
    #[arg(long = "tier")]
    tiers: Vec<String>,
}

/// The tenant a listing number belongs to: `snd_` numbers are the sandbox pool.
fn listing_tenant(agency: AgencyId, listing_number: &str) -> Tenant {
    let environment = if listing_number
        .to_ascii_lowercase()
        .starts_with(SANDBOX_PREFIX)
    {
        Environment::Sandbox
    } else {
        Environment::Live
    };
    Tenant::new(agency, environment)
}

/// `admin record-payment`.
pub(super) async fn record_payment(args: RecordPayment) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let store = platform.store.clone();
    let agency = existing_agency(&store, &args.agency).await?;
    let tenant = listing_tenant(agency, &args.listing);
    let payment = store
        .orders()
        .record_payment(&tenant, &args.listing, args.reference)
        .await?;
    platform.dispatch.flush(DISPATCH_FLUSH).await;
    Ok(
        json!({"listing_number": payment.listing.listing_number, "activated": payment.listing.is_activated()}),
    )
}

/// `admin schedule-shoot`.
pub(super) async fn schedule_shoot(args: ScheduleShoot) -> Result<Value, AdminError> {
    let platform = open_platform(&args.storage).await?;
    let store = platform.store.clone();
    let agency = existing_agency(&store, &args.agency).await?;
    let at = chrono::DateTime::parse_from_rfc3339(&args.at).map_err(|_| {
        AdminError::new(
            "validation.failed",
            "--at must be an RFC 3339 time, e.g. 2026-12-01T15:00:00Z",
        )
    })?;
    let tenant = listing_tenant(agency, &args.listing);
    let scheduled = store
        .appointments()
        .schedule(
            &tenant,
            &args.listing,
            Timestamp::from(at.with_timezone(&chrono::Utc)),
        )
        .await?;
    platform.dispatch.flush(DISPATCH_FLUSH).await;
    Ok(json!({
        "listing_number": scheduled.appointment.listing_number,
        "scheduled_at": scheduled.appointment.scheduled_at.to_rfc3339(),
    }))
}

/// `admin set-cancellation-fees`.
pub(super) async fn set_cancellation_fees(args: SetCancellationFees) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let owner = UserId::parse(&args.owner)
        .ok_or_else(|| AdminError::new("validation.failed", "owner is not a user id"))?;
    let tiers = args
        .tiers
        .iter()
        .map(|text| {
            let parsed = text.split_once(':').and_then(|(hours, amount)| {
                Some((hours.trim().parse().ok()?, amount.trim().parse().ok()?))
            });
            parsed
                .map(|(hours_before, amount)| FeeTier {
                    hours_before,
                    amount,
                    currency: "USD".to_owned(),
                })
                .ok_or_else(|| {
                    AdminError::new(
                        "validation.failed",
                        format!("tier {text:?} is not HOURS:AMOUNT"),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    store
        .cancellation_fees()
        .set(&agency, &owner, &tiers)
        .await?;
    let tiers = store.cancellation_fees().for_owner(&agency, &owner).await?;
    Ok(json!({
        "owner_user_id": owner,
        "tiers": tiers.iter().map(|t| json!({"hours_before": t.hours_before, "amount": t.amount, "currency": t.currency})).collect::<Vec<_>>(),
    }))
}
