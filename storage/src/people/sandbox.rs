//! The sandbox pool's fixtures and its recorded side effects.
//!
//! Seeding gives an agency's sandbox exactly three fixture listings,
//! `snd_active_…`, `snd_coming_soon_…` and `snd_sold_…`, activated and
//! billed. Their numbers are derived from the agency, so seeding again finds
//! and resets them (status, people, sections, orders, shoots) instead of
//! adding more. Payments and e-mails of the sandbox are never performed; they
//! are recorded as side effects a developer can inspect.

use serde_json::{Value, json};

use crate::db::{Tx, in_transaction, on_pool, on_tx, write_on_pool};
use crate::ids::{AgencyId, ListingId, OrderId};
use crate::listings::counts::{self, Counted};
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found};
use crate::records::numbers::{NUMBER_ALPHABET, SANDBOX_PREFIX, invoice_number};
use crate::rules::listing_status::ListingStatus;
use crate::rules::packages::{DEFAULT_PACKAGE, find};
use crate::secrets::hmac_sha256;
use crate::{Entity, Environment, Result, StorageError, Store, Tenant, Timestamp};

/// Characters of the agency-derived part of a fixture number.
const FIXTURE_SLUG_LEN: usize = 10;

/// One fixture listing.
#[derive(Clone, Copy, Debug)]
pub struct Fixture {
    /// The part of its number after `snd_` (`active`).
    pub name: &'static str,
    /// The status it is seeded with.
    pub status: ListingStatus,
    /// Its address.
    pub address: &'static str,
}

/// The three fixtures, in seeding order.
pub const FIXTURES: [Fixture; 3] = [
    Fixture {
        name: "active",
        status: ListingStatus::Active,
        address: "100 Sandbox Way, Springfield, IL 62701",
    },
    Fixture {
        name: "coming_soon",
        status: ListingStatus::ComingSoon,
        address: "200 Sandbox Way, Springfield, IL 62701",
    },
    Fixture {
        name: "sold",
        status: ListingStatus::Sold,
        address: "300 Sandbox Way, Springfield, IL 62701",
    },
];

/// The listing number of `fixture` in `agency`'s sandbox: the same on every
/// seeding, different for every agency.
pub fn fixture_number(agency: &AgencyId, fixture: &Fixture) -> String {
    let digest = hmac_sha256(
        b"listing-api/sandbox-fixture/v1",
        agency.as_str().as_bytes(),
    );
    let slug: String = digest
        .iter()
        .take(FIXTURE_SLUG_LEN)
        .map(|byte| char::from(NUMBER_ALPHABET[usize::from(*byte) % NUMBER_ALPHABET.len()]))
        .collect();
    format!("{SANDBOX_PREFIX}{}_{slug}", fixture.name)
}

/// What a sandbox side effect stood in for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SideEffectKind {
    /// An e-mail that was not sent.
    Email,
    /// A payment that was not charged.
    Payment,
}

impl SideEffectKind {
    /// The column value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Email => "email",
            Self::Payment => "payment",
        }
    }
}

/// A recorded sandbox side effect.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SideEffect {
    /// `sfx_…`.
    pub id: String,
    /// `email` or `payment`.
    pub kind: String,
    /// The e-mail's recipient or the payment's listing number.
    pub subject: String,
    /// What would have been sent or charged (JSON text).
    pub detail: String,
    /// When.
    pub created_at: Timestamp,
}

/// Records a side effect in the lender's transaction.
pub(crate) async fn record_side_effect<'c>(
    tx: impl Into<Tx<'c>>,
    agency: &AgencyId,
    kind: SideEffectKind,
    subject: &str,
    detail: &Value,
    now: Timestamp,
) -> Result<()> {
    on_tx!(tx.into(), conn => {
        sqlx::query(
            "insert into sandbox_side_effects (id, agency_id, kind, subject, detail, created_at)
             values ($1, $2, $3, $4, $5, $6)",
        )
        .bind(format!("sfx_{}", ulid::Ulid::generate()))
        .bind(agency)
        .bind(kind.as_str())
        .bind(subject)
        .bind(detail.to_string())
        .bind(now)
        .execute(&mut *conn)
        .await?;
    });
    Ok(())
}

/// The sandbox repository; see [`Store::sandbox`].
pub struct Sandbox<'a> {
    pub(crate) store: &'a Store,
}

impl Store {
    /// The sandbox pool's fixtures and recorded side effects.
    pub fn sandbox(&self) -> Sandbox<'_> {
        Sandbox { store: self }
    }
}

impl Sandbox<'_> {
    /// Seeds (or resets) `agency`'s three fixture listings in one transaction
    /// and returns them. Their people are the agency's owner; each has one
    /// paid invoice, whose payment is a recorded no-op.
    pub async fn seed(&self, agency: &AgencyId) -> Result<Vec<Listing>> {
        let tenant = Tenant::new(agency.clone(), Environment::Sandbox);
        let owner = self.store.agencies().owner(agency).await?;
        if !owner.is_active {
            return Err(StorageError::Invalid {
                field: "agency",
                reason: "has no active owner to own the fixtures".to_owned(),
            });
        }
        let package = find(DEFAULT_PACKAGE).ok_or(StorageError::NotFound(Entity::Package))?;
        let now = self.store.clock().now();
        let numbers: Vec<(Fixture, String)> = FIXTURES
            .iter()
            .map(|fixture| (*fixture, fixture_number(agency, fixture)))
            .collect();
        let sandbox = Tenant::new(agency.clone(), Environment::Sandbox);
        in_transaction!(self.store.db(), |tx| {
            for (fixture, number) in &numbers {
                let existing: Option<(ListingId, String, String, Option<String>)> = sqlx::query_as(
                    "select id, status, agent_one_id, agent_two_id from listings
                     where agency_id = $1 and is_sandbox = $2 and listing_number = $3",
                )
                .bind(agency)
                .bind(true)
                .bind(number)
                .fetch_optional(&mut *tx)
                .await?;
                let fixture_counted = Counted {
                    status: fixture.status.key(),
                    agent_one: owner.id.as_str(),
                    agent_two: None,
                };
                let listing_id = match existing {
                    Some((id, status, agent_one, agent_two)) => {
                        let before = Counted {
                            status: &status,
                            agent_one: &agent_one,
                            agent_two: agent_two.as_deref(),
                        };
                        counts::count(
                            (&mut *tx).into(),
                            &sandbox,
                            &[(before, -1), (fixture_counted, 1)],
                        )
                        .await?;
                        for table in ["appointments", "orders"] {
                            sqlx::query(sqlx::AssertSqlSafe(format!(
                                "delete from {table} where listing_id = $1"
                            )))
                            .bind(&id)
                            .execute(&mut *tx)
                            .await?;
                        }
                        // Uploaded media stay the developer's, no longer on the fixture.
                        sqlx::query(
                            "update media_items set listing_id = null where listing_id = $1",
                        )
                        .bind(&id)
                        .execute(&mut *tx)
                        .await?;
                        sqlx::query(
                            "update listings set status = $2, address = $3, owner_user_id = $4,
                                 agent_one_id = $4, agent_two_id = null, package = $5, notes = $6,
                                 activated_at = $7, billed_at = $7, tour3d_url = null,
                                 floorplan = '[]', updated_at = $7
                             where id = $1",
                        )
                        .bind(&id)
                        .bind(fixture.status.key())
                        .bind(fixture.address)
                        .bind(&owner.id)
                        .bind(package.key)
                        .bind(fixture_notes(fixture))
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        id
                    }
                    None => {
                        counts::count((&mut *tx).into(), &sandbox, &[(fixture_counted, 1)]).await?;
                        let id = ListingId::generate();
                        sqlx::query(
                            "insert into listings (id, agency_id, is_sandbox, listing_number, status, address,
                                 owner_user_id, agent_one_id, package, notes, activated_at, billed_at,
                                 created_at, updated_at)
                             values ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $10, $10, $10)",
                        )
                        .bind(&id)
                        .bind(agency)
                        .bind(true)
                        .bind(number)
                        .bind(fixture.status.key())
                        .bind(fixture.address)
                        .bind(&owner.id)
                        .bind(package.key)
                        .bind(fixture_notes(fixture))
                        .bind(now)
                        .execute(&mut *tx)
                        .await?;
                        id
                    }
                };
                let reference = format!("sandbox_noop_{}", ulid::Ulid::generate());
                let order_id = OrderId::generate();
                sqlx::query(
                    "insert into orders (id, agency_id, is_sandbox, listing_id, package, amount, currency,
                         invoice_number, invoice_state, payment_reference, paid_at, created_at, updated_at)
                     values ($1, $2, $3, $4, $5, $6, $7, $8, 'paid', $9, $10, $10, $10)",
                )
                .bind(&order_id)
                .bind(agency)
                .bind(true)
                .bind(&listing_id)
                .bind(package.key)
                .bind(package.amount)
                .bind(package.currency)
                .bind(invoice_number())
                .bind(&reference)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                let detail =
                    payment_detail(&order_id, package.amount, package.currency, &reference);
                record_side_effect(
                    &mut *tx,
                    agency,
                    SideEffectKind::Payment,
                    number,
                    &detail,
                    now,
                )
                .await?;
            }
        });
        self.store.listing_cache().invalidate_agency(agency);
        let mut listings = Vec::with_capacity(numbers.len());
        for (_, number) in &numbers {
            let row =
                on_pool!(self.store.db(), pool => fetch_listing!(pool, &tenant, number).await?);
            listings.push(found(row)?);
        }
        Ok(listings)
    }

    /// The side effects recorded in `agency`'s sandbox, oldest first.
    pub async fn side_effects(&self, agency: &AgencyId) -> Result<Vec<SideEffect>> {
        on_pool!(self.store.db(), pool => {
            Ok(sqlx::query_as(
                "select id, kind, subject, detail, created_at from sandbox_side_effects
                 where agency_id = $1 order by created_at, id",
            )
            .bind(agency)
            .fetch_all(pool)
            .await?)
        })
    }

    /// Records an e-mail that the sandbox did not send.
    pub async fn record_email(
        &self,
        agency: &AgencyId,
        recipient: &str,
        detail: &Value,
    ) -> Result<()> {
        let now = self.store.clock().now();
        write_on_pool!(self.store.db(), pool => {
            record_side_effect(&mut *pool, agency, SideEffectKind::Email, recipient, detail, now)
                .await?;
        });
        Ok(())
    }
}

fn fixture_notes(fixture: &Fixture) -> String {
    format!(
        "Sandbox fixture ({}): re-seeding resets it.",
        fixture.status.display()
    )
}

/// What a sandbox payment would have charged.
pub(crate) fn payment_detail(
    order: &OrderId,
    amount: i64,
    currency: &str,
    reference: &str,
) -> Value {
    json!({
        "order_id": order,
        "amount": amount,
        "currency": currency,
        "payment_reference": reference,
        "performed": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixture_numbers_are_stable_per_agency_and_differ_between_agencies() {
        let one = AgencyId::generate();
        let two = AgencyId::generate();
        for fixture in &FIXTURES {
            let number = fixture_number(&one, fixture);
            assert_eq!(number, fixture_number(&one, fixture));
            assert_ne!(number, fixture_number(&two, fixture));
            assert!(number.starts_with(&format!("snd_{}_", fixture.name)));
            assert_eq!(
                crate::records::numbers::normalise_listing_number(&number.to_lowercase()),
                number
            );
        }
    }
}
