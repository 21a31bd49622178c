//! The event types this service emits, by their canonical names. Where the
//! specification's two type lists disagree the canonical name is variant B's
//! (`listing.section_updated`, `invoice.paid`, `scheduling.appointment.created`);
//! variant A's names are accepted as aliases where types are named on input.

use serde_json::Value;

/// The data-shape version of every event type at launch.
pub const API_VERSION: &str = "2026-05-29";

/// Declares the event types once: the enum, its wire names and [`EventType::ALL`]
/// come from the same list, so no type can be left out of `ALL` (and through
/// it, out of the catalog's tests).
macro_rules! event_types {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// A type of event, by its canonical name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventType {
            $($(#[$doc])* $variant,)*
        }

        impl EventType {
            /// Every type the service emits.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)*];

            /// The canonical wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }
        }
    };
}

event_types! {
    /// A listing was created.
    ListingCreated => "listing.created",
    /// A listing's status changed.
    ListingStatusChanged => "listing.status_changed",
    /// A listing was cancelled.
    ListingCancelled => "listing.cancelled",
    /// The 3D-tour or floorplan section of a listing changed.
    ListingSectionUpdated => "listing.section_updated",
    /// An invoice was raised for an order.
    InvoiceCreated => "invoice.created",
    /// An invoice was paid.
    InvoicePaid => "invoice.paid",
    /// An invoice was voided.
    InvoiceVoided => "invoice.voided",
    /// A shoot was scheduled.
    AppointmentCreated => "scheduling.appointment.created",
    /// A shoot was moved.
    AppointmentRescheduled => "scheduling.appointment.rescheduled",
    /// A shoot was cancelled.
    AppointmentCancelled => "scheduling.appointment.cancelled",
    /// A user was suspended (deactivated).
    UserDeactivated => "user.deactivated",
    /// A user's manager changed.
    UserHierarchyChanged => "user.hierarchy_changed",
    /// A user joined an agency.
    UserSignedUp => "user.signed_up",
    /// An agent joined an agency.
    UserAgentCreated => "user.agent_created",
    /// Every file of an upload was processed.
    MediaUploadCompleted => "media.upload.completed",
    /// Every media item of a listing is processed and at least one is ready.
    MediaDeliveryCompleted => "media.delivery.completed",
    /// Some of a listing's media are ready while others are still processing.
    MediaDeliveryPartial => "media.delivery.partial",
    /// Every media item of a listing failed to process.
    MediaDeliveryFailed => "media.delivery.failed",
    /// One of the agency's webhook endpoints was disabled after consecutive
    /// failed deliveries.
    WebhookEndpointDisabled => "webhook.endpoint.disabled",
    /// One of the agency's webhook endpoints received a delivery again after
    /// failing five or more in a row.
    WebhookEndpointRecovered => "webhook.endpoint.recovered",
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
