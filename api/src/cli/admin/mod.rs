//! `api admin …`: operator commands. Each takes the storage settings of `serve`
//! (`--data-dir`, `DATABASE_URL`), works while the server runs, and prints one
//! JSON object on stdout. Failures print `{"error": {code, message}}` on stderr
//! and exit with status 1. This module holds the command list and the
//! dispatch; each command group lives in its own child module.

mod agencies;
mod budgets;
mod error;
mod keys;
mod listings;
mod open;
mod ops;
mod probes;
mod scheduling;
mod webhooks;

use std::process::ExitCode;

use clap::Subcommand;
use serde_json::json;

pub use agencies::{CreateAgency, CreateUser, SetPassword};
pub use budgets::SetAgencyBudgets;
pub use keys::{CreateKey, KeyCommand};
pub use listings::{RecordPayment, ScheduleShoot, SetCancellationFees};
pub use ops::OpsCommand;
pub use probes::EnqueueProbe;
pub use scheduling::SetWorkingHours;
pub use webhooks::{EndpointUpdate, WebhookAction, WebhookEndpoints};

/// Operator commands.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Create an agency and its owner user → {"agency_id", "owner_user_id"}.
    CreateAgency(CreateAgency),
    /// Create a user in an agency → {"user_id"}.
    CreateUser(CreateUser),
    /// Set a user's password, read from standard input (never an argument) → {"user_id"}.
    SetPassword(SetPassword),
    /// Issue an API key; the plaintext is shown once → {"key_id", "key"}.
    CreateKey(CreateKey),
    /// An agency's keys (never their plaintext) and their audit log → {"items", "audit"}.
    ListKeys(KeyCommand),
    /// Rotate a key: a new one is shown once; the old one works 30 more days → {"key_id", "key", "rotated"}.
    RotateKey(KeyCommand),
    /// Revoke a key at once, on every replica sharing Redis → {"key_id", "status"}.
    RevokeKey(KeyCommand),
    /// Record the payment of a listing's invoice, activating and billing it → {"listing_number", "activated"}.
    RecordPayment(RecordPayment),
    /// Create or move a listing's shoot → {"listing_number", "scheduled_at"}.
    ScheduleShoot(ScheduleShoot),
    /// Set an owner's cancellation fee tiers → {"owner_user_id", "tiers"}.
    SetCancellationFees(SetCancellationFees),
    /// Set a photographer's weekly working hours → {"photographer_id", "hours", "timezone"}.
    SetWorkingHours(SetWorkingHours),
    /// Replace an agency's budgets → {"agency_id", "budgets"}.
    SetAgencyBudgets(SetAgencyBudgets),
    /// Push canary jobs that report their progress (or, with --fail, go dead at once) → {"operation_id", "job_id", "probes"}.
    EnqueueProbe(EnqueueProbe),
    /// Manage an agency's webhook endpoints: list, get, update, disable, enable,
    /// rotate-secret, delete, deliveries → {"items"} or {"endpoint"[, "secret"]}.
    WebhookEndpoints(WebhookEndpoints),
}

/// Runs an `ops` command and prints its result like an admin command's.
pub async fn run_ops(command: OpsCommand) -> ExitCode {
    print(ops::run(command).await)
}

/// Runs an admin command and prints its result.
pub async fn run(command: AdminCommand) -> ExitCode {
    let result = match command {
        AdminCommand::CreateAgency(args) => agencies::create_agency(args).await,
        AdminCommand::CreateUser(args) => agencies::create_user(args).await,
        AdminCommand::SetPassword(args) => agencies::set_password(args).await,
        AdminCommand::CreateKey(args) => keys::create_key(args).await,
        AdminCommand::RecordPayment(args) => listings::record_payment(args).await,
        AdminCommand::ScheduleShoot(args) => listings::schedule_shoot(args).await,
        AdminCommand::SetCancellationFees(args) => listings::set_cancellation_fees(args).await,
        AdminCommand::SetWorkingHours(args) => scheduling::set_working_hours(args).await,
        AdminCommand::SetAgencyBudgets(args) => budgets::set_agency_budgets(args).await,
        AdminCommand::EnqueueProbe(args) => probes::enqueue_probe(args).await,
        AdminCommand::ListKeys(args) => keys::list_keys(args).await,
        AdminCommand::RotateKey(args) => keys::rotate_key(args).await,
        AdminCommand::RevokeKey(args) => keys::revoke_key(args).await,
        AdminCommand::WebhookEndpoints(args) => webhooks::webhook_endpoints(args).await,
    };
    print(result)
}

/// Prints a command's JSON on stdout, or its error on stderr with status 1.
fn print(result: Result<serde_json::Value, error::AdminError>) -> ExitCode {
    match result {
        Ok(output) => {
            println!("{output}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!(
                "{}",
                json!({"error": {"code": err.code, "message": err.message}})
            );
            ExitCode::FAILURE
        }
    }
}
