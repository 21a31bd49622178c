//! Webhooks: the event catalog, endpoint registration and management,
//! delivery history, replay and test fire. Each has its own file; the wire
//! types they share are in `wire`, and the rules an endpoint's fields obey
//! (shared with `api admin webhook-endpoints`) in [`endpoint_rules`].

pub(crate) mod catalog;
pub(crate) mod deliveries;
pub(crate) mod endpoint_actions;
pub mod endpoint_rules;
pub(crate) mod endpoints;
pub(crate) mod listen;
mod on_demand;
pub(crate) mod recover;
pub(crate) mod replay;
pub(crate) mod test_fire;
pub(crate) mod wire;

pub use catalog::{CatalogEntryOut, CatalogOut};
pub use endpoints::{EndpointIn, EndpointPatch};
pub use listen::{TriggerIn, TriggerOut};
pub use recover::{RecoverIn, RecoveryOut};
pub use test_fire::{TestFireOut, verdict};
pub use wire::{AttemptOut, DeliveryOut, EndpointOut, EndpointWithSecretOut, PageQuery};
