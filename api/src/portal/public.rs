//! Pages anyone may open: a listing's canonical public page
//! (`/property/{listing_number}`, the `canonical_url` every listing read
//! gives; its photos from the agency's branded delivery profile when it
//! has one, else from the variants) and the page a cancel refused outside the no-fee window points
//! to (`remediation_url`).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use storage::media::DeliveryProfile;
use storage::records::numbers::normalise_listing_number;
use storage::rules::delivery_profiles::Fit;
use storage::rules::listing_status::ListingStatus;

use super::{page, problem, unavailable};
use crate::routes::media::downloads::{MediaOut, VariantOut, media_out};
use crate::state::AppState;

/// How long a CDN and a browser may keep a property page: well inside the
/// hour its signed image URLs work.
const PROPERTY_CACHE: &str = "public, max-age=300, s-maxage=900, stale-while-revalidate=60";

pub(super) struct Photo {
    pub webp_srcset: String,
    pub jpeg_srcset: String,
    pub src: String,
    pub width: i32,
    pub height: i32,
    pub alt: String,
}

pub(super) struct Floorplan {
    pub url: String,
    pub label: String,
}

#[derive(Template)]
#[template(path = "portal/property.html")]
struct PropertyPage {
    address: String,
    status: &'static str,
    photos: Vec<Photo>,
    tour3d_url: Option<String>,
    floorplans: Vec<Floorplan>,
    canonical_url: String,
}

fn srcset(variants: &[&VariantOut]) -> String {
    variants
        .iter()
        .map(|variant| format!("{} {}w", variant.url, variant.width))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The agency's branded set: its first active delivery profile (in
/// creation order) that lays a watermark on any output.
fn branded_profile(profiles: Vec<DeliveryProfile>) -> Option<DeliveryProfile> {
    profiles
        .into_iter()
        .find(|profile| profile.outputs.iter().any(|o| o.watermark.is_some()))
}

/// A photo's `<picture>` from the branded set: its ready `contain` outputs
/// (the photo whole, so one `srcset` holds sizes of one aspect), WebP first,
/// JPEG as fallback. `None` while they are not rendered: the variants serve.
fn branded_photo(
    item: &MediaOut,
    profile: &DeliveryProfile,
    number: usize,
    address: &str,
) -> Option<Photo> {
    let whole: Vec<&str> = profile
        .outputs
        .iter()
        .filter(|o| o.fit == Fit::Contain)
        .map(|o| o.name.as_str())
        .collect();
    let mut ready: Vec<(&str, &str, i32, i32)> = item
        .outputs
        .iter()
        .filter(|o| o.profile_id == profile.id.as_str() && whole.contains(&o.name.as_str()))
        .filter_map(|o| Some((o.format.as_str(), o.url.as_deref()?, o.width?, o.height?)))
        .collect();
    ready.sort_by_key(|(_, _, width, _)| *width);
    let set = |format: &str| {
        ready
            .iter()
            .filter(|(f, ..)| *f == format)
            .map(|(_, url, width, _)| format!("{url} {width}w"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let fallback = ready
        .iter()
        .rev()
        .find(|(f, ..)| *f == "jpeg")
        .or_else(|| ready.iter().rev().find(|(f, ..)| *f == "webp"))?;
    Some(Photo {
        webp_srcset: set("webp"),
        jpeg_srcset: set("jpeg"),
        src: fallback.1.to_owned(),
        width: fallback.2,
        height: fallback.3,
        alt: format!("Photo {number} of {address}"),
    })
}

/// A delivered photo's `<picture>`: WebP variants first, JPEG as fallback
/// (none for an item without JPEG variants: a video, a PDF).
fn photo(item: &MediaOut, number: usize, address: &str) -> Option<Photo> {
    let mut jpeg: Vec<&VariantOut> = item
        .variants
        .iter()
        .filter(|v| v.format == "jpeg")
        .collect();
    let mut webp: Vec<&VariantOut> = item
        .variants
        .iter()
        .filter(|v| v.format == "webp")
        .collect();
    jpeg.sort_by_key(|v| v.width);
    webp.sort_by_key(|v| v.width);
    // The fallback `src` is the web variant, else the smallest JPEG.
    let fallback = jpeg
        .iter()
        .find(|v| v.name == "web")
        .or_else(|| jpeg.first())
        .copied()?;
    Some(Photo {
        webp_srcset: srcset(&webp),
        jpeg_srcset: srcset(&jpeg),
        src: fallback.url.clone(),
        width: fallback.width,
        height: fallback.height,
        alt: format!("Photo {number} of {address}"),
    })
}

/// `GET /property/{listing_number}`: only what an agency shows the public
/// (address, status, delivered photos, the 3D tour and floorplans); no ids,
/// no people. Sandbox and cancelled listings are not found.
pub(crate) async fn property_page(
    State(state): State<AppState>,
    Path(listing_number): Path<String>,
) -> Response {
    let not_found = || {
        problem(
            StatusCode::NOT_FOUND,
            "Property not found",
            "There is no public page at this address. Check the link with the agency that sent it.",
        )
    };
    if listing_number.len() > 32 {
        return not_found();
    }
    let store = state.store();
    let listing = match store.listings().public(&listing_number).await {
        Ok(Some(listing)) if listing.status != ListingStatus::Cancelled => listing,
        Ok(_) => return not_found(),
        Err(err) => return unavailable(&err),
    };
    let tenant = storage::Tenant::new(listing.agency_id.clone(), listing.environment);
    let items = match store.media().listing_items(&tenant, &listing.id).await {
        Ok(items) => items,
        Err(err) => return unavailable(&err),
    };
    let media = match media_out(&state, &tenant, &items).await {
        Ok(media) => media,
        Err(err) => return unavailable(&err),
    };
    let branded = match store.media().active_profiles(&tenant).await {
        Ok(profiles) => branded_profile(profiles),
        Err(err) => return unavailable(&err),
    };
    let photos = media
        .iter()
        .filter(|item| item.status == "ready")
        .enumerate()
        .filter_map(|(index, item)| {
            branded
                .as_ref()
                .and_then(|profile| branded_photo(item, profile, index + 1, &listing.address))
                .or_else(|| photo(item, index + 1, &listing.address))
        })
        .collect();
    let number = normalise_listing_number(&listing_number);
    let template = PropertyPage {
        address: listing.address.clone(),
        status: listing.status.display(),
        photos,
        tour3d_url: listing.tour3d_url.clone(),
        floorplans: listing
            .floorplan
            .iter()
            .map(|file| Floorplan {
                url: file.url.clone(),
                label: file.original_label.clone(),
            })
            .collect(),
        canonical_url: crate::routes::listings::wire::canonical_url(state.urls(), &number),
    };
    let mut response = page(StatusCode::OK, &template);
    if response.status() == StatusCode::OK {
        response.headers_mut().insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(PROPERTY_CACHE),
        );
        // Agencies may embed it; its images may come from any object store.
        response.headers_mut().remove("x-frame-options");
        response.headers_mut().insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src * data:; script-src 'none'; base-uri 'none'; object-src 'none'",
            ),
        );
    }
    response
}

#[derive(Template)]
#[template(path = "portal/cancel_help.html")]
struct CancelHelpPage {
    listing_number: String,
}

/// `GET /dashboard/listings/{listing_number}/cancel`: why the cancel was
/// refused and what to do (the page names no listing data: anyone may open it).
pub(crate) async fn cancel_help_page(Path(listing_number): Path<String>) -> Response {
    let listing_number: String = normalise_listing_number(&listing_number)
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect();
    let mut response = page(StatusCode::OK, &CancelHelpPage { listing_number });
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    response.into_response()
}
