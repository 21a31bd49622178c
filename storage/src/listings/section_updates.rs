//! The sections the API may change: the 3D-tour URL and the floorplan files,
//! each change emitting `listing.section_updated`.

use serde_json::json;
use sqlx::types::Json;

use super::{Listings, Tour3dChange};
use crate::background::outbox::insert_event;
use crate::db::in_transaction;
use crate::error::Rule;
use crate::records::fetch_listing;
use crate::records::listing::{Listing, found};
use crate::records::numbers::normalise_listing_number;
use crate::rules::events::{EventType, NewEvent};
use crate::rules::sections::{
    FloorplanFile, FloorplanOperation, MAX_FLOORPLAN_FILES, Tour3dOperation,
};
use crate::{Result, Tenant};

impl Listings<'_> {
    /// Sets or clears the 3D-tour URL; emits `listing.section_updated` when it changes.
    pub async fn update_tour3d(
        &self,
        tenant: &Tenant,
        listing_number: &str,
        operation: Tour3dOperation,
    ) -> Result<Tour3dChange> {
        let number = normalise_listing_number(listing_number);
        let now = self.store.clock().now();
        let mut emitted = Vec::new();
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
                emitted.push(
                    insert_event(
                        &mut *tx,
                        tenant,
                        now,
                        NewEvent::new(EventType::ListingSectionUpdated, data),
                    )
                    .await?,
                );
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
        let mut emitted = Vec::new();
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
            emitted.push(
                insert_event(
                    &mut *tx,
                    tenant,
                    now,
                    NewEvent::new(EventType::ListingSectionUpdated, data),
                )
                .await?,
            );
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
