//! `notification_email`: e-mailing a recorded notification.

use serde::{Deserialize, Serialize};
use storage::ids::NotificationId;

use super::job::Job;

/// E-mail a recorded notification to its recipient.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendNotification {
    /// The notification (`ntf_…`).
    pub notification_id: NotificationId,
}

impl Job for SendNotification {
    const KIND: &'static str = "notification_email";
    const MAX_ATTEMPTS: usize = 8;

    fn dedupe_key(&self) -> Option<String> {
        Some(format!("notification:{}", self.notification_id))
    }
}
