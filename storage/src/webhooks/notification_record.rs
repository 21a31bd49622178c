//! A notification to an agency's owner as stored (an endpoint disabled, a
//! password link): recorded, e-mailed when a relay is configured.

use crate::Timestamp;
use crate::ids::{AgencyId, NotificationId, UserId};

/// A notification to a user (recorded; e-mailed when a mail relay is configured).
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Notification {
    /// `ntf_…`.
    pub id: NotificationId,
    /// The agency.
    pub agency_id: AgencyId,
    /// The recipient.
    pub user_id: Option<UserId>,
    /// What it is about (`webhook_endpoint_disabled`).
    pub kind: String,
    /// Subject line.
    pub subject: String,
    /// Text.
    pub body: String,
    /// When it was raised.
    pub created_at: Timestamp,
    /// About a sandbox resource: recorded, never e-mailed.
    pub is_sandbox: bool,
}
