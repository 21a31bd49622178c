//! One writer at a time per upload kept in a file on this host's disk.
//!
//! Every request that adds bytes to such an upload writes into the upload's
//! one file, so two of them at once could write over bytes the other
//! committed, or go on writing into the original after the completion
//! linked it. A request therefore holds the upload's [`Lease`] from before
//! its first byte is written until its part is committed, and checks the
//! upload's offset again once it holds it. A request that arrives while
//! another holds the lease asks it to let go (as tusd's lock asks its
//! holder to release): the holder stops reading as if its client had hung
//! up, commits what arrived, and lets go, and the newcomer then finds the
//! offset moved (409, and the client's `HEAD` resumes from there) or the
//! same (and goes on). A silent client so never holds an upload for the
//! idle limit against its own retry.
//!
//! Uploads in a file of this host are uploads of this process (the
//! embedded profile), so the registry is the process's.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use storage::ids::UploadId;
use tokio::sync::{OwnedMutexGuard, watch};

/// The uploads being written, each with its turn and a counter that a
/// request waiting for the turn raises to ask the holder to let go.
static WRITERS: LazyLock<Mutex<HashMap<UploadId, Arc<Slot>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

struct Slot {
    turn: Arc<tokio::sync::Mutex<()>>,
    asked: watch::Sender<u64>,
}

/// The right to write an upload's file, held until dropped.
pub struct Lease {
    upload: UploadId,
    slot: Arc<Slot>,
    turn: Option<OwnedMutexGuard<()>>,
    asked: watch::Receiver<u64>,
}

/// Waits for the turn to write `upload`'s file, asking whoever holds it to
/// let go.
pub async fn take(upload: &UploadId) -> Lease {
    let slot = {
        let mut writers = WRITERS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        writers
            .entry(upload.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    turn: Arc::new(tokio::sync::Mutex::new(())),
                    asked: watch::Sender::new(0),
                })
            })
            .clone()
    };
    slot.asked.send_modify(|asked| *asked += 1);
    let turn = slot.turn.clone().lock_owned().await;
    // Seen as of now: only a request that comes later asks this one.
    let asked = slot.asked.subscribe();
    Lease {
        upload: upload.clone(),
        slot,
        turn: Some(turn),
        asked,
    }
}

impl Lease {
    /// Resolves once another request asks for the turn.
    pub async fn asked_to_let_go(&mut self) {
        if self.asked.changed().await.is_err() {
            // The sender lives as long as the slot this lease holds.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        drop(self.turn.take());
        let mut writers = WRITERS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // The registry's and this lease's: no one else waits for the turn.
        if Arc::strong_count(&self.slot) <= 2 {
            writers.remove(&self.upload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_newcomer_asks_the_holder_to_let_go_and_gets_the_turn_after_it() {
        let upload = UploadId::generate();
        let mut first = take(&upload).await;
        let waiting = tokio::spawn({
            let upload = upload.clone();
            async move { take(&upload).await }
        });
        // The holder is asked, and the newcomer waits while it holds on.
        first.asked_to_let_go().await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        let second = waiting.await.unwrap();
        drop(second);
        // The last one out leaves nothing behind.
        assert!(!WRITERS.lock().unwrap().contains_key(&upload));
    }

    #[tokio::test]
    async fn uploads_do_not_wait_for_each_other() {
        let one = take(&UploadId::generate()).await;
        // Would wait forever if one upload's turn held another's.
        let other = take(&UploadId::generate()).await;
        drop((one, other));
    }
}
