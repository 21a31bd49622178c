//! Sessions of the in-product developer settings: signing in (`sign_in`:
//! `POST /session`, email and password → the session cookie and its CSRF
//! token), the signed-in session (`current`: `GET /session`,
//! `DELETE /session`), impersonation (`impersonation`:
//! `POST /users/{user_id}/impersonate`, `DELETE /session/impersonation`) and
//! password links (`password`: `POST /session/password-reset` e-mails one,
//! `POST /session/password` spends it to set a password and sign in).

pub(crate) mod current;
pub(crate) mod impersonation;
pub(crate) mod password;
pub(crate) mod sign_in;

pub use sign_in::{LOGIN_ATTEMPTS_PER_MINUTE, MAX_PASSWORD_BYTES, email_bucket};

pub(crate) use password::{password_link_base, send_password_link};
