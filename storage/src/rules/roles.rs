//! The roles of the specification, their order, and who administers an
//! agency.

/// The roles of the specification. `super_admin` and `admin` are platform roles:
/// they are never listed among an agency's people.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Platform super administrator.
    SuperAdmin,
    /// Platform administrator.
    Admin,
    /// Owner of a media agency.
    MediaAgency,
    /// Owner of a brokerage.
    Broker,
    /// Photographer.
    Photographer,
    /// Listing agent.
    Agent,
    /// Assistant to an agent or broker.
    Assistant,
    /// Read-only member.
    Viewer,
}

impl Role {
    /// Every role, in the specification's order.
    pub const ALL: [Role; 8] = [
        Role::SuperAdmin,
        Role::Admin,
        Role::MediaAgency,
        Role::Broker,
        Role::Photographer,
        Role::Agent,
        Role::Assistant,
        Role::Viewer,
    ];

    /// The wire and column name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SuperAdmin => "super_admin",
            Self::Admin => "admin",
            Self::MediaAgency => "media_agency",
            Self::Broker => "broker",
            Self::Photographer => "photographer",
            Self::Agent => "agent",
            Self::Assistant => "assistant",
            Self::Viewer => "viewer",
        }
    }

    /// Parses a wire or column name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|role| role.as_str() == text)
    }

    /// True for the platform roles `super_admin` and `admin`.
    pub const fn is_platform(self) -> bool {
        matches!(self, Self::SuperAdmin | Self::Admin)
    }

    /// True for the roles that administer an agency: the platform roles and
    /// the agency owners' (`media_agency`, `broker`).
    pub const fn is_administrator(self) -> bool {
        matches!(
            self,
            Self::SuperAdmin | Self::Admin | Self::MediaAgency | Self::Broker
        )
    }

    /// Rank in the role order, highest first: super_admin, admin,
    /// media_agency, broker, photographer, agent, assistant, viewer.
    pub const fn rank(self) -> u8 {
        match self {
            Self::SuperAdmin => 7,
            Self::Admin => 6,
            Self::MediaAgency => 5,
            Self::Broker => 4,
            Self::Photographer => 3,
            Self::Agent => 2,
            Self::Assistant => 1,
            Self::Viewer => 0,
        }
    }
}
