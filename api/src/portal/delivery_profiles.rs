//! `/settings/delivery-profiles`: the environment's delivery profiles (each
//! output's size, format, byte cap, metadata and watermark), created from a
//! starting template with the agency's logo, paused, edited or deleted; and
//! a profile's page, whose preview shows a listing's photos with their
//! outputs of it: the focal point moved with a click (the crops follow once
//! rendered again) and the set downloaded as a ZIP. Every change is a call
//! to the JSON API (`assets/profiles.js` and `assets/portal.js`).

use askama::Template;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use storage::ids::DeliveryProfileId;
use storage::media::{DeliveryProfile, WatermarkCandidate};
use storage::rules::delivery_profiles::{
    Fit, MetadataPolicy, ProfileOutput, ProfileTemplate, templates,
};

use super::{Chrome, PortalSession, page, problem, query_value, unavailable, when};
use crate::routes::delivery_profiles::wire::{OutputWire, PositionWire, TemplateOut};
use crate::routes::media::archive::MAX_ARCHIVE_FILES;
use crate::routes::media::downloads::{MediaOut, OutputOut, VariantOut, media_out};
use crate::state::AppState;

/// Most photos a preview shows (a listing's first ones).
const PREVIEW_PHOTOS: usize = 24;

/// `2.9 MB`, `287 KB`.
fn size_text(bytes: u64) -> String {
    if bytes >= 1_000_000 {
        format!("{:.1} MB", bytes as f64 / 1_000_000.0)
    } else {
        format!("{} KB", bytes.div_ceil(1_000))
    }
}

/// `JPEG`, `WebP`, `AVIF`.
fn format_label(format: &str) -> String {
    match format {
        "webp" => "WebP".to_owned(),
        other => other.to_uppercase(),
    }
}

/// `bottom right`: the position's name on the wire, in words.
fn position_words(position: PositionWire) -> String {
    serde_json::to_value(position)
        .ok()
        .and_then(|name| name.as_str().map(|name| name.replace('_', " ")))
        .unwrap_or_default()
}

/// One output as a person reads it.
pub(super) struct OutputRow {
    pub name: String,
    /// `2048 × 2048, whole photo` or `840 × 525, cropped`.
    pub shape: String,
    /// `JPEG`.
    pub format: String,
    /// `at most 3.0 MB` or `quality 82`.
    pub budget: String,
    /// `none` or `copyright and author`.
    pub metadata: &'static str,
    /// `–` or `bottom right, 18 % wide, 85 % opaque`.
    pub watermark: String,
}

impl From<&ProfileOutput> for OutputRow {
    fn from(output: &ProfileOutput) -> Self {
        Self {
            name: output.name.clone(),
            shape: format!(
                "{} × {}, {}",
                output.width,
                output.height,
                match output.fit {
                    Fit::Contain => "whole photo",
                    Fit::Cover => "cropped at the focal point",
                }
            ),
            format: format_label(output.format.as_str()),
            budget: match (output.max_bytes, output.quality) {
                (Some(cap), _) => format!("at most {}", size_text(cap)),
                (None, Some(quality)) => format!("quality {quality}"),
                (None, None) => format!("quality {}", output.starting_quality()),
            },
            metadata: match output.metadata {
                MetadataPolicy::Strip => "none",
                MetadataPolicy::Copyright => "copyright and author",
            },
            watermark: output.watermark.as_ref().map_or_else(
                || "–".to_owned(),
                |w| {
                    format!(
                        "{}, {:.0} % wide, {:.0} % opaque",
                        position_words(w.position.into()),
                        w.scale * 100.0,
                        w.opacity * 100.0
                    )
                },
            ),
        }
    }
}

/// Outputs as the API writes them, for an editor.
fn outputs_json(outputs: &[ProfileOutput]) -> String {
    let wire: Vec<OutputWire> = outputs.iter().cloned().map(OutputWire::from).collect();
    serde_json::to_string_pretty(&wire).unwrap_or_default()
}

/// A profile in the list and on its page.
pub(super) struct ProfileRow {
    pub id: String,
    pub name: String,
    pub active: bool,
    pub revision: i64,
    pub updated: String,
    pub branded: bool,
    pub outputs: Vec<OutputRow>,
    pub outputs_json: String,
}

impl From<&DeliveryProfile> for ProfileRow {
    fn from(profile: &DeliveryProfile) -> Self {
        Self {
            id: profile.id.to_string(),
            name: profile.name.clone(),
            active: profile.active,
            revision: profile.revision,
            updated: when(profile.updated_at),
            branded: profile.outputs.iter().any(|o| o.watermark.is_some()),
            outputs: profile.outputs.iter().map(OutputRow::from).collect(),
            outputs_json: outputs_json(&profile.outputs),
        }
    }
}

/// A starting template, with the form that copies it.
pub(super) struct TemplateCard {
    pub key: &'static str,
    pub description: &'static str,
    pub name: String,
    pub outputs: Vec<OutputRow>,
    pub outputs_json: String,
    /// The suggested watermark (position, scale, opacity) as JSON, for the
    /// script to add with the chosen logo; empty for an unbranded one.
    pub watermark_json: String,
    pub watermark_text: String,
}

impl From<ProfileTemplate> for TemplateCard {
    fn from(template: ProfileTemplate) -> Self {
        let key = template.key;
        let description = template.description;
        let outputs = template.draft.outputs.iter().map(OutputRow::from).collect();
        let outputs_json = outputs_json(&template.draft.outputs);
        let name = template.draft.name.clone();
        let suggested = TemplateOut::from(template).suggested_watermark;
        Self {
            key,
            description,
            name,
            outputs,
            outputs_json,
            watermark_text: suggested.as_ref().map_or_else(String::new, |w| {
                format!(
                    "{}, {:.0} % of each output's width, {:.0} % opaque",
                    position_words(w.position),
                    w.scale * 100.0,
                    w.opacity * 100.0
                )
            }),
            watermark_json: suggested
                .map(|w| serde_json::to_string(&w).unwrap_or_default())
                .unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "portal/delivery_profiles.html")]
struct ProfilesPage {
    chrome: Chrome,
    profiles: Vec<ProfileRow>,
    templates: Vec<TemplateCard>,
    logos: Vec<WatermarkCandidate>,
}

/// `GET /settings/delivery-profiles`.
pub(crate) async fn profiles_page(
    State(state): State<AppState>,
    portal: PortalSession,
) -> Response {
    let chrome = portal.chrome(&state, "profiles");
    let tenant = portal.tenant();
    let (profiles, logos) = if chrome.is_admin {
        let media = state.store().media();
        let profiles = match media.profiles(&tenant, None, 100).await {
            Ok(page) => page.items.iter().map(ProfileRow::from).collect(),
            Err(err) => return unavailable(&err),
        };
        let logos = match media.watermark_candidates(&tenant).await {
            Ok(logos) => logos,
            Err(err) => return unavailable(&err),
        };
        (profiles, logos)
    } else {
        (Vec::new(), Vec::new())
    };
    page(
        StatusCode::OK,
        &ProfilesPage {
            chrome,
            profiles,
            templates: templates().into_iter().map(TemplateCard::from).collect(),
            logos,
        },
    )
}

/// One output of a previewed photo.
pub(super) struct PreviewOutput {
    pub name: String,
    pub ready: bool,
    pub failed: bool,
    pub url: String,
    /// `840 × 525 · 212 KB`, once rendered.
    pub facts: String,
    pub failure: String,
}

impl From<&OutputOut> for PreviewOutput {
    fn from(output: &OutputOut) -> Self {
        let ready = output.status == "ready";
        Self {
            name: output.name.clone(),
            ready,
            failed: output.status == "failed",
            url: output.url.clone().unwrap_or_default(),
            facts: match (output.width, output.height, output.bytes) {
                (Some(width), Some(height), Some(bytes)) if ready => format!(
                    "{width} × {height} · {} · {}",
                    format_label(&output.format),
                    size_text(u64::try_from(bytes).unwrap_or(0))
                ),
                _ => String::new(),
            },
            failure: output.failure_reason.clone().unwrap_or_default(),
        }
    }
}

/// A previewed photo: a variant to click the focal point on, and its outputs.
pub(super) struct PreviewPhoto {
    pub media_id: String,
    pub filename: String,
    pub image_url: String,
    /// Percentages from the top left, for the marker.
    pub focal_left: String,
    pub focal_top: String,
    pub focal_source: String,
    pub outputs: Vec<PreviewOutput>,
}

impl PreviewPhoto {
    fn of(item: &MediaOut, profile: &str) -> Option<Self> {
        // The variant nearest 800 px wide to click on (large enough to aim,
        // small enough to load at once) among those of the whole photo's
        // aspect, as the largest is: a square crop would put the point
        // somewhere else.
        let largest = item.variants.iter().max_by_key(|v| v.width)?;
        let aspect = |v: &VariantOut| f64::from(v.width) / f64::from(v.height.max(1));
        let image = item
            .variants
            .iter()
            .filter(|v| v.format == "jpeg" || v.format == "webp")
            .filter(|v| (aspect(v) / aspect(largest) - 1.0).abs() < 0.02)
            .min_by_key(|v| (v.width - 800).abs())?;
        let focal = item.focal_point.as_ref();
        Some(Self {
            media_id: item.media_id.clone(),
            filename: item.filename.clone(),
            image_url: image.url.clone(),
            focal_left: format!("{:.1}", focal.map_or(0.5, |f| f.x) * 100.0),
            focal_top: format!("{:.1}", focal.map_or(0.5, |f| f.y) * 100.0),
            focal_source: focal.map_or_else(|| "not yet found".to_owned(), |f| f.source.clone()),
            outputs: item
                .outputs
                .iter()
                .filter(|o| o.profile_id == profile)
                .map(PreviewOutput::from)
                .collect(),
        })
    }
}

/// A listing's photos rendered to the profile.
pub(super) struct Preview {
    pub listing_number: String,
    pub photos: Vec<PreviewPhoto>,
    /// Photos of the listing beyond [`PREVIEW_PHOTOS`].
    pub more: usize,
    /// Outputs still rendering (the page looks again while any are).
    pub pending: usize,
    /// The photos' ids as a JSON array, for the ZIP.
    pub file_ids_json: String,
    /// A name for the ZIP.
    pub archive_name: String,
}

#[derive(Template)]
#[template(path = "portal/delivery_profile.html")]
struct ProfilePage {
    chrome: Chrome,
    profile: ProfileRow,
    listing: String,
    preview: Option<Preview>,
    /// Why no preview shows for the listing asked for.
    preview_problem: String,
}

/// `GET /settings/delivery-profiles/{profile_id}?listing=…`.
pub(crate) async fn profile_page(
    State(state): State<AppState>,
    portal: PortalSession,
    Path(profile_id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let chrome = portal.chrome(&state, "profiles");
    let not_found = || {
        problem(
            StatusCode::NOT_FOUND,
            "No such delivery profile",
            "This environment has no delivery profile with this id. Go back to the delivery profiles page and pick one from the list (check the Live/Sandbox switch).",
        )
    };
    if !chrome.is_admin {
        return not_found();
    }
    let Some(id) = DeliveryProfileId::parse(&profile_id) else {
        return not_found();
    };
    let tenant = portal.tenant();
    let store = state.store();
    let profile = match store.media().profile(&tenant, &id).await {
        Ok(profile) => profile,
        Err(storage::StorageError::NotFound(_)) => return not_found(),
        Err(err) => return unavailable(&err),
    };
    let listing = query_value(query.as_deref(), "listing")
        .map(|number| number.trim().to_uppercase())
        .unwrap_or_default();
    let (preview, preview_problem) = if listing.is_empty() {
        (None, String::new())
    } else {
        match preview(&state, &tenant, &profile, &listing).await {
            Ok(Ok(preview)) => (Some(preview), String::new()),
            Ok(Err(problem)) => (None, problem),
            Err(response) => return response,
        }
    };
    page(
        StatusCode::OK,
        &ProfilePage {
            chrome,
            profile: ProfileRow::from(&profile),
            listing,
            preview,
            preview_problem,
        },
    )
}

/// The preview of `listing`'s photos, or what a person should do instead.
async fn preview(
    state: &AppState,
    tenant: &storage::Tenant,
    profile: &DeliveryProfile,
    listing_number: &str,
) -> Result<Result<Preview, String>, Response> {
    let store = state.store();
    let listing = match store.listings().get(tenant, listing_number).await {
        Ok(listing) => listing,
        Err(storage::StorageError::NotFound(_)) => {
            return Ok(Err(format!(
                "This environment has no listing {listing_number}. Check the number (MA-1234567) and the Live/Sandbox switch."
            )));
        }
        Err(err) => return Err(unavailable(&err)),
    };
    let items = match store.media().listing_items(tenant, &listing.id).await {
        Ok(items) => items,
        Err(err) => return Err(unavailable(&err)),
    };
    // The listing's photos with outputs of the profile, chosen on the stored
    // items: only the ones shown get signed download URLs.
    let rendered: Vec<storage::media::MediaItem> = items
        .into_iter()
        .filter(|item| item.status == storage::media::MediaStatus::Ready)
        .filter(|item| !item.variants.is_empty())
        .filter(|item| item.outputs.iter().any(|o| o.profile_id == profile.id))
        .collect();
    if rendered.is_empty() {
        return Ok(Err(if profile.active {
            format!(
                "Listing {listing_number} has no processed photos yet. Upload its photos (Upload media), then look again."
            )
        } else {
            "This profile is paused, so no photo is rendered to it. Resume it above, then look again."
                .to_owned()
        }));
    }
    let more = rendered.len().saturating_sub(PREVIEW_PHOTOS);
    // One ZIP packs at most the archive's limit of items.
    let file_ids: Vec<&str> = rendered
        .iter()
        .take(MAX_ARCHIVE_FILES)
        .map(|item| item.id.as_str())
        .collect();
    let file_ids_json = serde_json::to_string(&file_ids).unwrap_or_default();
    let shown = &rendered[..rendered.len().min(PREVIEW_PHOTOS)];
    let media = match media_out(state, tenant, shown).await {
        Ok(media) => media,
        Err(err) => return Err(unavailable(&err)),
    };
    let profile_id = profile.id.to_string();
    let photos: Vec<PreviewPhoto> = media
        .iter()
        .filter_map(|item| PreviewPhoto::of(item, &profile_id))
        .collect();
    let pending = photos
        .iter()
        .flat_map(|photo| &photo.outputs)
        .filter(|output| !output.ready && !output.failed)
        .count();
    let archive_name: String = format!("{} {}", listing.listing_number, profile.name)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " ._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    Ok(Ok(Preview {
        listing_number: listing.listing_number.clone(),
        photos,
        more,
        pending,
        file_ids_json,
        archive_name,
    }))
}
