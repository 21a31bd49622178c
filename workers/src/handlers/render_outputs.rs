//! `delivery_outputs`: renders the due outputs of photos already
//! processed. A photo's job (its focal point moved) renders that photo's
//! due outputs; a profile's sweep renders the profile's outputs of a batch
//! of the agency's photos, then pushes the next batch as a job of its own
//! (so that other agencies' jobs take their turns between batches) with
//! how far it got, which the ops console shows. A sweep whose profile has
//! moved on (changed again, paused or deleted) stops: the newer revision
//! has its own.

use object_store::ObjectStoreExt;
use platform::PushOptions;
use platform::kinds::{RenderOutputs, RenderScope};
use storage::ids::MediaId;
use storage::media::{DeliveryProfile, MediaItem};
use storage::{StorageError, Tenant};

use super::{Handler, JobError, WorkerState};
use crate::media::outputs::OutputPlan;
use crate::media::variants::{Rendered, VariantLimits, render_media};

impl Handler for RenderOutputs {
    async fn run(&self, state: &WorkerState, _attempt: usize) -> Result<(), JobError> {
        let tenant = self.tenant();
        match &self.scope {
            RenderScope::Photo { media_id } => render_photo(state, &tenant, media_id, None).await,
            RenderScope::Profile {
                profile_id,
                revision,
                round,
                after,
                rendered,
                total,
            } => {
                let media = state.platform.store.media();
                let current = match media.profile(&tenant, profile_id).await {
                    Ok(profile) => profile,
                    Err(StorageError::NotFound(_)) => return Ok(()),
                    Err(err) => return Err(err.into()),
                };
                if current.revision != *revision || !current.active || current.sweep_round != *round
                {
                    tracing::debug!(%profile_id, revision, "a superseded sweep stops");
                    return Ok(());
                }
                let total = match total {
                    Some(total) => *total,
                    None => media.photo_count(&tenant).await?,
                };
                let batch = media
                    .photos_after(&tenant, after.as_ref(), RenderOutputs::BATCH)
                    .await?;
                let names: Vec<String> = current.outputs.iter().map(|o| o.name.clone()).collect();
                for media_id in &batch {
                    render_photo(state, &tenant, media_id, Some(&current)).await?;
                    let stale = media
                        .drop_other_outputs(media_id, profile_id, &names)
                        .await?;
                    if let Some(stores) = state.platform.media.as_ref() {
                        for key in stale {
                            stores.delete_everywhere(key.as_str()).await;
                        }
                    }
                }
                if batch.len() < RenderOutputs::BATCH as usize {
                    // The last batch: the maintenance need not push it again.
                    media.finish_sweep(&tenant, profile_id, *round).await?;
                } else {
                    let next = RenderOutputs::new(
                        &tenant,
                        RenderScope::Profile {
                            profile_id: profile_id.clone(),
                            revision: *revision,
                            round: *round,
                            after: batch.last().cloned(),
                            rendered: rendered + batch.len() as u64,
                            total: Some(total),
                        },
                    );
                    state
                        .platform
                        .queue
                        .push(next, PushOptions::default())
                        .await
                        .map_err(|err| {
                            JobError(format!("the sweep's next batch was not pushed: {err}"))
                        })?;
                }
                Ok(())
            }
        }
    }
}

/// Renders the due outputs of one photo (of `profile` only, when given, as
/// the sweep read it).
/// A photo gone, failed or not a photo has none; a photo whose original
/// cannot be decoded any more gets its due outputs recorded failed.
async fn render_photo(
    state: &WorkerState,
    tenant: &Tenant,
    media_id: &MediaId,
    profile: Option<&DeliveryProfile>,
) -> Result<(), JobError> {
    let item = match state.platform.store.media().item(tenant, media_id).await {
        Ok(item) => item,
        Err(StorageError::NotFound(_)) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    let plan = OutputPlan::for_item(state, tenant, &item, profile).await?;
    if plan.is_empty() {
        return Ok(());
    }
    let original = read(state, &item).await?;
    let focal = item.focal_point.map(|p| (p.x, p.y));
    let (rendered, plan) = crate::media::background::render(move || {
        let rendered = render_media(
            &original,
            &[],
            &plan.requests(),
            focal,
            &VariantLimits::default(),
        );
        (rendered, plan)
    })
    .await
    .map_err(|err| JobError(format!("image processing stopped: {err}")))?;
    match rendered {
        Ok(Rendered {
            outputs,
            focal_point,
            ..
        }) => plan.store(state, tenant, &item, outputs, focal_point).await,
        Err(err) => {
            // The original was processed once; it cannot be decoded now
            // (a limit lowered since): each due output says so.
            let reason = err.to_string();
            let failed = plan.requests().iter().map(|_| Err(err.clone())).collect();
            tracing::warn!(%media_id, %reason, "a photo's outputs could not be rendered");
            let focal = focal.unwrap_or((0.5, 0.5));
            plan.store(state, tenant, &item, failed, focal).await
        }
    }
}

/// The item's original.
async fn read(state: &WorkerState, item: &MediaItem) -> Result<Vec<u8>, JobError> {
    let stores = state
        .platform
        .media
        .as_ref()
        .ok_or_else(|| JobError("no object store is configured".to_owned()))?;
    Ok(stores
        .primary(item.storage_strategy)
        .get(&item.object_key.to_path())
        .await?
        .bytes()
        .await?
        .to_vec())
}
