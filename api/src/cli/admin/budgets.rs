//! `admin set-agency-budgets`, and the NAME=PER_MINUTE flag syntax it shares
//! with `create-key --rate-limit`.

use std::collections::BTreeMap;

use clap::Args;
use serde_json::{Value, json};

use super::error::AdminError;
use super::open::existing_agency;
use crate::config::StorageArgs;

/// `admin set-agency-budgets`.
#[derive(Debug, Args)]
pub struct SetAgencyBudgets {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// BUDGET=PER_MINUTE (agency_listing_reads=1000), repeatable; none restores the defaults.
    #[arg(long = "budget")]
    budgets: Vec<String>,
}

/// Parses repeated NAME=PER_MINUTE flags, accepting only names `known` admits.
pub(super) fn parse_budgets(
    flag: &str,
    texts: &[String],
    known: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, u32>, AdminError> {
    let mut budgets = BTreeMap::new();
    for text in texts {
        let parsed = text
            .split_once('=')
            .and_then(|(name, limit)| Some((name.trim(), limit.trim().parse::<u32>().ok()?)));
        match parsed {
            Some((name, limit)) if limit > 0 && known(name) => {
                budgets.insert(name.to_owned(), limit);
            }
            _ => {
                return Err(AdminError::new(
                    "validation.failed",
                    format!(
                        "{flag} {text:?} must be NAME=PER_MINUTE with a known name and a positive budget"
                    ),
                ));
            }
        }
    }
    Ok(budgets)
}

/// `admin set-agency-budgets`.
pub(super) async fn set_agency_budgets(args: SetAgencyBudgets) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let budgets = parse_budgets("--budget", &args.budgets, |name| {
        crate::endpoints::AGENCY_BUDGETS
            .iter()
            .any(|b| b.name == name)
    })?;
    store
        .agencies()
        .set_rate_limit_overrides(&agency, &budgets)
        .await?;
    Ok(json!({"agency_id": agency, "budgets": budgets}))
}
