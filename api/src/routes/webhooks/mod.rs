//! Webhooks: the event catalog, endpoint registration and management,
//! delivery history, replay and test fire. Each has its own file; the wire
//! types they share are in `wire`, and the rules an endpoint's fields obey
//! (shared with `api admin webhook-endpoints`) in [`endpoint_rules`].

mod catalog;
mod deliveries;
mod endpoint_actions;
pub mod endpoint_rules;
mod endpoints;
mod listen;
mod on_demand;
mod recover;
mod replay;
mod test_fire;
pub(crate) mod wire;

use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub use catalog::{CatalogEntryOut, CatalogOut};
pub use endpoints::{EndpointIn, EndpointPatch};
pub use listen::{TriggerIn, TriggerOut};
pub use recover::{RecoverIn, RecoveryOut};
pub use test_fire::{TestFireOut, verdict};
pub use wire::{AttemptOut, DeliveryOut, EndpointOut, EndpointWithSecretOut, PageQuery};

/// The routes of this resource.
pub fn router(state: &AppState) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(catalog::router(state))
        .merge(endpoints::router(state))
        .merge(endpoint_actions::router(state))
        .merge(deliveries::router(state))
        .merge(replay::router(state))
        .merge(test_fire::router(state))
        .merge(recover::router(state))
        .merge(listen::router(state))
}
