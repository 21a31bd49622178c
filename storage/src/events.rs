//! The event types this service emits, by their canonical names. Where the
//! specification's two type lists disagree the canonical name is variant B's
//! (`listing.section_updated`, `invoice.paid`, `scheduling.appointment.created`);
//! variant A's names are accepted as aliases where types are named on input.

use serde_json::Value;

/// The data-shape version of every event type at launch.
pub const API_VERSION: &str = "2026-05-29";

/// A type of event, by its canonical name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A listing was created.
    ListingCreated,
    /// A listing's status changed.
    ListingStatusChanged,
    /// A listing was cancelled.
    ListingCancelled,
    /// The 3D-tour or floorplan section of a listing changed.
    ListingSectionUpdated,
    /// An invoice was raised for an order.
    InvoiceCreated,
    /// An invoice was paid.
    InvoicePaid,
    /// An invoice was voided.
    InvoiceVoided,
    /// A shoot was scheduled.
    AppointmentCreated,
    /// A shoot was moved.
    AppointmentRescheduled,
    /// A shoot was cancelled.
    AppointmentCancelled,
    /// A user was suspended (deactivated).
    UserDeactivated,
    /// A user's manager changed.
    UserHierarchyChanged,
    /// Every file of an upload was processed.
    MediaUploadCompleted,
}

impl EventType {
    /// Every type the service emits.
    pub const ALL: [Self; 13] = [
        Self::ListingCreated,
        Self::ListingStatusChanged,
        Self::ListingCancelled,
        Self::ListingSectionUpdated,
        Self::InvoiceCreated,
        Self::InvoicePaid,
        Self::InvoiceVoided,
        Self::AppointmentCreated,
        Self::AppointmentRescheduled,
        Self::AppointmentCancelled,
        Self::UserDeactivated,
        Self::UserHierarchyChanged,
        Self::MediaUploadCompleted,
    ];

    /// The canonical wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ListingCreated => "listing.created",
            Self::ListingStatusChanged => "listing.status_changed",
            Self::ListingCancelled => "listing.cancelled",
            Self::ListingSectionUpdated => "listing.section_updated",
            Self::InvoiceCreated => "invoice.created",
            Self::InvoicePaid => "invoice.paid",
            Self::InvoiceVoided => "invoice.voided",
            Self::AppointmentCreated => "scheduling.appointment.created",
            Self::AppointmentRescheduled => "scheduling.appointment.rescheduled",
            Self::AppointmentCancelled => "scheduling.appointment.cancelled",
            Self::UserDeactivated => "user.deactivated",
            Self::UserHierarchyChanged => "user.hierarchy_changed",
            Self::MediaUploadCompleted => "media.upload.completed",
        }
    }
}

/// An event to write to the outbox together with the change it describes.
#[derive(Clone, Debug)]
pub struct NewEvent {
    /// Its type.
    pub event_type: EventType,
    /// Its `data` object.
    pub data: Value,
}

impl NewEvent {
    /// An event of `event_type` with `data`.
    pub fn new(event_type: EventType, data: Value) -> Self {
        Self { event_type, data }
    }
}
