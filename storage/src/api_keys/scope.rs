//! What a key permits: the specification's scopes.

/// What a key permits: the six scopes of the specification, and
/// `webhooks:write` for managing webhook endpoints (which the specification
/// names routes for but no scope), and `delivery_profiles:read` and
/// `delivery_profiles:write` for the agency's delivery profiles (ours).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Read listings and their orders.
    ListingsRead,
    /// Create listings, change status, cancel, patch sections.
    ListingsWrite,
    /// Upload media.
    MediaWrite,
    /// Read shoot availability.
    SchedulingRead,
    /// Read the agency's users.
    UsersRead,
    /// Change users' preferences (and, later, administer users).
    UsersWrite,
    /// Read the webhook event catalog, endpoints and deliveries.
    WebhooksRead,
    /// Register and manage webhook endpoints, replay deliveries, test fire.
    WebhooksWrite,
    /// Read the agency's delivery profiles and their templates.
    DeliveryProfilesRead,
    /// Create, change and delete delivery profiles.
    DeliveryProfilesWrite,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 10] = [
        Scope::ListingsRead,
        Scope::ListingsWrite,
        Scope::MediaWrite,
        Scope::SchedulingRead,
        Scope::UsersRead,
        Scope::UsersWrite,
        Scope::WebhooksRead,
        Scope::WebhooksWrite,
        Scope::DeliveryProfilesRead,
        Scope::DeliveryProfilesWrite,
    ];

    /// The scope a key gets when none is asked for.
    pub const DEFAULT: Scope = Scope::ListingsRead;

    /// The wire name (`listings:read`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::ListingsRead => "listings:read",
            Self::ListingsWrite => "listings:write",
            Self::MediaWrite => "media:write",
            Self::SchedulingRead => "scheduling:read",
            Self::UsersRead => "users:read",
            Self::UsersWrite => "users:write",
            Self::WebhooksRead => "webhooks:read",
            Self::WebhooksWrite => "webhooks:write",
            Self::DeliveryProfilesRead => "delivery_profiles:read",
            Self::DeliveryProfilesWrite => "delivery_profiles:write",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == text)
    }
}
