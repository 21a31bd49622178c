//! Which resource a 404 is about: each has its own code in the
//! specification, and a name the message uses.

/// Which resource a 404 is about; each has its own code in the specification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// `user_not_found`.
    User,
    /// `listing_not_found`.
    Listing,
    /// `job_not_found`: no dead job with this id (ops listener).
    DeadJob,
    /// `job_not_found`: no job with this id in the state an action takes (ops listener).
    Job,
    /// `worker_not_found`: no running worker process with this id (ops listener).
    Worker,
    /// `webhook_endpoint_not_found`.
    WebhookEndpoint,
    /// `webhook_delivery_not_found`.
    WebhookDelivery,
    /// `api_key_not_found`.
    ApiKey,
    /// `agency_not_found` (platform identities naming an agency).
    Agency,
    /// `operation_not_found`.
    Operation,
    /// `media_not_found`.
    Media,
    /// `agency_owner_not_found`: an agency without its owner account.
    AgencyOwner,
    /// `session_not_found`.
    Session,
    /// `appointment_not_found`: a listing without a shoot appointment.
    Appointment,
    /// `invoice_not_found`: a listing without the invoice asked about.
    Invoice,
    /// `package_not_found`.
    Package,
    /// `upload_not_found`: no resumable upload with this id (of the caller's agency).
    Upload,
    /// `delivery_profile_not_found`.
    DeliveryProfile,
}

impl Resource {
    /// Its code and its name, read from one table.
    const fn describe(self) -> (&'static str, &'static str) {
        match self {
            Self::User => ("user_not_found", "user"),
            Self::Listing => ("listing_not_found", "listing"),
            Self::DeadJob => ("job_not_found", "dead job"),
            Self::Job => ("job_not_found", "job in a state this action takes"),
            Self::Worker => ("worker_not_found", "running worker process"),
            Self::WebhookEndpoint => ("webhook_endpoint_not_found", "webhook endpoint"),
            Self::WebhookDelivery => ("webhook_delivery_not_found", "webhook delivery"),
            Self::ApiKey => ("api_key_not_found", "API key"),
            Self::Agency => ("agency_not_found", "agency"),
            Self::Operation => ("operation_not_found", "operation"),
            Self::Media => ("media_not_found", "media item"),
            Self::AgencyOwner => ("agency_owner_not_found", "agency owner"),
            Self::Session => ("session_not_found", "session"),
            Self::Appointment => ("appointment_not_found", "appointment"),
            Self::Invoice => ("invoice_not_found", "invoice"),
            Self::Package => ("package_not_found", "package"),
            Self::Upload => ("upload_not_found", "upload"),
            Self::DeliveryProfile => ("delivery_profile_not_found", "delivery profile"),
        }
    }

    /// The 404's code, e.g. `listing_not_found`.
    pub const fn not_found_code(self) -> &'static str {
        self.describe().0
    }

    /// What the message calls it.
    pub const fn name(self) -> &'static str {
        self.describe().1
    }
}
