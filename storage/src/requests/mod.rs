//! What the API keeps about the requests it serves: idempotent outcomes
//! (`idempotency`), usage counts per agency and route (`usage`), and the
//! calls of deprecated routes (`deprecations`).

pub mod deprecations;
pub mod idempotency;
pub mod usage;
