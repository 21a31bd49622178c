//! Listings: creation together with its order, reads, the status lifecycle,
//! cancellation inside the no-fee window, and the tour3d and floorplan
//! sections. Every change writes its events to the outbox in the same
//! transaction, and every guarded change repeats its precondition in the
//! `UPDATE … WHERE`, so two racing writers cannot both win.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;
use sqlx::types::Json;

use crate::cancellation::{FeeTier, default_tiers, no_fee_cutoff, within_window};
use crate::db::{in_transaction, on_pool};
use crate::error::Rule;
use crate::events::{EventType, NewEvent};
use crate::ids::{AgencyId, ListingId, OrderId, UserId};
use crate::listing_detail::ListingDetail;
use crate::listing_status::ListingStatus;
use crate::orders::{InvoiceState, Order, invoice_number};
use crate::outbox::{insert_event, insert_events};
use crate::page::{Page, Position};
use crate::sections::{FloorplanFile, FloorplanOperation, MAX_FLOORPLAN_FILES, Tour3dOperation};
use crate::{Environment, Result, StorageError, Store, Tenant, Timestamp, packages};

/// Unambiguous alphabet of listing numbers: no 0/O, 1/I/L.
const NUMBER_ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";
/// Characters in a listing number's random part.
const NUMBER_LEN: usize = 7;
/// Prefix of listings in the sandbox pool.
pub const SANDBOX_PREFIX: &str = "snd_";
/// How often a guarded change is retried after losing a race.
const RACE_RETRIES: usize = 5;
/// Longest address accepted.
const MAX_ADDRESS_CHARS: usize = 500;
/// Longest notes accepted.
const MAX_NOTES_CHARS: usize = 5000;

/// A new random listing number for `environment`.
pub fn generate_listing_number(environment: Environment) -> String {
    let slug: String = (0..NUMBER_LEN)
        .map(|_| char::from(NUMBER_ALPHABET[rand::random_range(0..NUMBER_ALPHABET.len())]))
        .collect();
    match environment {
        Environment::Live => slug,
        Environment::Sandbox => format!("{SANDBOX_PREFIX}{slug}"),
    }
}

/// A listing number as clients may type it, in the stored case: prefixes
/// lower case, the random part upper case.
pub fn normalise_listing_number(text: &str) -> String {
    match text.rsplit_once('_') {
        Some((prefix, slug)) => format!(
            "{}_{}",
            prefix.to_ascii_lowercase(),
            slug.to_ascii_uppercase()
        ),
        None => text.to_ascii_uppercase(),
    }
}

/// A listing.
#[derive(Clone, Debug)]
pub struct Listing {
    /// Internal id.
    pub id: ListingId,
    /// Owning agency.
    pub agency_id: AgencyId,
    /// Live or sandbox.
    pub environment: Environment,
    /// The public slug.
    pub listing_number: String,
    /// Current status.
    pub status: ListingStatus,
    /// Street address.
    pub address: String,
    /// The listing's owner.
    pub owner_user_id: UserId,
    /// First agent.
    pub agent_one_id: UserId,
    /// Second agent.
    pub agent_two_id: Option<UserId>,
    /// Package key.
    pub package: String,
    /// Free-form notes.
    pub notes: Option<String>,
    /// When the invoice was paid and the listing activated.
    pub activated_at: Option<Timestamp>,
    /// When the listing was billed.
    pub billed_at: Option<Timestamp>,
    /// The 3D-tour section.
    pub tour3d_url: Option<String>,
    /// The floorplan section.
    pub floorplan: Vec<FloorplanFile>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
}

impl Listing {
    /// Activated and billed: status changes are allowed.
    pub fn is_activated(&self) -> bool {
        self.activated_at.is_some() && self.billed_at.is_some()
    }

    fn tenant(&self) -> Tenant {
        Tenant::new(self.agency_id.clone(), self.environment)
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct ListingRow {
    id: ListingId,
    agency_id: AgencyId,
    is_sandbox: bool,
    listing_number: String,
    status: String,
    address: String,
    owner_user_id: UserId,
    agent_one_id: UserId,
    agent_two_id: Option<UserId>,
    package: String,
    notes: Option<String>,
    activated_at: Option<Timestamp>,
    billed_at: Option<Timestamp>,
    tour3d_url: Option<String>,
    floorplan: Json<Vec<FloorplanFile>>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl TryFrom<ListingRow> for Listing {
    type Error = StorageError;

    fn try_from(row: ListingRow) -> Result<Self> {
        let status = ListingStatus::from_key(&row.status)
            .ok_or_else(|| StorageError::Corrupt(format!("listing status {}", row.status)))?;
        Ok(Self {
            id: row.id,
            agency_id: row.agency_id,
            environment: Environment::from_sandbox_flag(row.is_sandbox),
            listing_number: row.listing_number,
            status,
            address: row.address,
            owner_user_id: row.owner_user_id,
            agent_one_id: row.agent_one_id,
            agent_two_id: row.agent_two_id,
            package: row.package,
            notes: row.notes,
            activated_at: row.activated_at,
            billed_at: row.billed_at,
            tour3d_url: row.tour3d_url,
            floorplan: row.floorplan.0,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

pub(crate) const LISTING_COLUMNS: &str = "id, agency_id, is_sandbox, listing_number, status, address, \
     owner_user_id, agent_one_id, agent_two_id, package, notes, activated_at, billed_at, tour3d_url, \
     floorplan, created_at, updated_at";

/// Reads the tenant's listing by number with the given executor.
macro_rules! fetch_listing {
    ($executor:expr, $tenant:expr, $number:expr) => {{
        let tenant: &$crate::Tenant = $tenant;
        sqlx::query_as::<_, $crate::listings::ListingRow>(sqlx::AssertSqlSafe(format!(
            "select {} from listings where agency_id = $1 and is_sandbox = $2 and listing_number = $3",
            $crate::listings::LISTING_COLUMNS
        )))
        .bind(&tenant.agency_id)
        .bind(tenant.environment.is_sandbox())
        .bind($number)
        .fetch_optional($executor)
    }};
}
pub(crate) use fetch_listing;

/// The rules of `PATCH …/status`, in the specification's order: activation
/// (409), no-op (409), lifecycle (422).
fn check_status_change(listing: &Listing, to: ListingStatus) -> Result<()> {
    let from = listing.status;
    if !listing.is_activated() {
        return Err(Rule::ListingNotActivated.into());
    }
    if from == to {
        return Err(Rule::NoOpTransition(to.display()).into());
    }
    if !from.allows(to) {
        return Err(Rule::LifecycleViolation {
            from: from.display(),
            to: to.display(),
        }
        .into());
    }
    Ok(())
}

/// Turns a fetched row into a listing, or `NotFound`.
pub(crate) fn found(row: Option<ListingRow>) -> Result<Listing> {
    row.ok_or(StorageError::NotFound("listing"))?.try_into()
}

/// The `data` of listing events: what identifies and describes the listing.
pub fn listing_event_data(listing: &Listing) -> serde_json::Value {
    json!({
        "listing_number": listing.listing_number,
        "status": listing.status.display(),
        "address": listing.address,
        "owner_user_id": listing.owner_user_id,
        "agent_one_id": listing.agent_one_id,
        "agent_two_id": listing.agent_two_id,
        "package": listing.package,
    })
}

/// What a client asks to create. User ids arrive unparsed so every problem
/// can be reported per field.
#[derive(Clone, Debug, Default)]
pub struct NewListing {
    /// Street address (required).
    pub address: String,
    /// Owner (required).
    pub owner_user_id: String,
    /// First agent (required).
    pub agent_one_id: String,
    /// Second agent.
    pub agent_two_id: Option<String>,
    /// Package key; the default package when absent.
    pub package: Option<String>,
    /// Notes.
    pub notes: Option<String>,
    /// The request's idempotency key: a creation under a key that already made
    /// a listing within the idempotency window returns that listing instead.
    pub idempotency_key: Option<String>,
}

/// Filters of the listings listing.
#[derive(Clone, Debug, Default)]
pub struct ListingFilter {
    /// Only this status.
    pub status: Option<ListingStatus>,
    /// Only listings where this user is agent one or agent two.
    pub agent_id: Option<UserId>,
}

/// A created listing and the order raised for it.
#[derive(Clone, Debug)]
pub struct CreatedListing {
    /// The listing.
    pub listing: Listing,
    /// Its order (invoice open).
    pub order: Order,
}

/// The outcome of a status change or a cancellation.
#[derive(Clone, Debug)]
pub struct Transition {
    /// The listing after the change.
    pub listing: Listing,
    /// The status it had before.
    pub previous: ListingStatus,
}

/// What a status change came to when no rule refused it.
#[derive(Clone, Debug)]
pub enum StatusChange {
    /// The listing moved and `listing.status_changed` was written (boxed: a
    /// listing is large beside the other variant).
    Changed(Box<Transition>),
    /// Another writer changed the status between this request's read and its
    /// write, to something other than the requested status; nothing was written.
    Overtaken {
        /// The status the request was judged against.
        expected: ListingStatus,
        /// The status the other writer left.
        current: ListingStatus,
    },
}

/// The outcome of a tour3d patch.
#[derive(Clone, Debug)]
pub struct Tour3dChange {
    /// The listing after the change.
    pub listing: Listing,
    /// The URL before.
    pub previous_url: Option<String>,
}

/// Either the result, or "the row changed under us; read again and retry".
enum Attempt<T> {
    Done(T),
    LostRace,
}

/// Listing repository; see [`Store::listings`].
pub struct Listings<'a> {
    pub(crate) store: &'a Store,
}

type FieldErrors = BTreeMap<&'static str, String>;

fn check_text(
    errors: &mut FieldErrors,
    field: &'static str,
    value: Option<&str>,
    required: bool,
    max: usize,
) -> Option<String> {
    match value.map(str::trim) {
        None | Some("") if required => {
            errors.insert(field, "is required".to_owned());
            None
        }
        None | Some("") => None,
        Some(text) if text.chars().count() > max => {
            errors.insert(field, format!("must be at most {max} characters"));
            None
        }
        Some(text) => Some(text.to_owned()),
    }
}

impl Listings<'_> {
    /// Creates a listing with status Coming Soon and its order with an open
    /// invoice for the package, and emits `listing.created` and
    /// `invoice.created`. The owner and agents must be active people of the
    /// tenant's agency.
    pub async fn create(&self, tenant: &Tenant, new: NewListing) -> Result<CreatedListing> {
        let mut errors = FieldErrors::new();
        let address = check_text(
            &mut errors,
            "address",
            Some(&new.address),
            true,
            MAX_ADDRESS_CHARS,
        );
        let notes = check_text(
            &mut errors,
            "notes",
            new.notes.as_deref(),
            false,
            MAX_NOTES_CHARS,
        );
        let package_key = new
            .package
            .as_deref()
            .map(str::trim)
            .unwrap_or(packages::DEFAULT_PACKAGE);
        let package = packages::find(package_key);
        if package.is_none() {
            errors.insert(
                "package",
                format!("must be one of {}", packages::keys().join(", ")),
            );
        }
        let mut people: Vec<(&'static str, UserId)> = Vec::new();
        for (field, value) in [
            ("owner_user_id", Some(new.owner_user_id.as_str())),
            ("agent_one_id", Some(new.agent_one_id.as_str())),
            ("agent_two_id", new.agent_two_id.as_deref()),
        ] {
            match value.map(str::trim) {
                None => {}
                Some("") if field == "agent_two_id" => {}
                Some("") => {
                    errors.insert(field, "is required".to_owned());
                }
                Some(text) => match UserId::parse(text) {
                    Some(id) => people.push((field, id)),
                    None => {
                        errors.insert(field, "is not a user of this agency".to_owned());
                    }
                },
            }
        }
        if new.agent_two_id.is_some()
            && new.agent_two_id.as_deref().map(str::trim) == Some(new.agent_one_id.trim())
        {
            errors.insert("agent_two_id", "must differ from agent_one_id".to_owned());
        }

        let now = self.store.clock().now();
        let idempotency_key = new.idempotency_key.clone();
        let window_start = now.plus_seconds(-(crate::idempotency::RETENTION.as_secs() as i64));
        let mut emitted: Vec<String> = Vec::new();
        let created = in_transaction!(self.store.db(), |tx| {
            if let Some(key) = &idempotency_key {
                let existing = sqlx::query_as::<_, ListingRow>(sqlx::AssertSqlSafe(format!(
                    "select {LISTING_COLUMNS} from listings where agency_id = $1 and idempotency_key = $2"
                )))
                .bind(&tenant.agency_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await?;
                let reusable = existing.as_ref().is_some_and(|row| {
                    row.created_at > window_start
                        && row.is_sandbox == tenant.environment.is_sandbox()
                });
                if existing.is_some() && !reusable {
                    // A key older than the idempotency window may make a new listing.
                    sqlx::query("update listings set idempotency_key = null where agency_id = $1 and idempotency_key = $2")
                        .bind(&tenant.agency_id)
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
                if let Some(row) = existing.filter(|_| reusable) {
                    let listing = Listing::try_from(row)?;
                    let order: crate::orders::OrderRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "select {} from orders where listing_id = $1 order by created_at, id limit 1",
                        crate::orders::ORDER_COLUMNS
                    )))
                    .bind(&listing.id)
                    .fetch_one(&mut *tx)
                    .await?;
                    let order = order.into_order(&listing.listing_number)?;
                    return Ok(CreatedListing { listing, order });
                }
            }
            let person_id = |n: usize| people.get(n).map(|(_, id)| id);
            let members: Vec<(UserId, bool, String)> = sqlx::query_as(
                "select id, is_active, role from users where agency_id = $1 and id in ($2, $3, $4)",
            )
            .bind(&tenant.agency_id)
            .bind(person_id(0))
            .bind(person_id(1))
            .bind(person_id(2))
            .fetch_all(&mut *tx)
            .await?;
            for (field, id) in &people {
                let member = members
                    .iter()
                    .find(|(member, _, _)| member == id)
                    .map(|(_, active, role)| (*active, role.as_str()));
                match member {
                    Some((_, role)) if role == "super_admin" || role == "admin" => {
                        errors.insert(field, "is not a user of this agency".to_owned());
                    }
                    Some((true, _)) => {}
                    Some((false, _)) => {
                        errors.insert(field, "is deactivated".to_owned());
                    }
                    None => {
                        errors.insert(field, "is not a user of this agency".to_owned());
                    }
                }
            }
            let (Some(address), Some(package), true) = (address, package, errors.is_empty()) else {
                return Err(StorageError::Fields(errors));
            };
            let person = |field: &str| {
                people
                    .iter()
                    .find(|(f, _)| *f == field)
                    .map(|(_, id)| id.clone())
            };
            let (Some(owner_user_id), Some(agent_one_id)) =
                (person("owner_user_id"), person("agent_one_id"))
            else {
                return Err(StorageError::Corrupt("validated people missing".to_owned()));
            };
            let mut listing = Listing {
                id: ListingId::generate(),
                agency_id: tenant.agency_id.clone(),
                environment: tenant.environment,
                listing_number: String::new(),
                status: ListingStatus::ComingSoon,
                address,
                owner_user_id,
                agent_one_id,
                agent_two_id: person("agent_two_id"),
                package: package.key.to_owned(),
                notes,
                activated_at: None,
                billed_at: None,
                tour3d_url: None,
                floorplan: Vec::new(),
                created_at: now,
                updated_at: now,
            };
            // A collision of listing numbers is rare; try another number instead of failing.
            for _ in 0..RACE_RETRIES {
                let number = generate_listing_number(tenant.environment);
                let inserted: Option<(String,)> = sqlx::query_as(
                    "insert into listings (id, agency_id, is_sandbox, listing_number, status, address,
                         owner_user_id, agent_one_id, agent_two_id, package, notes, created_at, updated_at,
                         idempotency_key)
                     values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13)
                     on conflict (listing_number) do nothing
                     returning id",
                )
                .bind(&listing.id)
                .bind(&listing.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(&number)
                .bind(listing.status.key())
                .bind(&listing.address)
                .bind(&listing.owner_user_id)
                .bind(&listing.agent_one_id)
                .bind(&listing.agent_two_id)
                .bind(&listing.package)
                .bind(&listing.notes)
                .bind(now)
                .bind(&idempotency_key)
                .fetch_optional(&mut *tx)
                .await?;
                if inserted.is_some() {
                    listing.listing_number = number;
                    break;
                }
            }
            if listing.listing_number.is_empty() {
                return Err(StorageError::Corrupt(
                    "no free listing number after retries".to_owned(),
                ));
            }
            let order = Order {
                id: OrderId::generate(),
                listing_id: listing.id.clone(),
                listing_number: listing.listing_number.clone(),
                package: package.key.to_owned(),
                amount: package.amount,
                currency: package.currency.to_owned(),
                invoice_number: invoice_number(),
                invoice_state: InvoiceState::Open,
                payment_reference: None,
                paid_at: None,
                voided_at: None,
                created_at: now,
            };
            sqlx::query(
                "insert into orders (id, agency_id, is_sandbox, listing_id, package, amount, currency,
                     invoice_number, invoice_state, created_at, updated_at)
                 values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)",
            )
            .bind(&order.id)
            .bind(&tenant.agency_id)
            .bind(tenant.environment.is_sandbox())
            .bind(&order.listing_id)
            .bind(&order.package)
            .bind(order.amount)
            .bind(&order.currency)
            .bind(&order.invoice_number)
            .bind(order.invoice_state.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            let events = [
                NewEvent::new(EventType::ListingCreated, listing_event_data(&listing)),
                NewEvent::new(EventType::InvoiceCreated, order.event_data()),
            ];
            insert_events!(&mut *tx, tenant, now, events, &mut emitted).await?;
            CreatedListing { listing, order }
        });
        self.store.announce(&emitted);
        Ok(created)
    }

    /// The tenant's listing with this number; another tenant's is `NotFound`.
    pub async fn get(&self, tenant: &Tenant, listing_number: &str) -> Result<Listing> {
        let number = normalise_listing_number(listing_number);
        let row = on_pool!(self.store.db(), pool => fetch_listing!(pool, tenant, &number).await?);
        found(row)
    }

    /// The tenant's listing with its orders, shoot, people and no-fee cutoff,
    /// in one query.
    pub async fn detail(
        &self,
        tenant: &Tenant,
        listing_number: &str,
    ) -> Result<Arc<ListingDetail>> {
        let number = normalise_listing_number(listing_number);
        let cache = self.store.listing_cache();
        let now = self.store.clock().now();
        if let Some(detail) = cache.get(tenant, &number, now) {
            return Ok(detail);
        }
        let generation = cache.generation();
        let mut detail = crate::listing_detail::fetch(self.store.db(), tenant, &number).await?;
        detail.media = self
            .store
            .media()
            .listing_items(tenant, &detail.listing.id)
            .await?;
        let detail = Arc::new(detail);
        cache.put(tenant, &number, detail.clone(), generation, now);
        Ok(detail)
    }

    /// A page of the tenant's listings, oldest first (ties by id).
    pub async fn list(
        &self,
        tenant: &Tenant,
        filter: &ListingFilter,
        after: Option<&Position>,
        limit: u32,
    ) -> Result<Page<Listing>> {
        const WHERE: &str = "agency_id = $1 and is_sandbox = $2
             and ($3 is null or status = $3)
             and ($4 is null or agent_one_id = $4 or agent_two_id = $4)";
        let list_sql = format!(
            "select {LISTING_COLUMNS} from listings where {WHERE}
             and ($5 is null or (created_at, id) > ($5, $6))
             order by created_at, id limit $7"
        );
        let count_sql = format!("select count(*) from listings where {WHERE}");
        let limit = limit.min(crate::page::MAX_PAGE_SIZE);
        let status = filter.status.map(ListingStatus::key);
        let (rows, total): (Vec<ListingRow>, i64) = on_pool!(self.store.db(), pool => {
            let rows = sqlx::query_as(sqlx::AssertSqlSafe(list_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(status)
                .bind(&filter.agent_id)
                .bind(after.map(|p| p.created_at))
                .bind(after.map(|p| p.id.as_str()))
                .bind(i64::from(limit) + 1)
                .fetch_all(pool)
                .await?;
            let total = sqlx::query_scalar(sqlx::AssertSqlSafe(count_sql))
                .bind(&tenant.agency_id)
                .bind(tenant.environment.is_sandbox())
                .bind(status)
                .bind(&filter.agent_id)
                .fetch_one(pool)
                .await?;
            (rows, total)
        });
        let listings = rows
            .into_iter()
            .map(Listing::try_from)
            .collect::<Result<Vec<_>>>()?;
        Ok(Page::from_overfetch(listings, limit, total, |l| {
            Position::after(l.created_at, l.id.as_str())
        }))
    }

    /// Moves a listing to `to` if it is activated and billed, `to` differs from
    /// its status and the lifecycle allows it; emits `listing.status_changed`.
    ///
    /// The request is judged against the status it reads, and the `UPDATE`
    /// repeats that status in its `WHERE`. A writer overtaken between the two
    /// (another change committed first) does not try again against the new
    /// status: the client asked to leave the status it saw, which is gone. It
    /// gets `NoOpTransition` when the winner already moved the listing to `to`,
    /// and [`StatusChange::Overtaken`] otherwise; either way nothing is written.
    pub async fn change_status(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        to: ListingStatus,
    ) -> Result<StatusChange> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted: Vec<String> = Vec::new();
        let change = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            let from = listing.status;
            check_status_change(&listing, to)?;
            let updated = sqlx::query(
                "update listings set status = $1, updated_at = $2
                 where id = $3 and status = $4 and activated_at is not null and billed_at is not null",
            )
            .bind(to.key())
            .bind(now)
            .bind(&listing.id)
            .bind(from.key())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                // Overtaken. On PostgreSQL this statement sees the winner's
                // commit; SQLite's single writer never gets here.
                let current = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
                if !current.is_activated() {
                    return Err(Rule::ListingNotActivated.into());
                }
                if current.status == to {
                    return Err(Rule::NoOpTransition(to.display()).into());
                }
                StatusChange::Overtaken {
                    expected: from,
                    current: current.status,
                }
            } else {
                let listing = Listing {
                    status: to,
                    updated_at: now,
                    ..listing
                };
                let mut data = listing_event_data(&listing);
                data["previous_status"] = from.display().into();
                insert_event!(
                    &mut *tx,
                    tenant,
                    now,
                    NewEvent::new(EventType::ListingStatusChanged, data),
                    &mut emitted
                )
                .await?;
                StatusChange::Changed(Box::new(Transition {
                    listing,
                    previous: from,
                }))
            }
        });
        self.store.announce(&emitted);
        // Also when overtaken: the winner may be another process, whose
        // change this process's cache has not seen.
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(change)
    }

    /// Cancels a listing at or before its no-fee cutoff (the shoot time minus
    /// the owner's largest fee tier; no shoot, no cutoff). Voids open invoices,
    /// cancels the shoot, and emits `listing.cancelled` exactly once.
    pub async fn cancel(&self, tenant: &Tenant, listing_number: &str) -> Result<Transition> {
        let number = normalise_listing_number(listing_number);
        for _ in 0..RACE_RETRIES {
            if let Attempt::Done(transition) = self.try_cancel(tenant, &number).await? {
                self.store.listing_cache().invalidate(tenant, &number);
                return Ok(transition);
            }
        }
        Err(StorageError::Corrupt(
            "cancellation kept losing races".to_owned(),
        ))
    }

    async fn try_cancel(&self, tenant: &Tenant, number: &str) -> Result<Attempt<Transition>> {
        let now = self.store.clock().now();
        let mut emitted: Vec<String> = Vec::new();
        let attempt = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, number).await?)?;
            let from = listing.status;
            if from == ListingStatus::Cancelled {
                return Err(Rule::ListingAlreadyCancelled.into());
            }
            if from.is_terminal() {
                return Err(Rule::LifecycleViolation {
                    from: from.display(),
                    to: ListingStatus::Cancelled.display(),
                }
                .into());
            }
            let shoot: Option<(String, Timestamp)> = sqlx::query_as(
                "select id, scheduled_at from appointments where listing_id = $1 and status = 'scheduled'",
            )
            .bind(&listing.id)
            .fetch_optional(&mut *tx)
            .await?;
            let stored_tiers: Vec<(i64, i64, String)> = sqlx::query_as(
                "select hours_before, amount, currency from cancellation_fee_tiers
                 where agency_id = $1 and owner_user_id = $2",
            )
            .bind(&tenant.agency_id)
            .bind(&listing.owner_user_id)
            .fetch_all(&mut *tx)
            .await?;
            let tiers: Vec<FeeTier> = if stored_tiers.is_empty() {
                default_tiers()
            } else {
                stored_tiers
                    .into_iter()
                    .map(|(hours_before, amount, currency)| FeeTier {
                        hours_before,
                        amount,
                        currency,
                    })
                    .collect()
            };
            let cutoff = no_fee_cutoff(shoot.as_ref().map(|(_, at)| *at), &tiers);
            if !within_window(now, cutoff) {
                let cutoff_rfc3339 = cutoff.map(Timestamp::to_rfc3339).unwrap_or_default();
                return Err(Rule::OutsideCancellationWindow { cutoff_rfc3339 }.into());
            }
            let updated = sqlx::query(
                "update listings set status = 'cancelled', updated_at = $1 where id = $2 and status = $3",
            )
            .bind(now)
            .bind(&listing.id)
            .bind(from.key())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if updated == 0 {
                Attempt::LostRace
            } else {
                let listing = Listing {
                    status: ListingStatus::Cancelled,
                    updated_at: now,
                    ..listing
                };
                let tenant = listing.tenant();
                if let Some((appointment_id, scheduled_at)) = &shoot {
                    sqlx::query("update appointments set status = 'cancelled', updated_at = $1 where id = $2")
                        .bind(now)
                        .bind(appointment_id)
                        .execute(&mut *tx)
                        .await?;
                    let data = json!({
                        "appointment_id": appointment_id,
                        "listing_number": listing.listing_number,
                        "scheduled_at": scheduled_at.to_rfc3339(),
                        "reason": "listing_cancelled",
                    });
                    insert_event!(
                        &mut *tx,
                        &tenant,
                        now,
                        NewEvent::new(EventType::AppointmentCancelled, data),
                        &mut emitted
                    )
                    .await?;
                }
                let voided: Vec<crate::orders::OrderRow> =
                    sqlx::query_as(sqlx::AssertSqlSafe(format!(
                        "update orders set invoice_state = 'void', voided_at = $1, updated_at = $1
                     where listing_id = $2 and invoice_state in ('draft', 'open')
                     returning {}",
                        crate::orders::ORDER_COLUMNS
                    )))
                    .bind(now)
                    .bind(&listing.id)
                    .fetch_all(&mut *tx)
                    .await?;
                for row in voided {
                    let order = row.into_order(&listing.listing_number)?;
                    insert_event!(
                        &mut *tx,
                        &tenant,
                        now,
                        NewEvent::new(EventType::InvoiceVoided, order.event_data()),
                        &mut emitted
                    )
                    .await?;
                }
                let mut data = listing_event_data(&listing);
                data["previous_status"] = from.display().into();
                data["cancelled_at"] = now.to_rfc3339().into();
                data["fee_applied"] = json!({"amount": 0, "currency": "USD"});
                insert_event!(
                    &mut *tx,
                    &tenant,
                    now,
                    NewEvent::new(EventType::ListingCancelled, data),
                    &mut emitted
                )
                .await?;
                Attempt::Done(Transition {
                    listing,
                    previous: from,
                })
            }
        });
        self.store.announce(&emitted);
        Ok(attempt)
    }

    /// Sets or clears the 3D-tour URL; emits `listing.section_updated` when it changes.
    pub async fn update_tour3d(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        operation: Tour3dOperation,
    ) -> Result<Tour3dChange> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted: Vec<String> = Vec::new();
        let change = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            let previous_url = listing.tour3d_url.clone();
            let (url, operation_name) = match operation {
                Tour3dOperation::Set(url) => (Some(url), "set"),
                Tour3dOperation::Remove => (None, "remove"),
            };
            if url == previous_url {
                Tour3dChange {
                    listing,
                    previous_url,
                }
            } else {
                sqlx::query("update listings set tour3d_url = $1, updated_at = $2 where id = $3")
                    .bind(&url)
                    .bind(now)
                    .bind(&listing.id)
                    .execute(&mut *tx)
                    .await?;
                let data = json!({
                    "listing_number": listing.listing_number,
                    "section": "tour3d",
                    "operation": operation_name,
                    "previous_url": previous_url,
                    "url": url,
                });
                insert_event!(
                    &mut *tx,
                    tenant,
                    now,
                    NewEvent::new(EventType::ListingSectionUpdated, data),
                    &mut emitted
                )
                .await?;
                let listing = Listing {
                    tour3d_url: url,
                    updated_at: now,
                    ..listing
                };
                Tour3dChange {
                    listing,
                    previous_url,
                }
            }
        });
        self.store.announce(&emitted);
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(change)
    }

    /// Sets, replaces or appends floorplan files; emits `listing.section_updated`.
    pub async fn update_floorplan(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        operation: FloorplanOperation,
        files: Vec<FloorplanFile>,
    ) -> Result<Listing> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted: Vec<String> = Vec::new();
        let listing = in_transaction!(self.store.db(), |tx| {
            let listing = found(fetch_listing!(&mut *tx, tenant, &number).await?)?;
            let floorplan: Vec<FloorplanFile> = match operation {
                FloorplanOperation::Set | FloorplanOperation::Replace => files.clone(),
                FloorplanOperation::Append => listing
                    .floorplan
                    .iter()
                    .chain(files.iter())
                    .cloned()
                    .collect(),
            };
            if floorplan.len() > MAX_FLOORPLAN_FILES {
                return Err(Rule::InvalidSectionPayload {
                    field: "files".to_owned(),
                    reason: format!(
                        "the floorplan holds {} files; appending {} would exceed {MAX_FLOORPLAN_FILES}",
                        listing.floorplan.len(),
                        files.len()
                    ),
                }
                .into());
            }
            sqlx::query("update listings set floorplan = $1, updated_at = $2 where id = $3")
                .bind(Json(&floorplan))
                .bind(now)
                .bind(&listing.id)
                .execute(&mut *tx)
                .await?;
            let data = json!({
                "listing_number": listing.listing_number,
                "section": "floorplan",
                "operation": operation.as_str(),
                "files": floorplan.iter().map(|f| json!({"url": f.url, "label": f.label})).collect::<Vec<_>>(),
            });
            insert_event!(
                &mut *tx,
                tenant,
                now,
                NewEvent::new(EventType::ListingSectionUpdated, data),
                &mut emitted
            )
            .await?;
            Listing {
                floorplan,
                updated_at: now,
                ..listing
            }
        });
        self.store.announce(&emitted);
        self.store.listing_cache().invalidate(tenant, &number);
        Ok(listing)
    }
}
