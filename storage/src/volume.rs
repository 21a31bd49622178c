//! A database filled to the size real agencies reach after years, for
//! measuring how the service's costs grow with its data (`bench scale`).
//!
//! The seeder writes through this layer's own rules, in bulk: listings get
//! their order and are counted in the kept totals (`listing_counts`) in the
//! same transaction, deliveries their attempt and their endpoint's total
//! (`webhook_delivery_counts`); agencies, people and endpoints are made by
//! the repositories that make them for the API. Rows are spread over the
//! days before the store's clock, so retention and history see a real age
//! mix. Each listing's photos are recorded as a finished upload leaves them
//! (the operation, its items ready, each with the specification's six
//! variants), without their files. What it does not write: outbox events (a
//! seeded history has nothing left to announce), media files, job queue
//! entries.

use std::collections::HashSet;
use std::ops::Range;

use sqlx::QueryBuilder;
use sqlx::types::Json;

use crate::db::{Tx, in_transaction, on_tx};
use crate::ids::{
    AgencyId, DeliveryId, EventId, ListingId, MediaId, OperationId, OrderId, UserId,
    WebhookEndpointId,
};
use crate::listings::counts::{self, Counted};
use crate::people::agencies::AgencyKind;
use crate::people::users::{NewUser, Role};
use crate::records::numbers::{generate_listing_number, invoice_number};
use crate::rules::packages;
use crate::webhooks::delivery_counts;
use crate::webhooks::{EndpointEnvironment, NewEndpoint};
use crate::{Environment, Result, Store, Tenant, Timestamp};

/// Rows to a statement: few round trips, well under either database's limit
/// of placeholders.
const ROWS_PER_STATEMENT: usize = 500;
/// Statements to a transaction.
const STATEMENTS_PER_TRANSACTION: usize = 10;

/// What to seed.
#[derive(Clone, Debug)]
pub struct VolumePlan {
    /// Listings of the one large agency.
    pub listings: u64,
    /// Agents of the large agency its listings are spread over.
    pub agents: u32,
    /// Photos of each listing (every agency's), one upload a listing, each
    /// photo ready with its six variants.
    pub photos_per_listing: u32,
    /// Small agencies beside it.
    pub small_agencies: u32,
    /// Listings of each small agency.
    pub listings_per_small_agency: u64,
    /// Webhook deliveries (with one attempt each) to the large agency's endpoint.
    pub deliveries: u64,
    /// Job runs (the console's runs).
    pub job_runs: u64,
    /// Progress states of operations (ten to an operation).
    pub progress_events: u64,
    /// Days before now the rows are spread over.
    pub days: u32,
}

impl VolumePlan {
    /// One agency's `listings` spread over `agents` and thirty days, and
    /// nothing else: no photos, other agencies, deliveries, job runs or
    /// progress.
    pub fn listings_only(listings: u64, agents: u32) -> Self {
        Self {
            listings,
            agents,
            photos_per_listing: 0,
            small_agencies: 0,
            listings_per_small_agency: 0,
            deliveries: 0,
            job_runs: 0,
            progress_events: 0,
            days: 30,
        }
    }

    /// The volume: a million listings with two photos each, a
    /// hundred small agencies, ten million deliveries, five million job
    /// runs, a million progress states over thirty days; `scale` multiplies
    /// every count but the photos a listing (0.01 for ten thousand
    /// listings). Two photos, not a shoot's forty: a listing's read and a
    /// listing number's search see its media, and the seed of a million
    /// listings stays within minutes (each photo is eight rows).
    pub fn scaled(scale: f64) -> Self {
        let of = |n: f64| (n * scale).round().max(1.0) as u64;
        Self {
            listings: of(1_000_000.0),
            agents: 50,
            photos_per_listing: 2,
            small_agencies: 100,
            listings_per_small_agency: of(1_000.0),
            deliveries: of(10_000_000.0),
            job_runs: of(5_000_000.0),
            progress_events: of(1_000_000.0),
            days: 30,
        }
    }
}

/// What was seeded: the large agency and what a benchmark reads it by.
#[derive(Clone, Debug)]
pub struct Seeded {
    /// The large agency.
    pub agency_id: AgencyId,
    /// Its owner.
    pub owner_id: UserId,
    /// Its agents, in the order listings were spread over them.
    pub agent_ids: Vec<UserId>,
    /// Its endpoint with the deliveries.
    pub endpoint_id: WebhookEndpointId,
    /// Listings written (all agencies).
    pub listings: u64,
    /// Deliveries written.
    pub deliveries: u64,
}

/// The statuses of seeded listings, by share of a hundred.
const STATUS_MIX: [(&str, u64); 7] = [
    ("active", 40),
    ("coming_soon", 20),
    ("sold", 15),
    ("pending", 10),
    ("off_market", 5),
    ("archived", 5),
    ("cancelled", 5),
];

/// The status of the `n`th listing.
fn status_of(n: u64) -> &'static str {
    let mut slot = (n * 37) % 100;
    for (status, share) in STATUS_MIX {
        if slot < share {
            return status;
        }
        slot -= share;
    }
    "active"
}

/// The event types of seeded deliveries.
const EVENT_TYPES: [&str; 4] = [
    "listing.created",
    "listing.status_changed",
    "media.upload.completed",
    "order.paid",
];

/// The seeder; see [`Store::volume`].
pub struct Volume<'a> {
    store: &'a Store,
}

impl Store {
    /// Fills the database for measuring at volume.
    pub fn volume(&self) -> Volume<'_> {
        Volume { store: self }
    }
}

impl Volume<'_> {
    /// Seeds `plan`, telling `progress` what it wrote as it goes (a part's
    /// name and rows so far).
    pub async fn seed(
        &self,
        plan: &VolumePlan,
        progress: &mut dyn FnMut(&str, u64),
    ) -> Result<Seeded> {
        let store = self.store;
        let now = store.clock().now();
        let start = now.plus_seconds(-i64::from(plan.days) * 86_400);
        let (agency, owner) = store
            .agencies()
            .create("Volume Media", AgencyKind::MediaAgency)
            .await?;
        let mut agent_ids = Vec::new();
        for n in 0..plan.agents.max(1) {
            let agent = store
                .users()
                .create(
                    &agency.id,
                    NewUser {
                        role: Role::Agent,
                        email: Some(
                            format!("agent-{n}-{}@volume.example", agency.id).to_lowercase(),
                        ),
                        name: Some(format!("Agent {n}")),
                        manager_id: Some(owner.id.clone()),
                    },
                )
                .await?;
            agent_ids.push(agent.id);
        }
        let tenant = Tenant::new(agency.id.clone(), Environment::Live);
        let mut listings = self
            .listings(
                &tenant,
                &owner.id,
                &agent_ids,
                plan.listings,
                plan.photos_per_listing,
                start,
                now,
                &mut |n| progress("listings", n),
            )
            .await?;
        for n in 0..plan.small_agencies {
            let (small, small_owner) = store
                .agencies()
                .create(&format!("Small Agency {n}"), AgencyKind::MediaAgency)
                .await?;
            let small_tenant = Tenant::new(small.id.clone(), Environment::Live);
            let owner_only = [small_owner.id.clone()];
            listings += self
                .listings(
                    &small_tenant,
                    &small_owner.id,
                    &owner_only,
                    plan.listings_per_small_agency,
                    plan.photos_per_listing,
                    start,
                    now,
                    &mut |_| {},
                )
                .await?;
            progress("small agencies", u64::from(n) + 1);
        }
        let (endpoint, _) = store
            .webhooks()
            .create(
                &tenant,
                NewEndpoint {
                    url: "https://receiver.volume.example/hooks".into(),
                    environment: EndpointEnvironment::Live,
                    ..Default::default()
                },
            )
            .await?;
        let deliveries = self
            .deliveries(
                &tenant,
                &endpoint.id,
                plan.deliveries,
                start,
                now,
                &mut |n| progress("deliveries", n),
            )
            .await?;
        self.job_runs(&tenant, plan.job_runs, start, now, &mut |n| {
            progress("job runs", n)
        })
        .await?;
        self.progress_events(&tenant, plan.progress_events, start, now, &mut |n| {
            progress("progress states", n)
        })
        .await?;
        Ok(Seeded {
            agency_id: agency.id,
            owner_id: owner.id,
            agent_ids,
            endpoint_id: endpoint.id,
            listings,
            deliveries,
        })
    }

    /// `count` listings of `tenant`, each with its open order and `photos`
    /// photos ([`Self::photos`]), counted in the kept totals in the same
    /// transaction; returns how many were written.
    #[allow(clippy::too_many_arguments)]
    async fn listings(
        &self,
        tenant: &Tenant,
        owner: &UserId,
        agents: &[UserId],
        count: u64,
        photos: u32,
        start: Timestamp,
        now: Timestamp,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let package = packages::find(packages::DEFAULT_PACKAGE)
            .ok_or_else(|| crate::StorageError::Corrupt("the default package".into()))?;
        let step = spread(start, now, count);
        let mut written = 0u64;
        for range in transactions(count) {
            let rows: Vec<SeedListing> = range
                .clone()
                .map(|i| {
                    let agent_one = &agents[(i as usize) % agents.len()];
                    let agent_two = (i % 3 == 0 && agents.len() > 1)
                        .then(|| agents[(i as usize + 1) % agents.len()].clone());
                    SeedListing {
                        id: ListingId::generate(),
                        number: generate_listing_number(tenant.environment),
                        status: status_of(i),
                        agent_one: agent_one.clone(),
                        agent_two,
                        created_at: Timestamp::from_micros(start.as_micros() + step * i as i64),
                    }
                })
                .collect();
            let inserted = in_transaction!(self.store.db(), |tx| {
                let mut inserted: HashSet<String> = HashSet::with_capacity(rows.len());
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into listings (id, agency_id, is_sandbox, listing_number, status, address,
                             owner_user_id, agent_one_id, agent_two_id, package, notes, created_at, updated_at) ",
                    );
                    insert.push_values(chunk, |mut row, listing| {
                        row.push_bind(&listing.id)
                            .push_bind(&tenant.agency_id)
                            .push_bind(tenant.environment.is_sandbox())
                            .push_bind(&listing.number)
                            .push_bind(listing.status)
                            .push_bind(format!(
                                "{} Volume Street, Springfield",
                                listing.created_at.as_micros() % 9_999 + 1
                            ))
                            .push_bind(owner)
                            .push_bind(&listing.agent_one)
                            .push_bind(&listing.agent_two)
                            .push_bind(package.key)
                            .push_bind(None::<String>)
                            .push_bind(listing.created_at)
                            .push_bind(listing.created_at);
                    });
                    // A number another listing already has is skipped, and
                    // with it the listing's order and count.
                    insert.push(" on conflict (listing_number) do nothing returning id");
                    let ids: Vec<String> = insert.build_query_scalar().fetch_all(&mut *tx).await?;
                    inserted.extend(ids);
                }
                let kept: Vec<&SeedListing> = rows
                    .iter()
                    .filter(|listing| inserted.contains(&listing.id.to_string()))
                    .collect();
                for chunk in kept.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into orders (id, agency_id, is_sandbox, listing_id, package, amount, currency,
                             invoice_number, invoice_state, created_at, updated_at) ",
                    );
                    insert.push_values(chunk, |mut row, listing| {
                        row.push_bind(OrderId::generate())
                            .push_bind(&tenant.agency_id)
                            .push_bind(tenant.environment.is_sandbox())
                            .push_bind(&listing.id)
                            .push_bind(package.key)
                            .push_bind(package.amount)
                            .push_bind(package.currency)
                            .push_bind(invoice_number())
                            .push_bind("open")
                            .push_bind(listing.created_at)
                            .push_bind(listing.created_at);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                let changes: Vec<(Counted<'_>, i64)> = kept
                    .iter()
                    .map(|listing| {
                        (
                            Counted {
                                status: listing.status,
                                agent_one: listing.agent_one.as_str(),
                                agent_two: listing.agent_two.as_ref().map(UserId::as_str),
                            },
                            1,
                        )
                    })
                    .collect();
                counts::count((&mut *tx).into(), tenant, &changes).await?;
                for chunk in kept.chunks(ROWS_PER_STATEMENT) {
                    Self::photos((&mut *tx).into(), tenant, chunk, photos).await?;
                }
                kept.len() as u64
            });
            written += inserted;
            progress(range.end);
        }
        Ok(written)
    }

    /// `count` finished deliveries to `endpoint`, one attempt each, spread
    /// from `start` to `now`, counted in the endpoint's total in the same
    /// transaction (a window wholly past retention gives a purge its work).
    pub async fn deliveries(
        &self,
        tenant: &Tenant,
        endpoint: &WebhookEndpointId,
        count: u64,
        start: Timestamp,
        now: Timestamp,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let step = spread(start, now, count);
        for range in transactions(count) {
            let rows: Vec<(DeliveryId, Timestamp, u64)> = range
                .clone()
                .map(|i| {
                    let at = Timestamp::from_micros(start.as_micros() + step * i as i64);
                    (DeliveryId::generate(), at, i)
                })
                .collect();
            in_transaction!(self.store.db(), |tx| {
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into webhook_deliveries (id, endpoint_id, agency_id, kind, event_id,
                             event_type, api_version, occurred_at, is_sandbox, data, status, attempts,
                             next_attempt_at, created_at, completed_at) ",
                    );
                    insert.push_values(chunk, |mut row, (id, at, i)| {
                        let failed = i % 20 == 7;
                        row.push_bind(id)
                            .push_bind(endpoint)
                            .push_bind(&tenant.agency_id)
                            .push_bind("event")
                            .push_bind(EventId::generate())
                            .push_bind(EVENT_TYPES[(*i as usize) % EVENT_TYPES.len()])
                            .push_bind("2026-05-29")
                            .push_bind(*at)
                            .push_bind(false)
                            .push_bind(Json(
                                serde_json::json!({"listing_number": format!("V{i:07}")}),
                            ))
                            .push_bind(if failed { "failed" } else { "succeeded" })
                            .push_bind(1_i32)
                            .push_bind(None::<Timestamp>)
                            .push_bind(*at)
                            .push_bind(at.plus_seconds(1));
                    });
                    insert.build().execute(&mut *tx).await?;
                    let mut attempts = QueryBuilder::new(
                        "insert into webhook_attempts (delivery_id, attempt, endpoint_id, nonce, started_at,
                             duration_ms, outcome, status_code, response_excerpt, error) ",
                    );
                    attempts.push_values(chunk, |mut row, (id, at, i)| {
                        let failed = i % 20 == 7;
                        row.push_bind(id)
                            .push_bind(1_i32)
                            .push_bind(endpoint)
                            .push_bind(id.as_str())
                            .push_bind(*at)
                            .push_bind(42_i32)
                            .push_bind(if failed { "failed" } else { "succeeded" })
                            .push_bind(if failed { 500_i32 } else { 200_i32 })
                            .push_bind(None::<String>)
                            .push_bind(None::<String>);
                    });
                    attempts.build().execute(&mut *tx).await?;
                }
                delivery_counts::count((&mut *tx).into(), [(endpoint, rows.len() as i64)]).await?;
            });
            progress(range.end);
        }
        Ok(count)
    }

    /// `count` finished job runs, on two queues, a few failed.
    async fn job_runs(
        &self,
        tenant: &Tenant,
        count: u64,
        start: Timestamp,
        now: Timestamp,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        let step = spread(start, now, count);
        for range in transactions(count) {
            let rows: Vec<u64> = range.clone().collect();
            in_transaction!(self.store.db(), |tx| {
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into job_attempts (job_id, attempt, queue, worker_id, host, agency_id,
                             endpoint_id, due_at, started_at, finished_at, outcome, error) ",
                    );
                    insert.push_values(chunk, |mut row, i| {
                        let at = Timestamp::from_micros(start.as_micros() + step * *i as i64);
                        let failed = i % 50 == 3;
                        row.push_bind(format!("job-{i:09}"))
                            .push_bind(1_i64)
                            .push_bind(if i % 4 == 0 { "media" } else { "webhooks" })
                            .push_bind(format!("worker-{}", i % 8))
                            .push_bind(format!("host-{}", i % 3))
                            .push_bind(&tenant.agency_id)
                            .push_bind(None::<String>)
                            .push_bind(at)
                            .push_bind(at)
                            .push_bind(at.plus_seconds(1))
                            .push_bind(if failed { "failed" } else { "succeeded" })
                            .push_bind(failed.then_some("the receiver answered 500"));
                    });
                    insert.build().execute(&mut *tx).await?;
                }
            });
            progress(range.end);
        }
        Ok(count)
    }

    /// `count` progress states, ten to an operation, each operation's latest
    /// state kept beside them as the progress stream keeps it.
    async fn progress_events(
        &self,
        tenant: &Tenant,
        count: u64,
        start: Timestamp,
        now: Timestamp,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64> {
        const STATES_PER_OPERATION: u64 = 10;
        let step = spread(start, now, count);
        for range in transactions(count) {
            let rows: Vec<u64> = range.clone().collect();
            in_transaction!(self.store.db(), |tx| {
                for chunk in rows.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into operation_progress_events (operation_id, seq, agency_id, is_sandbox,
                             step, terminal, recorded_at) ",
                    );
                    insert.push_values(chunk, |mut row, i| {
                        let at = Timestamp::from_micros(start.as_micros() + step * *i as i64);
                        let seq = i % STATES_PER_OPERATION + 1;
                        row.push_bind(format!("op_volume_{:09}", i / STATES_PER_OPERATION))
                            .push_bind(seq as i64)
                            .push_bind(&tenant.agency_id)
                            .push_bind(tenant.environment.is_sandbox())
                            .push_bind(Json(
                                serde_json::json!({"status": "processing", "seq": seq}),
                            ))
                            .push_bind(seq == STATES_PER_OPERATION)
                            .push_bind(at);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                let last_of_operation: Vec<&u64> = rows
                    .iter()
                    .filter(|i| *i % STATES_PER_OPERATION == STATES_PER_OPERATION - 1)
                    .collect();
                for chunk in last_of_operation.chunks(ROWS_PER_STATEMENT) {
                    let mut insert = QueryBuilder::new(
                        "insert into operation_progress (operation_id, agency_id, is_sandbox, state, updated_at) ",
                    );
                    insert.push_values(chunk, |mut row, i| {
                        let at = Timestamp::from_micros(start.as_micros() + step * **i as i64);
                        row.push_bind(format!("op_volume_{:09}", **i / STATES_PER_OPERATION))
                            .push_bind(&tenant.agency_id)
                            .push_bind(tenant.environment.is_sandbox())
                            .push_bind(Json(serde_json::json!({"status": "completed"})))
                            .push_bind(at);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
            });
            progress(range.end);
        }
        Ok(count)
    }
}

/// A seeded photo's variant: name, format, width, height, bytes.
type PhotoVariant = (&'static str, &'static str, i32, i32, i64);

/// The specification's six variants of a seeded photo (of a 4000×2667
/// original).
const PHOTO_VARIANTS: [PhotoVariant; 6] = [
    ("thumbnail", "jpeg", 150, 150, 9_800),
    ("web", "webp", 2_550, 1_700, 410_000),
    ("mls", "jpeg", 1_275, 850, 290_000),
    ("print", "jpeg", 4_000, 2_667, 3_900_000),
    ("webp_web", "webp", 2_550, 1_700, 260_000),
    ("webp_thumb", "webp", 400, 400, 21_000),
];

impl Volume<'_> {
    /// `photos` photos of each of `listings`, as a finished upload leaves
    /// them: one completed operation a listing, its items ready, each with
    /// [`PHOTO_VARIANTS`] (no files behind them).
    async fn photos(
        tx: Tx<'_>,
        tenant: &Tenant,
        listings: &[&SeedListing],
        photos: u32,
    ) -> Result<()> {
        if photos == 0 || listings.is_empty() {
            return Ok(());
        }
        let operations: Vec<(OperationId, &SeedListing)> = listings
            .iter()
            .map(|listing| (OperationId::generate(), *listing))
            .collect();
        let items: Vec<(MediaId, &OperationId, &SeedListing, u32)> = operations
            .iter()
            .flat_map(|(operation, listing)| {
                (0..photos)
                    .map(move |position| (MediaId::generate(), operation, *listing, position))
            })
            .collect();
        let variants: Vec<(&MediaId, &PhotoVariant)> = items
            .iter()
            .flat_map(|(id, ..)| PHOTO_VARIANTS.iter().map(move |variant| (id, variant)))
            .collect();
        on_tx!(tx, conn => {
            let mut insert = QueryBuilder::new(
                "insert into media_operations (id, agency_id, is_sandbox, kind, listing_id, status,
                     created_at, completed_at) ",
            );
            insert.push_values(&operations, |mut row, (id, listing)| {
                row.push_bind(id)
                    .push_bind(&tenant.agency_id)
                    .push_bind(tenant.environment.is_sandbox())
                    .push_bind("upload")
                    .push_bind(&listing.id)
                    .push_bind("completed")
                    .push_bind(listing.created_at)
                    .push_bind(listing.created_at.plus_seconds(60));
            });
            insert.build().execute(&mut *conn).await?;
            for chunk in items.chunks(ROWS_PER_STATEMENT) {
                let mut insert = QueryBuilder::new(
                    "insert into media_items (id, operation_id, agency_id, is_sandbox, listing_id,
                         position, filename, size_bytes, media_type, content_sha256, object_key,
                         storage_strategy, enable_optimization, status, created_at, updated_at) ",
                );
                insert.push_values(chunk, |mut row, (id, operation, listing, position)| {
                    row.push_bind(id)
                        .push_bind(*operation)
                        .push_bind(&tenant.agency_id)
                        .push_bind(tenant.environment.is_sandbox())
                        .push_bind(&listing.id)
                        .push_bind(i64::from(*position))
                        .push_bind(format!("IMG_{:04}.jpg", position + 1))
                        .push_bind(8_400_000_i64)
                        .push_bind("jpeg")
                        .push_bind(format!("{:064x}", u128::from(*position)))
                        .push_bind(format!("media/{}/{id}/original.jpg", tenant.agency_id))
                        .push_bind("cloud")
                        .push_bind(true)
                        .push_bind("ready")
                        .push_bind(listing.created_at)
                        .push_bind(listing.created_at.plus_seconds(60));
                });
                insert.build().execute(&mut *conn).await?;
            }
            for chunk in variants.chunks(ROWS_PER_STATEMENT) {
                let mut insert = QueryBuilder::new(
                    "insert into media_variants (media_id, name, object_key, format, width, height,
                         size_bytes) ",
                );
                insert.push_values(chunk, |mut row, (id, (name, format, width, height, bytes))| {
                    row.push_bind(*id)
                        .push_bind(*name)
                        .push_bind(format!("media/{}/{id}/{name}.{format}", tenant.agency_id))
                        .push_bind(*format)
                        .push_bind(*width)
                        .push_bind(*height)
                        .push_bind(*bytes);
                });
                insert.build().execute(&mut *conn).await?;
            }
        });
        Ok(())
    }
}

/// A listing as seeded.
struct SeedListing {
    id: ListingId,
    number: String,
    status: &'static str,
    agent_one: UserId,
    agent_two: Option<UserId>,
    created_at: Timestamp,
}

/// Microseconds between two of `count` rows spread from `start` to `now`.
fn spread(start: Timestamp, now: Timestamp, count: u64) -> i64 {
    ((now.as_micros() - start.as_micros()) / i64::try_from(count.max(1)).unwrap_or(i64::MAX)).max(1)
}

/// The rows of each transaction of a part of `count` rows, in order.
fn transactions(count: u64) -> impl Iterator<Item = Range<u64>> {
    let per_transaction = (ROWS_PER_STATEMENT * STATEMENTS_PER_TRANSACTION) as u64;
    (0..count)
        .step_by(per_transaction as usize)
        .map(move |start| start..(start + per_transaction).min(count))
}
