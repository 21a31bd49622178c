//! The HTML pages of the public listener: the developer portal under
//! `/settings` (sign-in, keys, uploads, delivery profiles, webhooks, the
//! test console, the changelog and usage), the set-password page the
//! e-mailed link opens, the public property page and the cancel remediation
//! page. Server-rendered with askama templates (`api/templates/portal`); one
//! stylesheet and a few small scripts (`api/assets`). Every change a page
//! offers goes through the JSON API with the session cookie and its CSRF
//! token, so the portal is held to exactly the API's rules. The pages are
//! not in the OpenAPI document.

pub(crate) mod account;
pub(crate) mod chart;
pub(crate) mod console;
pub(crate) mod delivery_profiles;
pub(crate) mod keys;
pub(crate) mod public;
pub(crate) mod uploads;
pub(crate) mod usage;
pub(crate) mod webhooks;

use askama::Template;
use axum::extract::{FromRequestParts, OriginalUri};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use storage::Environment;
use storage::people::sessions::Session;

use crate::middleware::session::session_cookie;
use crate::state::AppState;

pub(crate) async fn stylesheet() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../assets/portal.css"),
    )
}

pub(crate) async fn script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/portal.js"),
    )
}

/// The upload page's script.
pub(crate) async fn uploads_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/uploads.js"),
    )
}

/// The delivery profile pages' script.
pub(crate) async fn profiles_script() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/profiles.js"),
    )
}

/// tus-js-client's browser bundle, vendored unmodified (its licence heads it).
pub(crate) async fn tus_client() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/vendor/tus.min.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            ),
        ],
        body,
    )
        .into_response()
}

/// What a page may load: its own script and stylesheet, images from here or
/// any HTTPS host (signed object-store URLs), nothing framed, forms and
/// calls only to this origin.
pub(crate) const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' https: data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// A rendered page with `status`; portal pages are never cached (they show
/// one user's data and a CSRF token).
pub(crate) fn page(status: StatusCode, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (
            status,
            [
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                (
                    header::HeaderName::from_static("x-frame-options"),
                    HeaderValue::from_static("DENY"),
                ),
                (
                    header::CONTENT_SECURITY_POLICY,
                    HeaderValue::from_static(PAGE_POLICY),
                ),
            ],
            html,
        )
            .into_response(),
        Err(err) => {
            tracing::error!(%err, "a page did not render");
            problem(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The page could not be shown. Reload it; if it keeps failing, contact support.",
            )
        }
    }
}

/// The page of a problem a person can meet, saying what to do next.
#[derive(Template)]
#[template(path = "portal/problem.html")]
struct ProblemPage<'a> {
    title: &'a str,
    message: &'a str,
}

/// A problem page with `status`.
pub(crate) fn problem(status: StatusCode, title: &str, message: &str) -> Response {
    let body = ProblemPage { title, message }
        .render()
        .unwrap_or_else(|_| message.to_owned());
    (
        status,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response()
}

/// What every portal page shows around its content: who is signed in, the
/// environment switch, the CSRF token the script sends, the navigation.
pub(crate) struct Chrome {
    /// The signed-in user's e-mail.
    pub email: String,
    /// Whether the user administers the agency (keys, webhooks, console).
    pub is_admin: bool,
    /// The session's CSRF token (a `<meta>` the script reads).
    pub csrf_token: String,
    /// `live` or `sandbox`.
    pub environment: &'static str,
    /// The page's path, for the environment switch.
    pub path: String,
    /// The navigation entry of this page.
    pub current: &'static str,
}

impl Chrome {
    /// `?environment=sandbox` in the sandbox, else nothing: what links keep.
    pub fn suffix(&self) -> &'static str {
        if self.environment == "sandbox" {
            "?environment=sandbox"
        } else {
            ""
        }
    }

    /// Whether `entry` is this page's navigation entry.
    pub fn is_current(&self, entry: &str) -> bool {
        self.current == entry
    }

    /// The navigation: (entry, label, path).
    pub fn nav(&self) -> [(&'static str, &'static str, &'static str); 8] {
        [
            ("keys", "API keys", "/settings/keys"),
            ("uploads", "Upload media", "/settings/uploads"),
            (
                "profiles",
                "Delivery profiles",
                "/settings/delivery-profiles",
            ),
            ("webhooks", "Webhooks", "/settings/webhooks"),
            ("events", "Event catalog", "/settings/events"),
            ("console", "Test console", "/settings/console"),
            ("usage", "Usage", "/settings/usage"),
            ("changelog", "Changelog", "/settings/changelog"),
        ]
    }
}

/// A signed-in portal request: the session and the environment its page
/// shows (`?environment=sandbox`, else live). Without a live session the
/// page redirects to the sign-in page, which comes back here after.
pub(crate) struct PortalSession {
    pub session: Session,
    pub environment: Environment,
    path: String,
}

impl PortalSession {
    /// The page's chrome, with `current` highlighted.
    pub fn chrome(&self, state: &AppState, current: &'static str) -> Chrome {
        Chrome {
            email: self.session.user.email.clone().unwrap_or_default(),
            is_admin: self.session.user.role.is_administrator(),
            csrf_token: state
                .store()
                .derived_keys()
                .csrf_token(self.session.id.as_str()),
            environment: self.environment.as_str(),
            path: self.path.clone(),
            current,
        }
    }

    /// The tenant the page shows.
    pub fn tenant(&self) -> storage::Tenant {
        storage::Tenant::new(self.session.user.agency_id.clone(), self.environment)
    }
}

/// The value of query parameter `name`.
pub(crate) fn query_value(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty())
}

impl FromRequestParts<AppState> for PortalSession {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let uri = parts
            .extensions
            .get::<OriginalUri>()
            .map_or_else(|| parts.uri.clone(), |original| original.0.clone());
        let path = uri.path().to_owned();
        let sign_in = || {
            let back: String =
                form_urlencoded::byte_serialize(uri.to_string().as_bytes()).collect();
            Redirect::to(&format!("/settings/sign-in?next={back}")).into_response()
        };
        let Some(token) = session_cookie(&parts.headers) else {
            return Err(sign_in());
        };
        let session = match state.store().sessions().authenticate(token).await {
            Ok(Some(session)) => session,
            Ok(None) => return Err(sign_in()),
            Err(err) => {
                tracing::error!(%err, "could not read a session");
                return Err(problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The service is busy",
                    "Your session could not be read just now. Reload the page in a few seconds.",
                ));
            }
        };
        let environment = match query_value(uri.query(), "environment").as_deref() {
            Some("sandbox") => Environment::Sandbox,
            _ => Environment::Live,
        };
        Ok(Self {
            session,
            environment,
            path,
        })
    }
}

/// The answer for a storage failure while a page is drawn.
pub(crate) fn unavailable(err: &dyn std::fmt::Display) -> Response {
    tracing::error!(%err, "a page could not read its data");
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        "The service is busy",
        "This page could not read its data just now. Reload it in a few seconds.",
    )
}

/// `2026-11-26 08:04 UTC` for an instant.
pub(crate) fn when(at: storage::Timestamp) -> String {
    chrono::DateTime::from_timestamp_micros(at.as_micros())
        .map(|at| at.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// [`when`] of an optional instant, or a dash.
pub(crate) fn when_or_dash(at: Option<storage::Timestamp>) -> String {
    at.map(when).unwrap_or_else(|| "–".to_owned())
}
