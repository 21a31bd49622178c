//! The data a benchmark server starts with: an agency whose budgets are raised
//! out of the way (the limiter still runs on every request), a key, two people
//! and an activated listing with a scheduled shoot.

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use storage::api_keys::{KeyFormat, NewApiKey, Scope};
use storage::ids::{AgencyId, UserId};
use storage::listings::NewListing;
use storage::people::agencies::AgencyKind;
use storage::people::users::{NewUser, Role};
use storage::volume::Seeded;
use storage::{Environment, Store, Tenant};

/// Budgets so high that a benchmark never meets them.
const UNREACHABLE: u32 = 1_000_000_000;

/// Seeds the fixture and describes it for the orchestrator: in an agency of
/// its own, or in the agency `volume` seeded (whose owner and first agent
/// then own and list the fixture's listing).
pub async fn seed(store: &Store, volume: Option<&Seeded>) -> anyhow::Result<Value> {
    let (agency, owner, agent) = match volume {
        Some(seeded) => (
            seeded.agency_id.clone(),
            seeded.owner_id.clone(),
            seeded.agent_ids.first().context("a seeded agent")?.clone(),
        ),
        None => {
            let (agency, owner) = store
                .agencies()
                .create("Benchmark Media", AgencyKind::MediaAgency)
                .await?;
            let agent = store
                .users()
                .create(
                    &agency.id,
                    NewUser {
                        role: Role::Agent,
                        email: Some(
                            format!("agent-{}@bench.example", ulid::Ulid::generate())
                                .to_lowercase(),
                        ),
                        name: Some("Bench Agent".into()),
                        manager_id: Some(owner.id.clone()),
                    },
                )
                .await?;
            (agency.id, owner.id, agent.id)
        }
    };
    let key = unbounded_key(
        store,
        &agency,
        &owner,
        "benchmark",
        vec![Scope::ListingsRead, Scope::ListingsWrite, Scope::UsersRead],
    )
    .await?;
    let tenant = Tenant::new(agency.clone(), Environment::Live);
    let created = store
        .listings()
        .create(
            &tenant,
            NewListing {
                address: "1 Benchmark Way, Springfield".into(),
                owner_user_id: owner.to_string(),
                agent_one_id: agent.to_string(),
                package: Some("premium".into()),
                ..Default::default()
            },
        )
        .await?;
    let number = created.listing.listing_number;
    store
        .orders()
        .record_payment(&tenant, &number, None)
        .await?;
    let shoot = store.clock().now().plus_seconds(7 * 86_400);
    store
        .appointments()
        .schedule(&tenant, &number, shoot)
        .await?;
    Ok(json!({
        "agency_id": tenant.agency_id,
        "key": key,
        "listing_number": number,
        "owner_user_id": owner,
        "agent_id": agent,
    }))
}

/// Raises `agency`'s budgets out of reach and issues it a live key with
/// `scopes` whose every route budget is out of reach too (the limiter
/// still runs on every request); returns the key's plaintext.
pub async fn unbounded_key(
    store: &Store,
    agency: &AgencyId,
    owner: &UserId,
    name: &str,
    scopes: Vec<Scope>,
) -> anyhow::Result<String> {
    let budgets: BTreeMap<String, u32> = api::endpoints::AGENCY_BUDGETS
        .iter()
        .map(|b| (b.name.to_owned(), UNREACHABLE))
        .collect();
    store
        .agencies()
        .set_rate_limit_overrides(agency, &budgets)
        .await?;
    let overrides: BTreeMap<String, u32> = api::endpoints::ALL
        .iter()
        .map(|e| (e.name.to_owned(), UNREACHABLE))
        .collect();
    let key = store
        .api_keys()
        .issue(
            agency,
            NewApiKey {
                name: name.into(),
                scopes,
                environment: Environment::Live,
                format: KeyFormat::Sk,
                created_by: Some(owner.clone()),
                rate_limit_overrides: overrides,
            },
        )
        .await?;
    Ok(key.plaintext.expose().to_owned())
}
