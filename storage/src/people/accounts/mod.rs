//! Users created through the API with their account fields: names, office,
//! a password (argon2) or a reset forced at first login, and the creation
//! defaults (active, unverified, America/Los_Angeles, no logins yet). The
//! one-time links that set a password are in [`password_links`].

mod link;
mod password;
mod password_links;

pub use crate::rules::passwords::{MAX_PASSWORD_CHARS, password_problem};
pub use link::{PASSWORD_LINK_LIFETIME_SECONDS, PasswordLink, PasswordLinkPurpose};
use password::hash_password;

use crate::background::outbox::insert_events;
use crate::db::{in_transaction, write_on_pool};
use crate::ids::{AgencyId, UserId};
use crate::records::user::User;
pub use crate::rules::new_account::{self, MAX_FIELD_CHARS, NewAccount};
use crate::{Entity, Result, StorageError, Store};

/// A created account.
#[derive(Clone, Debug)]
pub struct Account {
    /// The user.
    pub user: User,
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
    /// True when no password was set: one is chosen at first login.
    pub password_reset_required: bool,
    /// The link e-mailed to choose that password, when one was asked for.
    pub password_link: Option<PasswordLink>,
}

/// Accounts repository; see [`Store::accounts`].
pub struct Accounts<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// Accounts created through the API.
    pub fn accounts(&self) -> Accounts<'_> {
        Accounts { store: self }
    }
}

impl Accounts<'_> {
    /// Creates an account in `agency`. Field problems come back together as
    /// [`StorageError::Fields`]; a taken email as a conflict on `email`.
    pub async fn create(&self, agency: &AgencyId, new: NewAccount) -> Result<Account> {
        let (email, problems) = new_account::check(&new);
        let (Some(email), Some(role), true) = (email, new.role, problems.is_empty()) else {
            return Err(StorageError::Fields(problems));
        };
        let password_hash = match new.password {
            None => None,
            Some(password) => Some(hash_password(password).await?),
        };
        let now = self.store.clock().now();
        let user = User {
            id: UserId::generate(),
            agency_id: agency.clone(),
            role,
            email: Some(email),
            name: new.name.clone(),
            manager_id: new.manager_id.clone(),
            is_active: true,
            created_at: now,
        };
        let link = match (&password_hash, &new.password_link_base) {
            (None, Some(base)) => Some(self.prepare_link(PasswordLinkPurpose::FirstPassword, base)),
            _ => None,
        };
        let tenant = crate::Tenant::new(agency.clone(), crate::Environment::Live);
        let mut emitted = Vec::new();
        let inserted = in_transaction!(self.store.db(), |tx| {
            let inserted = sqlx::query(
                "insert into users (id, agency_id, role, email, name, manager_id, is_active, password_hash,
                     created_at, first_name, last_name, brokerage_name, office_name)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            )
            .bind(&user.id)
            .bind(&user.agency_id)
            .bind(user.role.as_str())
            .bind(&user.email)
            .bind(&user.name)
            .bind(&user.manager_id)
            .bind(true)
            .bind(&password_hash)
            .bind(now)
            .bind(&new.first_name)
            .bind(&new.last_name)
            .bind(&new.brokerage_name)
            .bind(&new.office_name)
            .execute(&mut *tx)
            .await
            .map(|_| ());
            if let (Ok(()), Some(link)) = (&inserted, &link) {
                link::record_link!(tx, link, &user.id, &user.agency_id).await?;
            }
            if inserted.is_ok() {
                let events = crate::people::users::joined_events(&user);
                emitted = insert_events(&mut *tx, &tenant, now, events).await?;
            }
            inserted
        });
        match inserted {
            Ok(()) => self.store.announce(&emitted),
            Err(err) if StorageError::is_unique_violation(&err) => {
                return Err(StorageError::Conflict { field: "email" });
            }
            Err(err) if StorageError::is_foreign_key_violation(&err) => {
                return Err(StorageError::Invalid {
                    field: "manager_id",
                    reason: "does not name a user of this agency".to_owned(),
                });
            }
            Err(err) => return Err(err.into()),
        }
        Ok(Account {
            password_link: link.map(|link| link.into_link(user.id.clone())),
            password_reset_required: password_hash.is_none(),
            user,
            first_name: new.first_name,
            last_name: new.last_name,
            brokerage_name: new.brokerage_name,
            office_name: new.office_name,
            is_verified: false,
            timezone: "America/Los_Angeles".to_owned(),
            login_count: 0,
        })
    }

    /// Sets the password of `agency`'s user (the first-login reset, or an
    /// operator bootstrapping an account), by the password rules.
    pub async fn set_password(
        &self,
        agency: &AgencyId,
        user: &UserId,
        password: &str,
    ) -> Result<()> {
        if let Some(problem) = password_problem(password) {
            return Err(StorageError::Invalid {
                field: "password",
                reason: problem.to_owned(),
            });
        }
        let hash = hash_password(password.to_owned()).await?;
        let updated = write_on_pool!(self.store.db(), pool => {
            sqlx::query("update users set password_hash = $3 where agency_id = $1 and id = $2")
                .bind(agency)
                .bind(user)
                .bind(&hash)
                .execute(&mut *pool)
                .await?
                .rows_affected()
        });
        if updated == 0 {
            return Err(StorageError::NotFound(Entity::User));
        }
        Ok(())
    }
}
