//! The tenant of a repository call: an agency and an environment, taken from the
//! authenticated principal and never from the request.

use crate::ids::AgencyId;

/// Live data or the agency's isolated sandbox pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Environment {
    /// Production data, reached with `sk_live_` / `ma_live_ak_` keys.
    Live,
    /// The sandbox pool, reached with `sk_test_` / `ma_test_ak_` keys.
    Sandbox,
}

impl Environment {
    /// The value of the `is_sandbox` column.
    pub const fn is_sandbox(self) -> bool {
        matches!(self, Self::Sandbox)
    }

    /// The environment of an `is_sandbox` column value.
    pub const fn from_sandbox_flag(is_sandbox: bool) -> Self {
        if is_sandbox {
            Self::Sandbox
        } else {
            Self::Live
        }
    }

    /// `live` or `sandbox`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Sandbox => "sandbox",
        }
    }
}

/// Whose data a call may see: every agency-owned query is filtered by both parts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tenant {
    /// The agency the caller acts for.
    pub agency_id: AgencyId,
    /// Live or sandbox.
    pub environment: Environment,
}

impl Tenant {
    /// A tenant; build it from an authenticated principal or a trusted operator command.
    pub fn new(agency_id: AgencyId, environment: Environment) -> Self {
        Self {
            agency_id,
            environment,
        }
    }
}
