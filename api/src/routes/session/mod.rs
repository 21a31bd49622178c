//! Sessions of the in-product developer settings: signing in (`sign_in`:
//! `POST /session`, email and password → the session cookie and its CSRF
//! token), the signed-in session (`current`: `GET /session`,
//! `DELETE /session`), impersonation (`impersonation`:
//! `POST /users/{user_id}/impersonate`, `DELETE /session/impersonation`) and
//! password links (`password`: `POST /session/password-reset` e-mails one,
//! `POST /session/password` spends it to set a password and sign in).

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::middleware::guard::guarded;
use crate::middleware::query_params::known_params_only;
use crate::state::AppState;

mod current;
mod impersonation;
mod password;
mod sign_in;

pub use sign_in::{LOGIN_ATTEMPTS_PER_MINUTE, MAX_PASSWORD_BYTES, email_bucket};

pub(crate) use password::{password_link_base, send_password_link};

/// The routes of this resource.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(known_params_only(state, routes!(sign_in::login)))
        .routes(known_params_only(
            state,
            routes!(password::request_password_reset),
        ))
        .routes(known_params_only(state, routes!(password::set_password)))
        .routes(guarded(
            state,
            &current::READ_SESSION,
            routes!(current::current_session),
        ))
        .routes(guarded(
            state,
            &current::END_SESSION,
            routes!(current::logout),
        ))
        .routes(guarded(
            state,
            &impersonation::IMPERSONATE,
            routes!(impersonation::impersonate),
        ))
        .routes(guarded(
            state,
            &impersonation::IMPERSONATE,
            routes!(impersonation::end_impersonation),
        ))
}
