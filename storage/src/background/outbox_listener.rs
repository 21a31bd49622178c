//! The fast path of dispatch: the listener a store tells about events once
//! the transaction that wrote them committed.

use crate::ids::EventId;

/// Told about events once the transaction that wrote them committed: the fast
/// path of dispatch. Whatever it misses (a crash right after the commit), the
/// outbox sweep finds.
pub trait OutboxListener: Send + Sync + 'static {
    /// `event_ids` were committed, in order.
    fn events_committed(&self, event_ids: &[EventId]);
}

/// The listener a store announces committed events to, shared by its clones.
#[derive(Default)]
pub(crate) struct ListenerSlot(std::sync::RwLock<Option<std::sync::Arc<dyn OutboxListener>>>);

impl std::fmt::Debug for ListenerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ListenerSlot")
    }
}

impl ListenerSlot {
    pub(crate) fn set(&self, listener: std::sync::Arc<dyn OutboxListener>) {
        *self
            .0
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(listener);
    }

    pub(crate) fn announce(&self, event_ids: &[EventId]) {
        if event_ids.is_empty() {
            return;
        }
        let listener = self
            .0
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        if let Some(listener) = listener {
            listener.events_committed(event_ids);
        }
    }
}
