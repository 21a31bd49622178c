//! The receiver rules of the specification: how far a signing time may be
//! from the local clock, and how long a nonce is remembered.

/// Largest accepted difference, either way, between the signing time and the local clock.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 300;
/// How long a nonce is remembered: one seen within this many seconds is a replay.
pub const NONCE_WINDOW_SECS: i64 = 600;
