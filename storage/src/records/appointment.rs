//! A listing's shoot appointment as the detail read and the scheduling
//! repository show it.

use crate::Timestamp;
use crate::ids::{AppointmentId, UserId};

/// A listing's shoot.
#[derive(Clone, Debug)]
pub struct Appointment {
    /// Its id.
    pub id: AppointmentId,
    /// The listing's number.
    pub listing_number: String,
    /// When the shoot starts.
    pub scheduled_at: Timestamp,
    /// Who shoots, once assigned.
    pub photographer_id: Option<UserId>,
    /// `scheduled`, `cancelled` or `completed`.
    pub status: String,
}
