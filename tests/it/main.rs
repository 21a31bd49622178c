//! The integration tests: one binary, one module per area.

// Everything in this binary is test code, including the bodies that
// `backend_tests!` wraps, so unwrapping is the point, not a shortcut.
#![allow(clippy::unwrap_used)]

mod auth;
mod availability;
mod cli;
mod contract;
mod envelope;
mod house;
mod idempotency;
mod key_lifecycle;
mod listings;
mod media;
mod object_store;
mod openapi;
mod plans;
mod platform;
mod portal;
mod preferences;
mod rate_limit;
mod sandbox;
mod sessions;
mod storage;
mod support;
mod transport;
mod user_admin;
mod users;
mod versioning;
mod volume;
mod webhooks;
