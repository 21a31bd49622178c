//! What every command starts from: the agency it acts for, checked to exist,
//! and, for commands that write events, the whole platform rather than the
//! bare store.

use platform::Platform;
use storage::Store;
use storage::ids::AgencyId;

use super::error::AdminError;
use crate::config::StorageArgs;

/// The agency `id` names, once it is known to exist: a typo fails as
/// `not_found` before anything is written.
pub(super) async fn existing_agency(store: &Store, id: &str) -> Result<AgencyId, AdminError> {
    let id = AgencyId::parse(id).ok_or_else(|| AdminError::new("not_found", "no such agency"))?;
    store.agencies().get(&id).await?;
    Ok(id)
}

/// The platform of a command that writes events: they are dispatched before
/// the command exits (the outbox sweep would otherwise pick them up).
pub(super) async fn open_platform(storage: &StorageArgs) -> Result<Platform, AdminError> {
    Ok(platform::Platform::open(storage).await?)
}
