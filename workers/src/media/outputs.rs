//! A photo's delivery outputs as a job renders them: which outputs of the
//! agency's active profiles are due (not rendered yet, or from an older
//! revision or around another focal point), the watermarks they lay, and
//! storing what the engine made. Used by the upload's processing (outputs
//! in the same decode as the variants) and by `delivery_outputs` jobs.

use object_store::{ObjectStoreExt, PutPayload};
use storage::Tenant;
use storage::ids::{DeliveryProfileId, MediaId};
use storage::media::{
    DeliveryProfile, FocalSource, MediaItem, OutputStatus, RecordedOutput, StorageKey,
    renders_outputs,
};
use storage::rules::delivery_profiles::{Fit, ProfileFormat, ProfileOutput};

use super::variants::{OutputRequest, RenderedOutput, VariantError, VariantLimits, WatermarkImage};
use crate::handlers::{JobError, WorkerState};

/// One output due.
struct Due {
    profile_id: DeliveryProfileId,
    revision: i64,
    output: ProfileOutput,
}

/// The outputs of one photo a job renders, with their watermarks' images.
pub(crate) struct OutputPlan {
    due: Vec<Due>,
    watermarks: Vec<(MediaId, Result<WatermarkImage, String>)>,
}

impl OutputPlan {
    /// The outputs of `item` that are due (of `profile` only, when given,
    /// as its sweep read it; else of every active profile): `item` was read
    /// with its outputs, so the due ones are those listed as pending.
    pub(crate) async fn for_item(
        state: &WorkerState,
        tenant: &Tenant,
        item: &MediaItem,
        profile: Option<&DeliveryProfile>,
    ) -> Result<Self, JobError> {
        let mut plan = Self {
            due: Vec::new(),
            watermarks: Vec::new(),
        };
        if !renders_outputs(item) {
            return Ok(plan);
        }
        let pending: Vec<_> = item
            .outputs
            .iter()
            .filter(|o| o.status == OutputStatus::Pending)
            .filter(|o| profile.is_none_or(|p| p.id == o.profile_id))
            .collect();
        if pending.is_empty() {
            return Ok(plan);
        }
        let media = state.platform.store.media();
        let profiles = match profile {
            Some(profile) => vec![profile.clone()],
            None => media.active_profiles(tenant).await?,
        };
        for profile in profiles {
            for output in &profile.outputs {
                let wanted = pending
                    .iter()
                    .any(|o| o.profile_id == profile.id && o.name == output.name);
                if wanted {
                    plan.due.push(Due {
                        profile_id: profile.id.clone(),
                        revision: profile.revision,
                        output: output.clone(),
                    });
                }
            }
        }
        for due in &plan.due {
            let Some(watermark) = &due.output.watermark else {
                continue;
            };
            if plan
                .watermarks
                .iter()
                .any(|(id, _)| *id == watermark.media_id)
            {
                continue;
            }
            let image = watermark_image(state, tenant, &watermark.media_id).await?;
            plan.watermarks.push((watermark.media_id.clone(), image));
        }
        Ok(plan)
    }

    /// Nothing due (a video's poster, a PDF's page).
    pub(crate) fn none() -> Self {
        Self {
            due: Vec::new(),
            watermarks: Vec::new(),
        }
    }

    /// Whether nothing is due.
    pub(crate) fn is_empty(&self) -> bool {
        self.due.is_empty()
    }

    /// What the engine is asked to render, in order. An output whose
    /// watermark could not be read is not asked for: [`Self::store`]
    /// records it failed.
    pub(crate) fn requests(&self) -> Vec<OutputRequest<'_>> {
        self.due
            .iter()
            .filter_map(|due| {
                let watermark = match &due.output.watermark {
                    None => None,
                    Some(w) => Some(self.watermark(&w.media_id).ok()?),
                };
                Some(OutputRequest {
                    output: &due.output,
                    watermark,
                })
            })
            .collect()
    }

    fn watermark(&self, id: &MediaId) -> Result<&WatermarkImage, &str> {
        match self.watermarks.iter().find(|(w, _)| w == id) {
            Some((_, Ok(image))) => Ok(image),
            Some((_, Err(reason))) => Err(reason),
            None => Err("the watermark image was not read"),
        }
    }

    /// Stores what the engine made for [`Self::requests`] (in its order)
    /// and records every due output, made or failed, around `focal_point`.
    pub(crate) async fn store(
        &self,
        state: &WorkerState,
        tenant: &Tenant,
        item: &MediaItem,
        rendered: Vec<Result<RenderedOutput, VariantError>>,
        focal_point: (f64, f64),
    ) -> Result<(), JobError> {
        let stores = state
            .platform
            .media
            .as_ref()
            .ok_or_else(|| JobError("no object store is configured".to_owned()))?;
        let media = state.platform.store.media();
        let mut rendered = rendered.into_iter();
        for due in &self.due {
            let watermark = due
                .output
                .watermark
                .as_ref()
                .map(|w| self.watermark(&w.media_id));
            let made = match watermark {
                Some(Err(reason)) => Err(reason.to_owned()),
                _ => rendered
                    .next()
                    .ok_or_else(|| JobError("an output was not rendered".to_owned()))?
                    .map_err(|err| err.to_string()),
            };
            let focal = (due.output.fit == Fit::Cover).then_some(focal_point);
            let record = match made {
                Ok(output) => {
                    let key = StorageKey::output(
                        tenant,
                        &item.id,
                        &due.profile_id,
                        &due.output.name,
                        extension(output.format),
                    );
                    let payload = PutPayload::from(output.bytes);
                    for store in stores.targets(item.storage_strategy) {
                        store.put(&key.to_path(), payload.clone()).await?;
                    }
                    RecordedOutput {
                        name: due.output.name.clone(),
                        profile_revision: due.revision,
                        focal_point: focal,
                        object_key: Some(key),
                        format: output.format.as_str().to_owned(),
                        width: i32::try_from(output.width).ok(),
                        height: i32::try_from(output.height).ok(),
                        size_bytes: i64::try_from(payload.content_length()).ok(),
                        failure_reason: None,
                    }
                }
                Err(reason) => {
                    tracing::info!(media_id = %item.id, output = %due.output.name, %reason, "a delivery output failed");
                    RecordedOutput {
                        name: due.output.name.clone(),
                        profile_revision: due.revision,
                        focal_point: focal,
                        object_key: None,
                        format: due.output.format.as_str().to_owned(),
                        width: None,
                        height: None,
                        size_bytes: None,
                        failure_reason: Some(reason),
                    }
                }
            };
            if let Some(old) = media
                .record_output(&item.id, &due.profile_id, &record)
                .await?
            {
                stores.delete_everywhere(old.as_str()).await;
            }
        }
        if item
            .focal_point
            .is_none_or(|p| p.source == FocalSource::Auto)
        {
            media
                .set_auto_focal_point(tenant, &item.id, focal_point.0, focal_point.1)
                .await?;
        }
        Ok(())
    }
}

/// The file extension of an output's format.
fn extension(format: ProfileFormat) -> &'static str {
    match format {
        ProfileFormat::Jpeg => "jpg",
        ProfileFormat::Webp => "webp",
        ProfileFormat::Avif => "avif",
    }
}

/// The tenant's image `id`, decoded to lay over outputs; why not, when it
/// cannot be (gone, not an image, unreadable): those outputs fail, the
/// others are made.
async fn watermark_image(
    state: &WorkerState,
    tenant: &Tenant,
    id: &MediaId,
) -> Result<Result<WatermarkImage, String>, JobError> {
    let item = match state.platform.store.media().item(tenant, id).await {
        Ok(item) => item,
        Err(storage::StorageError::NotFound(_)) => {
            return Ok(Err(format!("the watermark image {id} no longer exists")));
        }
        Err(err) => return Err(err.into()),
    };
    let stores = state
        .platform
        .media
        .as_ref()
        .ok_or_else(|| JobError("no object store is configured".to_owned()))?;
    let bytes = stores
        .primary(item.storage_strategy)
        .get(&item.object_key.to_path())
        .await?
        .bytes()
        .await?
        .to_vec();
    let decoded = super::background::render(move || {
        WatermarkImage::decode(&bytes, &VariantLimits::default())
    })
    .await
    .map_err(|err| JobError(err.to_string()))?;
    Ok(decoded.map_err(|err| format!("the watermark image {id} cannot be read: {err}")))
}
