//! `admin create-agency`, `create-user` and `set-password`: the accounts an
//! operator sets up before anyone can sign in or hold a key.

use clap::Args;
use serde_json::{Value, json};
use storage::ids::UserId;
use storage::people::agencies::AgencyKind;
use storage::people::users::{NewUser, Role};

use super::error::AdminError;
use super::open::existing_agency;
use crate::config::StorageArgs;

/// `admin create-agency`.
#[derive(Debug, Args)]
pub struct CreateAgency {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency's name.
    #[arg(long)]
    name: String,
    /// media_agency or broker; the owner user gets this role.
    #[arg(long, default_value = "media_agency", value_parser = ["media_agency", "broker"])]
    kind: String,
}

/// `admin create-user`.
#[derive(Debug, Args)]
pub struct CreateUser {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// One of super_admin, admin, media_agency, broker, photographer, agent, assistant, viewer.
    #[arg(long)]
    role: String,
    /// Login email, unique on the platform.
    #[arg(long)]
    email: String,
    /// Display name.
    #[arg(long)]
    name: Option<String>,
    /// The manager's user id (usr_…), in the same agency.
    #[arg(long)]
    manager: Option<String>,
}

/// `admin set-password`.
#[derive(Debug, Args)]
pub struct SetPassword {
    #[command(flatten)]
    storage: StorageArgs,
    /// The agency id (agc_…).
    #[arg(long)]
    agency: String,
    /// The user id (usr_…).
    #[arg(long)]
    user: String,
}

/// `admin create-agency`.
pub(super) async fn create_agency(args: CreateAgency) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let kind = AgencyKind::parse(&args.kind).ok_or_else(|| {
        AdminError::new("validation.failed", "kind must be media_agency or broker")
    })?;
    let (agency, owner) = store.agencies().create(&args.name, kind).await?;
    Ok(json!({"agency_id": agency.id, "owner_user_id": owner.id}))
}

/// `admin set-password`.
pub(super) async fn set_password(args: SetPassword) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let user =
        UserId::parse(&args.user).ok_or_else(|| AdminError::new("not_found", "no such user"))?;
    let mut password = String::new();
    std::io::stdin().read_line(&mut password).map_err(|err| {
        AdminError::new("validation.failed", format!("reading the password: {err}"))
    })?;
    let password = password.trim_end_matches(['\r', '\n']);
    store
        .accounts()
        .set_password(&agency, &user, password)
        .await?;
    Ok(json!({"user_id": user}))
}

/// `admin create-user`.
pub(super) async fn create_user(args: CreateUser) -> Result<Value, AdminError> {
    let store = args.storage.open_store().await?;
    let agency = existing_agency(&store, &args.agency).await?;
    let role = Role::parse(&args.role).ok_or_else(|| {
        let names: Vec<&str> = Role::ALL.iter().map(|r| r.as_str()).collect();
        AdminError::new(
            "validation.failed",
            format!("role must be one of {}", names.join(", ")),
        )
    })?;
    let manager_id = match args.manager.as_deref() {
        None => None,
        Some(text) => Some(
            UserId::parse(text)
                .ok_or_else(|| AdminError::new("validation.failed", "manager is not a user id"))?,
        ),
    };
    let user = store
        .users()
        .create(
            &agency,
            NewUser {
                role,
                email: Some(args.email),
                name: args.name,
                manager_id,
            },
        )
        .await?;
    Ok(json!({"user_id": user.id}))
}
