//! `/settings/console`: the test console. The page picks one of the
//! agency's usable keys by name, a method, a path and a body; its script
//! posts them to `POST /api/v1/agency/test-console`, which runs the request
//! through the whole application as that key.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use super::keys::keys_of;
use super::{Chrome, PortalSession, page, unavailable};
use crate::state::AppState;

pub(super) struct KeyChoice {
    pub id: String,
    pub label: String,
}

#[derive(Template)]
#[template(path = "portal/console.html")]
struct ConsolePage {
    chrome: Chrome,
    keys: Vec<KeyChoice>,
    runs_per_minute: u32,
}

/// `GET /settings/console`.
pub(crate) async fn page_handler(State(state): State<AppState>, portal: PortalSession) -> Response {
    let chrome = portal.chrome(&state, "console");
    let keys = if chrome.is_admin {
        let now = state.store().clock().now();
        match keys_of(&state, &portal).await {
            Ok(keys) => keys
                .iter()
                .filter(|key| key.check_usable(now).is_ok())
                .map(|key| KeyChoice {
                    id: key.id.to_string(),
                    label: format!("{} ({}, {})", key.name, key.hint, key.status.as_str()),
                })
                .collect(),
            Err(err) => return unavailable(&err),
        }
    } else {
        Vec::new()
    };
    page(
        StatusCode::OK,
        &ConsolePage {
            chrome,
            keys,
            runs_per_minute: crate::endpoints::RUNS_PER_MINUTE,
        },
    )
}
