//! Pages anyone may open: a listing's canonical public page
//! (`/property/{listing_number}`, the `canonical_url` every listing read
//! gives) and the page a cancel refused outside the no-fee window points
//! to (`remediation_url`).

use askama::Template;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use storage::records::numbers::normalise_listing_number;
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
    let photos = media
        .iter()
        .filter(|item| item.status == "ready")
        .enumerate()
        .filter_map(|(index, item)| photo(item, index + 1, &listing.address))
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
